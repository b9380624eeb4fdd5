"""Forwarded traffic, with real packets across three namespaces:

    inner client --(inner link, in0)-- zoned router (nm-zones) --(uplink, up0)-- far host

The router's uplink is in `external` (masquerade) unless a test says otherwise; what the inner
link's zone (the ingress zone) says comes first, whatever the egress zone.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

from tests.harness.lab import wait_for

WHOAMI = 7777  # the far host answers with the address it sees the client connect from
SERVICE = 8080

DOCKER_LIKE = """
set -e
for t in iptables-legacy ip6tables-legacy; do
    $t -N DOCKER-USER
    $t -A DOCKER-USER -p tcp --dport 8081 -j DROP
    $t -A DOCKER-USER -j RETURN
    $t -N DOCKER-FORWARD
    $t -A DOCKER-FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    $t -A DOCKER-FORWARD -o docker0 -p tcp --dport 8080 -j ACCEPT
    $t -A DOCKER-FORWARD -o docker0 -p tcp --dport 8081 -j ACCEPT
    $t -A DOCKER-FORWARD -i docker0 ! -o docker0 -j ACCEPT
    $t -I FORWARD -j DOCKER-FORWARD
    $t -I FORWARD -j DOCKER-USER
    $t -P FORWARD DROP
    $t -t nat -N DOCKER
    $t -t nat -A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
done
iptables-legacy -t nat -A POSTROUTING -s {v4net} ! -o docker0 -j MASQUERADE
ip6tables-legacy -t nat -A POSTROUTING -s {v6net} ! -o docker0 -j MASQUERADE
iptables-legacy -t nat -A DOCKER ! -i docker0 -p tcp --dport 9080 -j DNAT --to {v4}:8080
iptables-legacy -t nat -A DOCKER ! -i docker0 -p tcp --dport 9081 -j DNAT --to {v4}:8081
ip6tables-legacy -t nat -A DOCKER ! -i docker0 -p tcp --dport 9080 -j DNAT --to [{v6}]:8080
ip6tables-legacy -t nat -A DOCKER ! -i docker0 -p tcp --dport 9081 -j DNAT --to [{v6}]:8081
"""


def three_hosts(lab, inner_name: str = "in0"):
    """The uplink to the far host (the lab's peer) and the inner link, nothing bound yet; the
    far host routes back through the router, and listens; so does the inner client."""
    uplink = lab.add_link("up0")
    inner = lab.add_inner(inner_name)
    lab.route_via(lab.peer, uplink)
    lab.listen(tcp=(SERVICE,), udp=(631,), namespace=lab.peer, whoami=(WHOAMI,))
    lab.listen(tcp=(SERVICE, 8081), udp=(), namespace=lab.inner)
    # links up and neighbours resolved before any rule exists (a fresh veth takes a moment
    # for IPv6), so that no probe of a test waits for them
    ends = [a for link in (uplink, inner) for a in (link.peer_ipv4, link.peer_ipv6)]
    pings = [{"kind": "ping", "address": a} for a in ends]
    wait_for(
        lambda: lab.probe(pings, namespace=lab.zoned) == ["accepted"] * len(pings),
        timeout=20,
        what="the router reaching both hosts",
    )
    return uplink, inner


@pytest.fixture
def net(lab):
    return three_hosts(lab)


def outbound(lab, uplink) -> list[str]:
    """From the inner client to the far host: TCP and UDP, IPv4 then IPv6."""
    return lab.probe(
        [
            {"kind": kind, "address": address, "port": port}
            for address in (uplink.peer_ipv4, uplink.peer_ipv6)
            for kind, port in (("tcp", SERVICE), ("udp", 631))
        ],
        namespace=lab.inner,
    )


def seen_from(lab, uplink, family: str = "ipv4") -> str:
    """The address the far host sees when the inner client connects to it."""
    address = uplink.peer_ipv4 if family == "ipv4" else uplink.peer_ipv6
    code = (
        "import socket\n"
        f"with socket.create_connection(({address!r}, {WHOAMI}), timeout=5) as s:\n"
        "    print(s.makefile().readline().strip())\n"
    )
    return lab.run(lab.inner, [sys.executable, "-c", code]).stdout.strip()


def forward_out_packets(lab, interface: str):
    """Packets counted by the uplink's rule in nmz-forward-out (IPv4); with nftables, whose
    map elements count nothing, the uplink's element and chain as the kernel lists them."""
    if lab.backend == "nftables":
        chains, maps = lab.nft_listing()
        return (maps["nmz-forward-out"][interface], chains[f"nmz-if-{interface}-fout"])
    wanted = f"-A nmz-forward-out -o {interface} -j nmz-if-{interface}-fout"
    for line in lab.shell("iptables-legacy-save -c -t filter").stdout.splitlines():
        match = re.match(r"\[(\d+):\d+\] (.*)", line)
        if match and match.group(2) == wanted:
            return int(match.group(1))
    raise AssertionError(f"no rule {wanted!r}")


# What the inner client gets towards the far host, by the inner link's zone: IPv4 TCP, UDP,
# IPv6 TCP, UDP. `external` masquerades IPv4 only.
OUTBOUND = {
    "home": ["accepted", "accepted", "rejected", "rejected"],
    "public": ["accepted", "accepted", "rejected", "rejected"],
    "trusted": ["accepted"] * 4,
    "block": ["rejected"] * 4,
    "drop": ["dropped"] * 4,
}


@pytest.mark.both_backends
@pytest.mark.parametrize("zone", sorted(OUTBOUND))
def test_ingress_zone_decides_first(lab, net, zone):
    """block and drop never let anything out, masquerade or not; a default-target zone lets
    the egress zone's masquerade accept; trusted forwards."""
    uplink, inner = net
    lab.enable_forwarding()
    lab.nm_zones("apply", uplink.name, "external")
    lab.nm_zones("apply", inner.name, zone)
    assert outbound(lab, uplink) == OUTBOUND[zone]
    if OUTBOUND[zone][0] == "accepted":
        assert seen_from(lab, uplink) == uplink.ipv4  # masqueraded: the router's address
    if OUTBOUND[zone][2] == "accepted":
        assert seen_from(lab, uplink, "ipv6") == inner.peer_ipv6  # IPv6 is not masqueraded
    # new flows from the far host to the inner client: external refuses them, whatever the
    # inner link's zone
    inbound = lab.probe(
        [{"kind": "tcp", "address": a, "port": SERVICE} for a in (inner.peer_ipv4, inner.peer_ipv6)]
    )
    assert inbound == ["rejected", "rejected"]


@pytest.mark.both_backends
@pytest.mark.parametrize(
    ("default_zone", "expected"),
    [("drop", OUTBOUND["drop"]), ("public", OUTBOUND["public"])],
)
def test_unclaimed_interfaces_are_judged_by_the_default_zone(lab, net, default_zone, expected):
    uplink, _ = net
    with open(os.path.join(lab.config_dir, "connections-map.yaml"), "w") as stream:
        stream.write(f"default-zone: {default_zone}\n")
    lab.enable_forwarding()
    lab.nm_zones("apply", uplink.name, "external")  # the inner link: the catch-all's
    assert outbound(lab, uplink) == expected


@pytest.mark.both_backends
def test_switching_the_inner_link_leaves_the_uplink_alone(lab, net):
    """The uplink's forward-out rule and its counters survive the inner link's switches,
    and each switch takes effect at once (the inner link bound first, this time)."""
    uplink, inner = net
    lab.enable_forwarding()
    lab.nm_zones("apply", inner.name, "home")
    lab.nm_zones("apply", uplink.name, "external")
    assert outbound(lab, uplink)[:2] == ["accepted", "accepted"]
    before = forward_out_packets(lab, uplink.name)
    assert before if lab.backend == "nftables" else before > 0
    for zone in ("drop", "block", "trusted", "home"):
        lab.nm_zones("apply", inner.name, zone)
        assert outbound(lab, uplink) == OUTBOUND[zone], zone
    if lab.backend == "nftables":
        assert forward_out_packets(lab, uplink.name) == before
    else:
        assert forward_out_packets(lab, uplink.name) > before


@pytest.mark.both_backends
def test_forward_ports_reach_the_inner_host(lab, net):
    """forward-ports to an address, IPv4 and IPv6: nm-zones switches forwarding on for the
    families they need and accepts what they DNAT; the inner link's own zone (drop) does not
    stop the replies."""
    uplink, inner = net
    os.makedirs(os.path.join(lab.config_dir, "zones.d"))
    with open(os.path.join(lab.config_dir, "zones.d", "gateway.yaml"), "w") as stream:
        stream.write(
            "masquerade: true\nforward-ports:\n"
            f"  - {{port: 80/tcp, to-addr: {inner.peer_ipv4}, to-port: {SERVICE}}}\n"
            f"  - {{port: 80/tcp, to-addr: '{inner.peer_ipv6}', to-port: {SERVICE}}}\n"
        )
    lab.run(
        lab.zoned,
        ["sysctl", "-q", "-w", "net.ipv4.ip_forward=0", "net.ipv6.conf.all.forwarding=0"],
    )
    # FORWARD's policy DROP, as docker leaves it: only nm-zones' own acceptance lets them in
    # (with nftables an accept is never final across tables: another table's drop policy
    # would drop them whatever nm-zones says, so there the test has no such policy)
    if lab.backend == "iptables":
        lab.shell("iptables-legacy -P FORWARD DROP && ip6tables-legacy -P FORWARD DROP")
    lab.nm_zones("apply", inner.name, "drop")
    lab.nm_zones("apply", uplink.name, "gateway")
    forwarding = lab.shell(
        "cat /proc/sys/net/ipv4/ip_forward /proc/sys/net/ipv6/conf/all/forwarding"
    ).stdout.split()
    assert forwarding == ["1", "1"]
    got = lab.probe(
        [
            {"kind": "tcp", "address": uplink.ipv4, "port": 80},
            {"kind": "tcp", "address": uplink.ipv6, "port": 80},
            {"kind": "tcp", "address": uplink.ipv4, "port": 81},  # no forward-port: the router
        ]
    )
    assert got == ["accepted", "accepted", "rejected"]
    assert outbound(lab, uplink) == OUTBOUND["drop"]  # the inner link is still drop


@pytest.mark.both_backends
@pytest.mark.parametrize("first", ["nm-zones", "docker"])
def test_docker_dnat_and_docker_user_keep_their_meaning(lab, first):
    """A docker-like setup (the container: the inner client behind `docker0`, exempt; ports
    9080 and 9081 published; DOCKER-USER drops traffic to 8081; FORWARD's policy DROP)
    works the same whether docker or nm-zones put its rules in place first."""
    uplink, container = three_hosts(lab, "docker0")
    lab.enable_forwarding()
    docker = DOCKER_LIKE.format(
        v4=container.peer_ipv4,
        v6=container.peer_ipv6,
        v4net=f"{container.ipv4.rsplit('.', 1)[0]}.0/24",
        v6net=f"{container.ipv6.rsplit('::', 1)[0]}::/64",
    )
    steps = [lambda: lab.shell(docker), lambda: lab.nm_zones("apply", uplink.name, "external")]
    for step in steps if first == "docker" else reversed(steps):
        step()
    published = lab.probe(
        [
            {"kind": "tcp", "address": address, "port": port}
            for address in (uplink.ipv4, uplink.ipv6)
            for port in (9080, 9081)
        ]
    )
    assert published == ["accepted", "dropped", "accepted", "dropped"]
    assert seen_from(lab, uplink) == uplink.ipv4  # the container reaches out, masqueraded
    assert seen_from(lab, uplink, "ipv6") == uplink.ipv6
