"""How many conntrack entries have a given ct mark, counted from one dump the kernel filters
(netlink.py): the answers are counted, none is parsed. A tightening switch asks first
whether any flow may have entered through its interface (flows.py); most of the time none
did, and then no entry is read (conntrack.py is not even imported) and no address or route
is looked up. The names are those of linux/netfilter/nfnetlink.h and nfnetlink_conntrack.h."""

from __future__ import annotations

import struct

from .netlink import NETLINK_NETFILTER, NFGENMSG, NLM_F_DUMP, Channel, attribute, kept

NFNL_SUBSYS_CTNETLINK = 1
IPCTNL_MSG_CT_GET = 1
CTA_MARK, CTA_MARK_MASK = 8, 21
AF_UNSPEC = 0  # both families in one dump
BE32 = struct.Struct(">I")  # ctnetlink reads marks with nla_get_be32


def ctnetlink(message: int) -> int:
    """A ctnetlink message type as netlink carries it."""
    return (NFNL_SUBSYS_CTNETLINK << 8) | message


def marked(channel: Channel, value: int, mask: int) -> list[bytes]:
    """The entries, both families, whose ct mark masked by `mask` is `value`: one dump the
    kernel filters (a value of 0 is a filter too). Raw: conntrack.Entry reads one."""
    body = NFGENMSG.pack(AF_UNSPEC, 0, 0) + attribute(CTA_MARK, BE32.pack(value))
    body += attribute(CTA_MARK_MASK, BE32.pack(mask))
    return channel.ask(ctnetlink(IPCTNL_MSG_CT_GET), NLM_F_DUMP, body)


def count_marked(value: int, mask: int) -> int | None:
    """The number of such entries; None when the kernel did not answer in full (an error, or
    a dump the table kept changing under): the caller then reads the flows the long way."""
    try:
        return len(marked(kept(NETLINK_NETFILTER), value, mask))
    except OSError:
        return None
