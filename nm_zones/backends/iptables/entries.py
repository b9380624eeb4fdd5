"""Kernel entries: one rule as the bytes x_tables takes, built by python-iptables.

python-iptables builds a rule by parsing each option with libxtables, which loads the
extension's shared library: about half a millisecond a rule, most of an event's work. An
entry depends only on the rule and on the kernel and libraries that built it, so entries are
kept in the state directory, keyed by the rule's spec (ruleset/plan.py), and an event builds
only the rules it has never seen: python-iptables is imported then and only then (kernel.py
commits through libiptc.py). The file is not used when the kernel, libxtables,
python-iptables or this module changes, nor when anyone but root could have written it; a
damaged entry is never handed to libiptc, and entries the kernel refuses are built afresh
(kernel.py).

Dispatch rules (`-i IFACE -j nmz-if-IFACE-in`) name the interface and the chain, so they are
not kept: each is a copy of one template entry per family, built by python-iptables, with
the interface, its mask and the jump target written into the bytes where x_tables has them.
Two more kinds are written into a kept entry of the same rule rather than built: a new
interface's flow-marking rule (its mark) and a timed allowance's rule (its deadline, in the
time match and the comment; the newest of each is kept whatever the config, _dated).
"""

from __future__ import annotations

import marshal
import os
import struct
import time

from ...errors import KernelError
from ...files import read_trusted, write_atomically
from ...ruleset.layout import IP_PROTOCOLS, NAT_TARGETS
from ...ruleset.plan import (
    DESTINATION,
    MATCHES,
    PROTOCOL,
    SOURCE,
    TARGET,
    TARGET_OPTIONS,
    Spec,
    make_spec,
)
from .held import ENTRY_OFFSETS, GOTO_FLAG, LAYOUT, TARGET_SIZE

ENTRIES_FILE = "entries"
ENTRIES_VERSION = 2
IFNAMSIZ_BYTES = 16
# where struct ipt_ip / ip6t_ip6 keeps iniface; outiface, iniface_mask and outiface_mask
# follow it, IFNAMSIZ bytes each
INTERFACE_FIELDS = {"ipv4": 16, "ipv6": 64}
# struct xt_entry_target: its size (u16), then the name (of a standard target: the chain's)
TARGET_NAME_OFFSET, TARGET_NAME_SIZE = 2, 29
TARGET_SIZE_FIELD = struct.Struct("=H")
CONNMARK_MARK = struct.Struct("=I")  # a CONNMARK target's ctmark, first in its data
STANDARD_TARGET_SIZE = TARGET_SIZE + 4  # struct xt_standard_target: the target and a verdict
# struct xt_nflog_info: len (u32), group, threshold, flags (u16), padding, prefix[64]
NFLOG_PREFIX_SIZE = 64
NFLOG_INFO = struct.Struct(f"=IHHH2x{NFLOG_PREFIX_SIZE}s")
NFLOG_THRESHOLD = 0  # as iptables 1.8 leaves it: the kernel sends each packet at once
TEMPLATE = make_spec("ACCEPT")  # `-j ACCEPT`: retargeted per dispatch rule
SPEC_FIELDS = MATCHES + 1
MARK_TEMPLATE_LABEL = "template"  # a flow-marking rule built with each build (_marked)
# a timed allowance's rule ends in these two matches (ruleset/allowances.py); struct
# xt_entry_match begins as xt_entry_target does: its size (u16), name, revision, then data
DATED_MATCHES = (("time", "datestop"), ("comment", "comment"))
TIME_DATE_STOP = struct.Struct("=I")  # struct xt_time_info: date_start, then date_stop
TIME_DATE_STOP_AT = 4
COMMENT_SIZE = 256  # struct xt_comment_info: the comment, NUL-padded
DATE_YEARS = (1970, 2038)  # the years libxt_time takes in a date (iptables 1.8.9)
DATED_KEPT = 16  # timed allowances' rules kept as templates (_dated_templates)


def kernel_identity() -> tuple:
    """What entry bytes depend on besides the rule and the libraries that built them (those
    are in `library_identity`): the kernel (match revisions are chosen by what it supports)
    and nm-zones' own code."""
    system = os.uname()
    from ...paths import code_identity

    code = code_identity(("backends/iptables/entries.py", "ruleset/layout.py"))
    return (ENTRIES_VERSION, system.release, system.version, code)


def file_identity(path: str) -> tuple:
    try:
        info = os.stat(path)
    except OSError:
        return (path,)
    return (path, info.st_size, info.st_mtime_ns)


def library_identity(iptc) -> tuple | None:
    """The files that built entries, as python-iptables loaded them: libxtables (structure
    layouts) and python-iptables' version file. Kept with the entries, and checked by a
    stat of each, so that a run that builds nothing never imports python-iptables. None
    when a file cannot be told by its path (python-iptables' plain import names libxtables
    by its soname alone): such entries are not kept."""
    library = getattr(iptc.xtables._lib_xtables, "_name", "")
    version = getattr(getattr(iptc, "version", None), "__file__", "") or ""
    identity = (file_identity(library), file_identity(version))
    if any(len(entry) != 3 or not os.path.isabs(entry[0]) for entry in identity):
        return None
    return identity


def unchanged(identity) -> bool:
    """Whether `identity`, as a file keeps it, is a library_identity whose files are still
    as they were."""
    if type(identity) is not tuple or len(identity) != 2:
        return False
    for entry in identity:
        if type(entry) is not tuple or len(entry) != 3 or type(entry[0]) is not str:
            return False
        if not os.path.isabs(entry[0]) or file_identity(entry[0]) != entry:
            return False
    return True


def usable(known) -> bool:
    """Whether entries read from the file have the shape this module gives them: (family,
    spec of six fields) -> bytes. Anything else is not used (a file from elsewhere)."""
    if type(known) is not dict:
        return False
    for key, data in known.items():
        if type(key) is not tuple or len(key) != 2 or key[0] not in LAYOUT:
            return False
        if type(key[1]) is not tuple or len(key[1]) != SPEC_FIELDS or type(data) is not bytes:
            return False
        if type(key[1][TARGET]) is not str or type(key[1][TARGET_OPTIONS]) is not tuple:
            return False
    return True


def python_iptables_tables(iptc, family: str) -> list:
    """The tables python-iptables keeps open, one object per name and family for the
    process: building a rule opens every table of the family (its Target asks each whether
    the target names a chain), and each open table holds a copy of the kernel's, several
    MiB with hundreds of interfaces bound."""
    kind = iptc.Table if family == "ipv4" else iptc.Table6
    return list(getattr(kind, "_cache", {}).values())


def open_released_tables(iptc, family: str) -> None:
    """Read again the tables release_tables closed: python-iptables hands a closed one's
    NULL handle to libiptc, which crashes the process."""
    for table in python_iptables_tables(iptc, family):
        if getattr(table, "_handle", True) is None:
            table.refresh()


def release_tables(iptc, family: str) -> None:
    """Free python-iptables' copies of the tables once the entries are built (a service
    would keep them for its whole life). Nothing is pending in them: closing commits an
    unchanged table, which libiptc skips."""
    for table in python_iptables_tables(iptc, family):
        table.close()


def keep_time_zone() -> None:
    """libxt_time reads a time match's dates with TZ=UTC set in the process's C environment
    (and tzset): the process's own time zone is put back, or every local time it shows
    afterwards (the service's log and status times) and its children's would be UTC."""
    zone = os.environ.get("TZ")  # the process's own: os.environ never saw libxt_time's
    if zone is None:
        os.unsetenv("TZ")
    else:
        os.putenv("TZ", zone)
    time.tzset()


def build_entry(iptc, family: str, spec: Spec) -> bytes:
    """The entry for a rule spec, through python-iptables' Rule."""
    target, source, destination = spec[TARGET], spec[SOURCE], spec[DESTINATION]
    protocol, matches = spec[PROTOCOL], spec[MATCHES]
    rule = iptc.Rule() if family == "ipv4" else iptc.Rule6()
    if source:
        rule.src = source
    if destination:
        rule.dst = destination
    if protocol:
        rule.protocol = str(IP_PROTOCOLS[protocol])
    for name, options in matches:
        match = rule.create_match(name)
        for option, value in options:
            match.set_parameter(option, value)
    # python-iptables takes a chain as a target only once it exists; nm-zones' chains may
    # not yet (the entry is built before the commit that creates them): make a standard
    # target and name the chain in it, as libiptc resolves jumps by name at commit
    own_chain = target.startswith("nmz-")
    module = rule.create_target("ACCEPT" if own_chain else target)
    if own_chain:
        module.standard_target = target
    if target == "NFLOG":
        _nflog(iptc, rule, module, dict(spec[TARGET_OPTIONS]))
        return bytes(rule.rule)
    for option, value in spec[TARGET_OPTIONS]:
        module.set_parameter(option, value)
    if any(name == "connlabel" for name, _ in matches):
        _quietly(rule.final_check)
    else:
        rule.final_check()
    return bytes(rule.rule)


def _nflog(iptc, rule, module, options: dict[str, str]) -> None:
    """NFLOG's options written into its struct xt_nflog_info (linux/netfilter/xt_NFLOG.h)
    by hand: python-iptables parsing `--nflog-prefix` corrupts its memory (a segfault a few
    rules later, seen with iptables 1.8.9), and its final check parses every option again.
    NFLOG's own check concerns only --nflog-range/--nflog-size, which nm-zones never uses."""
    for match in rule.matches:
        match.final_check()
    prefix = options.get("nflog-prefix", "").encode()[: NFLOG_PREFIX_SIZE - 1]
    data = NFLOG_INFO.pack(0, int(options.get("nflog-group", "0")), NFLOG_THRESHOLD, 0, prefix)
    import ctypes

    start = ctypes.sizeof(iptc.xtables.xt_entry_target)
    ctypes.memmove(ctypes.addressof(module._target_buf.contents) + start, data, len(data))


def _quietly(call) -> None:
    """Call with the process's stderr closed off: python-iptables reads a rule back through
    its extension's save function, and libxt_connlabel's prints a warning to stderr when
    /etc/xtables/connlabel.conf (label names, which nm-zones does not use) is missing.
    Errors still reach Python: python-iptables raises them."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as sink:
            os.dup2(sink.fileno(), 2)
            call()
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _build_in_child(iptc, family: str, specs: list[tuple]) -> list[bytes]:
    """Entries with NAT targets, built by a forked child.

    DNAT, SNAT, MASQUERADE and REDIRECT live in one libxt_NAT.so, which registers the targets
    of the family selected when it is first loaded into a process; registering the other
    family's later fails ("can't find target", or "already registered"). A child forked
    before the library is loaded builds one family's entries and exits, so this process never
    loads it and each family gets a fresh start.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: build, report, and leave without running any cleanup
        os.close(read_end)
        status = 0
        try:
            data = marshal.dumps([build_entry(iptc, family, spec) for spec in specs])
        except BaseException as error:
            data, status = str(error).encode()[:4000], 1
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view) :]
        except OSError:
            pass
        os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as stream:
        data = stream.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        from ...errors import KernelError

        raise KernelError(data.decode(errors="replace") or f"{family}: building NAT rules failed")
    return marshal.loads(data)


class Entries:
    """Entry bytes by (family, spec), from the state directory's file or built now."""

    def __init__(self, state_dir: str | None):
        self.path = os.path.join(state_dir, ENTRIES_FILE) if state_dir else None
        self.identity = kernel_identity()
        self.libraries: tuple | None = None  # library_identity of the known entries
        self.iptc = None  # python-iptables, imported at the first build
        self.known: dict[tuple[str, tuple], bytes] = {}
        self.added = False
        self.from_file = False  # some entries came from the file, not from this process
        self.checked: set[tuple[str, tuple]] = set()  # entries from the file found well formed
        if self.path:
            try:
                data = read_trusted(self.path)
                identity, libraries, known = marshal.loads(data) if data else (None,) * 3
                if identity == self.identity and unchanged(libraries) and usable(known):
                    self.known, self.libraries = known, libraries
                    self.from_file = bool(known)
            except (OSError, EOFError, ValueError, TypeError, MemoryError):
                pass  # none yet, unreadable, untrusted or damaged: built again as needed

    def build_errors(self) -> tuple:
        """python-iptables' own errors, once it is imported: building an entry can raise them."""
        if self.iptc is None:
            return ()
        return (self.iptc.IPTCError, self.iptc.XTablesError)

    def forget(self) -> None:
        """Drop every entry: the kernel refused a commit made of kept entries, which may
        predate a change the identity does not see (a kernel module updated in place)."""
        self.known, self.added, self.from_file = {}, True, False

    def ensure(self, family: str, specs) -> None:
        """Build, in one go, the entries of `specs` not known yet."""
        missing = [
            spec
            for spec in dict.fromkeys(specs)
            if (family, spec) not in self.known
            and self._marked(family, spec) is None
            and self._dated(family, spec) is None
        ]
        if not missing:
            return
        iptc = self.python_iptables()
        if not self.known:  # dropped: built by other libraries
            missing = list(dict.fromkeys(specs))
        from ...ruleset.build import flow_mark_rule

        flow_mark = flow_mark_rule(MARK_TEMPLATE_LABEL).spec()  # for _marked, kept by save
        if (family, flow_mark) not in self.known and flow_mark not in missing:
            missing.append(flow_mark)
        plain = [s for s in missing if s[0] not in NAT_TARGETS]
        nat = [s for s in missing if s[0] in NAT_TARGETS]
        try:
            open_released_tables(iptc, family)
            built = [build_entry(iptc, family, spec) for spec in plain]
            if nat:
                built += _build_in_child(iptc, family, nat)
        finally:
            release_tables(iptc, family)
            keep_time_zone()
        for spec, entry in zip(plain + nat, built, strict=True):
            self.known[(family, spec)] = entry
        self.added = True

    def python_iptables(self):
        """python-iptables, imported now; entries that other libraries built are dropped."""
        if self.iptc is None:
            from .iptc_env import import_iptc

            self.iptc = import_iptc()
            libraries = library_identity(self.iptc)
            if self.libraries is not None and self.libraries != libraries:
                self.forget()
            self.libraries = libraries
        return self.iptc

    def entry(self, family: str, spec: tuple) -> bytes:
        data = self.known.get((family, spec))
        if data is None:  # asked for once per rule committed: most are known
            self.ensure(family, (spec,))
            data = self.known[(family, spec)]
        return data

    def _marked(self, family: str, spec: tuple) -> bytes | None:
        """The flow-marking rule of a new interface (`-m conntrack --ctstate NEW -j CONNMARK
        --set-xmark VALUE/MASK`), from the same rule of any interface known: only the mark
        differs, in the first field of the target's data (struct xt_connmark_tginfo1 and 2:
        ctmark). A new interface's event builds nothing then."""
        if spec[TARGET] != "CONNMARK" or len(spec[TARGET_OPTIONS]) != 1:
            return None
        option, value = spec[TARGET_OPTIONS][0]
        mark, _, mask = value.partition("/")
        if option != "set-xmark" or not mask:
            return None
        try:
            packed = CONNMARK_MARK.pack(int(mark, 0))
        except (ValueError, struct.error):
            return None

        def same(known: tuple) -> bool:  # addresses, protocol, matches and mask alike
            return (
                known[TARGET] == "CONNMARK"
                and known[SOURCE:] == spec[SOURCE:]
                and _same_mask(known[TARGET_OPTIONS], mask)
            )

        def write(entry: bytearray) -> bool:
            mark_at = ENTRY_OFFSETS.unpack_from(entry, LAYOUT[family][1])[0] + TARGET_SIZE
            if mark_at + len(packed) > len(entry):
                return False
            entry[mark_at : mark_at + len(packed)] = packed
            return True

        return self._written_into_kept(family, spec, same, write)

    def _dated_templates(self) -> dict:
        """The newest timed allowance's rule of each rule and family, DATED_KEPT of them at
        most, kept whatever the config: the templates _dated writes other deadlines into
        (the config never holds a runtime allowance's rules)."""
        newest: dict = {}
        for (family, spec), data in self.known.items():  # oldest first: the file's, then new
            undated = _undated(spec)
            if undated is not None:
                newest.pop((family, undated), None)
                newest[(family, undated)] = ((family, spec), data)
        return dict(list(newest.values())[-DATED_KEPT:])

    def _dated(self, family: str, spec: tuple) -> bytes | None:
        """A timed allowance's rule (`... -m time --datestop WHEN -m comment --comment
        nmz-until-DEADLINE`), from the same rule with another deadline known: only the
        time match's date_stop and the comment differ (python-iptables, through libxt_time,
        reads WHEN as UTC). Opening a port again, or for longer, builds nothing then."""
        undated = _undated(spec)
        if undated is None:
            return None
        when, comment = (options[0][1] for _, options in spec[MATCHES][-2:])
        stop, text = _utc_seconds(when), comment.encode()
        if stop is None or len(text) >= COMMENT_SIZE or b"\0" in text:
            return None

        def write(entry: bytearray) -> bool:
            places = _match_data(family, entry)
            time_at, time_size = places.get("time", (0, 0))
            comment_at, comment_size = places.get("comment", (0, 0))
            if time_size < TIME_DATE_STOP_AT + TIME_DATE_STOP.size or comment_size < COMMENT_SIZE:
                return False
            TIME_DATE_STOP.pack_into(entry, time_at + TIME_DATE_STOP_AT, stop)
            entry[comment_at : comment_at + COMMENT_SIZE] = text.ljust(COMMENT_SIZE, b"\0")
            return True

        def same(known: tuple) -> bool:  # the same rule, another deadline
            return _undated(known) == undated

        return self._written_into_kept(family, spec, same, write)

    def _written_into_kept(self, family: str, spec: tuple, same, write) -> bytes | None:
        """The entry of `spec` made from a well-formed kept entry of the family whose spec
        `same` accepts: `write` changes a copy of it (False: not this one), and the result
        is kept under `spec` (_marked, _dated)."""
        for (known_family, known), data in self.known.items():
            if known_family != family or not same(known) or not well_formed(family, data):
                continue
            entry = bytearray(data)
            if write(entry):
                self.known[(family, spec)] = written = bytes(entry)
                self.added = True
                return written
        return None

    def dispatch(
        self,
        family: str,
        target: str,
        direction: str = "in",
        interface: str | None = None,
        goto: bool = False,
    ) -> bytes:
        """`[-i|-o INTERFACE] -j TARGET` (`-g TARGET` with goto), as bytes ready for
        libiptc. A trailing `+` in the interface matches every name with that prefix (exempt
        patterns). Direction "src" matches a source address or network (`-s`) instead."""
        if direction == "src":
            spec = (target, (), interface, None, None, ())
            entry = bytearray(self.buffer(family, spec, standard=True))
            interface = None
        else:
            entry = bytearray(self.buffer(family, TEMPLATE, standard=True))
        if goto:
            flags_at, flag = GOTO_FLAG[family]
            entry[flags_at] |= flag
        if interface:
            field = INTERFACE_FIELDS[family] + (0 if direction == "in" else IFNAMSIZ_BYTES)
            name = interface.encode()[: IFNAMSIZ_BYTES - 1]
            entry[field : field + IFNAMSIZ_BYTES] = name.ljust(IFNAMSIZ_BYTES, b"\0")
            mask = field + 2 * IFNAMSIZ_BYTES
            entry[mask : mask + IFNAMSIZ_BYTES] = interface_mask(interface)
        name_at = ENTRY_OFFSETS.unpack_from(entry, LAYOUT[family][1])[0] + TARGET_NAME_OFFSET
        if name_at + TARGET_NAME_SIZE > len(entry):  # never a slice that grows the entry
            raise KernelError(f"{family}: the template entry of dispatch rules is damaged")
        name = target.encode()[: TARGET_NAME_SIZE - 1]
        entry[name_at : name_at + TARGET_NAME_SIZE] = name.ljust(TARGET_NAME_SIZE, b"\0")
        return bytes(entry)

    def buffer(self, family: str, spec: tuple, standard: bool = False) -> bytes:
        """The entry, ready for libiptc. Asked for once per rule committed (a zone-wide
        change commits the same rules for many interfaces): an entry from the file is
        checked once. `standard`: a jump's entry, whose target holds a verdict."""
        key = (family, spec)
        data = self.entry(family, spec)
        if self.from_file and key not in self.checked:
            if not well_formed(family, data, standard):
                self.forget()  # a damaged file: libiptc trusts the sizes inside an entry
                data = self.entry(family, spec)
            else:
                self.checked.add(key)
        return data

    def save(self, keep=None) -> None:
        """Write the file when entries were built; `keep(family, spec)` says which to keep
        (the compiled config's rules, so that entries of old configs do not pile up)."""
        if not self.added or not self.path or self.libraries is None:
            return
        known = {
            k: v for k, v in self.known.items() if keep is None or k[1] == TEMPLATE or keep(*k)
        }
        known.update(self._dated_templates())
        data = marshal.dumps((self.identity, self.libraries, known))
        try:  # noqa: SIM105 - contextlib would cost every event 5 ms of imports
            write_atomically(self.path, data, 0o600)
        except OSError:
            pass  # a read-only state dir: the entries are built again next time
        self.added = False


def _same_mask(options, mask: str) -> bool:
    """Whether a kept CONNMARK rule's options are `--set-xmark VALUE/mask` alone (--set-mark
    writes another mask into the entry)."""
    try:
        (option, value), *more = options
        return not more and option == "set-xmark" and value.partition("/")[2] == mask
    except (TypeError, ValueError, AttributeError):
        return False


def _undated(spec: tuple) -> tuple | None:
    """A timed allowance's spec without its deadline (None: not one, see _dated; nor is a
    spec of a damaged entries file that is not shaped as specs are)."""
    try:
        matches = spec[MATCHES]
        if len(matches) < len(DATED_MATCHES):
            return None
        dated = matches[-len(DATED_MATCHES) :]
        for (name, options), (wanted, option) in zip(dated, DATED_MATCHES, strict=True):
            if name != wanted or len(options) != 1 or options[0][0] != option:
                return None
        if not isinstance(options[0][1], str) or not isinstance(dated[0][1][0][1], str):
            return None
        return (*spec[:MATCHES], tuple(matches[: -len(DATED_MATCHES)]))
    except (TypeError, ValueError, IndexError, KeyError):
        return None


def _utc_seconds(when: str) -> int | None:
    """`YYYY-MM-DDTHH:MM:SS` (UTC) as seconds since the epoch, as libxt_time reads it; None
    for anything else, and for a year libxt_time refuses (DATE_YEARS: building that rule
    fails as it always did). Without the calendar and _strptime modules, for an event's
    sake."""
    if len(when) != 19 or when[4] + when[7] + when[10] + when[13] + when[16] != "--T::":
        return None
    fields = (when[0:4], when[5:7], when[8:10], when[11:13], when[14:16], when[17:19])
    if not all(field.isascii() and field.isdigit() for field in fields):
        return None
    civil = tuple(map(int, fields))
    year, month, day, hour, minute, second = civil
    if not (DATE_YEARS[0] <= year <= DATE_YEARS[1] and 1 <= month <= 12):
        return None
    year -= month <= 2  # days from the civil date (H. Hinnant's algorithm), March first
    era, year_of_era = divmod(year, 400)
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    seconds = (era * 146097 + day_of_era - 719468) * 86400 + hour * 3600 + minute * 60 + second
    return seconds if time.gmtime(seconds)[:6] == civil else None  # no 31 February


def _match_data(family: str, data: bytes) -> dict[str, tuple[int, int]]:
    """{match name: (where its data begins, its size)} of an entry (the last of a name
    wins); {} when the matches' sizes do not add up to the target's offset."""
    _, offsets_at, header = LAYOUT[family]
    target_offset = ENTRY_OFFSETS.unpack_from(data, offsets_at)[0]
    places, offset = {}, header
    while offset < target_offset:
        size = TARGET_SIZE_FIELD.unpack_from(data, offset)[0]
        if size < TARGET_SIZE or offset + size > target_offset:
            return {}
        name_at = offset + TARGET_NAME_OFFSET
        name = bytes(data[name_at : name_at + TARGET_NAME_SIZE]).split(b"\0", 1)[0]
        places[name.decode("latin-1")] = (offset + TARGET_SIZE, size - TARGET_SIZE)
        offset += size
    return places if offset == target_offset else {}


def well_formed(family: str, data: bytes, standard: bool = False) -> bool:
    """Whether an entry's sizes hold together (libiptc trusts them): its next_offset is its
    length, and its target, where target_offset puts it, fills the rest exactly; with
    `standard`, the target has room for the verdict libiptc writes into a jump."""
    _, offsets_at, header = LAYOUT[family]
    if type(data) is not bytes or len(data) < header + TARGET_SIZE:
        return False
    target_offset, next_offset = ENTRY_OFFSETS.unpack_from(data, offsets_at)
    least = STANDARD_TARGET_SIZE if standard else TARGET_SIZE
    if next_offset != len(data) or not header <= target_offset <= len(data) - least:
        return False
    return TARGET_SIZE_FIELD.unpack_from(data, target_offset)[0] == len(data) - target_offset


def interface_mask(name: str) -> bytes:
    """The interface mask as iptables writes it: 0xff for each byte compared (the name and
    its terminating NUL; only the prefix for `name+`).

    (python-iptables 1.2.0 writes 0x01 bytes into IPv6 interface masks, so the kernel would
    compare only the lowest bit of each character and `-i vz1` would also match `br-`.)
    """
    prefix = name[:-1] if name.endswith("+") else name
    length = len(prefix) if name.endswith("+") else len(prefix) + 1
    return b"\xff" * length + b"\x00" * (IFNAMSIZ_BYTES - length)
