"""The D-Bus service's timer for timed allowances (`nm-zones allow --for`): at each deadline,
the rules of the allowances that reached it leave the kernel.

Deadlines are kept on CLOCK_BOOTTIME (ruleset/allowances.py), which counts through suspend
and which no one can set. asyncio's sleeps run on CLOCK_MONOTONIC, which stops during
suspend, so no sleep is longer than POLL_SECONDS: a machine that wakes up past a deadline
takes the rules out within that. The same short wake-up notices an allowance another
process (`nm-zones allow` on the command line) wrote into the state: a look at the state
file's identity, read again only when it changed.
"""

from __future__ import annotations

import asyncio
import os

from ..paths import Paths
from ..ruleset.allowances import boottime, next_deadline
from ..state import STATE_FILE, StateDir

POLL_SECONDS = 1.0


def _identity(path: str) -> tuple | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


async def expire_at_deadlines(paths: Paths, expire) -> None:
    """Forever: `await expire()` whenever an allowance in the state reached its deadline
    (expire runs what every run does first, engine.prepare, which expires allowances)."""
    state_file = os.path.join(paths.state, STATE_FILE)
    seen: tuple | None = None
    deadline = 0
    while True:
        identity = _identity(state_file)
        if identity != seen:
            seen, deadline = identity, next_deadline(StateDir(paths.state).load().allowances)
        wait = POLL_SECONDS
        if deadline and not paths.disabled:
            left = deadline - boottime()
            if left <= 0:
                await expire()
                seen = None  # the state changed: read it again
            else:
                wait = min(wait, left)
        await asyncio.sleep(wait)
