"""Kernel entries: one rule as the bytes x_tables takes, built by python-iptables.

python-iptables builds a rule by parsing each option with libxtables, which loads the
extension's shared library: about half a millisecond a rule, most of an event's work. An
entry depends only on the rule and on the kernel and libraries that built it, so entries are
kept in the state directory, keyed by the rule's spec (ruleset/plan.py), and an event builds
only the rules it has never seen. The file is not used when the kernel, libxtables,
python-iptables or this module changes, nor when anyone but root could have written it; a
damaged entry is never handed to libiptc, and entries the kernel refuses are built afresh
(kernel.py).

Dispatch rules (`-i IFACE -j nmz-if-IFACE-in`) name the interface and the chain, so they are
not kept: each is a copy of one template entry per family, built by python-iptables, with
the interface, its mask and the jump target written into python-iptables' own structures.
"""

from __future__ import annotations

import ctypes
import marshal
import os
import struct

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

ENTRIES_FILE = "entries"
ENTRIES_VERSION = 1
IFNAMSIZ_BYTES = 16
# struct xt_nflog_info: len (u32), group, threshold, flags (u16), padding, prefix[64]
NFLOG_PREFIX_SIZE = 64
NFLOG_INFO = struct.Struct(f"=IHHH2x{NFLOG_PREFIX_SIZE}s")
NFLOG_THRESHOLD = 0  # as iptables 1.8 leaves it: the kernel sends each packet at once
TEMPLATE = make_spec("ACCEPT")  # `-j ACCEPT`: retargeted per dispatch rule


def kernel_identity(iptc) -> tuple:
    """What entry bytes depend on besides the rule: match revisions are chosen by what the
    kernel supports, structure layouts by libxtables and python-iptables."""
    system = os.uname()
    library = getattr(iptc.xtables._lib_xtables, "_name", "")
    try:
        info = os.stat(library)
        library_id = (library, info.st_size, info.st_mtime_ns)
    except OSError:
        library_id = (library,)
    version = getattr(getattr(iptc, "version", None), "__version__", "")
    from ...paths import code_identity

    code = code_identity(("backends/iptables/entries.py", "ruleset/layout.py"))
    return (ENTRIES_VERSION, system.release, system.version, version, library_id, code)


def open_released_tables(iptc, family: str) -> None:
    """python-iptables asks every table it has opened whether a target names one of its
    chains (Target._is_standard_target), and its easy module commits each table it reads
    (ahead.py), through the handle the kernel backend frees after each commit
    (kernel._release): a freed one is read again first, or libiptc is handed NULL and the
    process crashes."""
    kind = iptc.Table if family == "ipv4" else iptc.Table6
    for table in list(getattr(kind, "_cache", {}).values()):
        if getattr(table, "_handle", True) is None:
            table.refresh()


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

    def __init__(self, iptc, state_dir: str | None):
        self.iptc = iptc
        self.path = os.path.join(state_dir, ENTRIES_FILE) if state_dir else None
        self.identity = kernel_identity(iptc)
        self.known: dict[tuple[str, tuple], bytes] = {}
        self.added = False
        self.from_file = False  # some entries came from the file, not from this process
        self.checked: set[tuple[str, tuple]] = set()  # entries from the file found well formed
        if self.path:
            try:
                data = read_trusted(self.path)
                identity, known = marshal.loads(data) if data else (None, None)
                if identity == self.identity and isinstance(known, dict):
                    self.known = known
                    self.from_file = bool(known)
            except (OSError, EOFError, ValueError, TypeError):
                pass  # none yet, unreadable or untrusted: built again as needed

    def forget(self) -> None:
        """Drop every entry: the kernel refused a commit made of kept entries, which may
        predate a change the identity does not see (a kernel module updated in place)."""
        self.known, self.added, self.from_file = {}, True, False

    def ensure(self, family: str, specs) -> None:
        """Build, in one go, the entries of `specs` not known yet."""
        missing = [s for s in dict.fromkeys(specs) if (family, s) not in self.known]
        if not missing:
            return
        plain = [s for s in missing if s[0] not in NAT_TARGETS]
        nat = [s for s in missing if s[0] in NAT_TARGETS]
        open_released_tables(self.iptc, family)
        built = [build_entry(self.iptc, family, spec) for spec in plain]
        if nat:
            built += _build_in_child(self.iptc, family, nat)
        for spec, entry in zip(plain + nat, built, strict=True):
            self.known[(family, spec)] = entry
        self.added = True

    def entry(self, family: str, spec: tuple) -> bytes:
        data = self.known.get((family, spec))
        if data is None:  # asked for once per rule committed: most are known
            self.ensure(family, (spec,))
            data = self.known[(family, spec)]
        return data

    def dispatch(
        self,
        family: str,
        target: str,
        direction: str = "in",
        interface: str | None = None,
        goto: bool = False,
    ):
        """`[-i|-o INTERFACE] -j TARGET` (`-g TARGET` with goto), as a ctypes buffer ready for
        libiptc. A trailing `+` in the interface matches every name with that prefix (exempt
        patterns). Direction "src" matches a source address or network (`-s`) instead."""
        if direction == "src":
            buffer = self.buffer(family, (target, (), interface, None, None, ()))
            interface = None
        else:
            buffer = self.buffer(family, TEMPLATE)
        if family == "ipv4":
            entry = self.iptc.ip4tc.ipt_entry.from_buffer(buffer)
            header = entry.ip
        else:
            entry = self.iptc.ip6tc.ip6t_entry.from_buffer(buffer)
            header = entry.ipv6
        if goto:
            header.flags |= header.IPT_F_GOTO if family == "ipv4" else header.IP6T_F_GOTO
        if interface:
            setattr(header, f"{direction}iface", interface.encode())
            setattr(header, f"{direction}iface_mask", interface_mask(interface))
        jump = self.iptc.xtables.xt_entry_target.from_buffer(buffer, entry.target_offset)
        jump.u.user.name = target.encode()
        return buffer

    def buffer(self, family: str, spec: tuple):
        """The entry as a ctypes buffer. Asked for once per rule committed (a zone-wide
        change commits the same rules for many interfaces): an entry from the file is
        checked once."""
        key = (family, spec)
        data = self.entry(family, spec)
        if self.from_file and key not in self.checked:
            if not self._well_formed(family, data):
                self.forget()  # a damaged file: libiptc trusts the sizes inside an entry
                data = self.entry(family, spec)
            else:
                self.checked.add(key)
        return (ctypes.c_ubyte * len(data)).from_buffer_copy(data)

    def _well_formed(self, family: str, data: bytes) -> bool:
        kind = self.iptc.ip4tc.ipt_entry if family == "ipv4" else self.iptc.ip6tc.ip6t_entry
        if len(data) < ctypes.sizeof(kind) + ctypes.sizeof(self.iptc.xtables.xt_entry_target):
            return False
        entry = kind.from_buffer_copy(data)
        if entry.next_offset != len(data) or not ctypes.sizeof(kind) <= entry.target_offset:
            return False
        if entry.target_offset + ctypes.sizeof(self.iptc.xtables.xt_entry_target) > len(data):
            return False
        target = self.iptc.xtables.xt_entry_target.from_buffer_copy(data, entry.target_offset)
        return target.u.target_size == len(data) - entry.target_offset

    def save(self, keep=None) -> None:
        """Write the file when entries were built; `keep(family, spec)` says which to keep
        (the compiled config's rules, so that entries of old configs do not pile up)."""
        if not self.added or not self.path:
            return
        known = {
            k: v for k, v in self.known.items() if keep is None or k[1] == TEMPLATE or keep(*k)
        }
        try:  # noqa: SIM105 - contextlib would cost every event 5 ms of imports
            write_atomically(self.path, marshal.dumps((self.identity, known)), 0o600)
        except OSError:
            pass  # a read-only state dir: the entries are built again next time
        self.added = False


def interface_mask(name: str) -> bytes:
    """The interface mask as iptables writes it: 0xff for each byte compared (the name and
    its terminating NUL; only the prefix for `name+`).

    python-iptables 1.2.0 writes 0x01 bytes into IPv6 interface masks, so the kernel would
    compare only the lowest bit of each character and `-i vz1` would also match `br-`: the
    masks are written here, for both families alike.
    """
    prefix = name[:-1] if name.endswith("+") else name
    length = len(prefix) if name.endswith("+") else len(prefix) + 1
    return b"\xff" * length + b"\x00" * (IFNAMSIZ_BYTES - length)
