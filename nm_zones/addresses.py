"""Source addresses as zones bind them: light enough for the event path, which must not
import the config model (dataclasses, re) to place a catch-all's sources."""

from __future__ import annotations


def canonical_source(text: str) -> str:
    """A source address or network as iptables prints it (`10.0.0.5` -> `10.0.0.5/32`, host
    bits cleared as firewalld does); ValueError saying why for anything else (MAC addresses
    and ipsets, which firewalld also takes, are not supported)."""
    import ipaddress  # only for zones and calls that name sources

    text = str(text).strip()
    if not text or any(c.isspace() or c in "!,\"'" for c in text):
        raise ValueError(f"{text!r} is not an IPv4 or IPv6 address or network")
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        raise ValueError(f"{text!r} is not an IPv4 or IPv6 address or network") from None


def source_family(source: str) -> str:
    """`ipv6` for a canonical IPv6 source, else `ipv4`."""
    return "ipv6" if ":" in source else "ipv4"
