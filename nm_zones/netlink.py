"""Netlink requests and their answers, with the standard library only (struct and the socket
module's C core).

Every request nm-zones makes over netlink goes through Channel: nftables' views
(backends/nftables/nfnetlink.py), conntrack's flows (flowcount.py, conntrack.py), routes
(routing.py), sockets (sockdiag.py), neighbours (networks/neighbours.py) and the setup of
the refused packets' log group (doors/nflog.py, which then listens on that channel's
socket); only linkwatch.py, which asks nothing, keeps a socket of its own. pyroute2 does
all of this, but its import costs a process 200-600 ms and a resident service 20 MiB for good
(it loads some 270 modules), more than nm-zones' whole service without it. The few messages
needed are packed by each of those modules; the names are those of linux/netlink.h.
"""

from __future__ import annotations

import struct

NETLINK_ROUTE, NETLINK_SOCK_DIAG, NETLINK_NETFILTER = 0, 4, 12  # the protocols nm-zones asks
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR = 0x1, 0x4, 0x300, 0x10
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLA_F_NESTED = 0x8000
NLA_TYPE_MASK = 0x3FFF  # an attribute's type, without NLA_F_NESTED and NLA_F_NET_BYTEORDER
RECEIVE_SIZE = 1 << 20
TIMEOUT_SECONDS = 5.0  # the kernel always answers; never hang a switch if it did not
ATTEMPTS = 3  # a dump the table changed under (NLM_F_DUMP_INTR) is read again

NLMSGHDR = struct.Struct("=IHHII")  # struct nlmsghdr: length, type, flags, seq, pid
NLATTR = struct.Struct("=HH")  # struct nlattr: length, type
ERROR_CODE = struct.Struct("=i")  # struct nlmsgerr starts with the (negative) errno
# linux/netfilter/nfnetlink.h: what every NETLINK_NETFILTER message starts with
NFGENMSG = struct.Struct(">BBH")  # struct nfgenmsg: family, version, res_id (big endian)


def align(length: int) -> int:
    """NLMSG_ALIGN and NLA_ALIGN: netlink pads everything to 4 bytes."""
    return (length + 3) & ~3


def attribute(kind: int, payload: bytes) -> bytes:
    length = NLATTR.size + len(payload)
    return (NLATTR.pack(length, kind) + payload).ljust(align(length), b"\0")


def nested(kind: int, *parts: bytes) -> bytes:
    return attribute(kind | NLA_F_NESTED, b"".join(parts))


def attribute_list(data: bytes, offset: int = 0):
    """(type, payload) of each netlink attribute from `offset` on, in the kernel's order."""
    while offset + NLATTR.size <= len(data):
        length, kind = NLATTR.unpack_from(data, offset)
        if length < NLATTR.size:
            return
        yield kind & NLA_TYPE_MASK, data[offset + NLATTR.size : offset + length]
        offset += align(length)


def attributes(data: bytes, offset: int = 0) -> dict[int, bytes]:
    """type -> payload of the netlink attributes from `offset` on."""
    return dict(attribute_list(data, offset))


class DumpInterrupted(OSError):
    """The table changed during every attempt to dump it: its answer may miss entries."""


class Channel:
    """One netlink socket of `protocol` in this process's namespace; a context manager."""

    def __init__(self, protocol: int):
        from _socket import AF_NETLINK, SOCK_CLOEXEC, SOCK_RAW, socket

        self.sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol)
        self.sock.settimeout(TIMEOUT_SECONDS)
        self.seq = 0
        self.broken = False  # a request cut short: its answers may still come

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc_info) -> None:
        self.sock.close()

    def ask(self, kind: int, flags: int, body: bytes) -> list[bytes]:
        """Send one request; the payload (after struct nlmsghdr) of each answer. OSError with
        the kernel's errno when it refuses; with NLM_F_ACK, [] once it agreed."""
        self.broken = True
        for _ in range(ATTEMPTS):
            answers, interrupted = self._exchange(kind, flags, body)
            if not interrupted:
                self.broken = False
                return answers
        self.broken = False  # read to its end every time
        raise DumpInterrupted(11, "the table kept changing while it was read")

    def _exchange(self, kind: int, flags: int, body: bytes) -> tuple[list[bytes], bool]:
        self.seq += 1
        length = NLMSGHDR.size + len(body)
        self.sock.send(NLMSGHDR.pack(length, kind, NLM_F_REQUEST | flags, self.seq, 0) + body)
        answers: list[bytes] = []
        interrupted = False
        while True:
            data = self.sock.recv(RECEIVE_SIZE)
            if not data:
                raise OSError(5, "netlink: the kernel's answer ended early")
            offset = 0
            while offset + NLMSGHDR.size <= len(data):
                length, answer, answer_flags, seq, _ = NLMSGHDR.unpack_from(data, offset)
                if length < NLMSGHDR.size:
                    raise OSError(5, "netlink: a malformed answer")
                payload = data[offset + NLMSGHDR.size : offset + length]
                offset += align(length)
                if seq != self.seq:
                    continue  # the rest of an earlier request's answer
                interrupted = interrupted or bool(answer_flags & NLM_F_DUMP_INTR)
                if answer in (NLMSG_DONE, NLMSG_ERROR):  # both carry an errno, 0 for none
                    code = -ERROR_CODE.unpack_from(payload)[0] if len(payload) >= 4 else 0
                    if code:  # a refusal, or a dump the kernel could not finish
                        import os

                        self.broken = False  # the answer is complete: the socket is fine
                        raise OSError(code, os.strerror(code))
                    return answers, interrupted  # the dump's end, or the acknowledgement
                answers.append(payload)
                if not flags & NLM_F_DUMP and not flags & NLM_F_ACK:
                    return answers, interrupted  # a single answer


_kept: dict[tuple[int, int, int], Channel] = {}


def kept(protocol: int) -> Channel:
    """This process's (and thread's) socket of `protocol`, opened on first use and kept
    until the process ends. For NETLINK_NETFILTER that matters: the kernel's release of any
    such socket first waits until the objects of nf_tables' last transaction are freed, an
    RCU grace period after the commit (5-15 ms), and a switch reads its table back and asks
    conntrack right after committing its rules. A socket left with a request cut short (an
    error on the way, a timeout) is closed and replaced: the rest of that answer, or a dump
    the kernel is still sending (it refuses a second one meanwhile), never meets the next
    request."""
    import os
    from _thread import get_ident

    key = (os.getpid(), get_ident(), protocol)
    found = _kept.get(key)
    if found is None or found.broken:
        if found is not None:
            found.sock.close()
        found = _kept[key] = Channel(protocol)
    return found
