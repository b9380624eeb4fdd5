"""This host's addresses and the interface it routes an address out of, over rtnetlink
(netlink.py): what flows.py asks to tell which interface a flow entered through. The names
are those of linux/rtnetlink.h and linux/if_addr.h."""

from __future__ import annotations

import struct

from .netlink import NETLINK_ROUTE, NLM_F_DUMP, Channel, attribute, attributes

RTM_GETADDR, RTM_GETROUTE = 22, 26
IFA_ADDRESS, IFA_LOCAL, IFA_BROADCAST = 1, 2, 4
RTA_DST, RTA_SRC, RTA_OIF = 1, 2, 4
AF_UNSPEC, AF_INET, AF_INET6 = 0, 2, 10
IFADDRMSG = struct.Struct("=BBBBI")  # family, prefix length, flags, scope, interface index
RTMSG = struct.Struct("=BBBBBBBBI")  # family, dst_len, src_len, tos, table, protocol, scope,
# type, flags
OIF = struct.Struct("=i")


class Routing(Channel):
    """An rtnetlink socket of this process's namespace."""

    def __init__(self):
        super().__init__(NETLINK_ROUTE)

    def addresses(self) -> list[tuple[int, str, str]]:
        """(interface index, address, broadcast address or "") of every address here, both
        families. On a point-to-point link IFA_ADDRESS is the other end: IFA_LOCAL is ours."""
        from _socket import inet_ntop

        found = []
        for payload in self.ask(RTM_GETADDR, NLM_F_DUMP, IFADDRMSG.pack(AF_UNSPEC, 0, 0, 0, 0)):
            family, _, _, _, index = IFADDRMSG.unpack_from(payload)
            if family not in (AF_INET, AF_INET6):
                continue  # MCTP, Phonet and the like: no IP address, no flow of ours
            values = attributes(payload, IFADDRMSG.size)
            address = values.get(IFA_LOCAL) or values.get(IFA_ADDRESS)
            if address is None:
                continue
            broadcast = values.get(IFA_BROADCAST)
            shown = inet_ntop(family, broadcast) if broadcast else ""
            found.append((index, inet_ntop(family, address), shown))
        return found

    def route_interface(self, destination, source=None) -> int:
        """The index of the interface the host routes `destination` out of (looked up from
        local address `source`, when given); OSError when there is no route."""
        family = AF_INET6 if destination.version == 6 else AF_INET
        bits = 128 if family == AF_INET6 else 32
        body = RTMSG.pack(family, bits, bits if source is not None else 0, 0, 0, 0, 0, 0, 0)
        body += attribute(RTA_DST, destination.packed)
        if source is not None:
            body += attribute(RTA_SRC, source.packed)
        for payload in self.ask(RTM_GETROUTE, 0, body):
            oif = attributes(payload, RTMSG.size).get(RTA_OIF)
            if oif is not None and len(oif) == OIF.size:
                return OIF.unpack(oif)[0]
        return 0
