"""The default gateway's MAC address, resolved actively, with the standard library only.

The ARP cache may be empty right after DHCP, so the kernel is made to resolve the gateway:
an empty UDP datagram to its discard port from a socket bound to the device (SO_BINDTODEVICE,
so that the route of another interface is never used), then the kernel's neighbour table is
read over rtnetlink (RTM_GETNEIGH) until the entry is resolved, a couple of seconds at most.
pyroute2 would cost an event 200-600 ms of imports; this costs a socket and a dump. The
table is read again soon after the datagram and then less and less often (1, 2, 4 ... 20 ms),
so an answer on a LAN is seen within a millisecond or two of arriving instead of at the next
fixed tick. The low-level `_socket` is used, not `socket`: `socket` imports enum and
selectors, 5-6 ms of every event on a known network (bench/bench.py, row f).
An entry the kernel already holds counts (REACHABLE, STALE, DELAY, PROBE): since Linux 4.19 a
carrier loss evicts a device's neighbour entries, so a re-plugged cable starts from none.
"""

from __future__ import annotations

import _socket as socket  # the C module: `socket` costs every event 5-6 ms of imports
import struct
import time

from ..netlink import NETLINK_ROUTE, NLM_F_DUMP, Channel, attributes

RTM_NEWNEIGH, RTM_GETNEIGH = 28, 30
NDA_DST, NDA_LLADDR = 1, 2
NUD_INCOMPLETE, NUD_FAILED = 0x01, 0x20
NTF_ROUTER = 0x80
NDMSG = struct.Struct("=BBHiHBB")
RESOLVE_SECONDS = 2.0
DISCARD_PORT = 9
FIRST_WAIT, LONGEST_WAIT = 0.001, 0.02  # between reads of the table: doubling, up to 20 ms


def neighbours(family: int, ifindex: int) -> dict[str, tuple[str, int, int]]:
    """address -> (MAC, NUD state, NTF flags) of the device's neighbour table (OSError when
    the kernel does not answer in full)."""
    with Channel(NETLINK_ROUTE) as channel:
        answers = channel.ask(RTM_GETNEIGH, NLM_F_DUMP, NDMSG.pack(family, 0, 0, 0, 0, 0, 0))
    found: dict[str, tuple[str, int, int]] = {}
    for message in answers:
        _entry(message, family, ifindex, found)
    return found


def _entry(message: bytes, family: int, ifindex: int, found: dict) -> None:
    """One RTM_NEWNEIGH message, kept when it belongs to the device."""
    if len(message) < NDMSG.size:
        return
    entry_family, _, _, index, state, flags, _ = NDMSG.unpack_from(message)
    if entry_family != family or index != ifindex:
        return
    found_attributes = attributes(message, NDMSG.size)
    if NDA_DST in found_attributes and NDA_LLADDR in found_attributes:
        address = socket.inet_ntop(family, found_attributes[NDA_DST])
        mac = ":".join(f"{byte:02x}" for byte in found_attributes[NDA_LLADDR])
        found[address] = (mac, state, flags)


def _poke(interface: str, gateway: str, family: int, ifindex: int) -> None:
    """Make the kernel resolve `gateway` on `interface`: one empty datagram to it."""
    sock = socket.socket(family, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, interface.encode())
        sock.setblocking(False)
        target = (
            (gateway, DISCARD_PORT, 0, ifindex)
            if family == socket.AF_INET6
            else (gateway, DISCARD_PORT)
        )
        try:  # noqa: SIM105 - contextlib would cost every event 5 ms of imports
            sock.sendto(b"", target)
        except OSError:
            pass  # unreachable for now: the table is read anyway
    finally:
        sock.close()


def gateway_mac(interface: str, gateway: str, timeout: float = RESOLVE_SECONDS) -> str:
    """The MAC address of `gateway` as seen on `interface`; "" when it does not answer in
    `timeout` seconds (the network then stays unidentified)."""
    family = socket.AF_INET6 if ":" in gateway else socket.AF_INET
    try:
        ifindex = socket.if_nametoindex(interface)
        packed = socket.inet_pton(family, gateway.split("%")[0])
    except OSError:
        return ""
    address = socket.inet_ntop(family, packed)
    deadline = time.monotonic() + timeout
    next_poke = 0.0
    wait = FIRST_WAIT
    while True:
        now = time.monotonic()
        if now >= next_poke:
            try:
                _poke(interface, address, family, ifindex)
            except OSError:
                return ""
            next_poke = now + 0.5
        try:
            entry = neighbours(family, ifindex).get(address)
        except OSError:  # asked again at the next read, until the deadline
            entry = None
        if (
            entry
            and entry[0] != "00:00:00:00:00:00"
            and not entry[1] & (NUD_INCOMPLETE | NUD_FAILED)
        ):
            return entry[0]
        if time.monotonic() >= deadline:
            return ""
        time.sleep(wait)
        wait = min(wait * 2, LONGEST_WAIT)
