"""The configuration model: zones, services and the connections map, as immutable values.

Everything here is plain data so that it can be compared, hashed, cached and compiled without
touching the kernel.
"""

from __future__ import annotations

from ..lazy import import_deferring
from ..protocols import FAMILIES, IP_PROTOCOLS

# dataclasses uses inspect (10 ms of imports) only for classes without a docstring: every
# class here has one (lazy.py)
dataclasses = import_deferring("dataclasses", ("inspect",))
dataclass, field = dataclasses.dataclass, dataclasses.field

__all__ = ["FAMILIES", "IP_PROTOCOLS", "Problem"]

PORT_PROTOCOLS = ("tcp", "udp", "sctp", "dccp")
TARGETS = ("default", "accept", "reject", "drop")
# zones a profile that non-admins can edit may name (settings key user-profile-zones)
USER_PROFILE_ZONES = ("public", "work", "dmz", "external", "block", "drop")
# which profiles count as editable by non-admins: those with connection.permissions, or all
USER_EDITABLE_PROFILES = ("owned", "all")

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
class Problem:
    """One thing wrong in one file, printed as `FILE:LINE: KEY: message`."""

    file: str
    line: int
    key: str
    message: str

    def __str__(self) -> str:
        key = f" {self.key}:" if self.key else ""
        return f"{self.file}:{self.line}:{key} {self.message}"


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
    """A named set of ports and protocols a zone can open (services.d/NAME.yaml)."""

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
    """Incoming traffic to `port` redirected to another port, or another host (DNAT)."""

    port: PortRange
    to_port: int | None = None
    to_addr: str | None = None


@dataclass(frozen=True)
class Zone:
    """A trust level: what an interface in it accepts (zones.d/NAME.yaml)."""

    name: str
    description: str = ""
    target: str = "default"
    # forwarded traffic that entered through the interface and nothing accepted: accept,
    # reject or drop; empty: as `target` says
    forward_target: str = ""
    services: tuple[str, ...] = ()
    ports: tuple[PortRange, ...] = ()
    protocols: tuple[str, ...] = ()
    icmp_blocks: tuple[str, ...] = ()
    masquerade: bool = False
    forward_ports: tuple[ForwardPort, ...] = ()
    log_denied: bool = False
    # programs whose every listening port is open (nftables only: ruleset/applications.py)
    applications: tuple[str, ...] = ()
    source: str = ""  # the file it came from, for messages
    # addresses and networks (canonical: `10.0.0.5/32`, `fd00::/64`) whose packets get this
    # zone whatever interface they enter by, matched before any interface's zone
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConnectionsMap:
    """Which zone a connection gets when NetworkManager names none (connections-map.yaml)."""

    default_zone: str = "public"
    wired_zone: str = ""
    wireless_zone: str = ""
    connections: tuple[tuple[str, str], ...] = ()  # (uuid or name, zone)
    exempt_interfaces: tuple[str, ...] = ("lo",)

    def zone_for(self, key: str) -> str | None:
        return dict(self.connections).get(key)


@dataclass(frozen=True)
class Settings:
    """How nm-zones itself behaves (nm-zones.yaml): one field per key, each with its default.

    A key the file leaves out keeps its default, so a new key never changes what an old
    file means."""

    end_forbidden_flows: bool = True  # a switch to a stricter zone ends the flows it forbids
    backend: str = "auto"  # iptables, nftables, or auto (iptables where legacy x_tables exist)
    # the zones a profile a non-admin can edit may name; others give way (resolve.py)
    user_profile_zones: tuple[str, ...] = USER_PROFILE_ZONES
    user_editable_profiles: str = "owned"  # owned (connection.permissions set) or all
    identify_networks: str = "wired"  # none, wired or all: whose networks are told apart
    # whose refused listeners the desktop asks about (doors/listeners.py): session, all, none
    ask_about_listeners: str = "session"

    def plain(self) -> dict:
        """The settings by their keys, as plain values for the compiled config (an event
        reads them without the model)."""
        return {
            "end-forbidden-flows": self.end_forbidden_flows,
            "backend": self.backend,
            "user-profile-zones": list(self.user_profile_zones),
            "user-editable-profiles": self.user_editable_profiles,
            "identify-networks": self.identify_networks,
            "ask-about-listeners": self.ask_about_listeners,
        }


@dataclass(frozen=True)
class Config:
    """Everything the compiler needs: zones, the services they use, the map, the settings."""

    zones: dict[str, Zone] = field(default_factory=dict)
    services: dict[str, Service] = field(default_factory=dict)
    connections_map: ConnectionsMap = field(default_factory=ConnectionsMap)
    settings: Settings = field(default_factory=Settings)


@dataclass
class LoadResult:
    """A usable Config plus everything that went wrong while loading it."""

    config: Config
    problems: list[Problem] = field(default_factory=list)
    broken_zones: dict[str, list[Problem]] = field(default_factory=dict)
    map_broken: Problem | None = None  # set when the admin's map was replaced by the shipped one
    # broken zone -> the sources its file still names readably (bound to its stand-in)
    broken_sources: dict[str, tuple[str, ...]] = field(default_factory=dict)
