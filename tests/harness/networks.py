"""Networks a sandboxed NetworkManager can be cabled to: each one a network namespace of
its own with a gateway (its own MAC address) and a dnsmasq DHCP server (its own domain and
server identifier), all on the same subnet, as home and a hotel may well be.

    home = PeerNetwork("a", mac="02:aa:00:00:00:01", domain="home.example")
    home.start(); plug(nm, home)          # ethz0 now cabled to home's namespace
    plug(nm, hotel)                       # unplugged from home, cabled to the hotel

dnsmasq runs inside the network's namespace only (ip netns exec), with its pid and lease
files in the test's own folder, never as a service of this machine; it is killed by stop().
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess

from pyroute2 import NetNS, netns

from .lab import IFA_F_NODAD, base_env, run_probes, wait_for

SUBNET = "10.79.0"
GATEWAY = f"{SUBNET}.1"
CLIENT = f"{SUBNET}.10"  # the one address each server leases (the client's MAC is fixed)
CLIENT_MAC = "02:5a:00:00:00:10"
PEER_IPV6, CLIENT_IPV6 = "fd79::1", "fd79::10"
PEER_END = "vnet0"


class PeerNetwork:
    def __init__(self, tmp: str, tag: str, mac: str, domain: str, server: str = GATEWAY):
        """`server`: the DHCP server identifier (its own address; the gateway stays GATEWAY,
        with `mac`, so a network can copy another's gateway and differ in its server)."""
        self.tmp = os.path.join(tmp, f"network-{tag}")
        self.namespace = f"nmz-net{tag}-{secrets.token_hex(3)}"
        self.mac, self.domain, self.server = mac, domain, server
        self.dnsmasq: subprocess.Popen | None = None

    def start(self) -> PeerNetwork:
        os.makedirs(self.tmp, exist_ok=True)
        netns.create(self.namespace)
        with NetNS(self.namespace) as ns:
            ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
        return self

    def stop(self) -> None:
        if self.dnsmasq:
            self.dnsmasq.kill()
            self.dnsmasq.wait()
            self.dnsmasq = None
        with contextlib.suppress(OSError):
            netns.remove(self.namespace)

    def configure(self) -> None:
        """The peer end's addresses (the server's first: it is the one dnsmasq names as its
        identifier) and dnsmasq on it, started anew for each cable."""
        with NetNS(self.namespace) as ns:
            index = ns.link_lookup(ifname=PEER_END)[0]
            ns.link("set", index=index, address=self.mac)
            ns.addr("add", index=index, address=self.server, prefixlen=24)
            if self.server != GATEWAY:
                ns.addr("add", index=index, address=GATEWAY, prefixlen=24)
            ns.addr("add", index=index, address=PEER_IPV6, prefixlen=64, flags=IFA_F_NODAD)
            ns.link("set", index=index, state="up")
        if self.dnsmasq is None:
            self._start_dnsmasq()

    def _start_dnsmasq(self) -> None:
        log = open(os.path.join(self.tmp, "dnsmasq.log"), "ab")  # noqa: SIM115 - the child's
        self.dnsmasq = subprocess.Popen(
            [
                "ip", "netns", "exec", self.namespace,
                "dnsmasq", "--keep-in-foreground", "--log-facility=-", "--conf-file=/dev/null",
                "--port=0", "--user=root", "--group=root", "--log-dhcp",
                f"--pid-file={self.tmp}/dnsmasq.pid",
                f"--dhcp-leasefile={self.tmp}/leases",
                f"--interface={PEER_END}", "--except-interface=lo",
                f"--dhcp-range={CLIENT},{CLIENT},255.255.255.0,1h",
                f"--dhcp-option=option:router,{GATEWAY}",
                f"--dhcp-option=option:domain-name,{self.domain}",
                "--dhcp-authoritative",
            ],
            stdout=log,
            stderr=log,
            env=base_env(),
        )  # fmt: skip
        log.close()

    def probe(self, specs: list[dict]) -> list[str]:
        return run_probes(self.namespace, specs, base_env())


def plug(nm, network: PeerNetwork, name: str = "ethz0") -> None:
    """Cable the sandbox's `name` to `network`: any old cable is pulled (the veth deleted,
    NetworkManager sees the device go), a new pair made, its NetworkManager end (always the
    same MAC, so each server leases it the same address) moved into the sandbox."""
    nm.sh(f"ip link del {name} 2>/dev/null || true")
    wait_for(lambda: name not in nm.sh("ip -o link show").stdout, 10, what=f"{name} to be gone")
    with NetNS(network.namespace) as ns:
        for index in ns.link_lookup(ifname=PEER_END):
            ns.link("del", index=index)
        ns.link("add", ifname=PEER_END, kind="veth", peer={"ifname": name, "address": CLIENT_MAC})
        ns.link("set", index=ns.link_lookup(ifname=name)[0], net_ns_pid=nm.pid)
    network.configure()


def dhcp_profile(nm, name: str = "lan", *settings: str) -> str:
    """An ethernet profile on ethz0 taking its IPv4 address by DHCP (and a fixed IPv6
    address for the probes), with no zone unless `settings` give one; returns its UUID."""
    nm.nmcli(
        "connection", "add", "type", "ethernet", "ifname", "ethz0", "con-name", name,
        "connection.autoconnect", "no", "ipv4.method", "auto", "ipv4.dhcp-timeout", "30",
        "ipv4.may-fail", "no",  # activated (and `up` dispatched) with its lease
        "ipv6.method", "manual", "ipv6.addresses", f"{CLIENT_IPV6}/64",
        "ipv6.addr-gen-mode", "eui64", *settings,
    )  # fmt: skip
    return nm.nmcli("-g", "connection.uuid", "connection", "show", name).stdout.strip()


def probe_specs() -> list[dict]:
    return [
        {"kind": kind, "address": address, "port": port}
        for address in (CLIENT, CLIENT_IPV6)
        for kind, port in (("tcp", 22), ("tcp", 8080), ("udp", 631))
    ]
