"""The pipeline both doors (the dispatcher hook and the `nm-zones` command) go through:
binding -> the zone's compiled plan (compiled.py) -> kernel -> state, with the fail-safe rules:

- a zone whose file (or a service it uses) cannot be loaded never opens anything: an interface
  that already has rules keeps them; a new one gets the shipped definition, else `block`;
- an interface is marked `applying` in the state before its commits, so an interrupted run is
  repaired by the next one;
- nothing is committed when the compiled rules equal what was applied (a no-op event does not
  even import python-iptables).
"""

from __future__ import annotations

import time

from .compiled import CompiledConfig, ZonePlan, instantiate
from .digest import fingerprint
from .errors import UsageError, unknown_zone
from .ifname import chain_token, check_interface, interface_index, matches_exempt
from .layout import CHAIN_KINDS
from .log import Change, record, to_syslog
from .paths import Paths
from .resolve import REASON_SHARED, Connection, decide_zone
from .state import Binding, State, StateDir

REASON_COMMAND = "command line"
REASON_NM = "nmcli connection.zone"


def recorded_connection(binding: Binding) -> Connection:
    """The connection as remembered at apply time (the profile may be gone since)."""
    return Connection(binding.connection_uuid, binding.connection_id, binding.connection_type)


class Engine:
    def __init__(
        self,
        paths: Paths | None = None,
        use_cache: bool = True,
        compiled: CompiledConfig | None = None,
        netfilter=None,
    ):
        """`compiled` and `netfilter` let a resident process (the D-Bus service) share one
        compiled config and one python-iptables between the engines it makes."""
        self.paths = paths or Paths.from_environment()
        self.state_dir = StateDir(self.paths.state)
        self.use_cache = use_cache
        self._compiled: CompiledConfig | None = compiled
        self._netfilter = netfilter
        self._catchall_checked = False
        self.changes: list[Change] = []
        self.warnings: list[str] = []
        self.degraded = False

    # -- inputs --------------------------------------------------------------------------

    @property
    def compiled(self) -> CompiledConfig:
        """The config as the engine uses it (compiled.py), loaded on first use."""
        if self._compiled is None:
            from .compiled import load

            self._compiled = load(self.paths, self.use_cache)
        return self._compiled

    @property
    def netfilter(self):
        if self._netfilter is None:
            from .kernel import Netfilter

            self._netfilter = Netfilter(self.paths.state)
        return self._netfilter

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

    def _keep_entries(self) -> None:
        """Keep kernel entries built in this run for the next ones (entries.py), and only
        those the current config uses."""
        entries = self.netfilter.entries
        if entries.added:
            specs = self.compiled.specs()
            entries.save(lambda family, spec: (family, spec) in specs or spec[0] == "LOG")

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
        digest = catchall["digest"]
        if state.catchall_digest == digest:
            return
        started = time.monotonic()
        self.netfilter.apply(self.compiled.catchall_plan())
        self._keep_entries()
        old = state.catchall_zone
        state.catchall_zone, state.catchall_digest = catchall["zone"], digest
        self.state_dir.save(state)
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

    # -- one interface -------------------------------------------------------------------

    def apply_interface(
        self,
        interface: str,
        zone_name: str,
        reason: str,
        connection: Connection | None = None,
        state: State | None = None,
        inputs: str = "",
    ) -> Change | None:
        """Bind `interface` to `zone_name`; returns the change made, None for a no-op.
        `inputs` records what decided it, for the quick path of the next event."""
        check_interface(interface)
        if matches_exempt(interface, self.compiled.exempt_interfaces):
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
        problems = [usable.problem] if usable.problem else []
        if self.compiled.map_broken and reason not in (REASON_COMMAND, REASON_NM):
            problems.append(f"connections map cannot be loaded ({self.compiled.map_broken})")
        degraded = ""
        if problems:
            self.degraded = True
            if old and old.status == "applied":
                degraded = "; ".join([*problems, f"keeping its rules of zone {old.zone!r}"])
                self.warn(f"{interface}: {degraded}")
                if old.degraded != degraded:
                    old.degraded = degraded
                    self.state_dir.save(state)
                return None
            fallback = usable.fallback or "using the shipped map"
            degraded = "; ".join([*problems, fallback])
            self.warn(f"{interface}: {degraded}")
        # the rules are a pure function of the interface name and the zone's rules
        digest = fingerprint(f"{interface}\n{usable.digest}")
        ifindex = interface_index(interface)
        if old and old.status == "applied" and old.digest == digest and old.ifindex == ifindex:
            if (old.reason, old.connection_uuid, old.degraded, old.inputs) != (
                reason,
                connection.uuid,
                degraded,
                inputs or old.inputs,
            ):
                old.reason, old.degraded = reason, degraded
                old.inputs = inputs or old.inputs
                old.connection_uuid = connection.uuid or old.connection_uuid
                old.connection_id = connection.id or old.connection_id
                self.state_dir.save(state)
            return None
        started = time.monotonic()
        plan = instantiate(usable, interface)
        new_tables = sorted(plan.tables)
        previous = old.table_set() if old else None
        binding = Binding(
            zone=usable.name,
            reason=reason,
            ifindex=ifindex,
            connection_uuid=connection.uuid,
            connection_id=connection.id,
            connection_type=connection.type,
            since=time.time(),
            digest=digest,
            tables=[list(t) for t in sorted(set(new_tables) | (previous or set()))],
            status="applying",
            degraded=degraded,
            inputs=inputs,
        )
        state.interfaces[interface] = binding
        self.state_dir.save(state)
        self.netfilter.apply(plan, previous)
        self._keep_entries()
        binding.status = "applied"
        binding.tables = [list(t) for t in new_tables]
        self.state_dir.save(state)
        why = reason
        if old and old.zone == usable.name and old.status == "applied":
            why = f"{reason}; the zone's rules changed"
        elif old and old.status == "applying":
            why = f"{reason}; repairing an interrupted apply"
        return self._changed(
            Change(
                interface,
                old.zone if old else "",
                usable.name,
                why,
                connection.id or connection.uuid,
                _ms(started),
                degraded,
            )
        )

    def remove_interface(
        self, interface: str, reason: str = "removed", state: State | None = None
    ) -> Change | None:
        state = state or self.state_dir.load()
        old = state.interfaces.get(interface)
        if old is None:
            return None
        started = time.monotonic()
        self.netfilter.remove(interface, old.table_set() or None)
        del state.interfaces[interface]
        self.state_dir.save(state)
        return self._changed(
            Change(interface, old.zone, "", reason, old.connection_id, _ms(started))
        )

    def _changed(self, change: Change) -> Change:
        self.changes.append(change)
        record(change)
        return change

    # -- everything ----------------------------------------------------------------------

    def repair(self, state: State) -> None:
        """Finish what an interrupted run left `applying`."""
        for name, binding in sorted(state.interfaces.items()):
            if binding.status == "applying":
                binding.digest = ""  # force a fresh commit
                connection = recorded_connection(binding)
                try:
                    self.apply_interface(name, binding.zone, binding.reason, connection, state)
                except UsageError:
                    self.remove_interface(name, "unusable after interruption", state)

    def collect_garbage(self, state: State) -> None:
        """Interfaces that are gone (or whose name now belongs to another device) lose their
        rules: a failed activation never sends `down`."""
        for name, binding in sorted(state.interfaces.items()):
            index = interface_index(name)
            if index == 0 or (binding.ifindex and index != binding.ifindex):
                self.remove_interface(name, "interface gone", state)

    def collect_orphans(self, state: State) -> None:
        """Chains in the kernel for interfaces the state does not know (lost state)."""
        known = {chain_token(name) for name in state.interfaces}
        for token in self.netfilter.interface_tokens() - known:
            owned = frozenset(f"nmz-if-{token}-{kind}" for kind in CHAIN_KINDS)
            self.netfilter.remove_chains(owned)
            self._changed(Change(f"<{token}>", "?", "", "orphaned chains removed"))

    def reload(self) -> None:
        """Re-read the config and re-apply only the interfaces whose rules differ."""
        state = self.state_dir.load()
        self.repair(state)
        self.collect_garbage(state)
        self.ensure_catchall(state)
        for name, binding in sorted(state.interfaces.items()):
            connection = recorded_connection(binding)
            zone, reason = binding.zone, binding.reason
            if reason in (REASON_NM, REASON_COMMAND, REASON_SHARED):  # NM holds these
                if zone not in self.known_zones():
                    self.warn(f"{name}: zone {zone!r} no longer exists; moving to default-zone")
                    zone, reason = self.compiled.default_zone, "default-zone"
            else:
                decision = self.decide(connection)
                zone, reason = decision.zone, decision.reason
            self.apply_interface(name, zone, reason, connection, state)


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000
