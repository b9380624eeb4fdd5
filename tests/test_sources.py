"""Zones bound by source address (zone file key `sources`), with real packets: a packet from
a bound source gets that zone's rules whatever interface it enters by, before the interface's
zone; another address on the same link still gets the interface's zone. Both families."""

from __future__ import annotations

import os

import pytest

from tests.harness.lab import wait_for
from tests.test_service import nm  # noqa: F401 - the NetworkManager sandbox fixture

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


# -- at runtime over D-Bus, with the real service in the NetworkManager sandbox -------------

EXCEPTION = "org.fedoraproject.FirewallD1.Exception"


@pytest.mark.parametrize("backend", ["iptables", "nftables"])
def test_sources_bound_over_dbus_as_firewalld_binds_them(nm, backend):  # noqa: F811
    """addSource / getZoneOfSource / removeSource with firewalld's replies and error codes,
    probes agreeing; podman's calls answered; a reload forgets runtime sources."""
    from tests.test_nm import connect_in_zone, write_settings
    from tests.test_service import ZONE, Monitor, call, error

    write_settings(nm, f"backend: {backend}\n")
    nm.serve()
    link = connect_in_zone(nm, "block")
    bound = ("10.78.1.3", "fd78:1::3")
    for address, prefix in ((bound[0], 24), (bound[1], 64)):
        _peer_address(nm, link, address, prefix)

    def reach() -> list[str]:
        return nm.probe(
            [
                {"kind": "tcp", "address": target, "port": 8080, "source": source}
                for sources in (bound, (link.peer_ipv4, link.peer_ipv6))
                for target, source in zip((link.ipv4, link.ipv6), sources, strict=True)
            ]
        )

    assert reach() == ["rejected"] * 4
    monitor = Monitor(nm)
    assert call(nm, f"{ZONE}.addSource", "trusted", bound[0]) == "('trusted',)"
    monitor.wait_for(f"SourceAdded ('trusted', '{bound[0]}')")
    assert call(nm, f"{ZONE}.addSource", "trusted", f"{bound[1]}/128") == "('trusted',)"
    assert call(nm, f"{ZONE}.getZoneOfSource", f"{bound[0]}/32") == "('trusted',)"
    assert call(nm, f"{ZONE}.querySource", "trusted", bound[0]) == "(true,)"
    assert call(nm, f"{ZONE}.querySource", "", bound[0]) == "(false,)"  # the default zone
    assert call(nm, f"{ZONE}.getSources", "trusted") == (f"(['{bound[0]}', '{bound[1]}/128'],)")
    assert reach() == ["accepted", "accepted", "rejected", "rejected"]
    active = call(nm, f"{ZONE}.getActiveZones")
    assert f"'trusted': {{'sources': ['{bound[0]}', '{bound[1]}/128']}}" in active
    status = nm.nm_zones("status").stdout
    assert f"{bound[0]}/32 trusted" in status and f"{bound[1]}/128 trusted" in status
    assert error(nm, f"{ZONE}.addSource", "trusted", bound[0]) == (
        f"{EXCEPTION}: ZONE_ALREADY_SET: '{bound[0]}' already bound to 'trusted'"
    )
    assert error(nm, f"{ZONE}.addSource", "home", bound[0]) == (
        f"{EXCEPTION}: ZONE_CONFLICT: '{bound[0]}' already bound to a zone"
    )
    assert error(nm, f"{ZONE}.addSource", "trusted", "10.0.0.1 -j ACCEPT") == (
        f"{EXCEPTION}: INVALID_ADDR: 10.0.0.1 -j ACCEPT"
    )
    assert error(nm, f"{ZONE}.addSource", "nosuch", bound[0]) == (
        f"{EXCEPTION}: INVALID_ZONE: nosuch"
    )
    assert error(nm, f"{ZONE}.removeSource", "", "10.9.9.9") == (
        f"{EXCEPTION}: UNKNOWN_SOURCE: '10.9.9.9' is not in any zone"
    )
    assert error(nm, f"{ZONE}.removeSource", "home", bound[0]) == (
        f"{EXCEPTION}: ZONE_CONFLICT: remove_source(home, {bound[0]}): zos='trusted'"
    )
    # what podman (netavark) calls for its subnet
    assert call(nm, f"{ZONE}.getZoneOfSource", "10.88.0.0/16") == "('',)"
    assert call(nm, f"{ZONE}.changeZoneOfSource", "trusted", "10.88.0.0/16") == ("('trusted',)")
    assert call(nm, f"{ZONE}.getZoneOfSource", "10.88.0.0/16") == "('trusted',)"
    assert call(nm, f"{ZONE}.removeSource", "trusted", "10.88.0.0/16") == "('trusted',)"
    # a change of zone moves the source at once; removing it gives the interface's zone
    assert call(nm, f"{ZONE}.changeZoneOfSource", "drop", bound[0]) == "('drop',)"
    monitor.wait_for(f"ZoneOfSourceChanged ('drop', '{bound[0]}')")
    assert reach()[0] == "dropped"
    assert call(nm, f"{ZONE}.removeSource", "", bound[0]) == "('drop',)"
    monitor.wait_for(f"SourceRemoved ('drop', '{bound[0]}')")
    assert reach() == ["rejected", "accepted", "rejected", "rejected"]
    nm.nm_zones("reload")
    assert call(nm, f"{ZONE}.getZoneOfSource", bound[1]) == "('',)"
    assert reach() == ["rejected"] * 4


def _peer_address(sandbox, link, address: str, prefix: int) -> None:
    """A second address on the peer's end of the link."""
    import subprocess

    subprocess.run(
        ["ip", "netns", "exec", sandbox.peer, "ip", "addr", "add", f"{address}/{prefix}"]
        + ["dev", link.peer_name]
        + (["nodad"] if ":" in address else []),
        check=True,
    )


def test_what_apply_commits_for_sources_is_what_plan_shows(lab):
    """The catch-all commits a zone's sources (from the compiled cache) exactly as `plan`
    prints them (from the zone file): the source chains and their dispatch rules."""
    from tests.test_plan import SOURCES_ZONE, parts, plan

    link = lab.add_link()
    write_zone(lab, "lab", SOURCES_ZONE)
    lab.nm_zones("apply", link.name, "public")
    shown = parts(plan(link.name, "lab", lab.config_dir))
    for family in ("ipv4", "ipv6"):
        wanted = [line for line in shown[family].splitlines() if "nmz-s-" in line]
        held = [line for line in lab.save(family).splitlines() if "nmz-s-" in line]
        assert sorted(held) == sorted(wanted) and wanted


@pytest.mark.both_backends
def test_a_source_rule_another_program_deleted_is_put_back_by_the_next_run(lab):
    """Fail closed: the source's rules are the catch-all's, so the kernel check that every
    run makes first (engine.prepare) rebuilds them; status says they are missing meanwhile."""
    link = peer_with_two_addresses(lab)
    write_zone(lab, "block", f"target: reject\nsources: [{BOUND[0]}, '{BOUND[1]}']\n")
    lab.nm_zones("apply", link.name, "trusted")
    assert reach(lab, link) == ["rejected", "rejected", "accepted", "accepted"]
    if lab.backend == "nftables":
        lab.shell("nft flush chain inet nm-zones input")
        lab.shell("nft add rule inet nm-zones input iifname vmap @nmz-input")
    else:
        lab.shell(f"iptables-legacy -D nmz-input -s {BOUND[0]}/32 -j nmz-s-block-in")
        lab.shell(f"ip6tables-legacy -D nmz-input -s {BOUND[1]}/128 -j nmz-s-block-in")
    assert reach(lab, link) == ["accepted"] * 4
    assert lab.nm_zones("status", check=False).returncode == 1
    repaired = lab.nm_zones("apply", link.name, "trusted", check=False)
    assert "changed by another program; rebuilt" in repaired.stderr
    assert reach(lab, link) == ["rejected", "rejected", "accepted", "accepted"]
    assert lab.nm_zones("status", check=False).returncode == 0


@pytest.mark.both_backends
def test_a_broken_zone_file_keeps_its_sources_with_its_stand_in(lab):
    """Fail closed: a typo in block's file does not free the addresses it refuses; they get
    the zone's stand-in (the shipped block), as an interface in a broken zone does."""
    link = peer_with_two_addresses(lab)
    write_zone(lab, "block", f"target: reject\nsources: [{BOUND[0]}, '{BOUND[1]}']\ntargte: x\n")
    lab.nm_zones("apply", link.name, "trusted", check=False)
    assert reach(lab, link) == ["rejected", "rejected", "accepted", "accepted"]


def test_show_lists_a_zones_sources(tmp_path):
    import subprocess
    import sys

    from tests.harness.lab import base_env
    from tests.test_plan import NO_STATE, SOURCES_ZONE

    os.makedirs(tmp_path / "zones.d")
    (tmp_path / "zones.d" / "lab.yaml").write_text(SOURCES_ZONE)
    env = base_env(NM_ZONES_CONFIG_DIR=str(tmp_path), NM_ZONES_STATE_DIR=NO_STATE)
    argv = [sys.executable, "-m", "nm_zones", "show", "lab"]
    text = subprocess.run(argv, capture_output=True, text=True, env=env, check=True).stdout
    assert "  sources:      10.1.2.3/32 10.9.0.0/16 fd00::/64 fd00::5/128\n" in text
