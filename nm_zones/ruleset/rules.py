"""The Ruleset: the exact chains and rules for one interface, as plain immutable data.

One Rule value renders two ways: to iptables-save text (for `plan`, golden tests and the
status check) and, as a plain `spec` (ruleset/plan.py), to a kernel entry built by
python-iptables (backends/iptables/entries.py) or to nft's words (backends/nftables).
The text is the canonical form iptables-legacy-save prints, so what `plan` shows is what the
kernel will report back.
"""

from __future__ import annotations

from ..digest import fingerprint
from ..lazy import import_deferring
from .layout import EGRESS_CHAINS, HOOKS, SECTION_IFACE, TABLE_ORDER, uses_goto
from .plan import (
    DESTINATION,
    MATCHES,
    PROTOCOL,
    SOURCE,
    TARGET,
    TARGET_OPTIONS,
    ChainsByTable,
    Spec,
    make_spec,
)

# dataclasses uses inspect (10 ms of imports) only for classes without a docstring: every
# class here has one (lazy.py)
dataclasses = import_deferring("dataclasses", ("inspect",))
dataclass, field = dataclasses.dataclass, dataclasses.field


@dataclass(frozen=True)
class Match:
    """An iptables match module and its options, as in `-m tcp --dport 22`."""

    name: str
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Rule:
    """One iptables rule: what it matches and where it jumps."""

    target: str
    target_options: tuple[tuple[str, str], ...] = ()
    source: str | None = None
    destination: str | None = None
    in_interface: str | None = None
    out_interface: str | None = None
    protocol: str | None = None
    matches: tuple[Match, ...] = ()
    goto: bool = False  # -g: the target's verdict, or its end, ends the calling chain too

    @classmethod
    def from_spec(cls, spec: Spec, direction: str = "in", interface: str | None = None) -> Rule:
        return cls(
            spec[TARGET],
            spec[TARGET_OPTIONS],
            spec[SOURCE],
            spec[DESTINATION],
            interface if direction == "in" else None,
            interface if direction == "out" else None,
            spec[PROTOCOL],
            tuple(Match(name, options) for name, options in spec[MATCHES]),
        )

    def spec(self) -> Spec:
        """The rule as plain tuples (marshal-able, hashable), without its interfaces: the
        form kept in the compiled cache and committed by the backends (plan.Spec)."""
        matches = tuple((match.name, match.options) for match in self.matches)
        return make_spec(
            self.target,
            self.target_options,
            self.source,
            self.destination,
            self.protocol,
            matches,
        )

    def interface(self) -> tuple[str, str | None]:
        """("in", name), ("out", name), or ("in", None) for a rule that names none."""
        if self.out_interface:
            return ("out", self.out_interface)
        return ("in", self.in_interface)

    def save_args(self) -> str:
        parts = []
        if self.source:
            parts += ["-s", self.source]
        if self.destination:
            parts += ["-d", self.destination]
        if self.in_interface:
            parts += ["-i", self.in_interface]
        if self.out_interface:
            parts += ["-o", self.out_interface]
        if self.protocol:
            parts += ["-p", self.protocol]
        for match in self.matches:
            parts += ["-m", match.name]
            for option, value in match.options:
                # iptables-save quotes a connection label whatever it is
                quoted = f'"{value}"' if match.name == "connlabel" else _quote(value)
                parts += [f"--{option}", quoted]
        parts += ["-g" if self.goto else "-j", self.target]
        for option, value in self.target_options:
            parts += [f"--{option}", _quote(value)]
        return " ".join(parts)


@dataclass(frozen=True)
class DispatchRule:
    """A rule in a shared dispatch chain (nmz-input, ...) that leads to an interface's chain."""

    chain: str
    rule: Rule
    section: int = SECTION_IFACE


@dataclass(frozen=True)
class TablePlan:
    """Everything one interface owns in one table of one family."""

    chains: tuple[tuple[str, tuple[Rule, ...]], ...] = ()
    dispatch: tuple[DispatchRule, ...] = ()


@dataclass(frozen=True)
class Ruleset:
    """The compiled result for one interface (or for the catch-all, `interface=None`)."""

    interface: str | None
    zone: str
    table_plans: dict[str, dict[str, TablePlan]] = field(default_factory=dict)  # family -> table
    needs_forwarding: tuple[str, ...] = ()  # families whose forwarding the zone switches on

    def save_text(self, family: str) -> str:
        """iptables-save text of this ruleset, loadable with `-restore --noflush`."""
        lines = []
        for table in TABLE_ORDER:
            plan = self.table_plans.get(family, {}).get(table)
            if plan is None:
                continue
            lines.append(f"*{table}")
            used = {d.chain for d in plan.dispatch}
            dispatch_chains = sorted(used | {EGRESS_CHAINS[c] for c in used & set(EGRESS_CHAINS)})
            for chain in dispatch_chains:
                lines.append(f":{chain} - [0:0]")
            for chain, _ in plan.chains:
                lines.append(f":{chain} - [0:0]")
            for builtin, chain in HOOKS[table]:
                if chain in dispatch_chains:
                    lines.append(f"-I {builtin} 1 -j {chain}")
            for chain, rules in plan.chains:
                lines += [f"-A {chain} {rule.save_args()}" for rule in rules]
            for dispatch in sorted(plan.dispatch, key=lambda d: (d.chain, d.section)):
                lines.append(f"-A {dispatch.chain} {dispatch.rule.save_args()}")
            lines.append("COMMIT")
        return "\n".join(lines) + "\n"

    def chains_by_table(self) -> ChainsByTable:
        """The ruleset as plain data for the backends (plan.ChainsByTable)."""
        result = {}
        for family, table_plans in self.table_plans.items():
            for table, plan in table_plans.items():
                chains = tuple(
                    (chain, tuple(rule.spec() for rule in rules)) for chain, rules in plan.chains
                )
                dispatch = tuple(
                    (d.chain, d.section, *_way(d.rule), d.rule.target) for d in plan.dispatch
                )
                result[(family, table)] = (chains, dispatch)
        return result

    @classmethod
    def from_chains_by_table(
        cls, interface: str | None, zone: str, chains_by_table: ChainsByTable
    ) -> Ruleset:
        """The inverse of chains_by_table: what `status` compares with the kernel."""
        result: dict[str, dict[str, TablePlan]] = {}
        for (family, table), (chains, dispatch) in chains_by_table.items():
            result.setdefault(family, {})[table] = TablePlan(
                tuple((chain, tuple(Rule.from_spec(s) for s in specs)) for chain, specs in chains),
                tuple(
                    DispatchRule(chain, _dispatch_rule(chain, way, name, target), section)
                    for chain, section, way, name, target in dispatch
                ),
            )
        return cls(interface, zone, result)

    def digest(self) -> str:
        """A fingerprint of the rules, to tell whether a re-apply would change anything."""
        text = f"{self.zone}\n{self.needs_forwarding}\n"
        text += self.save_text("ipv4") + self.save_text("ipv6")
        return fingerprint(text)


def _way(rule: Rule) -> tuple[str, str | None]:
    """How a dispatch rule matches, for chains_by_table: ("src", address) for a source's rule,
    else by its interface (Rule.interface)."""
    return ("src", rule.source) if rule.source else rule.interface()


def _dispatch_rule(chain: str, way: str, name: str | None, target: str) -> Rule:
    return Rule(
        target,
        source=name if way == "src" else None,
        in_interface=name if way == "in" else None,
        out_interface=name if way == "out" else None,
        goto=uses_goto(chain, target),
    )


def _quote(value: str) -> str:
    return f'"{value}"' if (" " in value or not value) else value
