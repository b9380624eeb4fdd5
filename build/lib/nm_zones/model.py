"""The configuration model: zones, services and the connections map, as immutable values.

Everything here is plain data so that it can be compared, hashed, cached and compiled without
touching the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import Problem

PORT_PROTOCOLS = ("tcp", "udp", "sctp", "dccp")
TARGETS = ("default", "accept", "reject", "drop")
FAMILIES = ("ipv4", "ipv6")

# ICMP type names and their numbers, per family; a blocked name applies where it exists.
ICMP_TYPES = {
    "ipv4": {
        "echo-reply": 0,
        "destination-unreachable": 3,
        "source-quench": 4,
        "redirect": 5,
        "echo-request": 8,
        "router-advertisement": 9,
        "router-solicitation": 10,
        "time-exceeded": 11,
        "parameter-problem": 12,
        "timestamp-request": 13,
        "timestamp-reply": 14,
        "address-mask-request": 17,
        "address-mask-reply": 18,
    },
    "ipv6": {
        "destination-unreachable": 1,
        "packet-too-big": 2,
        "time-exceeded": 3,
        "parameter-problem": 4,
        "echo-request": 128,
        "echo-reply": 129,
    },
}
ICMP_NAMES = sorted(set(ICMP_TYPES["ipv4"]) | set(ICMP_TYPES["ipv6"]))

# IP protocols a zone or service may open as a whole, by the names iptables prints.
IP_PROTOCOLS = {
    "icmp": 1,
    "igmp": 2,
    "ipencap": 4,
    "tcp": 6,
    "udp": 17,
    "ipv6": 41,
    "gre": 47,
    "esp": 50,
    "ah": 51,
    "ipv6-icmp": 58,
    "eigrp": 88,
    "ospf": 89,
    "etherip": 97,
    "encap": 98,
    "pim": 103,
    "ipcomp": 108,
    "vrrp": 112,
    "l2tp": 115,
    "sctp": 132,
    "udplite": 136,
    "mpls-in-ip": 137,
    "dccp": 33,
}
CONNTRACK_HELPERS = (
    "amanda",
    "ftp",
    "irc",
    "netbios-ns",
    "pptp",
    "sane",
    "sip",
    "snmp",
    "tftp",
)


@dataclass(frozen=True)
class PortRange:
    """A port or a range of ports of one protocol, as in `22/tcp` or `60000-61000/udp`."""

    first: int
    last: int
    protocol: str

    def __str__(self) -> str:
        ports = str(self.first) if self.first == self.last else f"{self.first}-{self.last}"
        return f"{ports}/{self.protocol}"

    @property
    def iptables(self) -> str:
        """The port as iptables writes it: `22` or `1714:1764`."""
        return str(self.first) if self.first == self.last else f"{self.first}:{self.last}"


@dataclass(frozen=True)
class Service:
    name: str
    description: str = ""
    ports: tuple[PortRange, ...] = ()
    protocols: tuple[str, ...] = ()
    source_ports: tuple[PortRange, ...] = ()
    destination: tuple[tuple[str, str], ...] = ()  # (family, address) pairs
    helpers: tuple[str, ...] = ()

    def destination_for(self, family: str) -> str | None:
        return dict(self.destination).get(family)

    def applies_to(self, family: str) -> bool:
        """A service restricted to destinations of the other family only does not apply."""
        return not self.destination or self.destination_for(family) is not None


@dataclass(frozen=True)
class ForwardPort:
    port: PortRange
    to_port: int | None = None
    to_addr: str | None = None


@dataclass(frozen=True)
class Zone:
    name: str
    description: str = ""
    target: str = "default"
    services: tuple[str, ...] = ()
    ports: tuple[PortRange, ...] = ()
    protocols: tuple[str, ...] = ()
    icmp_blocks: tuple[str, ...] = ()
    masquerade: bool = False
    forward_ports: tuple[ForwardPort, ...] = ()
    log_denied: bool = False
    source: str = ""  # the file it came from, for messages


@dataclass(frozen=True)
class ConnectionsMap:
    default_zone: str = "public"
    wired_zone: str = ""
    wireless_zone: str = ""
    connections: tuple[tuple[str, str], ...] = ()  # (uuid or name, zone)
    exempt_interfaces: tuple[str, ...] = ("lo",)

    def zone_for(self, key: str) -> str | None:
        return dict(self.connections).get(key)


@dataclass(frozen=True)
class Config:
    zones: dict[str, Zone] = field(default_factory=dict)
    services: dict[str, Service] = field(default_factory=dict)
    connections_map: ConnectionsMap = field(default_factory=ConnectionsMap)


@dataclass
class LoadResult:
    """A usable Config plus everything that went wrong while loading it."""

    config: Config
    problems: list[Problem] = field(default_factory=list)
    broken_zones: dict[str, list[Problem]] = field(default_factory=dict)
    map_broken: Problem | None = None  # set when the admin's map was replaced by the shipped one
