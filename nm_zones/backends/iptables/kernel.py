"""The one module that changes netfilter, through libiptc (legacy x_tables).

An interface's rules are replaced with one commit per table per family, under the xtables
lock that the iptables commands use. A commit replaces a whole table atomically, so no table
is ever seen half-built. Within a commit only the interface's own chains and its rules in the
shared dispatch chains change; everything else in the table (other interfaces, docker, the
admin's rules, policies) is written back exactly as it was read, counters included.

Order of commits: raw, nat, then filter when applying, so that the filter table, which decides,
changes last; filter first when removing, so the catch-all takes over before NAT goes away.

It works on plain plans (plan.KernelPlan: chain names, rule specs, dispatch rules) and
commits each rule as the entry python-iptables built for it (entries.py), through libiptc's
own calls (libiptc.py): python-iptables is imported only to build an entry never seen.
"""

from __future__ import annotations

import errno
import os
import time

from ...errors import KernelError
from ...ifname import chain_name
from ...locks import file_lock
from ...ruleset.layout import (
    CATCHALL_CHAINS,
    CHAIN_KINDS,
    DISPATCH,
    EGRESS_CHAINS,
    FAMILIES,
    HOOKS,
    LOOPBACK,
    PANIC_CHAINS,
    PANIC_TABLE,
    SECTION_CATCHALL,
    TABLE_ORDER,
    is_source_chain,
    uses_goto,
)
from ..common import (
    CommitRefused,
    check_netns_allowed,
    enable_forwarding,
    faults_from_environment,
)
from .held import BYPASS, HOOK_NAMES, HeldTables
from .libiptc import IPTCError, Table, library

XTABLES_LOCK = os.environ.get("XTABLES_LOCKFILE") or "/run/xtables.lock"
LOCK_WAIT_SECONDS = 10.0
COMMIT_ATTEMPTS = 8
NO_CHANGE = ((), ())  # a table plan that removes an interface's chains and dispatch rules
DROP = ("DROP", (), None, None, None, ())  # `-j DROP`, the end of every panic chain
PANIC_OWNED = frozenset(chain for _, chain, _ in PANIC_CHAINS)


def xtables_lock(path: str = XTABLES_LOCK, wait: float = LOCK_WAIT_SECONDS):
    """The flock that `iptables -w` takes, so nm-zones and iptables never interleave."""
    return file_lock(path, wait, "another program")


CATCHALL_OWNED = frozenset(CATCHALL_CHAINS.values())


def owned_chains(interface: str | None) -> frozenset[str]:
    """The chains of an interface; for None, those of the catch-all, which also owns the
    RETURN rules of exempt interfaces in the dispatch chains."""
    if interface is None:
        return CATCHALL_OWNED
    return frozenset(chain_name(interface, kind) for kind in CHAIN_KINDS)


class Netfilter:
    """libiptc, one table of one family at a time.

    Plans (plan.KernelPlan) hold rules as specs; `state_dir` is where their entries are
    kept between runs (entries.py), None to build every entry afresh.
    """

    def __init__(self, state_dir: str | None = None):
        check_netns_allowed()
        from .entries import Entries

        # what cannot be loaded fails the opening, where the engine can still choose the
        # other backend: libiptc always, python-iptables when no entry is kept (a first run)
        for family in FAMILIES:
            library(family)
        self.entries = Entries(state_dir)
        if not self.entries.known:
            self.entries.python_iptables()
        # (family, table) -> the view of nm-zones' rules right after this process committed it
        self.views: dict[tuple[str, str], dict | None] = {}
        # (family, table) -> the view the run checked or this process last committed
        self.trusted: dict[tuple[str, str], dict] = {}
        self.changed: set[tuple[str, str]] = set()  # Backend.changed_meanwhile
        self.held = HeldTables()  # every read of a view, its walk skipped when unchanged
        self.faults = faults_from_environment()

    def library_errors(self) -> tuple:
        """The errors of the libraries below: libiptc's, and python-iptables' once imported."""
        return (IPTCError, *self.entries.build_errors())

    def _read(self, family: str, name: str) -> Table:
        """The table as the kernel holds it now, read once (a read copies every rule of
        the table: with hundreds of interfaces bound it is a large part of an event)."""
        return Table(family, name)

    def _targets(self, table: Table, chain: str) -> list[str]:
        """The target name of each rule in a chain."""
        return [_name_of(target) for target in table.targets(chain)]

    def _delete_rules(self, table: Table, chain: str, doomed) -> None:
        for number in sorted(doomed, reverse=True):
            table.delete_rule(chain, number)

    def _edit(self, table, family: str, name: str, owned: frozenset[str], plan: tuple) -> bool:
        """Make the table hold `plan` for the `owned` chains; False when it already holds
        nothing of theirs and the plan is empty (no commit needed)."""
        chains, dispatch = plan
        catchall = owned == CATCHALL_OWNED
        present = [c for c in sorted(owned) if table.is_chain(c)]
        if catchall:  # the source zones' chains are the catch-all's too
            present += sorted(c for c in _chain_names(table) if is_source_chain(c))
        if not chains and not dispatch and not present and not catchall:
            return False  # dispatch rules only lead to owned chains, and there are none
        self._hook_dispatch_chains(table, family, name, {rule[0] for rule in dispatch})
        if catchall or not self._delete_dispatch_rules(table, family, name, present):
            self._delete_by_scan(table, name, owned, catchall)
        self._fill_chains(table, family, chains, present)
        self._add_dispatch_rules(table, family, dispatch)
        return True

    def _hook_dispatch_chains(self, table, family: str, name: str, used: set[str]) -> None:
        """Create the dispatch chains the plan uses (and the egress chains their ingress
        chains jump to), each hooked into its built-in chain once."""
        for builtin, dispatch_chain in HOOKS[name]:
            if dispatch_chain in used:
                if not table.is_chain(dispatch_chain):
                    table.create_chain(dispatch_chain)
                targets = self._targets(table, builtin)
                if dispatch_chain not in targets:
                    entry = self.entries.dispatch(family, dispatch_chain)
                    table.insert_entry(builtin, entry, _below_panic(targets))
                egress = EGRESS_CHAINS.get(dispatch_chain)
                if egress and not table.is_chain(egress):
                    table.create_chain(egress)  # the ingress chains jump to it

    def _fill_chains(self, table, family: str, chains: tuple, present: list[str]) -> None:
        """Empty the owned chains that exist, delete those the plan no longer has, and fill
        the plan's chains with their rules."""
        wanted = {chain for chain, _ in chains}
        for chain in present:
            table.flush_entries(chain)
            if chain not in wanted:
                self._delete_chain(table, chain)
        for chain, specs in chains:
            if not table.is_chain(chain):
                table.create_chain(chain)
            for spec in specs:
                table.append_entry(chain, self.entries.buffer(family, spec))

    def _add_dispatch_rules(self, table, family: str, dispatch: tuple) -> None:
        """Add the rules that lead from the dispatch chains to the plan's chains."""
        for dispatch_chain, section, direction, interface, target in dispatch:
            goto = uses_goto(dispatch_chain, target)
            entry = self.entries.dispatch(family, target, direction, interface, goto)
            position = self._position(table, dispatch_chain, section)
            if position is None:
                table.append_entry(dispatch_chain, entry)
            else:
                table.insert_entry(dispatch_chain, entry, position)

    def _delete_dispatch_rules(self, table, family: str, name: str, present) -> bool:
        """Delete the dispatch rules of an interface's chains by their exact entries (libiptc
        finds them; no rule is read into Python). False when some other rule still leads to
        one of the chains: then only reading every dispatch rule finds it."""
        for chain in present:
            kind = chain.rsplit("-", 1)[1]
            token = chain[len("nmz-if-") : -len(kind) - 1]
            dispatch_chain, direction = DISPATCH[kind]
            if token.startswith("~") or not table.is_chain(dispatch_chain):
                return False  # a hashed token does not give the interface name back
            goto = uses_goto(dispatch_chain, chain)
            entry = self.entries.dispatch(family, chain, direction, token, goto)
            while table.delete_entry(dispatch_chain, entry):
                pass
        return not any(table.references(chain) for chain in present)

    def _delete_by_scan(self, table, name: str, owned, catchall: bool) -> None:
        """Delete every dispatch rule that leads to an owned chain (and the catch-all's
        RETURN rules), reading each dispatch chain's targets."""
        for _, hooked in HOOKS[name]:
            for dispatch_chain in (hooked, EGRESS_CHAINS.get(hooked)):
                if not dispatch_chain or not table.is_chain(dispatch_chain):
                    continue
                targets = self._targets(table, dispatch_chain)
                doomed = [
                    i
                    for i, t in enumerate(targets)
                    if t in owned or (catchall and (t == "RETURN" or is_source_chain(t)))
                ]
                self._delete_rules(table, dispatch_chain, doomed)

    def _position(self, table, chain: str, section: int) -> int | None:
        """Where a dispatch rule of `section` goes: an interface's at the top of its chain
        (each matches its own interface, so their order does not matter) but below the
        sources' rules, a source's after those before it (the plan's order: narrower
        networks first), the catch-all at the end (None)."""
        if section == SECTION_CATCHALL:
            return None
        position = 0
        for target in table.targets(chain):
            if not is_source_chain(_name_of(target)):
                break
            position += 1
        return position

    def _commit_table(self, family: str, name: str, owned: frozenset[str], plan: tuple) -> None:
        """Commit one table; when the kernel refuses entries kept from earlier runs, build
        them afresh and try once more."""
        self._commit_table_parts(family, name, [(owned, plan)])

    def _commit_table_parts(self, family: str, name: str, parts: list) -> None:
        """One commit of one table holding each (owned chains, table plan) of `parts`: a
        zone-wide change commits each table once, whatever the number of interfaces."""
        for owned, _ in parts:
            self.faults.check(owned)
        specs = [spec for _, plan in parts for _, chain_specs in plan[0] for spec in chain_specs]
        # build what is missing before taking the lock: other writers wait less
        self.entries.ensure(family, specs)

        def edit(table) -> bool:
            edited = [self._edit(table, family, name, owned, plan) for owned, plan in parts]
            return any(done is not False for done in edited)

        touched = frozenset().union(*(owned for owned, _ in parts))
        try:
            self._locked_commit(family, name, edit, touched)
        except CommitRefused:
            if not self.entries.from_file:
                raise
            self.entries.forget()
            self.entries.ensure(family, specs)
            self._locked_commit(family, name, edit, touched)

    def _locked_commit(
        self, family: str, name: str, edit, touched: frozenset[str] | None = None
    ) -> None:
        """Read a table, `edit(table)` it and commit (unless edit says there is nothing to
        do), under the lock; when another writer committed in between (EAGAIN), read again
        and redo, with a bounded backoff. The next use of the table reads it afresh.

        The commit writes back the whole table as libiptc read it, so another program's
        change made after the run checked the table goes in with it: when the chains of
        nm-zones this commit did not `touch` are no longer as checked, the view is not
        recorded (changed_meanwhile) and the engine rebuilds the table."""
        self.faults.before_commit()
        for attempt in range(COMMIT_ATTEMPTS):
            with xtables_lock():
                table = None
                try:
                    table = self._read(family, name)
                    if edit(table) is not False:
                        table.commit()
                        self.faults.after_commit()
                    _release(table)
                    self._record(family, name, touched)
                    return
                except IPTCError as error:
                    _release(table)  # drops what was pending
                    if error.errno != errno.EAGAIN:
                        raise CommitRefused(f"{family} {name}: {error}") from None
                    if attempt == COMMIT_ATTEMPTS - 1:
                        raise KernelError(f"{family} {name}: kept changing under us") from None
                except Exception as error:
                    _release(table)
                    if isinstance(error, self.entries.build_errors()):  # an entry not built
                        raise CommitRefused(f"{family} {name}: {error}") from None
                    raise
            time.sleep(0.002 * 2**attempt)

    def _record(self, family: str, name: str, touched: frozenset[str] | None) -> None:
        """The view after a commit, for the state; None when it shows another program's
        change to what the commit left alone (see _locked_commit)."""
        key = (family, name)
        view: dict | None = self.held.read_view(family, name)
        base = self.trusted.get(key)
        if touched is not None and base and changed_meanwhile(base, view, touched):
            self.changed.add(key)
            view = None
        self.views[key] = view
        if view is None:
            self.trusted.pop(key, None)
        else:
            self.trusted[key] = view

    def apply(self, plan, previous_tables: set[tuple[str, str]] | None = None) -> None:
        """Put a plan.KernelPlan in place; tables the interface used before but no
        longer needs are cleaned (all tables are checked when `previous_tables` is unknown)."""
        self.apply_many([(plan, previous_tables)])

    def apply_many(self, items: list) -> None:
        """Each (KernelPlan, previous tables) of `items` in place, with one commit per table
        and family for all of them."""
        parts: dict[tuple[str, str], list] = {}
        for plan, previous_tables in items:
            owned = owned_chains(plan.interface)
            for family in FAMILIES:
                for name in TABLE_ORDER:
                    table_plan = plan.chains_by_table.get((family, name))
                    if table_plan is None:
                        if previous_tables is not None and (family, name) not in previous_tables:
                            continue
                        if not _table_loaded(family, name):
                            continue
                        table_plan = NO_CHANGE
                    parts.setdefault((family, name), []).append((owned, table_plan))
        for family in FAMILIES:
            for name in TABLE_ORDER:
                if (family, name) in parts:
                    self._commit_table_parts(family, name, parts[(family, name)])
        forwarding = sorted({f for plan, _ in items for f in plan.forwarding or ()})
        if forwarding:
            enable_forwarding(forwarding)

    def remove(
        self, interface: str | None, previous_tables: set[tuple[str, str]] | None = None
    ) -> None:
        self.remove_chains(owned_chains(interface), previous_tables)

    def remove_chains(
        self, owned: frozenset[str], previous_tables: set[tuple[str, str]] | None = None
    ) -> None:
        """Remove the given chains and the dispatch rules leading to them; filter first."""
        for family in FAMILIES:
            for name in reversed(TABLE_ORDER):
                if previous_tables is not None and (family, name) not in previous_tables:
                    continue
                if _table_loaded(family, name):
                    self._commit_table(family, name, owned, NO_CHANGE)

    def panic(self, on: bool) -> None:
        """Panic mode in (on) or out: one commit of each family's filter table, chains and
        hooks together; zone rules below stay as they are."""
        for family in FAMILIES:
            if on or _table_loaded(family, PANIC_TABLE):
                edit = lambda table, f=family: self._set_panic(table, f, on)  # noqa: E731
                self._locked_commit(family, PANIC_TABLE, edit, PANIC_OWNED)

    def _set_panic(self, table, family: str, on: bool) -> bool:
        """The panic chains and their hooks made afresh (on) or taken out; False when the
        table holds none and none are wanted."""
        if not on and not any(table.is_chain(chain) for chain in PANIC_OWNED):
            return False
        self._drop_panic(table)
        if on:
            self._add_panic(table, family)
        return True

    def _drop_panic(self, table) -> None:
        for builtin, chain, _ in PANIC_CHAINS:
            targets = self._targets(table, builtin)
            self._delete_rules(table, builtin, [i for i, t in enumerate(targets) if t == chain])
        for _, chain, _ in PANIC_CHAINS:
            if table.is_chain(chain):
                table.flush_entries(chain)
                self._delete_chain(table, chain)

    def _add_panic(self, table, family: str) -> None:
        """Each panic chain (loopback returns, everything else is dropped), jumped to from
        the top of its built-in chain: above nm-zones' own hooks, so no zone accepts first."""
        for builtin, chain, direction in PANIC_CHAINS:
            if not table.is_chain(chain):
                table.create_chain(chain)
            if direction:
                spare = self.entries.dispatch(family, "RETURN", direction, LOOPBACK)
                table.append_entry(chain, spare)
            table.append_entry(chain, self.entries.buffer(family, DROP))
            table.insert_entry(builtin, self.entries.dispatch(family, chain), 0)

    def holds_panic(self) -> bool | None:
        """Whether both families' filter tables hold the panic chains and hooks as
        _add_panic puts them (None: cannot tell)."""
        from .verify import saved_rules

        for family in FAMILIES:
            chains = saved_rules(family, PANIC_TABLE)
            if chains is None:
                return None
            for builtin, chain, direction in PANIC_CHAINS:
                spare = [f"-{direction[0]} {LOOPBACK} -j RETURN"] if direction else []
                if chains.get(chain) != [*spare, "-j DROP"]:
                    return False
                if chains.get(builtin, [])[:1] != [f"-j {chain}"]:
                    return False
        return True

    def rebuild(self, family: str, name: str, plans: list, panic: bool = False) -> None:
        """Everything nm-zones has in one table, rebuilt from `plans` (the catch-all first,
        then each interface) and panic mode when it is on, in one commit: the table another
        program changed goes straight from its state to the intended one, with no moment
        less strict than either."""
        for plan in plans:
            self.faults.check(owned_chains(plan.interface))
            table_plan = plan.chains_by_table.get((family, name))
            if table_plan:
                self.entries.ensure(family, [s for _, specs in table_plan[0] for s in specs])

        def edit(table) -> bool:
            self._remove_ours(table, name)
            for plan in plans:
                table_plan = plan.chains_by_table.get((family, name))
                if table_plan:
                    self._edit(table, family, name, owned_chains(plan.interface), table_plan)
            if panic and name == PANIC_TABLE:
                self._add_panic(table, family)
            return True

        self._locked_commit(family, name, edit)

    def interface_tokens(self) -> set[str]:
        """The interface part of every `nmz-if-TOKEN-KIND` chain in the kernel."""
        tokens = set()
        for family in FAMILIES:
            for name in TABLE_ORDER:
                if not _table_loaded(family, name):
                    continue
                table = self._read(family, name)
                for chain in _chain_names(table):
                    if chain.startswith("nmz-if-"):
                        tokens.add(chain[len("nmz-if-") :].rsplit("-", 1)[0])
                _release(table)
        return tokens

    def remove_everything(self) -> None:
        """Every chain and hook nm-zones made, in every table and family (`disable`)."""
        for family in FAMILIES:
            for name in reversed(TABLE_ORDER):
                if _table_loaded(family, name):
                    self._locked_commit(family, name, lambda t, n=name: self._remove_ours(t, n))

    def _remove_ours(self, table, name: str) -> bool:
        ours = [chain for chain in _chain_names(table) if chain.startswith("nmz-")]
        if not ours:
            return False
        hooks = list(HOOKS[name])
        if name == PANIC_TABLE:
            hooks += [(builtin, chain) for builtin, chain, _ in PANIC_CHAINS]
        for builtin, dispatch_chain in hooks:
            targets = self._targets(table, builtin)
            self._delete_rules(
                table, builtin, [i for i, t in enumerate(targets) if t == dispatch_chain]
            )
        for chain in ours:
            table.flush_entries(chain)
        for chain in ours:
            self._delete_chain(table, chain)
        return True

    def _delete_chain(self, table: Table, chain: str) -> None:
        """Delete an emptied chain; one that another program's rule still jumps to stays,
        empty (it returns at once), so that rule is never touched and the commit goes
        through."""
        if not table.references(chain):
            table.delete_chain(chain)


def _below_panic(targets: list[str]) -> int:
    """Where a hook of nm-zones goes in its built-in chain: at the top, yet below the panic
    hooks (a zone must never accept what panic mode drops)."""
    position = 0
    while position < len(targets) and targets[position] in PANIC_OWNED:
        position += 1
    return position


def _name_of(name: bytes) -> str:
    """A chain's or target's name as libiptc hands it out. x_tables takes any bytes for a
    name, and another program's may not be UTF-8: a strict decoding would raise then, and
    every commit of the table would fail with it."""
    return name.decode("utf-8", "surrogateescape")


def _chain_names(table: Table) -> list[str]:
    """The table's chains that nm-zones could have made, as libiptc has them: ASCII, as
    every interface's token is (ifname.py). Another program's name that is not (not even
    UTF-8, see _name_of) is left out: it is no name of nm-zones', and held.py's view sees
    any such chain that starts like nm-zones' own."""
    return [name for name in map(_name_of, table.chains()) if name.isascii()]


def _table_loaded(family: str, name: str) -> bool:
    """Avoid loading nat or raw into a kernel just to find them empty."""
    path = "/proc/net/ip_tables_names" if family == "ipv4" else "/proc/net/ip6_tables_names"
    try:
        with open(path) as names:
            return name in names.read().split()
    except OSError:
        return True


def _release(table) -> None:
    """Free libiptc's copy of the table (and drop what was pending in it): every use reads
    the table afresh anyway, and a copy kept between uses held several MiB of a service's
    memory with hundreds of interfaces bound."""
    if table is not None:
        table.close()


# the dispatch chains: every interface's commit changes its rules in them
SHARED_CHAINS = frozenset(chain for chain, _ in DISPATCH.values())


def changed_meanwhile(before: dict, after: dict, touched: frozenset[str]) -> bool:
    """Whether a table's view after a commit shows a change the commit did not make: an
    nm-zones chain it did not touch (the dispatch chains aside, which every commit
    changes) differs, a jump of a built-in chain to an nm-zones chain it did not touch is
    gone, or another program's rule ahead of nm-zones' jump can let a packet past it. Only
    the entries that differ are looked at (a set operation in C: a view with 200
    interfaces bound has 1 200)."""
    try:
        differing = {key for key, _ in before.items() ^ after.items()}
    except TypeError:  # a value that is not hashable (a state not written by marshal)
        keys = before.keys() | after.keys()
        differing = {key for key in keys if before.get(key) != after.get(key)}
    catchall = bool(touched & CATCHALL_OWNED)  # the source zones' chains are the catch-all's
    for key in differing:
        if key in HOOK_NAMES:  # a jump gone that the commit did not own (panic mode's)
            lost = set(before.get(key, ())) - set(after.get(key, ()))
            if any(jump.partition("@")[0] not in touched for jump in lost):
                return True
        elif key.endswith(BYPASS):
            if key in after:
                return True
        elif (
            key.startswith("nmz-")
            and key not in touched
            and key not in SHARED_CHAINS
            and not (catchall and is_source_chain(key))
        ):
            return True
    return False
