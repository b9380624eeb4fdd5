"""Where nm-zones' rules live in the kernel: plain constants, shared by the compiler (which
decides the rules) and the kernel module (which commits them) without either importing the
other. See DESIGN.md and ruleset/build.py for the picture.
"""

from __future__ import annotations

# re-exported: the rest of the house reads them here with the layout
from ..protocols import FAMILIES as FAMILIES
from ..protocols import IP_PROTOCOLS as IP_PROTOCOLS

# Built-in chain -> the dispatch chain nm-zones hooks into it, per table.
HOOKS = {
    "filter": (("INPUT", "nmz-input"), ("FORWARD", "nmz-forward")),
    "nat": (("PREROUTING", "nmz-pre"), ("POSTROUTING", "nmz-post")),
    "raw": (("PREROUTING", "nmz-raw"),),
}
TABLE_ORDER = ("raw", "nat", "filter")
# Panic mode (`nm-zones panic on`): in each family's filter table, one chain per built-in
# chain, jumped to first, dropping every packet but loopback's (the interface of the
# direction named, or None: nothing is spared). Zone rules stay below, untouched.
PANIC_CHAINS = (
    ("INPUT", "nmz-panic-in", "in"),
    ("FORWARD", "nmz-panic-fwd", None),
    ("OUTPUT", "nmz-panic-out", "out"),
)
PANIC_TABLE = "filter"
# The same in nftables: base chains of nm-zones' table (chain, its hook, spared direction).
NFT_PANIC_CHAINS = (
    ("panic-input", "input", "in"),
    ("panic-forward", "forward", None),
    ("panic-output", "output", "out"),
)
LOOPBACK = "lo"
# Forwarded traffic is judged by its ingress interface's zone first, as firewalld orders it:
# nmz-forward goes (-g) to the ingress interface's chain, whose verdict is final; a zone that
# neither accepts nor refuses a new flow by itself (target default) asks the egress zones
# (-j nmz-forward-out: `-o IF -j nmz-if-IF-fout`, masquerade's acceptance), then applies its
# own tail. No built-in chain jumps to nmz-forward-out: it exists wherever nmz-forward does.
FORWARD_OUT = "nmz-forward-out"
EGRESS_CHAINS = {"nmz-forward": FORWARD_OUT}
# Dispatch rules in these chains go to their chain (-g) instead of jumping: a RETURN there
# (traffic someone else DNAT'ed) leaves nm-zones for the rest of the built-in chain.
GOTO_CHAINS = frozenset({"nmz-forward"})
# Where a dispatch rule goes in its chain: the zones' sources first (a packet from a bound
# source gets that zone whatever interface it enters by, as in firewalld), then per-interface
# rules, then the catch-all for interfaces no zone claims.
SECTION_SOURCE, SECTION_IFACE, SECTION_CATCHALL = 0, 1, 2
# A source zone's chains, `nmz-s-ZONE-in` and `nmz-s-ZONE-fwd` (zone names: 17 characters at
# most, so 27 in all). They belong to the catch-all, which commits them with their dispatch
# rules (`-s ADDRESS -j nmz-s-ZONE-in`) in one go.
SOURCE_PREFIX = "nmz-s-"
SOURCE_KINDS = {"in": "nmz-input", "fwd": "nmz-forward"}
# An interface's chains, `nmz-if-IFACE-KIND`: no kind's `-KIND` ends another's.
CHAIN_KINDS = ("in", "fwd", "fout", "pre", "post", "raw")
CATCHALL_CHAINS = {"in": "nmz-default-in", "fwd": "nmz-default-fwd"}
# Chain kind -> the dispatch chain whose rule leads to it, and whether that rule matches the
# interface packets come in on (-i) or go out of (-o).
DISPATCH = {
    "in": ("nmz-input", "in"),
    "fwd": ("nmz-forward", "in"),
    "fout": (FORWARD_OUT, "out"),
    "pre": ("nmz-pre", "in"),
    "post": ("nmz-post", "out"),
    "raw": ("nmz-raw", "in"),
}
# The conntrack label (bit 0-127) that marks a flow a switch ended (flows.py): the first rule
# of every zone's input and forward chains drops its packets, before the established flows
# are accepted. A label rather than a connmark bit: VPN clients and container runtimes set
# the whole ct mark for themselves, and labels are 128 bits that little else uses.
ENDED_LABEL = "127"
# The ct mark bits nm-zones owns (flows.py): each interface's input and forward chains set
# them on a flow's first packet to the interface's code, 4 of the 8 bits (70 codes, picked by
# the interface's name), so that a tightening switch asks the kernel, in one filtered dump,
# for the flows whose bits are within its interface's code: its own, and the unmarked ones
# (no other code is within it). The other 24 bits are left as they are (`ct mark set ct mark
# & ... | ...`, CONNMARK --set-xmark VALUE/MASK): VPN clients, container runtimes and
# tailscale use the low ones. The catch-all's and the source zones' chains set no mark.
FLOW_MARK_SHIFT = 24
FLOW_MARK_MASK = 0xFF << FLOW_MARK_SHIFT
FLOW_MARK_CODES = tuple(code for code in range(256) if bin(code).count("1") == 4)
SHARED_LABELS = ("*", "src")  # the catch-all's and the source zones' (ruleset/sources.py)
NAT_TARGETS = frozenset({"DNAT", "SNAT", "MASQUERADE", "REDIRECT"})
LOG_PREFIX_MAX = 29
# The netlink log group (nfnetlink_log) the NFLOG rule beside every LOG rule sends refused
# packets to, with the same prefix: `nm-zones serve` reads it (nflog.py) for the zone
# editor's list of refused packets. Unlike the kernel log, a group works in any network
# namespace. ulogd's and tcpdump's examples use the small numbers; this one is nm-zones'.
NFLOG_GROUP = 47
LOG_TARGETS = frozenset({"LOG", "NFLOG"})  # rules that only report a packet, never judge it
PREFIX_OPTIONS = frozenset({"log-prefix", "nflog-prefix"})
# rules whose options name their interface (plan.for_interface): a zone's template does not
# hold them as the kernel does, so the iptables entries kept between runs keep them by target
PER_INTERFACE_TARGETS = LOG_TARGETS | {"CONNMARK"}


def flow_mark(label: str) -> int:
    """The ct mark bits (within FLOW_MARK_MASK) the chains of interface `label` give the
    flows they see first; 0 for SHARED_LABELS (no mark). Interfaces may share a code: the
    mark only narrows what a switch reads; which flows entered through the interface is
    still decided by the routing test, and by the mark only where the route cannot be
    looked up (flows.py)."""
    if label in SHARED_LABELS:
        return 0
    digest = 0x811C9DC5  # FNV-1a: no import on an event's path (zlib is not in its budget)
    for byte in label.encode():
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    return FLOW_MARK_CODES[digest % len(FLOW_MARK_CODES)] << FLOW_MARK_SHIFT


def flow_mark_option(label: str) -> str:
    """CONNMARK's `--set-xmark` value for interface `label`, as iptables-save prints it."""
    return f"{flow_mark(label):#x}/{FLOW_MARK_MASK:#x}"


def source_chain(zone: str, kind: str) -> str:
    return f"{SOURCE_PREFIX}{zone}-{kind}"


def is_source_chain(chain: str) -> bool:
    return chain.startswith(SOURCE_PREFIX)


def uses_goto(chain: str, target: str) -> bool:
    """Whether the dispatch rule in `chain` leading to `target` is a goto (-g)."""
    return chain in GOTO_CHAINS and target != "RETURN"


def log_prefix(zone: str, interface: str) -> str:
    """`nmz public eth0: ` trimmed to iptables' 29 characters, interface kept whole; a `$`
    in the name is spelled `_` (nft reads `$name` in a log prefix as a variable). The
    readers of the log take the interface from the packet, not from the prefix."""
    interface = interface.replace("$", "_")
    prefix = f"nmz {zone} {interface}: "
    if len(prefix) > LOG_PREFIX_MAX:
        room = LOG_PREFIX_MAX - len(f"nmz  {interface}: ")
        prefix = f"nmz {zone[: max(room, 1)]} {interface}: "[:LOG_PREFIX_MAX]
    return prefix
