"""Interface names: which ones nm-zones can match exactly, and the chain names they get.

Linux allows any byte in an interface name except `/`, `:`, whitespace and NUL, up to 15 bytes.
iptables reads a trailing `+` as "any interface with this prefix" and a leading `!` as negation,
so such names cannot be matched exactly: they are refused rather than risk matching another
interface. Quotes and backslashes would not survive iptables-save text: refused too. nft reads a
trailing `*` as a wildcard unless it is escaped, and a name of 15 bytes escaped so no longer
fits its 16: refused as well.
"""

from __future__ import annotations

from _socket import if_nametoindex

from .digest import fingerprint
from .errors import UsageError

IFNAMSIZ = 15
# what an interface name may be made of to be its own chain token (and a zone name is)
TOKEN_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_REFUSED = set("/: \t\n\r\v\f\"'\\+!")


def check_interface(name: str) -> str:
    """Return the name if nm-zones can filter it exactly; raise UsageError saying why not."""
    if not name:
        raise UsageError("interface name is empty")
    if len(name.encode("utf-8", "surrogateescape")) > IFNAMSIZ:
        raise UsageError(f"interface name {name!r} is longer than {IFNAMSIZ} bytes")
    if name in (".", ".."):
        raise UsageError(f"interface name {name!r} is not valid")
    if not name.isascii() or not name.isprintable():
        raise UsageError(f"interface name {name!r}: only printable ASCII names are supported")
    bad = sorted(set(name) & _REFUSED)
    if bad:
        shown = " ".join(repr(c) for c in bad)
        raise UsageError(
            f"interface name {name!r} contains {shown}, which iptables cannot match exactly "
            "('+' is a wildcard, '!' a negation); rename the interface"
        )
    if name.startswith("-"):
        raise UsageError(f"interface name {name!r} must not start with '-'")
    if name.endswith("*") and len(name) == IFNAMSIZ:
        # nft matches a trailing `*` literally only escaped (`\*`), and the escaped name no
        # longer fits nft's 16 bytes
        raise UsageError(
            f"interface name {name!r} is {IFNAMSIZ} bytes long and ends in '*', which "
            "nftables cannot match exactly ('*' is a wildcard); rename the interface"
        )
    return name


def chain_token(name: str) -> str:
    """A short, unique, iptables-safe stand-in for the interface in chain names."""
    if name and set(name) <= TOKEN_CHARACTERS:
        return name
    # `~` never appears in a plain token, so hashed and plain tokens cannot collide.
    return "~" + fingerprint(name)[:12]


def chain_name(name: str, kind: str) -> str:
    """`nmz-if-eth0-in`: at most 7 + 15 + 5 = 27 characters, within iptables' 28.

    No kind's `-KIND` ends another's (in, fwd, fout, pre, post, raw), so the chains of two
    interfaces never share a name.
    """
    return f"nmz-if-{chain_token(name)}-{kind}"


def matches_exempt(name: str, patterns: tuple[str, ...]) -> bool:
    """`lo` matches exactly, `docker*` matches any name starting with `docker`."""
    for pattern in patterns:
        if pattern.endswith("*"):
            if name.startswith(pattern[:-1]):
                return True
        elif name == pattern:
            return True
    return False


def interface_index(name: str) -> int:
    """The kernel's index for the name, 0 when no such interface exists (a cheap check)."""
    try:
        return if_nametoindex(name)
    except OSError:
        return 0


SIOCGIFINDEX = 0x8933  # linux/sockios.h
ENODEV = 19  # errno's value on Linux
IFREQ = "16si20x"  # struct ifreq: the name, then ifr_ifindex in the 24-byte union


def interface_indexes(names) -> dict[str, int]:
    """interface_index of each name, asked over one socket: glibc's if_nametoindex opens and
    closes a socket per name, 1 ms of a run that checks 200 bound interfaces. Unlike it,
    only the kernel's "no such device" is 0: the caller removes the rules of interfaces
    found gone, so any other failure is raised rather than taken for one."""
    from _socket import AF_UNIX, SOCK_CLOEXEC, SOCK_DGRAM, socket
    from _struct import pack, unpack_from
    from fcntl import ioctl

    found = {}
    sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC)  # _socket's: no context manager
    try:
        for name in names:
            encoded = name.encode("utf-8", "surrogateescape")
            index = 0
            if 0 < len(encoded) <= IFNAMSIZ and b"\0" not in encoded:
                try:
                    answer = ioctl(sock.fileno(), SIOCGIFINDEX, pack(IFREQ, encoded, 0))
                    index = unpack_from(IFREQ, answer)[1]
                except OSError as error:
                    if error.errno != ENODEV:  # not an answer about the name: no guess
                        raise
            found[name] = index
    finally:
        sock.close()
    return found
