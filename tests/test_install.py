"""`nm-zones install` for a pip install: what it writes and keeps, the code it lets root run,
the hook failing closed, root's command's exit status, and an uninstall that leaves no rule."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys

import pytest

from nm_zones.config.load import load
from nm_zones.doors.install import hook_text, stable_interpreter
from nm_zones.paths import SHIPPED_DIR, Paths
from tests.harness.lab import PYTHON, REPO, base_env
from tests.harness.nm_sandbox import NMSandbox
from tests.harness.syslog import run_with_syslog

HOOK = "etc/NetworkManager/dispatcher.d/50-nm-zones"
COMMAND = "usr/local/sbin/nm-zones"
UNIT = "etc/systemd/system/nm-zones.service"
CONFIG = "etc/nm-zones"
MAP = f"{CONFIG}/connections-map.yaml"
EVERYTHING = [
    HOOK,
    "etc/NetworkManager/dispatcher.d/pre-up.d/50-nm-zones",
    "etc/NetworkManager/dispatcher.d/pre-down.d/50-nm-zones",
    COMMAND,
    f"{CONFIG}/zones.d",
    f"{CONFIG}/services.d",
    MAP,
    UNIT,
    # for `nm-zones serve`
    "etc/dbus-1/system.d/nm-zones.conf",
    "usr/share/polkit-1/actions/org.nm-zones.policy",
    "etc/systemd/system/nm-zones-serve.service",
]
NEEDS_ROOT = os.geteuid() != 0


def install(root, *extra: str, python: str = PYTHON, env: dict | None = None):
    return subprocess.run(
        [python, "-m", "nm_zones", "install", "--root", str(root), *extra],
        env=env or base_env(),
        capture_output=True,
        text=True,
        cwd="/",  # `python -m` puts the current folder first on sys.path
    )


def read(path) -> str:
    with open(path, encoding="utf-8") as stream:
        return stream.read()


def written(out: str) -> set[str]:
    return {line.split()[1].rstrip("/") for line in out.splitlines() if line.startswith("wrote ")}


def shipped_map():
    return load(Paths(config="/nonexistent")).config.connections_map


# -- what install writes, and keeps --------------------------------------------------------


def test_install_says_what_it_wrote_and_what_comes_next(tmp_path):
    root = tmp_path / "image"
    result = install(root)
    assert result.returncode == 0, result.stderr
    assert written(result.stdout) == {str(root / path) for path in EVERYTHING}
    for step in ("systemctl daemon-reload", "systemctl enable nm-zones.service", "nm-zones enable"):
        assert step in result.stdout
    info = os.stat(root / HOOK)
    assert stat.S_IMODE(info.st_mode) == 0o755 and info.st_uid == os.geteuid()
    assert not os.path.lexists(root / "etc/systemd/system/NetworkManager.service.wants")
    # the map is the shipped one, commented out: the shipped values keep following upgrades
    text = read(root / MAP)
    assert all(line.startswith("#") for line in text.splitlines())
    config = Paths(config=str(root / CONFIG))
    loaded = load(config)
    assert loaded.problems == []
    assert loaded.config.connections_map == shipped_map()
    # an admin who sets one key changes that key only
    with open(root / MAP, "a") as stream:
        stream.write("default-zone: home\n")
    cmap = load(config).config.connections_map
    assert cmap.default_zone == "home"
    assert cmap.exempt_interfaces == shipped_map().exempt_interfaces
    # a second install writes nothing, and keeps the admin's map
    again = install(root)
    assert again.returncode == 0 and written(again.stdout) == set()
    assert f"kept {root / MAP}: this machine's map" in again.stdout
    assert read(root / MAP).endswith("default-zone: home\n")


def test_install_keeps_files_it_did_not_write_and_exits_1(tmp_path):
    root = tmp_path / "image"
    admin = {
        HOOK: "#!/bin/sh\n# nm-zones: NetworkManager dispatcher hook, the admin's own\nexit 0\n",
        UNIT: "[Service]\nExecStart=/bin/true\n",
    }
    for path, text in admin.items():
        os.makedirs(os.path.dirname(root / path), exist_ok=True)
        (root / path).write_text(text)
    result = install(root)
    assert result.returncode == 1
    for path, text in admin.items():
        assert read(root / path) == text
        assert f"kept {root / path}: not written by nm-zones install" in result.stdout
    assert str(root / COMMAND) in written(result.stdout)
    # a file install wrote and an admin edited since is the admin's now
    with open(root / COMMAND, "a") as stream:
        stream.write("# the admin's change\n")
    result = install(root)
    assert result.returncode == 1 and f"kept {root / COMMAND}" in result.stdout
    assert read(root / COMMAND).endswith("# the admin's change\n")
    # uninstall (not of the running system: --root) removes only install's own files
    result = install(root, "--uninstall")
    assert result.returncode == 1
    assert "kernel" not in result.stdout  # an image's files only, not this machine's rules
    for path in (*admin, COMMAND):
        assert os.path.exists(root / path) and f"kept {root / path}" in result.stdout
    for path in (MAP, f"{CONFIG}/zones.d", CONFIG):
        assert not os.path.lexists(root / path)
        assert f"removed {root / path}" in result.stdout


def test_uninstall_of_a_clean_install_removes_everything_it_wrote(tmp_path):
    root = tmp_path / "image"
    install(root)
    result = install(root, "--uninstall")
    assert result.returncode == 0, result.stdout + result.stderr
    for path in EVERYTHING:
        assert not os.path.lexists(root / path), path
    assert not os.path.lexists(root / CONFIG)


def test_version():
    result = subprocess.run(
        [PYTHON, "-m", "nm_zones", "--version"], env=base_env(), capture_output=True, text=True
    )
    with open(os.path.join(REPO, "setup.cfg")) as stream:
        version = next(line for line in stream if line.startswith("version")).split("=")[1]
    assert result.returncode == 0 and result.stdout == f"nm-zones {version.strip()}\n"


# -- the code root runs --------------------------------------------------------------------


def checkout_copy(tmp_path) -> str:
    """nm_zones copied into a folder of its own (symlinked data copied as files)."""
    folder = str(tmp_path / "checkout")
    shutil.copytree(SHIPPED_DIR, os.path.join(folder, "nm_zones"))
    return folder


@pytest.mark.skipif(NEEDS_ROOT, reason="needs root (chown)")
@pytest.mark.parametrize("how", ["owned by a user", "group-writable"])
def test_install_refuses_code_root_does_not_control(tmp_path, how):
    folder = checkout_copy(tmp_path)
    package = os.path.join(folder, "nm_zones")
    if how == "owned by a user":
        for where, dirs, files in os.walk(folder):
            for name in [where, *(os.path.join(where, n) for n in dirs + files)]:
                os.lchown(name, 65534, 65534)
        why = f"{folder} is owned by uid 65534, not root"
    else:
        os.chmod(package, 0o775)
        why = f"{package} is writable by group or others"
    root = tmp_path / "image"
    result = install(root, env=base_env(PYTHONPATH=folder))
    assert result.returncode == 1
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1
    assert "refusing to install" in result.stderr and why in result.stderr
    assert len(result.stderr) < 600, result.stderr  # the top-most paths, and a count
    if how == "owned by a user":
        assert re.search(r"; and \d+ more below or beside them$", result.stderr.strip())
    assert not os.path.exists(root)


def test_stable_interpreter(tmp_path):
    base = tmp_path / "pythons" / "3.11" / "bin"
    venv = tmp_path / "venv" / "bin"
    for folder in (base, venv):
        folder.mkdir(parents=True)
    (base / "python3.11").write_text("")
    (base / "python3").symlink_to("python3.11")
    (venv / "python").symlink_to(base / "python3.11")
    (venv / "python3").symlink_to("python")
    # a venv's own python3, not the version folder it resolves to
    assert stable_interpreter(str(venv / "python"), in_venv=True) == str(venv / "python3")
    # python3 over python3.11
    assert stable_interpreter(str(base / "python3.11"), in_venv=False) == str(base / "python3")
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "python3.11").write_text("")
    assert stable_interpreter(str(alone / "python3.11"), in_venv=False) == str(
        alone / "python3.11"
    )
    if os.path.realpath("/usr/bin/python3") == "/usr/bin/python3.11":
        assert stable_interpreter("/usr/bin/python3.11", in_venv=False) == "/usr/bin/python3"


def rules(lab) -> list[str]:
    """Both families' rules, without counters."""
    text = lab.save("ipv4") + lab.save("ipv6")
    return [line.split(" [")[0] for line in text.splitlines() if not line.startswith("#")]


@pytest.mark.parametrize("gone", ["venv", "package", "package broken", "python upgraded"])
def test_hook_fails_closed_when_its_python_or_package_is_gone(lab, tmp_path, gone):
    folder = checkout_copy(tmp_path)
    venv = str(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    import iptc
    import yaml

    dependencies = [os.path.dirname(os.path.dirname(m.__file__)) for m in (iptc, yaml)]
    env = base_env(PYTHONPATH=":".join([folder, *dependencies]))
    root = tmp_path / "image"
    result = install(root, python=os.path.join(venv, "bin", "python"), env=env)
    assert result.returncode == 0, result.stderr
    hook = str(root / HOOK)
    assert f"python={venv}/bin/python3\n" in read(hook)  # the venv's link, as it is
    link = lab.add_link()
    # NetworkManager passes no PYTHONPATH: the hook finds everything by what install wrote
    bare = {key: value for key, value in lab.env().items() if key != "PYTHONPATH"}
    launched = subprocess.run(["ip", "netns", "exec", lab.zoned, hook, link.name, "up"], env=bare)
    assert launched.returncode == 0  # the launcher works
    assert f"-A nmz-input -i {link.name} -j nmz-if-{link.name}-in" in lab.save("ipv6")
    lab.nm_zones("remove", link.name)
    before = rules(lab)
    assert "-A nmz-input -j nmz-default-in" in before  # the catch-all, both families
    if gone == "venv":
        shutil.rmtree(venv)
        named = f"interpreter {venv}/bin/python3 is gone"
    elif gone == "package":
        shutil.rmtree(folder)
        named = f"package nm_zones is gone from {folder}"
    elif gone == "package broken":
        with open(os.path.join(folder, "nm_zones", "doors/event.py"), "w") as stream:
            stream.write("")
        named = f"cannot import nm-zones with {venv}/bin/python3 (cannot import name 'main'"
    else:  # the stable path now leads to another Python version
        with open(hook, "w") as stream:
            stream.write(hook_text(f"{venv}/bin/python3", [folder, *dependencies], (3, 10)))
        running = "{}.{}".format(*sys.version_info[:2])
        named = f"{venv}/bin/python3 is Python {running} now, nm-zones was installed for 3.10"
    result, records = run_with_syslog(
        ["ip", "netns", "exec", lab.zoned, hook, link.name, "up"], bare, str(tmp_path)
    )
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("nm-zones: hook: ") and named in result.stderr
    assert "firewall rules left as they are" in result.stderr
    assert len(records) == 1 and "nm-zones" in records[0] and named in records[0], records
    assert rules(lab) == before  # nothing changed: the catch-all stays


# -- root's command ------------------------------------------------------------------------


def test_installed_command_returns_each_documented_exit_status(lab, tmp_path):
    root = tmp_path / "image"
    assert install(root).returncode == 0
    link = lab.add_link()

    def status(*args: str) -> int:
        return lab.run(lab.zoned, [str(root / COMMAND), *args], check=False).returncode

    assert status("show", "nosuch") == 2
    assert status("apply", link.name, "nosuchzone") == 2
    assert status("apply", link.name, "home") == 0
    zones = os.path.join(lab.config_dir, "zones.d")
    os.makedirs(zones)
    with open(os.path.join(zones, "home.yaml"), "w") as stream:
        stream.write("services: [ssh\n")
    assert status("check") == 2
    assert status("reload") == 1
    assert status("status") == 1  # degraded: home cannot be loaded
    os.unlink(os.path.join(zones, "home.yaml"))
    assert status("check") == 0
    assert status("reload") == 0
    assert status("status") == 0


# -- uninstall on a running system -----------------------------------------------------------


@pytest.mark.skipif(
    NEEDS_ROOT or not shutil.which("NetworkManager"), reason="needs root and NetworkManager"
)
def test_uninstall_removes_every_rule_first_then_the_files(tmp_path):
    with NMSandbox(str(tmp_path / "sandbox")) as nm:
        nm.install_hook()
        link = nm.add_veth()
        nm.add_connection(link, "lan", "connection.zone", "block")
        nm.nmcli("connection", "up", "lan")
        nm.wait_zone(link.name, "block")
        assert "nmz-if-ethz0" in nm.save("ipv4") and "nmz-if-ethz0" in nm.save("ipv6")
        out = nm.nm_zones("install", "--uninstall").stdout.splitlines()
        assert "nmz" not in nm.save("ipv4") + nm.save("ipv6")
        kernel = out.index("removed every nm-zones rule from the kernel (IPv4 and IPv6)")
        assert kernel < out.index(f"removed /{HOOK}")
        # the profile the interface was bound with is named, as on every removal
        assert "ethz0: block -> - (nm-zones uninstalled) connection 'lan'" in out[:kernel]
        assert f"removed /{CONFIG}/" in out and f"removed /{COMMAND}" in out
        # no disabled flag, no state left behind
        assert nm.sh(f"ls -d /{CONFIG} /run/nm-zones", check=False).stdout == ""
        nm.nmcli("connection", "down", "lan")
        nm.nmcli("connection", "up", "lan")
        nm.wait_reachable(link)
        assert "nmz" not in nm.save("ipv4") + nm.save("ipv6")


# -- the README's way in ---------------------------------------------------------------------


def test_the_readme_commands_run_in_the_checkouts_venv_and_ci_runs_the_test_command():
    readme = read(os.path.join(REPO, "README.md"))
    demo, tests = [line for line in readme.splitlines() if line.startswith("bash .ci/setup && ")]
    assert demo.endswith(" .venv/bin/python3 demo/demo.py")
    assert tests.endswith(" .venv/bin/python3 -m pytest -q")
    assert tests in read(os.path.join(REPO, ".ci", "run")).splitlines()
    setup = read(os.path.join(REPO, ".ci", "setup")) + read(os.path.join(REPO, ".ci", "venv"))
    assert "python3 -m venv --system-site-packages .venv" in setup
    assert not re.search(r"^\s*python3 -m pip", setup, re.MULTILINE)  # PEP 668 refuses it
    assert ".venv/" in read(os.path.join(REPO, ".gitignore")).splitlines()


def test_the_readme_and_the_handbook_name_no_file_outside_the_repository():
    names = set()
    for _folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        names.update(files)
    docs = os.path.join(REPO, "docs")
    pages = [os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md")]
    for page in [os.path.join(REPO, "README.md"), *pages]:
        mentioned = set(re.findall(r"[\w.-]+\.(?:md|txt|rst)\b", read(page)))
        assert mentioned <= names, (page, mentioned - names)
