"""firewalld's runtime zone methods for firewall-cmd and scripts: `getZoneSettings2`, the
services, ports, masquerade and forward ports of a zone (`zone.addPort` and the rest),
`authorizeAll`, `listServices`, `runtimeToPermanent` and `completeReload`.

A runtime port or service is an nm-zones runtime allowance for the whole zone (the machinery
of `nm-zones allow`, doors/allow.py): an ACCEPT rule in every interface of the zone, with a
timeout expiring in the kernel itself; it ends with `reload`, as in firewalld. A runtime
masquerade or forward port is such an allowance too: the zone's interfaces are committed as if
its file had it (ruleset/runtime_features.py). Removing at runtime what the zone's file lists
is one as well (`without:ssh`): the zone's interfaces are committed without it until reload,
as in firewalld. Errors carry
firewalld's codes and wording, so that firewall-cmd turns ALREADY_ENABLED and NOT_ENABLED
into warnings as it does against firewalld.
"""

from __future__ import annotations

import asyncio
import ipaddress
from types import SimpleNamespace

from ..config.load import load
from ..config.zonefile import edit_zone_file
from ..errors import ConfigError, UsageError
from ..ruleset.allowances import expired
from ..ruleset.runtime_features import (
    FORWARD_PREFIX,
    MASQUERADE,
    forward_fields,
    forward_what,
    is_feature,
    removed,
    without,
)
from . import allow
from .busapi import ACTION_CONFIGURE, MAIN_INTERFACE, ZONE_INTERFACE, FirewallError
from .firewalld_config import settings_dict
from .firewalld_permanent import PermanentItems
from .firewalld_ports import check_port, port_text
from .firewalld_sources import Sources  # the zone files' and the runtime's

# what nm-zones does not do, each refused with a firewalld code firewall-cmd knows
UNSUPPORTED = {
    "addRichRule": ("INVALID_RULE", "nm-zones has no rich rules"),
    "addProtocol": ("INVALID_PROTOCOL", "nm-zones adds protocols in the zone's file only"),
    "addSourcePort": ("INVALID_PORT", "nm-zones zones have no source ports"),
    "addIcmpBlock": ("INVALID_ICMPTYPE", "nm-zones blocks ICMP types in the zone's file only"),
    "addIcmpBlockInversion": ("INVALID_ICMPTYPE", "nm-zones has no ICMP block inversion"),
    "enableLockdown": ("INVALID_COMMAND", "nm-zones has no lockdown: polkit decides"),
}
UNSUPPORTED_SIGNATURES = {
    "addRichRule": "ssi",
    "addProtocol": "ssi",
    "addSourcePort": "sssi",
    "addIcmpBlock": "ssi",
    "addIcmpBlockInversion": "s",
    "enableLockdown": "",
}




class RuntimeZones:
    """The runtime zone methods of one service (doors/service.py's ZoneService)."""

    def __init__(self, service):
        self.service = service

    def methods(self) -> dict:
        """Entries for the main object's method table (same shape as service._methods)."""
        s, configure = self, ACTION_CONFIGURE
        table = {
            (MAIN_INTERFACE, "authorizeAll"): ("", "", configure, s.authorize_all),
            (MAIN_INTERFACE, "listServices"): ("", "as", None, s.list_services),
            (MAIN_INTERFACE, "runtimeToPermanent"): ("", "", configure, s.runtime_to_permanent),
            (MAIN_INTERFACE, "completeReload"): ("", "", configure, s.complete_reload),
            (ZONE_INTERFACE, "getZoneSettings2"): ("s", "a{sv}", None, s.get_zone_settings2),
            (ZONE_INTERFACE, "getServices"): ("s", "as", None, s.get_services),
            (ZONE_INTERFACE, "getPorts"): ("s", "aas", None, s.get_ports),
            (ZONE_INTERFACE, "queryService"): ("ss", "b", None, s.query_service),
            (ZONE_INTERFACE, "queryPort"): ("sss", "b", None, s.query_port),
            (ZONE_INTERFACE, "addService"): ("ssi", "s", configure, s.add_service),
            (ZONE_INTERFACE, "removeService"): ("ss", "s", configure, s.remove_service),
            (ZONE_INTERFACE, "addPort"): ("sssi", "s", configure, s.add_port),
            (ZONE_INTERFACE, "removePort"): ("sss", "s", configure, s.remove_port),
            (ZONE_INTERFACE, "queryMasquerade"): ("s", "b", None, s.query_masquerade),
            (ZONE_INTERFACE, "addMasquerade"): ("si", "s", configure, s.add_masquerade),
            (ZONE_INTERFACE, "removeMasquerade"): ("s", "s", configure, s.remove_masquerade),
            (ZONE_INTERFACE, "getForwardPorts"): ("s", "aas", None, s.get_forward_ports),
            (ZONE_INTERFACE, "queryForwardPort"): ("sssss", "b", None, s.query_forward_port),
            (ZONE_INTERFACE, "addForwardPort"): ("sssssi", "s", configure, s.add_forward_port),
            (ZONE_INTERFACE, "removeForwardPort"): ("sssss", "s", configure, s.remove_forward_port),
        }
        for name, (code, why) in UNSUPPORTED.items():
            interface = MAIN_INTERFACE if name == "enableLockdown" else ZONE_INTERFACE
            table[(interface, name)] = (
                UNSUPPORTED_SIGNATURES[name],
                "s" if interface == ZONE_INTERFACE else "",
                configure,
                _refusal(code, why),
            )
        return table

    # -- reads ------------------------------------------------------------------------------

    async def _loaded(self):
        return await asyncio.to_thread(load, self.service.paths)

    def _zone_name(self, zone: str) -> str:
        """firewalld's check_zone: "" is the default zone; an unknown one INVALID_ZONE."""
        engine = self.service.engine()
        name = zone or engine.compiled.default_zone
        if name not in engine.known_zones():
            raise FirewallError("INVALID_ZONE", name)
        return name

    async def _zone(self, zone: str):
        name = self._zone_name(zone)
        found = (await self._loaded()).config.zones.get(name)
        if found is None:
            raise FirewallError(
                "INVALID_ZONE", f"{name}: the zone cannot be loaded (see: nm-zones check)"
            )
        return found

    def _runtime(self, zone: str) -> list[str]:
        """What runtime allowances open for the whole of `zone` now (ports and services)."""
        state = self.service.engine().state_dir.load()
        return [a[2] for a in state.allowances if a[0] == "" and a[1] == zone and not expired(a)]

    def _removed(self, zone: str) -> set[str]:
        """What was removed at runtime from the zone's file (ruleset/runtime_features.py)."""
        return {removed(w) for w in self._runtime(zone)} - {""}

    async def _services(self, zone: str) -> list[str]:
        found = await self._zone(zone)
        runtime = self._runtime(found.name)
        filed = [s for s in found.services if s not in self._removed(found.name)]
        extra = [w for w in runtime if "/" not in w and not is_feature(w)]
        return list(dict.fromkeys([*filed, *extra]))

    async def _ports(self, zone: str) -> list[str]:
        found = await self._zone(zone)
        filed = [str(p) for p in found.ports if str(p) not in self._removed(found.name)]
        extra = [w for w in self._runtime(found.name) if "/" in w and not is_feature(w)]
        return list(dict.fromkeys([*filed, *extra]))

    async def authorize_all(self) -> tuple:
        """firewall-cmd asks once before a change: polkit has already said yes here."""
        return ()

    async def list_services(self) -> tuple:
        return (sorted((await self._loaded()).config.services),)

    async def get_zone_settings2(self, zone: str) -> tuple:
        """The zone's settings with its runtime additions and the interfaces bound to it."""
        found = await self._zone(zone)
        (interfaces,) = await self.service.get_interfaces(found.name)
        settings = settings_dict(found, interfaces)
        settings["services"] = ("as", await self._services(found.name))
        ports = [tuple(p.split("/")) for p in await self._ports(found.name)]
        settings["ports"] = ("a(ss)", ports)
        settings["masquerade"] = ("b", await self._masquerade(found))
        settings["forward_ports"] = ("a(ssss)", await self._forwards(found, settings))
        (sources,) = await Sources(self.service).get_sources(found.name)
        if sources:
            settings["sources"] = ("as", sources)
        return (settings,)

    async def get_services(self, zone: str) -> tuple:
        return (await self._services(zone),)

    async def get_ports(self, zone: str) -> tuple:
        return ([p.split("/") for p in await self._ports(zone)],)

    async def query_service(self, zone: str, service: str) -> tuple:
        return (service in await self._services(zone),)

    async def query_port(self, zone: str, port: str, protocol: str) -> tuple:
        return (port_text(port, protocol) in await self._ports(zone),)

    async def _masquerade(self, found) -> bool:
        filed = found.masquerade and MASQUERADE not in self._removed(found.name)
        return filed or MASQUERADE in self._runtime(found.name)

    async def _forwards(self, found, settings: dict) -> list[tuple[str, ...]]:
        """The zone file's forward ports (as its settings give them) but those removed at
        runtime, then the runtime's."""
        runtime = self._runtime(found.name)
        added = [forward_fields(w) for w in runtime if w.startswith(FORWARD_PREFIX)]
        gone = [
            forward_fields(w) for w in self._removed(found.name) if w.startswith(FORWARD_PREFIX)
        ]
        filed = [tuple(f) for f in settings["forward_ports"][1] if tuple(f) not in gone]
        return list(dict.fromkeys([*filed, *added]))

    async def query_masquerade(self, zone: str) -> tuple:
        return (await self._masquerade(await self._zone(zone)),)

    async def get_forward_ports(self, zone: str) -> tuple:
        (settings,) = await self.get_zone_settings2(zone)
        return ([list(f) for f in settings["forward_ports"][1]],)

    async def query_forward_port(self, zone, port, protocol, to_port, to_addr) -> tuple:
        (forwards,) = await self.get_forward_ports(zone)
        return ([port, protocol, to_port, to_addr] in forwards,)

    # -- changes ----------------------------------------------------------------------------

    async def add_service(self, zone: str, service: str, timeout: int) -> tuple:
        name = self._zone_name(zone)
        if service not in (await self._loaded()).config.services:
            raise FirewallError("INVALID_SERVICE", service)
        if service in await self._services(name):
            raise FirewallError("ALREADY_ENABLED", f"'{service}' already in '{name}'")
        await self._grant(name, service, timeout)
        await self.service.emit(ZONE_INTERFACE, "ServiceAdded", "ssi", (name, service, timeout))
        return (name,)

    async def remove_service(self, zone: str, service: str) -> tuple:
        name = self._zone_name(zone)
        if service not in await self._services(name):
            raise FirewallError("NOT_ENABLED", f"'{service}' not in '{name}'")
        await self._take(name, service)
        await self.service.emit(ZONE_INTERFACE, "ServiceRemoved", "ss", (name, service))
        return (name,)

    async def add_port(self, zone: str, port: str, protocol: str, timeout: int) -> tuple:
        name = self._zone_name(zone)
        what = check_port(port, protocol)
        if what in await self._ports(name):
            raise FirewallError("ALREADY_ENABLED", f"'{port}:{protocol}' already in '{name}'")
        await self._grant(name, what, timeout)
        body = (name, port, protocol, timeout)
        await self.service.emit(ZONE_INTERFACE, "PortAdded", "sssi", body)
        return (name,)

    async def remove_port(self, zone: str, port: str, protocol: str) -> tuple:
        name = self._zone_name(zone)
        what = check_port(port, protocol)
        if what not in await self._ports(name):
            raise FirewallError("NOT_ENABLED", f"'{port}:{protocol}' not in '{name}'")
        await self._take(name, what)
        await self.service.emit(ZONE_INTERFACE, "PortRemoved", "sss", (name, port, protocol))
        return (name,)

    async def _grant(self, zone: str, what: str, timeout: int) -> None:
        """Add `what` at runtime: a removal of it ends (without a timeout: with one, the
        removal holds again when the timeout runs out, as in firewalld), else an allowance."""
        if not timeout and without(what) in self._runtime(zone):
            await self._allow(zone, without(what), 0, grant=False)
        else:
            await self._allow(zone, what, timeout, grant=True)

    async def _take(self, zone: str, what: str) -> None:
        """Remove `what` (known to be in the zone now) at runtime: an allowance of it ends;
        what the zone's file lists is removed until reload (a `without:` allowance)."""
        if what in self._runtime(zone):
            await self._allow(zone, what, 0, grant=False)
        if await self._still_in(zone, what):
            await self._allow(zone, without(what), 0, grant=True)

    async def _still_in(self, zone: str, what: str) -> bool:
        found = await self._zone(zone)
        if what == MASQUERADE:
            return await self._masquerade(found)
        if what.startswith(FORWARD_PREFIX):
            (forwards,) = await self.get_forward_ports(zone)
            return list(forward_fields(what)) in forwards
        return what in (await self._ports(zone) if "/" in what else await self._services(zone))

    async def _allow(self, zone: str, what: str, timeout: int, grant: bool) -> None:
        """`nm-zones allow|revoke WHAT --zone ZONE [--for TIMEOUTs]` under the state lock."""
        if timeout < 0:
            raise FirewallError("INVALID_VALUE", f"timeout '{timeout}' is not positive number")
        loaded = await self._loaded()
        args = SimpleNamespace(
            command="allow" if grant else "revoke",
            zone=zone,
            interface="",
            duration=f"{timeout}s" if timeout else "",
            permanent=False,
        )
        engine = self.service.engine()
        request = allow.Request(args, what, loaded)
        # allow's lines go with the engine's changes: the service logs them
        await self.service.in_worker(engine, lambda state: allow.run(engine, request, state))

    async def add_masquerade(self, zone: str, timeout: int) -> tuple:
        found = await self._zone(zone)
        if await self._masquerade(found):
            raise FirewallError("ALREADY_ENABLED", f"masquerade already enabled in '{found.name}'")
        await self._grant(found.name, MASQUERADE, timeout)
        await self.service.emit(ZONE_INTERFACE, "MasqueradeAdded", "si", (found.name, timeout))
        return (found.name,)

    async def remove_masquerade(self, zone: str) -> tuple:
        found = await self._zone(zone)
        if not await self._masquerade(found):
            raise FirewallError("NOT_ENABLED", f"masquerade not enabled in '{found.name}'")
        await self._take(found.name, MASQUERADE)
        await self.service.emit(ZONE_INTERFACE, "MasqueradeRemoved", "s", (found.name,))
        return (found.name,)

    async def add_forward_port(self, zone, port, protocol, to_port, to_addr, timeout) -> tuple:
        name = self._zone_name(zone)
        what = self._check_forward(port, protocol, to_port, to_addr)
        if (await self.query_forward_port(name, port, protocol, to_port, to_addr))[0]:
            text = f"'{port}:{protocol}:{to_port}:{to_addr}' already in '{name}'"
            raise FirewallError("ALREADY_ENABLED", text)
        await self._grant(name, what, timeout)
        body = (name, port, protocol, to_port, to_addr, timeout)
        await self.service.emit(ZONE_INTERFACE, "ForwardPortAdded", "sssssi", body)
        return (name,)

    async def remove_forward_port(self, zone, port, protocol, to_port, to_addr) -> tuple:
        name = self._zone_name(zone)
        what = forward_what(port, protocol, to_port, to_addr)
        text = f"'{port}:{protocol}:{to_port}:{to_addr}'"
        if not (await self.query_forward_port(name, port, protocol, to_port, to_addr))[0]:
            raise FirewallError("NOT_ENABLED", f"{text} not in '{name}'")
        await self._take(name, what)
        body = (name, port, protocol, to_port, to_addr)
        await self.service.emit(ZONE_INTERFACE, "ForwardPortRemoved", "sssss", body)
        return (name,)

    @classmethod
    def _check_forward(cls, port: str, protocol: str, to_port: str, to_addr: str) -> str:
        """firewalld's checks of a forward port, then its allowance's name."""
        check_port(port, protocol)
        if not to_port and not to_addr:
            raise FirewallError("INVALID_FORWARD", "port or address needed")
        if to_port and not (to_port.isdigit() and 1 <= int(to_port) <= 65535):
            raise FirewallError("INVALID_PORT", to_port)
        if to_addr:
            try:
                ipaddress.ip_address(to_addr)
            except ValueError:
                raise FirewallError("INVALID_ADDR", to_addr) from None
        return forward_what(port, protocol, to_port, to_addr)

    async def complete_reload(self) -> tuple:
        """firewalld's reload with its modules unloaded: nm-zones has none to unload, so a
        reload from the files, read afresh."""
        await self.service.reload_dropping_runtime(fresh=True)
        return ()

    async def runtime_to_permanent(self) -> tuple:
        """Every zone-wide runtime port, service, masquerade and forward port without a
        timeout into its zone's file
        (the admin's zones.d, as `allow --permanent`); the zones callers set on interfaces
        over D-Bus become NetworkManager's (the profile's connection.zone, as `assign`),
        so both survive `reload`."""
        engine = self.service.engine()
        state = engine.state_dir.load()
        paths = self.service.paths
        for owner, zone, what, deadline, *_ in state.allowances:
            if owner != "" or deadline != 0:
                continue
            add, item = (False, removed(what)) if removed(what) else (True, what)
            if is_feature(item):
                await self._feature_to_permanent(zone, item, add)
                continue
            key = "ports" if "/" in item else "services"
            try:
                await asyncio.to_thread(edit_zone_file, paths, zone, key, item, add)
            except (UsageError, ConfigError, OSError) as error:
                text = str(error).replace("\n", "; ")
                raise FirewallError("RT_TO_PERM_FAILED", f"zone '{zone}': {text}") from None
        await self.service.make_bindings_permanent()
        return ()

    async def _feature_to_permanent(self, zone: str, what: str, add: bool) -> None:
        """A runtime masquerade or forward port into the zone's file, or out of it (the
        config object's writer: doors/firewalld_permanent.py); a file that says so already
        stays as it is."""
        items = PermanentItems(self.service.config_objects, zone)
        try:
            if what == MASQUERADE:
                await items.masquerade(add)
            else:
                await items.forward(add, *forward_fields(what))
        except FirewallError as error:
            if error.code not in ("ALREADY_ENABLED", "NOT_ENABLED"):
                raise


def _refusal(code: str, why: str):
    async def refuse(*_args) -> tuple:
        raise FirewallError(code, why)

    return refuse


PENDING_LIMIT = 256  # interfaces bound before they exist, at most


class PendingInterfaces:
    """Interfaces a caller bound before they exist (firewall-cmd and firewalld's own tests
    do this): the binding is kept here, answered by getZoneOfInterface and the lists, and
    applied when NetworkManager reports the device (DeviceAdded). Runtime only, as in
    firewalld: a reload or a restart of the service forgets them."""

    def __init__(self):
        self.zones: dict[str, str] = {}

    def add(self, zone: str, interface: str, adding: bool) -> None:
        old = self.zones.get(interface)
        if adding and old is not None:
            code = "ZONE_ALREADY_SET" if old == zone else "ZONE_CONFLICT"
            raise FirewallError(code, f"'{interface}' already bound to '{old}'")
        if old is None and len(self.zones) >= PENDING_LIMIT:
            raise FirewallError(
                "INVALID_INTERFACE",
                f"'{interface}' does not exist, and {PENDING_LIMIT} such bindings wait already",
            )
        self.zones[interface] = zone

    def remove(self, zone: str, interface: str) -> str:
        old = self.zones.get(interface)
        if old is None:
            raise FirewallError("UNKNOWN_INTERFACE", f"'{interface}' is not in any zone")
        if zone and zone != old:
            raise FirewallError(
                "ZONE_CONFLICT", f"remove_interface({zone}, {interface}): zoi='{old}'"
            )
        del self.zones[interface]
        return old

    def in_zone(self, zone: str) -> list[str]:
        return [name for name, bound in self.zones.items() if bound == zone]


def split_signature(signature: str) -> list[str]:
    """A D-Bus signature as its complete types: `sa{sv}as` -> [s, a{sv}, as]."""
    types, start, depth = [], 0, 0
    for index, char in enumerate(signature):
        if char in "({":
            depth += 1
        elif char in ")}":
            depth -= 1
        if depth == 0 and char != "a":
            types.append(signature[start : index + 1])
            start = index + 1
    return types


def method_xml(methods: dict, interface: str) -> str:
    """<method> elements of `interface` from a method table (for introspection)."""
    lines = []
    for (owner, member), (in_signature, out_signature, _, _) in sorted(methods.items()):
        if owner != interface:
            continue
        args = "".join(f'<arg type="{t}" direction="in"/>' for t in split_signature(in_signature))
        args += "".join(
            f'<arg type="{t}" direction="out"/>' for t in split_signature(out_signature)
        )
        lines.append(f'    <method name="{member}">{args}</method>\n')
    return "".join(lines)
