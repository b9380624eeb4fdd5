"""One run's report, shown the same way by every door (the command line, the dispatcher
hook, the D-Bus service): each change on a line of its own, each warning as `PREFIX:
warning`, both made printable (a connection named with a newline cannot forge a line), and
exit status 1 when the run was degraded."""

from __future__ import annotations

import sys

from ..text import printable


class RunReport:
    """What one Engine did (its changes, from log.Change or a door's own lines) and what
    went wrong (warnings; `degraded`: the result is not what was asked for)."""

    __slots__ = ("changes", "degraded", "warnings")

    def __init__(self, changes: list, warnings: list[str], degraded: bool):
        self.changes, self.warnings, self.degraded = changes, warnings, degraded

    def change_lines(self) -> list[str]:
        return [printable(str(change)) for change in self.changes]

    def warning_lines(self) -> list[str]:
        return [printable(warning) for warning in self.warnings]

    def show(self, prefix: str, changes_to=None, prefix_changes: bool = False) -> None:
        """Warnings on stderr after `prefix`; the changes on `changes_to` (None: not shown,
        as by the hook, whose changes syslog has already), after `prefix` too if asked."""
        if changes_to is not None:
            lead = f"{prefix}: " if prefix_changes else ""
            for line in self.change_lines():
                print(f"{lead}{line}", file=changes_to, flush=True)
        for line in self.warning_lines():
            print(f"{prefix}: {line}", file=sys.stderr, flush=True)

    def exit_status(self) -> int:
        """0 when the run did what was asked, 1 when it is degraded."""
        return 1 if self.degraded else 0
