"""Which network a connection reached: what NetworkManager tells the dispatcher hook, plus
the gateway's MAC address resolved on the wire (neighbours.py).

A network is identified by its IPv4 default gateway's MAC address (else its IPv6 default
router's), with the DHCP server identifier and the DHCP domain name when there are any, and
for Wi-Fi the SSID and the access point's BSSID. Without a gateway MAC a connection is
unidentified: nothing that is cheap for anyone to copy (a domain name, an SSID) is enough on
its own. A plain class: events import this module.
"""

from __future__ import annotations

import os

from ..text import split_terse

FIELDS = ("gateway-mac", "dhcp-server", "domain", "ssid", "bssid")
STORE_FILE = "networks.yaml"


class Identity:
    """What was seen of one network; every field is text, empty when unknown."""

    __slots__ = ("bssid", "dhcp_server", "domain", "gateway", "gateway_mac", "ssid")

    def __init__(
        self,
        gateway_mac: str = "",
        dhcp_server: str = "",
        domain: str = "",
        ssid: str = "",
        bssid: str = "",
        gateway: str = "",
    ):
        self.gateway_mac, self.dhcp_server, self.domain = gateway_mac.lower(), dhcp_server, domain
        self.ssid, self.bssid, self.gateway = ssid, bssid.lower(), gateway

    @property
    def identified(self) -> bool:
        return bool(self.gateway_mac)

    def fields(self) -> dict[str, str]:
        """The identity by the store's keys (gateway-mac, dhcp-server, ...)."""
        return {
            "gateway-mac": self.gateway_mac,
            "dhcp-server": self.dhcp_server,
            "domain": self.domain,
            "ssid": self.ssid,
            "bssid": self.bssid,
        }

    def __eq__(self, other) -> bool:
        return isinstance(other, Identity) and self.fields() == other.fields()

    def __repr__(self) -> str:
        return f"Identity({self.fields()!r})"


def lease_facts(env: dict) -> tuple[str, str, str]:
    """(gateway, DHCP server identifier, domain) from a dispatcher environment: IPv4 first,
    else IPv6 (its default router, the DHCPv6 server DUID, the first search domain)."""
    gateway = env.get("IP4_GATEWAY", "").strip()
    server = env.get("DHCP4_DHCP_SERVER_IDENTIFIER", "").strip()
    domain = env.get("DHCP4_DOMAIN_NAME", "").strip()
    if not gateway:
        gateway = env.get("IP6_GATEWAY", "").strip()
    if not server:
        server = env.get("DHCP6_DHCP6_SERVER_ID", "").strip()
    if not domain:
        search = env.get("DHCP6_DHCP6_DOMAIN_SEARCH", "").split()
        domain = search[0] if search else ""
    if gateway in ("0.0.0.0", "::"):
        gateway = ""
    return gateway, server, domain.rstrip(".").lower()


def network_inputs(paths, env: dict) -> tuple:
    """What of an event may change the network its connection is on, for the quick path
    (quick.py): the lease facts and the identity of the known-networks file."""
    try:
        info = os.stat(os.path.join(paths.data, STORE_FILE))
        store = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_mode, info.st_uid)
    except OSError:
        store = None
    return (lease_facts(env), store)


def has_lease_facts(env: dict) -> bool:
    """Whether the event carries anything to identify a network by (pre-up, down and, in
    NetworkManager 1.42, dhcp4-change do not)."""
    return any(lease_facts(env))


def from_event(interface: str, env: dict, wireless: bool = False) -> Identity:
    """The identity of the network `interface` reached, from the event and the wire."""
    gateway, server, domain = lease_facts(env)
    mac = ""
    if gateway:
        from .neighbours import gateway_mac

        mac = gateway_mac(interface, gateway)
    ssid = bssid = ""
    if wireless:
        ssid, bssid = access_point(interface)
    return Identity(mac, server, domain, ssid, bssid, gateway)


WIFI_FIELDS = "IN-USE,SSID,BSSID"


def access_point(interface: str) -> tuple[str, str]:
    """(SSID, BSSID) of the access point `interface` is associated with, from nmcli."""
    import subprocess

    try:
        result = subprocess.run(
            [
                "nmcli",
                "-t",
                "-f",
                WIFI_FIELDS,
                "device",
                "wifi",
                "list",
                "ifname",
                interface,
                "--rescan",
                "no",
            ],
            capture_output=True,
            text=True,
            timeout=5,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return "", ""
    return parse_wifi_list(result.stdout) if result.returncode == 0 else ("", "")


def parse_wifi_list(text: str) -> tuple[str, str]:
    """(SSID, BSSID) of the line marked in use in `nmcli -t -f IN-USE,SSID,BSSID device wifi
    list` output (terse: ':' separates fields, '\\:' is a colon inside one)."""
    for line in text.splitlines():
        fields = split_terse(line)
        if len(fields) == 3 and fields[0].strip() == "*":
            return fields[1], fields[2].lower()
    return "", ""


def from_access_point_properties(properties: dict) -> tuple[str, str]:
    """(SSID, BSSID) from org.freedesktop.NetworkManager.AccessPoint's properties as read
    over D-Bus: `Ssid` is bytes (ay), `HwAddress` text."""
    raw = properties.get("Ssid", b"")
    ssid = bytes(raw).decode("utf-8", "replace") if raw else ""
    return ssid, str(properties.get("HwAddress", "")).lower()
