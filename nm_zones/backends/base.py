"""The Backend interface: what the engine asks of whatever holds the rules in the kernel.

Everything above it (config, resolution, compile, the engine's journal and state, the doors)
is backend-neutral: it hands a backend plan.KernelPlan values (one interface's chains and
dispatch rules, or the catch-all's for interface None) and keeps, per *view key*, the view the
backend recorded after its own last commit. A view key names one unit the backend commits
atomically and can read back cheaply: (family, table) for iptables, ("inet", "nm-zones") for
nftables. The engine compares views before every run (held rules changed behind nm-zones'
back are rebuilt); the event's quick path compares their digests (backends/views.py
picks the reader by the key alone, without loading a backend).

Allowances (`nm-zones allow`, runtime openings with an optional deadline) travel in the plan
as ordinary rules of an interface's input chain. A timed one's matches end with
`("time", (("datestop", "YYYY-MM-DDTHH:MM:SS"),))` (iptables `-m time --datestop`, UTC: the
wall clock, a belt where nothing better exists) and `("comment", (("comment",
"nmz-until-SECONDS"),))`, its deadline on CLOCK_BOOTTIME (ruleset/allowances.py). The
nftables backend leaves the wall clock out: it matches `iifname @nmz-until-SECONDS`, a set
whose one element per interface times out in the kernel at the deadline.
"""

from __future__ import annotations

from typing import Protocol

ViewKey = tuple[str, str]


class Backend(Protocol):
    """One way of holding nm-zones' rules in the kernel."""

    name: str  # "iptables" or "nftables": the settings' word, and what `status` says
    # view key -> the view right after this process committed it (saved by the engine);
    # None: unknown (see changed_meanwhile)
    views: dict[ViewKey, dict | None]

    def view_keys(self, tables=None) -> set[ViewKey]:
        """The view keys a change of these plan tables ((family, table) pairs) commits;
        every key the backend may hold when `tables` is None."""

    def read_view(self, key: ViewKey) -> dict:
        """What the kernel holds of nm-zones under `key` ({} when nothing)."""

    def differs(self, key: ViewKey, recorded) -> bool:
        """Whether the kernel no longer holds what `recorded` (a view; None: unknown) saw.
        A backend may keep what it read to answer, for the trust() that follows the check
        (nftables: the view read at the generation id the ruleset has now)."""

    def changed_meanwhile(self) -> set[ViewKey]:
        """The view keys where another program changed nm-zones' rules that a commit of
        this process left alone, between the run's check of the kernel and that commit
        (recorded as unknown: the engine rebuilds them at once); asked once, then empty."""

    def trust(self, views: dict) -> None:
        """The views the engine has just checked the kernel still holds (or rebuilt): a
        backend may read back only what its next commits change."""

    def apply(self, plan, previous_tables=None) -> None:
        """Put one interface's plan (or the catch-all's, with the hooks) in place; tables
        the interface used before (`previous_tables`, None: unknown) are cleaned."""

    def remove(self, interface: str | None, previous_tables=None) -> None:
        """Take one interface's rules (and the dispatch leading to them) out."""

    def remove_chains(self, owned: frozenset[str], previous_tables=None) -> None:
        """Take the named chains out (orphans of a lost state), with what leads to them."""

    def rebuild(self, key: ViewKey, plans: list, panic: bool = False) -> None:
        """Everything nm-zones has under `key`, rebuilt from `plans` (catch-all first) and
        panic mode's rules when `panic`, in one commit: from whatever another program left
        straight to the intended state."""

    def panic(self, on: bool) -> None:
        """Panic mode's rules in (every packet but loopback's dropped, in, out and forwarded,
        above every zone) or out, one commit per view key; nothing else changes."""

    def panic_keys(self) -> set[ViewKey]:
        """The view keys panic mode's rules live under."""

    def holds_panic(self) -> bool | None:
        """Whether the kernel holds panic mode's rules (None: cannot tell), for `status`."""

    def interface_tokens(self) -> set[str]:
        """The interface part of every `nmz-if-TOKEN-KIND` chain the kernel holds."""

    def remove_everything(self) -> None:
        """Every rule, chain and hook of nm-zones out of the kernel (`disable`)."""

    def holds(self, plan) -> bool | None:
        """Whether the kernel holds the plan (None: cannot tell), for `status`."""

    def unlistable(self) -> str:
        """Why `status` cannot tell whether the kernel holds a plan ("" when it can): another
        program put something in nm-zones' rules that the listing cannot show."""

    def keep_entries(self, compiled) -> None:
        """Keep what this run built for the next runs (iptables' entries), if anything."""

    def forget_deadlines(self, deadlines) -> None:
        """Timed allowances with these deadlines are gone from the state and their rules from
        the kernel: what the backend kept for them goes too (nftables' sets)."""
