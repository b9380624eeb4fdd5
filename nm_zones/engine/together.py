"""Zone-wide changes in one transaction: `reload` with an edited zone, `allow`/`revoke
--zone`, a new default zone, expired allowances. The interfaces they reach are bound as
one by one (each journaled `applying`, with its own rules), but their commits wait and go
into the kernel together: one nftables transaction, or one commit per iptables table and
family, whatever the number of interfaces. A run killed after that commit leaves every one
of them `applying`, and the next run finishes them as it finishes one (recovery.py)."""

from __future__ import annotations

from ..errors import KernelError
from ..log import Change
from ..state import State

TYPE_CHECKING = False  # collections.abc would cost every event the collections package
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable


class Pending:
    """One interface's commit, waiting for the others of its zone-wide change."""

    __slots__ = ("applied", "binding", "change", "committing", "interface", "plan", "previous")

    def __init__(self, interface: str, plan, previous, committing, applied, binding):
        self.interface, self.plan, self.previous = interface, plan, previous
        self.committing, self.applied, self.binding = committing, applied, binding
        self.change: Change | None = None  # set by apply_interface once it is made


class Together:
    """The part of the Engine that commits several interfaces as one."""

    _pending: list[Pending] | None = None  # while `together` runs: the commits waiting
    _deferred: list[Change] | None = None  # and the changes not yet in syslog

    def together(self, state: State, steps: Iterable[Callable[[], object]]) -> set[str]:
        """Run `steps` (each binds one interface: apply_interface, reapply, or a step that
        removes one, which commits at once), then commit the bindings they made in one
        transaction. Returns the interfaces whose commit failed (said and marked, as
        `failed` does); the others are committed even when a step raised. Called inside
        another `together`, its steps join that one's transaction."""
        if self._pending is not None:
            for step in steps:
                step()
            return set()
        self._pending, self._deferred = [], []
        try:
            for step in steps:
                step()
        finally:
            pending, self._pending = self._pending, None
            deferred, self._deferred = self._deferred, None
            failed = self._commit_pending(state, pending)
            failed_changes = [p.change for p in pending if p.interface in failed]
            for change in deferred:
                if not any(change is gone for gone in failed_changes):
                    self._changed_said(change)  # in syslog once it is in the kernel
        return failed

    def _changed(self, change: Change) -> Change:
        """Inside `together`, a change goes to syslog once the joint commit is made."""
        if self._deferred is None:
            return super()._changed(change)
        self.changes.append(change)
        self._deferred.append(change)
        return change

    def _wait_or_commit(self, state: State, pending: Pending) -> Pending | None:
        """Inside `together`: keep `pending` for the one commit; else commit it now."""
        if self._pending is not None:
            self._pending.append(pending)
            return pending
        apply = lambda: self.backend.apply(pending.plan, pending.previous)  # noqa: E731
        self.commit(state, pending.committing, apply, pending.applied)
        return None

    def _commit_pending(self, state: State, pending: list[Pending]) -> set[str]:
        if not pending:
            return set()
        if len(pending) > 1:
            committing = set().union(*(p.committing for p in pending))
            items = [(p.plan, p.previous) for p in pending]

            def applied_all() -> None:
                for one in pending:
                    one.applied()

            committed = []

            def apply_all() -> None:
                self.backend.apply_many(items)
                committed.append(True)

            try:
                self.commit(state, committing, apply_all, applied_all)
                self._flows_said(pending)
                return set()
            except (KernelError, OSError):
                if committed:  # in the kernel; the state's save failed: the journal repairs
                    raise
                # one at a time: an interface the kernel refuses holds back no other
        failed = set()
        for one in pending:
            try:
                apply = lambda one=one: self.backend.apply(one.plan, one.previous)  # noqa: E731
                self.commit(state, one.committing, apply, one.applied)
            except (KernelError, OSError) as error:
                self.failed(one.interface, state, error)
                failed.add(one.interface)
                if one.change in self.changes:
                    self.changes.remove(one.change)  # not made: no line claims it was
        self._flows_said(p for p in pending if p.interface not in failed)
        return failed

    @staticmethod
    def _flows_said(pending: Iterable[Pending]) -> None:
        """The flows each commit ended, on its change (known only after the commit)."""
        for one in pending:
            if one.change is not None:
                one.change.flows_ended = one.binding.flows_ended
