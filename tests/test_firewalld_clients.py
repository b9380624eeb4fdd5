"""firewalld's clients against `nm-zones serve`: Docker's daemon (docker.io) in the namespace
sandbox with a private system bus, started before and after the service, and the calls it
makes (Properties, the config object, direct.passthrough, zone.addInterface of docker0).

dockerd runs only inside the sandbox (private mount, network and pid namespaces, private /run
and /etc overlays) with its data, exec root, pid file and socket under the test's tmp."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess

import pytest

from tests.harness.lab import base_env, wait_for
from tests.harness.nm_sandbox import NMSandbox
from tests.test_nm import NEEDS_NM
from tests.test_service import MAIN, ZONE, call, error, reload_bus_config, service_pid

NEEDS_DOCKER = not shutil.which("dockerd") or not os.path.exists("/bin/busybox")
DIRECT = "org.fedoraproject.FirewallD1.direct"
PROPS = "org.freedesktop.DBus.Properties"
CONFIG = "org.fedoraproject.FirewallD1.config"
CONFIG_PATH = "/org/fedoraproject/FirewallD1/config"


CGROUP_PARENT = "nmz-test-docker"  # the containers' cgroups, removed after each test
# The sandbox mounts a fresh sysfs on /sys, which hides this machine's cgroup mounts: runc
# needs them back (the same kernel hierarchies, mounted again in the sandbox's mount
# namespace; each container's cgroup goes when the container does).
CGROUPS = """
[ -e /sys/fs/cgroup/cgroup.procs ] || [ -d /sys/fs/cgroup/pids ] && exit 0
mount -n -t tmpfs -o mode=0755 cgroup /sys/fs/cgroup
for controller in $(awk 'NR > 1 && $2 != 0 && $4 == 1 { print $1 }' /proc/cgroups); do
    mkdir -p /sys/fs/cgroup/$controller
    mount -n -t cgroup -o $controller cgroup /sys/fs/cgroup/$controller \
        || rmdir /sys/fs/cgroup/$controller
done
"""


@pytest.fixture
def sandbox(tmp_path, backend):
    """The NetworkManager sandbox with `nm-zones install` done, on `backend`."""
    if NEEDS_NM:
        pytest.skip("needs root and NetworkManager")
    nm = NMSandbox(str(tmp_path / "sandbox"))
    nm.start()
    try:
        nm.install_hook()
        settings = f"backend: {backend}\n"
        nm.run(["sh", "-c", "cat > /etc/nm-zones/nm-zones.yaml"], input_text=settings)
        reload_bus_config(nm)
        yield nm
    finally:
        nm.stop()


class Docker:
    """dockerd inside the sandbox, everything it writes under `root`."""

    def __init__(self, nm: NMSandbox, root: str):
        self.nm, self.root = nm, root
        # sockets live in the sandbox's private /run: a unix socket's path has 104 bytes
        self.socket = "unix:///run/nmz-docker/docker.sock"
        self.log = os.path.join(root, "dockerd.log")
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        os.makedirs(self.root, exist_ok=True)
        self.nm.sh(CGROUPS)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [
                    *self.nm.enter(),
                    "dockerd",
                    "--debug",
                    f"--data-root={self.root}/data",
                    "--exec-root=/run/nmz-docker/exec",
                    f"--pidfile={self.root}/docker.pid",
                    f"--host={self.socket}",
                    "--storage-driver=vfs",
                    "--exec-opt=native.cgroupdriver=cgroupfs",
                    f"--cgroup-parent=/{CGROUP_PARENT}",
                    "--userland-proxy=false",
                ],
                stdout=log,
                stderr=log,
                env=base_env(),
            )
        self.nm.services.append(self.process)
        wait_for(
            lambda: self.process.poll() is not None or self.answers(),
            60,
            what=f"dockerd to answer\n{self.text()}",
        )
        if self.process.poll() is not None:
            raise AssertionError(f"dockerd exited {self.process.returncode}:\n{self.text()}")

    def answers(self) -> bool:
        return self.docker("info", check=False).returncode == 0

    def stop(self) -> None:
        """Containers, then the daemon, then the (empty) cgroups they leave in the kernel."""
        if self.process and self.process.poll() is None:
            running = self.docker("ps", "-aq", check=False).stdout.split()
            if running:
                self.docker("rm", "-f", *running, check=False)
            self.process.terminate()
            self.process.wait(30)
        for folder in glob.glob(f"/sys/fs/cgroup/*/{CGROUP_PARENT}"):
            for child in glob.glob(f"{folder}/*/"):
                with contextlib.suppress(OSError):
                    os.rmdir(child)
            with contextlib.suppress(OSError):
                os.rmdir(folder)

    def docker(self, *args: str, check: bool = True, input_text: str | None = None):
        return self.nm.run(
            ["docker", f"--host={self.socket}", *args], check=check, input_text=input_text
        )

    def text(self, tail: int = 8000) -> str:
        with open(self.log, errors="replace") as stream:
            return stream.read()[-tail:]

    def full_text(self) -> str:
        return self.text(tail=0)


@pytest.fixture
def docker(sandbox, tmp_path):
    if NEEDS_DOCKER:
        pytest.skip("needs dockerd (docker.io) and busybox-static")
    daemon = Docker(sandbox, str(tmp_path / "docker"))
    try:
        yield daemon
    finally:
        daemon.stop()


def zone_of(nm, interface: str) -> str:
    return call(nm, f"{ZONE}.getZoneOfInterface", interface)


def image(docker: Docker, tmp: str) -> None:
    """Image `bb`: busybox-static and a web page, imported without a registry."""
    root = os.path.join(tmp, "rootfs")
    os.makedirs(f"{root}/bin")
    os.makedirs(f"{root}/www")
    shutil.copy("/bin/busybox", f"{root}/bin/busybox")
    for name in ("sh", "nc", "httpd", "printf", "echo"):
        os.symlink("busybox", f"{root}/bin/{name}")
    with open(f"{root}/www/index.html", "w") as stream:
        stream.write("from the container\n")
    subprocess.run(["tar", "-C", root, "-cf", f"{root}.tar", "."], check=True)
    docker.docker("import", f"{root}.tar", "bb")


def peer_web(nm, tmp: str) -> subprocess.Popen:
    """A web server in the peer's namespace (another host, beyond ethz0)."""
    folder = os.path.join(tmp, "peer-www")
    os.makedirs(folder)
    with open(f"{folder}/index.html", "w") as stream:
        stream.write("from the peer\n")
    process = subprocess.Popen(
        ["ip", "netns", "exec", nm.peer, "/bin/busybox", "httpd", "-f", "-p", "8080", "-h", folder]
    )
    nm.listeners.append(process)
    return process


def container_fetches_from_peer(docker: Docker, address: str) -> str:
    """What a container gets from the peer's web server: only through NAT (the peer has no
    route to Docker's 172.17.0.0/16)."""
    request = f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 {address} 8080"
    return docker.docker("run", "--rm", "bb", "/bin/sh", "-c", request, check=False).stdout


def peer_fetches(nm, address: str) -> str:
    """What the peer gets from this machine's port 8080 (a port Docker published)."""
    fetch = (
        "import urllib.request, sys\n"
        "try:\n"
        f"    print(urllib.request.urlopen('http://{address}:8080/', timeout=5).read().decode())\n"
        "except OSError as error:\n"
        "    print('failed', error)\n"
    )
    result = subprocess.run(
        ["ip", "netns", "exec", nm.peer, "python3", "-c", fetch], capture_output=True, text=True
    )
    return result.stdout


def docker_works(nm, docker: Docker, link) -> None:
    """A container reaches the peer through NAT; the peer reaches a published port."""
    assert "from the peer" in container_fetches_from_peer(docker, link.peer_ipv4)
    wait_for(
        lambda: "from the container" in peer_fetches(nm, link.ipv4),
        20,
        what=f"the published port to answer: {peer_fetches(nm, link.ipv4)}",
    )


def lan(nm):
    link = nm.add_veth()
    nm.add_connection(link, "lan")
    nm.nmcli("connection", "up", "lan")
    nm.wait_zone(link.name, "public")
    nm.wait_reachable(link)
    return link


def assert_zone_decides(nm, link) -> None:
    """The LAN's zone (public) still decides for it: ssh open, another listening port closed."""
    nm.listen(tcp=(22, 9090), udp=())
    probes = [{"kind": "tcp", "address": link.ipv4, "port": port} for port in (22, 9090)]
    assert nm.probe(probes) == ["accepted", "rejected"]


@pytest.mark.both_backends
def test_dockerd_started_after_serve_works_through_it(sandbox, docker, tmp_path):
    nm = sandbox
    link = lan(nm)
    nm.serve()
    docker.start()
    log = docker.full_text()
    assert "Firewalld passthrough" in log, log[-8000:]  # Docker took firewalld's path
    assert "no method" not in log and "level=error" not in log, log[-8000:]
    wait_for(lambda: zone_of(nm, "docker0") == "('docker',)", 20, what="docker0 in zone docker")
    assert call(nm, f"{ZONE}.getInterfaces", "docker") == "(['docker0'],)"
    assert call(nm, f"{ZONE}.queryInterface", "docker", "docker0") == "(true,)"
    assert "-N DOCKER" in nm.run(["iptables", "-t", "nat", "-S"]).stdout  # by passthrough
    image(docker, str(tmp_path))
    peer_web(nm, str(tmp_path))
    docker.docker("run", "-d", "-p", "8080:80", "bb", "/bin/httpd", "-f", "-p", "80", "-h", "/www")
    docker_works(nm, docker, link)
    # Reloaded: Docker puts its rules back through passthrough; nm-zones keeps docker0 bound
    call(nm, f"{MAIN}.reload")
    assert zone_of(nm, "docker0") == "('docker',)"
    docker_works(nm, docker, link)
    assert nm.nm_zones("status", check=False).returncode == 0  # nothing counted as tampering
    # nm-zones' own rules still decide for the interfaces it binds
    assert_zone_decides(nm, link)
    # serve restarted while Docker runs: Docker re-applies its rules when the name comes back
    nm.run(["kill", str(service_pid(nm))])
    wait_for(lambda: not nm.name_owned(), 10, what="the name to be free")
    nm.serve()
    assert zone_of(nm, "docker0") == "('docker',)"
    docker_works(nm, docker, link)
    assert docker.process.poll() is None


@pytest.mark.both_backends
def test_dockerd_started_before_serve_keeps_working(sandbox, docker, tmp_path):
    nm = sandbox
    link = lan(nm)
    docker.start()
    assert "Firewalld passthrough" not in docker.full_text()
    image(docker, str(tmp_path))
    peer_web(nm, str(tmp_path))
    docker.docker("run", "-d", "-p", "8080:80", "bb", "/bin/httpd", "-f", "-p", "80", "-h", "/www")
    docker_works(nm, docker, link)
    nm.serve()
    docker_works(nm, docker, link)
    call(nm, f"{MAIN}.reload")
    docker_works(nm, docker, link)
    assert docker.process.poll() is None


# -- the calls themselves ------------------------------------------------------------------

PLAIN_USER = "nmzplain"
DIRECT_RULE = """polkit.addRule(function(action, subject) {
    if (action.id == "org.nm-zones.direct" && subject.user == "nmzplain")
        return polkit.Result.YES;
});
"""


def test_passthrough_runs_iptables_and_a_refused_one_changes_nothing(sandbox):
    nm = sandbox
    nm.serve()
    nm.add_user(PLAIN_USER)
    before = nm.run(["iptables-save"]).stdout
    refused = error(
        nm, f"{DIRECT}.passthrough", "ipv4", "['-t', 'filter', '-N', 'NMZTEST']", user=PLAIN_USER
    )
    assert refused == (
        "org.fedoraproject.FirewallD1.NotAuthorizedException: "
        "Not Authorized(polkit): org.nm-zones.direct"
    )
    assert nm.run(["iptables-save"]).stdout == before
    # root: the command runs, its output comes back; a failed probe is COMMAND_FAILED
    assert call(nm, f"{DIRECT}.passthrough", "ipv4", "['-N', 'NMZTEST']") == "('',)"
    assert "-N NMZTEST" in nm.run(["iptables", "-S"]).stdout
    probe = error(nm, f"{DIRECT}.passthrough", "ipv4", "['-C', 'NMZTEST', '-j', 'ACCEPT']")
    assert probe.startswith("org.fedoraproject.FirewallD1.Exception: COMMAND_FAILED: '"), probe
    assert "-w10 -C NMZTEST -j ACCEPT' failed: " in probe, probe
    listed = call(nm, f"{DIRECT}.passthrough", "ipv6", "['-S', 'INPUT']")
    assert "-P INPUT ACCEPT" in listed
    eb = error(nm, f"{DIRECT}.passthrough", "eb", "['-L']")
    assert eb.startswith("org.fedoraproject.FirewallD1.Exception: INVALID_IPV: 'eb'"), eb
    assert call(nm, f"{DIRECT}.getAllPassthroughs") == "(@a(sas) [],)"
    # the user with the grant: allowed (polkitd rereads its rules when a file changes)
    nm.sh("mkdir -p /etc/polkit-1/rules.d")
    nm.run(["sh", "-c", "cat > /etc/polkit-1/rules.d/50-direct.rules"], input_text=DIRECT_RULE)
    wait_for(
        lambda: (
            nm.gdbus(
                f"{DIRECT}.passthrough", "ipv4", "['-N', 'NMZUSER']", user=PLAIN_USER
            ).returncode
            == 0
        ),
        10,
        what="polkit to grant org.nm-zones.direct",
    )
    assert "-N NMZUSER" in nm.run(["iptables", "-S"]).stdout
    # nm-zones counts none of it as its own: nothing to repair
    assert nm.nm_zones("status", check=False).returncode == 0


def test_properties_and_introspection_as_firewalld_has_them(sandbox):
    nm = sandbox
    nm.serve()
    get = f"{PROPS}.Get"
    assert call(nm, get, MAIN, "state") == "(<'RUNNING'>,)"
    assert call(nm, get, MAIN, "version") == "(<'1.3.3'>,)"
    assert call(nm, get, MAIN, "IPv6") == "(<true>,)"
    assert call(nm, get, MAIN, "BRIDGE") == "(<false>,)"
    everything = call(nm, f"{PROPS}.GetAll", MAIN)
    for name in (
        "'interface_version': <'1.15'>",
        "'IPSetTypes': <@as []>",
        "'nf_conntrack_helpers': <@a{sas} {}>",
    ):
        assert name in everything, everything
    assert error(nm, get, MAIN, "nonsense").startswith(
        "org.freedesktop.DBus.Error.InvalidArgs: Property 'nonsense' does not exist"
    )
    assert call(nm, f"{PROPS}.GetAll", ZONE) == "(@a{sv} {},)"
    xml = call(nm, "org.freedesktop.DBus.Introspectable.Introspect")
    assert '<property name="state" type="s" access="read"/>' in xml, xml
    assert 'name="passthrough"' in xml and '<node name="config"/>' in xml


def call_at(nm, path: str, method: str, *args: str) -> str:
    result = nm.gdbus(method, *args, path=path)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def error_at(nm, path: str, method: str, *args: str) -> str:
    result = nm.gdbus(method, *args, path=path)
    assert result.returncode != 0, result.stdout
    return result.stderr.strip()


SETTINGS = (
    "('1.0', 'web', 'for the web', false, 'ACCEPT', ['ssh'], [('8080', 'tcp')], "
    "@as [], true, [('80', 'tcp', '8080', '')], @as [], @as [], @as [], @as [], "
    "@a(ss) [], false)"
)


def test_config_add_zone_writes_a_real_zone(sandbox):
    nm = sandbox
    nm.serve()
    names = call_at(nm, CONFIG_PATH, f"{CONFIG}.getZoneNames")
    assert "'docker'" in names and "'libvirt'" in names
    added = call_at(nm, CONFIG_PATH, f"{CONFIG}.addZone", "web", SETTINGS)
    assert added.startswith("(objectpath '/org/fedoraproject/FirewallD1/config/zone/")
    shown = nm.nm_zones("show", "web").stdout
    assert "/etc/nm-zones/zones.d/web.yaml" in shown and "target:       accept" in shown
    again = error_at(nm, CONFIG_PATH, f"{CONFIG}.addZone", "web", SETTINGS)
    assert "NAME_CONFLICT: new_zone(): 'web'" in again
    path = call_at(nm, CONFIG_PATH, f"{CONFIG}.getZoneByName", "web")
    path = path.split("'")[1]
    settings = call_at(nm, path, f"{CONFIG}.zone.getSettings")
    assert "'web', 'for the web', false, 'ACCEPT', ['ssh'], [('8080', 'tcp')]" in settings
    assert "[('80', 'tcp', '8080', '')]" in settings
    as_dict = call_at(nm, path, f"{CONFIG}.zone.getSettings2")
    assert "'target': <'ACCEPT'>" in as_dict and "'masquerade': <true>" in as_dict, as_dict
    introspect = "org.freedesktop.DBus.Introspectable.Introspect"
    assert 'name="getSettings2"' in call_at(nm, path, introspect)
    assert 'name="addZone"' in call_at(nm, CONFIG_PATH, introspect)
    assert "'ssh'" in call_at(nm, CONFIG_PATH, f"{CONFIG}.getServiceNames")
    assert "/config/service/" in call_at(nm, CONFIG_PATH, f"{CONFIG}.listServices")
    rich = SETTINGS.replace("@as [], @as [], @a(ss)", "['rule family=ipv4 accept'], @as [], @a(ss)")
    refused = error_at(nm, path, f"{CONFIG}.zone.update", rich)
    assert "INVALID_RULE: rules_str" in refused and "nm-zones has no rich rules" in refused
    assert nm.nm_zones("show", "web").stdout == shown  # unchanged
    plain = nm.run(
        [
            "runuser",
            "-u",
            "nobody",
            "--",
            "gdbus",
            "call",
            "--system",
            "--dest",
            MAIN,
            "--object-path",
            CONFIG_PATH,
            "--method",
            f"{CONFIG}.addZone2",
            "other",
            "@a{sv} {}",
        ],
        check=False,
    )
    assert "NotAuthorized" in plain.stderr
    broken = error_at(
        nm, CONFIG_PATH, f"{CONFIG}.addZone", "bad", SETTINGS.replace("['ssh']", "['nope']")
    )
    assert "INVALID_ZONE: bad: services[0]: unknown service 'nope'" in broken
    assert nm.sh("ls /etc/nm-zones/zones.d").stdout.split() == ["web.yaml"]


@pytest.mark.both_backends
def test_an_explicit_binding_claims_an_exempt_interface(sandbox):
    """virbr9 (exempt-interfaces: virbr*) is left alone until a caller binds it, as libvirt
    does: then its zone's rules apply, through reloads, until removeInterface."""
    nm = sandbox
    nm.serve()
    link = nm.add_veth("virbr9")  # NetworkManager manages only ethz*: configured by hand
    nm.run(["ip", "address", "add", f"{link.ipv4}/24", "dev", "virbr9"])
    nm.run(["ip", "link", "set", "virbr9", "up"])
    nm.listen(tcp=(22, 9090), udp=())
    probes = [{"kind": "tcp", "address": link.ipv4, "port": port} for port in (22, 9090)]
    wait_for(
        lambda: nm.probe(probes) == ["accepted", "accepted"],
        10,
        what=lambda: (
            f"virbr9 exempt: probes {nm.probe(probes)}\n{nm.nm_zones('status', 'virbr9').stdout}"
            f"{nm.sh('nft list ruleset; ip -br address').stdout}\n{nm.logs()[-3000:]}"
        ),
    )
    assert zone_of(nm, "virbr9") == "('',)"
    assert call(nm, f"{ZONE}.changeZoneOfInterface", "libvirt", "virbr9") == "('libvirt',)"
    assert zone_of(nm, "virbr9") == "('libvirt',)"
    assert call(nm, f"{ZONE}.queryInterface", "libvirt", "virbr9") == "(true,)"
    assert nm.probe(probes) == ["accepted", "rejected"]  # libvirt: ssh, not the rest
    call(nm, f"{MAIN}.reload")
    assert nm.nm_zones("reload", check=False).returncode == 0
    assert zone_of(nm, "virbr9") == "('libvirt',)"
    assert nm.probe(probes) == ["accepted", "rejected"]
    assert call(nm, f"{ZONE}.removeInterface", "libvirt", "virbr9") == "('libvirt',)"
    assert zone_of(nm, "virbr9") == "('',)"
    assert nm.nm_zones("status", "virbr9").stdout.startswith("virbr9: exempt")
    assert nm.probe(probes) == ["accepted", "accepted"]


def test_dockerd_creates_its_zone_when_none_is_shipped(sandbox, docker, tmp_path):
    """Without a shipped `docker` zone, Docker adds one (config.addZone, its settings sent as
    variants) and reloads: the zone is an admin's zone file like any other."""
    from nm_zones.paths import Paths

    nm = sandbox
    shipped = os.path.join(Paths.from_environment().shipped, "zones.d")
    copy = str(tmp_path / "zones.d")
    shutil.copytree(shipped, copy)
    os.unlink(os.path.join(copy, "docker.yaml"))
    nm.run(["mount", "--bind", copy, os.path.realpath(shipped)])  # in the sandbox only
    nm.serve()
    assert "'docker'" not in call(nm, f"{ZONE}.getZones")
    docker.start()
    assert "Firewalld: creating docker zone" in docker.full_text()
    written = nm.sh("cat /etc/nm-zones/zones.d/docker.yaml").stdout
    assert "target: accept" in written and "zone for docker bridge" in written, written
    wait_for(lambda: zone_of(nm, "docker0") == "('docker',)", 20, what="docker0 in zone docker")


def test_docker_in_legacy_tables_beside_nm_zones_is_never_repaired(sandbox, docker, tmp_path):
    """The system's iptables made the legacy variant (in the sandbox's /etc only): Docker's
    chains and its jumps in FORWARD share x_tables with nm-zones' (backend iptables). They
    are not nm-zones' rules: never deleted, through reloads; nm-zones keeps its jump ahead of
    the ones that accept."""
    nm = sandbox
    for tool in ("iptables", "ip6tables"):
        nm.run(["ln", "-sfn", f"/usr/sbin/{tool}-legacy", f"/etc/alternatives/{tool}"])
    assert "legacy" in nm.run(["iptables", "--version"]).stdout
    link = lan(nm)
    nm.serve()
    docker.start()
    image(docker, str(tmp_path))
    peer_web(nm, str(tmp_path))
    docker.docker("run", "-d", "-p", "8080:80", "bb", "/bin/httpd", "-f", "-p", "80", "-h", "/www")
    docker_works(nm, docker, link)
    forward = [line for line in nm.save().splitlines() if line.startswith("-A FORWARD ")]
    assert "-A FORWARD -j DOCKER-USER" in forward and "-A FORWARD -j nmz-forward" in forward
    for _ in range(2):
        call(nm, f"{MAIN}.reload")
        assert nm.nm_zones("reload", check=False).returncode == 0
        docker_works(nm, docker, link)
    status = nm.nm_zones("status", check=False)
    assert status.returncode == 0, status.stdout + status.stderr
    # Docker inserts (-I) its `-o docker0 ... -j ACCEPT` rules at the top of FORWARD: each
    # time, nm-zones puts its own jump back ahead of them (and says so); Docker's rules are
    # never deleted and its chains never touched
    forward = [line for line in nm.save().splitlines() if line.startswith("-A FORWARD ")]
    ours = forward.index("-A FORWARD -j nmz-forward")
    accepting = [n for n, line in enumerate(forward) if "docker0" in line]
    assert accepting and all(n > ours for n in accepting), forward
    assert "-A FORWARD -j DOCKER-USER" in forward
    assert any(line.startswith("-A DOCKER -d ") for line in nm.save().splitlines())
    assert_zone_decides(nm, link)
