"""libnftables, the library `nft` itself is built on, called in-process through ctypes.

nm-zones needs two calls of it: `nft_ctx_new` and `nft_run_cmd_from_buffer` (a script in,
one kernel transaction out), plus the buffered output and error text. Debian ships the
upstream binding as python3-nftables (`nftables.py`), a ctypes layer over the same library;
nm-zones keeps this small loader instead because every event's run commits through it and
must not import json (which nftables.py does at import), and because Debian 12's copy lacks
calls newer versions have: the library is what matters, and it comes with the `nftables`
package either way (libnftables1). Reading the table back is listing.py's (the JSON
libnftables prints, off the event's path); the event's own view of the table is
nfnetlink.py's.

Only _ctypes, ctypes' C core, is imported here (through ../clib.py): every process that
commits loads this module, and the ctypes package would cost each of them 1-2 ms more.
"""

from __future__ import annotations

import os
import sys

from ...errors import SystemFailure

SONAME = "libnftables.so.1"
TABLE = "nm-zones"
FAMILY = "inet"
# enum nft_ctx_output_flags (nftables/libnftables.h)
OUTPUT_STATELESS = 1 << 2
OUTPUT_JSON = 1 << 4
# the calls nm-zones makes: name -> (result, arguments), as clib.TYPE_CODES
CALLS = {
    "nft_ctx_new": ("P", "I"),
    "nft_ctx_free": (None, "P"),
    "nft_run_cmd_from_buffer": ("i", "Pz"),
    "nft_ctx_output_set_flags": (None, "PI"),
    "nft_ctx_buffer_output": ("i", "P"),
    "nft_ctx_buffer_error": ("i", "P"),
    "nft_ctx_get_output_buffer": ("z", "P"),
    "nft_ctx_get_error_buffer": ("z", "P"),
    "nft_ctx_set_dry_run": (None, "P?"),
}


class NftError(SystemFailure):
    """libnftables is missing, or refused a script (the text says why)."""


def load_library():
    """libnftables' calls (CALLS), each a function of Python values (clib.Functions)."""
    import _ctypes

    from ..clib import Functions

    try:
        handle = _ctypes.dlopen(SONAME, 0)
    except OSError as error:
        raise NftError(f"{SONAME} cannot be loaded ({error}): install nftables") from None
    return Functions(handle, CALLS)


_library = None  # load_library()'s, once per process
_committed = False  # a transaction was sent from this process (see outlive_grace_period)


class Nft:
    """One libnftables context; `run(script)` is one transaction in the kernel."""

    def __init__(self, flags: int = 0):
        global _library
        lib = _library = _library or load_library()
        self.lib = lib
        self.ctx = lib.nft_ctx_new(0)
        if not self.ctx:
            raise NftError("libnftables: no context")
        lib.nft_ctx_buffer_output(self.ctx)
        lib.nft_ctx_buffer_error(self.ctx)
        lib.nft_ctx_output_set_flags(self.ctx, flags)
        self.said = ""

    def run(self, script: str, dry_run: bool = False) -> str:
        """Run a script as one transaction; its output, or NftError with nft's message."""
        global _committed
        self.lib.nft_ctx_set_dry_run(self.ctx, dry_run)
        _committed = _committed or not dry_run
        status = self.lib.nft_run_cmd_from_buffer(self.ctx, script.encode())
        output = (self.lib.nft_ctx_get_output_buffer(self.ctx) or b"").decode(errors="replace")
        error = (self.lib.nft_ctx_get_error_buffer(self.ctx) or b"").decode(errors="replace")
        self.said = error  # what libnftables said of a run that succeeded (listing.py)
        if status != 0:
            raise NftError(" ".join(error.split()) or "nft: the kernel refused the ruleset")
        return output

    def close(self) -> None:
        if self.ctx:
            self.lib.nft_ctx_free(self.ctx)
            self.ctx = None


def chain_ref(name: str) -> str:
    """A chain name as nft takes and prints it: an identifier (nft 1.0.6 takes no quoted chain
    names). A hashed interface token's `~` becomes `/`, which nft allows inside a name and no
    interface name contains, so it cannot meet a plain token."""
    return name.replace("~", "/")


def chain_of(ref: str) -> str:
    """The inverse of chain_ref: a chain name as nm-zones' plans spell it."""
    return ref.strip('"').replace("/", "~")


def outlive_grace_period() -> None:
    """Called by a process about to end (doors.end_process) that sent nftables a
    transaction: the kernel's release of its nf_tables netlink sockets (libnftables' and
    nfnetlink's) waits until that transaction's objects are freed, an RCU grace period
    after the commit, 5-15 ms that whoever waits for this process (NetworkManager, an
    admin) would wait too. A child that holds them until this process has ended (its read
    of a pipe ends then) releases them instead, its standard streams and every other file
    closed at once. Nothing is left undone: the commit is checked and the state saved by
    then; without a fork (none possible, threads) the process releases them itself."""
    if not _committed or (
        "threading" in sys.modules and sys.modules["threading"].active_count() > 1
    ):
        return
    try:
        read_end, write_end = os.pipe()
        child = os.fork()
    except OSError:
        return
    if child:
        os.close(read_end)  # write_end stays open until this process ends
        return
    try:
        os.close(write_end)
        _keep_sockets_only(read_end)
        os.read(read_end, 1)  # b"" once the parent has ended
    finally:
        os._exit(0)


def _keep_sockets_only(keep: int) -> None:
    """Close every file of this (forked) process but `keep` and its sockets other than
    the standard streams (nothing imported: stderr may still be the caller's)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            socket = fd > 2 and os.readlink(f"/proc/self/fd/{name}").startswith("socket:")
        except OSError:
            continue  # the listing's own descriptor, closed by now
        if fd != keep and not socket:
            try:  # noqa: SIM105 - no import here, see above
                os.close(fd)
            except OSError:
                pass
