"""firewalld's permanent configuration object, /org/fedoraproject/FirewallD1/config, for the
programs that create or read zones through it (Docker: `getZones`, `addZone("docker",
...)`; firewall-cmd's `--permanent`): the zone files of nm-zones, seen through firewalld's
settings structures.

A zone added here is an ordinary nm-zones zone: its file is written to the admin's zones.d
(NM_ZONES_CONFIG_DIR/zones.d/NAME.yaml) after it loads with nm-zones' own loader. firewalld's
settings map onto nm-zones' zone keys where nm-zones has the same thing (target, services,
ports, protocols, ICMP blocks, masquerade, forward ports); what nm-zones does not do (rich
rules, source ports, ICMP block inversion, interfaces or sources written into a zone) is
refused with a firewalld error code and a sentence, never dropped silently.

Zone objects (/org/fedoraproject/FirewallD1/config/zone/N) get their number when first named
and keep it for the life of the service, as firewalld's do.
"""

from __future__ import annotations

import os
import tempfile

import yaml

from ..config.load import ZONE_NAME, load_zone
from ..config.model import Zone
from ..files import write_atomically
from .busapi import FirewallError

CONFIG_PATH = "/org/fedoraproject/FirewallD1/config"
CONFIG_INTERFACE = "org.fedoraproject.FirewallD1.config"
CONFIG_ZONE_INTERFACE = "org.fedoraproject.FirewallD1.config.zone"
# (sssbsasa(ss)asba(ssss)asasasasa(ss)b): version, short, description, UNUSED, target,
# services, ports, icmp_blocks, masquerade, forward_ports, interfaces, sources, rules_str,
# protocols, source_ports, icmp_block_inversion
SETTINGS_SIGNATURE = "(sssbsasa(ss)asba(ssss)asasasasa(ss)b)"
SETTINGS_FIELDS = (
    "version",
    "short",
    "description",
    "UNUSED",
    "target",
    "services",
    "ports",
    "icmp_blocks",
    "masquerade",
    "forward_ports",
    "interfaces",
    "sources",
    "rules_str",
    "protocols",
    "source_ports",
    "icmp_block_inversion",
)
SETTINGS2_TYPES = {
    "version": "s",
    "short": "s",
    "description": "s",
    "target": "s",
    "services": "as",
    "ports": "a(ss)",
    "icmp_blocks": "as",
    "masquerade": "b",
    "forward_ports": "a(ssss)",
    "interfaces": "as",
    "sources": "as",
    "rules_str": "as",
    "protocols": "as",
    "source_ports": "a(ss)",
    "icmp_block_inversion": "b",
    "forward": "b",
}
TARGET_TO_FIREWALLD = {
    "default": "default",
    "accept": "ACCEPT",
    "reject": "%%REJECT%%",
    "drop": "DROP",
}
TARGET_FROM_FIREWALLD = {
    "default": "default",
    "": "default",
    "ACCEPT": "accept",
    "%%REJECT%%": "reject",
    "REJECT": "reject",
    "DROP": "drop",
}
# firewalld settings nm-zones has no equivalent for: (error code, what nm-zones does instead)
UNSUPPORTED = {
    "rules_str": ("INVALID_RULE", "nm-zones has no rich rules"),
    "source_ports": ("INVALID_PORT", "nm-zones zones have no source ports"),
    "icmp_block_inversion": ("INVALID_ICMPTYPE", "nm-zones has no ICMP block inversion"),
    "interfaces": (
        "INVALID_INTERFACE",
        "nm-zones does not write interfaces into zone files: a connection's zone is set in "
        "NetworkManager (nmcli connection modify ... connection.zone) or at runtime with "
        "changeZoneOfInterface",
    ),
    "sources": ("INVALID_ADDR", "nm-zones does not bind zones by source address here"),
}


# -- nm-zones' zone -> firewalld's settings ---------------------------------------------


def _port_range(port) -> str:
    return str(port.first) if port.first == port.last else f"{port.first}-{port.last}"


def settings_values(zone: Zone, interfaces: list[str]) -> dict[str, object]:
    """firewalld's settings of `zone` by field name (plain Python values)."""
    forward_ports = [
        (
            _port_range(f.port),
            f.port.protocol,
            "" if f.to_port is None else str(f.to_port),
            f.to_addr or "",
        )
        for f in zone.forward_ports
    ]
    return {
        "version": "",
        "short": zone.name,
        "description": zone.description,
        "UNUSED": False,
        "target": TARGET_TO_FIREWALLD[zone.target],
        "services": list(zone.services),
        "ports": [(_port_range(p), p.protocol) for p in zone.ports],
        "icmp_blocks": list(zone.icmp_blocks),
        "masquerade": zone.masquerade,
        "forward_ports": forward_ports,
        "interfaces": sorted(interfaces),
        "sources": [],
        "rules_str": [],
        "protocols": list(zone.protocols),
        "source_ports": [],
        "icmp_block_inversion": False,
        "forward": True,
    }


def settings_tuple(zone: Zone, interfaces: list[str]) -> tuple:
    """config.zone.getSettings: the 16-field structure."""
    values = settings_values(zone, interfaces)
    return tuple(values[field] for field in SETTINGS_FIELDS)


def settings_dict(zone: Zone, interfaces: list[str]) -> dict[str, tuple[str, object]]:
    """config.zone.getSettings2: a{sv}."""
    values = settings_values(zone, interfaces)
    return {key: (signature, values[key]) for key, signature in SETTINGS2_TYPES.items()}


# -- firewalld's settings -> a zone file ------------------------------------------------


def from_tuple(settings) -> dict[str, object]:
    """The 16-field structure (or Docker's list of the same fields) as a dict by name;
    Docker sends it as an array of variants, so each value may still be (signature, value)."""
    values = list(settings)
    if len(values) != len(SETTINGS_FIELDS):
        raise FirewallError(
            "INVALID_SETTING",
            f"a zone's settings have {len(SETTINGS_FIELDS)} fields, not {len(values)}",
        )
    return {field: _plain(value) for field, value in zip(SETTINGS_FIELDS, values, strict=True)}


def from_dict(settings: dict) -> dict[str, object]:
    """a{sv} as a dict of plain values; unknown keys refused."""
    values = {}
    for key, value in settings.items():
        if key not in SETTINGS2_TYPES:
            raise FirewallError("INVALID_SETTING", f"unknown zone setting '{key}'")
        values[key] = _plain(value)
    return values


def _plain(value):
    """A D-Bus variant (signature, value) as jeepney hands it, unwrapped, recursively."""
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and _looks_like_signature(value[0])
    ):
        return _plain(value[1])
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    return value


def _looks_like_signature(text: str) -> bool:
    return bool(text) and all(c in "ybnqiuxtdsogavh(){}" for c in text)


def zone_document(values: dict[str, object]) -> dict[str, object]:
    """The zone file's keys for firewalld's settings; FirewallError for what nm-zones lacks.
    `version`, `short` and `forward` (firewalld's intra-zone forwarding switch) are names
    and markers, not rules: they are not kept."""
    for key, (code, why) in UNSUPPORTED.items():
        if values.get(key):
            raise FirewallError(code, f"{key} {values[key]!r}: {why}")
    document: dict[str, object] = {}
    if values.get("description"):
        document["description"] = str(values["description"])
    target = str(values.get("target") or "default")
    if target not in TARGET_FROM_FIREWALLD:
        raise FirewallError(
            "INVALID_TARGET", f"'{target}': one of default, ACCEPT, %%REJECT%%, DROP"
        )
    if TARGET_FROM_FIREWALLD[target] != "default":
        document["target"] = TARGET_FROM_FIREWALLD[target]
    if values.get("services"):
        document["services"] = [str(s) for s in values["services"]]
    if values.get("ports"):
        document["ports"] = [_port_text(port, proto) for port, proto in values["ports"]]
    if values.get("protocols"):
        document["protocols"] = [str(p) for p in values["protocols"]]
    if values.get("icmp_blocks"):
        document["icmp-blocks"] = [str(i) for i in values["icmp_blocks"]]
    if values.get("masquerade"):
        document["masquerade"] = True
    if values.get("forward_ports"):
        document["forward-ports"] = [_forward_port(*row) for row in values["forward_ports"]]
    return document


def _port_text(port: str, protocol: str) -> str:
    return f"{str(port).replace(':', '-')}/{str(protocol).lower()}"


def _forward_port(port: str, protocol: str, to_port: str, to_addr: str) -> dict:
    mapping: dict[str, object] = {"port": _port_text(port, protocol)}
    if to_port:
        mapping["to-port"] = int(to_port) if str(to_port).isdigit() else to_port
    if to_addr:
        mapping["to-addr"] = str(to_addr)
    return mapping


def zone_text(name: str, document: dict[str, object]) -> str:
    header = f"# zone {name}: written by nm-zones serve for a firewalld client (config object)\n"
    body = yaml.safe_dump(document, default_flow_style=None, sort_keys=False) if document else ""
    return header + body


def write_zone(paths, name: str, text: str, services: dict, exists: bool) -> str:
    """Validate `text` as zone `name` with nm-zones' loader, then write it to the admin's
    zones.d atomically; the path written. FirewallError (firewalld's codes) when it cannot."""
    if not ZONE_NAME.match(name):
        raise FirewallError(
            "INVALID_NAME", f"'{name}': 1-17 letters, digits, '-' or '_' make a zone name"
        )
    with tempfile.TemporaryDirectory(prefix="nm-zones-") as folder:
        candidate = os.path.join(folder, f"{name}.yaml")
        with open(candidate, "w", encoding="utf-8") as stream:
            stream.write(text)
        _, problems = load_zone(candidate, name, services, set())
    if problems:
        detail = "; ".join(f"{p.key}: {p.message}" if p.key else p.message for p in problems)
        raise FirewallError("INVALID_ZONE", f"{name}: {detail}")
    folder = os.path.join(paths.config, "zones.d")
    os.makedirs(folder, mode=0o755, exist_ok=True)
    path = os.path.join(folder, f"{name}.yaml")
    if not exists and os.path.lexists(path):
        raise FirewallError("NAME_CONFLICT", f"{path} exists")
    write_atomically(path, text.encode("utf-8"))
    return path


class ObjectNumbers:
    """Object path numbers of config zones and services, given when first named."""

    def __init__(self):
        self._numbers: dict[tuple[str, str], int] = {}

    def path(self, kind: str, name: str) -> str:
        key = (kind, name)
        if key not in self._numbers:
            self._numbers[key] = len(self._numbers)
        return f"{CONFIG_PATH}/{kind}/{self._numbers[key]}"

    def name(self, path: str) -> tuple[str, str] | None:
        """(kind, name) of a path given before, else None."""
        for (kind, name), number in self._numbers.items():
            if path == f"{CONFIG_PATH}/{kind}/{number}":
                return kind, name
        return None


def introspection(path: str, zone_object: bool, children: list[str]) -> str:
    """Introspection of the config object or of one config zone object."""
    if zone_object:
        interface = f"""  <interface name="{CONFIG_ZONE_INTERFACE}">
    <method name="getSettings"><arg type="{SETTINGS_SIGNATURE}" direction="out"/></method>
    <method name="getSettings2"><arg type="a{{sv}}" direction="out"/></method>
    <method name="update"><arg name="settings" type="{SETTINGS_SIGNATURE}" direction="in"/>
    </method>
    <method name="update2"><arg name="settings" type="a{{sv}}" direction="in"/></method>
    <method name="getShort"><arg type="s" direction="out"/></method>
    <method name="getDescription"><arg type="s" direction="out"/></method>
    <method name="getTarget"><arg type="s" direction="out"/></method>
    <signal name="Updated"><arg name="name" type="s"/></signal>
  </interface>
"""
    else:
        interface = f"""  <interface name="{CONFIG_INTERFACE}">
    <method name="getZoneNames"><arg type="as" direction="out"/></method>
    <method name="listZones"><arg type="ao" direction="out"/></method>
    <method name="getZoneByName">
      <arg name="zone" type="s" direction="in"/><arg type="o" direction="out"/>
    </method>
    <method name="addZone">
      <arg name="zone" type="s" direction="in"/>
      <arg name="settings" type="{SETTINGS_SIGNATURE}" direction="in"/>
      <arg type="o" direction="out"/>
    </method>
    <method name="addZone2">
      <arg name="zone" type="s" direction="in"/><arg name="settings" type="a{{sv}}" direction="in"/>
      <arg type="o" direction="out"/>
    </method>
    <method name="getServiceNames"><arg type="as" direction="out"/></method>
    <method name="listServices"><arg type="ao" direction="out"/></method>
    <signal name="ZoneAdded"><arg name="zone" type="s"/></signal>
  </interface>
"""
    nodes = "".join(f'  <node name="{child}"/>\n' for child in children)
    return (
        '<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"\n'
        ' "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">\n'
        f'<node name="{path}">\n'
        '  <interface name="org.freedesktop.DBus.Introspectable">\n'
        '    <method name="Introspect"><arg name="data" type="s" direction="out"/></method>\n'
        "  </interface>\n"
        f"{interface}{nodes}</node>\n"
    )
