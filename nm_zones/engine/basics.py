"""What every part of the engine uses: the reasons it records, the table sets it commits,
and an interface's digest and kernel plan (pure functions of its name, its zone's rules and
the runtime allowances that reach it)."""

from __future__ import annotations

import time

from ..digest import fingerprint
from ..resolve import NOT_ALLOWED_MARK, REASON_PROFILE, Connection
from ..ruleset.cache import CompiledConfig
from ..ruleset.layout import FAMILIES, TABLE_ORDER
from ..ruleset.plan import ZonePlan, instantiate
from ..state import Binding, State, Status

REASON_COMMAND = "command line"
REASON_NM = REASON_PROFILE
PANIC_WORD = "panic mode"  # what change records and `status` call it
# a caller on the bus named the zone (Docker for docker0, libvirt for virbr0): such a claim
# binds even an interface that exempt-interfaces names, since exemption is for interfaces
# nobody claims; and a broken connections map does not matter to it (doors/service.py)
REASON_DBUS = "D-Bus call"
IN_KERNEL = Status.IN_KERNEL  # binding statuses whose rules belong in the kernel
FILTER_TABLES = frozenset((family, "filter") for family in FAMILIES)
ALL_TABLES = frozenset((family, table) for family in FAMILIES for table in TABLE_ORDER)


def allowed_for(
    state: State, interface: str, zone: str, network: str = "", paths=None
) -> tuple:
    """The allowances that reach `interface` bound to `zone` on the known network
    `network` (ruleset/allowances.py): the runtime ones, and with `paths` those the network
    keeps for good (`allow --network ID --permanent`, in its `allow`: networks/store.py)."""
    allowances = state.allowances
    if network and paths is not None:
        allowances = allowances + kept_by_network(paths, network)
    if not allowances:
        return ()
    from ..ruleset.allowances import effective

    return effective(allowances, interface, zone, network)


def kept_by_network(paths, network: str) -> list:
    """A known network's own `allow`, as allowances without a deadline (none while the
    store is broken: nothing opens then, as with every network's zone)."""
    from ..networks.store import load_store
    from ..ruleset.allowances import FOREVER, network_owner

    store = load_store(paths)
    found = None if store.broken else store.find(network)
    if found is None:
        return []
    owner = network_owner(network)
    return [(owner, "", what, FOREVER, FOREVER) for what in found.allowed]


def network_for(state_dir: str, interface: str, reason: str, uuid: str) -> str:
    """The known network whose allowances reach `interface` bound for `reason` by the
    connection `uuid` (networks/zone.py); "" without reading a file unless its zone
    follows its network."""
    from ..networks.zone import current_network

    return current_network(state_dir, interface, reason, uuid)


def binding_network(state_dir: str, interface: str, binding: Binding) -> str:
    """network_for of a recorded binding."""
    return network_for(state_dir, interface, binding.reason, binding.connection_uuid)


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
        from ..ruleset.allowances import digest_text

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
    from ..ruleset.allowances import specs
    from ..ruleset.runtime_features import split, variant_plan

    features, allowed = split(allowed)
    if features and paths is not None:
        usable = variant_plan(paths, usable, features)

    extra = {family: specs(allowed, compiled.services, family) for family in FAMILIES}
    return instantiate(usable, interface, extra)


def rereads_profile(binding: Binding) -> bool:
    """Whether a reload reads the binding's profile again from NetworkManager: its own zone
    decided it, or its zone was refused (a user-editable profile); the settings may allow
    or refuse that zone now."""
    return bool(binding.connection_uuid) and (
        binding.reason == REASON_NM or NOT_ALLOWED_MARK in binding.reason
    )


def profiles_to_reread(bindings) -> dict[str, Connection]:
    """The profiles of those bindings, by UUID, read again in one nmcli run (one run per
    profile made a reload with 200 bound take a second); a profile that cannot be read is
    left out (its binding keeps its zone, as before)."""
    from ..resolve import nmcli_connections

    wanted = {b.connection_uuid: b.connection_id for b in bindings if rereads_profile(b)}
    return {
        uuid: Connection(uuid, wanted[uuid], kind, zone, shared=shared, permissions=permissions)
        for uuid, (zone, kind, shared, permissions) in nmcli_connections(list(wanted)).items()
    }


def ordered(keys) -> list[tuple[str, str]]:
    """View keys in commit order: each family's raw, nat, then filter (nftables' one key)."""
    order = {table: number for number, table in enumerate(TABLE_ORDER)}
    return sorted(keys, key=lambda key: (key[0], order.get(key[1], -1)))


def change_reason(reason: str, old: Binding | None, zone: str) -> str:
    """What the change record says happened."""
    if old and old.zone == zone and old.status == Status.APPLIED:
        return f"{reason}; the zone's rules changed"
    if old and old.status == Status.APPLYING:
        return f"{reason}; repairing an interrupted apply"
    return reason


def ms(started: float) -> float:
    """Milliseconds since `started` (time.monotonic)."""
    return (time.monotonic() - started) * 1000
