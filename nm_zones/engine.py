"""The pipeline both doors (the dispatcher hook and the `nm-zones` command) go through:
binding -> the zone's compiled plan (ruleset/cache.py) -> kernel -> state, with the fail-safe rules:

- a zone whose file (or a service it uses) cannot be loaded, or cannot be believed (others
  may write it), never opens anything: an interface already in that zone keeps its rules;
  any other gets the shipped definition, else the shipped `block`, and the run says so
  (`unfulfilled`: the D-Bus service answers COMMAND_FAILED, the command exits 1), so a failed
  switch never leaves an interface laxer than the zone it was asked for;
- the kernel is the truth: every run first compares what the kernel holds of nm-zones with
  the view recorded after nm-zones' own last commit (backends/iptables/held.py) and rebuilds
  any table that another program changed, before it commits anything itself;
- every transition is journaled: an interface is marked `applying` or `removing` in the state
  before its commits, `disable` writes its flag first, so any later run finishes or repairs
  an interrupted one; panic mode's flag is written before its commits and removed after
  them, so a run cut anywhere in `panic on` or `panic off` ends in panic mode;
- errors stay with their interface: one that cannot be committed is marked degraded and the
  others are still repaired, collected and reloaded;
- nothing is committed when the compiled rules equal what was applied and the kernel still
  holds them (a no-op event does not even import python-iptables).
"""

from __future__ import annotations

import os
import time

from .backends import panic_recorded
from .digest import fingerprint
from .errors import KernelError, UsageError, unknown_zone
from .ifname import chain_token, check_interface, interface_index, matches_exempt
from .log import Change, record, to_syslog
from .paths import Paths, config_fingerprint
from .resolve import (
    NOT_ALLOWED_MARK,
    REASON_PROFILE,
    REASON_SHARED,
    Connection,
    decide_zone,
    read_connection,
)
from .ruleset.cache import FALLBACK_ZONE, CompiledConfig, ZonePlan, instantiate
from .ruleset.layout import CHAIN_KINDS, FAMILIES, TABLE_ORDER
from .state import Binding, State, StateDir

REASON_COMMAND = "command line"
REASON_NM = REASON_PROFILE
PANIC_WORD = "panic mode"  # what change records and `status` call it
# a caller on the bus named the zone (Docker for docker0, libvirt for virbr0): such a claim
# binds even an interface that exempt-interfaces names, since exemption is for interfaces
# nobody claims; and a broken connections map does not matter to it (doors/service.py)
REASON_DBUS = "D-Bus call"
IN_KERNEL = ("applied", "applying")  # binding states whose rules belong in the kernel
FILTER_TABLES = frozenset((family, "filter") for family in FAMILIES)
ALL_TABLES = frozenset((family, table) for family in FAMILIES for table in TABLE_ORDER)


def recorded_connection(binding: Binding) -> Connection:
    """The connection as remembered at apply time (the profile may be gone since)."""
    return Connection(binding.connection_uuid, binding.connection_id, binding.connection_type)


class Engine:
    def __init__(
        self,
        paths: Paths | None = None,
        use_cache: bool = True,
        compiled: CompiledConfig | None = None,
        backend=None,
    ):
        """`compiled` and `backend` let a resident process (the D-Bus service) share one
        compiled config and one opened backend (python-iptables imported once) between the
        engines it makes."""
        self.paths = paths or Paths.from_environment()
        self.state_dir = StateDir(self.paths.state)
        self.use_cache = use_cache
        self._compiled: CompiledConfig | None = compiled
        self._backend = backend
        self._catchall_checked = False
        self.changes: list[Change] = []
        self.warnings: list[str] = []
        self.degraded = False
        # interface -> why it did not get its zone as configured (a stand-in or its old rules)
        self.unfulfilled: dict[str, str] = {}

    # -- inputs --------------------------------------------------------------------------

    @property
    def compiled(self) -> CompiledConfig:
        """The config as the engine uses it (ruleset/cache.py), loaded on first use."""
        if self._compiled is None:
            from .ruleset.cache import load

            self._compiled = load(self.paths, self.use_cache)
        return self._compiled

    @property
    def backend(self):
        """The Backend (backends/base.py) the settings choose; one that cannot be opened
        gives way to the other, said once: an interface is never left unfiltered for want of
        a backend."""
        if self._backend is None:
            self._backend = self._open_backend()
        return self._backend

    def _open_backend(self):
        """The chosen backend; when it cannot be opened, the other one, unless the chosen one
        already holds rules: then they stay in the kernel and its error is said as it is
        (a python-iptables broken by an upgrade moves nothing anywhere)."""
        from .backends import backend_of_key, choose, open_backend

        failures = []
        order = choose(self.compiled.settings.get("backend", "auto"))
        for name in order:
            try:
                backend = open_backend(name, self.paths.state)
            except (KernelError, OSError, ImportError) as error:
                if name == order[0]:
                    held = {backend_of_key(key) for key in self.state_dir.load().kernel}
                    if name in held:
                        raise
                failures.append(f"{name}: {describe(error)}")
                continue
            if failures:
                self.warn(f"backend {name} used instead ({'; '.join(failures)})")
            return backend
        raise KernelError("no backend can be used (" + "; ".join(failures) + ")")

    def config_changed(self) -> None:
        """nm-zones itself changed a config file (allow --permanent): read it afresh."""
        self._compiled, self.use_cache, self._catchall_checked = None, False, False

    def known_zones(self) -> set[str]:
        """Zones that exist, loadable or not (a broken zone still exists: it is not renamed)."""
        return self.compiled.known_zones()

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        to_syslog(message, warning=True)

    def usable_zone(self, name: str) -> ZonePlan | None:
        """What to apply for zone `name` (for a zone that cannot be loaded: its stand-in,
        with the reason); None when no zone of that name exists."""
        return self.compiled.zone(name)

    def decide(self, connection: Connection):
        decision = decide_zone(connection, self.compiled, self.known_zones())
        if decision.warning:
            self.warn(f"connection {connection.id or connection.uuid!r}: {decision.warning}")
        return decision

    def save(self, state: State, committing=()) -> None:
        """The state, with the view of every table this process committed; the tables it is
        about to commit are journaled as unknown (None), so that a run killed between a
        commit and the next save is not taken for another program's change."""
        if self._backend is not None:
            state.kernel.update(self._backend.views)
            self._backend.views.clear()
        for key in committing:
            if key in state.kernel:
                state.kernel[key] = None
        self.state_dir.save(state)

    def _keep_entries(self) -> None:
        """Keep what the backend built in this run for the next ones (iptables' entries)."""
        self.backend.keep_entries(self.compiled)

    # -- the catch-all -------------------------------------------------------------------

    def ensure_catchall(self, state: State) -> None:
        """Hooks plus default-zone rules for unclaimed interfaces; committed only on change."""
        if self._catchall_checked:  # once per run: a reload applies many interfaces
            return
        self._catchall_checked = True
        catchall = self.compiled.catchall
        if "error" in catchall:
            raise UsageError(catchall["error"])
        degraded = catchall["degraded"]
        if degraded:
            self.degraded = True
            if state.catchall_digest:
                self.warn(
                    f"unclaimed interfaces: {degraded}; keeping the catch-all of zone "
                    f"{state.catchall_zone!r}"
                )
                return
            self.warn(f"unclaimed interfaces: {degraded}")
        digest = self.compiled.catchall_digest(state.sources)
        if state.catchall_digest == digest:
            return
        started = time.monotonic()
        self.save(state, committing=self.backend.view_keys(FILTER_TABLES))
        self.backend.apply(self.compiled.catchall_plan(state.sources))
        self._keep_entries()
        old = state.catchall_zone
        state.catchall_zone, state.catchall_digest = catchall["zone"], digest
        self.save(state)
        self._changed(
            Change(
                "*",
                old,
                catchall["zone"],
                "default-zone for unclaimed interfaces",
                "",
                _ms(started),
                degraded,
            )
        )

    def set_sources(self, state: State, sources: dict[str, str]) -> None:
        """Sources bound at runtime (doors/firewalld_sources.py), committed with the
        catch-all; when the kernel refuses the commit, the state keeps the old ones (the
        next run then rebuilds the table as it was)."""
        old, state.sources = state.sources, sources
        self._catchall_checked = False
        try:
            self.ensure_catchall(state)
        except (KernelError, OSError):
            state.sources = old
            self.save(state)
            raise

    # -- one interface -------------------------------------------------------------------

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
        check_interface(interface)
        if reason != REASON_DBUS and matches_exempt(interface, self.compiled.exempt_interfaces):
            raise UsageError(
                f"{interface} matches exempt-interfaces in the connections map; "
                "nm-zones does not filter it"
            )
        state = state or self.state_dir.load()
        self.ensure_catchall(state)
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
        if state.allowances:
            forget_allowances(state, interface, keep_zone=usable.name)
        allowed = allowed_for(state, interface, usable.name)
        digest = interface_digest(interface, usable, allowed)
        ifindex = interface_index(interface)
        if old and old.status == "applied" and old.digest == digest and old.ifindex == ifindex:
            self._record_unchanged(state, old, reason, connection, degraded, inputs)
            return None
        started = time.monotonic()
        plan = interface_plan(self.compiled, interface, usable, allowed, self.paths)
        binding = Binding(
            zone=usable.name,
            reason=reason,
            ifindex=ifindex,
            connection_uuid=connection.uuid,
            connection_id=connection.id,
            connection_type=connection.type,
            since=time.time(),
            digest=digest,
            status="applying",
            degraded=degraded,
            inputs=inputs,
        )
        self._commit_binding(state, interface, old, usable, plan, binding)
        return self._changed(
            Change(
                interface,
                old.zone if old else "",
                usable.name,
                why or _change_reason(reason, old, usable.name),
                connection.id or connection.uuid,
                _ms(started),
                degraded,
                binding.flows_ended,
            )
        )

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
        if old and old.status == "applied" and (old.zone == zone or not usable.problem):
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
        """The kernel already holds the interface's rules: only the record may change."""
        if (old.reason, old.connection_uuid, old.connection_type, old.degraded, old.inputs) != (
            reason,
            connection.uuid,
            connection.type or old.connection_type,
            degraded,
            inputs or old.inputs,
        ):
            old.reason, old.degraded = reason, degraded
            old.inputs = inputs or old.inputs
            old.connection_uuid = connection.uuid or old.connection_uuid
            old.connection_id = connection.id or old.connection_id
            # a stage-3 call that could not read the profile left the type out
            old.connection_type = connection.type or old.connection_type
            self.save(state)

    def _commit_binding(
        self, state: State, interface: str, old, usable, plan, binding: Binding
    ) -> None:
        """Journal the binding as `applying` (with every table it may touch), commit the
        plan, then record it `applied` and end the flows the new zone forbids."""
        new_tables = sorted(plan.tables)
        previous = old.table_set() if old else None
        binding.tables = [list(t) for t in sorted(set(new_tables) | (previous or set()))]
        state.interfaces[interface] = binding
        tables = binding.table_set() if previous is not None else None
        self.save(state, committing=self.backend.view_keys(tables))
        self.backend.apply(plan, previous)
        if self.backend.name == "iptables":
            self._warn_applications(interface, usable.name, plan)
        self._keep_entries()
        binding.status = "applied"
        binding.tables = [list(t) for t in new_tables]
        binding.flows_ended = self._end_forbidden_flows(interface, old, state, usable)
        self.save(state)

    def _warn_applications(self, interface: str, zone: str, plan) -> None:
        """A zone's `applications` open nothing on iptables (ruleset/applications.py)."""
        from .backends.iptables.backend import without_applications

        if without_applications(plan) is not plan:
            from .ruleset.applications import APPS_NO_EFFECT

            self.warn(f"{interface}: zone {zone}: {APPS_NO_EFFECT}")

    def _end_forbidden_flows(self, interface: str, old, state: State, usable) -> int:
        """flows.py: a switch to a stricter zone ends the open flows the new zone forbids."""
        from .flows import after_switch

        before = old.zone if old else state.catchall_zone
        ended, error = after_switch(self.compiled, interface, before, usable)
        if error:
            self.degraded = True
            self.warn(f"{interface}: {error}")
        return ended

    def remove_interface(
        self, interface: str, reason: str = "removed", state: State | None = None
    ) -> Change | None:
        state = state or self.state_dir.load()
        old = state.interfaces.get(interface)
        if old is None:
            return None
        started = time.monotonic()
        if old.status != "disabled":
            if old.status != "removing":
                old.status = "removing"  # journaled: a run killed mid-way is finished later
            self.save(state, committing=self.backend.view_keys(old.table_set() or None))
            self.backend.remove(interface, old.table_set() or None)
        del state.interfaces[interface]
        forget_allowances(state, interface)  # a `down` forgets what `allow` opened on it
        self.save(state)
        return self._changed(
            Change(interface, old.zone, "", reason, old.connection_id, _ms(started))
        )

    def _changed(self, change: Change) -> Change:
        self.changes.append(change)
        record(change)
        return change

    # -- everything ----------------------------------------------------------------------

    def begin(self, state: State) -> bool:
        """What every run does first, under the state lock: while nm-zones is disabled, it
        finishes an interrupted disable and says False; else prepare(), and True. Panic
        mode outranks the disabled flag (`disable` refuses while it is on): a flag found
        beside it waits until panic mode is off, as lifting panic mode would fail open."""
        self._follow_config()
        if self.paths.disabled and not self.panic:
            self.finish_disable(state)
            return False
        self.prepare(state)
        return True

    def _follow_config(self) -> None:
        """A config read before the lock (a resident service's, a command's check) that
        changed while this run waited is read again, with the backend its settings name:
        otherwise a run that waited behind `reload` would move the rules back to the backend
        the old settings named. Nothing is committed yet, so nothing is lost."""
        if self._compiled is None:
            return
        if self._compiled.key[2] != config_fingerprint(self.paths):
            self._compiled, self._backend, self._catchall_checked = None, None, False

    def prepare(self, state: State) -> None:
        """What every run that changes anything does first, under the state lock: the kernel
        made to hold what the state says, gone interfaces collected, interrupted
        transitions finished, the hooks and the catch-all in place."""
        if state.lost:
            self.warn(f"{state.lost}; starting afresh (the kernel keeps its rules)")
            self.degraded = True
        self.move_backend(state)
        self.reconcile(state)
        self.match_panic(state)
        self.collect_garbage(state)
        self.repair(state)
        try:
            self.ensure_catchall(state)
        except KernelError as error:  # the interface of this run is still journaled first
            self.failed("catch-all", state, error)
        if state.allowances:
            self.expire_allowances(state)

    # -- panic mode ----------------------------------------------------------------------

    @property
    def panic(self) -> bool:
        """Panic mode is on: every packet but loopback's dropped, whatever the zones say."""
        return self.paths.panic

    def set_panic(self, state: State, on: bool, reason: str) -> Change | None:
        """Panic mode on or off, in one commit per table (one nftables transaction); None
        when it already is so. Journaled: the tables are marked unknown first, the flag is
        written before the commit and removed after it, so a run cut anywhere is finished by
        the next one in panic mode (reconcile rebuilds the unknown tables with it)."""
        if on == self.panic and on == panic_recorded(state.kernel):
            return None
        started = time.monotonic()
        self.save(state, committing=self.backend.panic_keys())
        if on:
            from .files import write_atomically

            text = b"panic mode is on; `nm-zones panic off` ends it\n"
            write_atomically(self.paths.panic_flag, text, 0o600)
        self.backend.panic(on)
        if not on:
            try:  # noqa: SIM105 - contextlib would cost every event 5 ms of imports
                os.unlink(self.paths.panic_flag)
            except FileNotFoundError:
                pass
        self.save(state)
        old, new = ("", PANIC_WORD) if on else (PANIC_WORD, "")
        return self._changed(Change("*", old, new, reason, "", _ms(started)))

    def match_panic(self, state: State) -> None:
        """The kernel made to hold panic mode exactly while its flag is there: an
        interrupted `panic on` is finished, a flag removed by hand lifts it."""
        if self.panic == panic_recorded(state.kernel):
            return
        why = "finishing an interrupted panic on" if self.panic else "panic flag gone"
        try:
            self.set_panic(state, self.panic, why)
        except KernelError as error:
            self.failed(PANIC_WORD, state, error)

    def expire_allowances(self, state: State) -> None:
        """Runtime allowances past their deadline (on CLOCK_BOOTTIME: ruleset/allowances.py)
        leave the state, and the interfaces they reached are committed without them: at the
        deadline their rules leave the kernel, not only stop matching."""
        from .ruleset.allowances import DEADLINE, boottime, expired

        now = boottime()
        gone = [a for a in state.allowances if expired(a, now)]
        if not gone:
            return
        state.allowances = [a for a in state.allowances if not expired(a, now)]
        self.save(state)
        for name, binding in sorted(state.interfaces.items()):
            if binding.status != "applied":
                continue
            ended = sorted({a[2] for a in gone if a[1] == binding.zone and a[0] in ("", name)})
            if not ended:
                continue
            self.reapply(name, state, f"{', '.join(ended)} expired")
        self.forget_deadlines(state, {a[DEADLINE] for a in gone})

    def forget_deadlines(self, state: State, deadlines) -> None:
        """What the backend keeps per deadline (nftables: a set) once no rule uses it."""
        try:
            self.backend.forget_deadlines(deadlines)
        except (KernelError, OSError) as error:
            self.warn(f"timed allowances: {describe(error)}")
        self.save(state)

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

    def reconcile(self, state: State) -> None:
        """Rebuild every table whose nm-zones rules differ from the view recorded after
        nm-zones' own last commit: another program flushed a chain, deleted a hook or
        restored an old ruleset. Runs before anything else commits, so that no commit of
        this run records a changed table as if it were nm-zones' own."""
        wanted = set(state.kernel)
        tables = set()
        for binding in state.interfaces.values():
            if binding.status in (*IN_KERNEL, "removing"):
                tables |= binding.table_set()
        if state.catchall_digest:
            tables |= FILTER_TABLES
        if tables:
            wanted |= self.backend.view_keys(tables)
        if not wanted:
            return
        for key in _ordered(wanted):
            if self.backend.differs(key, state.kernel.get(key)):
                try:
                    changed = state.kernel.get(key) is not None
                    self._rebuild(state, key, changed)
                except KernelError as error:
                    self.failed(" ".join(key), state, error)
        self.backend.trust({key: state.kernel.get(key) for key in wanted})

    def move_backend(self, state: State) -> None:
        """When the settings name another backend than the one holding the rules: everything
        (hooks, catch-all, every binding) is first put in place in the new one, then the old
        one's rules are removed, so no interface is ever less filtered than under either
        (a packet passes both meanwhile). A run killed in between finds the old views in the
        state and does it again."""
        from .backends import backend_of_key, open_backend

        old = {backend_of_key(key) for key in state.kernel} - {self.backend.name}
        if not old:
            return
        tables = set(FILTER_TABLES) if state.catchall_digest else set()
        for binding in state.interfaces.values():
            if binding.status in IN_KERNEL:
                tables |= binding.table_set()
        for key in _ordered(self.backend.view_keys(tables) if tables else ()):
            self._rebuild(state, key, changed=False)
        for name in sorted(old):
            keys = [key for key in state.kernel if backend_of_key(key) == name]
            for key in keys:
                state.kernel[key] = None  # journaled: being removed
            self.state_dir.save(state)
            open_backend(name, self.paths.state).remove_everything()
            for key in keys:
                del state.kernel[key]
            self.save(state)
            self._changed(Change("*", name, self.backend.name, "rules moved to another backend"))

    def _rebuild(self, state: State, key: tuple[str, str], changed: bool) -> None:
        """One commit of everything nm-zones has in the table; said loudly when another
        program `changed` it, quietly when no view was recorded yet (an interrupted first
        run, a state from an older nm-zones)."""
        started = time.monotonic()
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
            allowed = allowed_for(state, name, usable.name)
            if interface_digest(name, usable, allowed) != binding.digest:
                binding.digest = ""  # its other tables may be older: apply it whole again
            plans.append(interface_plan(self.compiled, name, usable, allowed, self.paths))
        self.backend.rebuild(key, plans, self.panic)
        self._keep_entries()
        self.save(state)
        if not changed:
            return
        self.degraded = True
        self.warn(
            f"{' '.join(key)}: nm-zones' rules had been changed by another program; "
            f"rebuilt in {_ms(started):.1f} ms"
        )

    def repair(self, state: State) -> None:
        """Finish what an interrupted run left `applying` or `removing`."""
        for name, binding in sorted(state.interfaces.items()):
            try:
                if binding.status == "applying":
                    binding.digest = ""  # force a fresh commit
                    connection = recorded_connection(binding)
                    try:
                        self.apply_interface(name, binding.zone, binding.reason, connection, state)
                    except UsageError:
                        self.remove_interface(name, "unusable after interruption", state)
                elif binding.status == "removing":
                    self.remove_interface(name, "finishing an interrupted removal", state)
            except (KernelError, OSError) as error:
                self.failed(name, state, error)

    def failed(self, interface: str, state: State, error: Exception) -> None:
        """An interface whose commit failed: said once, marked degraded, others go on."""
        self.degraded = True
        message = f"{interface}: {describe(error)}"
        self.warn(message)
        binding = state.interfaces.get(interface)
        if binding is not None and binding.degraded != message:
            binding.degraded = message
            try:  # noqa: SIM105 - contextlib would cost every event 5 ms of imports
                self.save(state)
            except OSError:
                pass

    def collect_garbage(self, state: State) -> None:
        """Interfaces that are gone (or whose name now belongs to another device) lose their
        rules: a failed activation never sends `down`."""
        for name, binding in sorted(state.interfaces.items()):
            index = interface_index(name)
            if index == 0 or (binding.ifindex and index != binding.ifindex):
                try:
                    self.remove_interface(name, "interface gone", state)
                except (KernelError, OSError) as error:
                    self.failed(name, state, error)

    def collect_orphans(self, state: State) -> None:
        """Chains in the kernel for interfaces the state does not know and that do not exist
        (a lost state is no reason to unfilter an interface that is up)."""
        import socket

        known = {chain_token(name) for name in state.interfaces}
        known |= {chain_token(name) for _, name in socket.if_nameindex()}
        for token in self.backend.interface_tokens() - known:
            owned = frozenset(f"nmz-if-{token}-{kind}" for kind in CHAIN_KINDS)
            self.backend.remove_chains(owned)
            self._changed(Change(f"<{token}>", "?", "", "orphaned chains removed"))

    def disable_all(self, state: State, reason: str = "nm-zones disabled") -> None:
        """Every rule of nm-zones out of the kernel (the disabled flag, written first, is the
        journal: a run that finds it finishes this); bindings kept, marked disabled."""
        self.backend.remove_everything()
        self._remove_from_other_backends(state)
        for name, binding in sorted(state.interfaces.items()):
            if binding.status != "disabled":
                self._changed(Change(name, binding.zone, "", reason))
            binding.status, binding.digest = "disabled", ""
        if state.catchall_zone:
            self._changed(Change("*", state.catchall_zone, "", reason))
        state.catchall_zone = state.catchall_digest = ""
        state.kernel.clear()
        self.state_dir.save(state)

    def _remove_from_other_backends(self, state: State) -> None:
        """A backend the state says holds rules, other than the current one (a move that was
        interrupted): its rules go too."""
        from .backends import backend_of_key, open_backend

        for name in sorted({backend_of_key(key) for key in state.kernel} - {self.backend.name}):
            open_backend(name, self.paths.state).remove_everything()

    def finish_disable(self, state: State) -> None:
        """Called when the flag is set: complete a disable that was interrupted."""
        if (
            state.catchall_zone
            or state.kernel
            or any(b.status != "disabled" for b in state.interfaces.values())
        ):
            self.disable_all(state)

    def reload_everything(self, state: State) -> None:
        """`nm-zones reload`: runtime allowances (nm-zones allow) end, as firewalld's reload
        drops its runtime changes (the D-Bus reload too: doors/service.py), then reload()."""
        dropped, state.allowances = state.allowances, []
        self.reload(state)  # each interface they reached is committed without them
        deadlines = {a[3] for a in dropped if a[3]}  # their deadlines (allowances.DEADLINE)
        if deadlines:
            self.forget_deadlines(state, deadlines)  # what the backend kept for them
        if dropped:
            self.save(state)  # and those that reached no interface are gone too

    def reload(self, state: State, keep_explicit: bool = False) -> None:
        """Re-apply, after prepare(), only the interfaces whose rules differ under the config
        as it is now. `keep_explicit`: the zones callers set over D-Bus stay (a new default
        zone moves only the interfaces that fell to the old one, as in firewalld); without
        it, sources bound at runtime end here, as firewalld's runtime does."""
        if state.sources and not keep_explicit:
            state.sources = {}
            self._catchall_checked = False
            self.ensure_catchall(state)
        for name, binding in sorted(state.interfaces.items()):
            if binding.status not in IN_KERNEL:
                continue
            connection = recorded_connection(binding)
            zone, reason = binding.zone, binding.reason
            profile = _profile_to_reread(binding)
            if profile is not None:  # its zone may be allowed, or refused, by now
                connection = profile
                decision = self.decide(connection)
                zone, reason = decision.zone, decision.reason
            elif self._claimed(name, reason) or (keep_explicit and reason == REASON_DBUS):
                if zone not in self.known_zones():  # back to what nobody claims
                    try:
                        self.remove_interface(name, f"zone {zone!r} no longer exists", state)
                    except (KernelError, OSError) as error:
                        self.failed(name, state, error)
                    continue
            elif reason in (REASON_NM, REASON_COMMAND, REASON_SHARED):  # NM holds these
                if zone not in self.known_zones():
                    self.warn(f"{name}: zone {zone!r} no longer exists; moving to default-zone")
                    zone, reason = self.compiled.default_zone, "default-zone"
            else:
                from .networks.zone import recorded  # an identified network keeps its zone

                decision = recorded(self, name, connection, self.decide(connection), binding)
                zone, reason = decision.zone, decision.reason
            try:
                self.apply_interface(name, zone, reason, connection, state)
            except (KernelError, OSError) as error:
                self.failed(name, state, error)

    def _claimed(self, interface: str, reason: str) -> bool:
        """An exempt interface a caller bound: it keeps its zone while the zone exists."""
        return reason == REASON_DBUS and matches_exempt(interface, self.compiled.exempt_interfaces)


def _profile_to_reread(binding: Binding) -> Connection | None:
    """The profile of a binding its own zone decided, or one whose zone was refused (a
    user-editable profile), read again from NetworkManager: the settings may allow or refuse
    that zone now. None when it cannot be read (the binding keeps its zone, as before)."""
    if not binding.connection_uuid or not (
        binding.reason == REASON_NM or NOT_ALLOWED_MARK in binding.reason
    ):
        return None
    connection = read_connection(binding.connection_uuid, binding.connection_id)
    return connection if connection.found else None


def allowed_for(state: State, interface: str, zone: str) -> tuple:
    """The runtime allowances that reach `interface` bound to `zone` (ruleset/allowances.py)."""
    if not state.allowances:
        return ()
    from .ruleset.allowances import effective

    return effective(state.allowances, interface, zone)


def forget_allowances(state: State, interface: str, keep_zone: str = "") -> None:
    """Drop `interface`'s own allowances (those granted under `keep_zone` stay)."""
    state.allowances = [
        a for a in state.allowances if a[0] != interface or (keep_zone and a[1] == keep_zone)
    ]


def interface_digest(interface: str, usable: ZonePlan, allowed: tuple = ()) -> str:
    """What an interface's rules are a function of: its name, its zone's rules and the
    allowances that reach it (an interface without any keeps the digest it always had)."""
    extra = ""
    if allowed:
        from .ruleset.allowances import digest_text

        extra = digest_text(allowed)
    return fingerprint(f"{interface}\n{usable.digest}{extra}")


def interface_plan(
    compiled: CompiledConfig, interface: str, usable: ZonePlan, allowed=(), paths=None
):
    """The kernel plan of `interface` in zone `usable`, with its allowances' rules (a
    runtime masquerade or forward port: the zone compiled with it, from the files at `paths`,
    ruleset/runtime_features.py)."""
    if not allowed:
        return instantiate(usable, interface)
    from .ruleset.allowances import specs
    from .ruleset.runtime_features import split, variant_plan

    features, allowed = split(allowed)
    if features and paths is not None:
        usable = variant_plan(paths, usable, features)

    extra = {family: specs(allowed, compiled.services, family) for family in FAMILIES}
    return instantiate(usable, interface, extra)


def _ordered(keys) -> list[tuple[str, str]]:
    """View keys in commit order: each family's raw, nat, then filter (nftables' one key)."""
    order = {table: number for number, table in enumerate(TABLE_ORDER)}
    return sorted(keys, key=lambda key: (key[0], order.get(key[1], -1)))


def describe(error: Exception) -> str:
    """One line for any error a run can meet: python-iptables', the kernel's, the disk's."""
    if isinstance(error, OSError) and error.strerror and error.filename:
        return f"{error.filename}: {error.strerror}"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return " ".join(str(error).split()) or type(error).__name__


def _change_reason(reason: str, old, zone: str) -> str:
    """What the change record says happened."""
    if old and old.zone == zone and old.status == "applied":
        return f"{reason}; the zone's rules changed"
    if old and old.status == "applying":
        return f"{reason}; repairing an interrupted apply"
    return reason


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000
