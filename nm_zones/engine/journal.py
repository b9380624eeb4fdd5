"""The journal: how the engine changes the kernel so that a run killed anywhere leaves a
state the next run can finish or repair from.

Every kernel change goes through `Journal.commit`: first the state is saved with the tables
about to change marked unknown (the journal entry), then the backend commits, then what the
kernel now holds is recorded and the state saved again. A table marked unknown is rebuilt by
the next run quietly (recovery.py), one whose recorded view differs loudly: another program
changed it.
"""

from __future__ import annotations

from ..errors import KernelError, describe
from ..log import Change, record, to_syslog
from ..state import State
from .basics import ordered
from .report import RunReport

TYPE_CHECKING = False
if TYPE_CHECKING:  # collections.abc, at run time, costs every event 2-3 ms of imports
    from collections.abc import Callable


class Journal:
    """The part of the Engine that writes the state and says what happened."""

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        to_syslog(message, warning=True)

    def degrade(self, message: str) -> None:
        """Something of this run did not go as asked: said, and the run ends degraded
        (exit 1) however the rest goes."""
        self.degraded = True
        self.warn(message)

    def report(self) -> RunReport:
        """What this run did and what went wrong, for a door to show (report.py)."""
        return RunReport(self.changes, self.warnings, self.degraded)

    def save(self, state: State, committing=()) -> None:
        """The state, with the view of every table this process committed; the tables it is
        about to commit are journaled as unknown (None), so that a run killed between a
        commit and the next save is not taken for another program's change."""
        if self._backend is not None:
            state.kernel.update(self._backend.views)
            self._backend.views.clear()
        for key in committing:
            if key in state.kernel:
                state.kernel[key] = None
        for key in self.unknown_views:  # a later commit's view does not vouch for the rest
            state.kernel[key] = None
        self.state_dir.save(state)

    def commit(
        self,
        state: State,
        committing,
        change: Callable[[], object],
        then: Callable[[], object] | None = None,
    ) -> None:
        """The one way into the kernel: the journal entry (the state saved with the view
        keys `committing` marked unknown, and whatever the caller marked in `state`, such
        as a binding `applying`), then `change()` (the backend's commit), then `then()`
        (the state updated to what the kernel now holds), then the state saved with the
        views the backend read back. `committing` None: the journal entry is already on
        disk or not needed, as the caller says. A table another program changed between
        this run's check of the kernel and the commit is rebuilt at once (its view was
        saved as unknown, so a run killed before that rebuilds it too)."""
        if committing is not None:
            self.save(state, committing=committing)
        change()
        if then is not None:
            then()
        self.save(state)
        for key in ordered(self._backend.changed_meanwhile() if self._backend else ()):
            try:
                self._rebuild(state, key, changed=True)
            except KernelError as error:  # as reconcile's: said, and the next run tries
                self.unknown_views.add(key)
                self.failed(" ".join(key), state, error)

    def _keep_entries(self) -> None:
        """Keep what the backend built in this run for the next ones (iptables' entries)."""
        self.backend.keep_entries(self.compiled)

    def _changed(self, change: Change) -> Change:
        self.changes.append(change)
        return self._changed_said(change)

    def _changed_said(self, change: Change) -> Change:
        """The change in syslog (log.record), once it is in the kernel."""
        record(change)
        return change

    def failed(self, interface: str, state: State, error: Exception) -> None:
        """An interface whose commit failed: said once, marked degraded, others go on."""
        message = f"{interface}: {describe(error)}"
        self.degrade(message)
        binding = state.interfaces.get(interface)
        if binding is not None and binding.degraded != message:
            binding.degraded = message
            try:  # noqa: SIM105 - contextlib would cost every event 5 ms of imports
                self.save(state)
            except OSError:
                pass
