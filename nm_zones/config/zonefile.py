"""`allow --permanent`: one item added to or removed from a list in the admin's zone file,
as a minimal edit of its text, so that the admin's comments, order and layout stay.

PyYAML does not write comments back, so the file is never re-dumped: the list is located
with PyYAML's composer (which knows where every node starts and ends in the text), and one
item is inserted or cut there (`ports: [22/tcp, 8080/tcp]`, a `- 8080/tcp` line, or a new
`ports: [8080/tcp]` line). The result must load with nm-zones' own loader, and hold the
change, before it replaces the old file atomically. An absent admin file starts as a copy of
the shipped one, comments included.
"""

from __future__ import annotations

import os
import tempfile

from ..errors import ConfigError, UsageError
from ..files import write_atomically
from ..paths import Paths


def edit_zone_file(paths: Paths, zone: str, key: str, item: str, add: bool) -> str | None:
    """Add `item` to (or remove it from) list `key` of the admin's file of `zone`; the path
    written, or None when the file already says so."""
    admin = os.path.join(paths.config, "zones.d", f"{zone}.yaml")
    shipped = os.path.join(paths.shipped, "zones.d", f"{zone}.yaml")
    source = admin if os.path.exists(admin) else shipped
    try:
        with open(source, encoding="utf-8") as stream:
            text = stream.read()
    except FileNotFoundError:
        raise UsageError(f"unknown zone {zone!r} (see: nm-zones zones)") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{source}: cannot be read ({error})") from None
    edited = edit_list(text, key, item, add, source)
    if edited is None:
        return None
    _validate(paths, zone, edited, admin, key, item, add)
    folder = os.path.dirname(admin)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    mode = os.stat(admin).st_mode & 0o777 if os.path.exists(admin) else 0o644
    write_atomically(admin, edited.encode("utf-8"), mode)
    return admin


def _validate(paths: Paths, zone: str, text: str, admin: str, key: str, item: str, add: bool):
    """The edited text must load without a problem and hold the change (or lack it)."""
    from .load import load, load_zone

    loaded = load(paths)
    with tempfile.TemporaryDirectory(prefix="nm-zones-") as folder:
        candidate = os.path.join(folder, f"{zone}.yaml")
        with open(candidate, "w", encoding="utf-8") as stream:
            stream.write(text)
        result, problems = load_zone(candidate, zone, loaded.config.services, set())
    if problems:
        from .model import Problem

        raise ConfigError(
            [
                Problem(admin, p.line, p.key, f"{p.message} (after the edit; file unchanged)")
                for p in problems
            ]
        )
    values = {
        "services": result.services,
        "applications": result.applications,
    }.get(key) or tuple(str(p) for p in result.ports)
    if (item in values) != add:
        raise UsageError(f"{admin}: the edit did not take; change {key} by hand")


def _loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _canonical(value: str, key: str) -> str:
    """A list item as allow/revoke name it (`8080/TCP` is `8080/tcp`)."""
    value = value.strip()
    return value.lower() if key == "ports" else value


def edit_list(text: str, key: str, item: str, add: bool, name: str = "zone file") -> str | None:
    """`text` with `item` added to or removed from the top-level list `key`; None when there
    is nothing to do. Only the characters of that one item (and its separator) change."""
    import yaml

    try:
        root = yaml.compose(text, Loader=_loader())
    except yaml.YAMLError as error:
        raise UsageError(f"{name}: not valid YAML, fix it first ({error})") from None
    if root is None:
        return _append_key(text, key, item) if add else None
    if not isinstance(root, yaml.MappingNode):
        raise UsageError(f"{name}: not a mapping of keys; fix it first")
    value = next((v for k, v in root.value if getattr(k, "value", None) == key), None)
    if value is None:
        return _append_key(text, key, item) if add else None
    if isinstance(value, yaml.ScalarNode) and value.value in ("", "~", "null"):
        if not add:
            return None
        colon = text.index(":", _key_end(root, key))
        return text[: colon + 1] + f" [{item}]" + text[value.end_mark.index :]
    if not isinstance(value, yaml.SequenceNode):
        raise UsageError(f"{name}: {key} is not a list; fix it first")
    items = value.value
    found = [
        i
        for i, node in enumerate(items)
        if isinstance(node, yaml.ScalarNode) and _canonical(node.value, key) == item
    ]
    if add:
        return None if found else _insert(text, value, item)
    if not found:
        return None
    for index in reversed(found):
        text = _cut(text, value, index)
        value = yaml.compose(text, Loader=_loader())
        value = next(v for k, v in value.value if getattr(k, "value", None) == key)
    return text


def _key_end(root, key: str) -> int:
    return next(k.end_mark.index for k, _ in root.value if getattr(k, "value", None) == key)


def _append_key(text: str, key: str, item: str) -> str:
    if text and not text.endswith("\n"):
        text += "\n"
    return text + f"{key}: [{item}]\n"


def _line_bounds(text: str, index: int) -> tuple[int, int]:
    """Start of the line holding `index`, and the index just past its newline."""
    start = text.rfind("\n", 0, index) + 1
    end = text.find("\n", index)
    return start, len(text) if end < 0 else end + 1


def _insert(text: str, sequence, item: str) -> str:
    items = sequence.value
    if sequence.flow_style:
        if items:
            at = items[-1].end_mark.index
            return text[:at] + f", {item}" + text[at:]
        at = text.rindex("]", 0, sequence.end_mark.index)
        return text[:at] + item + text[at:]
    last = items[-1]
    start, end = _line_bounds(text, last.start_mark.index)
    prefix = text[start : last.start_mark.index]
    if prefix.strip() != "-":  # an item that does not start its own line
        prefix = " " * max(last.start_mark.column - 2, 0) + "- "
    if not text[:end].endswith("\n"):
        text, end = text + "\n", end + 1
    return text[:end] + f"{prefix}{item}\n" + text[end:]


def _cut(text: str, sequence, index: int) -> str:
    items = sequence.value
    node = items[index]
    if sequence.flow_style:
        if len(items) == 1:
            return text[: node.start_mark.index] + text[node.end_mark.index :]
        if index > 0:
            return text[: items[index - 1].end_mark.index] + text[node.end_mark.index :]
        return text[: node.start_mark.index] + text[items[1].start_mark.index :]
    start, end = _line_bounds(text, node.start_mark.index)
    if text[start : node.start_mark.index].strip() == "-" and node.end_mark.index <= end:
        return text[:start] + text[end:]
    return text[: node.start_mark.index] + text[node.end_mark.index :]
