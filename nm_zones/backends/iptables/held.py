"""What the kernel holds of nm-zones, read straight from x_tables: one getsockopt per table.

The kernel is the truth, not the state file: another program may flush a chain, delete a
hook or restore an old ruleset behind nm-zones' back. After each of its own commits nm-zones
records a *view* of each table it committed: every `nmz-` chain as a fingerprint of its rules
(counters left out, jumps by chain name, so other programs' rules and traffic never change
it) and, per built-in chain, the `nmz-` chains it jumps to (a panic chain marked when a rule
of another program comes before it: panic mode must come first), and the rule numbers of
any other program's rule ahead of nm-zones' first jump that can let a packet past it
(BYPASS). A run that finds a different view knows at once that something of nm-zones' was
changed, and rebuilds that table (which puts nm-zones' jumps back on top).

Only ctypes and the socket module's C core are imported: the quick path of every event uses
this (python-iptables costs ten times more to import).
"""

from __future__ import annotations

import os
from _struct import Struct

from ...digest import bulk_sha256, fingerprint
from ...errors import SystemFailure
from ...ruleset.layout import PANIC_CHAINS

# getsockopt numbers from <linux/netfilter_ipv4/ip_tables.h> (the same for IPv6)
SO_GET_INFO, SO_GET_ENTRIES = 64, 65
LEVEL = {"ipv4": 0, "ipv6": 41}  # IPPROTO_IP, IPPROTO_IPV6
# per family (struct ipt_entry, ip6t_entry): the size of its ip part, where its target_offset
# and next_offset sit, and its size; nfcache, comefrom and the counters are left out of a view
LAYOUT = {"ipv4": (84, 88, 112), "ipv6": (136, 140, 168)}
TABLE_NAMES_FILE = {"ipv4": "/proc/net/ip_tables_names", "ipv6": "/proc/net/ip6_tables_names"}
HOOK_NAMES = ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING")
BUILTIN_NAMES = frozenset(HOOK_NAMES)
INFO_SIZE = 84  # struct ipt_getinfo
ENTRIES_HEADER = 40  # struct ipt_get_entries, up to its 8-byte aligned entry table
PREFIX = "nmz-"
FIRST = frozenset(chain for _, chain, _ in PANIC_CHAINS)  # jumped to first, or marked
READ_ATTEMPTS = 20
BYPASS = " bypass"  # the view's key for a built-in chain's rules ahead of nm-zones' jump
# standard verdicts (-verdict - 1): NF_ACCEPT is 1, XT_RETURN is NF_REPEAT (4)
ACCEPT, RETURN = -2, -5
# where struct ipt_ip / ip6t_ip6 keeps its flags, and the flag that makes a jump a goto
GOTO_FLAG = {"ipv4": (82, 0x02), "ipv6": (131, 0x04)}
ENTRY_OFFSETS = Struct("=HH")  # an entry's target_offset and next_offset
TARGET_SIZE = 32  # struct xt_entry_target: every entry's target has at least its size and name
VERDICT = Struct("=i")  # a standard target's verdict, 32 bytes into the target


class ReadError(SystemFailure):
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
    from _socket import AF_INET, AF_INET6, SOCK_RAW, socket

    getsockopt = _getsockopt()
    sock = socket(AF_INET if family == "ipv4" else AF_INET6, SOCK_RAW, 255)
    try:
        name = table.encode()
        raw = getsockopt(sock.fileno(), LEVEL[family], SO_GET_INFO, name, INFO_SIZE, table)
        valid_hooks = int.from_bytes(raw[32:36], "little")
        hooks = tuple(
            int.from_bytes(raw[36 + 4 * h : 40 + 4 * h], "little") if valid_hooks & (1 << h) else -1
            for h in range(5)
        )
        size = int.from_bytes(raw[80:84], "little")
        request = name.ljust(32, b"\0") + size.to_bytes(4, "little")
        entries = getsockopt(
            sock.fileno(),
            LEVEL[family],
            SO_GET_ENTRIES,
            request,
            ENTRIES_HEADER + size,
            table,
            skip=ENTRIES_HEADER,
        )
        return hooks, entries
    finally:
        sock.close()


_process_getsockopt: Getsockopt | None = None


def _getsockopt() -> Getsockopt:
    """One per process, built at its first read: its ctypes classes would cost each table
    read 0.06 ms more (a run reads six tables; the service does on every call)."""
    global _process_getsockopt
    _process_getsockopt = _process_getsockopt or Getsockopt()
    return _process_getsockopt


class Getsockopt:
    """getsockopt(2) with a buffer that carries input (the table's name) as well as output,
    which Python's socket module cannot do. Called through clib (on _ctypes itself): the
    ctypes package costs every event 2-3 ms more to import, and the quick path of every
    event reads the tables."""

    def __init__(self):
        import _ctypes

        from ..clib import Functions

        calls = {"getsockopt": ("i", "iiiPP")}  # fd, level, option, buffer, &length
        self.libc = Functions(_ctypes.dlopen(None, 0), calls, use_errno=True)

    def __call__(
        self, fd: int, level: int, option: int, data: bytes, size: int, what: str, skip: int = 0
    ) -> bytes:
        """The buffer of `size` bytes, `data` at its start, as the kernel filled it, from
        byte `skip` on. Copied out through a memoryview: ctypes' `raw` copies a megabyte
        (a table with 200 interfaces bound) some 30 times slower."""
        libc = self.libc
        buffer = libc.buffer(size)
        buffer[: len(data)] = data
        length = libc.c_uint(size)
        if libc.getsockopt(fd, level, option, buffer, libc.pointer_to(length)):
            number = libc.errno()
            raise ReadError(number, f"{what}: {os.strerror(number)}")
        return bytes(memoryview(buffer)[skip:])


def _text(data) -> str:
    return bytes(data).split(b"\0", 1)[0].decode("latin-1")


def view_of(family: str, hooks: tuple[int, ...], blob: bytes) -> dict:
    """{chain: fingerprint} for every nmz- chain, plus {builtin: (nmz- chains it jumps to)}.

    One pass over the entries (with hundreds of interfaces bound, a table holds thousands):
    a copy of the table has what changes by itself (counters, nfcache, comefrom) zeroed and
    every jump's offset replaced by a checksum of its target's name; then each nmz- chain is
    hashed as the one stretch of that copy it is.
    """
    return _view_of_walked(_walk(family, hooks, blob))


def _view_of_walked(walked: _Walked) -> dict:
    bounds = sorted(set(walked.starts) | set(walked.heads) | {walked.end})
    chain_of = [walked.starts.get(bound, "") for bound in bounds]
    view: dict[str, object] = _name_jumps(walked, bounds, chain_of)
    sha256, masked = bulk_sha256(len(walked.masked)), memoryview(walked.masked)
    for index, bound in enumerate(bounds[:-1]):
        chain = chain_of[index]
        if chain.startswith(PREFIX):
            view[chain] = sha256(masked[bound : bounds[index + 1]]).hexdigest()[:32]
    view.update(_bypasses(walked, bounds, chain_of))
    return view


class _Walked:
    """What one pass over a table's entries found (view_of)."""

    def __init__(self, family: str, blob: bytes, starts: dict[int, str]):
        self.family, self.blob = family, blob  # a chain's rules are read from it when asked
        self.masked = bytearray(blob)  # counters, nfcache, comefrom zeroed
        self.starts = starts  # offset -> the chain that begins there
        self.heads: list[int] = []  # where each user chain's ERROR entry begins
        # (offset of the verdict, the offset it jumps to, whether its rule heads a built-in)
        self.jumps: list[tuple[int, int, bool]] = []
        self.sizes: list[int] = []  # each entry's next_offset, in table order (_Proof's)
        self.end = 0  # where the entries end


def _walk(family: str, hooks: tuple[int, ...], blob: bytes) -> _Walked:
    ip_size, offsets_at, entry_size = LAYOUT[family]
    hook_starts = {offset: HOOK_NAMES[h] for h, offset in enumerate(hooks) if offset >= 0}
    walked = _Walked(family, blob, hook_starts)
    masked, starts, jumps, sizes = walked.masked, walked.starts, walked.jumps, walked.sizes
    zeros = bytes(entry_size - ip_size)
    offsets_of, verdict_of = ENTRY_OFFSETS.unpack_from, VERDICT.unpack_from
    offset, length = 0, len(blob)
    last_verdict = length - VERDICT.size
    while offset + entry_size <= length:
        target_offset, next_offset = offsets_of(blob, offset + offsets_at)
        if target_offset < entry_size or next_offset < target_offset + TARGET_SIZE:
            break  # _entries' checks, inline
        if offset + next_offset > length:
            break
        masked[offset + ip_size : offset + entry_size] = zeros
        sizes.append(next_offset)
        name_at = offset + target_offset + 2
        if not blob[name_at]:  # the standard target: a verdict, or a jump when >= 0
            verdict_at = name_at + 30
            if verdict_at > last_verdict:
                break
            verdict = verdict_of(blob, verdict_at)[0]
            if verdict >= 0:
                jumps.append((verdict_at, verdict, offset in starts))
        elif blob[name_at : name_at + 6] == b"ERROR\0":  # a user chain's head
            walked.heads.append(offset)
            starts[offset + next_offset] = _text(blob[name_at + 30 : name_at + 62])
        offset += next_offset
    walked.end = offset
    return walked


def _name_jumps(walked: _Walked, bounds: list[int], chain_of: list[str]) -> dict[str, object]:
    """Each jump's offset in the copy replaced by a checksum of its target's name; and
    {builtin: (the nmz- chains it jumps to)}, `@below` marking a first jump not first."""
    from zlib import crc32

    view: dict[str, object] = {}
    index, last, masked, starts = 0, len(bounds) - 1, walked.masked, walked.starts
    named: dict[int, tuple[str, bytes]] = {}  # jumped-to offset -> its name, its checksum
    for verdict_at, verdict, first in walked.jumps:  # in table order, like the bounds
        while index < last and bounds[index + 1] <= verdict_at:
            index += 1
        target_named = named.get(verdict)
        if target_named is None:
            name = starts.get(verdict, f"@{verdict}")
            target_named = named[verdict] = (name, crc32(name.encode()).to_bytes(4, "little"))
        target, masked[verdict_at : verdict_at + 4] = target_named
        chain = chain_of[index]
        if chain in BUILTIN_NAMES and target.startswith(PREFIX):
            mark = "@below" if target in FIRST and not first else ""
            view[chain] = (*view.get(chain, ()), target + mark)
    return view


def _rules_by_chain(walked: _Walked, bounds, chain_of):
    """chain -> its rules as (verdict or None for another target, goto), read from the
    table when asked: the built-in chains and the few chains their rules ahead of nm-zones'
    jump lead to, not the whole table's (the walk stays one short loop per entry)."""
    from bisect import bisect_left

    blob = walked.blob
    flag_at, goto_flag = GOTO_FLAG[walked.family]
    begins = {chain: bounds[index] for index, chain in enumerate(chain_of) if chain}

    def rules_of(chain: str) -> list[tuple[int | None, bool]]:
        begin = begins.get(chain)
        if begin is None:
            return []
        after = bisect_left(bounds, begin) + 1
        end = min(bounds[after] if after < len(bounds) else begin, walked.end)
        found = []
        # entries the walk found whole, none of them an ERROR head; _entries' checks are for
        # a begin that is no entry's (the kernel never hands out such a hook offset)
        for offset, target_offset, _ in _entries(walked.family, blob, begin, end):
            name_at = offset + target_offset + 2
            if blob[name_at]:
                found.append((None, False))  # another target (LOG, REJECT, MARK, ...)
            elif name_at + 30 + VERDICT.size > len(blob):
                break
            else:
                verdict = VERDICT.unpack_from(blob, name_at + 30)[0]
                found.append((verdict, bool(blob[offset + flag_at] & goto_flag)))
        return found

    return rules_of


def _bypasses(walked: _Walked, bounds, chain_of) -> dict[str, tuple[int, ...]]:
    """{"INPUT bypass": (rule numbers, from 1)} for each built-in chain where another
    program's rule ahead of nm-zones' first jump can accept a packet before nm-zones sees it:
    an ACCEPT, a RETURN (the policy decides), a goto (its RETURN does too), or a jump to a
    chain that can accept. Other rules ahead (a DROP, a LOG, docker's DOCKER-USER that
    returns) change nothing nm-zones promises, and are left alone."""
    rules_of, starts = _rules_by_chain(walked, bounds, chain_of), walked.starts
    memo: dict[str, bool] = {}

    def can_accept(chain: str) -> bool:
        """Whether a packet jumping to a user chain can come out accepted."""
        if chain not in memo:
            memo[chain] = False  # a loop accepts nothing the kernel would let it
            memo[chain] = any(
                verdict == ACCEPT
                or (verdict is not None and verdict >= 0 and can_accept(starts.get(verdict, "")))
                for verdict, _ in rules_of(chain)
            )
        return memo[chain]

    found = {}
    for chain in HOOK_NAMES:
        ahead = []
        for number, (verdict, goto) in enumerate(rules_of(chain), 1):
            target = starts.get(verdict, "") if verdict is not None and verdict >= 0 else ""
            if target.startswith(PREFIX):
                if ahead:
                    found[chain + BYPASS] = tuple(ahead)
                break
            if verdict in (ACCEPT, RETURN) or (target and (goto or can_accept(target))):
                ahead.append(number)
    return found


def read_view(family: str, table: str) -> dict:
    """What the kernel holds of nm-zones in one table ({} when the table is not loaded)."""
    if table not in loaded_tables(family):
        return {}
    return view_of(family, *table_blob(family, table))


class HeldTables:
    """read_view for a process that reads the same tables again and again (the D-Bus
    service, a run that checks a table before and after its commits): each view is kept
    with a proof of the table it was made from, and a table read again that the proof
    matches is that table, whose view is the one already made. The walk (most of a read
    with hundreds of interfaces bound) is then skipped; the kernel is still read every time.

    The proof: the table's hook offsets, its length, and every byte of its entries but
    the ones the kernel changes by itself (comefrom and the counters), compared byte for
    byte (a digest would cost more than the walk saved: SHA-256 without OpenSSL hashes some
    300 MB/s, and a table with 200 interfaces bound is 1 MB). The next_offset fields are
    among the bytes compared, so equal bytes mean the entries start where they started
    before, one after the other: the same table, rule for rule.
    """

    def __init__(self):
        # (family, table) -> (hook offsets, the proof of the table, the view made from it)
        self._kept: dict[tuple[str, str], tuple[tuple[int, ...], _Proof, dict]] = {}

    def read_view(self, family: str, table: str) -> dict:
        if table not in loaded_tables(family):
            self._kept.pop((family, table), None)
            return {}
        hooks, blob = table_blob(family, table)
        kept = self._kept.get((family, table))
        if kept is not None and kept[0] == hooks and kept[1].matches(blob):
            return dict(kept[2])
        walked = _walk(family, hooks, blob)
        view = _view_of_walked(walked)
        self._kept[(family, table)] = (hooks, _Proof(walked), view)
        return dict(view)


class _Proof:
    """A table's entries, all but each one's comefrom and counters, to compare a later read
    with. Made the first time a read of the same length asks: a process that reads a table
    once, or reads it again after a commit of its own that changed its length (most do),
    pays only for keeping a reference to what it read."""

    def __init__(self, walked: _Walked):
        # what was read, with its entries' sizes as the walk found them, two bytes each (a
        # service keeps one proof per table, and each table has thousands of entries)
        sizes = walked.sizes
        packed = Struct(f"={len(sizes)}H").pack(*sizes)
        self._source: tuple[str, bytes, bytes] | None = (walked.family, walked.blob, packed)
        self._compared = Struct("")
        self._bytes = b""

    def matches(self, blob: bytes) -> bool:
        if self._source is not None:
            family, kept, packed = self._source
            if len(kept) != len(blob):
                return False  # a commit of this process changed it: nothing to build
            sizes = memoryview(packed).cast("H")
            self._compared = _compared_bytes(family, sizes, len(kept))
            self._bytes, self._source = b"".join(self._compared.unpack(kept)), None
        if self._compared.size != len(blob):
            return False
        return b"".join(self._compared.unpack(blob)) == self._bytes


def _entries(family: str, blob: bytes, begin: int, end: int):
    """(offset, target_offset, next_offset) of each entry from `begin` up to `end`, as far
    as they are entries whole (_walk makes the same checks inline: it runs once per entry of
    every table read)."""
    _, offsets_at, entry_size = LAYOUT[family]
    offsets_of, offset = ENTRY_OFFSETS.unpack_from, begin
    while offset + entry_size <= end:
        target_offset, next_offset = offsets_of(blob, offset + offsets_at)
        if target_offset < entry_size or next_offset < target_offset + TARGET_SIZE:
            return  # not an entry: never loop forever on a table we do not understand
        if offset + next_offset > end:
            return  # nor read past its end
        yield offset, target_offset, next_offset
        offset += next_offset


def _compared_bytes(family: str, sizes, length: int) -> Struct:
    """A Struct that picks, from a table of entries of these sizes, every byte but each
    entry's comefrom and counters (pad bytes), the bytes in between as one string each.
    (Its format is joined from one piece per distinct size: a table holds thousands of
    entries of a few dozen sizes.)"""
    if not sizes:
        return Struct(f"={length}s")
    _, offsets_at, entry_size = LAYOUT[family]
    head = offsets_at + 4  # the ip part, nfcache, target_offset and next_offset
    skipped = entry_size - head  # comefrom and the counters
    # an entry's skipped bytes, then the rest of it and the head of the next one
    piece = {size: f"{skipped}x{size - entry_size + head}s" for size in set(sizes)}
    tail = length - sum(sizes) + sizes[-1] - entry_size
    return Struct(f"={head}s" + "".join(map(piece.__getitem__, sizes[:-1])) + f"{skipped}x{tail}s")


def view_digest(view: dict) -> str:
    return fingerprint(repr(sorted(view.items())))
