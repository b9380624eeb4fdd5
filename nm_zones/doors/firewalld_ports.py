"""firewalld's checks of a port and protocol, shared by the runtime zone calls
(doors/firewalld_zone.py) and the permanent ones (doors/firewalld_permanent.py)."""

from __future__ import annotations

from ..errors import UsageError
from .allow import check_what
from .busapi import FirewallError

PROTOCOLS = ("tcp", "udp", "sctp", "dccp")


def port_text(port: str, protocol: str) -> str:
    return f"{port}/{protocol}"


def check_port(port: str, protocol: str) -> str:
    """The allowance's name for PORT/PROTOCOL, or firewalld's error for either."""
    if protocol not in PROTOCOLS:
        raise FirewallError(
            "INVALID_PROTOCOL", f"'{protocol}' not in {{'tcp'|'udp'|'sctp'|'dccp'}}"
        )
    try:
        return check_what(port_text(port, protocol), None)
    except UsageError:
        raise FirewallError("INVALID_PORT", port) from None
