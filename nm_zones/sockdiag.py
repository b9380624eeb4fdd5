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
SOCK_DESTROY = 21
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
    body = REQUEST.pack(
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
        NO_COOKIE,
        NO_COOKIE,
    )
    message = HEADER.pack(HEADER.size + len(body), SOCK_DESTROY, NLM_F_REQUEST | NLM_F_ACK, 1, 0)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as channel:
        channel.settimeout(5)
        channel.sendto(message + body, (0, 0))
        while True:
            reply = channel.recv(65536)
            _, kind, _, sequence, _ = HEADER.unpack_from(reply)
            if kind == NLMSG_ERROR and sequence == 1:
                (code,) = struct.unpack_from("=i", reply, HEADER.size)
                break
    if code == 0:
        return True
    if -code == errno.ENOENT:
        return False
    raise OSError(-code, os.strerror(-code))
