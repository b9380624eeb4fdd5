"""firewalld's source methods on org.fedoraproject.FirewallD1.zone: zones bound by source
address at runtime (podman asks `getZoneOfSource` and binds its subnets to `trusted`;
`firewall-cmd --add-source` and friends).

Semantics as firewalld 1.3 has them (core/fw_zone.py): an empty zone means the default
zone; a source is in one zone at most (ZONE_ALREADY_SET, ZONE_CONFLICT); removing one that is
in no zone is UNKNOWN_SOURCE; what is not an address or network is INVALID_ADDR (MAC
addresses and ipsets, which firewalld also takes, are refused as such). A source is found by
what it means (`10.0.0.5` and `10.0.0.5/32` are the same), and kept as the caller gave it.

The bindings live in the state (State.sources, on top of the zone files' `sources`) and are
committed with the catch-all (ruleset/sources.py); a reload forgets them, as firewalld
forgets its runtime.
"""

from __future__ import annotations

from ..addresses import canonical_source
from .busapi import ACTION_CONFIGURE, ZONE_INTERFACE, FirewallError

INTROSPECTION = "".join(
    f'    <method name="{name}">{"".join(args)}</method>\n'
    for name, args in (
        ("addSource", ('<arg name="zone" type="s" direction="in"/>',
                       '<arg name="source" type="s" direction="in"/>',
                       '<arg type="s" direction="out"/>')),
        ("changeZoneOfSource", ('<arg name="zone" type="s" direction="in"/>',
                                '<arg name="source" type="s" direction="in"/>',
                                '<arg type="s" direction="out"/>')),
        ("removeSource", ('<arg name="zone" type="s" direction="in"/>',
                          '<arg name="source" type="s" direction="in"/>',
                          '<arg type="s" direction="out"/>')),
        ("querySource", ('<arg name="zone" type="s" direction="in"/>',
                         '<arg name="source" type="s" direction="in"/>',
                         '<arg type="b" direction="out"/>')),
        ("getSources", ('<arg name="zone" type="s" direction="in"/>',
                        '<arg type="as" direction="out"/>')),
        ("getZoneOfSource", ('<arg name="source" type="s" direction="in"/>',
                             '<arg type="s" direction="out"/>')),
    )
) + "".join(
    f'    <signal name="{name}"><arg name="zone" type="s"/><arg name="source" type="s"/>'
    "</signal>\n"
    for name in ("SourceAdded", "ZoneOfSourceChanged", "SourceRemoved")
)  # fmt: skip


def methods(service) -> dict:
    """The method table entries (see service._methods) for `service`."""
    sources = Sources(service)
    return {
        (ZONE_INTERFACE, "addSource"): ("ss", "s", ACTION_CONFIGURE, sources.add),
        (ZONE_INTERFACE, "changeZoneOfSource"): ("ss", "s", ACTION_CONFIGURE, sources.change),
        (ZONE_INTERFACE, "removeSource"): ("ss", "s", ACTION_CONFIGURE, sources.remove),
        (ZONE_INTERFACE, "querySource"): ("ss", "b", None, sources.query),
        (ZONE_INTERFACE, "getSources"): ("s", "as", None, sources.get_sources),
        (ZONE_INTERFACE, "getZoneOfSource"): ("s", "s", None, sources.zone_of),
    }


def _canonical(source: str) -> str:
    try:
        return canonical_source(source)
    except ValueError:
        raise FirewallError("INVALID_ADDR", source) from None


def find(bindings: dict[str, str], source: str) -> tuple[str, str] | None:
    """(the source as bound, its zone) for what `source` means; None when in no zone."""
    wanted = canonical_source(source)
    for given, zone in sorted(bindings.items()):
        if canonical_source(given) == wanted:
            return given, zone
    return None


class Sources:
    """The handlers; changes go through the service's lock and the engine."""

    def __init__(self, service):
        self.service = service

    def _zone(self, engine, zone: str) -> str:
        """firewalld's check_zone: "" is the default zone; an unknown zone INVALID_ZONE."""
        if not zone:
            return engine.compiled.default_zone
        if zone not in engine.known_zones():
            raise FirewallError("INVALID_ZONE", zone)
        return zone

    def _bindings(self, engine, state=None) -> dict[str, str]:
        state = state or engine.state_dir.load()
        return engine.compiled.source_bindings(state.sources)

    async def zone_of(self, source: str) -> tuple:
        try:
            found = find(self._bindings(self.service.engine()), source)
        except ValueError:  # firewalld: no zone holds what is not a source
            found = None
        return (found[1] if found else "",)

    async def query(self, zone: str, source: str) -> tuple:
        engine = self.service.engine()
        zone = self._zone(engine, zone)
        _canonical(source)
        found = find(self._bindings(engine), source)
        return (bool(found) and found[1] == zone,)

    async def get_sources(self, zone: str) -> tuple:
        engine = self.service.engine()
        zone = self._zone(engine, zone)
        return (sorted(s for s, z in self._bindings(engine).items() if z == zone),)

    async def add(self, zone: str, source: str) -> tuple:
        return await self._change(zone, source, "SourceAdded", adding=True)

    async def change(self, zone: str, source: str) -> tuple:
        return await self._change(zone, source, "ZoneOfSourceChanged", adding=False)

    async def _change(self, zone: str, source: str, signal: str, adding: bool) -> tuple:
        engine = self.service.engine()
        zone = self._zone(engine, zone)
        _canonical(source)
        if self.service.paths.disabled:
            return (zone,)

        def work(state) -> bool:
            files = engine.compiled.source_bindings()
            found = find(self._bindings(engine, state), source)
            if found and found[1] == zone:
                if adding:
                    raise FirewallError("ZONE_ALREADY_SET", f"'{source}' already bound to '{zone}'")
                return False
            if found and adding:
                raise FirewallError("ZONE_CONFLICT", f"'{source}' already bound to a zone")
            runtime = dict(state.sources)
            if found:
                _unbind(runtime, files, found[0])
            runtime[source] = zone
            engine.set_sources(state, runtime)
            return True

        if await self.service.in_worker(engine, work):
            await self.service.emit(ZONE_INTERFACE, signal, "ss", (zone, source))
        return (zone,)

    async def remove(self, zone: str, source: str) -> tuple:
        engine = self.service.engine()
        _canonical(source)

        def work(state) -> str:
            files = engine.compiled.source_bindings()
            found = find(self._bindings(engine, state), source)
            if found is None:
                raise FirewallError("UNKNOWN_SOURCE", f"'{source}' is not in any zone")
            wanted = self._zone(engine, zone) if zone else found[1]
            if wanted != found[1]:
                raise FirewallError(
                    "ZONE_CONFLICT", f"remove_source({zone}, {source}): zos='{found[1]}'"
                )
            runtime = dict(state.sources)
            _unbind(runtime, files, found[0])
            engine.set_sources(state, runtime)
            return found[1]

        removed = await self.service.in_worker(engine, work)
        await self.service.emit(ZONE_INTERFACE, "SourceRemoved", "ss", (removed, source))
        return (removed,)


def add_active(active: dict, bindings: dict[str, str]) -> None:
    """getActiveZones' `sources` key: a zone with a source bound is active (firewalld
    lists only the keys that hold something)."""
    for source, zone in sorted(bindings.items()):
        active.setdefault(zone, {}).setdefault("sources", []).append(source)


def _unbind(runtime: dict[str, str], files: dict[str, str], given: str) -> None:
    """Forget a runtime binding; a zone file's is masked ("") until the next reload."""
    runtime.pop(given, None)
    if given in files:
        runtime[given] = ""
