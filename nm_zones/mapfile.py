"""Edit one key of the admin's connections map, keeping its comments and layout."""

from __future__ import annotations

import os
import re
import shutil

from .paths import Paths
from .state import write_atomically


def set_map_zone(paths: Paths, key: str, zone: str) -> str:
    """Set `key: zone` in /etc/nm-zones/connections-map.yaml (a copy of the shipped map is
    made first if the admin has none). Returns the file's path."""
    path = os.path.join(paths.config, "connections-map.yaml")
    if not os.path.exists(path):
        os.makedirs(paths.config, mode=0o755, exist_ok=True)
        shutil.copyfile(os.path.join(paths.shipped, "connections-map.yaml"), path)
        os.chmod(path, 0o644)
    with open(path, encoding="utf-8") as stream:
        text = stream.read()
    line = f"{key}: {zone}" if zone else f"{key}:"
    pattern = re.compile(rf"^{re.escape(key)}:[^\n]*$", re.MULTILINE)
    text = pattern.sub(line, text, count=1) if pattern.search(text) else text + f"\n{line}\n"
    info = os.stat(path)
    write_atomically(path, text.encode("utf-8"), info.st_mode & 0o7777)
    return path
