"""The compiled-config cache: validated config kept in the state directory.

Parsing and validating the YAML costs more than the whole rest of an event, so the result is
pickled next to the state and reused while every config file and folder is unchanged (same
size, mtime, inode and owner). PyYAML is imported only when the cache is stale.
"""

from __future__ import annotations

import contextlib
import os
import pickle

from .model import LoadResult
from .paths import Paths, config_fingerprint
from .state import write_atomically

CACHE_FILE = "config.cache"
CACHE_VERSION = 1


def fingerprint(paths: Paths) -> tuple:
    return (CACHE_VERSION, config_fingerprint(paths))


def _trusted(path: str) -> bool:
    """Only unpickle a file this user wrote and nobody else can change."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    return info.st_uid == os.geteuid() and not info.st_mode & 0o022


def load_config(paths: Paths, use_cache: bool = True) -> LoadResult:
    """The validated config, from the cache when it is current, else from the files."""
    cache_path = os.path.join(paths.state, CACHE_FILE)
    key = fingerprint(paths)
    if use_cache and _trusted(cache_path):
        try:
            with open(cache_path, "rb") as stream:
                cached_key, result = pickle.load(stream)
            if cached_key == key:
                return result
        except Exception:  # a damaged cache is only a cache: rebuild it
            pass
    from .config import load

    result = load(paths)
    if use_cache and os.path.isdir(paths.state):  # made by the first run that takes the lock
        # not root, or a read-only state dir: work without the cache
        with contextlib.suppress(OSError):
            write_atomically(cache_path, pickle.dumps((key, result)), 0o600)
    return result
