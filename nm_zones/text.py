"""Text from others (connection names, interface names) made safe to show."""

from __future__ import annotations


def printable(text: str) -> str:
    """`text` with control, format (bidi overrides) and other unprintable characters
    escaped: a connection named with a newline cannot forge a line of output."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
