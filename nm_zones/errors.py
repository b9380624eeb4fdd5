"""Errors that reach the user: each one says where, what, and what would be valid.

No dataclasses here: every event imports this module, and building a dataclass costs more
than the rest of an event's Python code (docs/performance.md).
"""

from __future__ import annotations


class ConfigError(Exception):
    """The configuration cannot be used; `problems` lists every reason found in one pass
    (model.Problem values, each printed as `FILE:LINE: KEY: message`)."""

    def __init__(self, problems: list):
        self.problems = sorted(set(problems), key=lambda p: (p.file, p.line, p.key, p.message))
        super().__init__("\n".join(str(p) for p in self.problems))


class UsageError(Exception):
    """Bad input on the command line (exit status 2)."""


def unknown_zone(name: str) -> UsageError:
    return UsageError(f"unknown zone {name!r} (see: nm-zones zones)")


class KernelError(Exception):
    """Netfilter refused a change, or the lock could not be had (exit status 1)."""
