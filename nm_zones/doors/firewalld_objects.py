"""The service's objects other than /org/fedoraproject/FirewallD1: firewalld's config object
and its zone objects (firewalld_config.py has the settings mapping), with the same method
table shape as the main object's: (interface, member) -> (input signatures separated by `|`,
output signature, polkit action or None, handler).
"""

from __future__ import annotations

import asyncio
import functools

from ..config.load import load
from .busapi import ACTION_CONFIGURE, FirewallError, child_introspection
from .firewalld_config import (
    CONFIG_INTERFACE,
    CONFIG_PATH,
    CONFIG_ZONE_INTERFACE,
    SETTINGS_SIGNATURE,
    ObjectNumbers,
    from_dict,
    from_tuple,
    introspection,
    settings_dict,
    settings_tuple,
    write_zone,
    zone_document,
    zone_text,
)
from .firewalld_permanent import item_methods


class ConfigObjects:
    """/org/fedoraproject/FirewallD1/config and /config/zone/N for one service."""

    def __init__(self, service, log):
        self.service, self.log = service, log
        self.numbers = ObjectNumbers()

    def methods(self, path: str) -> dict | None:
        """The method table of the object at `path`; None when there is no such object."""
        if path == CONFIG_PATH:
            return {
                (CONFIG_INTERFACE, "getZoneNames"): ("", "as", None, self.get_zone_names),
                (CONFIG_INTERFACE, "listZones"): ("", "ao", None, self.list_zones),
                (CONFIG_INTERFACE, "getZoneByName"): ("s", "o", None, self.get_zone_by_name),
                (CONFIG_INTERFACE, "addZone"): (
                    f"s{SETTINGS_SIGNATURE}|sav",  # Docker sends the fields as variants
                    "o",
                    ACTION_CONFIGURE,
                    self.add_zone,
                ),
                (CONFIG_INTERFACE, "addZone2"): ("sa{sv}", "o", ACTION_CONFIGURE, self.add_zone2),
                (CONFIG_INTERFACE, "getServiceNames"): ("", "as", None, self.get_service_names),
                (CONFIG_INTERFACE, "listServices"): ("", "ao", None, self.list_services),
            }
        found = self.numbers.name(path)
        if found is None or found[0] != "zone":
            return None
        name = found[1]
        bound = functools.partial
        return item_methods(self, name) | {
            (CONFIG_ZONE_INTERFACE, "getSettings"): (
                "",
                SETTINGS_SIGNATURE,
                None,
                bound(self.get_settings, name),
            ),
            (CONFIG_ZONE_INTERFACE, "getSettings2"): (
                "",
                "a{sv}",
                None,
                bound(self.get_settings2, name),
            ),
            (CONFIG_ZONE_INTERFACE, "getShort"): ("", "s", None, bound(self.get_short, name)),
            (CONFIG_ZONE_INTERFACE, "getDescription"): (
                "",
                "s",
                None,
                bound(self.get_description, name),
            ),
            (CONFIG_ZONE_INTERFACE, "getTarget"): ("", "s", None, bound(self.get_target, name)),
            (CONFIG_ZONE_INTERFACE, "update"): (
                f"{SETTINGS_SIGNATURE}|av",
                "",
                ACTION_CONFIGURE,
                bound(self.update, name),
            ),
            (CONFIG_ZONE_INTERFACE, "update2"): (
                "a{sv}",
                "",
                ACTION_CONFIGURE,
                bound(self.update2, name),
            ),
        }

    def introspect(self, path: str) -> str | None:
        if path == CONFIG_PATH:
            return introspection(path, False, ["zone"])
        if path == f"{CONFIG_PATH}/zone":
            return child_introspection([p.rsplit("/", 1)[1] for p in self._zone_paths()])
        if self.methods(path) is not None:
            return introspection(path, True, [])
        return None

    # -- reads ------------------------------------------------------------------------------

    def _known(self) -> list[str]:
        return sorted(self.service.engine().known_zones())

    def _zone_paths(self) -> list[str]:
        return [self.numbers.path("zone", name) for name in self._known()]

    async def get_zone_names(self) -> tuple:
        return (self._known(),)

    async def list_zones(self) -> tuple:
        return (self._zone_paths(),)

    async def get_zone_by_name(self, name: str) -> tuple:
        if name not in self._known():
            raise FirewallError("INVALID_ZONE", name)
        return (self.numbers.path("zone", name),)

    async def get_service_names(self) -> tuple:
        return (sorted((await self._loaded()).config.services),)

    async def list_services(self) -> tuple:
        names = sorted((await self._loaded()).config.services)
        return ([self.numbers.path("service", name) for name in names],)

    async def _loaded(self):
        return await asyncio.to_thread(load, self.service.paths)

    async def _zone(self, name: str):
        zone = (await self._loaded()).config.zones.get(name)
        if zone is None:
            raise FirewallError(
                "INVALID_ZONE", f"{name}: the zone cannot be loaded (see: nm-zones check)"
            )
        return zone

    async def get_settings(self, name: str) -> tuple:
        # a config zone lists its permanent interfaces: nm-zones keeps none in zone files
        return (settings_tuple(await self._zone(name), []),)

    async def get_settings2(self, name: str) -> tuple:
        return (settings_dict(await self._zone(name), []),)

    async def get_short(self, name: str) -> tuple:
        return (name,)

    async def get_description(self, name: str) -> tuple:
        return ((await self._zone(name)).description,)

    async def get_target(self, name: str) -> tuple:
        return (settings_tuple(await self._zone(name), [])[4],)

    # -- changes ----------------------------------------------------------------------------

    async def add_zone(self, name: str, settings) -> tuple:
        return await self._write(name, from_tuple(settings), adding=True)

    async def add_zone2(self, name: str, settings: dict) -> tuple:
        return await self._write(name, from_dict(settings), adding=True)

    async def update(self, name: str, settings) -> tuple:
        await self._write(name, from_tuple(settings), adding=False)
        return ()

    async def update2(self, name: str, settings: dict) -> tuple:
        await self._write(name, from_dict(settings), adding=False)
        return ()

    async def _write(self, name: str, values: dict, adding: bool) -> tuple:
        """The zone file written as nm-zones' loader accepts it; like firewalld, a new or
        updated zone reaches the kernel with the next reload."""
        if adding and name in self._known():
            raise FirewallError("NAME_CONFLICT", f"new_zone(): '{name}'")
        document = zone_document(values)
        loaded = await self._loaded()
        text = zone_text(name, document)
        try:
            written = await asyncio.to_thread(
                write_zone, self.service.paths, name, text, loaded.config.services, not adding
            )
        except OSError as error:
            raise FirewallError("COMMAND_FAILED", f"{name}: {error}") from None
        self.log(f"zone {name} {'added' if adding else 'updated'}: {written}")
        path = self.numbers.path("zone", name)
        if adding:
            await self.service.emit(CONFIG_INTERFACE, "ZoneAdded", "s", (name,), path=CONFIG_PATH)
            return (path,)
        await self.service.emit(CONFIG_ZONE_INTERFACE, "Updated", "s", (name,), path=path)
        return ()
