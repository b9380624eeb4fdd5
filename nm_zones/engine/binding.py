"""One interface: bound to a zone (journaled `applying`, committed, recorded `applied`),
or removed (journaled `removing`). A zone that cannot be used never opens anything: the
interface keeps the rules it has, or gets the zone's stand-in (ruleset/cache.py)."""

from __future__ import annotations

import time

from ..errors import KernelError, UsageError, unknown_zone
from ..ifname import check_interface, interface_index, matches_exempt
from ..log import Change
from ..resolve import Connection, recorded_connection
from ..state import Binding, State, Status
from .basics import (
    REASON_COMMAND,
    REASON_DBUS,
    REASON_NM,
    allowed_for,
    change_reason,
    forget_allowances,
    interface_digest,
    interface_plan,
    ms,
    network_for,
)
from .together import Pending

# what a switch to the rules an interface already has may still change in its binding
RECORDED = ("reason", "degraded", "inputs", "connection_uuid", "connection_id", "connection_type")


class Bindings:
    """The part of the Engine that binds and removes one interface."""

    def apply_interface(
        self,
        interface: str,
        zone_name: str,
        reason: str,
        connection: Connection | None = None,
        state: State | None = None,
        inputs: str = "",
        why: str = "",
    ) -> Change | None:
        """Bind `interface` to `zone_name`; returns the change made, None for a no-op.
        `inputs` records what decided it, for the quick path of the next event; `why`
        replaces the reason in the change record (a runtime allowance, doors/allow.py)."""
        state = self._ready_to_bind(interface, reason, state)
        old = state.interfaces.get(interface)
        usable = self.usable_zone(zone_name)
        if usable is None:
            raise unknown_zone(zone_name)
        connection = connection or Connection()
        degraded = self._degradation(interface, zone_name, usable, reason, old, state)
        if degraded is None:
            return None  # it keeps the rules it has
        # the rules are a pure function of the interface name, the zone's rules and the
        # runtime allowances that reach it
        allowed = self._allowances_reaching(state, interface, reason, usable.name, connection, old)
        digest = interface_digest(interface, usable, allowed)
        ifindex = interface_index(interface)
        if old and old.status == Status.APPLIED and (old.digest, old.ifindex) == (digest, ifindex):
            self._record_unchanged(state, old, reason, connection, degraded, inputs)
            return None
        started = time.monotonic()
        plan = interface_plan(self.compiled, interface, usable, allowed, self.paths)
        binding = _applying(usable.name, reason, ifindex, connection, digest, degraded, inputs)
        pending = self._commit_binding(state, interface, old, usable, plan, binding)
        why = why or change_reason(reason, old, usable.name)
        source = connection.id or connection.uuid
        before = old.zone if old else ""
        change = Change(interface, before, usable.name, why, source, ms(started), degraded)
        change.bound_with(binding).flows_ended = binding.flows_ended
        if pending is not None:
            pending.change = change  # its flows are ended once the commit is made
        return self._changed(change)

    def _allowances_reaching(
        self, state: State, interface: str, reason: str, zone: str, connection, old
    ) -> tuple:
        """The runtime allowances that reach `interface` in `zone`: its zone's, its own and
        its network's; those it had in another zone are forgotten."""
        if state.allowances:
            forget_allowances(state, interface, keep_zone=zone)
        uuid = connection.uuid or (old.connection_uuid if old else "")
        network = network_for(self.paths.state, interface, reason, uuid)
        return allowed_for(state, interface, zone, network, self.paths)

    def _ready_to_bind(self, interface: str, reason: str, state: State | None) -> State:
        """The checks before a binding (a valid name, not exempt unless a caller on the bus
        claims it), the state, and the hooks and catch-all in place."""
        check_interface(interface)
        if reason != REASON_DBUS and matches_exempt(interface, self.compiled.exempt_interfaces):
            raise UsageError(
                f"{interface} matches exempt-interfaces in the connections map; "
                "nm-zones does not filter it"
            )
        state = state or self.state_dir.load()
        self.ensure_catchall(state)
        return state

    def _degradation(
        self, interface: str, zone: str, usable, reason: str, old, state: State
    ) -> str | None:
        """What is wrong with `zone` (as asked for) or the map ("" when nothing), warned
        about; None when the interface keeps the rules it has."""
        problems = [usable.problem] if usable.problem else []
        if self.compiled.map_broken and reason not in (REASON_COMMAND, REASON_NM, REASON_DBUS):
            problems.append(f"connections map cannot be loaded ({self.compiled.map_broken})")
        if not problems:
            return ""
        self.degraded = True
        # its rules stay only when they are the zone asked for (an earlier, loadable version of
        # it) or only the map is broken; a switch to a broken zone gets its stand-in
        if old and old.status == Status.APPLIED and (old.zone == zone or not usable.problem):
            degraded = "; ".join([*problems, f"keeping its rules of zone {old.zone!r}"])
            self._unfulfilled(interface, degraded, usable.problem or old.zone != zone)
            if old.degraded != degraded:
                old.degraded = degraded
                self.save(state)
            return None
        fallback = usable.fallback or "using the shipped map"
        degraded = "; ".join([*problems, fallback])
        self._unfulfilled(interface, degraded, usable.problem)
        return degraded

    def _unfulfilled(self, interface: str, degraded: str, failed) -> None:
        """Said once, and remembered when the interface did not get the zone as configured
        (`failed`: the zone could not be used, or its old rules of another zone stay)."""
        self.warn(f"{interface}: {degraded}")
        if failed:
            self.unfulfilled[interface] = f"{interface}: {degraded}"

    def _record_unchanged(
        self,
        state: State,
        old: Binding,
        reason: str,
        connection: Connection,
        degraded: str,
        inputs: str,
    ) -> None:
        """The kernel already holds the interface's rules: only the record may change, and
        the state is written only when it did (a call that names no connection keeps the
        one recorded: a D-Bus no-op switch writes nothing)."""
        # a call without the profile (D-Bus, a stage-3 call that could not read it) keeps
        # the connection recorded
        record = (
            reason,
            degraded,
            inputs or old.inputs,
            connection.uuid or old.connection_uuid,
            connection.id or old.connection_id,
            connection.type or old.connection_type,
        )
        if record != tuple(getattr(old, name) for name in RECORDED):
            for name, value in zip(RECORDED, record, strict=True):
                setattr(old, name, value)
            self.save(state)

    def _commit_binding(
        self, state: State, interface: str, old, usable, plan, binding: Binding
    ) -> Pending | None:
        """Journal the binding as `applying` (with every table it may touch), commit the
        plan, then record it `applied` and end the flows the new zone forbids; inside
        `together` (together.py) the commit waits for the others: their Pending."""
        new_tables = sorted(plan.tables)
        previous = old.table_set() if old else None
        binding.tables = [list(t) for t in sorted(set(new_tables) | (previous or set()))]
        state.interfaces[interface] = binding
        tables = binding.table_set() if previous is not None else None

        def applied() -> None:
            if self.backend.name == "iptables":
                self._warn_applications(interface, usable.name, plan)
            self._keep_entries()
            binding.status = Status.APPLIED
            binding.tables = [list(t) for t in new_tables]
            binding.flows_ended = self._end_forbidden_flows(interface, old, state, usable)

        committing = self.backend.view_keys(tables)
        pending = Pending(interface, plan, previous, committing, applied, binding)
        return self._wait_or_commit(state, pending)

    def _warn_applications(self, interface: str, zone: str, plan) -> None:
        """A zone's `applications` open nothing on iptables (ruleset/applications.py)."""
        from ..backends.iptables.backend import without_applications

        if without_applications(plan) is not plan:
            from ..ruleset.applications import APPS_NO_EFFECT

            self.warn(f"{interface}: zone {zone}: {APPS_NO_EFFECT}")

    def _end_forbidden_flows(self, interface: str, old, state: State, usable) -> int:
        """flows.py: a switch to a stricter zone ends the open flows the new zone forbids."""
        from ..flows import after_switch

        before = old.zone if old else state.catchall_zone
        ended, error = after_switch(self.compiled, interface, before, usable)
        if error:
            self.degrade(f"{interface}: {error}")
        return ended

    def remove_interface(
        self, interface: str, reason: str = "removed", state: State | None = None
    ) -> Change | None:
        """Take `interface`'s rules out (journaled `removing` first) and forget it, with the
        allowances opened on it; None when it is not bound."""
        state = state or self.state_dir.load()
        old = state.interfaces.get(interface)
        if old is None:
            return None
        started = time.monotonic()

        def forget() -> None:
            del state.interfaces[interface]
            forget_allowances(state, interface)  # a `down` forgets what `allow` opened on it

        if old.status == Status.DISABLED:  # its rules are out already
            forget()
            self.save(state)
        else:
            old.status = Status.REMOVING  # journaled: a run killed mid-way is finished later
            tables = old.table_set() or None

            def removal() -> None:
                self.backend.remove(interface, tables)

            self.commit(state, self.backend.view_keys(tables), removal, forget)
        change = Change(interface, old.zone, "", reason, old.connection_id, ms(started))
        return self._changed(change.bound_with(old))

    def reapply(self, name: str, state: State, why: str) -> Change | None:
        """Commit a bound interface again as it is bound (its allowances changed); an error
        is said and marked on it, and the caller goes on with the others."""
        binding = state.interfaces[name]
        connection = recorded_connection(binding)
        try:
            return self.apply_interface(
                name, binding.zone, binding.reason, connection, state, binding.inputs, why
            )
        except (KernelError, OSError, UsageError) as error:
            self.failed(name, state, error)
            return None


def _applying(
    zone: str,
    reason: str,
    ifindex: int,
    connection: Connection,
    digest: str,
    degraded: str,
    inputs: str,
) -> Binding:
    """A new binding, journaled `applying` until its commits are done."""
    return Binding(
        zone=zone,
        reason=reason,
        ifindex=ifindex,
        connection_uuid=connection.uuid,
        connection_id=connection.id,
        connection_type=connection.type,
        since=time.time(),
        digest=digest,
        status=Status.APPLYING,
        degraded=degraded,
        inputs=inputs,
    )
