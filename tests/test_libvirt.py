"""libvirt's network driver (Debian 12's libvirt-daemon 9.0) against `nm-zones serve`: a NAT
network started before and after the service, its bridge in the `libvirt` zone, a guest on
the bridge getting DHCP and DNS from libvirt's dnsmasq and reaching a host beyond through NAT.

libvirtd runs only inside the namespace sandbox: its configuration, sockets and state live in
the sandbox's private /run, /etc overlay and tmpfs mounts over /var/lib/libvirt,
/var/cache/libvirt and /var/log/libvirt; the guest is a network namespace of its own whose one
link is a port of the network's bridge."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess

import pytest
from pyroute2 import NetNS, netns

from tests.harness.lab import base_env, wait_for
from tests.test_firewalld_clients import (
    lan,
    peer_web,
    sandbox,  # noqa: F401 - the sandbox on a backend
    zone_of,
)
from tests.test_service import MAIN, ZONE, call, service_pid

NEEDS_LIBVIRT = not shutil.which("libvirtd") or not shutil.which("virsh")
BRIDGE = "virbr9"
NETWORK = f"""<network>
  <name>nmz</name>
  <forward mode='nat'><nat ipv6='yes'/></forward>
  <bridge name='{BRIDGE}' stp='off' delay='0'/>
  <dns><host ip='192.168.140.1'><hostname>gateway-nmz</hostname></host></dns>
  <ip address='192.168.140.1' netmask='255.255.255.0'>
    <dhcp><range start='192.168.140.10' end='192.168.140.50'/></dhcp>
  </ip>
  <ip family='ipv6' address='fd79:140::1' prefix='64'/>
</network>
"""
# libvirtd's own configuration: root's socket without polkit (the sandbox's polkitd knows
# nothing of libvirt's actions), everything else in private places
CONFIG = """unix_sock_group = "root"
auth_unix_rw = "none"
auth_unix_ro = "none"
log_outputs = "1:stderr"
"""

PRIVATE = ("/var/lib/libvirt", "/var/cache/libvirt", "/var/log/libvirt", "/etc/libvirt")
# the guest's DHCP client script: the lease's address and route, its DNS server in a file
UDHCPC_SCRIPT = """#!/bin/sh
[ "$1" = bound ] || exit 0
ip address add "$ip/$mask" dev "$interface"
ip route add default via "$router"
echo "$dns" > "$LEASE_DNS"
"""


class Libvirt:
    """libvirtd inside the sandbox; its log under `root` (the test's tmp)."""

    def __init__(self, nm, root: str):
        self.nm, self.root = nm, root
        self.log = os.path.join(root, "libvirtd.log")
        self.process: subprocess.Popen | None = None

    def prepare(self) -> None:
        """Private state folders and config; the users of dnsmasq and of the QEMU driver
        (which loads too, though no guest runs), which Debian's libvirt-daemon-system would
        create, in the sandbox's /etc overlay."""
        os.makedirs(self.root, exist_ok=True)
        for place in PRIVATE:
            self.nm.sh(f"mkdir -p {place} && mount -n -t tmpfs -o mode=0755 tmpfs {place}")
        self.nm.run(["sh", "-c", "cat > /etc/libvirt/libvirtd.conf"], input_text=CONFIG)
        if "overlay" not in self.nm.sh("findmnt -n -o FSTYPE /etc").stdout:
            raise AssertionError("refusing to add users: /etc is not the sandbox's overlay")
        self.nm.sh("getent group kvm >/dev/null || groupadd -r kvm")
        for user in ("libvirt-qemu", "libvirt-dnsmasq"):
            self.nm.sh(f"id {user} >/dev/null 2>&1 || useradd -r -M -U -s /bin/false {user}")

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [*self.nm.enter(), "libvirtd", "--config", "/etc/libvirt/libvirtd.conf"],
                stdout=log,
                stderr=log,
                env=base_env(),
            )
        self.nm.services.append(self.process)
        wait_for(
            lambda: self.process.poll() is not None or self.answers(),
            60,
            what=f"libvirtd to answer\n{self.text()}",
        )
        if self.process.poll() is not None:
            raise AssertionError(f"libvirtd exited {self.process.returncode}:\n{self.text()}")

    def answers(self) -> bool:
        return self.virsh("net-list", "--all", check=False).returncode == 0

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.virsh("net-destroy", "nmz", check=False)
            self.process.terminate()
            self.process.wait(30)

    def virsh(self, *args: str, check: bool = True):
        return self.nm.run(["virsh", "--connect", "qemu:///system", *args], check=check)

    def text(self, tail: int = 8000) -> str:
        with open(self.log, errors="replace") as stream:
            return stream.read()[-tail:]


@pytest.fixture
def libvirt(sandbox, tmp_path):  # noqa: F811
    if NEEDS_LIBVIRT:
        pytest.skip("needs libvirtd and virsh (libvirt-daemon, libvirt-clients)")
    daemon = Libvirt(sandbox, str(tmp_path / "libvirt"))
    daemon.prepare()
    try:
        yield daemon
    finally:
        daemon.stop()


class Guest:
    """A guest's network namespace with one link, a port of the libvirt network's bridge."""

    def __init__(self, nm, tmp: str):
        self.nm, self.tmp = nm, tmp
        self.name = f"nmz-guest-{secrets.token_hex(3)}"
        netns.create(self.name)
        with NetNS(self.name) as ns:
            ns.link("add", ifname="g0", kind="veth", peer={"ifname": "vnetz0"})
            ns.link("set", index=ns.link_lookup(ifname="vnetz0")[0], net_ns_pid=nm.pid)
            ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
            ns.link("set", index=ns.link_lookup(ifname="g0")[0], state="up")
        nm.run(["ip", "link", "set", "vnetz0", "master", BRIDGE, "up"])
        self.script = os.path.join(tmp, "udhcpc.script")
        with open(self.script, "w") as stream:
            stream.write(UDHCPC_SCRIPT)
        os.chmod(self.script, 0o755)
        self.dns_file = os.path.join(tmp, "lease-dns")

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(
            ["ip", "netns", "exec", self.name, *argv],
            capture_output=True,
            text=True,
            timeout=60,
            env=base_env(LEASE_DNS=self.dns_file),
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{argv} exited {result.returncode}:\n{result.stdout}{result.stderr}"
            )
        return result

    def wait_ipv6(self) -> None:
        """The address libvirt's dnsmasq advertises (router advertisements) on the bridge."""
        wait_for(
            lambda: "fd79:140:" in self.run("ip", "-6", "address", "show", "dev", "g0").stdout,
            20,
            what="an IPv6 address from libvirt's router advertisements",
        )

    def dhcp(self) -> str:
        """Asks libvirt's dnsmasq for a lease; returns the address it got."""
        self.run(
            "/bin/busybox", "udhcpc", "-i", "g0", "-n", "-q", "-f", "-t", "10", "-s", self.script
        )
        shown = self.run("ip", "-4", "-o", "address", "show", "dev", "g0").stdout
        return shown.split()[3].split("/")[0]

    def close(self) -> None:
        netns.remove(self.name)


@pytest.fixture
def guest_factory(sandbox, tmp_path):  # noqa: F811
    guests: list[Guest] = []

    def make() -> Guest:
        guest = Guest(sandbox, str(tmp_path))
        guests.append(guest)
        return guest

    yield make
    for guest in guests:
        guest.close()


def fetch_from_peer(guest: Guest, address: str) -> str:
    """What the guest gets from the peer's web server: only through NAT (the peer has no
    route to 192.168.140.0/24)."""
    request = f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | /bin/busybox nc -w 5 {address} 8080"
    return guest.run("/bin/sh", "-c", request, check=False).stdout


def network_works(guest: Guest, link) -> None:
    """The guest reaches the peer over IPv4 and IPv6. libvirt puts its rules back a moment
    after serve's name returns (NameOwnerChanged): wait for that, with a deadline."""
    for address in (link.peer_ipv4, f"[{link.peer_ipv6}]"):
        wait_for(
            lambda address=address: "from the peer" in fetch_from_peer(guest, address),
            15,
            what=f"the guest to reach {address}\n{rules(guest.nm)}",
        )


def rules(nm) -> str:
    """The kernel's rules, for a failure's message."""
    return nm.run(["iptables-save"]).stdout + nm.run(["nft", "list", "ruleset"]).stdout


def dns_answers(guest: Guest) -> None:
    """libvirt's dnsmasq answers for a name the network defines (A record; it refuses AAAA)."""
    answer = guest.run("/bin/busybox", "nslookup", "-type=a", "gateway-nmz", "192.168.140.1")
    assert "Address: 192.168.140.1" in answer.stdout.split("Name:")[-1], answer.stdout


def define_and_start(libvirt: Libvirt, tmp: str) -> None:
    path = os.path.join(tmp, "nmz-network.xml")
    with open(path, "w") as stream:
        stream.write(NETWORK)
    libvirt.virsh("net-define", path)
    libvirt.virsh("net-start", "nmz")


@pytest.mark.both_backends
def test_net_start_after_serve_works_through_it(sandbox, libvirt, guest_factory, tmp_path):  # noqa: F811
    nm = sandbox
    link = lan(nm)
    nm.serve()
    libvirt.start()
    define_and_start(libvirt, str(tmp_path))
    wait_for(lambda: zone_of(nm, BRIDGE) == "('libvirt',)", 20, what=f"{BRIDGE} in zone libvirt")
    guest = guest_factory()
    assert guest.dhcp().startswith("192.168.140.")
    with open(guest.dns_file) as stream:
        assert stream.read().split() == ["192.168.140.1"]
    dns_answers(guest)
    guest.wait_ipv6()
    peer_web(nm, str(tmp_path))
    network_works(guest, link)
    call(nm, f"{MAIN}.reload")
    assert zone_of(nm, BRIDGE) == "('libvirt',)"
    network_works(guest, link)
    nm.run(["kill", str(service_pid(nm))])
    wait_for(lambda: not nm.name_owned(), 10, what="the name to be free")
    nm.serve()
    wait_for(lambda: zone_of(nm, BRIDGE) == "('libvirt',)", 20, what=f"{BRIDGE} back in libvirt")
    network_works(guest, link)
    assert call(nm, f"{ZONE}.getZoneOfInterface", BRIDGE) == "('libvirt',)"
    assert libvirt.process.poll() is None


@pytest.mark.both_backends
def test_a_network_running_before_serve_keeps_nat(sandbox, libvirt, guest_factory, tmp_path):  # noqa: F811
    """libvirt started with nobody on firewalld's name writes its rules itself; when serve
    takes the name, libvirt removes them and puts them back through serve (NameOwnerChanged),
    and again on Reloaded: the guest's NAT survives all of it."""
    nm = sandbox
    link = lan(nm)
    libvirt.start()
    define_and_start(libvirt, str(tmp_path))
    guest = guest_factory()
    guest.dhcp()
    guest.wait_ipv6()
    peer_web(nm, str(tmp_path))
    network_works(guest, link)
    nm.serve()
    wait_for(lambda: zone_of(nm, BRIDGE) == "('libvirt',)", 20, what=f"{BRIDGE} in zone libvirt")
    network_works(guest, link)
    call(nm, f"{MAIN}.reload")
    network_works(guest, link)
    assert nm.nm_zones("reload", check=False).returncode == 0
    network_works(guest, link)
    dns_answers(guest)
    assert nm.nm_zones("status", check=False).returncode == 0  # nothing counted as tampering
    assert libvirt.process.poll() is None
