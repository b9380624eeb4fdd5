"""An flock with a deadline: nm-zones waits for other writers, but never forever."""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager

from .errors import KernelError


@contextmanager
def file_lock(path: str, wait: float, holder: str):
    """Hold an exclusive flock on `path`; after `wait` seconds, fail naming `holder`."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise KernelError(f"{holder} holds {path} for over {wait:.0f} s") from None
                time.sleep(0.005)
        yield
    finally:
        os.close(fd)
