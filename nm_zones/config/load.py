"""Load and validate the layered configuration: shipped defaults, then the admin's files.

Each file is validated on its own, so that one broken zone file costs only that zone: the
result lists the zones that could not be loaded (and why) next to the ones that can be used.
Every problem names the file, the line and the key, and says what would be valid.
"""

from __future__ import annotations

import os
import re

from ..addresses import canonical_source
from ..paths import Paths, yaml_files
from .appname import check_app
from .model import (
    CONNTRACK_HELPERS,
    ICMP_NAMES,
    IP_PROTOCOLS,
    PORT_PROTOCOLS,
    TARGETS,
    USER_EDITABLE_PROFILES,
    Config,
    ConnectionsMap,
    ForwardPort,
    LoadResult,
    PortRange,
    Problem,
    Service,
    Settings,
    Zone,
)
from .yamlsource import LocList, LocMap, read_yaml

ZONE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,17}$")
SERVICE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
EXEMPT_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,15}\*?$")
PORT = re.compile(r"^([0-9]+)(?:-([0-9]+))?/([A-Za-z]+)$")  # ASCII digits only

ZONE_KEYS = (
    "description",
    "target",
    "forward-target",
    "services",
    "ports",
    "protocols",
    "icmp-blocks",
    "masquerade",
    "forward-ports",
    "log-denied",
    "sources",
    "applications",
)
SERVICE_KEYS = ("description", "ports", "protocols", "source-ports", "destination", "helpers")
MAP_KEYS = ("default-zone", "wired-zone", "wireless-zone", "connections", "exempt-interfaces")
FORWARD_PORT_KEYS = ("port", "to-port", "to-addr")
SETTINGS_FILE = "nm-zones.yaml"
SETTINGS_KEYS = (
    "end-forbidden-flows",
    "backend",
    "user-profile-zones",
    "user-editable-profiles",
    "identify-networks",
    "ask-about-listeners",
)
IDENTIFY_NETWORKS = ("none", "wired", "all")
ASK_ABOUT_LISTENERS = ("session", "all", "none")
BACKENDS = ("auto", "iptables", "nftables")
FORWARD_TARGETS = ("accept", "reject", "drop")


def port_order(port: PortRange) -> tuple:
    return (port.first, port.last, port.protocol)


def _hint(word: str, choices) -> str:
    import difflib  # only when there is a mistake to explain

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"did you mean {close[0]!r}?" if close else "valid: " + ", ".join(sorted(choices))


class _FileChecker:
    """Validation helpers bound to one file, collecting problems."""

    def __init__(self, path: str):
        self.path = path
        self.problems: list[Problem] = []

    def add(self, line: int, key: str, message: str) -> None:
        self.problems.append(Problem(self.path, line, key, message))

    def mapping(self, doc, kind: str, keys: tuple[str, ...]) -> LocMap | None:
        if doc is None:
            return None
        if not isinstance(doc, LocMap):
            line = getattr(doc, "line", 1)
            self.add(
                line,
                "",
                f"a {kind} file must be a mapping of keys (valid keys: " + ", ".join(keys) + ")",
            )
            return None
        for key in doc:
            if key not in keys:
                self.add(doc.key_lines[key], key, f"unknown key ({_hint(key, keys)})")
        return doc

    def text(self, doc: LocMap, key: str) -> str:
        value = doc.get(key)
        if value is None:
            return ""
        if isinstance(value, (LocMap, LocList, bool)):
            self.add(doc.key_lines[key], key, "must be text")
            return ""
        return str(value)

    def boolean(self, doc: LocMap, key: str, default: bool = False) -> bool:
        value = doc.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.add(doc.key_lines[key], key, f"must be true or false, not {value!r}")
            return default
        return value

    def items(self, doc: LocMap, key: str) -> list[tuple[int, str, object]]:
        """A list value as (line, key path, item); a lone scalar is reported, not guessed."""
        value = doc.get(key)
        if value is None:
            return []
        if not isinstance(value, LocList):
            self.add(doc.key_lines[key], key, f"must be a list, as in {key}: [ ... ]")
            return []
        return [(value.item_lines[i], f"{key}[{i}]", item) for i, item in enumerate(value)]

    def port(self, line: int, key: str, item) -> PortRange | None:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            self.add(line, key, f"must be a port such as 22/tcp or 60000-61000/udp, not {item!r}")
            return None
        match = PORT.match(str(item).strip())
        if not match:
            if not str(item).isascii():  # full-width or other scripts' digits look alike
                self.add(line, key, f"{item!r} is not a port (ASCII digits only, as in 22/tcp)")
            elif re.fullmatch(r"[0-9]+(-[0-9]+)?", str(item).strip()):
                self.add(line, key, f"{item!r} has no protocol (add one: {item}/tcp or {item}/udp)")
            else:
                self.add(line, key, f"{item!r} is not a port (as in 22/tcp or 60000-61000/udp)")
            return None
        first = int(match.group(1))
        last = int(match.group(2) or first)
        protocol = match.group(3).lower()
        if protocol not in PORT_PROTOCOLS:
            self.add(
                line, key, f"unknown protocol {protocol!r} ({_hint(protocol, PORT_PROTOCOLS)})"
            )
            return None
        for number in (first, last):
            if not 1 <= number <= 65535:
                self.add(line, key, f"port {number} is out of range (1-65535)")
                return None
        if last < first:
            self.add(line, key, f"range {first}-{last} is reversed (write {last}-{first})")
            return None
        return PortRange(first, last, protocol)

    def ports(self, doc: LocMap, key: str) -> tuple[PortRange, ...]:
        found = (self.port(line, path, item) for line, path, item in self.items(doc, key))
        return tuple(sorted({p for p in found if p is not None}, key=port_order))

    def names(self, doc: LocMap, key: str, valid, what: str) -> tuple[str, ...]:
        result = []
        for line, path, item in self.items(doc, key):
            if not isinstance(item, str) or item not in valid:
                self.add(line, path, f"unknown {what} {item!r} ({_hint(str(item), valid)})")
            elif item not in result:
                result.append(item)
        return tuple(result)


def _zone_name_problem(path: str) -> str | None:
    name = os.path.basename(path)[: -len(".yaml")]
    if not ZONE_NAME.match(name):
        return (
            f"zone name {name!r} is not valid (1-17 letters, digits, '-' or '_'; "
            "the file name without .yaml is the zone's name)"
        )
    return None


def _destination(check: _FileChecker, doc: LocMap) -> tuple[tuple[str, str], ...]:
    """A service's `destination`: (family, network as iptables prints it) pairs."""
    value = doc.get("destination")
    if value is None:
        return ()
    if not isinstance(value, LocMap):
        check.add(
            doc.key_lines["destination"],
            "destination",
            "must be a mapping with ipv4 and/or ipv6 addresses",
        )
        return ()
    destination: list[tuple[str, str]] = []
    for family, address in value.items():
        line, key = value.key_lines[family], f"destination.{family}"
        if family not in ("ipv4", "ipv6"):
            check.add(line, key, f"unknown family ({_hint(family, ('ipv4', 'ipv6'))})")
            continue
        try:
            import ipaddress  # only for the services that name addresses

            network = ipaddress.ip_network(str(address), strict=False)
        except ValueError:
            check.add(line, key, f"{address!r} is not an {family} address or network")
            continue
        if network.version != (4 if family == "ipv4" else 6):
            check.add(line, key, f"{address} is not an {family} address")
            continue
        destination.append((family, str(network)))
    return tuple(sorted(destination))


def load_service(path: str, name: str) -> tuple[Service | None, list[Problem]]:
    check = _FileChecker(path)
    if not SERVICE_NAME.match(name):
        check.add(1, "", f"service name {name!r} is not valid (letters, digits, '-' or '_')")
        return None, check.problems
    doc = check.mapping(read_yaml(path, check.problems), "service", SERVICE_KEYS)
    if doc is None:
        if not check.problems:
            check.add(1, "", "empty service file (give at least ports or protocols)")
        return None, check.problems
    destination = _destination(check, doc)  # checked first, as the file's readers expect
    service = Service(
        name=name,
        description=check.text(doc, "description"),
        ports=check.ports(doc, "ports"),
        protocols=check.names(doc, "protocols", IP_PROTOCOLS, "protocol"),
        source_ports=check.ports(doc, "source-ports"),
        destination=destination,
        helpers=check.names(doc, "helpers", CONNTRACK_HELPERS, "conntrack helper"),
    )
    return (None if check.problems else service), check.problems


def _target(check: _FileChecker, doc: LocMap, key: str, choices, default: str) -> str:
    """`target` or `forward-target`, lower case; an unknown one is a problem."""
    target = check.text(doc, key).lower() or default
    if target and target not in choices:
        check.add(
            doc.key_lines.get(key, 1), key, f"unknown target {target!r} ({_hint(target, choices)})"
        )
    return target


def _zone_services(
    check: _FileChecker, doc: LocMap, services: dict[str, Service], broken_services: set[str]
) -> tuple[str, ...]:
    """The zone's services, each once; a broken or unknown one is a problem."""
    found: list[str] = []
    for line, key, item in check.items(doc, "services"):
        if not isinstance(item, str) or not SERVICE_NAME.match(item):
            check.add(line, key, f"{item!r} is not a service name")
        elif item in broken_services:
            check.add(line, key, f"service {item!r} cannot be loaded (see its own file)")
        elif item not in services:
            check.add(line, key, f"unknown service {item!r} ({_hint(item, services)})")
        elif item not in found:
            found.append(item)
    return tuple(found)


def load_zone(
    path: str, name: str, services: dict[str, Service], broken_services: set[str]
) -> tuple[Zone | None, list[Problem]]:
    check = _FileChecker(path)
    bad_name = _zone_name_problem(path)
    if bad_name:
        check.add(1, "", bad_name)
        return None, check.problems
    doc = check.mapping(read_yaml(path, check.problems), "zone", ZONE_KEYS)
    if doc is None and check.problems:
        return None, check.problems
    doc = doc or LocMap()
    if not hasattr(doc, "key_lines"):
        doc.key_lines = {}
    target = _target(check, doc, "target", TARGETS, "default")
    forward_target = _target(check, doc, "forward-target", FORWARD_TARGETS, "")
    zone_services = _zone_services(check, doc, services, broken_services)
    forward_ports = [
        forward
        for line, key, item in check.items(doc, "forward-ports")
        if (forward := _forward_port(check, line, key, item))
    ]
    zone = Zone(
        name=name,
        description=check.text(doc, "description"),
        target=target,
        forward_target=forward_target,
        services=zone_services,
        ports=check.ports(doc, "ports"),
        protocols=check.names(doc, "protocols", IP_PROTOCOLS, "protocol"),
        icmp_blocks=check.names(doc, "icmp-blocks", ICMP_NAMES, "ICMP type"),
        masquerade=check.boolean(doc, "masquerade"),
        forward_ports=tuple(forward_ports),
        log_denied=check.boolean(doc, "log-denied"),
        applications=_applications(check, doc),
        source=path,
        sources=_sources(check, doc),
    )
    return (None if check.problems else zone), check.problems


def _sources(check: _FileChecker, doc: LocMap) -> tuple[str, ...]:
    """The zone's source addresses and networks, canonical, each once."""
    found: list[str] = []
    for line, key, item in check.items(doc, "sources"):
        if isinstance(item, (bool, LocMap, LocList)):
            check.add(line, key, "must be an address or network such as 10.0.0.5 or fd00::/64")
            continue
        try:
            source = canonical_source(str(item))
        except ValueError as error:
            check.add(line, key, str(error))
            continue
        if source not in found:
            found.append(source)
    return tuple(found)


def _source_conflicts(zones: dict[str, Zone]) -> list[Problem]:
    """A source named by a second zone: that zone is refused (which zone the source gets
    would be a guess; firewalld calls it ZONE_CONFLICT)."""
    owner: dict[str, str] = {}
    problems = []
    for name in sorted(zones):
        for source in zones[name].sources:
            first = owner.setdefault(source, name)
            if first != name:
                problems.append(
                    Problem(
                        zones[name].source,
                        1,
                        "sources",
                        f"source {source} is already in zone {first!r} "
                        f"({zones[first].source}); a source can be in one zone only",
                    )
                )
    return problems


def _salvage_sources(files, refused, broken, zones) -> dict[str, tuple[str, ...]]:
    """The sources a broken zone file still names readably, for that zone's stand-in: a
    source bound to `block` stays refused when a typo breaks block's file (fail closed).
    Refused (insecure) files are not read; a source another zone holds stays there."""
    taken = {source for zone in zones.values() for source in zone.sources}
    salvaged = {}
    for name in sorted(broken):
        if name in refused or name not in files:
            continue
        doc = read_yaml(files[name], [])
        if not isinstance(doc, LocMap):
            continue
        found = [s for s in _sources(_FileChecker(files[name]), doc) if s not in taken]
        taken.update(found)
        if found:
            salvaged[name] = tuple(found)
    return salvaged


def _applications(check: _FileChecker, doc) -> tuple[str, ...]:
    """The zone's `applications` (ruleset/applications.py), each checked and once."""
    found: list[str] = []
    for line, key, item in check.items(doc, "applications"):
        try:
            app = check_app(item if isinstance(item, str) else "")
        except ValueError as error:
            check.add(line, key, str(error).replace("''", repr(item)))
            continue
        if app not in found:
            found.append(app)
    return tuple(found)


def _to_port(check: _FileChecker, item: LocMap, key: str) -> int | bool | None:
    """A forward port's `to-port`: the number, None when absent, False when wrong."""
    to_port = item.get("to-port")
    if to_port is None:
        return None
    text = str(to_port)
    if isinstance(to_port, bool) or not (text.isascii() and text.isdigit()):
        valid = False
    else:
        valid = 1 <= int(text) <= 65535
    if not valid:
        check.add(
            item.key_lines["to-port"],
            f"{key}.to-port",
            f"{to_port!r} is not a port number (1-65535)",
        )
        return False
    return int(text)


def _to_addr(check: _FileChecker, item: LocMap, key: str) -> str | bool | None:
    """A forward port's `to-addr`: the address, None when absent, False when wrong."""
    to_addr = item.get("to-addr")
    if to_addr is None:
        return None
    try:
        import ipaddress  # only for zones that forward to an address

        return str(ipaddress.ip_address(str(to_addr)))
    except ValueError:
        check.add(
            item.key_lines["to-addr"],
            f"{key}.to-addr",
            f"{to_addr!r} is not an IPv4 or IPv6 address",
        )
        return False


def _forward_port(check: _FileChecker, line: int, key: str, item) -> ForwardPort | None:
    if not isinstance(item, LocMap):
        check.add(line, key, "must be a mapping such as {port: 80/tcp, to-port: 8080}")
        return None
    for name in item:
        if name not in FORWARD_PORT_KEYS:
            check.add(
                item.key_lines[name],
                f"{key}.{name}",
                f"unknown key ({_hint(name, FORWARD_PORT_KEYS)})",
            )
    if "port" not in item:
        check.add(line, f"{key}.port", "missing (the incoming port, such as 80/tcp)")
        return None
    port = check.port(item.key_lines["port"], f"{key}.port", item["port"])
    to_port = _to_port(check, item, key)
    if to_port is False:
        return None
    to_addr = _to_addr(check, item, key)
    if to_addr is False:
        return None
    if to_port is None and to_addr is None:
        check.add(line, key, "needs to-port, to-addr or both")
        return None
    if port is None:
        return None
    return ForwardPort(port, to_port, to_addr)


def _with_defaults(doc, problems: list[Problem], defaults_path: str | None):
    """An admin's map overrides the shipped one key by key: a key it leaves out (or an
    empty, all-commented map) keeps the shipped value, which then follows upgrades."""
    if defaults_path is None or problems or not isinstance(doc, LocMap | None):
        return doc
    shipped = read_yaml(defaults_path, [])
    merged = LocMap(doc or {})
    merged.line, merged.key_lines = 1, dict(getattr(doc, "key_lines", {}))
    if isinstance(shipped, LocMap):
        for key in MAP_KEYS:
            if key not in merged and key in shipped:
                merged[key] = shipped[key]
                merged.key_lines[key] = 1  # not in this file: the shipped value
    return merged


def _map_zone(check: _FileChecker, doc: LocMap, key: str) -> str:
    value = check.text(doc, key)
    if value and not ZONE_NAME.match(value):
        check.add(doc.key_lines[key], key, f"{value!r} is not a zone name")
        return ""
    return value


def _map_connections(check: _FileChecker, doc: LocMap) -> tuple[tuple[str, str], ...]:
    """`connections`: (connection UUID or name, zone) pairs."""
    value = doc.get("connections")
    if value is not None and not isinstance(value, LocMap):
        check.add(
            doc.key_lines["connections"],
            "connections",
            "must be a mapping of connection UUID or name to zone",
        )
        return ()
    connections = []
    for name, zone in (value or {}).items():
        if not isinstance(zone, str) or not ZONE_NAME.match(zone):
            check.add(value.key_lines[name], f"connections.{name}", f"{zone!r} is not a zone name")
            continue
        connections.append((name, zone))
    return tuple(connections)


def _exempt_interfaces(check: _FileChecker, doc: LocMap) -> tuple[str, ...]:
    exempt = []
    for line, key, item in check.items(doc, "exempt-interfaces"):
        if not isinstance(item, str) or not EXEMPT_PATTERN.match(item):
            check.add(line, key, f"{item!r} is not an interface name or prefix* pattern")
        else:
            exempt.append(item)
    return tuple(exempt)


def load_map(
    path: str, defaults_path: str | None = None
) -> tuple[ConnectionsMap | None, list[Problem], LocMap | None]:
    """The map in `path`; with `defaults_path`, keys it leaves out come from that map."""
    check = _FileChecker(path)
    doc = _with_defaults(read_yaml(path, check.problems), check.problems, defaults_path)
    doc = check.mapping(doc, "connections map", MAP_KEYS)
    if doc is None:
        if not check.problems:
            check.add(1, "", "empty connections map (give at least default-zone)")
        return None, check.problems, None
    connections, exempt = _map_connections(check, doc), _exempt_interfaces(check, doc)
    result = ConnectionsMap(
        default_zone=_map_zone(check, doc, "default-zone") or "public",
        wired_zone=_map_zone(check, doc, "wired-zone"),
        wireless_zone=_map_zone(check, doc, "wireless-zone"),
        connections=connections,
        exempt_interfaces=exempt,
    )
    if "default-zone" not in doc:
        check.add(doc.line, "default-zone", "missing (the zone of unknown networks, e.g. public)")
    return (None if check.problems else result), check.problems, doc


def load_settings(path: str) -> tuple[Settings | None, list[Problem]]:
    """nm-zones.yaml: an empty file means every default; a key left out keeps its default."""
    check = _FileChecker(path)
    doc = check.mapping(read_yaml(path, check.problems), "settings", SETTINGS_KEYS)
    if doc is None:
        return (None if check.problems else Settings()), check.problems
    defaults = Settings()
    settings = Settings(
        end_forbidden_flows=check.boolean(doc, "end-forbidden-flows", defaults.end_forbidden_flows),
        backend=_choice(check, doc, "backend", BACKENDS, defaults),
        user_profile_zones=_user_profile_zones(check, doc, defaults.user_profile_zones),
        user_editable_profiles=_choice(
            check, doc, "user-editable-profiles", USER_EDITABLE_PROFILES, defaults
        ),
        identify_networks=_choice(check, doc, "identify-networks", IDENTIFY_NETWORKS, defaults),
        ask_about_listeners=_choice(
            check, doc, "ask-about-listeners", ASK_ABOUT_LISTENERS, defaults
        ),
    )
    return (None if check.problems else settings), check.problems


def _user_profile_zones(check: _FileChecker, doc: LocMap, default: tuple) -> tuple[str, ...]:
    """A key left out keeps the shipped list; an empty one allows no zone at all."""
    if "user-profile-zones" not in doc:
        return default
    names = []
    for line, key, item in check.items(doc, "user-profile-zones"):
        if not isinstance(item, str) or not ZONE_NAME.match(item):
            check.add(line, key, f"{item!r} is not a zone name")
        else:
            names.append(item)
    return tuple(names)


def _choice(check: _FileChecker, doc: LocMap, key: str, choices: tuple, defaults) -> str:
    default = getattr(defaults, key.replace("-", "_"))
    value = check.text(doc, key) or default
    if value not in choices:
        check.add(doc.key_lines[key], key, f"{value!r} is not one of {', '.join(choices)}")
        return default
    return value


def _layered_settings(
    paths: Paths, shipped_only: bool, check_owner: bool
) -> tuple[Settings, list[Problem]]:
    """The admin's nm-zones.yaml over the shipped one; a broken or insecure admin file is
    reported and the shipped settings hold (they are the stricter: flows are ended)."""
    shipped = os.path.join(paths.shipped, SETTINGS_FILE)
    admin = os.path.join(paths.config, SETTINGS_FILE)
    problems: list[Problem] = []
    if not shipped_only and os.path.exists(admin):
        bad = None
        if check_owner:
            bad = insecure_problem(paths.config, is_dir=True) or insecure_problem(admin)
        settings, problems = (None, [bad]) if bad else load_settings(admin)
        if settings is not None:
            return settings, problems
    settings, shipped_problems = (
        load_settings(shipped) if os.path.exists(shipped) else (Settings(), [])
    )
    return settings or Settings(), problems + shipped_problems


def _map_zone_problems(
    path: str, doc: LocMap, cmap: ConnectionsMap, zones: dict, broken: dict
) -> list[Problem]:
    """A map that names zones which do not exist: reported, and resolution falls back."""
    problems = []
    valid = sorted(set(zones) | set(broken))
    for key in ("default-zone", "wired-zone", "wireless-zone"):
        zone = {
            "default-zone": cmap.default_zone,
            "wired-zone": cmap.wired_zone,
            "wireless-zone": cmap.wireless_zone,
        }[key]
        if zone and zone not in zones and zone not in broken:
            problems.append(
                Problem(
                    path,
                    doc.key_lines.get(key, 1),
                    key,
                    f"zone {zone!r} does not exist ({_hint(zone, valid)})",
                )
            )
    connections = doc.get("connections") or LocMap()
    for name, zone in cmap.connections:
        if zone not in zones and zone not in broken:
            problems.append(
                Problem(
                    path,
                    connections.key_lines.get(name, 1),
                    f"connections.{name}",
                    f"zone {zone!r} does not exist ({_hint(zone, valid)})",
                )
            )
    return problems


def insecure_problem(path: str, is_dir: bool = False) -> Problem | None:
    """Running as root, an admin file others could write must not decide the firewall."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    what = "folder" if is_dir else "file"
    if info.st_uid != 0:
        return Problem(path, 1, "", f"{what} is not owned by root (chown root {path})")
    if info.st_mode & 0o022:
        return Problem(path, 1, "", f"{what} is writable by group or others (chmod go-w {path})")
    return None


def _layered(
    paths: Paths, sub: str, shipped_only: bool, check_owner: bool
) -> tuple[dict[str, str], dict[str, Problem]]:
    """NAME -> path, admin files over shipped ones; and admin files refused as insecure."""
    files = yaml_files(os.path.join(paths.shipped, sub))
    refused: dict[str, Problem] = {}
    if shipped_only:
        return files, refused
    admin_dir = os.path.join(paths.config, sub)
    admin = yaml_files(admin_dir)
    folder_problem = insecure_problem(admin_dir, is_dir=True) if check_owner and admin else None
    for name, path in admin.items():
        files[name] = path
        problem = folder_problem or (insecure_problem(path) if check_owner else None)
        if problem:
            refused[name] = problem
    return files, refused


def _load_services(
    files: dict[str, str], refused: dict[str, Problem]
) -> tuple[dict[str, Service], set[str], list[Problem]]:
    """(the services that load, the names of those that do not, what is wrong)."""
    services: dict[str, Service] = {}
    broken: set[str] = set()
    problems: list[Problem] = []
    for name, path in files.items():
        bad = refused.get(name)
        found, found_problems = (None, [bad]) if bad else load_service(path, name)
        problems += found_problems
        if found:
            services[name] = found
        else:
            broken.add(name)
    return services, broken, problems


def _load_zones(
    files: dict[str, str],
    refused: dict[str, Problem],
    services: dict[str, Service],
    broken_services: set[str],
) -> tuple[dict[str, Zone], dict[str, list[Problem]], list[Problem]]:
    """(the zones that load, each broken zone's problems, what is wrong); a zone naming a
    source another zone has is broken too."""
    zones: dict[str, Zone] = {}
    broken: dict[str, list[Problem]] = {}
    problems: list[Problem] = []
    for name, path in files.items():
        bad = refused.get(name)
        found, found_problems = (
            (None, [bad]) if bad else load_zone(path, name, services, broken_services)
        )
        problems += found_problems
        if found:
            zones[name] = found
        else:
            broken[name] = found_problems
    for conflict in _source_conflicts(zones):
        problems.append(conflict)
        name = os.path.basename(conflict.file)[: -len(".yaml")]
        zones.pop(name, None)
        broken.setdefault(name, []).append(conflict)
    return zones, broken, problems


def _load_connections_map(
    paths: Paths, shipped_only: bool, check_owner: bool, zones: dict, broken: dict
) -> tuple[ConnectionsMap, Problem | None, list[Problem]]:
    """(the map in force, the admin map's first problem when it is broken, what is wrong):
    a broken admin map gives way to the shipped one."""
    shipped_map = os.path.join(paths.shipped, "connections-map.yaml")
    admin_map = os.path.join(paths.config, "connections-map.yaml")
    map_path = admin_map if not shipped_only and os.path.exists(admin_map) else shipped_map
    bad = None
    if check_owner and map_path == admin_map:
        bad = insecure_problem(paths.config, is_dir=True) or insecure_problem(map_path)
    defaults = shipped_map if map_path == admin_map else None
    cmap, problems, doc = (None, [bad], None) if bad else load_map(map_path, defaults)
    map_broken = problems[0] if cmap is None and problems else None
    if cmap is None and map_path != shipped_map:
        cmap, _, doc = load_map(shipped_map)  # the admin's map is broken: keep the shipped one
        map_path = shipped_map
    if cmap is None:
        cmap, doc = ConnectionsMap(), None
    if doc is not None:
        problems = problems + _map_zone_problems(map_path, doc, cmap, zones, broken)
    return cmap, map_broken, problems


def load(paths: Paths, shipped_only: bool = False) -> LoadResult:
    """Read every layer and return what can be used plus what is wrong."""
    check_owner = os.geteuid() == 0 and not shipped_only
    service_files, refused = _layered(paths, "services.d", shipped_only, check_owner)
    services, broken_services, problems = _load_services(service_files, refused)
    zone_files, refused = _layered(paths, "zones.d", shipped_only, check_owner)
    zones, broken, zone_problems = _load_zones(zone_files, refused, services, broken_services)
    cmap, map_broken, map_problems = _load_connections_map(
        paths, shipped_only, check_owner, zones, broken
    )
    settings, settings_problems = _layered_settings(paths, shipped_only, check_owner)
    problems += zone_problems + map_problems + settings_problems
    config = Config(zones=zones, services=services, connections_map=cmap, settings=settings)
    salvaged = _salvage_sources(zone_files, refused, broken, zones)
    return LoadResult(config, problems, broken, map_broken, salvaged)
