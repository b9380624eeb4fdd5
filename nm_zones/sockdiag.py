"""Abort one local TCP connection by its addresses (sock_diag's SOCK_DESTROY), and list
the sockets that listen, with their cgroup (listening_sockets: refused programs are asked about).

flows.py labels the conntrack entry of a flow a switch ended, so its packets are dropped
while the entry lives; the local socket of such a connection is aborted as well, so that
nothing on this host is left to revive the flow once the entry expires. The kernel answers
EOPNOTSUPP when it is built without CONFIG_INET_DIAG_DESTROY.

Requests packed by hand (pyroute2 has no SOCK_DESTROY): struct nlmsghdr, then struct
inet_diag_req_v2 (include/uapi/linux/inet_diag.h).
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY, SOCK_DESTROY = 20, 21
TCP_LISTEN = 10
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLMSG_ERROR = 2
NO_COOKIE = 0xFFFFFFFF  # INET_DIAG_NOCOOKIE: match by addresses alone
ALL_STATES = 0xFFFFFFFF
HEADER = struct.Struct("=IHHII")  # struct nlmsghdr
# struct inet_diag_req_v2: family, protocol, ext, pad, states, then struct inet_diag_sockid:
# ports (network order), source and destination (16 bytes each), interface, cookie. An
# answer, struct inet_diag_msg, starts with family, state, timer, retrans and the same sockid.
REQUEST = struct.Struct("=BBBBI2s2s16s16sIII")
MESSAGE = struct.Struct("=BBBB2s2s16s16sIII")


def destroy_tcp(
    local: str, local_port: int, remote: str, remote_port: int, interface: int = 0
) -> bool:
    """Abort the TCP socket of this host at local:local_port connected to remote:remote_port
    (the kernel sends the peer a reset), on link index `interface` (0: any; a socket not bound
    to a link matches any). True when it was aborted, False when there is no
    such socket; OSError when the kernel refuses (EOPNOTSUPP: no CONFIG_INET_DIAG_DESTROY).

    The kernel's lookup by addresses falls back to a listening socket on the local port when
    the connection itself is gone: the socket is therefore first looked up (SOCK_DIAG_BY_FAMILY),
    and only a connected one (not LISTEN, the peer's port its own) is destroyed, by its cookie."""
    here, there = ipaddress.ip_address(local), ipaddress.ip_address(remote)
    family = socket.AF_INET if here.version == 4 else socket.AF_INET6
    ports = (struct.pack("!H", local_port), struct.pack("!H", remote_port))
    addresses = (here.packed.ljust(16, b"\0"), there.packed.ljust(16, b"\0"))
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as channel:
        channel.settimeout(5)
        request = REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, ALL_STATES, *ports,
                               *addresses, interface, NO_COOKIE, NO_COOKIE)
        code, found = _ask(channel, SOCK_DIAG_BY_FAMILY, request, 1)
        if code:
            return _answer(code)
        state, peer_port, cookie = _connection(found)
        if state == TCP_LISTEN or peer_port != ports[1]:
            return False  # only a listener matched: the connection is gone
        request = REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, ALL_STATES, *ports,
                               *addresses, interface, *cookie)
        code, _ = _ask(channel, SOCK_DESTROY, request, 2)
    return _answer(code)


def _ask(channel: socket.socket, kind: int, body: bytes, sequence: int) -> tuple[int, bytes]:
    """Send one request; (error code, 0 for none; the payload of the first answer)."""
    flags = NLM_F_REQUEST | (NLM_F_ACK if kind == SOCK_DESTROY else 0)
    channel.sendto(HEADER.pack(HEADER.size + len(body), kind, flags, sequence, 0) + body, (0, 0))
    while True:
        reply = channel.recv(65536)
        _, answer, _, number, _ = HEADER.unpack_from(reply)
        if number != sequence:
            continue
        if answer == NLMSG_ERROR:
            return struct.unpack_from("=i", reply, HEADER.size)[0], b""
        return 0, reply[HEADER.size :]


def _connection(message: bytes) -> tuple[int, bytes, tuple[int, int]]:
    """(TCP state, the peer's port in network order, the socket's cookie) of an
    inet_diag_msg."""
    _family, state, _timer, _retrans, _sport, dport, _src, _dst, _if, *cookie = (
        MESSAGE.unpack_from(message)
    )
    return state, dport, (cookie[0], cookie[1])


def _answer(code: int) -> bool:
    if code == 0:
        return True
    if -code == errno.ENOENT:
        return False
    raise OSError(-code, os.strerror(-code))


# -- who listens: TCP listeners and unconnected UDP sockets, with their cgroup --------------

NLM_F_DUMP = 0x300
NLMSG_DONE = 3
TCP_CLOSE = 7  # an unconnected UDP socket's state
INET_DIAG_CGROUP_ID = 21  # a u64, the cgroup v2 directory's inode (Linux 5.8+)
# after the sockid: expires, rqueue, wqueue, uid, inode
TAIL = struct.Struct("=IIIII")
ATTRIBUTE = struct.Struct("=HH")  # struct rtattr


class Listening(tuple):
    """One socket that waits for others: (protocol, address, port, uid, cgroup id)."""

    __slots__ = ()

    def __new__(cls, protocol: str, address: str, port: int, uid: int, cgroup: int):
        return super().__new__(cls, (protocol, address, port, uid, cgroup))

    protocol = property(lambda self: self[0])
    address = property(lambda self: self[1])
    port = property(lambda self: self[2])
    uid = property(lambda self: self[3])
    cgroup = property(lambda self: self[4])


def listening_sockets() -> list[Listening]:
    """Every TCP listener and bound, unconnected UDP socket of this network namespace, IPv4
    and IPv6, with its owner's uid and its cgroup id (0 when the kernel does not say)."""
    found = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as channel:
        channel.settimeout(5)
        sequence = 10
        for family in (socket.AF_INET, socket.AF_INET6):
            for protocol, states in (
                (socket.IPPROTO_TCP, 1 << TCP_LISTEN),
                (socket.IPPROTO_UDP, 1 << TCP_CLOSE),
            ):
                sequence += 1
                name = "tcp" if protocol == socket.IPPROTO_TCP else "udp"
                for message in _dump(channel, family, protocol, states, sequence):
                    found += _listening(name, family, message)
    return found


def _dump(channel, family: int, protocol: int, states: int, sequence: int):
    empty = b"\0" * 16
    body = REQUEST.pack(
        family, protocol, 0, 0, states, b"\0\0", b"\0\0", empty, empty, 0, NO_COOKIE, NO_COOKIE
    )
    header = HEADER.pack(
        HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, sequence, 0
    )
    channel.sendto(header + body, (0, 0))
    while True:
        reply = channel.recv(1 << 20)
        offset = 0
        while offset + HEADER.size <= len(reply):
            length, kind, _, number, _ = HEADER.unpack_from(reply, offset)
            if length < HEADER.size:
                return
            if number == sequence:
                if kind in (NLMSG_DONE, NLMSG_ERROR):
                    return
                yield reply[offset + HEADER.size : offset + length]
            offset += (length + 3) & ~3


def _listening(protocol: str, family: int, message: bytes) -> list[Listening]:
    if len(message) < MESSAGE.size + TAIL.size:
        return []
    _family, _state, _timer, _retrans, sport, dport, source, _dst, _if, *_ = MESSAGE.unpack_from(
        message
    )
    if protocol == "udp" and dport != b"\0\0":
        return []  # connected: a client's socket
    uid = TAIL.unpack_from(message, MESSAGE.size)[3]
    size = 4 if family == socket.AF_INET else 16
    address = str(ipaddress.ip_address(source[:size]))
    cgroup, offset = 0, MESSAGE.size + TAIL.size
    while offset + ATTRIBUTE.size <= len(message):
        length, kind = ATTRIBUTE.unpack_from(message, offset)
        if length < ATTRIBUTE.size:
            break
        if kind == INET_DIAG_CGROUP_ID and length >= ATTRIBUTE.size + 8:
            cgroup = struct.unpack_from("=Q", message, offset + ATTRIBUTE.size)[0]
        offset += (length + 3) & ~3
    return [Listening(protocol, address, struct.unpack("!H", sport)[0], uid, cgroup)]
