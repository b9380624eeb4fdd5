"""`nm-zones plan`: golden output for the nine zones, and proof that it is what apply commits."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.harness.lab import REPO, base_env

GOLDEN = os.path.join(REPO, "tests", "golden")
NO_STATE = "/nonexistent/nm-zones-state"  # plan needs no state; nothing may be created
ZONES = ["block", "dmz", "drop", "external", "home", "internal", "public", "trusted", "work"]
ZONES.append("nm-shared")  # NetworkManager names it for shared connections
ZONES += ["docker", "libvirt"]  # Docker and libvirt bind their bridges to them (serve)
CUSTOM_ZONE = """\
description: everything the compiler knows, in one zone
services: [ssh, mdns, ftp, tftp, samba-client, upnp-client, ipsec]
ports: [8080/tcp, 60000-61000/udp, 9/sctp, 33/dccp]
protocols: [gre]
icmp-blocks: [echo-request, packet-too-big, timestamp-request]
masquerade: true
forward-ports:
  - {port: 80/tcp, to-port: 8080}
  - {port: 443/tcp, to-addr: 10.1.2.3, to-port: 8443}
  - {port: 443/tcp, to-addr: 'fd00::3'}
log-denied: true
"""


def plan(
    interface: str, zone: str, config_dir: str = "/nonexistent", state_dir: str = NO_STATE
) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "nm_zones", "plan", interface, zone],
        capture_output=True,
        text=True,
        env=base_env(NM_ZONES_CONFIG_DIR=config_dir, NM_ZONES_STATE_DIR=state_dir),
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def parts(text: str) -> dict[str, str]:
    ipv4, ipv6 = text.split("# IPv6\n")
    assert ipv4.startswith("# IPv4\n")
    return {"ipv4": ipv4[len("# IPv4\n") :], "ipv6": ipv6}


@pytest.mark.parametrize("zone", ZONES)
def test_golden_plan(tmp_path, zone):
    """Named, not `auto`: where the kernel has no legacy x_tables, auto would print nftables'."""
    (tmp_path / "nm-zones.yaml").write_text("backend: iptables\n")
    same_as_golden(plan("eth0", zone, str(tmp_path)), f"plan-eth0-{zone}.txt")


@pytest.mark.parametrize("zone", ZONES)
def test_golden_nftables_plan(tmp_path, zone):
    """The same zones as nftables commits them: with `backend: nftables` set, `plan` prints
    the script `nft -f` takes (rendered without the kernel)."""
    (tmp_path / "nm-zones.yaml").write_text("backend: nftables\n")
    same_as_golden(plan("eth0", zone, str(tmp_path)), f"plan-eth0-{zone}-nftables.txt")


def same_as_golden(text: str, name: str) -> None:
    """`text` is the golden file's (NMZ_REGEN_GOLDEN=1 writes it first)."""
    path = os.path.join(GOLDEN, name)
    if os.environ.get("NMZ_REGEN_GOLDEN"):
        with open(path, "w") as stream:
            stream.write(text)
    with open(path) as stream:
        assert text == stream.read()


def test_plan_is_deterministic():
    assert plan("eth0", "home") == plan("eth0", "home")


def test_public_plan_says_what_the_zone_means():
    both = parts(plan("eth0", "public"))
    for family, text in both.items():
        rules = [line for line in text.splitlines() if line.startswith("-A nmz-if-eth0-in ")]
        # flows a switch ended (labeled) are dropped before established ones are accepted
        assert rules[0] == '-A nmz-if-eth0-in -m connlabel --label "127" -j DROP'
        assert rules[1].endswith("-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")
        assert "-A nmz-if-eth0-in -p tcp -m tcp --dport 22 -j ACCEPT" in rules
        icmp = "icmp" if family == "ipv4" else "ipv6-icmp"
        assert f"-A nmz-if-eth0-in -p {icmp} -j ACCEPT" in rules
        reject = "icmp-host-prohibited" if family == "ipv4" else "icmp6-adm-prohibited"
        assert rules[-1] == f"-A nmz-if-eth0-in -j REJECT --reject-with {reject}"
        assert "-A nmz-input -i eth0 -j nmz-if-eth0-in" in text
        assert "-I INPUT 1 -j nmz-input" in text
    v6 = both["ipv6"]
    assert "-A nmz-if-eth0-in -d fe80::/64 -p udp -m udp --dport 546 -j ACCEPT" in v6
    assert "546" not in both["ipv4"]


def test_neighbour_discovery_is_accepted_where_icmpv6_is_not():
    """block and drop refuse ICMPv6 but must let neighbour discovery through, or IPv6 stops
    working on the link; other zones accept all ICMPv6, so a rule per type would be waste."""
    for zone in ("block", "drop", "public", "trusted"):
        v6 = parts(plan("eth0", zone))["ipv6"]
        nd_rules = [f"-p ipv6-icmp -m icmp6 --icmpv6-type {t} -j ACCEPT" for t in range(133, 138)]
        if zone in ("block", "drop"):
            assert all(rule in v6 for rule in nd_rules), zone
            assert "-A nmz-if-eth0-in -p ipv6-icmp -j ACCEPT" not in v6
        else:
            assert not any(rule in v6 for rule in nd_rules), zone


def test_unknown_zone_and_bad_interface_are_usage_errors():
    env = base_env(NM_ZONES_CONFIG_DIR="/nonexistent", NM_ZONES_STATE_DIR=NO_STATE)
    for argv, message in (
        (["eth0", "nope"], "unknown zone 'nope'"),
        (["eth+", "home"], "'+' is a wildcard"),
        (["!eth0", "home"], "cannot match exactly"),
        (["a" * 16, "home"], "longer than 15 bytes"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "nm_zones", "plan", *argv],
            capture_output=True,
            text=True,
            env=env,
        )
        assert result.returncode == 2
        assert message in result.stderr


def _chains_of(save: str) -> list[str]:
    return sorted(
        line
        for line in save.splitlines()
        if line.startswith("-A nmz")
        or re.match(
            r"-A (INPUT|FORWARD|PREROUTING|"
            r"POSTROUTING) -j nmz",
            line,
        )
    )


def _plan_rules(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        if line.startswith("-A "):
            lines.append(line)
        elif line.startswith("-I "):
            builtin, _, rest = line[3:].partition(" 1 ")
            lines.append(f"-A {builtin} {rest}")
    return sorted(lines)


def _applied_without_catchall(lab, family: str) -> list[str]:
    """The kernel's nm-zones rules of the family, the catch-all's left out."""
    applied = _chains_of(lab.save(family))
    catchall = [
        line
        for line in applied
        if "nmz-default" in line
        or (line.startswith(("-A nmz-input ", "-A nmz-forward ")) and "-j RETURN" in line)
    ]
    return sorted(set(applied) - set(catchall))


@pytest.mark.parametrize("zone", [*ZONES, "kitchen-sink"])
def test_plan_loads_with_restore_and_equals_what_apply_commits(lab, zone):
    os.makedirs(os.path.join(lab.config_dir, "zones.d"))
    with open(os.path.join(lab.config_dir, "zones.d", "kitchen-sink.yaml"), "w") as stream:
        stream.write(CUSTOM_ZONE)
    link = lab.add_link("eth0")
    both = parts(plan(link.name, zone, lab.config_dir))
    tools = {"ipv4": "iptables-legacy-restore", "ipv6": "ip6tables-legacy-restore"}
    for family, text in both.items():
        lab.run(lab.zoned, ["sh", "-c", f"{tools[family]} --noflush"], input_text=text)
        restored = lab.save(family)
        assert _chains_of(restored) == _plan_rules(text), family
    # the same rules again, now through python-iptables: the kernel must hold the same text
    lab.flush_netfilter()
    lab.nm_zones("apply", link.name, zone)
    for family, text in both.items():
        assert _applied_without_catchall(lab, family) == _plan_rules(text), family


@pytest.mark.parametrize("interface", ["eth0", "wlp3s0", "we@ird#n&me", "a-b.c_d"])
def test_compiled_zone_instantiated_for_an_interface_is_its_plan(tmp_path, interface):
    """What an event commits comes from ruleset/cache.py: every zone compiled once for a stand-in
    name, then instantiated per interface (chain names, dispatch rules, log prefixes). It
    must be exactly the Ruleset `plan` shows, for every zone and for odd names too."""
    from nm_zones.config.load import load
    from nm_zones.paths import Paths
    from nm_zones.ruleset.build import compile_interface
    from nm_zones.ruleset.cache import CompiledConfig, build
    from nm_zones.ruleset.plan import instantiate
    from nm_zones.ruleset.rules import Ruleset

    os.makedirs(tmp_path / "zones.d")
    (tmp_path / "zones.d" / "kitchen-sink.yaml").write_text(CUSTOM_ZONE)
    paths = Paths(config=str(tmp_path))
    loaded = load(paths)
    compiled = CompiledConfig({**build(loaded, paths), "key": ()})
    for name, zone in loaded.config.zones.items():
        expected = compile_interface(interface, zone, loaded.config)
        plan = instantiate(compiled.zone(name), interface)
        got = Ruleset.from_chains_by_table(interface, name, plan.chains_by_table)
        for family in ("ipv4", "ipv6"):
            assert got.save_text(family) == expected.save_text(family), (name, family)
        assert plan.forwarding == expected.needs_forwarding
        assert sorted(plan.tables) == sorted(
            (f, t) for f, table_plans in expected.table_plans.items() for t in table_plans
        )


def test_allowances_are_committed_before_the_zone_tail_as_status_expects(lab):
    """An allowance is plan text too: `allow` puts its rules (a port with a deadline, a
    service expanded) into the input chain just before the zone's LOG rule and verdict, in
    both families, and the kernel holds exactly that text (what `status` compares)."""
    import json
    import time

    from nm_zones.state import StateDir

    os.makedirs(os.path.join(lab.config_dir, "zones.d"))
    with open(os.path.join(lab.config_dir, "zones.d", "kitchen-sink.yaml"), "w") as stream:
        stream.write(CUSTOM_ZONE)
    link = lab.add_link("eth0")
    both = parts(plan(link.name, "kitchen-sink", lab.config_dir))
    lab.nm_zones("apply", link.name, "kitchen-sink")
    lab.nm_zones("allow", "9090/tcp", "--interface", link.name, "--for", "1h")
    lab.nm_zones("allow", "http", "--interface", link.name)
    view = json.loads(lab.nm_zones("status", link.name, "--json").stdout)
    (deadline,) = [a["deadline"] for a in view["allowances"] if a["what"] == "9090/tcp"]
    stop = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(deadline - 1))
    (until,) = [a[3] for a in StateDir(lab.state_dir).load().allowances if a[3]]
    prefix = f"-A nmz-if-{link.name}-in "
    timed = f"-m time --datestop {stop} -m comment --comment nmz-until-{until}"
    added = [
        f"{prefix}-p tcp -m tcp --dport 9090 {timed} -j ACCEPT",
        f"{prefix}-p tcp -m tcp --dport 80 -j ACCEPT",
    ]
    for family, text in both.items():
        planned = [line for line in text.splitlines() if line.startswith(prefix)]
        assert planned[-3].startswith(f"{prefix}-m limit") and "-j LOG" in planned[-3]
        assert "-j NFLOG --nflog-prefix" in planned[-2] and "--nflog-group 47" in planned[-2]
        expected = planned[:-3] + added + planned[-3:]  # before the LOG, NFLOG and verdict
        held = [line for line in lab.save(family, "filter").splitlines() if line.startswith(prefix)]
        assert held == expected, family
    assert view["kernel"] == "in place"
    # and `plan` shows them: what apply would commit for the interface in that zone
    after = parts(plan(link.name, "kitchen-sink", lab.config_dir, lab.state_dir))
    for family, text in after.items():
        assert _applied_without_catchall(lab, family) == _plan_rules(text), family
        assert text != both[family]


SOURCES_ZONE = """\
target: drop
services: [ssh]
log-denied: true
sources: [10.1.2.3, 10.9.0.0/16, 'fd00::/64', 'fd00::5']
"""


@pytest.mark.parametrize("backend", ["iptables", "nftables"])
def test_golden_plan_of_a_zone_with_sources(tmp_path, backend):
    """A zone's sources come first in nmz-input and nmz-forward (narrower networks first),
    each family its own, leading to the zone's source chains."""
    os.makedirs(tmp_path / "zones.d")
    (tmp_path / "zones.d" / "lab.yaml").write_text(SOURCES_ZONE)
    if backend == "nftables":
        (tmp_path / "nm-zones.yaml").write_text("backend: nftables\n")
    same_as_golden(plan("eth0", "lab", str(tmp_path)), f"plan-eth0-sources-{backend}.txt")
