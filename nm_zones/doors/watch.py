"""Follow a file the dispatcher hook writes, from the service's event loop: the hook
identifies networks without the service and sends no signal, so the service watches the
hook's record of which interface is on which network (networks/zone.py SEEN_FILE) and tells
the desktop front ends (NetworksChanged). Linux inotify through libc: every state file is
replaced by a rename (files.write_atomically), which inotify reports as IN_MOVED_TO."""

from __future__ import annotations

import asyncio
import ctypes
import os
import struct
from collections.abc import Callable

IN_CLOSE_WRITE, IN_MOVED_TO, IN_DELETE = 0x08, 0x80, 0x200
IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
EVENT_HEAD = struct.Struct("iIII")  # wd, mask, cookie, len (then the name, NUL-padded)


class FileWatch:
    """`on_change()` on the event loop whenever `name` in `folder` is written, replaced or
    removed. Unavailable (no inotify, the folder missing): `start` returns False and the
    front ends learn of identifications only from the service's own changes."""

    def __init__(self, folder: str, name: str, on_change: Callable[[], None]):
        self.folder, self.name, self.on_change = folder, name.encode(), on_change
        self.fd = -1

    def start(self) -> bool:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError):
            return False
        if fd < 0:
            return False
        mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE
        if libc.inotify_add_watch(fd, os.fsencode(self.folder), mask) < 0:
            os.close(fd)
            return False
        self.fd = fd
        asyncio.get_running_loop().add_reader(fd, self._readable)
        return True

    def stop(self) -> None:
        if self.fd >= 0:
            asyncio.get_running_loop().remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, 64 * 1024)
        except BlockingIOError:
            return
        if self.name in names(data):
            self.on_change()


def names(data: bytes) -> list[bytes]:
    """The file names of a buffer of inotify events."""
    found, offset = [], 0
    while offset + EVENT_HEAD.size <= len(data):
        length = EVENT_HEAD.unpack_from(data, offset)[3]
        start = offset + EVENT_HEAD.size
        found.append(data[start : start + length].rstrip(b"\0"))
        offset = start + length
    return found
