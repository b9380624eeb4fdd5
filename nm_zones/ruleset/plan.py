"""The plan: rules as plain tuples, the form they travel in from the compiler to a backend.

An event has tens of milliseconds, so the compiled configuration is kept with marshal
(ruleset/cache.py) and everything in it is plain tuples, dicts and strings; a backend commits
the same plain values. This module is the one place that knows what each position holds:
everyone else reads a rule spec by the index names below (tools/house.py counts the
positional uses outside this module; tests/test_house.py keeps them at none).

The shapes, innermost first:

  Spec          one rule without its interfaces (rules.Rule.spec; back: rules.Rule.from_spec):
                (target, target options, source, destination, protocol, matches), read as
                spec[TARGET] ... spec[MATCHES], made by make_spec. Options are
                ((option, value), ...); matches are ((module, options), ...), as in
                `-m tcp --dport 22`: ("tcp", (("dport", "22"),)). An application's match is
                ("cgroupv2", (("app", APP), ("level", N))) (ruleset/applications.py).
  Chain         (chain name, (Spec, ...)): the rules of one chain, in order.
  Dispatch      (dispatch chain, section, way, name, target): a rule in a shared dispatch
                chain (nmz-input, ...) that leads to the chain `target`; way "in" or "out"
                with an interface name (None: any), or "src" with a source address
                (ruleset/sources.py); section orders it (ruleset/layout.py SECTION_*).
  KernelTable   ((Chain, ...), (Dispatch, ...)): what a plan has in one table.
  ChainsByTable {(family, table): KernelTable}: a whole plan (rules.Ruleset.chains_by_table);
                its keys are the plan's `tables`, the (family, table) pairs it uses, the
                word's one meaning everywhere (state, engine, backends).

  ZonePlan      a zone compiled once for no interface (the compiled cache): a ChainsByTable
                with chain kinds (layout.CHAIN_KINDS: "in", "fwd", ...) in place of chain
                names, and dispatch rules as (dispatch chain, section, direction, kind).
  KernelPlan    one interface's (the catch-all's: interface None) ChainsByTable, what a
                backend commits: instantiate(zone plan, interface).
"""

from __future__ import annotations

from ..ifname import chain_name
from .layout import LOG_TARGETS, PREFIX_OPTIONS, flow_mark_option, log_prefix

Options = tuple[tuple[str, str], ...]
MatchSpec = tuple[str, Options]  # (match module, its options)
Spec = tuple[str, Options, str | None, str | None, str | None, tuple[MatchSpec, ...]]
TARGET, TARGET_OPTIONS, SOURCE, DESTINATION, PROTOCOL, MATCHES = range(6)

TableKey = tuple[str, str]  # (family, table)
Chain = tuple[str, tuple[Spec, ...]]
Dispatch = tuple[str, int, str, str | None, str]  # (chain, section, way, name, target)
TemplateDispatch = tuple[str, int, str, str]  # (chain, section, direction, kind)
KernelTable = tuple[tuple[Chain, ...], tuple[Dispatch, ...]]
ChainsByTable = dict[TableKey, KernelTable]
NO_TABLE: KernelTable = ((), ())  # a table the plan has nothing in


def make_spec(
    target: str,
    target_options: Options = (),
    source: str | None = None,
    destination: str | None = None,
    protocol: str | None = None,
    matches: tuple[MatchSpec, ...] = (),
) -> Spec:
    return (target, target_options, source, destination, protocol, matches)


def with_matches(spec: Spec, *matches: MatchSpec) -> Spec:
    """The rule with more matches after its own."""
    return (*spec[:MATCHES], spec[MATCHES] + matches)


def conditions(spec: Spec) -> Spec:
    """What a packet must match for the rule: the spec without its target (as "")."""
    return ("", (), *spec[SOURCE:])


def uses_match(spec: Spec, name: str) -> bool:
    return any(match == name for match, _ in spec[MATCHES])


def chain_specs(chains_by_table: ChainsByTable, key: TableKey, chain: str) -> tuple[Spec, ...]:
    """The rules of one chain of a plan (a zone plan: of one chain kind); () when none."""
    for name, specs in chains_by_table.get(key, NO_TABLE)[0]:
        if name == chain:
            return specs
    return ()


def before_tail(rules: tuple, extra: tuple, target=lambda spec: spec[TARGET]) -> tuple:
    """`extra` inserted before an input chain's tail: its verdict, and the LOG and NFLOG
    rules before it when the zone logs what it refuses (build._tail). `target` names a
    rule's target (rules are specs here, rules.Rule values in build.with_allowances)."""
    tail = 1
    while len(rules) > tail and target(rules[-tail - 1]) in LOG_TARGETS:
        tail += 1
    return rules[:-tail] + tuple(extra) + rules[-tail:]


def for_interface(spec: Spec, zone: str, interface: str) -> Spec:
    """A zone plan's rule as it is for `interface` (a LOG or NFLOG rule names it in its
    prefix, the CONNMARK rule gives its flows the interface's mark)."""
    if spec[TARGET] in LOG_TARGETS:
        options = tuple(
            (option, log_prefix(zone, interface) if option in PREFIX_OPTIONS else value)
            for option, value in spec[TARGET_OPTIONS]
        )
    elif spec[TARGET] == "CONNMARK":
        options = (("set-xmark", flow_mark_option(interface)),)
    else:
        return spec
    return (spec[TARGET], options, *spec[SOURCE:])


class ZonePlan:
    """One zone, ready to be instantiated for any interface (its data as the compiled cache
    keeps it: cache.build)."""

    __slots__ = ("chains_by_table", "digest", "fallback", "forwarding", "name", "problem")

    def __init__(self, data: dict):
        self.name: str = data["name"]  # what is applied: the zone, or what stands in for it
        self.digest: str = data["digest"]  # fingerprint of the rules, for an interface-free name
        self.problem: str = data["problem"]  # why the configured zone cannot be used
        self.fallback: str = data["fallback"]  # what stands in for it
        self.forwarding: tuple[str, ...] = data["forwarding"]  # families to forward
        # chain kinds in place of chain names, dispatch as TemplateDispatch (see above)
        self.chains_by_table: ChainsByTable = data["chains_by_table"]

    @property
    def degraded(self) -> str:
        return f"{self.problem}; {self.fallback}" if self.problem else ""


class KernelPlan:
    """The chains and dispatch rules of one interface (None: the catch-all), plain data for
    the backends."""

    __slots__ = ("chains_by_table", "forwarding", "interface")

    def __init__(
        self,
        interface: str | None,
        chains_by_table: ChainsByTable,
        forwarding: tuple[str, ...] = (),
    ):
        self.interface, self.chains_by_table = interface, chains_by_table
        self.forwarding = forwarding

    @property
    def tables(self):
        """The (family, table) pairs the plan uses."""
        return self.chains_by_table.keys()


def template(chains_by_table: ChainsByTable, interface: str, kinds: tuple[str, ...]) -> dict:
    """A zone plan's ChainsByTable from its plan for `interface`: chain kinds in place of
    its chain names (the inverse of instantiate)."""
    kind_of = {chain_name(interface, kind): kind for kind in kinds}
    return {
        key: (
            tuple((kind_of[chain], specs) for chain, specs in chains),
            tuple(
                (chain, section, direction, kind_of[target])
                for chain, section, direction, _, target in dispatch
            ),
        )
        for key, (chains, dispatch) in chains_by_table.items()
    }


def instantiate(zone: ZonePlan, interface: str, allowed: dict | None = None) -> KernelPlan:
    """The zone's rules for `interface`: its chain names, and its name in log prefixes;
    `allowed` (family -> rule specs: runtime allowances, ruleset/allowances.py) go into its input
    chain just before the zone's tail."""
    chains_by_table = {}
    for key, (chains, dispatch) in zone.chains_by_table.items():
        extra = allowed.get(key[0]) if allowed and key[1] == "filter" else None
        chains_by_table[key] = (
            tuple(
                (
                    chain_name(interface, kind),
                    tuple(
                        for_interface(spec, zone.name, interface)
                        for spec in (before_tail(specs, extra) if extra and kind == "in" else specs)
                    ),
                )
                for kind, specs in chains
            ),
            tuple(
                (chain, section, direction, interface, chain_name(interface, kind))
                for chain, section, direction, kind in dispatch
            ),
        )
    return KernelPlan(interface, chains_by_table, zone.forwarding)
