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

from .digest import fingerprint, sha256

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
READ_ATTEMPTS = 20


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
    """(hook entry offsets, the table's entries) as the kernel hands them to iptables-save;
    read again when another program replaced the table between the two reads (EAGAIN)."""
    import errno

    for _ in range(READ_ATTEMPTS - 1):
        try:
            return _table_blob(family, table)
        except ReadError as error:
            if error.errno != errno.EAGAIN:
                raise
    return _table_blob(family, table)


def _table_blob(family: str, table: str) -> tuple[tuple[int, ...], bytes]:
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


def _text(data) -> str:
    return bytes(data).split(b"\0", 1)[0].decode("latin-1")


def view_of(family: str, hooks: tuple[int, ...], blob: bytes) -> dict:
    """{chain: fingerprint} for every nmz- chain, plus {builtin: (nmz- chains it jumps to)}.

    One pass over the entries (with hundreds of interfaces bound, a table holds thousands):
    a copy of the table has what changes by itself (counters, nfcache, comefrom) zeroed and
    every jump's offset replaced by a checksum of its target's name; then each nmz- chain is
    hashed as the one stretch of that copy it is.
    """
    from zlib import crc32

    ip_size, offsets_at, entry_size = LAYOUT[family]
    masked = bytearray(blob)
    zeros = bytes(entry_size - ip_size)
    starts = {offset: HOOK_NAMES[h] for h, offset in enumerate(hooks) if offset >= 0}
    heads: list[int] = []  # where each user chain's ERROR entry begins
    jumps: list[tuple[int, int]] = []  # (offset of the verdict, the offset it jumps to)
    offset, length = 0, len(blob)
    while offset + entry_size <= length:
        at = offset + offsets_at
        target_offset = blob[at] | blob[at + 1] << 8
        next_offset = blob[at + 2] | blob[at + 3] << 8
        if target_offset < entry_size or next_offset < target_offset:
            break  # not an entry: never loop forever on a table we do not understand
        masked[offset + ip_size : offset + entry_size] = zeros
        name_at = offset + target_offset + 2
        if blob[name_at] == 0:  # the standard target: a verdict, or a jump when >= 0
            verdict_at = offset + target_offset + 32
            verdict = int.from_bytes(blob[verdict_at : verdict_at + 4], "little", signed=True)
            if verdict >= 0:
                jumps.append((verdict_at, verdict))
        elif blob[name_at : name_at + 6] == b"ERROR\0":  # a user chain's head
            heads.append(offset)
            starts[offset + next_offset] = _text(blob[name_at + 30 : name_at + 62])
        offset += next_offset
    from bisect import bisect_right

    bounds = sorted(set(starts) | set(heads) | {offset})
    chain_of = [starts.get(bound, "") for bound in bounds]
    view: dict[str, object] = {}
    for verdict_at, verdict in jumps:
        target = starts.get(verdict, f"@{verdict}")
        masked[verdict_at : verdict_at + 4] = crc32(target.encode()).to_bytes(4, "little")
        chain = chain_of[bisect_right(bounds, verdict_at) - 1]
        if chain in HOOK_NAMES and target.startswith(PREFIX):
            view[chain] = (*view.get(chain, ()), target)
    for index, bound in enumerate(bounds[:-1]):
        chain = chain_of[index]
        if chain.startswith(PREFIX):
            view[chain] = sha256(masked[bound : bounds[index + 1]]).hexdigest()[:32]
    return view


def read_view(family: str, table: str) -> dict:
    """What the kernel holds of nm-zones in one table ({} when the table is not loaded)."""
    if table not in loaded_tables(family):
        return {}
    return view_of(family, *table_blob(family, table))


def view_digest(view: dict) -> str:
    return fingerprint(repr(sorted(view.items())))
