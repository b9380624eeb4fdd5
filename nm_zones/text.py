"""How text that nm-zones did not write is shown: connection names (anyone who may edit a
profile chooses them), the arguments of D-Bus calls (any local user sends them).

One representation for every door: `status`, the service's log lines and error replies, the
agent's notifications, the tray and the settings window escape the same characters the same
way.
"""

from __future__ import annotations

SHORT = 64  # characters kept of one argument in a log line or an error reply


def printable(text: str) -> str:
    """`text` with control, format (bidi overrides such as U+202E) and other unprintable
    characters written as Python escapes (`\\n`, `\\u202e`): a connection named with a
    newline cannot forge a line, one with U+202E cannot reverse what follows it."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shorten(text: str, limit: int = SHORT) -> str:
    """At most `limit` characters of `text`, then an ellipsis and the original length: a
    megabyte argument costs a log line a few dozen bytes, and the reader still sees its
    size."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…({len(text)} characters)"


def shown_value(value: object, limit: int = SHORT) -> str:
    """A value of a call as a log line shows it: a string quoted (repr, so escaped) and
    shortened; anything else (numbers, lists, dicts) by its repr, shortened."""
    if isinstance(value, str):
        quoted = repr(value[:limit])
        return quoted if len(value) <= limit else f"{quoted}…({len(value)} characters)"
    return shorten(repr(value), limit)


def shown_arguments(values: tuple, limit: int = SHORT) -> str:
    """`('block', 'eth0')` for a log line, every argument shortened."""
    return "(" + ", ".join(shown_value(value, limit) for value in values) + ")"


def duration_text(seconds: float) -> str:
    """`1h 5m`, `9m 12s`, `42s`: a time left, in its two largest units."""
    seconds = max(0, int(seconds))
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    if seconds or not parts:
        parts.append(f"{seconds}s")
    return " ".join(parts[:2])


def split_terse(line: str) -> list[str]:
    """Split one line of `nmcli -t` output: fields are separated by ':', with '\\:' and
    '\\\\' escaping a colon or backslash inside a field (names may contain both)."""
    fields, current, escaped = [], [], False
    for char in line:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ":":
            fields.append("".join(current))
            current = []
        else:
            current.append(char)
    fields.append("".join(current))
    return fields
