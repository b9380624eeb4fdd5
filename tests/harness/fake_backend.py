"""An in-memory Backend (nm_zones/backends/base.py) for engine tests without root.

The fake's "kernel" is a dict per view key; every commit is counted and can be refused on
purpose, so the journal and recovery paths of the engine (an apply refused after its journal
entry, a table flushed behind nm-zones' back, a backend that moves) run in milliseconds, in
process, without namespaces. It models what the engine relies on, not netfilter: a commit of
one view key is atomic (all or nothing), a plan's content per key is its fingerprint, and the
view is the kernel's content under that key.

Views look like the real backends' where code outside the backend reads them (the quick
path's digests, backends.panic_recorded): iptables' per (family, table) a dict chain ->
content, nftables' one key ("inet", "nm-zones") with {"chains": {...}, "elements": ...}.
"""

from __future__ import annotations

import copy
import socket

from nm_zones.backends import NFT_FAMILY
from nm_zones.digest import fingerprint
from nm_zones.errors import KernelError
from nm_zones.ifname import chain_token
from nm_zones.ruleset.layout import (
    FAMILIES,
    NFT_PANIC_CHAINS,
    PANIC_CHAINS,
    PANIC_TABLE,
    TABLE_ORDER,
)

NFT_KEY = (NFT_FAMILY, "nm-zones")
CATCHALL_CHAIN = "nmz-default"
IPTABLES_KEYS = frozenset((family, table) for family in FAMILIES for table in TABLE_ORDER)


def plan_keys(plan) -> set[tuple[str, str]]:
    """The (family, table) pairs a kernel plan has rules in (the one place that reads the
    plan's shape: only its `tables` mapping's keys and values, never the rule tuples)."""
    return set(plan.tables)


def owner_chain(interface: str | None) -> str:
    """The chain that stands for an interface's rules (the catch-all's for None)."""
    return CATCHALL_CHAIN if interface is None else f"nmz-if-{chain_token(interface)}-in"


class FakeBackend:
    """A Backend whose kernel is `self.kernel` (view key -> view); see the module docstring.

    Refusals: `refuse_next(operation, error)` makes the next call of `operation` ("apply",
    "remove", "rebuild", "panic", "remove_everything", ...) raise before any commit;
    `refuse_after(n)` lets n more commits through and refuses every later one (a commit of an
    apply over several keys then stops half-way, as the iptables backend would);
    `refuse_interface(name)` refuses every commit of that interface's rules, alone or with
    others (as NM_ZONES_FAULTS=refuse-chain does)."""

    def __init__(self, name: str = "iptables"):
        self.name = name
        self.views: dict = {}
        self.kernel: dict[tuple[str, str], dict] = {}
        self.commits: list[tuple[str, tuple[str, str]]] = []  # (operation, view key)
        self.trusted: dict = {}
        self.forgotten: set[int] = set()
        self.kept_entries = 0
        self._refusals: dict[str, Exception] = {}
        self._commits_left: int | None = None
        self.refused_interfaces: set[str] = set()
        self._meanwhile: dict[tuple[str, str], str] = {}  # key -> chain changed meanwhile
        self.changed: set[tuple[str, str]] = set()

    # -- injected faults ------------------------------------------------------------------

    def refuse_next(self, operation: str, error: Exception | None = None) -> None:
        self._refusals[operation] = error or KernelError(f"{operation}: refused by the test")

    def refuse_after(self, commits: int) -> None:
        self._commits_left = commits

    def refuse_interface(self, interface: str) -> None:
        self.refused_interfaces.add(interface)

    def _refused_plans(self, plans) -> None:
        for plan in plans:
            if plan.interface in self.refused_interfaces:
                raise KernelError(f"{plan.interface}: refused by the test")

    def flush_behind_its_back(self, key=None) -> None:
        """Another program empties nm-zones' chains (every key when None): `iptables -F`."""
        for each in [key] if key else list(self.kernel):
            self.kernel[each] = self._empty(each)

    def change_before_next_commit(self, key, chain: str) -> None:
        """Another program changes `chain` under `key` after the run's check, before its
        next commit there (not a rebuild): the commit goes through on top of it, and the
        backend reports the key, as both real ones do when a chain their commit left alone
        is no longer as checked (the view is then unknown)."""
        self._meanwhile[key] = chain

    def tamper(self, key, chain: str = "nmz-intruder") -> None:
        """Another program adds a chain of its own making under `key`."""
        self._chains(self.kernel.setdefault(key, self._empty(key)))[chain] = "foreign"

    # -- what a test asks -------------------------------------------------------------------

    def chains(self, key=None) -> dict:
        """The chains the kernel holds under `key` (this backend's only key for nftables)."""
        key = key or (NFT_KEY if self.name == "nftables" else ("ipv4", "filter"))
        return dict(self._chains(self.kernel.get(key, {})))

    def holds_interface(self, interface: str | None) -> bool:
        return any(owner_chain(interface) in self._chains(v) for v in self.kernel.values())

    def content_of(self, interface: str | None) -> tuple:
        """What the kernel holds for an interface, per key (to tell two zones apart)."""
        chain = owner_chain(interface)
        return tuple(
            (key, self._chains(view)[chain])
            for key, view in sorted(self.kernel.items())
            if chain in self._chains(view)
        )

    # -- the Backend protocol ---------------------------------------------------------------

    def view_keys(self, tables=None) -> set[tuple[str, str]]:
        if self.name == "nftables":
            return {NFT_KEY}
        return set(IPTABLES_KEYS if tables is None else tables)

    def read_view(self, key) -> dict:
        return copy.deepcopy(self.kernel.get(key, {}))

    def differs(self, key, recorded) -> bool:
        return recorded is None or self.read_view(key) != recorded

    def trust(self, views: dict) -> None:
        self.trusted = dict(views)

    def changed_meanwhile(self) -> set[tuple[str, str]]:
        keys, self.changed = self.changed, set()
        return keys

    def apply(self, plan, previous_tables=None) -> None:
        self.apply_many([(plan, previous_tables)])

    def apply_many(self, items: list) -> None:
        """Several interfaces' plans, each table committed once for all of them."""
        self._refused("apply")
        self._refused_plans([plan for plan, _ in items])
        touched: set = set()
        for plan, previous_tables in items:
            touched |= plan_keys(plan)
            touched |= set(previous_tables) if previous_tables is not None else IPTABLES_KEYS
        for key in self._ordered(self.view_keys(touched)):
            view = copy.deepcopy(self.kernel.get(key, self._empty(key)))
            chains = self._chains(view)
            for plan, _ in items:
                chain = owner_chain(plan.interface)
                chains.pop(chain, None)
                content = self._content(plan, key)
                if content:
                    chains[chain] = content
            self._commit_if_changed("apply", key, view)

    def remove(self, interface, previous_tables=None) -> None:
        self._refused("remove")
        self._drop({owner_chain(interface)}, previous_tables, "remove")

    def remove_chains(self, owned, previous_tables=None) -> None:
        self._refused("remove_chains")
        self._drop(set(owned), previous_tables, "remove_chains")

    def rebuild(self, key, plans: list, panic: bool = False) -> None:
        self._refused("rebuild")
        view = self._empty(key)
        chains = self._chains(view)
        for plan in plans:
            content = self._content(plan, key)
            if content:
                chains[owner_chain(plan.interface)] = content
        if panic and key in self.panic_keys():
            chains.update(dict.fromkeys(self._panic_chains(), "panic"))
        self._commit("rebuild", key, view)

    def panic(self, on: bool) -> None:
        self._refused("panic")
        for key in self._ordered(self.panic_keys()):
            view = copy.deepcopy(self.kernel.get(key, self._empty(key)))
            chains = self._chains(view)
            for chain in self._panic_chains():
                if on:
                    chains[chain] = "panic"
                else:
                    chains.pop(chain, None)
            self._commit("panic", key, view)

    def panic_keys(self) -> set[tuple[str, str]]:
        if self.name == "nftables":
            return {NFT_KEY}
        return {(family, PANIC_TABLE) for family in FAMILIES}

    def holds_panic(self) -> bool | None:
        return all(
            chain in self._chains(self.kernel.get(key, {}))
            for key in self.panic_keys()
            for chain in self._panic_chains()
        )

    def interface_tokens(self) -> set[str]:
        tokens = set()
        for view in self.kernel.values():
            for chain in self._chains(view):
                if chain.startswith("nmz-if-"):
                    tokens.add(chain[len("nmz-if-") :].rsplit("-", 1)[0])
        return tokens

    def remove_everything(self) -> None:
        self._refused("remove_everything")
        for key in self._ordered(set(self.kernel)):
            self._commit("remove_everything", key, None)

    def holds(self, plan) -> bool | None:
        chain = owner_chain(plan.interface)
        return all(
            self._chains(self.kernel.get(key, {})).get(chain) == self._content(plan, key)
            for key in self.view_keys(plan_keys(plan))
        )

    def unlistable(self) -> str:
        return ""  # its kernel is a dict: always listable

    def keep_entries(self, compiled) -> None:
        self.kept_entries += 1

    def forget_deadlines(self, deadlines) -> None:
        self.forgotten |= set(deadlines)

    # -- inside ---------------------------------------------------------------------------

    def _refused(self, operation: str) -> None:
        error = self._refusals.pop(operation, None)
        if error is not None:
            raise error

    def _commit(self, operation: str, key, view: dict | None) -> None:
        """One atomic commit of `key`: refused whole, or the kernel and the view follow."""
        if self._commits_left is not None:
            if self._commits_left <= 0:
                raise KernelError(f"{' '.join(key)}: commit refused by the test")
            self._commits_left -= 1
        if view is None:
            self.kernel.pop(key, None)
            self.views[key] = {}
        else:
            if self.name == "nftables":
                view["generation"] = len(self.commits) + 1
            self.kernel[key] = view
            self.views[key] = copy.deepcopy(view)
        self.commits.append((operation, key))
        chain = self._meanwhile.pop(key, None) if operation != "rebuild" else None
        if chain is not None:
            self._chains(self.kernel.setdefault(key, self._empty(key)))[chain] = "another's"
            self.views[key] = None
            self.changed.add(key)

    def _commit_if_changed(self, operation: str, key, view: dict) -> None:
        """As the iptables backend: a table the edit leaves as it is is not committed, but
        its view is recorded all the same."""
        if view != self.kernel.get(key, self._empty(key)):
            self._commit(operation, key, view)
        else:
            self.views[key] = copy.deepcopy(self.kernel.get(key, self._empty(key)))

    def _drop(self, chains_out: set[str], previous_tables, operation: str) -> None:
        touched = set(previous_tables) if previous_tables is not None else None
        for key in self._ordered(self.view_keys(touched)):
            view = copy.deepcopy(self.kernel.get(key, self._empty(key)))
            chains = self._chains(view)
            for chain in chains_out:
                chains.pop(chain, None)
            self._commit_if_changed(operation, key, view)

    def _content(self, plan, key) -> str:
        """The fingerprint of what the plan puts under `key` ("" when nothing)."""
        if self.name == "nftables":
            parts = {k: v for k, v in plan.chains_by_table.items() if v}
        else:
            parts = {key: plan.chains_by_table[key]} if key in plan.chains_by_table else {}
        return fingerprint(repr(sorted(parts.items()))) if parts else ""

    def _empty(self, key) -> dict:
        return {"chains": {}, "elements": None} if key == NFT_KEY else {}

    def _chains(self, view: dict) -> dict:
        return view.setdefault("chains", {}) if self.name == "nftables" else view

    def _panic_chains(self) -> list[str]:
        if self.name == "nftables":
            return [chain for chain, _, _ in NFT_PANIC_CHAINS]
        return [chain for _, chain, _ in PANIC_CHAINS]

    @staticmethod
    def _ordered(keys) -> list:
        order = {table: number for number, table in enumerate(TABLE_ORDER)}
        return sorted(keys, key=lambda key: (key[0], order.get(key[1], -1)))


class FakeLinks:
    """The interfaces the engine sees (name -> index) instead of this namespace's: patched
    into nm_zones.ifname's if_nametoindex and interface_indexes and socket.if_nameindex by
    `install`."""

    def __init__(self, *names: str):
        self.indexes = {name: number for number, name in enumerate(names, start=100)}

    def add(self, name: str) -> None:
        self.indexes[name] = max(self.indexes.values(), default=99) + 1

    def gone(self, name: str) -> None:
        del self.indexes[name]

    def nametoindex(self, name: str) -> int:
        try:
            return self.indexes[name]
        except KeyError:
            raise OSError(19, "No such device") from None

    def nameindex(self) -> list[tuple[int, str]]:
        return [(index, name) for name, index in self.indexes.items()]

    def nametoindexes(self, names) -> dict[str, int]:
        return {name: self.indexes.get(name, 0) for name in names}

    def install(self, monkeypatch) -> None:
        import nm_zones.ifname

        monkeypatch.setattr(nm_zones.ifname, "if_nametoindex", self.nametoindex)
        monkeypatch.setattr(nm_zones.ifname, "interface_indexes", self.nametoindexes)
        monkeypatch.setattr(socket, "if_nameindex", self.nameindex)


def patch_open_backend(monkeypatch, backends: dict[str, FakeBackend]) -> None:
    """backends.open_backend answers with these fakes by name, wherever a module of nm_zones
    bound it (a function-local import reads the package's; a module-level one its own)."""
    import sys

    import nm_zones.backends

    original = nm_zones.backends.open_backend

    def open_fake(name: str, state_dir=None):
        return backends[name]

    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "") or ""
        if name.startswith("nm_zones") and getattr(module, "open_backend", None) is original:
            monkeypatch.setattr(module, "open_backend", open_fake)
