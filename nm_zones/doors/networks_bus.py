"""The known networks on org.nm_zones.Manager1: GetNetworks (open to all), SetNetworkZone,
RenameNetwork and ForgetNetwork (polkit: org.nm-zones.assign, as assigning a connection's
zone is), each followed by the signal NetworksChanged. Kept apart from service.py, which
routes the calls here."""

from __future__ import annotations

import asyncio

from ..engine import recorded_connection
from ..ifname import interface_index
from ..networks.store import load_store
from ..networks.zone import PREFIX_KNOWN, REASON_UNKNOWN, SEEN_FILE, read_seen, subject
from .busapi import ACTION_ASSIGN, NMZ_INTERFACE, FirewallError
from .networks import change_network
from .watch import FileWatch


def methods(service) -> dict:
    """(interface, member) -> (in, out, polkit action, handler), as service._methods."""

    def change(action: str):
        async def handler(network_id: str, value: str = "") -> tuple:
            return await _change(service, action, network_id, value)

        return handler

    return {
        (NMZ_INTERFACE, "GetNetworks"): ("", "aa{ss}", None, lambda: get_networks(service)),
        (NMZ_INTERFACE, "SetNetworkZone"): ("ss", "as", ACTION_ASSIGN, change("zone")),
        (NMZ_INTERFACE, "RenameNetwork"): ("ss", "as", ACTION_ASSIGN, change("rename")),
        (NMZ_INTERFACE, "ForgetNetwork"): ("s", "as", ACTION_ASSIGN, change("forget")),
    }


async def get_networks(service) -> tuple:
    """Every known network as text values (zone "" while unplaced, absent facts "")."""
    store = await asyncio.to_thread(load_store, service.paths)
    if store.broken:
        raise FirewallError("INVALID_VALUE", "; ".join(str(p) for p in store.problems))
    rows = [
        {key: _text(value) for key, value in network.as_dict().items()}
        for network in store.networks
    ]
    return (rows,)


def _text(value) -> str:
    """A value of `networks --json` as GetNetworks' text: a list (`allow`) space-separated."""
    if isinstance(value, list):
        return " ".join(value)
    return value or ""


async def _change(service, action: str, network_id: str, value: str) -> tuple:
    engine = service.engine()
    said: list[str] = []

    def work():
        said.append(
            service.locked(
                engine, lambda state: change_network(engine, action, network_id, value, state)
            )
        )

    await service.run_engine(engine, work, "INVALID_VALUE")
    await service.emit(NMZ_INTERFACE, "NetworksChanged")
    return (said + [str(change) for change in engine.changes],)


# the reasons of a binding whose profile has no zone of its own (resolve.py, networks/zone.py)
DEFAULT_REASONS = ("default for wired", "default for wireless", "default-zone")


def identification(engine, interface: str, binding) -> dict[str, str]:
    """GetConnections' keys for a connection whose zone follows its network: `network` (the
    id it was identified as, else "") and `identification`: "pending" (not looked yet),
    "unidentified" (looked: no gateway answered, no lease facts) or "identified"; both ""
    for a profile with a zone of its own or a type not identified."""
    reason = binding.reason
    follows = reason in DEFAULT_REASONS or reason.startswith(PREFIX_KNOWN)
    follows = follows or reason in REASON_UNKNOWN.values()
    if not follows or not subject(recorded_connection(binding), engine.compiled):
        return {"network": "", "identification": ""}
    entry = read_seen(engine.paths.state).get(interface)
    current = entry and entry[:2] == (interface_index(interface), binding.connection_uuid)
    if not current:
        return {"network": "", "identification": "pending"}
    return {"network": entry[2], "identification": "identified" if entry[2] else "unidentified"}


def watch_identifications(service):
    """NetworksChanged whenever the hook (or anyone) records which network an interface is
    on: the desktop agent asks about a new network then. None when it cannot watch."""

    def changed() -> None:
        task = asyncio.get_running_loop().create_task(
            service.emit(NMZ_INTERFACE, "NetworksChanged")
        )
        service._tasks.add(task)
        task.add_done_callback(service._tasks.discard)

    watch = FileWatch(service.paths.state, SEEN_FILE, changed)
    return watch if watch.start() else None
