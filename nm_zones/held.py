"""What the kernel holds of nm-zones, read straight from x_tables: one getsockopt per table.

The kernel is the truth, not the state file: another program may flush a chain, delete a
hook or restore an old ruleset behind nm-zones' back. After each of its own commits nm-zones
records a *view* of each table it committed: every `nmz-` chain as a fingerprint of its rules
(counters left out, jumps by chain name, so other programs' rules and traffic never change
it) and, per built-in chain, the `nmz-` chains it jumps to. A run that finds a different
view knows at once that something of nm-zones' was changed, and rebuilds that table.

Only ctypes and the socket module's C core are imported: the quick path of every event uses
this (python-iptables costs ten times more to import).
"""

from __future__ import annotations

import os

from .digest import fingerprint

# getsockopt numbers from <linux/netfilter_ipv4/ip_tables.h> (the same for IPv6)
SO_GET_INFO, SO_GET_ENTRIES = 64, 65
LEVEL = {"ipv4": 0, "ipv6": 41}  # IPPROTO_IP, IPPROTO_IPV6
# per family (struct ipt_entry, ip6t_entry): the size of its ip part, where its target_offset
# and next_offset sit, and its size; nfcache, comefrom and the counters are left out of a view
LAYOUT = {"ipv4": (84, 88, 112), "ipv6": (136, 140, 168)}
TABLE_NAMES_FILE = {"ipv4": "/proc/net/ip_tables_names", "ipv6": "/proc/net/ip6_tables_names"}
HOOK_NAMES = ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING")
INFO_SIZE = 84  # struct ipt_getinfo
ENTRIES_HEADER = 40  # struct ipt_get_entries, up to its 8-byte aligned entry table
PREFIX = "nmz-"
READ_ATTEMPTS = 8
EAGAIN = 11


class ReadError(OSError):
    """The table could not be read (not root, or the kernel refused)."""


def loaded_tables(family: str) -> set[str]:
    """Tables the kernel has (asking for another one would load its module)."""
    try:
        with open(TABLE_NAMES_FILE[family]) as names:
            return set(names.read().split())
    except OSError:
        return set()


def table_blob(family: str, table: str) -> tuple[tuple[int, ...], bytes]:
    """(hook entry offsets, the table's entries) as the kernel hands them to iptables-save."""
    import ctypes
    from _socket import AF_INET, AF_INET6, SOCK_RAW, socket

    libc = ctypes.CDLL(None, use_errno=True)
    sock = socket(AF_INET if family == "ipv4" else AF_INET6, SOCK_RAW, 255)
    try:

        def get(option: int, buffer) -> None:
            length = ctypes.c_uint(len(buffer))
            if libc.getsockopt(sock.fileno(), LEVEL[family], option, buffer, ctypes.byref(length)):
                number = ctypes.get_errno()
                raise ReadError(number, f"{family} {table}: {os.strerror(number)}")

        name = table.encode()
        info = ctypes.create_string_buffer(name, INFO_SIZE)
        get(SO_GET_INFO, info)
        raw = info.raw
        valid_hooks = int.from_bytes(raw[32:36], "little")
        hooks = tuple(
            int.from_bytes(raw[36 + 4 * h : 40 + 4 * h], "little") if valid_hooks & (1 << h) else -1
            for h in range(5)
        )
        size = int.from_bytes(raw[80:84], "little")
        entries = ctypes.create_string_buffer(ENTRIES_HEADER + size)
        entries[:32] = name.ljust(32, b"\0")
        entries[32:36] = size.to_bytes(4, "little")
        get(SO_GET_ENTRIES, entries)
        return hooks, entries.raw[ENTRIES_HEADER:]
    finally:
        sock.close()


def _text(data: bytes) -> str:
    return data.split(b"\0", 1)[0].decode("latin-1")


def _entries(family: str, blob: bytes):
    """(offset, the entry's ip part and matches, its target) for each entry of a table."""
    ip_size, offsets_at, entry_size = LAYOUT[family]
    offset, length = 0, len(blob)
    while offset + entry_size <= length:
        target_offset = int.from_bytes(
            blob[offset + offsets_at : offset + offsets_at + 2], "little"
        )
        next_offset = int.from_bytes(
            blob[offset + offsets_at + 2 : offset + offsets_at + 4], "little"
        )
        if target_offset < entry_size or next_offset < target_offset:
            return  # not an entry: never loop forever on a table we do not understand
        body = blob[offset : offset + ip_size] + blob[offset + entry_size : offset + target_offset]
        yield offset, body, blob[offset + target_offset : offset + next_offset], next_offset
        offset += next_offset


def view_of(family: str, hooks: tuple[int, ...], blob: bytes) -> dict:
    """{chain: fingerprint} for every nmz- chain, plus {builtin: (nmz- chains it jumps to)}."""
    starts = {offset: HOOK_NAMES[h] for h, offset in enumerate(hooks) if offset >= 0}
    for offset, _, target, next_offset in _entries(family, blob):
        if _text(target[2:31]) == "ERROR":  # a user chain's head: its rules follow
            starts[offset + next_offset] = _text(target[32:64])
    view: dict[str, object] = {}
    rules: dict[str, list[bytes]] = {}
    chain = ""
    for offset, body, target, _ in _entries(family, blob):
        chain = starts.get(offset, chain)
        name = _text(target[2:31])
        jump = ""
        if name == "" and len(target) >= 36:  # the standard target: a verdict or a jump
            verdict = int.from_bytes(target[32:36], "little", signed=True)
            if verdict >= 0:
                jump = starts.get(verdict, f"@{verdict}")
        if chain.startswith(PREFIX) and name != "ERROR":
            rules.setdefault(chain, []).append(body + (jump.encode() if jump else target))
        elif chain in HOOK_NAMES and jump.startswith(PREFIX):
            view[chain] = (*view.get(chain, ()), jump)
    for name, entries in rules.items():
        view[name] = fingerprint("\n".join(entry.hex() for entry in entries))
    return view


def read_view(family: str, table: str) -> dict:
    """What the kernel holds of nm-zones in one table ({} when the table is not loaded).
    A table another program committed between the size and the entries read is read again
    (the kernel says EAGAIN: the read is outside the xtables lock)."""
    if table not in loaded_tables(family):
        return {}
    for attempt in range(READ_ATTEMPTS):
        try:
            return view_of(family, *table_blob(family, table))
        except ReadError as error:
            if error.errno != EAGAIN or attempt == READ_ATTEMPTS - 1:
                raise
    return {}  # not reached


def view_digest(view: dict) -> str:
    return fingerprint(repr(sorted(view.items())))
