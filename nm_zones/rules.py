"""The Ruleset: the exact chains and rules for one interface, as plain immutable data.

One Rule value renders two ways: to iptables-save text (for `plan`, golden tests and the
status check) and, in kernel.py, to python-iptables objects. The text is the canonical form
iptables-legacy-save prints, so what `plan` shows is what the kernel will report back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .digest import fingerprint

# Built-in chain -> the dispatch chain nm-zones hooks into it, per table.
HOOKS = {
    "filter": (("INPUT", "nmz-input"), ("FORWARD", "nmz-forward")),
    "nat": (("PREROUTING", "nmz-pre"), ("POSTROUTING", "nmz-post")),
    "raw": (("PREROUTING", "nmz-raw"),),
}
TABLE_ORDER = ("raw", "nat", "filter")
# Where a dispatch rule goes in its chain: forward-out rules first, then per-interface
# rules, then the catch-all for interfaces no zone claims.
SECTION_OUT, SECTION_IFACE, SECTION_CATCHALL = 0, 1, 2


@dataclass(frozen=True)
class Match:
    name: str
    options: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Rule:
    target: str
    target_options: tuple[tuple[str, str], ...] = ()
    source: str | None = None
    destination: str | None = None
    in_interface: str | None = None
    out_interface: str | None = None
    protocol: str | None = None
    matches: tuple[Match, ...] = ()

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
                parts += [f"--{option}", _quote(value)]
        parts += ["-j", self.target]
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
    tables: dict[str, dict[str, TablePlan]] = field(default_factory=dict)  # family -> table
    needs_forwarding: bool = False

    def save_text(self, family: str) -> str:
        """iptables-save text of this ruleset, loadable with `-restore --noflush`."""
        lines = []
        for table in TABLE_ORDER:
            plan = self.tables.get(family, {}).get(table)
            if plan is None:
                continue
            lines.append(f"*{table}")
            dispatch_chains = sorted({d.chain for d in plan.dispatch})
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

    def digest(self) -> str:
        """A fingerprint of the rules, to tell whether a re-apply would change anything."""
        text = f"{self.zone}\n{self.needs_forwarding}\n"
        text += self.save_text("ipv4") + self.save_text("ipv6")
        return fingerprint(text)


def _quote(value: str) -> str:
    return f'"{value}"' if (" " in value or not value) else value
