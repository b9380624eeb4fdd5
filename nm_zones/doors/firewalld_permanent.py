"""The item methods of firewalld's config zone objects, which firewall-cmd's `--permanent`
calls (`--permanent --add-port` is config.zone.addPort): one zone file edited, errors with
firewalld's codes and wording (ALREADY_ENABLED and NOT_ENABLED become warnings in the
client). Like firewalld's, a permanent change reaches the kernel with the next reload.

Ports and services are one item added to or cut from the admin's zone file, comments kept
(config/zonefile.py, as `nm-zones allow --permanent`); masquerade and forward ports go
through the zone's whole settings (firewalld_objects.py's update).
"""

from __future__ import annotations

import asyncio
import functools

from ..config.zonefile import edit_zone_file
from ..errors import ConfigError, UsageError
from .busapi import ACTION_CONFIGURE, FirewallError
from .firewalld_config import CONFIG_ZONE_INTERFACE, settings_values
from .firewalld_ports import check_port


def item_methods(objects, name: str) -> dict:
    """Entries for the method table of config zone `name` (objects: ConfigObjects)."""
    items = PermanentItems(objects, name)
    configure = ACTION_CONFIGURE
    table = {
        "getServices": ("", "as", None, items.get_services),
        "queryService": ("s", "b", None, items.query_service),
        "addService": ("s", "", configure, functools.partial(items.edit, "services", True)),
        "removeService": ("s", "", configure, functools.partial(items.edit, "services", False)),
        "getPorts": ("", "a(ss)", None, items.get_ports),
        "queryPort": ("ss", "b", None, items.query_port),
        "addPort": ("ss", "", configure, functools.partial(items.edit_port, True)),
        "removePort": ("ss", "", configure, functools.partial(items.edit_port, False)),
        "getMasquerade": ("", "b", None, items.query_masquerade),
        "queryMasquerade": ("", "b", None, items.query_masquerade),
        "addMasquerade": ("", "", configure, functools.partial(items.masquerade, True)),
        "removeMasquerade": ("", "", configure, functools.partial(items.masquerade, False)),
        "getForwardPorts": ("", "a(ssss)", None, items.get_forward_ports),
        "queryForwardPort": ("ssss", "b", None, items.query_forward_port),
        "addForwardPort": ("ssss", "", configure, functools.partial(items.forward, True)),
        "removeForwardPort": ("ssss", "", configure, functools.partial(items.forward, False)),
    }
    return {(CONFIG_ZONE_INTERFACE, member): entry for member, entry in table.items()}


class PermanentItems:
    def __init__(self, objects, name: str):
        self.objects, self.name = objects, name

    async def _values(self) -> dict:
        return settings_values(await self.objects._zone(self.name), [])

    async def get_services(self) -> tuple:
        return ((await self._values())["services"],)

    async def query_service(self, service: str) -> tuple:
        return (service in (await self._values())["services"],)

    async def get_ports(self) -> tuple:
        return ((await self._values())["ports"],)

    async def query_port(self, port: str, protocol: str) -> tuple:
        return ((port, protocol) in (await self._values())["ports"],)

    async def query_masquerade(self) -> tuple:
        return ((await self._values())["masquerade"],)

    async def get_forward_ports(self) -> tuple:
        return ((await self._values())["forward_ports"],)

    async def query_forward_port(self, *forward: str) -> tuple:
        return (tuple(forward) in (await self._values())["forward_ports"],)

    async def edit_port(self, add: bool, port: str, protocol: str) -> tuple:
        what = check_port(port, protocol)
        return await self.edit("ports", add, what, f"{port}:{protocol}")

    async def edit(self, key: str, add: bool, item: str, shown: str = "") -> tuple:
        """One item into or out of list `key` of the zone's file (its comments kept)."""
        service = self.objects.service
        if key == "services" and item not in (await self.objects._loaded()).config.services:
            raise FirewallError("INVALID_SERVICE", item)
        try:
            path = await asyncio.to_thread(edit_zone_file, service.paths, self.name, key, item, add)
        except (UsageError, ConfigError) as error:
            raise FirewallError("INVALID_ZONE", str(error).replace("\n", "; ")) from None
        except OSError as error:
            raise FirewallError("COMMAND_FAILED", f"{self.name}: {error}") from None
        if path is None:
            raise FirewallError("ALREADY_ENABLED" if add else "NOT_ENABLED", shown or item)
        self.objects.log(f"zone {self.name}: {item} {'added' if add else 'removed'} ({path})")
        return ()

    async def masquerade(self, on: bool) -> tuple:
        values = await self._values()
        if values["masquerade"] == on:
            raise FirewallError("ALREADY_ENABLED" if on else "NOT_ENABLED", "masquerade")
        values["masquerade"] = on
        await self.objects._write(self.name, values, adding=False)
        return ()

    async def forward(self, add: bool, *forward: str) -> tuple:
        values = await self._values()
        present = tuple(forward) in values["forward_ports"]
        if present == add:
            raise FirewallError("ALREADY_ENABLED" if add else "NOT_ENABLED", ":".join(forward))
        kept = [f for f in values["forward_ports"] if f != tuple(forward)]
        values["forward_ports"] = [*kept, tuple(forward)] if add else kept
        await self.objects._write(self.name, values, adding=False)
        return ()
