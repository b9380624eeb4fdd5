"""What is applied where, kept in the state directory (/run/nm-zones).

The state file is marshal (an event reads it without importing json; `nm-zones status --json`
shows it) and is replaced atomically (files.py), so a reader or a crash always sees a whole
file, and a full disk keeps the old one. Every transition is journaled before its first
commit: an interface is marked `applying` or `removing`, and only after its commits `applied`
(or forgotten); a run killed in between leaves the mark, which the next run finishes.

The state also keeps, per table, the view of nm-zones' rules the kernel held right after
nm-zones' own last commit (backends/iptables/held.py): a run that finds another view knows that
something else changed them. A lock file serializes nm-zones processes.
"""

from __future__ import annotations

import marshal
import os
from _operator import attrgetter, itemgetter

from .files import UntrustedFile, read_trusted, write_atomically
from .locks import file_lock

STATE_FILE = "state"
STATE_VERSION = 6  # 5: runtime allowances (doors/allow.py); 6: runtime sources
LOCK_FILE = "lock"
LOCK_WAIT_SECONDS = 30.0


class Status:
    """A binding's status, as the state file and `status --json` spell it. APPLYING and
    REMOVING are the journal: written before the commits, so the next run finishes them."""

    APPLIED = "applied"
    APPLYING = "applying"
    REMOVING = "removing"
    DISABLED = "disabled"  # nm-zones disable took its rules out; enable puts them back
    IN_KERNEL = (APPLIED, APPLYING)  # statuses whose rules belong in the kernel


class Binding:
    """One interface's zone, why it has it, and what was committed for it.

    A plain class, like everything an event imports: building a dataclass costs more than
    the rest of an event's Python code (docs/performance.md).
    """

    __slots__ = (
        "connection_id",
        "connection_type",
        "connection_uuid",
        "degraded",
        "digest",
        "flows_ended",
        "ifindex",
        "inputs",
        "reason",
        "since",
        "status",
        "tables",
        "zone",
    )

    def __init__(
        self,
        zone: str,
        reason: str = "",
        ifindex: int = 0,
        connection_uuid: str = "",
        connection_id: str = "",
        connection_type: str = "",
        since: float = 0.0,
        digest: str = "",
        tables: list[list[str]] | None = None,
        status: str = Status.APPLIED,
        degraded: str = "",
        inputs: str = "",
        flows_ended: int = 0,
    ):
        self.zone = zone
        self.reason = reason
        self.ifindex = ifindex
        self.connection_uuid = connection_uuid
        self.connection_id = connection_id
        self.connection_type = connection_type
        self.since = since
        self.digest = digest  # fingerprint of the rules committed
        self.tables = tables or []  # [family, table] pairs in use
        self.status = status  # Status.APPLYING / REMOVING: journaled before the commits
        self.degraded = degraded  # why the interface runs on a fallback zone, if it does
        self.inputs = inputs  # what decided it (quick.inputs_key), for the quick path
        self.flows_ended = flows_ended  # open flows its last switch ended (flows.py)

    def as_decided(self) -> bool:
        """Applied as its inputs decided (not degraded, not interrupted): what the quick
        path (quick.py) may trust on the next event."""
        return self.status == Status.APPLIED and not self.degraded and bool(self.inputs)

    def table_set(self) -> set[tuple[str, str]]:
        return {(family, table) for family, table in self.tables}

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other) -> bool:
        return isinstance(other, Binding) and self.as_dict() == other.as_dict()

    def __repr__(self) -> str:
        return f"Binding({self.as_dict()!r})"


# a binding as the state file keeps it (in __slots__ order) and back, in C: with hundreds of
# interfaces bound, building them field by field in Python is most of a load or a save
_binding_fields = attrgetter(*Binding.__slots__)
_INIT_PARAMETERS = Binding.__init__.__code__.co_varnames[1 : Binding.__init__.__code__.co_argcount]
_INIT_ORDER = itemgetter(*(Binding.__slots__.index(name) for name in _INIT_PARAMETERS))


def _binding_of(values: tuple) -> Binding:
    if len(values) != len(Binding.__slots__):
        raise ValueError("a binding of another version")
    return Binding(*_INIT_ORDER(values))


class State:
    """Every binding, the zone of the catch-all for interfaces no zone claims, and the view of
    each table nm-zones last committed."""

    __slots__ = (
        "allowances",
        "catchall_digest",
        "catchall_zone",
        "interfaces",
        "kernel",
        "lost",
        "sources",
    )

    def __init__(
        self,
        interfaces: dict[str, Binding] | None = None,
        catchall_zone: str = "",
        catchall_digest: str = "",
        kernel: dict | None = None,
        allowances: list | None = None,
        sources: dict | None = None,
    ):
        self.interfaces = interfaces if interfaces is not None else {}
        self.catchall_zone = catchall_zone
        self.catchall_digest = catchall_digest
        self.kernel: dict[tuple[str, str], dict] = kernel if kernel is not None else {}
        self.lost = ""  # why the state file could not be read (never saved)
        # runtime allowances (ruleset/allowances.py: interface or "" for the whole zone, zone,
        # what, deadline on CLOCK_BOOTTIME or 0, the wall clock then), as committed with the
        # interfaces they reach
        self.allowances: list[tuple[str, str, str, int, int]] = allowances or []
        # sources bound at runtime (D-Bus addSource): source as given -> zone, "" for a zone
        # file's source removed; committed with the catch-all, forgotten at reload
        self.sources: dict[str, str] = sources or {}

    def as_dict(self) -> dict:
        """The state as plain values, for `status --json` and tests."""
        return {
            "catchall": {"zone": self.catchall_zone, "digest": self.catchall_digest},
            "interfaces": {name: b.as_dict() for name, b in sorted(self.interfaces.items())},
            "kernel": {f"{family} {table}": view for (family, table), view in self.kernel.items()},
            "lost": self.lost,
            "allowances": [list(allowance) for allowance in self.allowances],
            "sources": dict(sorted(self.sources.items())),
        }

    def dumps(self) -> bytes:
        """The file: each binding as a tuple in __slots__ order (the field names are written
        too: a file whose fields differ is not read)."""
        return marshal.dumps(
            (
                STATE_VERSION,
                Binding.__slots__,
                (self.catchall_zone, self.catchall_digest),
                {name: _binding_fields(b) for name, b in self.interfaces.items()},
                self.kernel,
                tuple(self.allowances),
                self.sources,
            )
        )

    @classmethod
    def loads(cls, data: bytes) -> State:
        """The state from its file; a version-3 file (no kernel views) is read too: its tables
        are then rebuilt once, as for any table whose view is unknown; a version-4 file has
        no allowances, a version-5 file no runtime sources."""
        document = marshal.loads(data)
        version, fields, catchall, interfaces = document[:4]
        if version not in (3, 4, 5, STATE_VERSION) or fields != Binding.__slots__:
            raise ValueError(f"state file of another version ({version})")
        kernel = document[4] if version >= 4 else {}
        if not isinstance(kernel, dict):
            raise ValueError("state file without kernel views")
        allowances = []
        if version >= 5 and document[5]:
            from .ruleset.allowances import upgraded

            allowances = [upgraded(a) for a in document[5]]
        sources = document[6] if version >= 6 else {}
        if not isinstance(sources, dict):
            raise ValueError("state file with damaged sources")
        bindings = {name: _binding_of(values) for name, values in interfaces.items()}
        return cls(bindings, *catchall, kernel, allowances, sources)


class StateDir:
    def __init__(self, path: str):
        self.path = path

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def ensure(self) -> None:
        """The directory, made if needed; refused when others could plant files in it."""
        os.makedirs(self.path, mode=0o755, exist_ok=True)
        problem = self.untrusted(os.geteuid())
        if problem:
            raise UntrustedFile(problem)

    def untrusted(self, owner: int = 0) -> str:
        """Why no change can be made while the directory is as it is ("" when it can be
        trusted: absent, or `owner`'s and writable by it alone); `status` says it too."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return ""
        if info.st_uid != owner or info.st_mode & 0o022:
            return (
                f"{self.path} can be written by others: refusing to keep the state there "
                f"(chown root {self.path}; chmod go-w {self.path})"
            )
        return ""

    def load(self) -> State:
        """The state; when its file cannot be believed, an empty state that says why (the
        kernel keeps its rules, and nothing is removed on the strength of a lost state)."""
        try:
            data = read_trusted(self.file(STATE_FILE))
        except UntrustedFile as error:
            return _lost(str(error))
        if data is None:
            return State()
        try:
            return State.loads(data)
        except (ValueError, TypeError, AttributeError, EOFError, KeyError) as error:
            return _lost(f"{self.file(STATE_FILE)} cannot be read ({error or 'damaged'})")

    def save(self, state: State) -> None:
        from .quick import QUICK_FILE, quick_index

        write_atomically(self.file(STATE_FILE), state.dumps())
        write_atomically(self.file(QUICK_FILE), quick_index(state))

    def locked(self, wait: float = LOCK_WAIT_SECONDS):
        """Serialize nm-zones processes that change the kernel or the state."""
        self.ensure()
        return file_lock(self.file(LOCK_FILE), wait, "another nm-zones")


def _lost(reason: str) -> State:
    state = State()
    state.lost = reason
    return state
