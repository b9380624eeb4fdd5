"""Zones bound by source address (zone file key `sources`), with real packets: a packet from
a bound source gets that zone's rules whatever interface it enters by, before the interface's
zone; another address on the same link still gets the interface's zone. Both families."""

from __future__ import annotations

import os

import pytest

from tests.harness.lab import wait_for

SERVICE = 8080
BOUND = ("10.77.1.3", "fd77:1::3")  # the peer's second address, bound by source
PLAIN = ("10.77.1.2", "fd77:1::2")  # the peer's own address: the interface's zone


def write_zone(lab, name: str, text: str) -> None:
    os.makedirs(os.path.join(lab.config_dir, "zones.d"), exist_ok=True)
    with open(os.path.join(lab.config_dir, "zones.d", f"{name}.yaml"), "w") as stream:
        stream.write(text)


def peer_with_two_addresses(lab):
    """One link; the peer holds a second address of each family on it."""
    link = lab.add_link()
    for address, prefix in ((BOUND[0], 24), (BOUND[1], 64)):
        lab.run(
            lab.peer,
            ["ip", "addr", "add", f"{address}/{prefix}", "dev", link.peer_name]
            + (["nodad"] if ":" in address else []),
        )
    lab.listen(tcp=(SERVICE,), udp=())
    pings = [{"kind": "ping", "address": a} for a in (link.ipv4, link.ipv6)]
    wait_for(lambda: lab.probe(pings) == ["accepted"] * 2, what="the link")
    return link


def reach(lab, link) -> list[str]:
    """TCP to the zoned host's service: from the bound addresses, then from the plain ones."""
    specs = [
        {"kind": "tcp", "address": target, "port": SERVICE, "source": source}
        for sources in (BOUND, PLAIN)
        for target, source in zip((link.ipv4, link.ipv6), sources, strict=True)
    ]
    return lab.probe(specs)


@pytest.mark.both_backends
def test_a_source_bound_to_trusted_reaches_what_the_interface_zone_refuses(lab):
    link = peer_with_two_addresses(lab)
    write_zone(lab, "trusted", f"target: accept\nsources: [{BOUND[0]}, '{BOUND[1]}/128']\n")
    lab.nm_zones("apply", link.name, "block")
    assert reach(lab, link) == ["accepted", "accepted", "rejected", "rejected"]


@pytest.mark.both_backends
def test_a_source_bound_to_block_is_refused_where_the_interface_zone_accepts(lab):
    link = peer_with_two_addresses(lab)
    write_zone(lab, "block", f"target: reject\nsources: ['{BOUND[0]}/32', '{BOUND[1]}']\n")
    lab.nm_zones("apply", link.name, "trusted")
    assert reach(lab, link) == ["rejected", "rejected", "accepted", "accepted"]
    # the binding goes with the zone file's line, at the next reload
    write_zone(lab, "block", "target: reject\n")
    lab.nm_zones("reload")
    assert reach(lab, link) == ["accepted"] * 4
    assert "nmz-s-" not in lab.held_text()


def inner_with_two_addresses(lab):
    """test_forward's three hosts; the inner client holds a second address of each family."""
    from tests.test_forward import three_hosts

    uplink, inner = three_hosts(lab)
    second = ("10.77.2.3", "fd77:2::3")
    assert inner.peer_ipv4 == "10.77.2.2"
    for address, prefix in ((second[0], 24), (second[1], 64)):
        lab.run(
            lab.inner,
            ["ip", "addr", "add", f"{address}/{prefix}", "dev", inner.peer_name]
            + (["nodad"] if ":" in address else []),
        )
    lab.enable_forwarding()
    return uplink, second, (inner.peer_ipv4, inner.peer_ipv6)


def forwarded(lab, uplink, bound, plain) -> list[str]:
    """TCP from the inner client to the far host through the zoned router: from the bound
    addresses, then from the plain ones."""
    specs = [
        {"kind": "tcp", "address": target, "port": SERVICE, "source": source}
        for sources in (bound, plain)
        for target, source in zip((uplink.peer_ipv4, uplink.peer_ipv6), sources, strict=True)
    ]
    return lab.probe(specs, namespace=lab.inner)


@pytest.mark.both_backends
def test_forwarded_traffic_from_a_bound_source_gets_its_zone(lab):
    """Forwarded traffic is judged by the source's zone first, as input is: trusted lets
    the bound address through a link in block, and block stops it on a link in trusted."""
    uplink, bound, plain = inner_with_two_addresses(lab)
    write_zone(lab, "trusted", f"target: accept\nsources: [{bound[0]}, '{bound[1]}']\n")
    lab.nm_zones("apply", uplink.name, "trusted")
    lab.nm_zones("apply", "in0", "block")
    assert forwarded(lab, uplink, bound, plain) == ["accepted"] * 2 + ["rejected"] * 2
    write_zone(lab, "trusted", "target: accept\n")
    write_zone(lab, "block", f"target: reject\nsources: [{bound[0]}, '{bound[1]}']\n")
    lab.nm_zones("apply", "in0", "trusted")
    lab.nm_zones("reload")
    assert forwarded(lab, uplink, bound, plain) == ["rejected"] * 2 + ["accepted"] * 2
