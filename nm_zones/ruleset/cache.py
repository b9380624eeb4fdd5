"""The compiled configuration: everything an event needs, as plain values, cached.

An event has tens of milliseconds. Reading the YAML, building the model's dataclasses and
compiling cost more than that, so the validated config is reduced once to plain values and
kept in the state directory (marshal): the connections map, the settings (nm-zones.yaml), and
for every zone its plan (plan.ZonePlan: its rules as specs, with the chain kinds where an
interface's chain names go). The file is rebuilt whenever any config file or folder changes identity
(paths.config_fingerprint), and read only when this user wrote it and nobody else can change
it (files.read_trusted).

A zone whose file cannot be loaded is compiled here from its stand-in (the shipped
definition, else `block`); the reason travels with it, so the engine can keep an interface's
working rules instead (see engine/binding.py).
"""

from __future__ import annotations

import marshal
import os

from ..files import read_trusted
from ..paths import Paths, code_identity, config_fingerprint
from .layout import CHAIN_KINDS
from .plan import NO_TABLE, TARGET, KernelPlan, ZonePlan, for_interface, template

CACHE_FILE = "compiled"
# 2: forwarding names families; 3: and the settings; 4: services' rules; 5: user-profile-zones;
# 6: the zone files' sources; 7: plan.py's names (chains_by_table)
CACHE_VERSION = 7
STAND_IN = "nmz-stand-in"  # the interface a zone is compiled for once, to make its template
FALLBACK_ZONE = "block"


class CompiledConfig:
    """The connections map and every zone, as the engine uses them."""

    def __init__(self, data: dict):
        self.key = data["key"]
        self.default_zone: str = data["default_zone"]
        self.wired_zone: str = data["wired_zone"]
        self.wireless_zone: str = data["wireless_zone"]
        self.connections: dict[str, str] = data["connections"]
        self.exempt_interfaces: tuple[str, ...] = data["exempt_interfaces"]
        self.map_broken: str = data["map_broken"]
        self.problems: tuple[str, ...] = data["problems"]
        self.zones = {name: ZonePlan(zone) for name, zone in data["zones"].items()}
        # zone, digest, degraded, chains_by_table (plan.ChainsByTable), sources; or error
        self.catchall: dict = data["catchall"]
        self.settings: dict = data["settings"]  # nm-zones.yaml by its keys (model.Settings)
        # service -> family -> its input rules' specs, for runtime allowances (allowances.py)
        self.services: dict[str, dict[str, tuple]] = data["services"]

    def zone_for(self, key: str) -> str | None:
        """The zone the map gives a connection UUID or name."""
        return self.connections.get(key)

    def known_zones(self) -> set[str]:
        """Zones that exist, loadable or not (a broken zone still exists: it is not renamed)."""
        return set(self.zones)

    def zone(self, name: str) -> ZonePlan | None:
        return self.zones.get(name)

    def source_bindings(self, runtime: dict[str, str] | None = None) -> dict[str, str]:
        """source -> zone: the zone files' with the runtime's (State.sources) on top."""
        from .sources import merged

        return merged(self.catchall.get("sources", {}), runtime)

    def catchall_digest(self, runtime: dict[str, str] | None = None) -> str:
        """The catch-all's fingerprint, its sources' bindings and their zones' rules
        included: a changed source or source zone means a new commit."""
        bindings = self.source_bindings(runtime)
        if not bindings:
            return self.catchall["digest"]
        from ..digest import fingerprint
        from .sources import by_address

        addresses = sorted(by_address(bindings).items())
        zones = sorted({zone for _, zone in addresses})
        used = [(z, (self.zones.get(z) or self.zones[FALLBACK_ZONE]).digest) for z in zones]
        return fingerprint(f"{self.catchall['digest']}\n{addresses}\n{used}")

    def catchall_plan(self, runtime: dict[str, str] | None = None) -> KernelPlan:
        from .sources import with_sources

        bindings = self.source_bindings(runtime)
        catchall = self.catchall["chains_by_table"]
        return KernelPlan(None, with_sources(catchall, bindings, self._zone_chains))

    def _zone_chains(self, zone: str, family: str) -> dict[str, tuple]:
        """A zone's input and forward rules for its sources (a zone gone since a source
        was bound to it: block's, as for an interface)."""
        from .sources import LABEL

        plan = self.zones.get(zone) or self.zones[FALLBACK_ZONE]
        chains = plan.chains_by_table.get((family, "filter"), NO_TABLE)[0]
        return {  # without the interface's flow mark rule (ruleset/build.py _mark)
            kind: tuple(
                for_interface(spec, plan.name, LABEL)
                for spec in specs
                if spec[TARGET] != "CONNMARK"
            )
            for kind, specs in chains
            if kind in ("in", "fwd")
        }

    def specs(self) -> set[tuple[str, tuple]]:
        """(family, spec) of every rule of every zone and the catch-all (a LOG or NFLOG rule as its
        template has it: instantiated, it names its interface)."""
        found = set()
        for zone in self.zones.values():
            for (family, _), (chains, _) in zone.chains_by_table.items():
                found |= {(family, spec) for _, specs in chains for spec in specs}
        for (family, _), (chains, _) in self.catchall.get("chains_by_table", {}).items():
            found |= {(family, spec) for _, specs in chains for spec in specs}
        return found


# The modules whose code decides what is compiled: a changed nm-zones rebuilds the cache.
COMPILER_MODULES = (
    "config/load.py",
    "config/model.py",
    "ruleset/build.py",
    "ruleset/cache.py",
    "ruleset/layout.py",
    "ruleset/plan.py",
    "ruleset/rules.py",
)


def cache_key(paths: Paths) -> tuple:
    return (CACHE_VERSION, code_identity(COMPILER_MODULES), config_fingerprint(paths))


def load(paths: Paths, use_cache: bool = True) -> CompiledConfig:
    """The compiled config, from the cache when it is current, else from the files."""
    cache_path = os.path.join(paths.state, CACHE_FILE)
    key = cache_key(paths)
    if use_cache:
        try:
            data = marshal.loads(read_trusted(cache_path) or b"")
            if data["key"] == key:
                return CompiledConfig(data)
        except Exception:  # absent, damaged or untrusted: only a cache, rebuilt
            pass
    from ..config.load import load as load_files

    data = build(load_files(paths), paths)
    data["key"] = key
    if os.path.isdir(paths.state):  # made by the first run that takes the lock
        from ..files import write_atomically

        try:  # noqa: SIM105 - contextlib would cost every event 5 ms of imports
            write_atomically(cache_path, marshal.dumps(data), 0o600)
        except OSError:  # not root, or read-only: work without the cache
            pass
    return CompiledConfig(data)


class _Usable:
    """A zone as it will be compiled: its own definition, or for a zone that cannot be
    loaded, the shipped definition (else FALLBACK_ZONE's), read once when first needed."""

    def __init__(self, loaded, paths: Paths):
        self.loaded, self.paths = loaded, paths
        self.shipped = None

    def __call__(self, name: str):
        """(zone, its config, problem, fallback) to compile for zone `name`, or None."""
        config = self.loaded.config
        if name in config.zones:
            return config.zones[name], config, "", ""
        problems = self.loaded.broken_zones.get(name)
        if problems is None:
            return None
        if self.shipped is None:
            from ..config.load import load as load_files

            self.shipped = load_files(self.paths, shipped_only=True).config
        problem = f"zone {name!r} cannot be loaded ({problems[0]})"
        if name in self.shipped.zones:
            return self.shipped.zones[name], self.shipped, problem, "using the shipped definition"
        return self.shipped.zones[FALLBACK_ZONE], self.shipped, problem, f"using {FALLBACK_ZONE}"


def _zone_plans(loaded, usable: _Usable) -> dict:
    """Each zone's compiled template (for STAND_IN), by name."""
    from .build import compile_interface

    zones = {}
    for name in sorted(set(loaded.config.zones) | set(loaded.broken_zones)):
        zone, zone_config, problem, fallback = usable(name)
        ruleset = compile_interface(STAND_IN, zone, zone_config)
        zones[name] = {
            "name": zone.name,
            "digest": ruleset.digest(),
            "problem": problem,
            "fallback": fallback,
            "forwarding": ruleset.needs_forwarding,
            "chains_by_table": template(ruleset.chains_by_table(), STAND_IN, CHAIN_KINDS),
        }
    return zones


def _catchall_plan(loaded, usable: _Usable) -> dict:
    """The catch-all's rules (default-zone for unclaimed interfaces) and the sources."""
    from .build import compile_catchall, source_bindings

    config = loaded.config
    found = usable(config.connections_map.default_zone) or usable(FALLBACK_ZONE)
    if found is None:
        return {"error": f"default-zone {config.connections_map.default_zone!r} does not exist"}
    zone, zone_config, problem, fallback = found
    ruleset = compile_catchall(zone, zone_config)
    return {
        "zone": zone.name,
        "digest": ruleset.digest(),
        "degraded": f"{problem}; {fallback}" if problem else "",
        "chains_by_table": ruleset.chains_by_table(),
        "sources": {
            **{s: z for z, found in loaded.broken_sources.items() for s in found},
            **source_bindings(config),
        },
    }


def build(loaded, paths: Paths) -> dict:
    """Reduce a config.LoadResult to the plain values CompiledConfig reads."""
    from .build import service_specs

    config = loaded.config
    usable = _Usable(loaded, paths)
    cmap = config.connections_map
    return {
        "default_zone": cmap.default_zone,
        "wired_zone": cmap.wired_zone,
        "wireless_zone": cmap.wireless_zone,
        "connections": dict(cmap.connections),
        "exempt_interfaces": tuple(cmap.exempt_interfaces),
        "map_broken": str(loaded.map_broken) if loaded.map_broken else "",
        "problems": tuple(str(problem) for problem in loaded.problems),
        "zones": _zone_plans(loaded, usable),
        "catchall": _catchall_plan(loaded, usable),
        "settings": config.settings.plain(),
        "services": {name: service_specs(s) for name, s in config.services.items()},
    }

