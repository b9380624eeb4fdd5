"""The loaded configuration (model.LoadResult), kept in the state dir for the commands.

`allow`, `zones`, `status IFACE` and the other commands that show or check against the
zones' definitions need the model, not only the compiled rules (ruleset/cache.py). Reading
it means importing PyYAML and parsing some hundred files: about 25 ms of a command that
otherwise takes 60-100. So the model is pickled once and kept beside the compiled config,
keyed the same way: the identity of every config file and folder (paths.config_fingerprint)
and of the modules that load it. A kept copy with any other key is never used.

Only root's own copy counts (files.read_trusted: a regular file of this user's that nobody
else can write, in the state dir that every run refuses when others can write it), so
unpickling it trusts nothing a user who is not root could have written. Any other copy, a
damaged one, or one that cannot be written is only a cache: the files are read instead.
`nm-zones check` never uses it: it reads the files, as an admin who just edited them expects.
"""

from __future__ import annotations

import io
import os
import pickle

from ..files import read_trusted
from ..paths import Paths, code_identity, config_fingerprint
from .model import LoadResult

KEPT_FILE = "loaded"
KEPT_VERSION = 1
# The modules whose code decides what a load gives: a changed nm-zones reads the files again.
LOADER_MODULES = (
    "addresses.py",
    "config/appname.py",
    "config/load.py",
    "config/model.py",
    "config/yamlsource.py",
    "errors.py",
    "files.py",
    "lazy.py",
    "paths.py",
    "protocols.py",
)


def load_kept(paths: Paths) -> LoadResult:
    """The configuration as config.load.load(paths) gives it, read from the files only when
    they (or the loader) changed since the kept copy was made."""
    path = os.path.join(paths.state, KEPT_FILE)
    key = (KEPT_VERSION, code_identity(LOADER_MODULES), config_fingerprint(paths))
    try:
        stream = io.BytesIO(read_trusted(path) or b"")
        if pickle.load(stream) == key:  # the key first: nothing else is unpickled otherwise
            kept = pickle.load(stream)
            if isinstance(kept, LoadResult):
                return kept
    except Exception:  # absent, damaged, untrusted or made by other code: read the files
        pass
    from .load import load

    result = load(paths)  # the key was taken before: a file changed meanwhile is read again
    if os.path.isdir(paths.state):
        from ..files import write_atomically

        data = pickle.dumps(key, pickle.HIGHEST_PROTOCOL)
        data += pickle.dumps(result, pickle.HIGHEST_PROTOCOL)
        try:  # noqa: SIM105 - contextlib would cost a command its import
            write_atomically(path, data, 0o600)
        except OSError:  # not root, or read-only: work without it
            pass
    return result
