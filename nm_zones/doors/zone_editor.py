"""What the zone editor of nm-zones-settings reads and changes through `nm-zones serve`
(org.nm_zones.Manager1: GetZone, EditZone, RevokeAllowance).

Reads are a zone as its file and the state say it is now. Changes are `nm-zones allow
--permanent` / `revoke --permanent` (the admin's zone file edited as text by
config/zonefile.py, validated like a zone file, then re-applied) and `nm-zones revoke` of a
runtime allowance: the very code of doors/allow.py, so the window and the command agree.
"""

from __future__ import annotations

from types import SimpleNamespace

from ..engine import IN_KERNEL, Engine
from ..errors import UsageError
from ..ruleset.allowances import expired
from ..ruleset.runtime_features import is_feature
from ..state import State
from .allow import Request, check_what, run
from .common import DISABLED


def zone_details(loaded, state: State, name: str) -> dict[str, tuple[str, object]]:
    """The zone as the editor shows it, as D-Bus a{sv} (jeepney's (signature, value)):
    its lists, its services with their ports from the catalog, the interfaces bound to it
    now and the runtime allowances that reach it."""
    zone = loaded.config.zones.get(name)
    if zone is None:
        problems = loaded.broken_zones.get(name)
        if problems:
            raise UsageError("; ".join(str(p) for p in problems))
        raise UsageError(f"unknown zone {name!r}")
    services = []
    for service_name in zone.services:
        service = loaded.config.services.get(service_name)
        opens = [str(p) for p in service.ports] + list(service.protocols) if service else []
        services.append((service_name, " ".join(opens)))
    interfaces = [
        {"interface": interface, "connection": binding.connection_id or ""}
        for interface, binding in sorted(state.interfaces.items())
        if binding.zone == name and binding.status in IN_KERNEL
    ]
    allowances = [  # the deadline as the wall clock said it when granted (allowances.py)
        {"interface": allowance[0], "what": allowance[2], "deadline": str(allowance[4])}
        for allowance in state.allowances
        if allowance[1] == name and not expired(allowance)
    ]
    return {
        "description": ("s", zone.description),
        "target": ("s", zone.target),
        "file": ("s", zone.source),
        "services": ("a(ss)", services),
        "ports": ("as", [str(p) for p in zone.ports]),
        "protocols": ("as", list(zone.protocols)),
        "icmp-blocks": ("as", list(zone.icmp_blocks)),
        "masquerade": ("b", zone.masquerade),
        "log-denied": ("b", zone.log_denied),
        "interfaces": ("aa{ss}", interfaces),
        "allowances": ("aa{ss}", allowances),
    }


def _request(command: str, what: str, loaded, zone: str, interface: str, permanent: bool):
    """A revoke of a runtime feature (masquerade, a forward port, a removal of what the
    zone's file lists: ruleset/runtime_features.py) names it as the state holds it."""
    args = SimpleNamespace(
        command=command, zone=zone, interface=interface, duration="", permanent=permanent
    )
    feature = command == "revoke" and not permanent and is_feature(what)
    return Request(args, what if feature else check_what(what, loaded), loaded)


def edit_zone(engine: Engine, loaded, zone: str, what: str, add: bool, state: State) -> None:
    """`nm-zones allow|revoke WHAT --zone ZONE --permanent`, under the state lock."""
    if engine.paths.disabled:
        raise UsageError(DISABLED)
    request = _request("allow" if add else "revoke", what, loaded, zone, "", True)
    run(engine, request, state)


def revoke_allowance(
    engine: Engine, loaded, zone: str, interface: str, what: str, state: State
) -> None:
    """`nm-zones revoke WHAT --interface IFACE` (or `--zone ZONE` when IFACE is empty)."""
    if engine.paths.disabled:
        raise UsageError(DISABLED)
    run(engine, _request("revoke", what, loaded, zone, interface, False), state)
