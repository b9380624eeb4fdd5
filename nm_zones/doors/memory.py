"""The resident service's memory kept near what it uses (glibc's allocator, through ctypes,
which the backends load anyway).

A call with 200 interfaces bound builds and drops megabytes (a table read, a ruleset
written, a reload's plans); glibc keeps what was freed for later, in one arena per thread
that ever allocated, so the worker threads' arenas and the gaps between live objects made
the service hold some 10 MiB more than it used. All threads share one arena (the GIL lets
one run at a time anyway), and once a burst of calls is over, what is free goes back to the
kernel (malloc_trim: some 0.1 ms, after the reply, never before it).
"""

from __future__ import annotations

import asyncio

M_ARENA_MAX = -8  # glibc's mallopt parameter
QUIET_SECONDS = 0.1  # after the last call of a burst


def _libc():
    import ctypes

    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:  # not glibc: its allocator does as it does
        return None


def share_one_arena() -> None:
    """Every thread allocates from the main arena; call before the worker threads start."""
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(M_ARENA_MAX, 1)


class GiveBack:
    """Returns what a burst of work freed to the kernel once the service is quiet."""

    def __init__(self):
        libc = _libc()
        self.trim = getattr(libc, "malloc_trim", None)
        self.handle: asyncio.TimerHandle | None = None

    def after_work(self) -> None:
        """Called on the event loop after a call was answered."""
        if self.trim is None:
            return
        if self.handle is not None:
            self.handle.cancel()
        self.handle = asyncio.get_running_loop().call_later(QUIET_SECONDS, self._give_back)

    def _give_back(self) -> None:
        self.handle = None
        self.trim(0)
