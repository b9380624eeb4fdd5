"""Change records to syslog (identifier nm-zones), when the system has a syslog socket."""

from __future__ import annotations

import os
from dataclasses import dataclass

SYSLOG_SOCKET = "/dev/log"


@dataclass(frozen=True)
class Change:
    """One change nm-zones made: printed by commands, sent to syslog."""

    interface: str
    old_zone: str
    new_zone: str
    reason: str
    connection: str = ""
    milliseconds: float = 0.0
    degraded: str = ""

    def __str__(self) -> str:
        old = self.old_zone or "-"
        new = self.new_zone or "-"
        text = f"{self.interface}: {old} -> {new} ({self.reason})"
        if self.connection:
            text += f" connection {self.connection!r}"
        if self.degraded:
            text += f"; DEGRADED: {self.degraded}"
        return text


def to_syslog(message: str, warning: bool = False) -> None:
    if not os.path.exists(SYSLOG_SOCKET):
        return
    import syslog

    syslog.openlog("nm-zones", syslog.LOG_PID, syslog.LOG_DAEMON)
    syslog.syslog(syslog.LOG_WARNING if warning else syslog.LOG_INFO, message)


def record(change: Change) -> None:
    to_syslog(f"{change} in {change.milliseconds:.1f} ms", warning=bool(change.degraded))
