"""The Engine: its inputs (the compiled config, the backend), and what every run does first
under the state lock (begin, prepare). Its other parts, one module each: binding.py (one
interface), recovery.py (the kernel made to hold what the state says), catchall.py (hooks and
the catch-all, panic mode, disable), reload.py (reload, expiry of allowances), together.py
(zone-wide changes in one transaction), journal.py (the one way into the kernel)."""

from __future__ import annotations

from ..errors import KernelError, describe
from ..log import Change
from ..paths import Paths, config_fingerprint
from ..resolve import Connection, decide_zone
from ..ruleset.cache import CompiledConfig
from ..ruleset.plan import ZonePlan
from ..state import State, StateDir
from .binding import Bindings
from .catchall import CatchAll
from .journal import Journal
from .recovery import Recovery
from .reload import Reload
from .together import Together

TYPE_CHECKING = False
if TYPE_CHECKING:  # the service's alone: an event looks every interface up
    from ..linkwatch import LinkWatch


class Engine(Bindings, Together, Recovery, CatchAll, Reload, Journal):
    def __init__(
        self,
        paths: Paths | None = None,
        use_cache: bool = True,
        compiled: CompiledConfig | None = None,
        backend=None,
        links: LinkWatch | None = None,
    ):
        """`compiled` and `backend` let a resident process (the D-Bus service) share one
        compiled config and one opened backend (its library loaded once) between the
        engines it makes; `links`, its watch on the interfaces, spares it looking up every
        bound interface on every call."""
        self.paths = paths or Paths.from_environment()
        self.state_dir = StateDir(self.paths.state)
        self.use_cache = use_cache
        self._compiled: CompiledConfig | None = compiled
        self._backend = backend
        self.links = links
        self._catchall_checked = False
        self.changes: list[Change] = []
        self.warnings: list[str] = []
        # view keys this run could not rebuild: unknown in the state whatever commits later
        self.unknown_views: set[tuple[str, str]] = set()
        self.degraded = False
        # interface -> why it did not get its zone as configured (a stand-in or its old rules)
        self.unfulfilled: dict[str, str] = {}

    # -- inputs --------------------------------------------------------------------------

    @property
    def compiled(self) -> CompiledConfig:
        """The config as the engine uses it (ruleset/cache.py), loaded on first use."""
        if self._compiled is None:
            from ..ruleset.cache import load

            self._compiled = load(self.paths, self.use_cache)
        return self._compiled

    @property
    def backend(self):
        """The Backend (backends/base.py) the settings choose; one that cannot be opened
        gives way to the other, said once: an interface is never left unfiltered for want of
        a backend."""
        if self._backend is None:
            self._backend = self._open_backend()
        return self._backend

    def _open_backend(self):
        """The chosen backend; when it cannot be opened, the other one, unless the chosen one
        already holds rules: then they stay in the kernel and its error is said as it is
        (a python-iptables broken by an upgrade moves nothing anywhere)."""
        from ..backends import backend_of_key, choose, open_backend

        failures = []
        order = choose(self.compiled.settings.get("backend", "auto"))
        for name in order:
            try:
                backend = open_backend(name, self.paths.state)
            except (KernelError, OSError, ImportError) as error:
                if name == order[0]:
                    held = {backend_of_key(key) for key in self.state_dir.load().kernel}
                    if name in held:
                        raise
                failures.append(f"{name}: {describe(error)}")
                continue
            if failures:
                self.warn(f"backend {name} used instead ({'; '.join(failures)})")
            return backend
        raise KernelError("no backend can be used (" + "; ".join(failures) + ")")

    def config_changed(self) -> None:
        """nm-zones itself changed a config file (allow --permanent): read it afresh."""
        self._compiled, self.use_cache, self._catchall_checked = None, False, False

    def known_zones(self) -> set[str]:
        """Zones that exist, loadable or not (a broken zone still exists: it is not renamed)."""
        return self.compiled.known_zones()

    def usable_zone(self, name: str) -> ZonePlan | None:
        """What to apply for zone `name` (for a zone that cannot be loaded: its stand-in,
        with the reason); None when no zone of that name exists."""
        return self.compiled.zone(name)

    def decide(self, connection: Connection):
        decision = decide_zone(connection, self.compiled, self.known_zones())
        if decision.warning:
            self.warn(f"connection {connection.id or connection.uuid!r}: {decision.warning}")
        return decision

    @property
    def panic(self) -> bool:
        """Panic mode is on: every packet but loopback's dropped, whatever the zones say."""
        return self.paths.panic

    # -- what every run does first -------------------------------------------------------

    def begin(self, state: State) -> bool:
        """What every run does first, under the state lock: while nm-zones is disabled, it
        finishes an interrupted disable and says False; else prepare(), and True. Panic
        mode outranks the disabled flag (`disable` refuses while it is on): a flag found
        beside it waits until panic mode is off, as lifting panic mode would fail open."""
        self._follow_config()
        if self.paths.disabled and not self.panic:
            self.finish_disable(state)
            return False
        self.prepare(state)
        return True

    def _follow_config(self) -> None:
        """A config read before the lock (a resident service's, a command's check) that
        changed while this run waited is read again, with the backend its settings name:
        otherwise a run that waited behind `reload` would move the rules back to the backend
        the old settings named. Nothing is committed yet, so nothing is lost."""
        if self._compiled is None:
            return
        if self._compiled.key[2] != config_fingerprint(self.paths):
            self._compiled, self._backend, self._catchall_checked = None, None, False

    def prepare(self, state: State) -> None:
        """What every run that changes anything does first, under the state lock: the kernel
        made to hold what the state says, gone interfaces collected, interrupted
        transitions finished, the hooks and the catch-all in place."""
        if state.lost:
            self.degrade(f"{state.lost}; starting afresh (the kernel keeps its rules)")
        self.move_backend(state)
        self.reconcile(state)
        self.match_panic(state)
        self.collect_garbage(state)
        self.repair(state)
        try:
            self.ensure_catchall(state)
        except KernelError as error:  # the interface of this run is still journaled first
            self.failed("catch-all", state, error)
        if state.allowances:
            self.expire_allowances(state)
