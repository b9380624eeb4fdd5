"""Edit one key of the admin's connections map, keeping its comments and layout."""

from __future__ import annotations

import os
import re

from ..errors import UsageError
from ..files import write_atomically
from ..paths import SHIPPED_DIR, Paths

MAP_NAME = "connections-map.yaml"


def commented_map() -> str:
    """The shipped map with every line commented out: an admin's map overrides the shipped
    one key by key, so with nothing set the shipped values (exempt-interfaces above all)
    keep following upgrades."""
    with open(os.path.join(SHIPPED_DIR, MAP_NAME), encoding="utf-8") as f:
        shipped = f.read().splitlines()
    lines = [
        "# nm-zones connections map of this machine. A key set here replaces the same key of",
        "# the shipped map (shown below, commented out); keys left out keep the shipped value,",
        "# which follows upgrades. Uncomment and edit only what you change.",
        "#",
    ]
    lines += [f"# {line}" if line else "#" for line in shipped]
    return "\n".join(lines) + "\n"


def set_map_zone(paths: Paths, key: str, zone: str) -> str:
    """Set `key: zone` in /etc/nm-zones/connections-map.yaml (made first, all commented out
    as `nm-zones install` writes it, if the admin has none: the other keys keep following
    the shipped map). Returns the file's path."""
    path, text = _admin_map(paths)
    line = f"{key}: {zone}" if zone else f"{key}:"
    pattern = re.compile(rf"^{re.escape(key)}:[^\n]*$", re.MULTILINE)
    text = pattern.sub(line, text, count=1) if pattern.search(text) else text + f"\n{line}\n"
    _write(path, text)
    return path


def set_connection_zone(paths: Paths, uuid: str, zone: str) -> str:
    """Map a connection's UUID to `zone` under `connections:` (a block mapping, or `{}`),
    replacing an entry it had; the result must load, else the file is left as it was."""
    from .load import load_map

    path, old = _admin_map(paths)
    entry = f"  {uuid!r}: {zone}"
    lines = old.split("\n")
    heads = [n for n, line in enumerate(lines) if re.match(r"^connections:\s*(\{\s*\})?\s*$", line)]
    if heads:
        head = heads[0]
        body = head + 1
        while body < len(lines) and (lines[body].startswith((" ", "\t")) or not lines[body]):
            body += 1
        kept = [line for line in lines[head + 1 : body] if not _entry_of(line, uuid)]
        lines[head:body] = ["connections:", entry, *kept]
        text = "\n".join(lines)
    elif re.search(r"^connections:", old, re.MULTILINE):
        raise UsageError(
            f"{path}: cannot add {uuid}: {zone} to its connections (write it as a block mapping)"
        )
    else:
        text = old.rstrip("\n") + f"\n\nconnections:\n{entry}\n"
    _write(path, text)
    shipped = os.path.join(paths.shipped, MAP_NAME)
    if load_map(path, shipped)[0] is None:
        _write(path, old)
        raise UsageError(f"{path}: with {uuid}: {zone} added it would not load; left as it was")
    return path


def _entry_of(line: str, uuid: str) -> bool:
    return line.strip().split(":", 1)[0].strip("'\"") == uuid


def _admin_map(paths: Paths) -> tuple[str, str]:
    """The path and text of the admin's map, made first if there is none."""
    path = os.path.join(paths.config, MAP_NAME)
    if not os.path.exists(path):
        os.makedirs(paths.config, mode=0o755, exist_ok=True)
        write_atomically(path, commented_map().encode("utf-8"), 0o644)
    with open(path, encoding="utf-8") as stream:
        return path, stream.read()


def _write(path: str, text: str) -> None:
    info = os.stat(path)
    write_atomically(path, text.encode("utf-8"), info.st_mode & 0o7777)
