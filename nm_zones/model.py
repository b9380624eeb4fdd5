"""The configuration model: zones, services and the connections map, as immutable values.

Everything here is plain data so that it can be compared, hashed, cached and compiled without
touching the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PORT_PROTOCOLS = ("tcp", "udp", "sctp", "dccp")
TARGETS = ("default", "accept", "reject", "drop")
FAMILIES = ("ipv4", "ipv6")


@dataclass(frozen=True, order=True)
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

    def zone(self, name: str) -> Zone:
        return self.zones[name]
