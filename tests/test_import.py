"""Importing python-iptables never costs the firewall: the tuned import works with Debian's own
python3-iptables and interpreter and with libxtables-dev's unversioned links present; whatever
breaks it falls back to the plain import; a python-iptables that cannot be imported at all is
one line, a syslog record and exit 1, and the rules already in the kernel stay. Real rules in a
namespace, real packets."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess

import pytest

from tests.harness.lab import HARNESS, PYTHON, REPO

HOOK = os.path.join(REPO, "dispatcher.d", "50-nm-zones")
DEBIAN_PYTHON = "/usr/bin/python3"
DEBIAN_SITE = "/usr/lib/python3/dist-packages"
LIBRARIES = ("xtables", "ip4tc", "ip6tc")

# What a process gets from nm_zones.backends.iptables.iptc_env: which python-iptables, whether the
# tuned import did it (its find_library is nm-zones'), the libxtables it loaded, and a rule built
# and read.
IMPORT_REPORT = """
import json, sys
from nm_zones.backends.iptables.iptc_env import import_iptc
iptc = import_iptc()
util = sys.modules["iptc.util"]
rule = iptc.Rule6()
rule.protocol = "tcp"
match = rule.create_match("tcp")
match.dport = "22"
print(json.dumps({
    "version": iptc.version.__version__,
    "tuned": util.find_library.__module__ == "nm_zones.backends.iptables.iptc_env",
    "libxtables": iptc.xtables._lib_xtables._name,
    "parsed": match.get_all_parameters(),
    "real_modules": [type(m) is type(sys) for m in (iptc.ip4tc.re, iptc.ip4tc.socket)],
    "stand_ins_left": [n for n, m in sys.modules.items() if type(m) is not type(sys)],
}))
"""


def debian_python_iptables() -> None:
    """Skip, saying why, unless Debian's interpreter, python3-iptables and python3-yaml are
    installed (.ci/setup installs them)."""
    needed = (
        ("python3", DEBIAN_PYTHON),
        ("python3-iptables", os.path.join(DEBIAN_SITE, "iptc", "version.py")),
        ("python3-yaml", os.path.join(DEBIAN_SITE, "yaml", "__init__.py")),
    )
    for package, path in needed:
        if not os.path.exists(path):
            pytest.skip(f"Debian's {package} is not installed ({path} missing; .ci/setup has it)")


def installed_scripts(python: str, folder: str) -> tuple[str, str]:
    """The command and the hook as `nm-zones install` writes them when run by `python`
    (`#!python -S`, the package folders that interpreter finds written in)."""
    command, hook = os.path.join(folder, "nm-zones"), os.path.join(folder, "50-nm-zones")
    code = (
        "import sys\nfrom nm_zones.doors.install import command_text, hook_text, package_paths,"
        " stable_interpreter\npython, folders = stable_interpreter(), package_paths()\n"
        "open(sys.argv[1], 'w').write(command_text(python, folders))\n"
        "open(sys.argv[2], 'w').write(hook_text(python, folders))"
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": REPO, "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([python, "-c", code, command, hook], env=env, check=True, cwd=REPO)
    for path in (command, hook):
        os.chmod(path, 0o755)
    return command, hook


def package_folders(python: str) -> str:
    """PYTHONPATH for `python -S`: the worktree and the folders with iptc and yaml."""
    code = "from nm_zones.doors.install import package_paths; print(':'.join(package_paths()))"
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": REPO}
    return subprocess.run(
        [python, "-c", code], env=env, check=True, capture_output=True, text=True, cwd=REPO
    ).stdout.strip()


def import_report(lab, python: str, enter: list[str] | None = None, pythonpath: str = ""):
    argv = [python, "-S", "-c", IMPORT_REPORT]
    pythonpath = pythonpath or package_folders(python)
    if enter is None:
        result = lab.run(lab.zoned, argv, PYTHONPATH=pythonpath)
    else:
        result = subprocess.run(
            [*enter, *argv],
            capture_output=True,
            text=True,
            env=lab.env(PYTHONPATH=pythonpath),
            cwd=REPO,
        )
        assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def interface_rules(lab, interface: str, family: str) -> list[str]:
    prefix = f"-A nmz-if-{interface}-in "
    return [line for line in lab.save(family, "filter").splitlines() if line.startswith(prefix)]


def probe_ssh_and_8080(lab, link) -> list[str]:
    return lab.probe(
        [
            {"kind": "tcp", "address": address, "port": port}
            for address in (link.ipv4, link.ipv6)
            for port in (22, 8080)
        ]
    )


FILTERED = ["accepted", "rejected", "accepted", "rejected"]  # ssh open, 8080 refused


# -- pure parts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "names, expected",
    [
        (["libxtables.so", "libxtables.so.12", "libxtables.so.12.7.0"], "libxtables.so.12"),
        (["libxtables.so", "libxtables.so.12.7.0"], "libxtables.so.12.7.0"),
        (["libxtables.so"], None),
        (["libxtables.so.10", "libxtables.so.12", "libxtables.so.dev"], "libxtables.so.12"),
        (["libxtables.so.12", "libxtables.so.12.7.0", "libxt_tcp.so"], "libxtables.so.12"),
    ],
)
def test_only_versioned_library_names_are_chosen(names, expected):
    from nm_zones.backends.iptables.iptc_env import versioned_library

    assert versioned_library(names, "xtables") == expected


def test_lazy_re_stands_in_for_every_use():
    import re as real_re

    from nm_zones.backends.iptables.iptc_env import LazyRe

    lazy = LazyRe("re")
    pattern = lazy.compile(r"(\w+)=(\d+)", real_re.I)
    assert lazy.findall(pattern, "A=1 b=2") == [("A", "1"), ("b", "2")]
    assert pattern.sub(r"\2", "x=7") == "7" and pattern.flags & real_re.I
    assert lazy.sub(pattern=pattern, repl="-", string="a=1") == "-"
    with pytest.raises(lazy.error):
        lazy.compile("(").match("x")


# -- Debian's python3-iptables 1.0.1 under Debian's /usr/bin/python3 -----------------------


def test_debian_python_iptables_applies_zones_for_real(lab, tmp_path):
    debian_python_iptables()
    command, hook = installed_scripts(DEBIAN_PYTHON, str(tmp_path))
    with open(command) as stream:
        assert DEBIAN_SITE in stream.read()  # what a Debian install writes in
    report = import_report(lab, DEBIAN_PYTHON, pythonpath=f"{REPO}:{DEBIAN_SITE}")
    assert report["tuned"], f"the tuned import fell back to the plain one: {report}"
    assert report["parsed"] == {"dport": ["22"]} and report["stand_ins_left"] == []
    first, second = lab.add_link(), lab.add_link()
    lab.listen()
    # as installed: no PYTHONPATH (NetworkManager passes no environment)
    applied = lab.run(lab.zoned, [command, "apply", first.name, "home"], PYTHONPATH="")
    assert applied.stderr == "" and f"{first.name}: - -> home" in applied.stdout
    event = lab.run(lab.zoned, [hook, second.name, "up"], PYTHONPATH="", CONNECTION_ID="x")
    assert event.stderr == ""
    for link in (first, second):
        for family in ("ipv4", "ipv6"):
            assert interface_rules(lab, link.name, family), (link.name, family)
        assert probe_ssh_and_8080(lab, link) == FILTERED


# -- libxtables-dev: unversioned libxtables.so, libip4tc.so, libip6tc.so -------------------


def library_folder() -> str:
    patterns = ("/usr/lib/*/libxtables.so.[0-9]*", "/usr/lib*/libxtables.so.[0-9]*")
    found = [path for pattern in patterns for path in glob.glob(pattern)]
    if not found:
        pytest.skip("libxtables is not installed")
    return os.path.dirname(found[0])


def with_development_links(tmp_path, namespace: str) -> list[str]:
    """A prefix that runs a command in `namespace` while the library folder holds the
    unversioned links libxtables-dev installs. When it is not installed, the links are laid
    over the real folder with an overlay mount in a private mount namespace (this machine's
    own folder never changes)."""
    folder = library_folder()
    links = tmp_path / "dev-links"
    links.mkdir()
    for short in LIBRARIES:
        if os.path.lexists(os.path.join(folder, f"lib{short}.so")):
            continue
        sonames = sorted(
            (
                os.path.basename(p)
                for p in glob.glob(os.path.join(folder, f"lib{short}.so.[0-9]*"))
                if re.fullmatch(rf"lib{short}\.so\.\d+", os.path.basename(p))
            ),
            key=lambda name: int(name.rpartition(".")[2]),
        )
        os.symlink(sonames[-1], links / f"lib{short}.so")
    if not os.listdir(links):  # libxtables-dev is installed
        return ["ip", "netns", "exec", namespace]
    script = (
        f'mount -t overlay overlay -o "lowerdir=$0:{folder}" {folder} '
        f'&& exec ip netns exec {namespace} "$@"'
    )
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(links)]


@pytest.mark.parametrize("interpreter", ["pip", "debian"])
def test_unversioned_development_links_are_never_loaded(lab, tmp_path, interpreter):
    python = PYTHON
    if interpreter == "debian":
        debian_python_iptables()
        python = DEBIAN_PYTHON
    command, _ = installed_scripts(python, str(tmp_path))
    enter = with_development_links(tmp_path, lab.zoned)
    folder = library_folder()
    shown = subprocess.run(
        [*enter, "ls", folder], capture_output=True, text=True, check=True
    ).stdout.split()
    assert {f"lib{short}.so" for short in LIBRARIES} <= set(shown)
    report = import_report(lab, python, enter)
    assert re.search(r"/libxtables\.so\.\d+$", report["libxtables"]), report
    assert report["tuned"] and report["stand_ins_left"] == [], report
    link = lab.add_link()
    lab.listen()
    result = subprocess.run(
        [*enter, command, "apply", link.name, "home"],
        capture_output=True,
        text=True,
        env=lab.env(PYTHONPATH=""),
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert interface_rules(lab, link.name, "ipv4") and interface_rules(lab, link.name, "ipv6")
    assert probe_ssh_and_8080(lab, link) == FILTERED


# -- the tuned import fails: the plain import, cleanly ----------------------------------


def test_a_failing_tuned_import_falls_back_to_the_plain_one(lab, tmp_path):
    """A python-iptables the stand-ins do not suit (its util.py needs subprocess.Popen to be
    a class) is imported the plain way, with real modules only, and filters for real."""
    spec = importlib.util.find_spec("iptc")
    site = os.path.dirname(os.path.dirname(spec.origin))
    copy = tmp_path / "iptc-copy"
    shutil.copytree(
        os.path.dirname(spec.origin), copy / "iptc", ignore=shutil.ignore_patterns("__pycache__")
    )
    with open(copy / "iptc" / "util.py", "a") as stream:
        stream.write("\nassert isinstance(Popen, type), 'Popen is not a class'\n")
    pythonpath = f"{copy}:{REPO}:{site}"
    report = import_report(lab, PYTHON, pythonpath=pythonpath)
    assert not report["tuned"] and report["real_modules"] == [True, True], report
    assert report["stand_ins_left"] == []
    assert report["parsed"] == {"dport": ["22"]}
    link = lab.add_link()
    lab.listen()
    result = lab.nm_zones("apply", link.name, "home", PYTHONPATH=pythonpath)
    assert result.stderr == ""
    assert interface_rules(lab, link.name, "ipv4") and interface_rules(lab, link.name, "ipv6")
    assert probe_ssh_and_8080(lab, link) == FILTERED


# -- python-iptables cannot be imported at all -------------------------------------------

SYSLOG_SANDBOX = os.path.join(HARNESS, "syslog_sandbox.py")


def saved_rules(lab) -> str:
    return "".join(
        re.sub(r" \[\d+:\d+\]$", "", line) + "\n"
        for family in ("ipv4", "ipv6")
        for line in lab.save(family).splitlines()
        if not line.startswith("#")
    )


def broken_python_iptables(tmp_path) -> str:
    """A python-iptables whose import fails as one whose libip4tc is gone would."""
    broken = tmp_path / "broken"
    (broken / "iptc").mkdir(parents=True)
    (broken / "iptc" / "version.py").write_text('__version__ = "9.9.9"\n')
    (broken / "iptc" / "__init__.py").write_text(
        'raise OSError("libip4tc.so.2: cannot open shared object file:\\n'
        ' No such file or directory")\n'
    )
    return str(broken)


def run_in_syslog_sandbox(lab, tmp_path, argv: list[str], pythonpath: str) -> dict:
    """Run argv in the lab's namespace with a private /dev/log: its exit status, output and
    the syslog records it sent."""
    env = lab.env(PYTHONPATH=f"{pythonpath}:{REPO}", CONNECTION_ID="x")
    sandbox = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            PYTHON,
            SYSLOG_SANDBOX,
            str(tmp_path / "dev"),
            "ip",
            "netns",
            "exec",
            lab.zoned,
            *argv,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert sandbox.returncode == 0, sandbox.stderr
    return json.loads(sandbox.stdout)


@pytest.mark.parametrize("door", ["hook up", "nm-zones apply", "nm-zones reload"])
def test_python_iptables_that_cannot_be_imported_is_one_line(lab, tmp_path, door):
    """A run that must build an entry (none are kept: a new install, a new kernel) cannot
    do without python-iptables."""
    bound, unbound = lab.add_link(), lab.add_link()
    lab.listen()
    lab.nm_zones("reload")  # hooks and the catch-all
    lab.nm_zones("apply", bound.name, "home")
    before = saved_rules(lab)
    os.unlink(os.path.join(lab.state_dir, "entries"))
    if door == "hook up":
        argv = [PYTHON, HOOK, unbound.name, "up"]
    elif door == "nm-zones apply":
        argv = [PYTHON, "-m", "nm_zones", "apply", unbound.name, "work"]
    else:  # as at boot, with a zone file changed since
        os.makedirs(os.path.join(lab.config_dir, "zones.d"), mode=0o755, exist_ok=True)
        with open(os.path.join(lab.config_dir, "zones.d", "home.yaml"), "w") as stream:
            stream.write("services: [ssh]\n")
        argv = [PYTHON, "-m", "nm_zones", "reload"]
    result = run_in_syslog_sandbox(lab, tmp_path, argv, broken_python_iptables(tmp_path))
    assert result["returncode"] == 1 and result["stdout"] == "", result
    lines = result["stderr"].splitlines()
    assert len(lines) == 1, result["stderr"]
    assert re.fullmatch(
        r"nm-zones: .*python-iptables 9\.9\.9 cannot be imported: OSError: libip4tc\.so\.2: "
        r"cannot open shared object file: No such file or directory",
        lines[0],
    ), lines
    assert [r for r in result["records"] if "python-iptables 9.9.9 cannot be imported" in r]
    assert saved_rules(lab) == before  # the catch-all and the bound interface stay
    assert probe_ssh_and_8080(lab, bound) == FILTERED
    assert probe_ssh_and_8080(lab, unbound) == FILTERED  # the catch-all: public


@pytest.mark.parametrize("door", ["hook up", "nm-zones apply"])
def test_a_run_with_every_entry_known_never_imports_python_iptables(lab, tmp_path, door):
    """Entries kept from earlier runs are committed through libiptc alone: the run puts the
    zone in place even where python-iptables cannot be imported at all."""
    link = lab.add_link()
    lab.listen()
    lab.nm_zones("reload")
    lab.nm_zones("apply", link.name, "trusted")  # builds and keeps the entries of trusted
    lab.nm_zones("apply", link.name, "public")
    assert probe_ssh_and_8080(lab, link) == FILTERED
    if door == "hook up":  # the connection's zone, as the admin's map gives it
        with open(os.path.join(lab.config_dir, "connections-map.yaml"), "w") as stream:
            stream.write("connections:\n  x: trusted\n")
        argv = [PYTHON, HOOK, link.name, "up"]
    else:
        argv = [PYTHON, "-m", "nm_zones", "apply", link.name, "trusted"]
    result = run_in_syslog_sandbox(lab, tmp_path, argv, broken_python_iptables(tmp_path))
    assert result["returncode"] == 0 and result["stderr"] == "", result
    assert interface_rules(lab, link.name, "ipv4") and interface_rules(lab, link.name, "ipv6")
    assert probe_ssh_and_8080(lab, link) == ["accepted"] * 4


def test_a_port_opened_again_for_a_while_needs_no_python_iptables(lab, tmp_path):
    """A timed allowance's rule is kept as the template of the same rule's other deadlines
    (entries.py): once a port was opened for a while, opening it again, for another while,
    commits through libiptc alone, even where python-iptables cannot be imported, and the
    port is open, in both families."""
    link = lab.add_link()
    lab.listen()
    lab.nm_zones("apply", link.name, "public")
    lab.nm_zones("allow", "8080/tcp", "--interface", link.name, "--for", "1h")
    lab.nm_zones("revoke", "8080/tcp", "--interface", link.name)
    assert probe_ssh_and_8080(lab, link) == FILTERED
    argv = [PYTHON, "-m", "nm_zones", "allow", "8080/tcp", "--interface", link.name, "--for", "2h"]
    result = run_in_syslog_sandbox(lab, tmp_path, argv, broken_python_iptables(tmp_path))
    assert result["returncode"] == 0, result
    assert probe_ssh_and_8080(lab, link) == ["accepted"] * 4
    rules = interface_rules(lab, link.name, "ipv4") + interface_rules(lab, link.name, "ipv6")
    assert sum("--dport 8080 -m time --datestop" in rule for rule in rules) == 2, rules


def test_a_first_run_without_python_iptables_gives_way_to_nftables(lab, tmp_path):
    """With no entry kept yet (a first run), python-iptables is needed at once: when it
    cannot be imported, opening the iptables backend fails, and with `backend: auto` the
    nftables backend takes over, so the interface is filtered all the same."""
    link = lab.add_link()
    lab.listen()
    with open(os.path.join(lab.config_dir, "nm-zones.yaml"), "w") as stream:
        stream.write("backend: auto\n")
    argv = [PYTHON, "-m", "nm_zones", "apply", link.name, "home"]
    result = run_in_syslog_sandbox(lab, tmp_path, argv, broken_python_iptables(tmp_path))
    assert result["returncode"] == 0, result
    assert "backend nftables used instead (iptables: " in result["stderr"], result
    assert "python-iptables 9.9.9 cannot be imported" in result["stderr"], result
    assert f"nmz-if-{link.name}" in lab.nft_table()
    assert "nmz" not in lab.save("ipv4") + lab.save("ipv6")
    assert probe_ssh_and_8080(lab, link) == FILTERED
