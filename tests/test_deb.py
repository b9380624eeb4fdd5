"""The Debian package, installed into a fresh Debian 12 root and run by the real NetworkManager.

.ci/deb-test builds the package and a fresh root (mmdebstrap) and runs this file with
NM_ZONES_DEB (the .deb) and NM_ZONES_DEB_ROOT (the root's tarball); without them every test
here is skipped. The root lives in private network, mount and pid namespaces, so what its
maintainer scripts and commands do to netfilter stays there.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.harness.lab import REPO, RUNNER_NETNS, first_child, wait_for
from tests.harness.nm_sandbox import NMSandbox
from tests.test_nm import BLOCK, HOME, connect_in_zone, specs

DEB = os.environ.get("NM_ZONES_DEB", "")
ROOT_TARBALL = os.environ.get("NM_ZONES_DEB_ROOT", "")

needs_deb = pytest.mark.skipif(
    not (DEB and ROOT_TARBALL) or os.geteuid() != 0,
    reason="run by .ci/deb-test (NM_ZONES_DEB, NM_ZONES_DEB_ROOT), as root",
)
DEBIAN_SITE = "/usr/lib/python3/dist-packages"

ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "DEBIAN_FRONTEND": "noninteractive",
    # the maintainer scripts inherit it: even a mistake cannot reach the test runner's netfilter
    "NM_ZONES_REFUSE_NETNS": RUNNER_NETNS,
}

# PID 1 of the root's namespaces: puts a fresh root together (the unpacked tarball under a
# writable layer on tmpfs, so every test starts from the same untouched files), mounts what a
# running system has, then either becomes the root's own PID 1 (a booted system) or stays
# outside it (the root is then a chroot, as when an image is built). It says `ready` only
# once it is where it stays: commands entering a booted root take PID 1's root as theirs.
INIT = """
set -e
base=$1 root=$2 layers=$3
mount -t tmpfs -o mode=0755 tmpfs "$layers"
mkdir "$layers/upper" "$layers/work"
mount -t overlay overlay -o "lowerdir=$base,upperdir=$layers/upper,workdir=$layers/work" "$root"
mount -t proc proc "$root/proc"
mount -t sysfs -o ro sysfs "$root/sys"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
if [ -d /lib/modules ]; then  # for modprobe, where the kernel has modules
    mkdir -p "$root/lib/modules"
    mount --bind -o ro /lib/modules "$root/lib/modules"
fi
ip link set lo up
if [ "$4" = booted ]; then exec chroot "$root" /bin/sh -c 'echo ready; exec sleep infinity'; fi
echo ready
exec sleep infinity
"""


class FreshRoot:
    """A fresh Debian root over the unpacked tarball `base`, with its own network, mount and
    pid namespaces. Its files exist only in its mount namespace: host_path() reaches them."""

    def __init__(self, tmp: str, base: str, booted: bool):
        self.path, self.layers = os.path.join(tmp, "root"), os.path.join(tmp, "layers")
        self.booted = booted
        os.makedirs(self.path)
        os.makedirs(self.layers)
        self.process = subprocess.Popen(
            [
                "unshare",
                "--net",
                "--mount",
                "--pid",
                "--fork",
                "--kill-child=SIGKILL",
                "--propagation",
                "private",
                "sh",
                "-c",
                INIT,
                "init",
                base,
                self.path,
                self.layers,
                "booted" if booted else "chroot",
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        assert self.process.stdout.readline().strip() == "ready"
        self.pid = wait_for(lambda: first_child(self.process.pid), 10, what="the root's PID 1")
        shutil.copy(DEB, self.host_path("/tmp/nm-zones.deb"))

    def __enter__(self) -> FreshRoot:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """The namespaces die with PID 1, the root's layers with their mounts."""
        self.process.kill()
        self.process.wait()
        os.rmdir(self.path)
        os.rmdir(self.layers)

    def host_path(self, path: str) -> str:
        """`path` in the root, as this process reaches it: through PID 1's view."""
        inside = "" if self.booted else self.path
        return f"/proc/{self.pid}/root{inside}/{path.lstrip('/')}"

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        enter = ["nsenter", "--target", str(self.pid), "--mount", "--net", "--pid"]
        if self.booted:
            # never this machine's own root: only PID 1's, which is the fresh root
            root = os.path.realpath(self.path)
            assert os.readlink(f"/proc/{self.pid}/root") == root, "PID 1 is not in the root"
            enter += ["--root", "--wd"]
        else:
            enter += ["--wd=/", "chroot", self.path]
        result = subprocess.run(
            [*enter, *argv], capture_output=True, text=True, timeout=300, env=ENV
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{argv} exited {result.returncode}:\n{result.stdout}{result.stderr}"
            )
        return result

    def rules(self) -> str:
        """Both families' legacy rules, without comments and counters."""
        text = self.run("iptables-legacy-save").stdout + self.run("ip6tables-legacy-save").stdout
        return "".join(
            line.split(" [")[0] + "\n" for line in text.splitlines() if not line.startswith("#")
        )

    def exists(self, path: str) -> bool:
        return os.path.lexists(self.host_path(path))


@pytest.fixture(scope="module")
def debian_root(tmp_path_factory):
    """The tarball, unpacked once; every test's root is a writable layer over it."""
    path = str(tmp_path_factory.mktemp("debian-root"))
    subprocess.run(["tar", "-C", path, "--numeric-owner", "-xf", ROOT_TARBALL], check=True)
    yield path
    shutil.rmtree(path)


@pytest.fixture
def booted(tmp_path, debian_root):
    with FreshRoot(str(tmp_path), debian_root, booted=True) as root:
        yield root


@pytest.fixture
def chroot(tmp_path, debian_root):
    with FreshRoot(str(tmp_path), debian_root, booted=False) as root:
        yield root


PACKAGED = [
    "/usr/sbin/nm-zones",
    "/usr/lib/NetworkManager/dispatcher.d/50-nm-zones",
    "/lib/systemd/system/nm-zones.service",
    "/etc/systemd/system/NetworkManager.service.wants/nm-zones.service",
    "/usr/share/man/man8/nm-zones.8.gz",
    "/usr/share/bash-completion/completions/nm-zones",
    "/usr/share/nm-zones/zones.d/home.yaml",
    "/usr/share/nm-zones/services.d/ssh.yaml",
    "/usr/share/nm-zones/connections-map.yaml",
    "/usr/lib/python3/dist-packages/nm_zones/doors/event.py",
]
SERVE_FILES = [
    "/lib/systemd/system/nm-zones-serve.service",
    "/usr/share/dbus-1/system.d/nm-zones.conf",
    "/usr/share/polkit-1/actions/org.nm-zones.policy",
]


@needs_deb
def test_package_on_a_booted_system(booted):
    """Install, use, upgrade, remove and purge, as on a machine that runs: the maintainer
    scripts reload on upgrade and take every rule out on removal."""
    root = booted
    out = root.run("dpkg", "-i", "/tmp/nm-zones.deb").stdout
    # neither systemd nor NetworkManager runs yet: the postinst leaves the firewall alone
    assert "rules not reloaded now (neither systemd nor NetworkManager runs)" in out, out
    assert "nmz" not in root.rules()
    for path in PACKAGED:
        assert root.exists(path), path
    hook = "/usr/lib/NetworkManager/dispatcher.d/50-nm-zones"
    for sub in ("pre-up.d", "pre-down.d"):
        link = root.host_path(hook.replace("50-nm-zones", f"{sub}/50-nm-zones"))
        assert os.readlink(link) == "../50-nm-zones"
    with open(root.host_path(hook)) as stream:
        assert stream.readline() == "#!/usr/bin/python3 -S\n"
    unit = root.run("cat", "/lib/systemd/system/nm-zones.service").stdout
    assert "ExecStart=/usr/sbin/nm-zones reload" in unit and "man:nm-zones(8)" in unit
    if os.path.exists(os.path.join(REPO, "nm_zones", "nm-zones-serve.service")):
        # nm-zones serve: installed where dbus and polkit look, its unit left off
        for path in SERVE_FILES:
            assert root.exists(path), path
        assert "ExecStart=/usr/sbin/nm-zones serve" in root.run("cat", SERVE_FILES[0]).stdout
        assert not root.exists("/etc/systemd/system/multi-user.target.wants/nm-zones-serve.service")

    assert root.run("nm-zones", "check").stdout == ""
    assert "* public" in root.run("nm-zones", "zones").stdout
    plan = root.run("nm-zones", "plan", "eth0", "home").stdout
    assert plan.startswith("# IPv4\n") and "\n# IPv6\n" in plan
    assert "-A nmz-if-eth0-in -p tcp -m tcp --dport 22 -j ACCEPT" in plan

    # a veth pair inside the root's own network namespace, bound to home
    root.run("ip", "link", "add", "nmzdeb0", "type", "veth", "peer", "name", "nmzdeb1")
    root.run("ip", "link", "set", "nmzdeb0", "up")
    root.run("nm-zones", "apply", "nmzdeb0", "home")
    for family in ("iptables-legacy-save", "ip6tables-legacy-save"):
        saved = root.run(family).stdout
        assert "-A nmz-input -i nmzdeb0 -j nmz-if-nmzdeb0-in" in saved, saved
    assert "nmzdeb0" in root.run("nm-zones", "status").stdout

    # an upgrade on a running system (systemd booted it) reloads: the admin's change to home
    # reaches the interface, and the prerm of the upgrade left its rules in place meanwhile
    root.run("mkdir", "-p", "/run/systemd/system", "/etc/nm-zones/zones.d")
    home = root.run("cat", "/usr/share/nm-zones/zones.d/home.yaml").stdout
    with open(root.host_path("/etc/nm-zones/zones.d/home.yaml"), "w") as stream:
        stream.write(home + "ports: [8080/tcp]\n")
    out = root.run("dpkg", "-i", "/tmp/nm-zones.deb").stdout
    assert "nmzdeb0" in out, out
    assert "--dport 8080 -j ACCEPT" in root.run("iptables-legacy-save").stdout

    # removal takes every rule out, both families, and leaves no `disabled` flag behind
    out = root.run("dpkg", "--remove", "nm-zones").stdout
    assert "nmz" not in root.rules(), out
    assert not root.exists("/etc/nm-zones/disabled")
    assert not root.exists("/usr/sbin/nm-zones") and not root.exists(hook)
    assert root.exists("/etc/nm-zones/zones.d/home.yaml")  # the admin's file stays
    root.run("dpkg", "--purge", "nm-zones")
    assert not root.exists("/run/nm-zones")
    assert root.exists("/etc/nm-zones/zones.d/home.yaml")  # ... even on purge
    assert "nmz" not in root.rules()


@needs_deb
def test_package_in_a_chroot_never_touches_the_firewall(chroot):
    """Building an image: the kernel's firewall is the host's, so neither the postinst nor the
    prerm changes it, even where systemd's runtime folder exists."""
    root = chroot
    root.run("mkdir", "-p", "/run/systemd/system")
    out = root.run("dpkg", "-i", "/tmp/nm-zones.deb").stdout
    assert "rules not reloaded now (in a chroot)" in out, out
    assert "nmz" not in root.rules()
    root.run("ip", "link", "add", "nmzdeb0", "type", "veth", "peer", "name", "nmzdeb1")
    root.run("nm-zones", "apply", "nmzdeb0", "block")
    before = root.rules()
    assert "-A nmz-input -i nmzdeb0 -j nmz-if-nmzdeb0-in" in before
    root.run("dpkg", "--purge", "nm-zones")
    assert root.rules() == before
    assert not root.exists("/etc/nm-zones")  # nothing of the admin's in it: gone on purge
    assert not root.exists("/run/nm-zones")


@needs_deb
def test_a_disabled_nm_zones_stays_disabled_across_install_and_removal(booted):
    root = booted
    root.run("mkdir", "-p", "/run/systemd/system")
    root.run("dpkg", "-i", "/tmp/nm-zones.deb")
    assert "-A INPUT -j nmz-input" in root.run("iptables-legacy-save").stdout  # reloaded
    root.run("nm-zones", "disable")
    assert "nmz" not in root.rules()
    out = root.run("dpkg", "-i", "/tmp/nm-zones.deb").stdout
    assert "disabled" in out and "nmz" not in root.rules()
    root.run("dpkg", "--remove", "nm-zones")
    assert root.exists("/etc/nm-zones/disabled")  # the admin's own flag stays


@needs_deb
def test_policy_rc_d_forbidding_starts_means_no_reload(booted):
    """A container build says "start nothing" with policy-rc.d exiting 101: the postinst
    leaves the firewall alone there, as it would leave a service stopped."""
    root = booted
    root.run("mkdir", "-p", "/run/systemd/system")
    policy = root.host_path("/usr/sbin/policy-rc.d")
    with open(policy, "w") as stream:
        stream.write("#!/bin/sh\nexit 101\n")
    os.chmod(policy, 0o755)
    out = root.run("dpkg", "-i", "/tmp/nm-zones.deb").stdout
    assert "rules not reloaded now (policy-rc.d forbids it)" in out, out
    assert "nmz" not in root.rules()
    os.unlink(policy)
    root.run("dpkg", "-i", "/tmp/nm-zones.deb")
    assert "-A INPUT -j nmz-input" in root.run("iptables-legacy-save").stdout


# -- the packaged hook, run by the real NetworkManager --------------------------------------


@needs_deb
def test_networkmanager_runs_the_packaged_hook(tmp_path):
    """The package's files over the sandbox's /usr: NetworkManager runs the packaged hook
    (/usr/bin/python3 -S, Debian's libraries), which applies the connection's zone."""
    if not shutil.which("NetworkManager"):
        pytest.skip("needs NetworkManager")
    unpacked = str(tmp_path / "unpacked")
    subprocess.run(["dpkg-deb", "-x", DEB, unpacked], check=True)
    nm = NMSandbox(str(tmp_path / "sandbox"))
    nm.start()
    try:
        hooks = "/usr/lib/NetworkManager/dispatcher.d"
        nm.run(["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={unpacked}/usr:/usr", "/usr"])
        nm.run(["mount", "--bind", f"{unpacked}{hooks}", hooks])
        found = nm.sh(f"cd {hooks} && find . -mindepth 1 | sort").stdout.split()
        assert found == [
            "./50-nm-zones",
            "./pre-down.d",
            "./pre-down.d/50-nm-zones",
            "./pre-up.d",
            "./pre-up.d/50-nm-zones",
        ]
        assert "50-nm-zones" not in nm.sh("ls /etc/NetworkManager/dispatcher.d", False).stdout
        packaged = nm.run(
            [
                "/usr/bin/python3",
                "-S",
                "-c",
                "import sys; sys.path.insert(0, "
                "'/usr/lib/python3/dist-packages'); import nm_zones; print(nm_zones.__file__)",
            ],
            env=ENV,
        ).stdout.strip()
        assert packaged == "/usr/lib/python3/dist-packages/nm_zones/__init__.py"

        link = connect_in_zone(nm, "home")
        assert nm.probe(specs(link)) == HOME
        status = nm.run(["/usr/sbin/nm-zones", "status"], env=ENV).stdout
        assert "why: nmcli connection.zone" in status and "connection: lan" in status
        nm.run(["/usr/sbin/nm-zones", "assign", "lan", "block"], env=ENV)
        assert nm.probe(specs(link)) == BLOCK
        nm.nmcli("connection", "down", "lan")
        nm.wait_zone(link.name, None)
        assert "nmz-if-ethz0" not in nm.save("ipv4") + nm.save("ipv6")
    finally:
        nm.stop()


# -- Debian's own python3 libraries, without the package ------------------------------------


@pytest.mark.skipif(
    not os.path.exists(f"{DEBIAN_SITE}/iptc") or not os.path.exists(f"{DEBIAN_SITE}/yaml"),
    reason="needs Debian's python3-iptables and python3-yaml",
)
def test_apply_with_debians_python_iptables_and_yaml(lab):
    """What the package runs with: /usr/bin/python3 -S, Debian's python3-iptables (1.0.1 on
    Debian 12, which imports distutils.sysconfig unconditionally) and python3-yaml."""
    link = lab.add_link()
    program = (
        f"import sys; sys.path[:0] = [{REPO!r}, {DEBIAN_SITE!r}];"
        " from nm_zones.doors.cli import main;"
        f" status = main(['apply', {link.name!r}, 'home']);"
        " import iptc, yaml; assert iptc.__file__.startswith(sys.path[1]), iptc.__file__;"
        " assert yaml.__file__.startswith(sys.path[1]), yaml.__file__; sys.exit(status)"
    )
    result = lab.run(lab.zoned, ["/usr/bin/python3", "-S", "-c", program], check=False)
    assert result.returncode == 0, result.stderr
    for family in ("ipv4", "ipv6"):
        assert f"-A nmz-input -i {link.name} -j nmz-if-{link.name}-in" in lab.save(family)
