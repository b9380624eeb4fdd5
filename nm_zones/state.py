"""What is applied where, kept in the state directory (/run/nm-zones).

The state file is marshal (an event reads it without importing json; `nm-zones status --json`
shows it) and is replaced atomically (temporary file, fsync, rename), so a reader or a crash
always sees a whole file. An interface is marked `applying` before its commits and `applied`
after them: a run killed in between leaves `applying`, which the next run repairs.
A lock file serializes nm-zones processes.
"""

from __future__ import annotations

import marshal
import os

from .locks import file_lock

STATE_FILE = "state"
STATE_VERSION = 3
LOCK_FILE = "lock"
LOCK_WAIT_SECONDS = 30.0


class Binding:
    """One interface's zone, why it has it, and what was committed for it.

    A plain class, like everything an event imports: building a dataclass costs more than
    the rest of an event's Python code (README, Performance).
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
        status: str = "applied",
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
        self.status = status  # or "applying": a commit was interrupted
        self.degraded = degraded  # why the interface runs on a fallback zone, if it does
        self.inputs = inputs  # what decided it (quick.inputs_key), for the quick path
        self.flows_ended = flows_ended  # open flows its last switch ended (flows.py)

    def table_set(self) -> set[tuple[str, str]]:
        return {(family, table) for family, table in self.tables}

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__slots__}

    def __eq__(self, other) -> bool:
        return isinstance(other, Binding) and self.as_dict() == other.as_dict()

    def __repr__(self) -> str:
        return f"Binding({self.as_dict()!r})"


class State:
    """Every binding, and the zone of the catch-all for interfaces no zone claims."""

    __slots__ = ("catchall_digest", "catchall_zone", "interfaces")

    def __init__(
        self,
        interfaces: dict[str, Binding] | None = None,
        catchall_zone: str = "",
        catchall_digest: str = "",
    ):
        self.interfaces = interfaces if interfaces is not None else {}
        self.catchall_zone = catchall_zone
        self.catchall_digest = catchall_digest

    def as_dict(self) -> dict:
        """The state as plain values, for `status --json` and tests."""
        return {
            "catchall": {"zone": self.catchall_zone, "digest": self.catchall_digest},
            "interfaces": {name: b.as_dict() for name, b in sorted(self.interfaces.items())},
        }

    def dumps(self) -> bytes:
        """The file: each binding as a tuple in __slots__ order (the field names are written
        too: a file whose fields differ is not read)."""
        return marshal.dumps(
            (
                STATE_VERSION,
                Binding.__slots__,
                (self.catchall_zone, self.catchall_digest),
                {
                    name: tuple([getattr(b, field) for field in Binding.__slots__])
                    for name, b in self.interfaces.items()
                },
            )
        )

    @classmethod
    def loads(cls, data: bytes) -> State:
        version, fields, catchall, interfaces = marshal.loads(data)
        if version != STATE_VERSION or fields != Binding.__slots__:
            raise ValueError(f"state file of another version ({version})")
        bindings = {
            name: Binding(**dict(zip(fields, values, strict=True)))
            for name, values in interfaces.items()
        }
        return cls(bindings, *catchall)


class StateDir:
    def __init__(self, path: str):
        self.path = path

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def ensure(self) -> None:
        os.makedirs(self.path, mode=0o755, exist_ok=True)

    def load(self) -> State:
        try:
            with open(self.file(STATE_FILE), "rb") as stream:
                return State.loads(stream.read())
        except FileNotFoundError:
            return State()
        except (ValueError, TypeError, AttributeError, EOFError, KeyError):
            # Unreadable state: start afresh; the kernel still holds the rules, and the next
            # apply of each interface replaces them.
            return State()

    def save(self, state: State) -> None:
        from .quick import QUICK_FILE, quick_index

        write_atomically(self.file(STATE_FILE), state.dumps())
        write_atomically(self.file(QUICK_FILE), quick_index(state.interfaces))

    def locked(self, wait: float = LOCK_WAIT_SECONDS):
        """Serialize nm-zones processes that change the kernel or the state."""
        self.ensure()
        return file_lock(self.file(LOCK_FILE), wait, "another nm-zones")


def write_atomically(path: str, data: bytes, mode: int = 0o644) -> None:
    directory = os.path.dirname(path)
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)  # exactly `mode`, whatever the umask
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
