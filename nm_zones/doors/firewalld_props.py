"""`org.freedesktop.DBus.Properties` on /org/fedoraproject/FirewallD1, with firewalld 1.3's
property names and D-Bus types: firewall-cmd's `--state` reads `state`, libvirt reads
`version` when it finds no `libvirt` zone and stops if it cannot.

The values are honest about nm-zones: `version` and `interface_version` name the firewalld
release whose D-Bus API nm-zones follows (clients compare them to decide which calls exist);
nm-zones has no ebtables (`BRIDGE`), no ipsets, no conntrack helper settings and no reverse
path filter of its own, so those say false or empty.
"""

from __future__ import annotations

import os

from ..config.model import ICMP_TYPES
from ..errors import NmZonesError
from .busapi import MAIN_INTERFACE

PROPERTIES_INTERFACE = "org.freedesktop.DBus.Properties"
FIREWALLD_VERSION = "1.3.3"  # the release whose D-Bus API nm-zones follows
INTERFACE_VERSION = "1.15"  # firewalld 1.3: DBUS_INTERFACE_VERSION.DBUS_INTERFACE_REVISION
STATE = "RUNNING"
# firewalld's other interfaces on the object: no properties, but known (InvalidArgs, not
# UnknownInterface, for a name asked there)
PROPERTYLESS = (
    "org.fedoraproject.FirewallD1.zone",
    "org.fedoraproject.FirewallD1.direct",
    "org.fedoraproject.FirewallD1.policies",
    "org.fedoraproject.FirewallD1.ipset",
)
INVALID_ARGS = "org.freedesktop.DBus.Error.InvalidArgs"
UNKNOWN_INTERFACE = "org.freedesktop.DBus.Error.UnknownInterface"
READ_ONLY = "org.freedesktop.DBus.Error.PropertyReadOnly"


class PropertyError(NmZonesError):
    """A D-Bus error other than firewalld's own: (error name, message)."""

    def __init__(self, name: str, text: str):
        self.name = self.bus_name = name
        super().__init__(text)

    def bus_message(self) -> str:
        return str(self)


def ipv6_available() -> bool:
    return os.path.exists("/proc/net/if_inet6")


def properties() -> dict[str, tuple[str, object]]:
    """Every property as a D-Bus variant (signature, value), in firewalld's GetAll order."""
    return {
        "version": ("s", FIREWALLD_VERSION),
        "interface_version": ("s", INTERFACE_VERSION),
        "state": ("s", STATE),
        "IPv4": ("b", True),
        "IPv6": ("b", ipv6_available()),
        "IPv6_rpfilter": ("b", False),
        "BRIDGE": ("b", False),
        "IPSet": ("b", False),
        "IPSetTypes": ("as", []),
        "nf_conntrack_helper_setting": ("b", False),
        "nf_conntrack_helpers": ("a{sas}", {}),
        "nf_nat_helpers": ("a{sas}", {}),
        "IPv4ICMPTypes": ("as", sorted(ICMP_TYPES["ipv4"])),
        "IPv6ICMPTypes": ("as", sorted(ICMP_TYPES["ipv6"])),
    }


def get(interface: str, name: str) -> tuple[str, object]:
    """Properties.Get: the variant, or PropertyError as firewalld answers."""
    if interface == MAIN_INTERFACE:
        found = properties().get(name)
        if found is None:
            raise PropertyError(INVALID_ARGS, f"Property '{name}' does not exist")
        return found
    if interface in PROPERTYLESS:
        raise PropertyError(INVALID_ARGS, f"Property '{name}' does not exist")
    raise PropertyError(UNKNOWN_INTERFACE, f"Interface '{interface}' does not exist")


def get_all(interface: str) -> dict[str, tuple[str, object]]:
    if interface == MAIN_INTERFACE:
        return properties()
    if interface in PROPERTYLESS:
        return {}
    raise PropertyError(UNKNOWN_INTERFACE, f"Interface '{interface}' does not exist")


def refuse_set(interface: str, name: str) -> None:
    """Properties.Set: every firewalld property is read-only."""
    if interface == MAIN_INTERFACE and name in properties():
        raise PropertyError(READ_ONLY, f"Property '{name}' is read-only")
    get(interface, name)  # the same errors as Get for unknown names and interfaces
    raise PropertyError(INVALID_ARGS, f"Property '{name}' does not exist")


def with_properties(xml: str) -> str:
    """The object's introspection `xml` with the Properties interface added and the
    properties listed inside the main interface, where introspection places them."""
    props = "".join(
        f'    <property name="{name}" type="{sig}" access="read"/>\n'
        for name, (sig, _) in properties().items()
    )
    interface = (
        f'  <interface name="{PROPERTIES_INTERFACE}">\n'
        '    <method name="Get"><arg name="interface_name" type="s" direction="in"/>'
        '<arg name="property_name" type="s" direction="in"/>'
        '<arg name="value" type="v" direction="out"/></method>\n'
        '    <method name="GetAll"><arg name="interface_name" type="s" direction="in"/>'
        '<arg name="properties" type="a{sv}" direction="out"/></method>\n'
        '    <method name="Set"><arg name="interface_name" type="s" direction="in"/>'
        '<arg name="property_name" type="s" direction="in"/>'
        '<arg name="value" type="v" direction="in"/></method>\n'
        '    <signal name="PropertiesChanged"><arg name="interface_name" type="s"/>'
        '<arg name="changed_properties" type="a{sv}"/>'
        '<arg name="invalidated_properties" type="as"/></signal>\n'
        "  </interface>\n"
    )
    opening = f'<interface name="{MAIN_INTERFACE}">'
    head, found, tail = xml.partition(opening)
    if not found:
        return xml
    body, _, rest = tail.partition("</interface>")
    head = head.rstrip(" ")
    return f"{head}{interface}  {opening}{body}{props}  </interface>{rest}"
