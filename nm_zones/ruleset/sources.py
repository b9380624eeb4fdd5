"""Zones bound by source address: which source has which zone, and the rules that say so.

A source binding comes from a zone file (`sources:`) or from a caller at runtime (D-Bus
`addSource`, kept in the state until the next reload, as firewalld keeps its runtime). The
bindings belong to the catch-all's plan: its commit carries the source zones' chains
(`nmz-s-ZONE-in`, `nmz-s-ZONE-fwd`, the zone's own rules as an interface in it gets them)
and the rules at the head of nmz-input and nmz-forward that lead there
(`-s ADDRESS -j nmz-s-ZONE-in`), so a change of sources is one commit per table (one
transaction with nftables), journaled and repaired like the catch-all.
"""

from __future__ import annotations

from ..addresses import canonical_source, source_family
from .layout import SECTION_SOURCE, SOURCE_KINDS, source_chain
from .plan import ChainsByTable

LABEL = "src"  # what a source zone's LOG prefixes name in place of an interface


def merged(files: dict[str, str], runtime: dict[str, str] | None) -> dict[str, str]:
    """source -> zone: the zone files' bindings with the runtime's changes on top (a runtime
    zone "" removes a file's binding until the next reload)."""
    result = dict(files)
    for source, zone in (runtime or {}).items():
        if zone:
            result[source] = zone
        else:
            result.pop(source, None)
    return result


def by_address(bindings: dict[str, str]) -> dict[str, str]:
    """Canonical source -> zone; a source given twice (`10.0.0.5` and `10.0.0.5/32`) once."""
    result: dict[str, str] = {}
    for source, zone in sorted(bindings.items()):
        result.setdefault(canonical_source(source), zone)
    return result


def _order(source: str) -> tuple:
    """Narrower networks first, so that a host inside a bound network gets its own zone."""
    return (-int(source.rsplit("/", 1)[1]), source)


def with_sources(
    chains_by_table: ChainsByTable, bindings: dict[str, str], zone_chains
) -> ChainsByTable:
    """The catch-all's plan (plan.ChainsByTable) with the source zones' chains and dispatch
    rules added; `zone_chains(zone, family)` gives a zone's {"in": specs, "fwd": specs} for
    that family."""
    if not bindings:
        return chains_by_table
    addresses = by_address(bindings)
    result = dict(chains_by_table)
    for (family, table), (chains, dispatch) in chains_by_table.items():
        if table != "filter":
            continue
        mine = sorted((s for s in addresses if source_family(s) == family), key=_order)
        extra_chains = []
        for zone in sorted({addresses[s] for s in mine}):
            specs = zone_chains(zone, family)
            extra_chains += [(source_chain(zone, kind), specs[kind]) for kind in SOURCE_KINDS]
        extra_dispatch = tuple(
            (chain, SECTION_SOURCE, "src", source, source_chain(addresses[source], kind))
            for source in mine
            for kind, chain in SOURCE_KINDS.items()
        )
        result[(family, table)] = (tuple(chains) + tuple(extra_chains), extra_dispatch + dispatch)
    return result


def plan_with_sources(ruleset, zone, config):
    """What `nm-zones plan IFACE ZONE` shows of a zone with sources: beside the interface's
    rules, the source chains and dispatch rules the catch-all commits for the zone's own
    sources (rules.Ruleset in, rules.Ruleset out)."""
    if not zone.sources:
        return ruleset
    from .build import forward_rules, input_rules
    from .rules import Ruleset

    def zone_chains(_name: str, family: str) -> dict[str, tuple]:
        rules = {
            "in": input_rules(zone, config, family, LABEL),
            "fwd": forward_rules(zone, family, LABEL),
        }
        return {kind: tuple(rule.spec() for rule in chain) for kind, chain in rules.items()}

    bindings = {source: zone.name for source in zone.sources}
    chains_by_table = with_sources(ruleset.chains_by_table(), bindings, zone_chains)
    result = Ruleset.from_chains_by_table(ruleset.interface, ruleset.zone, chains_by_table)
    return Ruleset(result.interface, result.zone, result.table_plans, ruleset.needs_forwarding)
