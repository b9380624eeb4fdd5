"""Files that decide the firewall, read and written so that they cannot lie.

- Reading never blocks (a FIFO planted where a file should be is refused, not waited on) and
  never follows a symlink where nm-zones writes; what nm-zones itself wrote is read back only
  when it is a regular file that this user owns and nobody else can write.
- Writing goes to a fresh temporary file (O_EXCL|O_NOFOLLOW: nothing planted there is
  followed), loops until every byte is written, is flushed to disk, and only then replaces the
  old file. Any failure (a full disk) removes the temporary file and keeps the old one whole.
"""

from __future__ import annotations

import os
import stat

from .errors import SystemFailure

READ_LIMIT = 64 << 20  # no file nm-zones writes comes near this


class UntrustedFile(SystemFailure):
    """A file that exists but must not be believed: not a regular file, or writable by
    someone other than its owner, or owned by someone else."""


def open_regular(path: str, follow: bool = True) -> int:
    """A file descriptor for reading `path`, which must be a regular file; never blocks."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UntrustedFile(f"{path} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_all(fd: int, limit: int = READ_LIMIT) -> bytes:
    """Every byte of an open file (closed afterwards), at most `limit` + 1."""
    chunks = []
    try:
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_trusted(path: str) -> bytes | None:
    """What nm-zones wrote at `path`: None when there is no such file; UntrustedFile when it
    is not a regular file this user owns and only this user can write."""
    try:
        fd = open_regular(path, follow=False)
    except FileNotFoundError:
        return None
    except OSError as error:
        if isinstance(error, UntrustedFile):
            raise
        raise UntrustedFile(f"{path}: {error.strerror or error}") from None
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        os.close(fd)
        raise UntrustedFile(f"{path} can be changed by others (owner {info.st_uid})")
    return read_all(fd)


def write_atomically(path: str, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data`, whole or not at all."""
    directory, name = os.path.split(path)
    temporary = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        _write_new(temporary, path, data, mode, flags)
    except OSError as error:
        raise OSError(error.errno, error.strerror, path) from None


def _write_new(temporary: str, path: str, data: bytes, mode: int, flags: int) -> None:
    fd = os.open(temporary, flags, mode)
    try:
        try:
            os.fchmod(fd, mode)  # exactly `mode`, whatever the umask
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        try:  # noqa: SIM105 - contextlib would cost every event 5 ms of imports
            os.unlink(temporary)
        except OSError:
            pass
        raise
