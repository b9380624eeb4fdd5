"""Abort one local TCP connection by its addresses (sock_diag's SOCK_DESTROY), and list
the sockets that listen, with their cgroup (listening_sockets: refused programs are asked about).

flows.py labels the conntrack entry of a flow a switch ended, so its packets are dropped
while the entry lives; the local socket of such a connection is aborted as well, so that
nothing on this host is left to revive the flow once the entry expires. The kernel answers
EOPNOTSUPP when it is built without CONFIG_INET_DIAG_DESTROY.

Requests packed by hand (pyroute2 has no SOCK_DESTROY): struct inet_diag_req_v2
(include/uapi/linux/inet_diag.h), sent over a netlink.Channel.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import struct

from .netlink import NETLINK_SOCK_DIAG, NLM_F_ACK, NLM_F_DUMP, Channel, attributes

SOCK_DIAG_BY_FAMILY, SOCK_DESTROY = 20, 21
TCP_LISTEN = 10
NO_COOKIE = 0xFFFFFFFF  # INET_DIAG_NOCOOKIE: match by addresses alone
ALL_STATES = 0xFFFFFFFF
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
    try:
        with Channel(NETLINK_SOCK_DIAG) as channel:
            request = REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, ALL_STATES, *ports,
                                   *addresses, interface, NO_COOKIE, NO_COOKIE)
            found = channel.ask(SOCK_DIAG_BY_FAMILY, 0, request)
            state, peer_port, cookie = _connection(found[0] if found else b"")
            if state == TCP_LISTEN or peer_port != ports[1]:
                return False  # only a listener matched: the connection is gone
            request = REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, ALL_STATES, *ports,
                                   *addresses, interface, *cookie)
            channel.ask(SOCK_DESTROY, NLM_F_ACK, request)
    except OSError as error:
        if error.errno == errno.ENOENT:
            return False  # no such socket (any more)
        raise
    return True


def _connection(message: bytes) -> tuple[int, bytes, tuple[int, int]]:
    """(TCP state, the peer's port in network order, the socket's cookie) of an
    inet_diag_msg (ENOENT for an answer too short to be one)."""
    if len(message) < MESSAGE.size:
        raise OSError(errno.ENOENT, "sock_diag: a short answer")
    _family, state, _timer, _retrans, _sport, dport, _src, _dst, _if, *cookie = (
        MESSAGE.unpack_from(message)
    )
    return state, dport, (cookie[0], cookie[1])


# -- who listens: TCP listeners and unconnected UDP sockets, with their cgroup --------------

TCP_CLOSE = 7  # an unconnected UDP socket's state
INET_DIAG_CGROUP_ID = 21  # a u64, the cgroup v2 directory's inode (Linux 5.8+)
# after the sockid: expires, rqueue, wqueue, uid, inode
TAIL = struct.Struct("=IIIII")


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
    and IPv6, with its owner's uid and its cgroup id (0 when the kernel does not say).
    None of a protocol the kernel has no sock_diag module for (ENOENT, e.g. no udp_diag);
    OSError when it does not answer in full: a partial list would leave programs unasked
    about."""
    found = []
    empty = b"\0" * 16
    with Channel(NETLINK_SOCK_DIAG) as channel:
        for family in (socket.AF_INET, socket.AF_INET6):
            for protocol, states in (
                (socket.IPPROTO_TCP, 1 << TCP_LISTEN),
                (socket.IPPROTO_UDP, 1 << TCP_CLOSE),
            ):
                name = "tcp" if protocol == socket.IPPROTO_TCP else "udp"
                body = REQUEST.pack(family, protocol, 0, 0, states, b"\0\0", b"\0\0", empty,
                                    empty, 0, NO_COOKIE, NO_COOKIE)
                try:
                    answers = channel.ask(SOCK_DIAG_BY_FAMILY, NLM_F_DUMP, body)
                except OSError as error:
                    if error.errno != errno.ENOENT:
                        raise
                    answers = []
                for message in answers:
                    found += _listening(name, family, message)
    return found


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
    cgroup_id = attributes(message, MESSAGE.size + TAIL.size).get(INET_DIAG_CGROUP_ID, b"")
    cgroup = struct.unpack_from("=Q", cgroup_id)[0] if len(cgroup_id) >= 8 else 0
    return [Listening(protocol, address, struct.unpack("!H", sport)[0], uid, cgroup)]
