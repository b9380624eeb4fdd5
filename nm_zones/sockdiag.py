"""Abort one local TCP connection by its addresses: sock_diag's SOCK_DESTROY.

flows.py labels the conntrack entry of a flow a switch ended, so its packets are dropped
while the entry lives; the local socket of such a connection is aborted as well, so that
nothing on this host is left to revive the flow once the entry expires. The kernel answers
EOPNOTSUPP when it is built without CONFIG_INET_DIAG_DESTROY.

One request, packed by hand (pyroute2 has no SOCK_DESTROY): struct nlmsghdr, then struct
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
# ports (network order), source and destination (16 bytes each), interface, cookie
REQUEST = struct.Struct("=BBBBI2s2s16s16sIII")


def destroy_tcp(
    local: str, local_port: int, remote: str, remote_port: int, interface: int = 0
) -> bool:
    """Abort the TCP socket of this host at local:local_port connected to remote:remote_port
    (the kernel sends the peer a reset), on link index `interface` (0: any; a socket not bound
    to a link matches any). True when it was aborted, False when there is no
    such socket; OSError when the kernel refuses (EOPNOTSUPP: no CONFIG_INET_DIAG_DESTROY)."""
    here, there = ipaddress.ip_address(local), ipaddress.ip_address(remote)
    family = socket.AF_INET if here.version == 4 else socket.AF_INET6

    def request(cookie: bytes) -> bytes:
        return REQUEST.pack(
            family,
            socket.IPPROTO_TCP,
            0,
            0,
            ALL_STATES,
            struct.pack("!H", local_port),
            struct.pack("!H", remote_port),
            here.packed.ljust(16, b"\0"),
            there.packed.ljust(16, b"\0"),
            interface,
            *struct.unpack("=II", cookie),
        )

    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as channel:
        channel.settimeout(5)
        # the kernel looks a socket up as for an incoming packet: with the connection's own
        # socket gone, that is the listening one; only the connection's is aborted, by cookie
        kind, reply = _ask(channel, SOCK_DIAG_BY_FAMILY, request(struct.pack("=II", *NO_COOKIES)))
        if kind == NLMSG_ERROR:
            return _answer(reply)
        if reply[HEADER.size + 1] == TCP_LISTEN:
            return False
        cookie = reply[HEADER.size + COOKIE_OFFSET : HEADER.size + COOKIE_OFFSET + 8]
        _, reply = _ask(channel, SOCK_DESTROY, request(cookie))
        return _answer(reply)


NO_COOKIES = (NO_COOKIE, NO_COOKIE)
COOKIE_OFFSET = 4 + 4 + 32 + 4  # struct inet_diag_msg: 4 bytes, then sockid's ports, addresses, if


def _ask(channel: socket.socket, kind: int, body: bytes) -> tuple[int, bytes]:
    """One request (sequence 1); (the reply's type, the reply)."""
    flags = NLM_F_REQUEST | (NLM_F_ACK if kind == SOCK_DESTROY else 0)
    channel.sendto(HEADER.pack(HEADER.size + len(body), kind, flags, 1, 0) + body, (0, 0))
    while True:
        reply = channel.recv(65536)
        _, answer, _, sequence, _ = HEADER.unpack_from(reply)
        if sequence == 1 and answer in (NLMSG_ERROR, kind):
            return answer, reply


def _answer(reply: bytes) -> bool:
    """An NLMSG_ERROR: True for success, False for no such socket, else OSError."""
    (code,) = struct.unpack_from("=i", reply, HEADER.size)
    if code == 0:
        return True
    if -code == errno.ENOENT:
        return False
    raise OSError(-code, os.strerror(-code))
