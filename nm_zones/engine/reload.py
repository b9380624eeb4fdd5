"""Reload: every bound interface committed again under the config as it is now (only those
whose rules differ reach the kernel, in one transaction: together.py), and runtime
allowances that end, by `reload` or at their deadline."""

from __future__ import annotations

from ..errors import KernelError, describe
from ..ifname import matches_exempt
from ..resolve import REASON_SHARED, recorded_connection
from ..state import Binding, State, Status
from .basics import (
    IN_KERNEL,
    REASON_COMMAND,
    REASON_DBUS,
    REASON_NM,
    binding_network,
    profiles_to_reread,
    rereads_profile,
)


class Reload:
    """The part of the Engine that applies everything again."""

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
        bound = [(n, b) for n, b in sorted(state.interfaces.items()) if b.status in IN_KERNEL]
        profiles = profiles_to_reread(b for _, b in bound)
        steps = [
            lambda n=n, b=b: self._reload_one(n, b, keep_explicit, state, profiles)
            for n, b in bound
        ]
        self.together(state, steps)  # the interfaces whose rules changed: one commit

    def _reload_one(
        self, name: str, binding: Binding, keep_explicit: bool, state: State, profiles: dict
    ) -> None:
        target = self._reload_target(name, binding, keep_explicit, profiles)
        try:
            if target is None:  # back to what nobody claims
                why = f"zone {binding.zone!r} no longer exists"
                self.remove_interface(name, why, state)
            else:
                self.apply_interface(name, *target, state)
        except (KernelError, OSError) as error:
            self.failed(name, state, error)

    def _reload_target(self, name: str, binding: Binding, keep_explicit: bool, profiles: dict):
        """(zone, reason, connection) for one bound interface under the config as it is
        now: decided again where the config decided it (`profiles`: those read again, by
        UUID), kept where a person or a caller named it; None when a caller's zone no
        longer exists (the interface is removed)."""
        connection = recorded_connection(binding)
        zone, reason = binding.zone, binding.reason
        profile = profiles.get(binding.connection_uuid) if rereads_profile(binding) else None
        if profile is not None:  # its zone may be allowed, or refused, by now
            connection = profile
            decision = self.decide(connection)
            zone, reason = decision.zone, decision.reason
        elif self._claimed(name, reason) or (keep_explicit and reason == REASON_DBUS):
            if zone not in self.known_zones():
                return None
        elif reason in (REASON_NM, REASON_COMMAND, REASON_SHARED):  # NM holds these
            if zone not in self.known_zones():
                self.warn(f"{name}: zone {zone!r} no longer exists; moving to default-zone")
                zone, reason = self.compiled.default_zone, "default-zone"
        else:
            from ..networks.zone import recorded  # an identified network keeps its zone

            decision = recorded(self, name, connection, self.decide(connection), binding)
            zone, reason = decision.zone, decision.reason
        return zone, reason, connection

    def _claimed(self, interface: str, reason: str) -> bool:
        """An exempt interface a caller bound: it keeps its zone while the zone exists."""
        return reason == REASON_DBUS and matches_exempt(interface, self.compiled.exempt_interfaces)

    def expire_allowances(self, state: State) -> None:
        """Runtime allowances past their deadline (on CLOCK_BOOTTIME: ruleset/allowances.py)
        leave the state, and the interfaces they reached are committed without them: at the
        deadline their rules leave the kernel, not only stop matching."""
        from ..ruleset.allowances import DEADLINE, boottime, expired, reaches

        now = boottime()
        gone = [a for a in state.allowances if expired(a, now)]
        if not gone:
            return
        state.allowances = [a for a in state.allowances if not expired(a, now)]
        self.save(state)
        steps = []
        for name, binding in sorted(state.interfaces.items()):
            if binding.status != Status.APPLIED:
                continue
            network = ""
            if any(a[0].startswith("network:") for a in gone):  # allowances.NETWORK_PREFIX
                network = binding_network(self.paths.state, name, binding)
            ended = sorted({a[2] for a in gone if reaches(a, name, binding.zone, network)})
            if ended:
                why = f"{', '.join(ended)} expired"
                steps.append(lambda name=name, why=why: self.reapply(name, state, why))
        self.together(state, steps)
        self.forget_deadlines(state, {a[DEADLINE] for a in gone})

    def forget_deadlines(self, state: State, deadlines) -> None:
        """What the backend keeps per deadline (nftables: a set) once no rule uses it."""

        def forget() -> None:
            try:
                self.backend.forget_deadlines(deadlines)
            except (KernelError, OSError) as error:
                self.warn(f"timed allowances: {describe(error)}")

        self.commit(state, None, forget)  # no journal entry: no rule uses them any more
