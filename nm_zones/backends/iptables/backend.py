"""The iptables backend: libiptc and python-iptables on legacy x_tables (kernel.py,
libiptc.py, entries.py, held.py, iptc_env.py next to this file), behind the Backend
interface (backends/base.py). One view key per (family, table)."""

from __future__ import annotations

from ...errors import KernelError, converting_errors, describe
from ...ruleset.layout import FAMILIES, PANIC_TABLE, PER_INTERFACE_TARGETS, TABLE_ORDER
from ...ruleset.plan import TARGET, KernelPlan, uses_match

ALL_KEYS = frozenset((family, table) for family in FAMILIES for table in TABLE_ORDER)


def _library_errors(backend) -> tuple:
    """The libraries' own errors (libiptc's, python-iptables'): they end at this edge."""
    return backend.netfilter.library_errors()


def _kernel_error(error: Exception) -> KernelError:
    return KernelError(describe(error))


@converting_errors(_library_errors, _kernel_error)
class IptablesBackend:
    name = "iptables"

    def __init__(self, state_dir: str | None = None):
        from .kernel import Netfilter

        self.netfilter = Netfilter(state_dir)
        self.views = self.netfilter.views

    def view_keys(self, tables=None) -> set[tuple[str, str]]:
        return set(ALL_KEYS if tables is None else tables)

    def read_view(self, key) -> dict:
        return self.netfilter.held.read_view(*key)

    def differs(self, key, recorded) -> bool:
        return recorded is None or self.read_view(key) != recorded

    def changed_meanwhile(self) -> set[tuple[str, str]]:
        keys, self.netfilter.changed = self.netfilter.changed, set()
        return keys

    def trust(self, views: dict) -> None:
        """What a commit's view is compared with (kernel.py, changed_meanwhile)."""
        self.netfilter.trusted = {key: view for key, view in views.items() if view}

    def apply(self, plan, previous_tables=None) -> None:
        self.netfilter.apply(without_applications(plan), previous_tables)

    def apply_many(self, items: list) -> None:
        """Several interfaces' plans: one commit per table and family for all of them."""
        self.netfilter.apply_many([(without_applications(p), tables) for p, tables in items])

    def remove(self, interface, previous_tables=None) -> None:
        self.netfilter.remove(interface, previous_tables)

    def remove_chains(self, owned, previous_tables=None) -> None:
        self.netfilter.remove_chains(owned, previous_tables)

    def rebuild(self, key, plans: list, panic: bool = False) -> None:
        self.netfilter.rebuild(*key, [without_applications(p) for p in plans], panic)

    def panic(self, on: bool) -> None:
        self.netfilter.panic(on)

    def holds_panic(self) -> bool | None:
        return self.netfilter.holds_panic()

    def panic_keys(self) -> set[tuple[str, str]]:
        return {(family, PANIC_TABLE) for family in FAMILIES}

    def interface_tokens(self) -> set[str]:
        return self.netfilter.interface_tokens()

    def remove_everything(self) -> None:
        self.netfilter.remove_everything()

    def holds(self, plan) -> bool | None:
        from ...ruleset.rules import Ruleset
        from .verify import kernel_holds

        plan = without_applications(plan)
        return kernel_holds(Ruleset.from_chains_by_table(plan.interface, "", plan.chains_by_table))

    def unlistable(self) -> str:
        """Never: iptables-save's text is read whatever the names (verify.py)."""
        return ""

    def forget_deadlines(self, deadlines) -> None:
        """Nothing kept: a timed rule is the whole of an allowance here."""

    def keep_entries(self, compiled) -> None:
        """Keep kernel entries built in this run for the next ones (entries.py), and only
        those the current config uses."""
        entries = self.netfilter.entries
        if entries.added:
            specs = compiled.specs()
            entries.save(
                lambda family, spec: (
                    (family, spec) in specs or spec[TARGET] in PER_INTERFACE_TARGETS
                )
            )


def legacy_available() -> bool:
    """Whether the kernel has legacy x_tables (IPv4's: libiptc.legacy_tables); libiptc, and
    python-iptables when rules must be built, are checked when the backend is opened."""
    from .libiptc import legacy_tables

    return legacy_tables("ipv4")


def without_applications(plan):
    """The plan without rules that match an application (ruleset/applications.py): legacy
    iptables cannot look up a received packet's socket, so a zone's `applications` open
    nothing here (the config's loader warns), and `allow --app` is refused before."""
    if not any(
        uses_match(spec, "cgroupv2")
        for chains, _ in plan.chains_by_table.values()
        for _, specs in chains
        for spec in specs
    ):
        return plan
    chains_by_table = {
        key: (
            tuple(
                (chain, tuple(s for s in specs if not uses_match(s, "cgroupv2")))
                for chain, specs in chains
            ),
            dispatch,
        )
        for key, (chains, dispatch) in plan.chains_by_table.items()
    }
    return KernelPlan(plan.interface, chains_by_table, plan.forwarding)
