"""How many conntrack entries have a given ct mark, counted from one dump the kernel filters,
over a netlink socket of this module's own: the message headers are counted, nothing is
parsed. A tightening switch asks first whether any flow may have entered through its
interface (flows.py); most of the time none did, and then neither pyroute2's import
(200-600 ms in a process) nor its socket (some 20 ms to make, in the service) is paid.

Only the socket module's C core and struct are imported. The names are those of
linux/netlink.h, linux/netfilter/nfnetlink.h and nfnetlink_conntrack.h."""

from __future__ import annotations

import struct

NETLINK_NETFILTER = 12
NLM_F_REQUEST, NLM_F_DUMP, NLM_F_DUMP_INTR = 0x1, 0x300, 0x10
NLMSG_DONE = 3
NFNL_SUBSYS_CTNETLINK = 1
IPCTNL_MSG_CT_NEW, IPCTNL_MSG_CT_GET = 0, 1
CTA_MARK, CTA_MARK_MASK = 8, 21
AF_UNSPEC = 0  # both families in one dump
RECEIVE_SIZE = 1 << 20
TIMEOUT_SECONDS = 5.0  # the kernel always answers a dump; never hang a switch if it did not

NLMSGHDR = struct.Struct("=IHHII")  # length, type, flags, seq, pid
NFGENMSG = struct.Struct(">BBH")  # family, version, res_id


def _attribute(kind: int, value: int) -> bytes:
    """A big-endian u32 attribute (ctnetlink reads marks with nla_get_be32)."""
    return struct.pack("=HH", 8, kind) + struct.pack(">I", value)


def count_marked(value: int, mask: int) -> int | None:
    """The number of entries, both families, whose ct mark masked by `mask` is `value`; None
    when the kernel did not answer in full (an error, or a dump the table changed under
    too fast to be sure of): the caller then reads the flows the long way."""
    from _socket import AF_NETLINK, SOCK_CLOEXEC, SOCK_RAW, socket

    body = NFGENMSG.pack(AF_UNSPEC, 0, 0) + _attribute(CTA_MARK, value)
    body += _attribute(CTA_MARK_MASK, mask)
    kind = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET
    header = NLMSGHDR.pack(NLMSGHDR.size + len(body), kind, NLM_F_REQUEST | NLM_F_DUMP, 1, 0)
    entry = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW
    try:
        sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER)
    except OSError:
        return None
    count = 0
    try:
        sock.settimeout(TIMEOUT_SECONDS)
        sock.send(header + body)
        while True:
            data = sock.recv(RECEIVE_SIZE)
            offset = 0
            while offset + NLMSGHDR.size <= len(data):
                length, kind, flags, seq, _ = NLMSGHDR.unpack_from(data, offset)
                if length < NLMSGHDR.size or seq != 1 or flags & NLM_F_DUMP_INTR:
                    return None
                if kind == NLMSG_DONE:
                    return count
                if kind != entry:  # NLMSG_ERROR, or anything not understood
                    return None
                count += 1
                offset += (length + 3) & ~3
            if not data:
                return None
    except OSError:
        return None
    finally:
        sock.close()
