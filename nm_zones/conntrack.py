"""The conntrack table over ctnetlink (netlink.py): entries read by ct mark, labeled, deleted.

flows.py reads the entries that may have entered through an interface (a dump the kernel
filters by mark), and labels or deletes those a switch ends. Attributes keep the names of
linux/netfilter/nfnetlink_conntrack.h; a tuple is a flat mapping of them (CTA_IP_V4_SRC,
CTA_PROTO_DST_PORT, ...), addresses as text, numbers as ints.
"""

from __future__ import annotations

import struct

from .flowcount import BE32, ctnetlink, marked
from .netlink import (
    NETLINK_NETFILTER,
    NFGENMSG,
    NLM_F_ACK,
    Channel,
    attribute,
    attributes,
    kept,
    nested,
)

IPCTNL_MSG_CT_NEW, IPCTNL_MSG_CT_DELETE = 0, 2
AF_INET, AF_INET6 = 2, 10
# enum ctattr_type
CTA_TUPLE_ORIG, CTA_TUPLE_REPLY, CTA_STATUS, CTA_MARK = 1, 2, 3, 8
CTA_TUPLE_MASTER, CTA_ZONE, CTA_LABELS, CTA_LABELS_MASK = 14, 18, 22, 23
# enum ctattr_tuple, ctattr_ip
CTA_TUPLE_IP, CTA_TUPLE_PROTO = 1, 2
IP_NAMES = {1: "CTA_IP_V4_SRC", 2: "CTA_IP_V4_DST", 3: "CTA_IP_V6_SRC", 4: "CTA_IP_V6_DST"}
# enum ctattr_l4proto: name, and the struct format of its value
PROTO_FIELDS = {
    1: ("CTA_PROTO_NUM", "B"),
    2: ("CTA_PROTO_SRC_PORT", ">H"),
    3: ("CTA_PROTO_DST_PORT", ">H"),
    4: ("CTA_PROTO_ICMP_ID", ">H"),
    5: ("CTA_PROTO_ICMP_TYPE", "B"),
    6: ("CTA_PROTO_ICMP_CODE", "B"),
    7: ("CTA_PROTO_ICMPV6_ID", ">H"),
    8: ("CTA_PROTO_ICMPV6_TYPE", "B"),
    9: ("CTA_PROTO_ICMPV6_CODE", "B"),
}
PROTO_NUMBERS = {name: (number, fmt) for number, (name, fmt) in PROTO_FIELDS.items()}
BE16 = struct.Struct(">H")
LABELS = struct.Struct("=QQ")  # 128 label bits, as the kernel's bitmap of longs holds them


class Entry:
    """One conntrack entry: its family and tuples, status, zone and labels."""

    __slots__ = ("family", "labels", "mark", "master", "orig", "reply", "status", "zone")

    def __init__(self, payload: bytes):
        self.family = payload[0]
        found = attributes(payload, NFGENMSG.size)
        self.orig = tuple_values(found.get(CTA_TUPLE_ORIG, b""))
        self.reply = tuple_values(found.get(CTA_TUPLE_REPLY, b""))
        master = found.get(CTA_TUPLE_MASTER)
        self.master = tuple_values(master) if master is not None else None
        self.status = _number(BE32, found.get(CTA_STATUS))
        self.zone = _number(BE16, found.get(CTA_ZONE))
        self.mark = _number(BE32, found.get(CTA_MARK))
        labels = found.get(CTA_LABELS)  # sent only when some label is set
        self.labels = sum(
            word << (64 * index)
            for index, word in enumerate(LABELS.unpack(labels) if len(labels or b"") == 16 else ())
        )


def _number(form: struct.Struct, payload: bytes | None) -> int:
    return form.unpack(payload)[0] if payload is not None and len(payload) == form.size else 0


def tuple_values(payload: bytes) -> dict:
    """A tuple attribute (CTA_TUPLE_IP and CTA_TUPLE_PROTO) as one flat mapping."""
    from _socket import inet_ntop

    values: dict = {}
    parts = attributes(payload)
    for kind, address in attributes(parts.get(CTA_TUPLE_IP, b"")).items():
        if kind in IP_NAMES:
            values[IP_NAMES[kind]] = inet_ntop(AF_INET if kind < 3 else AF_INET6, address)
    for kind, value in attributes(parts.get(CTA_TUPLE_PROTO, b"")).items():
        if kind in PROTO_FIELDS:
            name, fmt = PROTO_FIELDS[kind]
            if len(value) == struct.calcsize(fmt):
                values[name] = struct.unpack(fmt, value)[0]
    return values


def encode_tuple(kind: int, family: int, values: dict) -> bytes:
    """The tuple attribute `kind` naming an entry: the inverse of tuple_values."""
    from _socket import inet_pton

    addresses = [
        attribute(number, inet_pton(family, values[name]))
        for number, name in IP_NAMES.items()
        if name in values
    ]
    protocol = [
        attribute(PROTO_NUMBERS[name][0], struct.pack(PROTO_NUMBERS[name][1], value))
        for name, value in values.items()
        if name in PROTO_NUMBERS and value is not None
    ]
    return nested(kind, nested(CTA_TUPLE_IP, *addresses), nested(CTA_TUPLE_PROTO, *protocol))


def _request(family: int, *parts: bytes) -> bytes:
    return NFGENMSG.pack(family, 0, 0) + b"".join(parts)


class Conntrack:
    """ctnetlink, over this process's kept NETLINK_NETFILTER socket (netlink.kept: a switch
    that closed one right after its commit would wait for the kernel)."""

    def __init__(self, channel: Channel | None = None):
        self.channel = channel or kept(NETLINK_NETFILTER)

    def marked(self, value: int, mask: int) -> list[bytes]:
        """flowcount.marked: the entries whose masked ct mark is `value`, unparsed."""
        return marked(self.channel, value, mask)

    def set_labels(self, entry: Entry, bits: int) -> None:
        """Set label `bits` on the entry (OSError ENOENT: it is gone; ENOSPC: it was made
        while no rule used labels, and has no room for one)."""
        words = LABELS.pack(bits & (1 << 64) - 1, bits >> 64)
        self.channel.ask(
            ctnetlink(IPCTNL_MSG_CT_NEW),
            NLM_F_ACK,
            self._naming(entry)
            + attribute(CTA_LABELS, words)
            + attribute(CTA_LABELS_MASK, words),
        )

    def delete(self, entry: Entry) -> None:
        """Delete the entry (OSError ENOENT: it is gone)."""
        self.channel.ask(ctnetlink(IPCTNL_MSG_CT_DELETE), NLM_F_ACK, self._naming(entry))

    @staticmethod
    def _naming(entry: Entry) -> bytes:
        zone = attribute(CTA_ZONE, BE16.pack(entry.zone)) if entry.zone else b""
        return _request(entry.family, encode_tuple(CTA_TUPLE_ORIG, entry.family, entry.orig), zone)
