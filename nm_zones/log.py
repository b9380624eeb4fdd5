"""Change records to syslog (identifier nm-zones), when the system has a syslog socket."""

from __future__ import annotations

import os

SYSLOG_SOCKET = "/dev/log"
FACILITY_DAEMON, SEVERITY_WARNING, SEVERITY_INFO = 3, 4, 6


class Change:
    """One change nm-zones made: printed by commands, sent to syslog."""

    __slots__ = (
        "connection",
        "connection_type",
        "degraded",
        "flows_ended",
        "interface",
        "milliseconds",
        "new_zone",
        "old_zone",
        "reason",
        "uuid",
    )

    def __init__(
        self,
        interface: str,
        old_zone: str,
        new_zone: str,
        reason: str,
        connection: str = "",
        milliseconds: float = 0.0,
        degraded: str = "",
        flows_ended: int = 0,
    ):
        self.interface, self.old_zone, self.new_zone = interface, old_zone, new_zone
        self.reason, self.connection = reason, connection
        self.milliseconds, self.degraded = milliseconds, degraded
        self.flows_ended = flows_ended  # open flows the new zone forbids, ended (flows.py)
        # the profile an interface was bound with (the service's ZoneChanged signal says it)
        self.uuid = self.connection_type = ""

    def bound_with(self, binding) -> Change:
        """The profile of the binding (state.Binding) the change was made to, for the
        service's ZoneChanged; the change itself, for chaining."""
        self.uuid, self.connection_type = binding.connection_uuid, binding.connection_type
        return self

    def __str__(self) -> str:
        old = self.old_zone or "-"
        new = self.new_zone or "-"
        text = f"{self.interface}: {old} -> {new} ({self.reason})"
        if self.connection:
            text += f" connection {self.connection!r}"
        if self.flows_ended:
            text += f"; ended {self.flows_ended} open flow(s) the zone forbids"
        if self.degraded:
            text += f"; DEGRADED: {self.degraded}"
        return text


def to_syslog(message: str, warning: bool = False) -> None:
    """One datagram to the syslog socket, as `nm-zones[PID]: message` (facility daemon).

    Written directly rather than through syslog(3), whose connection is process-wide state
    that an earlier library in the process may already have opened elsewhere.
    """
    if not os.path.exists(SYSLOG_SOCKET):
        return
    from _socket import AF_UNIX, SOCK_DGRAM, socket  # the C core: no enum, no selectors

    priority = (FACILITY_DAEMON << 3) | (SEVERITY_WARNING if warning else SEVERITY_INFO)
    record = f"<{priority}>nm-zones[{os.getpid()}]: {message}".encode("utf-8", "replace")
    try:
        sock = socket(AF_UNIX, SOCK_DGRAM)
        try:
            sock.sendto(record[:8192], SYSLOG_SOCKET)
        finally:
            sock.close()
    except OSError:
        pass  # logging must never break a firewall change


def record(change: Change) -> None:
    to_syslog(f"{change} in {change.milliseconds:.1f} ms", warning=bool(change.degraded))
