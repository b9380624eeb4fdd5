"""Edit one key of the admin's connections map, keeping its comments and layout."""

from __future__ import annotations

import os
import re

from ..paths import Paths
from ..state import write_atomically


def set_map_zone(paths: Paths, key: str, zone: str) -> str:
    """Set `key: zone` in /etc/nm-zones/connections-map.yaml (made first, all commented out
    as `nm-zones install` writes it, if the admin has none: the other keys keep following
    the shipped map). Returns the file's path."""
    from ..doors.install import commented_map

    path = os.path.join(paths.config, "connections-map.yaml")
    if not os.path.exists(path):
        os.makedirs(paths.config, mode=0o755, exist_ok=True)
        write_atomically(path, commented_map().encode("utf-8"), 0o644)
    with open(path, encoding="utf-8") as stream:
        text = stream.read()
    line = f"{key}: {zone}" if zone else f"{key}:"
    pattern = re.compile(rf"^{re.escape(key)}:[^\n]*$", re.MULTILINE)
    text = pattern.sub(line, text, count=1) if pattern.search(text) else text + f"\n{line}\n"
    info = os.stat(path)
    write_atomically(path, text.encode("utf-8"), info.st_mode & 0o7777)
    return path
