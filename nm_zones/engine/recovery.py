"""Recovery: what every run does before it commits anything of its own, so that the kernel
holds what the state says. The kernel is the truth: a table whose nm-zones rules differ from
the view recorded after nm-zones' own last commit is rebuilt (loudly when another program
changed it); rules are moved when the settings name another backend; interfaces that are gone
lose their rules; what an interrupted run left `applying` or `removing` is finished."""

from __future__ import annotations

import time

from ..errors import KernelError, UsageError, describe
from ..ifname import chain_token
from ..log import Change
from ..resolve import recorded_connection
from ..ruleset.cache import FALLBACK_ZONE
from ..ruleset.layout import CHAIN_KINDS
from ..state import State, Status
from .basics import (
    FILTER_TABLES,
    IN_KERNEL,
    allowed_for,
    binding_network,
    interface_digest,
    interface_plan,
    ms,
    ordered,
)

HAS_RULES = frozenset((*IN_KERNEL, Status.REMOVING))  # statuses whose rules may be in the kernel


class Recovery:
    """The part of the Engine that repairs what others, or an interrupted run, left."""

    def reconcile(self, state: State) -> None:
        """Rebuild every table whose nm-zones rules differ from the view recorded after
        nm-zones' own last commit: another program flushed a chain, deleted a hook or
        restored an old ruleset. Runs before anything else commits, so that no commit of
        this run records a changed table as if it were nm-zones' own."""
        wanted = set(state.kernel)
        tables = {
            (family, table)
            for binding in state.interfaces.values()
            if binding.status in HAS_RULES
            for family, table in binding.tables
        }
        if state.catchall_digest:
            tables |= FILTER_TABLES
        if tables:
            wanted |= self.backend.view_keys(tables)
        if not wanted:
            if self._backend is not None:  # not opened for nothing
                self._backend.trust({})
            return
        for key in ordered(wanted):
            if self.backend.differs(key, state.kernel.get(key)):
                try:
                    changed = state.kernel.get(key) is not None
                    self._rebuild(state, key, changed)
                except KernelError as error:
                    self.unknown_views.add(key)
                    self.failed(" ".join(key), state, error)
        self.backend.trust({key: state.kernel.get(key) for key in wanted})

    def move_backend(self, state: State) -> None:
        """When the settings name another backend than the one holding the rules: everything
        (hooks, catch-all, every binding) is first put in place in the new one, then the old
        one's rules are removed, so no interface is ever less filtered than under either
        (a packet passes both meanwhile). A run killed in between finds the old views in the
        state and does it again."""
        from ..backends import backend_of_key, open_backend

        old = {backend_of_key(key) for key in state.kernel} - {self.backend.name}
        if not old:
            return
        tables = set(FILTER_TABLES) if state.catchall_digest else set()
        for binding in state.interfaces.values():
            if binding.status in IN_KERNEL:
                tables |= binding.table_set()
        for key in ordered(self.backend.view_keys(tables) if tables else ()):
            self._rebuild(state, key, changed=False)
        for name in sorted(old):
            keys = [key for key in state.kernel if backend_of_key(key) == name]

            def forget(keys=keys) -> None:
                for key in keys:
                    del state.kernel[key]

            removal = open_backend(name, self.paths.state).remove_everything
            self.commit(state, keys, removal, forget)  # journaled: being removed
            self._changed(Change("*", name, self.backend.name, "rules moved to another backend"))

    def _rebuild(self, state: State, key: tuple[str, str], changed: bool) -> None:
        """One commit of everything nm-zones has in the table; said loudly when another
        program `changed` it, quietly when no view was recorded yet (an interrupted first
        run, a state from an older nm-zones)."""
        started = time.monotonic()
        plans = self._plans_in(state, key)

        def rebuild() -> None:
            self.backend.rebuild(key, plans, self.panic)

        # no journal entry: the recorded view already differs from the kernel, or there is
        # none yet (a new backend), so a run killed here rebuilds the table again
        self.commit(state, None, rebuild, self._keep_entries)
        if not changed:
            return
        self.degrade(
            f"{' '.join(key)}: nm-zones' rules had been changed by another program; "
            f"rebuilt in {ms(started):.1f} ms"
        )

    def _plans_in(self, state: State, key: tuple[str, str]) -> list:
        """The plans of everything nm-zones has in the table `key`: the catch-all (its
        record brought up to date) and every binding whose rules belong in the kernel."""
        plans = []
        catchall = self.compiled.catchall
        covered = self.backend.view_keys
        has_filter = any(key in covered({table}) for table in FILTER_TABLES)
        if state.catchall_digest and "error" not in catchall and has_filter:
            plans.append(self.compiled.catchall_plan(state.sources))
            state.catchall_zone = catchall["zone"]
            state.catchall_digest = self.compiled.catchall_digest(state.sources)
        for name, binding in sorted(state.interfaces.items()):
            if binding.status not in IN_KERNEL or key not in covered(binding.table_set()):
                continue
            usable = self.usable_zone(binding.zone) or self.usable_zone(FALLBACK_ZONE)
            network = binding_network(self.paths.state, name, binding)
            allowed = allowed_for(state, name, usable.name, network, self.paths)
            if interface_digest(name, usable, allowed) != binding.digest:
                binding.digest = ""  # its other tables may be older: apply it whole again
            plans.append(interface_plan(self.compiled, name, usable, allowed, self.paths))
        return plans

    def repair(self, state: State) -> None:
        """Finish what an interrupted run left `applying` or `removing`."""
        for name, binding in sorted(state.interfaces.items()):
            try:
                if binding.status == Status.APPLYING:
                    binding.digest = ""  # force a fresh commit
                    connection = recorded_connection(binding)
                    try:
                        self.apply_interface(name, binding.zone, binding.reason, connection, state)
                    except UsageError:
                        self.remove_interface(name, "unusable after interruption", state)
                elif binding.status == Status.REMOVING:
                    self.remove_interface(name, "finishing an interrupted removal", state)
            except (KernelError, OSError) as error:
                self.failed(name, state, error)

    def collect_garbage(self, state: State) -> None:
        """Interfaces that are gone (or whose name now belongs to another device) lose their
        rules: a failed activation never sends `down`. A resident process whose link watch
        heard nothing since its last look skips it: no interface went or changed since."""
        if self.links is not None and not self.links.changed():
            return
        from ..ifname import interface_indexes

        try:
            indexes = interface_indexes(state.interfaces)
        except OSError as error:  # not told which are gone: all keep their rules for now
            self.degrade(f"cannot tell which interfaces are gone: {describe(error)}")
            if self.links is not None:
                self.links.look_again()
            return
        for name, binding in sorted(state.interfaces.items()):
            index = indexes[name]
            if index == 0 or (binding.ifindex and index != binding.ifindex):
                try:
                    self.remove_interface(name, "interface gone", state)
                except (KernelError, OSError) as error:
                    self.failed(name, state, error)
                    if self.links is not None:
                        self.links.look_again()

    def collect_orphans(self, state: State) -> None:
        """Chains in the kernel for interfaces the state does not know and that do not exist
        (a lost state is no reason to unfilter an interface that is up)."""
        import socket

        known = {chain_token(name) for name in state.interfaces}
        known |= {chain_token(name) for _, name in socket.if_nameindex()}
        for token in self.backend.interface_tokens() - known:
            owned = frozenset(f"nmz-if-{token}-{kind}" for kind in CHAIN_KINDS)

            def removal(owned=owned) -> None:
                self.backend.remove_chains(owned)

            self.commit(state, None, removal)  # no journal entry: the state never knew them
            self._changed(Change(f"<{token}>", "?", "", "orphaned chains removed"))
