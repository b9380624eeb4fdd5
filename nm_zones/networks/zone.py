"""The zone that follows the network, for profiles with no zone of their own.

A profile subject to identification (nm-zones.yaml `identify-networks`: wired profiles by
default) that names no zone (no connection.zone, no entry in the connections map) gets:

- while it is being identified (pre-up, NetworkManager's stage-3 call, an event without
  lease facts): what unknown networks get today, wired-zone / wireless-zone / default-zone,
  so nothing is ever laxer before identification;
- once identified, the zone stored for that network (`known network "LABEL"`), or, for a
  network nobody placed yet, that same unknown-network zone (`unknown wired network`).

Which network each interface is on is kept in the state directory (SEEN_FILE), for the
events that carry no lease facts, for `assign` and for the service after a restart.
"""

from __future__ import annotations

import marshal
import os

from ..files import read_trusted, write_atomically
from ..resolve import WIRED_TYPES, WIRELESS_TYPES, Decision, recorded_connection
from ..state import Status

SEEN_FILE = "networks-seen"
PREFIX_KNOWN = "known network"
REASON_UNKNOWN = {"wired": "unknown wired network", "wireless": "unknown wireless network"}
IDENTIFYING_ACTIONS = frozenset({"pre-up"})
UNIDENTIFIED = ""  # a seen entry's network id: looked, no gateway or lease facts (yet)


def known_reason(label: str) -> str:
    return f'{PREFIX_KNOWN} "{label}"'


def subject(connection, compiled) -> str:
    """ "wired" or "wireless" when the profile's zone follows its network, else ""."""
    setting = compiled.settings.get("identify-networks", "wired")
    if setting == "none" or connection.zone or connection.shared:
        return ""
    for key in (connection.uuid, connection.id):
        if key and compiled.zone_for(key):
            return ""
    if connection.type in WIRED_TYPES:
        return "wired"
    if setting == "all" and connection.type in WIRELESS_TYPES:
        return "wireless"
    return ""


def quick_after(connection, compiled) -> bool:
    """Whether a binding made while `connection` is being identified (pre-up, the stage-3
    call) may let the next event take the quick path (quick.py). Not when its zone follows
    its network: `up` must look for the network even when its inputs are unchanged (a
    static profile without a gateway), and record what it found (read_seen)."""
    return not subject(connection, compiled)


# -- which interface is on which network (the state directory) --------------------------


def read_seen(state_dir: str) -> dict:
    """interface -> (ifindex, connection UUID, network id); empty when absent or unreadable.
    The id is UNIDENTIFIED when `up` (or an event with lease facts) looked and found nothing
    to identify (the desktop agent then asks about the profile, not about a network)."""
    try:
        data = read_trusted(os.path.join(state_dir, SEEN_FILE))
        return marshal.loads(data) if data else {}
    except (OSError, EOFError, ValueError, TypeError):
        return {}


def _write_seen(state_dir: str, seen: dict) -> None:
    write_atomically(os.path.join(state_dir, SEEN_FILE), marshal.dumps(seen), 0o600)


def remember(state_dir: str, interface: str, entry: tuple | None) -> None:
    """Record (or with None forget) the network `interface` is on; under the state lock."""
    seen = read_seen(state_dir)
    if seen.get(interface) == entry:
        return
    if entry is None:
        del seen[interface]
    else:
        seen[interface] = entry
    _write_seen(state_dir, seen)


def network_of(state_dir: str, interface: str, uuid: str) -> str:
    """The id of the network `interface` is on, as its connection `uuid` identified it
    ("" while none is)."""
    from ..ifname import interface_index

    entry = read_seen(state_dir).get(interface)
    if entry and entry[1] == uuid and entry[0] == interface_index(interface):
        return entry[2]
    return ""


def current_network(state_dir: str, interface: str, reason: str, uuid: str) -> str:
    """The id of the known network `interface` is on while its zone follows it: bound for
    a network (`reason` a network's, so identified at this very activation, never a record
    left from the last one) by connection `uuid`; else "". A network's allowances
    (`allow --network`) reach it then."""
    if not (reason.startswith(PREFIX_KNOWN) or reason in REASON_UNKNOWN.values()):
        return ""
    return network_of(state_dir, interface, uuid)


# -- the decision ------------------------------------------------------------------------


def decide(engine, interface: str, connection, decision: Decision, action: str, env: dict):
    """The zone for `connection` on `interface` at a dispatcher event: `decision` (what
    resolve.decide_zone said) unless the profile's zone follows its network."""
    kind = subject(connection, engine.compiled)
    if not kind:
        return decision
    from .identity import from_event, has_lease_facts

    state_dir = engine.paths.state
    if action in IDENTIFYING_ACTIONS:
        remember(state_dir, interface, None)
        return decision
    from ..ifname import interface_index

    if not has_lease_facts(env):  # dhcp4-change in NetworkManager 1.42, vpn-up, ...
        network_id = network_of(state_dir, interface, connection.uuid)
        if network_id:
            return _by_id(engine, network_id, decision, kind)
        if action == "up":  # configured, and nothing to identify it by
            looked = (interface_index(interface), connection.uuid, UNIDENTIFIED)
            remember(state_dir, interface, looked)
        return decision
    identity = from_event(interface, env, wireless=kind == "wireless")
    if not identity.identified:
        remember(state_dir, interface, (interface_index(interface), connection.uuid, UNIDENTIFIED))
        return decision
    from .store import load_store

    store = load_store(engine.paths)
    if store.broken:
        _refused(engine, store)
        return Decision(decision.zone, REASON_UNKNOWN[kind])
    network, changed = store.seen(identity)
    try:
        if changed:
            store.save()
    except OSError as error:  # a full or read-only disk: the zone is still decided
        engine.warn(f"known networks not saved: {error.strerror or error}")
    remember(state_dir, interface, (interface_index(interface), connection.uuid, network.id))
    return zone_of(engine, network, decision, kind)


def recorded(engine, interface: str, connection, decision: Decision, binding) -> Decision:
    """For the service's stage-3 call (NetworkManager's replay after a restart) and for
    reload: the network's zone only while `interface` is still bound by that very
    identification (same connection, same index, its binding's reason a network's);
    else `decision`."""
    kind = subject(connection, engine.compiled)
    if not kind or binding is None or binding.status not in Status.IN_KERNEL:
        return decision
    network_reason = (
        binding.reason.startswith(PREFIX_KNOWN) or binding.reason == REASON_UNKNOWN[kind]
    )
    if binding.connection_uuid != connection.uuid or not network_reason:
        return decision
    network_id = network_of(engine.paths.state, interface, connection.uuid)
    return _by_id(engine, network_id, decision, kind) if network_id else decision


def _by_id(engine, network_id: str, decision: Decision, kind: str) -> Decision:
    from .store import load_store

    store = load_store(engine.paths)
    if store.broken:
        _refused(engine, store)
        return Decision(decision.zone, REASON_UNKNOWN[kind])
    network = store.find(network_id)
    if network is None:  # forgotten since
        return Decision(decision.zone, REASON_UNKNOWN[kind])
    return zone_of(engine, network, decision, kind)


def zone_of(engine, network, decision: Decision, kind: str) -> Decision:
    """The network's zone; an unplaced one (or one whose zone does not exist) gets the
    unknown-network zone."""
    if not network.zone:
        return Decision(decision.zone, REASON_UNKNOWN[kind])
    if network.zone not in engine.known_zones():
        engine.warn(
            f"known network {network.label!r} names zone {network.zone!r}, which does not "
            "exist; using the zone of unknown networks"
        )
        return Decision(decision.zone, REASON_UNKNOWN[kind])
    return Decision(network.zone, known_reason(network.label))


def _refused(engine, store) -> None:
    for problem in store.problems:
        engine.warn(f"known networks not used: {problem}")


def follow(engine, state) -> None:
    """After a known network changed (placed, forgotten): every interface identified on it
    gets the zone that now follows, at once."""
    from ..ifname import interface_index

    for interface, (ifindex, uuid, network_id) in sorted(read_seen(engine.paths.state).items()):
        if network_id == UNIDENTIFIED:
            continue
        binding = state.interfaces.get(interface)
        if binding is None or binding.status != Status.APPLIED or binding.connection_uuid != uuid:
            continue
        if interface_index(interface) != ifindex:
            continue
        connection = recorded_connection(binding)
        kind = subject(connection, engine.compiled)
        if not kind:
            continue
        decision = _by_id(engine, network_id, engine.decide(connection), kind)
        engine.apply_interface(interface, decision.zone, decision.reason, connection, state)
