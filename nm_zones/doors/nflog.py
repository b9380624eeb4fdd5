"""The packets zones with `log-denied: true` refused, read from netfilter's log group.

Beside each LOG rule, a zone that logs what it refuses has an NFLOG rule (ruleset/build.py)
that sends the packet to netlink log group NFLOG_GROUP with the same prefix, `nmz ZONE IFACE: `.
Unlike the kernel log (doors/denied.py), a netlink log group works in every network namespace
and needs no access to the journal: `nm-zones serve`, root, binds the group and keeps the last
packets in a bounded ring (DeniedPackets) that the zone editor reads over D-Bus.

Only the first bytes of each packet are copied (COPY_RANGE): its IP header and the ports. The
messages are the kernel's, but parsed as if hostile: a short, truncated or garbled message or
payload is skipped, never trusted. Names are those of linux/netfilter/nfnetlink_log.h.
Run as `python3 -m nm_zones.doors.nflog` it prints `ready` once bound, then one JSON object
per refused packet (the tests read the group of their own network namespace this way).
"""

from __future__ import annotations

import _socket
import collections
import json
import socket
import struct
import sys
import threading
import time

from ..netlink import NETLINK_NETFILTER, NFGENMSG, NLATTR, NLM_F_ACK, NLMSGHDR, Channel, attribute
from ..ruleset.layout import NFLOG_GROUP, log_prefix
from ..text import printable

# linux/netfilter/nfnetlink.h, nfnetlink_log.h
NFNL_SUBSYS_ULOG = 4
NFULNL_MSG_PACKET, NFULNL_MSG_CONFIG = 0, 1
NFULA_CFG_CMD, NFULA_CFG_MODE = 1, 2
NFULNL_CFG_CMD_BIND = 1
NFULNL_COPY_PACKET = 2
NFULA_PACKET_HDR, NFULA_IFINDEX_INDEV, NFULA_PAYLOAD, NFULA_PREFIX = 1, 4, 9, 10
NLA_TYPE_MASK = 0x3FFF
COPY_RANGE = 128  # bytes of each packet: an IPv6 header with a few extension headers, ports
RING_SIZE = 200  # packets kept; the oldest leave first
RECEIVE_BUFFER = 1 << 18

CONFIG_MODE = struct.Struct(">IBx")  # copy range (big endian), copy mode, padding
PROTOCOLS = {1: "icmp", 6: "tcp", 17: "udp", 33: "dccp", 58: "ipv6-icmp", 132: "sctp"}
PORT_PROTOCOLS = {6, 17, 33, 132}
ICMP_PROTOCOLS = {1, 58}
IPV6_EXTENSIONS = {0, 43, 60}  # hop-by-hop, routing, destination options: (length + 1) * 8
IPV6_FRAGMENT = 44


def open_group(group: int = NFLOG_GROUP) -> _socket.socket:
    """A netlink socket bound to `group`, copying COPY_RANGE bytes of each packet (blocking,
    for a reader of its own). OSError when the group cannot be bound (no CAP_NET_ADMIN, no
    nfnetlink_log, another reader). The two config messages go through netlink.Channel,
    which takes the kernel's acknowledgement by its sequence number: a packet the group
    sends meanwhile is not taken for it (it is dropped, as before)."""
    channel = Channel(NETLINK_NETFILTER)
    sock = channel.sock
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        sock.bind((0, 0))
        header = NFGENMSG.pack(socket.AF_UNSPEC, 0, group)  # res_id: the group
        kind = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG
        bind = attribute(NFULA_CFG_CMD, bytes([NFULNL_CFG_CMD_BIND]))
        mode = attribute(NFULA_CFG_MODE, CONFIG_MODE.pack(COPY_RANGE, NFULNL_COPY_PACKET))
        for command in (bind, mode):
            channel.ask(kind, NLM_F_ACK, header + command)
        sock.settimeout(None)
    except OSError:
        sock.close()
        raise
    return sock


def attributes(data: bytes, start: int, end: int) -> dict[int, bytes]:
    """The netlink attributes in data[start:end] (the first of each type); a bad length
    ends the list."""
    found: dict[int, bytes] = {}
    while start + NLATTR.size <= end:
        length, kind = NLATTR.unpack_from(data, start)
        if length < NLATTR.size or start + length > end:
            break
        found.setdefault(kind & NLA_TYPE_MASK, data[start + NLATTR.size : start + length])
        start += (length + 3) & ~3
    return found


def messages(data: bytes):
    """(type, attributes) of each netlink message in one datagram."""
    offset = 0
    while offset + NLMSGHDR.size + NFGENMSG.size <= len(data):
        length, kind, _flags, _seq, _pid = NLMSGHDR.unpack_from(data, offset)
        if length < NLMSGHDR.size or offset + length > len(data):
            return
        yield kind, attributes(data, offset + NLMSGHDR.size + NFGENMSG.size, offset + length)
        offset += (length + 3) & ~3


def _ipv6_transport(payload: bytes) -> tuple[int, int] | None:
    """(next header, offset of the transport header) after the extension headers."""
    protocol, offset = payload[6], 40
    for _ in range(8):
        if protocol in IPV6_EXTENSIONS and offset + 2 <= len(payload):
            protocol, offset = payload[offset], offset + (payload[offset + 1] + 1) * 8
        elif protocol == IPV6_FRAGMENT and offset + 8 <= len(payload):
            if struct.unpack_from(">H", payload, offset + 2)[0] & 0xFFF8:
                return None  # not the first fragment: no ports in it
            protocol, offset = payload[offset], offset + 8
        else:
            return protocol, offset
    return None


def packet_fields(payload: bytes) -> dict[str, str] | None:
    """source, protocol and port of an IPv4 or IPv6 packet; None when it is neither, or cut
    short before the fields (the port is `-` when the copy ends before it)."""
    if not payload:
        return None
    version = payload[0] >> 4
    if version == 4 and len(payload) >= 20:
        header = (payload[0] & 0x0F) * 4
        if header < 20:
            return None
        fragment = struct.unpack_from(">H", payload, 6)[0] & 0x1FFF
        protocol, source = payload[9], socket.inet_ntop(socket.AF_INET, payload[12:16])
        offset = None if fragment else header
    elif version == 6 and len(payload) >= 40:
        source = socket.inet_ntop(socket.AF_INET6, payload[8:24])
        found = _ipv6_transport(payload)
        protocol, offset = found if found else (payload[6], None)
    else:
        return None
    port = "-"
    if offset is not None and protocol in PORT_PROTOCOLS and offset + 4 <= len(payload):
        port = str(struct.unpack_from(">H", payload, offset + 2)[0])
    elif offset is not None and protocol in ICMP_PROTOCOLS and offset < len(payload):
        port = f"type {payload[offset]}"
    return {"protocol": PROTOCOLS.get(protocol, str(protocol)), "source": source, "port": port}


def _interface(found: dict[int, bytes], label: str) -> str:
    index = found.get(NFULA_IFINDEX_INDEV, b"")
    if len(index) == 4:
        try:
            return socket.if_indextoname(struct.unpack(">I", index)[0])
        except OSError:
            pass
    return label


def parse(kind: int, found: dict[int, bytes], when: float) -> dict[str, str] | None:
    """One refused packet as the zone editor shows it, or None when the message is not a
    packet of an nm-zones rule or cannot be read."""
    if kind != (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET:
        return None
    prefix = found.get(NFULA_PREFIX, b"").split(b"\0", 1)[0].decode("utf-8", "replace")
    words = prefix.split(" ")
    if len(words) != 4 or words[0] != "nmz" or not words[2].endswith(":") or words[3]:
        return None
    fields = packet_fields(found.get(NFULA_PAYLOAD, b""))
    if fields is None:
        return None
    label = words[2][:-1]
    return {
        "time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when)),
        "interface": printable(_interface(found, label)),
        "zone": printable(words[1]),
        "prefix": printable(prefix),
        **fields,
    }


def read_packets(data: bytes) -> list[dict[str, str]]:
    """The refused packets in one datagram; one the parser did not foresee is skipped
    rather than ending the reader."""
    found = []
    for kind, attrs in messages(data):
        try:
            packet = parse(kind, attrs, time.time())
        except (ValueError, IndexError, struct.error):
            continue
        if packet is not None:
            found.append(packet)
    return found


class DeniedPackets:
    """The last RING_SIZE refused packets, filled by a thread reading the group."""

    def __init__(self, size: int = RING_SIZE):
        self.ring: collections.deque[dict[str, str]] = collections.deque(maxlen=size)
        self.problem = ""  # why nothing is read (the group could not be bound)

    def start(self, group: int = NFLOG_GROUP) -> None:
        try:
            sock = open_group(group)
        except OSError as error:
            self.problem = f"netlink log group {group}: {error}"
            return
        threading.Thread(target=self.read, args=(sock,), daemon=True).start()

    def read(self, sock: _socket.socket) -> None:
        while True:
            try:
                data = sock.recv(65536)
            except OSError:  # ENOBUFS: packets were lost while the ring was busy; go on
                continue
            self.ring.extend(read_packets(data))

    def of_zone(self, zone: str) -> list[dict[str, str]]:
        """The zone's refused packets, newest first. Prefixes are trimmed to 29
        characters, so a long zone name is matched as its rule wrote it."""
        return [
            {key: value for key, value in packet.items() if key != "prefix"}
            for packet in reversed(list(self.ring))
            if packet["prefix"] in (log_prefix(zone, packet["interface"]), log_prefix(zone, "src"))
        ]


def main() -> int:
    """`ready`, then each refused packet as a JSON line (until killed)."""
    try:
        sock = open_group(int(sys.argv[1]) if len(sys.argv) > 1 else NFLOG_GROUP)
    except OSError as error:
        print(f"nm-zones: {error}", file=sys.stderr)
        return 1
    print("ready", flush=True)
    while True:
        for packet in read_packets(sock.recv(65536)):
            print(json.dumps(packet), flush=True)


if __name__ == "__main__":
    sys.exit(main())
