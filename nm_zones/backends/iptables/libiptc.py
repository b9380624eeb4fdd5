"""libiptc, the library iptables itself commits through, called in-process through _ctypes.

python-iptables is a ctypes layer over the same library, and nm-zones still builds each rule
it has never seen with it (entries.py: libxtables parses the options). Committing needs none
of that: a table is read, edited with entries that are plain bytes, and written back by
libiptc's own calls. Importing python-iptables costs every process about 10 ms (its ctypes
structures, libxtables' start), more than half of an iptables event, so a run whose rules are
all known commits through this module alone. Only _ctypes, ctypes' C core, is imported here
(through ../clib.py), as in held.py and the nftables backend's libnft.py.

Every call goes to one family's library (`libip4tc` for IPv4, `libip6tc` for IPv6): a table
read by one must be edited and committed by the same one.
"""

from __future__ import annotations

import errno
import os

from ...errors import KernelError
from .held import TABLE_NAMES_FILE

SONAMES = {"ipv4": "libip4tc.so.2", "ipv6": "libip6tc.so.2"}
SHORT_NAMES = {"ipv4": "ip4tc", "ipv6": "ip6tc"}
PREFIXES = {"ipv4": "iptc_", "ipv6": "ip6tc_"}
KERNEL_MODULES = {"ipv4": "ip_tables", "ipv6": "ip6_tables"}
# the calls nm-zones makes (libiptc/libiptc.h, the same for ip6tc_): name -> (result,
# arguments), as clib.TYPE_CODES; an entry is passed as bytes (libiptc copies what it keeps)
CALLS = {
    "init": ("P", "z"),
    "free": (None, "P"),
    "is_chain": ("i", "zP"),
    "first_chain": ("z", "P"),
    "next_chain": ("z", "P"),
    "first_rule": ("P", "zP"),
    "next_rule": ("P", "PP"),
    "get_target": ("z", "PP"),
    "create_chain": ("i", "zP"),
    "delete_chain": ("i", "zP"),
    "flush_entries": ("i", "zP"),
    "append_entry": ("i", "zPP"),
    "insert_entry": ("i", "zPIP"),
    "delete_entry": ("i", "zPPP"),
    "delete_num_entry": ("i", "zIP"),
    "get_references": ("i", "PzP"),
    "commit": ("i", "P"),
    "strerror": ("z", "i"),
}


class IPTCError(KernelError):
    """libiptc refused a call; `errno` says why (EAGAIN: another program committed first)."""

    def __init__(self, number: int, text: str):
        super().__init__(text)
        self.errno = number


class Library:
    """One family's libiptc calls (CALLS), each a function of Python values."""

    def __init__(self, family: str):
        import _ctypes

        from ..clib import Functions

        self.call = Functions(_open(family, _ctypes), CALLS, PREFIXES[family], use_errno=True)

    def error(self, what: str) -> IPTCError:
        """The error of the call that just failed, in libiptc's words."""
        number = self.call.errno()
        reason = (self.call.strerror(number) or b"").decode(errors="replace")
        return IPTCError(number, f"{what}: {reason or os.strerror(number)}")


def legacy_tables(family: str) -> bool:
    """Whether the kernel has the family's legacy x_tables, which answer libiptc's socket
    options: its table list in /proc exists, or does once modprobe loaded the module (as
    python-iptables does at import)."""
    if os.path.exists(TABLE_NAMES_FILE[family]):
        return True
    import subprocess

    try:
        subprocess.run(["modprobe", "-q", KERNEL_MODULES[family]], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return os.path.exists(TABLE_NAMES_FILE[family])


def _open(family: str, _ctypes) -> int:
    """dlopen the family's libiptc: by its soname, else where iptc_env finds it; its kernel
    part loaded first (a table's read says when it is missing)."""
    legacy_tables(family)
    try:
        return _ctypes.dlopen(SONAMES[family], 0)
    except OSError as error:
        from .iptc_env import locate_libraries

        path = locate_libraries().get(SHORT_NAMES[family])
        if path is None:
            raise IPTCError(
                errno.ENOENT, f"{SONAMES[family]} cannot be loaded ({error}): install iptables"
            ) from None
        return _ctypes.dlopen(path, 0)


_libraries: dict[str, Library] = {}  # per family, loaded once per process


def library(family: str) -> Library:
    if family not in _libraries:
        _libraries[family] = Library(family)
    return _libraries[family]


class Table:
    """One table of one family as libiptc read it: edited in memory, then committed whole
    (`commit`), or dropped (`close`). Names are str; entries are bytes."""

    def __init__(self, family: str, name: str):
        self.lib = library(family)
        self.call = self.lib.call
        self.name = name
        self.handle = self.call.init(name.encode())
        if not self.handle:
            raise self.lib.error(f"cannot read table {name}")

    def _check(self, result: int, what: str) -> None:
        if result != 1:
            raise self.lib.error(what)

    def is_chain(self, chain: str) -> bool:
        return bool(self.call.is_chain(chain.encode(), self._handle()))

    def chains(self) -> list[bytes]:
        """Every chain's name, built-in chains first, as the kernel has it (any bytes)."""
        names = []
        name = self.call.first_chain(self._handle())
        while name is not None:
            names.append(name)
            name = self.call.next_chain(self.handle)
        return names

    def targets(self, chain: str):
        """The target of each rule of a chain, in order (a chain's name, a verdict or an
        extension), read as they are asked for: a caller that stops early reads no more.
        The table must not change while they are read."""
        handle = self._handle()
        entry = self.call.first_rule(chain.encode(), handle)
        while entry:
            yield self.call.get_target(entry, handle) or b""
            entry = self.call.next_rule(entry, handle)

    def create_chain(self, chain: str) -> None:
        self._check(self.call.create_chain(chain.encode(), self._handle()), f"create {chain}")

    def delete_chain(self, chain: str) -> None:
        self._check(self.call.delete_chain(chain.encode(), self._handle()), f"delete {chain}")

    def flush_entries(self, chain: str) -> None:
        self._check(self.call.flush_entries(chain.encode(), self._handle()), f"flush {chain}")

    def append_entry(self, chain: str, entry: bytes) -> None:
        result = self.call.append_entry(chain.encode(), entry, self._handle())
        self._check(result, f"append to {chain}")

    def insert_entry(self, chain: str, entry: bytes, position: int) -> None:
        result = self.call.insert_entry(chain.encode(), entry, position, self._handle())
        self._check(result, f"insert into {chain}")

    def delete_entry(self, chain: str, entry: bytes) -> bool:
        """Delete the first rule of `chain` that is `entry` exactly; False when none is."""
        mask = b"\xff" * len(entry)
        return self.call.delete_entry(chain.encode(), entry, mask, self._handle()) == 1

    def delete_rule(self, chain: str, number: int) -> None:
        """Delete rule `number` (counted from 0) of `chain`."""
        result = self.call.delete_num_entry(chain.encode(), number, self._handle())
        self._check(result, f"delete rule {number} of {chain}")

    def references(self, chain: str) -> int:
        """How many rules jump to `chain`."""
        count = self.call.c_uint(0)
        result = self.call.get_references(
            self.call.pointer_to(count), chain.encode(), self._handle()
        )
        self._check(result, f"references to {chain}")
        return count.value

    def commit(self) -> None:
        self._check(self.call.commit(self._handle()), f"commit {self.name}")

    def close(self) -> None:
        """Free libiptc's copy (what was not committed is dropped)."""
        if self.handle:
            self.call.free(self.handle)
            self.handle = None

    def _handle(self) -> int:
        if not self.handle:  # libiptc is never handed NULL: it would crash the process
            raise IPTCError(errno.EBADF, f"table {self.name} used after it was closed")
        return self.handle

