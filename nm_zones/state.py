"""What is applied where, kept in the state directory (/run/nm-zones).

The state file is replaced atomically (temporary file, fsync, rename), so a reader or a crash
always sees a whole file. An interface is marked `applying` before its commits and `applied`
after them: a run killed in between leaves `applying`, which the next run repairs.
A lock file serializes nm-zones processes.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

from .locks import file_lock

STATE_FILE = "state.json"
LOCK_FILE = "lock"
LOCK_WAIT_SECONDS = 30.0


@dataclass
class Binding:
    """One interface's zone, why it has it, and what was committed for it."""

    zone: str
    reason: str = ""
    ifindex: int = 0
    connection_uuid: str = ""
    connection_id: str = ""
    connection_type: str = ""
    since: float = 0.0
    digest: str = ""
    tables: list[list[str]] = field(default_factory=list)  # [family, table] pairs in use
    status: str = "applied"  # or "applying": a commit was interrupted
    degraded: str = ""  # why the interface runs on a fallback zone, if it does
    inputs: str = ""  # what decided it: quick.event_inputs, marshalled, in hex

    def table_set(self) -> set[tuple[str, str]]:
        return {(family, table) for family, table in self.tables}


@dataclass
class State:
    interfaces: dict[str, Binding] = field(default_factory=dict)
    catchall_zone: str = ""
    catchall_digest: str = ""

    def to_json(self) -> str:
        data = {
            "version": 1,
            "catchall": {"zone": self.catchall_zone, "digest": self.catchall_digest},
            "interfaces": {name: asdict(b) for name, b in sorted(self.interfaces.items())},
        }
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> State:
        data = json.loads(text)
        fields = set(Binding.__dataclass_fields__)
        interfaces = {
            name: Binding(**{k: v for k, v in entry.items() if k in fields})
            for name, entry in data.get("interfaces", {}).items()
        }
        catchall = data.get("catchall", {})
        return cls(interfaces, catchall.get("zone", ""), catchall.get("digest", ""))


class StateDir:
    def __init__(self, path: str):
        self.path = path

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def ensure(self) -> None:
        os.makedirs(self.path, mode=0o755, exist_ok=True)

    def load(self) -> State:
        try:
            with open(self.file(STATE_FILE)) as stream:
                return State.from_json(stream.read())
        except FileNotFoundError:
            return State()
        except (ValueError, TypeError, AttributeError):
            # Unreadable state: start afresh; the kernel still holds the rules, and the next
            # apply of each interface replaces them.
            return State()

    def save(self, state: State) -> None:
        from .quick import QUICK_FILE, quick_index

        write_atomically(self.file(STATE_FILE), state.to_json().encode())
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
