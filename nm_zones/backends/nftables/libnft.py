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

Only ctypes is imported here.
"""

from __future__ import annotations

import ctypes

from ...errors import SystemFailure

SONAME = "libnftables.so.1"
TABLE = "nm-zones"
FAMILY = "inet"
# enum nft_ctx_output_flags (nftables/libnftables.h)
OUTPUT_STATELESS = 1 << 2
OUTPUT_JSON = 1 << 4


class NftError(SystemFailure):
    """libnftables is missing, or refused a script (the text says why)."""


class Nft:
    """One libnftables context; `run(script)` is one transaction in the kernel."""

    def __init__(self, flags: int = 0):
        try:
            lib = ctypes.CDLL(SONAME)
        except OSError as error:
            raise NftError(f"{SONAME} cannot be loaded ({error}): install nftables") from None
        lib.nft_ctx_new.restype = ctypes.c_void_p
        lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
        lib.nft_ctx_free.argtypes = [ctypes.c_void_p]
        lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.nft_run_cmd_from_buffer.restype = ctypes.c_int
        lib.nft_ctx_output_set_flags.argtypes = [ctypes.c_void_p, ctypes.c_uint]
        for name in ("nft_ctx_buffer_output", "nft_ctx_buffer_error"):
            getattr(lib, name).argtypes = [ctypes.c_void_p]
        for name in ("nft_ctx_get_output_buffer", "nft_ctx_get_error_buffer"):
            getattr(lib, name).argtypes = [ctypes.c_void_p]
            getattr(lib, name).restype = ctypes.c_char_p
        lib.nft_ctx_set_dry_run.argtypes = [ctypes.c_void_p, ctypes.c_bool]
        self.lib = lib
        self.ctx = lib.nft_ctx_new(0)
        if not self.ctx:
            raise NftError("libnftables: no context")
        lib.nft_ctx_buffer_output(self.ctx)
        lib.nft_ctx_buffer_error(self.ctx)
        lib.nft_ctx_output_set_flags(self.ctx, flags)

    def run(self, script: str, dry_run: bool = False) -> str:
        """Run a script as one transaction; its output, or NftError with nft's message."""
        self.lib.nft_ctx_set_dry_run(self.ctx, dry_run)
        status = self.lib.nft_run_cmd_from_buffer(self.ctx, script.encode())
        output = (self.lib.nft_ctx_get_output_buffer(self.ctx) or b"").decode(errors="replace")
        error = (self.lib.nft_ctx_get_error_buffer(self.ctx) or b"").decode(errors="replace")
        if status != 0:
            raise NftError(" ".join(error.split()) or "nft: the kernel refused the ruleset")
        return output

    def close(self) -> None:
        if self.ctx:
            self.lib.nft_ctx_free(self.ctx)
            self.ctx = None


def list_table(nft: Nft | None = None) -> str:
    """nm-zones' table as the kernel lists it, without handles or counters ("" when absent):
    one netlink dump of that table alone, whatever else the ruleset holds."""
    nft = nft or Nft(OUTPUT_STATELESS)
    try:
        return nft.run(f"list table {FAMILY} {TABLE}")
    except NftError:
        return ""  # no such table (or nftables unusable: then the view is empty too)


def chain_ref(name: str) -> str:
    """A chain name as nft takes and prints it: an identifier (nft 1.0.6 takes no quoted chain
    names). A hashed interface token's `~` becomes `/`, which nft allows inside a name and no
    interface name contains, so it cannot meet a plain token."""
    return name.replace("~", "/")


def chain_of(ref: str) -> str:
    """The inverse of chain_ref: a chain name as nm-zones' plans spell it."""
    return ref.strip('"').replace("/", "~")
