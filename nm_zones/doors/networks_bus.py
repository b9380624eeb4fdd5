"""The known networks on org.nm_zones.Manager1: GetNetworks (open to all), SetNetworkZone,
RenameNetwork and ForgetNetwork (polkit: org.nm-zones.assign, as assigning a connection's
zone is), each followed by the signal NetworksChanged. Kept apart from service.py, which
routes the calls here."""

from __future__ import annotations

from .busapi import NMZ_INTERFACE, FirewallError


def methods(service) -> dict:
    """(interface, member) -> (in, out, polkit action, handler), as service._methods."""
    from .busapi import ACTION_ASSIGN

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
    import asyncio

    from ..networks.store import load_store

    store = await asyncio.to_thread(load_store, service.paths)
    if store.broken:
        raise FirewallError("INVALID_VALUE", "; ".join(str(p) for p in store.problems))
    rows = [
        {key: value or "" for key, value in network.as_dict().items()} for network in store.networks
    ]
    return (rows,)


async def _change(service, action: str, network_id: str, value: str) -> tuple:
    from .networks import change_network

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
