"""The one module that changes netfilter, through python-iptables (legacy x_tables).

An interface's rules are replaced with one commit per table per family, under the xtables
lock that the iptables commands use. A commit replaces a whole table atomically, so no table
is ever seen half-built. Within a commit only the interface's own chains and its rules in the
shared dispatch chains change; everything else in the table (other interfaces, docker, the
admin's rules, policies) is written back exactly as it was read, counters included.

Order of commits: raw, nat, then filter when applying, so that the filter table, which decides,
changes last; filter first when removing, so the catch-all takes over before NAT goes away.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterable

from .compile import CATCHALL_CHAINS, CHAIN_KINDS
from .errors import KernelError
from .ifname import chain_name
from .iptc_env import NAT_TARGETS, import_iptc
from .locks import file_lock
from .model import FAMILIES, IP_PROTOCOLS
from .rules import (
    HOOKS,
    SECTION_CATCHALL,
    SECTION_OUT,
    TABLE_ORDER,
    Rule,
    Ruleset,
    TablePlan,
)

XTABLES_LOCK = os.environ.get("XTABLES_LOCKFILE") or "/run/xtables.lock"
LOCK_WAIT_SECONDS = 10.0
COMMIT_ATTEMPTS = 8
REFUSE_NETNS_ENV = "NM_ZONES_REFUSE_NETNS"
IFNAMSIZ_BYTES = 16


def current_netns() -> str:
    info = os.stat("/proc/self/ns/net")
    return f"{info.st_dev}:{info.st_ino}"


def check_netns_allowed() -> None:
    """Tests name the network namespace they run in; nm-zones refuses to change it."""
    refused = os.environ.get(REFUSE_NETNS_ENV)
    if refused and current_netns() in refused.split(","):
        raise KernelError(
            f"refusing to change netfilter in this network namespace ({REFUSE_NETNS_ENV})"
        )


def xtables_lock(path: str = XTABLES_LOCK, wait: float = LOCK_WAIT_SECONDS):
    """The flock that `iptables -w` takes, so nm-zones and iptables never interleave."""
    return file_lock(path, wait, "another program")


def owned_chains(interface: str | None) -> frozenset[str]:
    if interface is None:
        return frozenset(CATCHALL_CHAINS.values())
    return frozenset(chain_name(interface, kind) for kind in CHAIN_KINDS)


class Netfilter:
    """python-iptables, one table of one family at a time."""

    def __init__(self):
        check_netns_allowed()
        self.iptc = import_iptc()

    def _table(self, family: str, name: str):
        table = self.iptc.Table(name) if family == "ipv4" else self.iptc.Table6(name)
        table.autocommit = False
        return table

    def _rule(self, family: str, rule: Rule):
        iptc = self.iptc
        entry = iptc.Rule() if family == "ipv4" else iptc.Rule6()
        if rule.source:
            entry.src = rule.source
        if rule.destination:
            entry.dst = rule.destination
        if rule.in_interface:
            entry.in_interface = rule.in_interface
            _fix_interface_mask(entry, family, "in", rule.in_interface)
        if rule.out_interface:
            entry.out_interface = rule.out_interface
            _fix_interface_mask(entry, family, "out", rule.out_interface)
        if rule.protocol:
            entry.protocol = str(IP_PROTOCOLS[rule.protocol])
        for match in rule.matches:
            module = entry.create_match(match.name)
            for option, value in match.options:
                module.set_parameter(option, value)
        target = entry.create_target(rule.target)
        for option, value in rule.target_options:
            target.set_parameter(option, value)
        return entry

    def _targets(self, table, chain: str) -> list[str]:
        """The target name of each rule in a chain, without building Rule objects."""
        names = []
        entry = table.first_rule(chain)
        while entry:
            target = table.get_target(entry)
            names.append(target.decode() if isinstance(target, bytes) else (target or ""))
            entry = table.next_rule(entry)
        return names

    def _delete_rules(self, table, chain: str, doomed: Iterable[int]) -> None:
        for number in sorted(doomed, reverse=True):
            if table._iptc.iptc_delete_num_entry(chain.encode(), number, table._handle) != 1:
                raise KernelError(f"cannot delete rule {number} of {chain}: {table.strerror()}")

    def _edit(
        self, table, family: str, name: str, owned: frozenset[str], plan: TablePlan, catchall: bool
    ) -> None:
        iptc = self.iptc
        used = {dispatch.chain for dispatch in plan.dispatch}
        for builtin, dispatch_chain in HOOKS[name]:
            if dispatch_chain in used:
                if not table.is_chain(dispatch_chain):
                    table.create_chain(dispatch_chain)
                if dispatch_chain not in self._targets(table, builtin):
                    iptc.Chain(table, builtin).insert_rule(
                        self._rule(family, Rule(dispatch_chain)), 0
                    )
        remaining: dict[str, list[str]] = {}  # dispatch chain -> targets left, in order
        for _, dispatch_chain in HOOKS[name]:
            if not table.is_chain(dispatch_chain):
                continue
            targets = self._targets(table, dispatch_chain)
            ours = [t in owned or (catchall and t == "RETURN") for t in targets]
            self._delete_rules(table, dispatch_chain, [i for i, mine in enumerate(ours) if mine])
            remaining[dispatch_chain] = [
                t for t, mine in zip(targets, ours, strict=True) if not mine
            ]
        wanted = {chain for chain, _ in plan.chains}
        for chain in sorted(owned):
            if table.is_chain(chain):
                table.flush_entries(chain)
                if chain not in wanted:
                    table.delete_chain(chain)
        for chain, rules in plan.chains:
            if not table.is_chain(chain):
                table.create_chain(chain)
            handle = iptc.Chain(table, chain)
            for rule in rules:
                handle.append_rule(self._rule(family, rule))
        for dispatch in plan.dispatch:
            targets = remaining.setdefault(dispatch.chain, [])
            if dispatch.section == SECTION_CATCHALL:
                position = len(targets)
            elif dispatch.section == SECTION_OUT:
                position = 0
            else:  # after the forward-out rules, which stay at the top
                position = sum(1 for t in targets if t.endswith("-fout"))
            iptc.Chain(table, dispatch.chain).insert_rule(
                self._rule(family, dispatch.rule), position
            )
            targets.insert(position, dispatch.rule.target)

    def commit_table(
        self,
        family: str,
        name: str,
        owned: frozenset[str],
        plan: TablePlan,
        catchall: bool = False,
    ) -> None:
        """Commit one table; a table with NAT targets is committed by a forked child.

        DNAT, SNAT, MASQUERADE and REDIRECT live in one libxt_NAT.so, which registers the
        targets of the family selected when it is first loaded into a process; registering the
        other family's later fails ("can't find target", or "already registered" when its init
        runs twice). A child forked before the library is loaded builds one family's NAT rules
        and exits, so this process never loads it and every family gets a fresh start.
        """
        if any(rule.target in NAT_TARGETS for _, rules in plan.chains for rule in rules):
            self._commit_in_child(family, name, owned, plan, catchall)
        else:
            self._commit_table(family, name, owned, plan, catchall)

    def _commit_in_child(self, family, name, owned, plan, catchall) -> None:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: commit, report, and leave without running any cleanup
            os.close(read_end)
            status = 0
            try:
                self._commit_table(family, name, owned, plan, catchall)
            except BaseException as error:
                os.write(write_end, str(error).encode()[:4000])
                status = 1
            os._exit(status)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as stream:
            message = stream.read().decode(errors="replace")
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise KernelError(message or f"{family} {name}: commit in child process failed")

    def _commit_table(
        self, family: str, name: str, owned: frozenset[str], plan: TablePlan, catchall: bool = False
    ) -> None:
        self._locked_commit(
            family, name, lambda table: self._edit(table, family, name, owned, plan, catchall)
        )

    def _locked_commit(self, family: str, name: str, edit) -> None:
        """Read a table, `edit(table)` it and commit, under the lock; when another writer
        committed in between (EAGAIN), read again and redo, with a bounded backoff."""
        for attempt in range(COMMIT_ATTEMPTS):
            with xtables_lock():
                table = self._table(family, name)
                table.refresh()
                try:
                    edit(table)
                    table.commit()
                    table.refresh()
                    return
                except self.iptc.XTablesError as error:
                    table.refresh()
                    raise KernelError(f"{family} {name}: {error}") from None
                except self.iptc.IPTCError as error:
                    table.refresh()  # drops what was pending
                    if not _is_eagain(error):
                        raise KernelError(f"{family} {name}: {error}") from None
                    if attempt == COMMIT_ATTEMPTS - 1:
                        raise KernelError(f"{family} {name}: kept changing under us") from None
            time.sleep(0.002 * 2**attempt)

    def apply(self, ruleset: Ruleset, previous_tables: set[tuple[str, str]] | None = None) -> None:
        """Put the ruleset in place; tables the interface used before but no longer needs
        are cleaned (all tables are checked when `previous_tables` is unknown)."""
        owned = owned_chains(ruleset.interface)
        catchall = ruleset.interface is None
        for family in FAMILIES:
            for name in TABLE_ORDER:
                plan = ruleset.tables.get(family, {}).get(name)
                if plan is None:
                    if previous_tables is not None and (family, name) not in previous_tables:
                        continue
                    if not self._has_dispatch(family, name):
                        continue
                    plan = TablePlan()
                self.commit_table(family, name, owned, plan, catchall)
        if ruleset.needs_forwarding:
            enable_ipv4_forwarding()

    def remove(
        self, interface: str | None, previous_tables: set[tuple[str, str]] | None = None
    ) -> None:
        self.remove_chains(owned_chains(interface), previous_tables, interface is None)

    def remove_chains(
        self,
        owned: frozenset[str],
        previous_tables: set[tuple[str, str]] | None = None,
        catchall: bool = False,
    ) -> None:
        """Remove the given chains and the dispatch rules leading to them; filter first."""
        for family in FAMILIES:
            for name in reversed(TABLE_ORDER):
                if previous_tables is not None and (family, name) not in previous_tables:
                    continue
                if self._has_dispatch(family, name):
                    self.commit_table(family, name, owned, TablePlan(), catchall)

    def interface_tokens(self) -> set[str]:
        """The interface part of every `nmz-if-TOKEN-KIND` chain in the kernel."""
        tokens = set()
        for family in FAMILIES:
            for name in TABLE_ORDER:
                if not self._has_dispatch(family, name):
                    continue
                table = self._table(family, name)
                table.refresh()
                for chain in table.chains:
                    if chain.name.startswith("nmz-if-"):
                        tokens.add(chain.name[len("nmz-if-") :].rsplit("-", 1)[0])
        return tokens

    def _has_dispatch(self, family: str, name: str) -> bool:
        if not _table_loaded(family, name):
            return False
        table = self._table(family, name)
        table.refresh()
        return any(table.is_chain(chain) for _, chain in HOOKS[name])

    def remove_everything(self) -> None:
        """Every chain and hook nm-zones made, in every table and family (`disable`)."""
        for family in FAMILIES:
            for name in reversed(TABLE_ORDER):
                if self._has_dispatch(family, name):
                    self._locked_commit(family, name, lambda t, n=name: self._remove_ours(t, n))

    def _remove_ours(self, table, name: str) -> None:
        ours = [chain.name for chain in table.chains if chain.name.startswith("nmz-")]
        for builtin, dispatch_chain in HOOKS[name]:
            targets = self._targets(table, builtin)
            self._delete_rules(
                table, builtin, [i for i, t in enumerate(targets) if t == dispatch_chain]
            )
        for chain in ours:
            table.flush_entries(chain)
        for chain in ours:
            table.delete_chain(chain)


def _fix_interface_mask(entry, family: str, direction: str, name: str) -> None:
    """Write the interface mask as iptables does: 0xff for each byte compared.

    python-iptables 1.2.0 writes 0x01 bytes into IPv6 interface masks, so the kernel compares
    only the lowest bit of each character and `-i vz1` also matches `br-`: IPv6 rules of one
    interface would apply to others. The IPv4 side is right; both are written here alike.
    """
    prefix = name[:-1] if name.endswith("+") else name
    length = len(prefix) if name.endswith("+") else len(prefix) + 1
    mask = b"\xff" * length + b"\x00" * (IFNAMSIZ_BYTES - length)
    header = entry.entry.ip if family == "ipv4" else entry.entry.ipv6
    setattr(header, f"{direction}iface_mask", mask)


def _is_eagain(error: Exception) -> bool:
    return os.strerror(errno.EAGAIN).lower() in str(error).lower()


def _table_loaded(family: str, name: str) -> bool:
    """Avoid loading nat or raw into a kernel just to find them empty."""
    path = "/proc/net/ip_tables_names" if family == "ipv4" else "/proc/net/ip6_tables_names"
    try:
        with open(path) as names:
            return name in names.read().split()
    except OSError:
        return True


def enable_ipv4_forwarding() -> None:
    """Masquerade and forward-ports need it; nm-zones never turns it off (others rely on it)."""
    with open("/proc/sys/net/ipv4/ip_forward", "w") as sysctl:
        sysctl.write("1\n")
