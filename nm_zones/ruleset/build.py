"""Compile (interface, zone) into a Ruleset: pure, deterministic, no root needed.

Layout, per family (see DESIGN.md):
  filter  INPUT -j nmz-input      nmz-input   -i IF -j nmz-if-IF-in     ...catch-all
          FORWARD -j nmz-forward  nmz-forward -i IF -g nmz-if-IF-fwd    ...catch-all
                                  nmz-forward-out -o IF -j nmz-if-IF-fout (masquerade)
  nat     PREROUTING -j nmz-pre   nmz-pre     -i IF -j nmz-if-IF-pre    (forward-ports)
          POSTROUTING -j nmz-post nmz-post    -o IF -j nmz-if-IF-post   (masquerade)
  raw     PREROUTING -j nmz-raw   nmz-raw     -i IF -j nmz-if-IF-raw    (conntrack helpers)
Forwarded traffic is judged by the zone of the interface it came in on; only a zone with
target default asks nmz-forward-out, where an egress zone's masquerade accepts new flows,
before its own tail refuses the rest (see ruleset/layout.py).
Tables a zone does not need get no chains for the interface.
"""

from __future__ import annotations

from ..config.model import ICMP_TYPES, Config, PortRange, Service, Zone
from ..ifname import chain_name
from .layout import (
    CATCHALL_CHAINS,
    CHAIN_KINDS,
    ENDED_LABEL,
    FAMILIES,
    FORWARD_OUT,
    NFLOG_GROUP,
    SECTION_CATCHALL,
    SHARED_LABELS,
    flow_mark_option,
    log_prefix,
    uses_goto,
)
from .plan import before_tail
from .rules import DispatchRule, Match, Rule, Ruleset, TablePlan

ICMP_PROTOCOL = {"ipv4": "icmp", "ipv6": "ipv6-icmp"}
ICMP_MATCH = {"ipv4": ("icmp", "icmp-type"), "ipv6": ("icmp6", "icmpv6-type")}
HOST_PREFIX = {"ipv4": "/32", "ipv6": "/128"}
REJECT_WITH = {"ipv4": "icmp-host-prohibited", "ipv6": "icmp6-adm-prohibited"}
# Router solicitation/advertisement, neighbour solicitation/advertisement, redirect: without
# them IPv6 stops working on the link, so every zone accepts them, block and drop included.
# A zone that accepts all ICMPv6 anyway (target default or accept) needs no rules of its own
# for them: with hundreds of interfaces bound, every rule is copied at every commit.
NEIGHBOUR_DISCOVERY = (133, 134, 135, 136, 137)
# Conntrack helper -> the protocol and port its traffic starts on, and the families it serves.
HELPER_PORTS = {
    "ftp": ("tcp", 21, FAMILIES),
    "tftp": ("udp", 69, FAMILIES),
    "netbios-ns": ("udp", 137, ("ipv4",)),
    "sip": ("udp", 5060, FAMILIES),
    "sane": ("tcp", 6566, FAMILIES),
    "pptp": ("tcp", 1723, ("ipv4",)),
    "irc": ("tcp", 194, FAMILIES),
    "snmp": ("udp", 161, ("ipv4",)),
    "amanda": ("udp", 10080, ("ipv4",)),
}


def _state(*states: str) -> Match:
    return Match("conntrack", (("ctstate", ",".join(states)),))


# A flow a switch ended (flows.py) keeps its conntrack entry with this label: its packets,
# either way and whoever sends them, are dropped before established traffic is accepted.
ENDED = Rule("DROP", matches=(Match("connlabel", (("label", ENDED_LABEL),)),))


def _mark(label: str) -> list[Rule]:
    """An interface's chain gives a flow's first packet the interface's ct mark bits
    (ruleset/layout.py FLOW_MARK_*): a tightening switch then reads only its interface's
    flows and the unmarked ones (flows.py). Placed after the established flows are accepted,
    so only new ones (and untracked packets, which have no entry to mark) pass it; expected
    flows (FTP data) inherit their master's mark. The catch-all and source chains set none."""
    if label in SHARED_LABELS:
        return []
    return [flow_mark_rule(label)]


def flow_mark_rule(label: str) -> Rule:
    """The rule of _mark for any interface (the iptables backend keeps one as a template)."""
    return Rule("CONNMARK", (("set-xmark", flow_mark_option(label)),), matches=(_state("NEW"),))


def _port_rule(port: PortRange, option: str, destination: str | None = None) -> Rule:
    return Rule(
        "ACCEPT",
        destination=destination,
        protocol=port.protocol,
        matches=(Match(port.protocol, ((option, port.iptables),)),),
    )


def _service_rules(service: Service, family: str) -> list[Rule]:
    if not service.applies_to(family):
        return []
    destination = service.destination_for(family)
    rules = [_port_rule(port, "dport", destination) for port in service.ports]
    rules += [_port_rule(port, "sport", destination) for port in service.source_ports]
    rules += [Rule("ACCEPT", destination=destination, protocol=p) for p in service.protocols]
    return rules


def service_specs(service: Service) -> dict[str, tuple]:
    """family -> the specs of the rules that open a service (runtime allowances)."""
    return {family: tuple(r.spec() for r in _service_rules(service, family)) for family in FAMILIES}


def _tail(zone: Zone, family: str, label: str, target: str = "") -> list[Rule]:
    """The end of a chain: what `target` (default: the zone's) does with the rest."""
    target = target or zone.target
    rules = []
    if zone.log_denied and target != "accept":  # the kernel log, and serve's group
        prefix, limit = log_prefix(zone.name, label), (Match("limit", (("limit", "5/min"),)),)
        rules.append(Rule("LOG", (("log-prefix", prefix),), matches=limit))
        group = (("nflog-prefix", prefix), ("nflog-group", str(NFLOG_GROUP)))  # save's order
        rules.append(Rule("NFLOG", group, matches=limit))
    if target == "accept":
        rules.append(Rule("ACCEPT"))
    elif target == "drop":
        rules.append(Rule("DROP"))
    else:
        rules.append(Rule("REJECT", (("reject-with", REJECT_WITH[family]),)))
    return rules


def input_rules(zone: Zone, config: Config, family: str, label: str) -> tuple[Rule, ...]:
    icmp = ICMP_PROTOCOL[family]
    icmp_match, icmp_option = ICMP_MATCH[family]
    rules = [
        ENDED,
        Rule("ACCEPT", matches=(_state("RELATED", "ESTABLISHED"),)),
        *_mark(label),
        Rule("DROP", matches=(_state("INVALID"),)),
    ]
    if family == "ipv6" and zone.target in ("reject", "drop"):
        rules += [
            Rule("ACCEPT", protocol=icmp, matches=(Match(icmp_match, ((icmp_option, str(t)),)),))
            for t in NEIGHBOUR_DISCOVERY
        ]
    for name in zone.icmp_blocks:
        number = ICMP_TYPES[family].get(name)
        if number is not None:
            rules.append(
                Rule(
                    "REJECT",
                    (("reject-with", REJECT_WITH[family]),),
                    protocol=icmp,
                    matches=(Match(icmp_match, ((icmp_option, str(number)),)),),
                )
            )
    if zone.target == "default":
        rules.append(Rule("ACCEPT", protocol=icmp))
    if zone.target != "accept":
        if _forward_ports(zone, family):
            rules.append(Rule("ACCEPT", matches=(_state("DNAT"),)))
        for name in zone.services:
            rules += _service_rules(config.services[name], family)
        rules += [_port_rule(port, "dport") for port in zone.ports]
        rules += [Rule("ACCEPT", protocol=p) for p in zone.protocols]
        if zone.applications:
            from .applications import specs

            rules += [Rule.from_spec(s) for app in zone.applications for s in specs(app)]
    rules += _tail(zone, family, label)
    return tuple(rules)


def forward_rules(zone: Zone, family: str, label: str) -> tuple[Rule, ...]:
    """Traffic routed through this machine that entered on the interface: this zone's
    verdict is final (nmz-forward goes here with -g), whatever the egress interface.

    Flows already admitted pass, and so do new ones to this zone's own forward-ports.
    Whatever else someone DNAT'ed (ports docker or podman publish) goes back to the built-in
    chain, whose later rules (DOCKER-USER, ...) decide as they would without nm-zones. A zone
    that accepts or refuses everything says so (its `forward-target`, when it has one, else
    its target); target default lets the egress zones accept (masquerade), then refuses the
    rest.
    """
    rules = [ENDED, Rule("ACCEPT", matches=(_state("RELATED", "ESTABLISHED"),)), *_mark(label)]
    remote = _forward_ports(zone, family, remote_only=True)
    rules += [_forwarded_port_rule(forward, family) for forward in remote]
    rules += [
        Rule("RETURN", matches=(_state("DNAT"),)),
        Rule("DROP", matches=(_state("INVALID"),)),
    ]
    target = zone.forward_target or zone.target
    if target == "default":
        rules.append(Rule(FORWARD_OUT))
    return tuple(rules + _tail(zone, family, label, target))


def _forwarded_port_rule(forward, family: str) -> Rule:
    """A new flow this zone's forward-port DNAT'ed to another host, by its original port."""
    port = forward.port
    return Rule(
        "ACCEPT",
        destination=forward.to_addr + HOST_PREFIX[family],
        protocol=port.protocol,
        matches=(Match("conntrack", (("ctstate", "DNAT"), ("ctorigdstport", port.iptables))),),
    )


def _forward_ports(zone: Zone, family: str, remote_only: bool = False) -> list:
    """Forward-ports of this family: local redirects serve both, remote ones their own."""
    return [
        forward
        for forward in zone.forward_ports
        if (forward.to_addr is None and not remote_only)
        or (forward.to_addr is not None and (":" in forward.to_addr) == (family == "ipv6"))
    ]


def _nat_prerouting(zone: Zone, family: str) -> tuple[Rule, ...]:
    rules = []
    for forward in _forward_ports(zone, family):
        port = forward.port
        match = (Match(port.protocol, (("dport", port.iptables),)),)
        if forward.to_addr is None:
            target = Rule("REDIRECT", (("to-ports", str(forward.to_port)),))
        else:
            address = forward.to_addr
            if forward.to_port is not None:  # iptables writes [v6]:port, bare v6 alone
                address = f"[{address}]" if family == "ipv6" else address
                address += f":{forward.to_port}"
            target = Rule("DNAT", (("to-destination", address),))
        rules.append(
            Rule(target.target, target.target_options, protocol=port.protocol, matches=match)
        )
    return tuple(rules)


def _helper_rules(zone: Zone, config: Config, family: str) -> tuple[Rule, ...]:
    helpers = sorted({h for s in zone.services for h in config.services[s].helpers})
    rules = []
    for helper in helpers:
        protocol, port, families = HELPER_PORTS[helper]
        if family in families:
            rules.append(
                Rule(
                    "CT",
                    (("helper", helper),),
                    protocol=protocol,
                    matches=(Match(protocol, (("dport", str(port)),)),),
                )
            )
    return tuple(rules)


def compile_interface(interface: str, zone: Zone, config: Config) -> Ruleset:
    """The Ruleset that binds `interface` to `zone`, both families."""
    chains = {kind: chain_name(interface, kind) for kind in CHAIN_KINDS}
    table_plans: dict[str, dict[str, TablePlan]] = {}
    for family in FAMILIES:
        filter_chains = [
            (chains["in"], input_rules(zone, config, family, interface)),
            (chains["fwd"], forward_rules(zone, family, interface)),
        ]
        dispatch = [
            DispatchRule("nmz-input", Rule(chains["in"], in_interface=interface)),
            DispatchRule("nmz-forward", Rule(chains["fwd"], in_interface=interface, goto=True)),
        ]
        masquerade = zone.masquerade and family == "ipv4"
        if masquerade:
            filter_chains.append((chains["fout"], (Rule("ACCEPT", matches=(_state("NEW"),)),)))
            dispatch.append(
                DispatchRule(FORWARD_OUT, Rule(chains["fout"], out_interface=interface))
            )
        family_plans = {"filter": TablePlan(tuple(filter_chains), tuple(dispatch))}
        prerouting = _nat_prerouting(zone, family)
        if prerouting or masquerade:
            nat_chains, nat_dispatch = [], []
            if prerouting:
                nat_chains.append((chains["pre"], prerouting))
                nat_dispatch.append(
                    DispatchRule("nmz-pre", Rule(chains["pre"], in_interface=interface))
                )
            if masquerade:
                nat_chains.append((chains["post"], (Rule("MASQUERADE"),)))
                nat_dispatch.append(
                    DispatchRule("nmz-post", Rule(chains["post"], out_interface=interface))
                )
            family_plans["nat"] = TablePlan(tuple(nat_chains), tuple(nat_dispatch))
        helpers = _helper_rules(zone, config, family)
        if helpers:
            family_plans["raw"] = TablePlan(
                ((chains["raw"], helpers),),
                (DispatchRule("nmz-raw", Rule(chains["raw"], in_interface=interface)),),
            )
        table_plans[family] = family_plans
    return Ruleset(interface, zone.name, table_plans, _forwarding(zone))


def with_allowances(ruleset: Ruleset, extra: dict[str, tuple]) -> Ruleset:
    """The ruleset with runtime allowances' rules (family -> specs, allowances.specs) in its
    input chain, where plan.instantiate puts them: before the zone's tail."""
    chain = chain_name(ruleset.interface, "in")
    table_plans = {}
    for family, family_plans in ruleset.table_plans.items():
        table_plans[family] = dict(family_plans)
        added = tuple(Rule.from_spec(spec) for spec in extra.get(family, ()))
        plan = family_plans.get("filter")
        if plan and added:
            chains = tuple(
                (name, before_tail(rules, added, lambda rule: rule.target))
                if name == chain
                else (name, rules)
                for name, rules in plan.chains
            )
            table_plans[family]["filter"] = TablePlan(chains, plan.dispatch)
    return Ruleset(ruleset.interface, ruleset.zone, table_plans, ruleset.needs_forwarding)


def _forwarding(zone: Zone) -> tuple[str, ...]:
    """The families whose forwarding the zone switches on: masquerade (IPv4) and
    forward-ports to another host, by the family of its address."""
    return tuple(
        family
        for family in FAMILIES
        if (zone.masquerade and family == "ipv4") or _forward_ports(zone, family, remote_only=True)
    )


def source_bindings(config: Config) -> dict[str, str]:
    """source -> zone, for every zone file's `sources`."""
    return {source: zone.name for zone in config.zones.values() for source in zone.sources}


def compile_catchall(zone: Zone, config: Config) -> Ruleset:
    """Default-zone rules for every interface no zone claims, except the exempt ones (the
    source zones join them in cache.CompiledConfig.catchall_plan).

    Only the filter table: it is what keeps a new interface closed before its first event.
    """
    exempt = config.connections_map.exempt_interfaces
    table_plans = {}
    for family in FAMILIES:
        dispatch = []
        for chain, kind in (("nmz-input", "in"), ("nmz-forward", "fwd")):
            for pattern in exempt:
                name = pattern[:-1] + "+" if pattern.endswith("*") else pattern
                dispatch.append(
                    DispatchRule(chain, Rule("RETURN", in_interface=name), SECTION_CATCHALL)
                )
            target = CATCHALL_CHAINS[kind]
            goto = uses_goto(chain, target)
            dispatch.append(DispatchRule(chain, Rule(target, goto=goto), SECTION_CATCHALL))
        chains = (
            (CATCHALL_CHAINS["in"], input_rules(zone, config, family, "*")),
            (CATCHALL_CHAINS["fwd"], forward_rules(zone, family, "*")),
        )
        table_plans[family] = {"filter": TablePlan(chains, tuple(dispatch))}
    return Ruleset(None, zone.name, table_plans)
