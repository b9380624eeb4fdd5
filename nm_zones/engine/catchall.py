"""What is not one interface's: the hooks and the catch-all (the default zone's rules for
interfaces nobody bound, with the sources bound at runtime), panic mode, and `disable`.
Each is journaled like a binding: panic mode's flag is written before its commits and
removed after them, so a run cut anywhere in `panic on` or `panic off` ends in panic mode;
`disable` writes its flag first (doors), so a run that finds it finishes the disable."""

from __future__ import annotations

import os
import time

from ..backends import panic_recorded
from ..errors import KernelError, UsageError
from ..log import Change
from ..state import State, Status
from .basics import FILTER_TABLES, PANIC_WORD, ms


class CatchAll:
    """The part of the Engine for the whole firewall rather than one interface."""

    def ensure_catchall(self, state: State) -> None:
        """Hooks plus default-zone rules for unclaimed interfaces; committed only on change."""
        if self._catchall_checked:  # once per run: a reload applies many interfaces
            return
        self._catchall_checked = True
        catchall = self.compiled.catchall
        if "error" in catchall:
            raise UsageError(catchall["error"])
        degraded = catchall["degraded"]
        if degraded:
            if state.catchall_digest:
                self.degrade(
                    f"unclaimed interfaces: {degraded}; keeping the catch-all of zone "
                    f"{state.catchall_zone!r}"
                )
                return
            self.degrade(f"unclaimed interfaces: {degraded}")
        digest = self.compiled.catchall_digest(state.sources)
        if state.catchall_digest == digest:
            return
        started = time.monotonic()
        old = state.catchall_zone

        def applied() -> None:
            self._keep_entries()
            state.catchall_zone, state.catchall_digest = catchall["zone"], digest

        def apply() -> None:
            self.backend.apply(self.compiled.catchall_plan(state.sources))

        self.commit(state, self.backend.view_keys(FILTER_TABLES), apply, applied)
        why = "default-zone for unclaimed interfaces"
        self._changed(Change("*", old, catchall["zone"], why, "", ms(started), degraded))

    def set_sources(self, state: State, sources: dict[str, str]) -> None:
        """Sources bound at runtime (doors/firewalld_sources.py), committed with the
        catch-all; when the kernel refuses the commit, the state keeps the old ones (the
        next run then rebuilds the table as it was)."""
        old, state.sources = state.sources, sources
        self._catchall_checked = False
        try:
            self.ensure_catchall(state)
        except (KernelError, OSError):
            state.sources = old
            self.save(state)
            raise

    # -- panic mode ----------------------------------------------------------------------

    def set_panic(self, state: State, on: bool, reason: str) -> Change | None:
        """Panic mode on or off, in one commit per table (one nftables transaction); None
        when it already is so. Journaled: the tables are marked unknown first, the flag is
        written before the commit and removed after it, so a run cut anywhere is finished by
        the next one in panic mode (reconcile rebuilds the unknown tables with it)."""
        if on == self.panic and on == panic_recorded(state.kernel):
            return None
        started = time.monotonic()

        def switch() -> None:
            if on:
                from ..files import write_atomically

                text = b"panic mode is on; `nm-zones panic off` ends it\n"
                write_atomically(self.paths.panic_flag, text, 0o600)
            self.backend.panic(on)
            if not on:
                try:  # noqa: SIM105 - contextlib would cost every event 5 ms of imports
                    os.unlink(self.paths.panic_flag)
                except FileNotFoundError:
                    pass

        self.commit(state, self.backend.panic_keys(), switch)
        old, new = ("", PANIC_WORD) if on else (PANIC_WORD, "")
        return self._changed(Change("*", old, new, reason, "", ms(started)))

    def match_panic(self, state: State) -> None:
        """The kernel made to hold panic mode exactly while its flag is there: an
        interrupted `panic on` is finished, a flag removed by hand lifts it."""
        if self.panic == panic_recorded(state.kernel):
            return
        why = "finishing an interrupted panic on" if self.panic else "panic flag gone"
        try:
            self.set_panic(state, self.panic, why)
        except KernelError as error:
            self.failed(PANIC_WORD, state, error)

    # -- disable -------------------------------------------------------------------------

    def disable_all(self, state: State, reason: str = "nm-zones disabled") -> None:
        """Every rule of nm-zones out of the kernel (the disabled flag, written first, is the
        journal: a run that finds it finishes this); bindings kept, marked disabled."""

        def remove() -> None:
            self.backend.remove_everything()
            self._remove_from_other_backends(state)

        def disabled() -> None:
            for name, binding in sorted(state.interfaces.items()):
                if binding.status != Status.DISABLED:
                    change = Change(name, binding.zone, "", reason, binding.connection_id)
                    self._changed(change.bound_with(binding))
                binding.status, binding.digest = Status.DISABLED, ""
            if state.catchall_zone:
                self._changed(Change("*", state.catchall_zone, "", reason))
            state.catchall_zone = state.catchall_digest = ""
            state.kernel.clear()  # no view is kept: nothing of nm-zones is in the kernel
            self.backend.views.clear()

        self.commit(state, None, remove, disabled)  # the disabled flag is the journal entry

    def _remove_from_other_backends(self, state: State) -> None:
        """A backend the state says holds rules, other than the current one (a move that was
        interrupted): its rules go too."""
        from ..backends import backend_of_key, open_backend

        for name in sorted({backend_of_key(key) for key in state.kernel} - {self.backend.name}):
            open_backend(name, self.paths.state).remove_everything()

    def finish_disable(self, state: State) -> None:
        """Called when the flag is set: complete a disable that was interrupted."""
        if (
            state.catchall_zone
            or state.kernel
            or any(b.status != Status.DISABLED for b in state.interfaces.values())
        ):
            self.disable_all(state)
