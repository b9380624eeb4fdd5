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


# how much a process hashes in bulk before OpenSSL's SHA-256 pays for loading it: loading
# costs some 3 ms, and the built-in one takes 3.4 ms a megabyte against OpenSSL's 0.6 here; a
# run reads each legacy filter table before and after its commit, so a table of this size
# means twice that at least, in each family (a whole read of nftables' table, once a run at
# most, holds as much with some 100 interfaces bound)
OPENSSL_WORTH = 512 * 1024


def bulk_sha256(amount: int = 0):
    """SHA-256 for hashing a lot (a legacy table's chains: 1 MB with 200 interfaces bound):
    OpenSSL's when the process has loaded it anyway (the D-Bus service) or when `amount`
    bytes are worth loading it for (some six times faster here), else the built-in one (an
    event with a few interfaces bound does not pay 3 ms to load OpenSSL). The same digests
    either way."""
    openssl = sys.modules.get("_hashlib")
    if openssl is None and amount >= OPENSSL_WORTH:
        try:
            import _hashlib as openssl
        except ImportError:  # a Python built without OpenSSL
            return sha256
    return getattr(openssl, "openssl_sha256", sha256)
