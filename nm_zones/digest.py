"""A short, stable fingerprint of a text, without importing hashlib (which loads OpenSSL)."""

from __future__ import annotations

try:
    from _sha256 import sha256  # Python 3.11 (Debian 12's): tried first, a failed import costs
except ImportError:
    try:
        from _sha2 import sha256  # Python 3.12 and later
    except ImportError:
        from hashlib import sha256


def fingerprint(text: str) -> str:
    return sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]
