"""The service's log lines (stderr, which the journal keeps under systemd, and syslog), in
a module of their own so that the service's parts log without importing the service."""

from __future__ import annotations

import sys

from ..log import to_syslog
from ..text import shorten

LOG_LIMIT = 1024  # characters of one log line


def log(message: str, warning: bool = False) -> None:
    """Every line the service logs; never more than LOG_LIMIT characters."""
    message = shorten(message, LOG_LIMIT)
    print(f"nm-zones serve: {message}", file=sys.stderr, flush=True)
    to_syslog(f"serve: {message}", warning=warning)
