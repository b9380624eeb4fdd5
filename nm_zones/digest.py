"""A short, stable fingerprint of a text, without importing hashlib (which loads OpenSSL)."""

from __future__ import annotations

import sys

try:
    from _sha256 import sha256  # Python 3.11 (Debian 12's): tried first, a failed import costs
except ImportError:
    try:
        from _sha2 import sha256  # Python 3.12 and later
    except ImportError:
        from hashlib import sha256


def fingerprint(text: str) -> str:
    return sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def bulk_sha256():
    """SHA-256 for hashing a lot (a legacy table's chains: 1 MB with 200 interfaces bound):
    OpenSSL's when the process has loaded it anyway (the D-Bus service; some six times
    faster here), else the built-in one (an event does not pay 2-3 ms to load OpenSSL).
    The same digests either way."""
    openssl = sys.modules.get("_hashlib")
    return getattr(openssl, "openssl_sha256", sha256)
