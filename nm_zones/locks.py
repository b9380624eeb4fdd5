"""An flock with a deadline: nm-zones waits for other writers, but never forever."""

from __future__ import annotations

import fcntl
import os
import time

from .errors import KernelError


def file_lock(path: str, wait: float, holder: str) -> FileLock:
    """`with file_lock(...)`: hold an exclusive flock on `path`; after `wait` seconds, fail
    naming `holder`."""
    return FileLock(path, wait, holder)


class FileLock:
    """A class rather than a contextlib.contextmanager: contextlib pulls collections and
    functools into every event (5 ms)."""

    def __init__(self, path: str, wait: float, holder: str):
        self.path, self.wait, self.holder = path, wait, holder
        self.fd = -1

    def __enter__(self) -> None:
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        fd = os.open(self.path, flags, 0o600)
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise KernelError(
                        f"{self.holder} holds {self.path} for over {self.wait:.0f} s"
                    ) from None
                time.sleep(0.005)
            except BaseException:
                os.close(fd)
                raise
        self.fd = fd

    def __exit__(self, *exc_info) -> None:
        os.close(self.fd)
        self.fd = -1
