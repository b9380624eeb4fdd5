"""`nm-zones networks`: the known networks (networks/store.py), listed, placed in a zone,
renamed, forgotten; and `assign` on a connection whose zone follows its network."""

from __future__ import annotations

from ..errors import ConfigError, UsageError, unknown_zone
from ..paths import Paths

NETWORKS_DETAILS = """\
A wired profile such as "Wired connection 1" reaches many networks. nm-zones recognises each
one by its default gateway's MAC address (resolved on the wire when the connection comes up),
together with the DHCP server identifier and domain name when it has them (for Wi-Fi with
identify-networks: all, the SSID and access point too), and stores it here when first seen,
with no zone. A profile with no zone of its own (no connection.zone, no map entry) gets the
zone of the known network it is on; an unknown or unplaced network gets wired-zone /
default-zone. A network matches a stored one when the gateway MAC matches and, where the
stored entry has them, the DHCP server identifier, the domain and the SSID match too.
Stored in /var/lib/nm-zones/networks.yaml (NM_ZONES_DATA_DIR moves the folder), with what
`nm-zones allow WHAT --network ID --permanent` opens on a network only (its `allow`)."""


def known_networks(paths: Paths):
    """The store of known networks; a broken one is refused with its FILE:LINE problems."""
    from ..networks.store import load_store

    store = load_store(paths)
    if store.broken:
        raise ConfigError(store.problems)
    return store


def listing(store) -> list[str]:
    """`nm-zones networks` as text: one line per network."""
    if not store.networks:
        return ["no known networks yet"]
    lines = []
    for network in store.networks:
        facts = "  ".join(
            f"{key} {value}" for key, value in network.identity.fields().items() if value
        )
        allowed = f"  allow {' '.join(network.allowed)}" if network.allowed else ""
        lines.append(
            f"{network.id}  {network.zone or '(unplaced)':<10} last seen {network.last_seen}"
            f"  {network.label!r}  {facts}{allowed}"
        )
    return lines


def check_change(engine, action: str, value: str) -> None:
    if action not in ("forget", "rename", "zone"):
        raise UsageError(f"{action!r}: one of forget, rename, zone")
    if action == "zone" and value not in engine.known_zones():
        raise unknown_zone(value)


def change_network(engine, action: str, network_id: str, value: str, state=None) -> str:
    """Forget, rename or place (`zone`) a known network, saved whole; with `state` (held
    under the state lock) the interfaces on it follow at once. Returns what was done, in
    one line. The command line and the D-Bus service share it."""
    from ..networks.zone import follow

    check_change(engine, action, value)
    store = known_networks(engine.paths)
    kept: tuple[str, ...] = ()
    if action == "forget":
        network = store.forget(network_id)
        said = f"forgot network {network.label!r} ({network.id}): it is unknown from now on"
    elif action == "rename":
        network = store.rename(network_id, value)
        said = f"network {network.id} is now called {network.label!r}"
    else:
        network = store.place(network_id, value)
        said = f"network {network.label!r} ({network.id}) is now {network.zone}"
        if _lets_nobody_in(engine, network.zone):
            kept, network.allowed = network.allowed, ()
    store.save()
    if state is not None:
        said += _end_allowances(engine, action, network, state, kept)
        follow(engine, state)
    return said


def closed_zone(zone) -> bool:
    """A zone that refuses everyone (block, drop): no allowance reaches into it."""
    if zone is None or zone.target not in ("reject", "drop"):
        return False
    return not (zone.services or zone.ports or zone.protocols or zone.forward_ports)


def _lets_nobody_in(engine, zone: str) -> bool:
    from ..config.load import load

    return closed_zone(load(engine.paths).config.zones.get(zone))


def _end_allowances(engine, action: str, network, state, kept: tuple[str, ...]) -> str:
    """A forgotten network's allowances (`allow --network`) end with it; so do those of a
    network placed in a zone that lets nobody in (block, drop), whose promise they would
    break, its own `allow` (`kept`, taken out of the store already) included. What is said
    about it ("" when nothing ended); `follow` then commits its interfaces."""
    from ..ruleset.allowances import network_owner

    owner = network_owner(network.id)
    ending = [a for a in state.allowances if a[0] == owner]
    if action == "rename" or not (ending or kept):
        return ""
    if action == "zone" and not _lets_nobody_in(engine, network.zone):
        return ""
    if ending:
        state.allowances = [a for a in state.allowances if a[0] != owner]
        engine.save(state)
    ended = ", ".join(sorted({a[2] for a in ending} | set(kept)))
    return f"; what was allowed on it ends ({ended})"


def assign_to_network(engine, name: str, zone: str, state) -> str:
    """`assign NAME ZONE` without --profile: for a connection whose zone follows its network,
    the zone is stored for the network it is on now, and what was done is returned. "": the
    profile names a zone of its own, or its type is not identified, and the caller sets
    connection.zone as ever."""
    from ..networks.zone import network_of, subject
    from ..resolve import read_connection
    from .nm import active_connections, nmcli

    details = nmcli("-g", "connection.uuid,connection.id", "connection", "show", name)
    lines = details.stdout.split("\n")
    if details.returncode != 0 or len(lines) < 2:
        return ""  # the profile path says what nmcli says
    uuid, label = lines[0].strip(), lines[1].strip()
    if not subject(read_connection(uuid, label), engine.compiled):
        return ""
    devices = [a.device for a in active_connections() if a.uuid == uuid]
    network_id = next(
        (n for n in (network_of(engine.paths.state, d, uuid) for d in devices) if n), ""
    )
    if not network_id:
        why = "is not active" if not devices else "is on a network nm-zones could not identify"
        raise UsageError(
            f"{name!r} {why} (no gateway answered, or it is still being identified), so "
            "there is no network to place; nothing changed (--profile sets connection.zone "
            "for every network)"
        )
    said = change_network(engine, "zone", network_id, zone, state)
    return f"{said}: {label!r} gets {zone} on this network only (--profile: on every network)"


def assign_on_bus(engine, name: str, zone: str, state) -> str:
    """AssignConnection over D-Bus: as `assign` without --profile on an identified network;
    elsewhere "" and the caller sets the profile's zone, as clients of this method (the
    notification agent asking at connection time) have always had it."""
    try:
        return assign_to_network(engine, name, zone, state)
    except UsageError:
        return ""


def add_networks_commands(sub, command, handler) -> None:
    """`networks [--json]`, `networks forget ID`, `networks rename ID LABEL`,
    `networks zone ID ZONE`; `command` is cli._command, `handler` cli.cmd_networks."""
    p = command(
        sub,
        "networks",
        handler,
        "the networks nm-zones has recognised (wired profiles reach many), and their zones",
        "nm-zones networks\n  nm-zones networks zone 3f2a9c1b07 home",
    )
    p.description = f"{p.description}\n\n{NETWORKS_DETAILS}"
    p.add_argument("--json", action="store_true", help="machine-readable output")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=False)
    q = actions.add_parser("forget", help="forget a network: it is unknown when next seen (root)")
    q.add_argument("id", metavar="ID")
    q = actions.add_parser("rename", help="give a network a label (root)")
    q.add_argument("id", metavar="ID")
    q.add_argument("label", metavar="LABEL")
    q = actions.add_parser("zone", help="place a network in a zone; its connections follow (root)")
    q.add_argument("id", metavar="ID")
    q.add_argument("zone", metavar="ZONE")
