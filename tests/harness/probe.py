"""Probe a host from the other end of a link: is each attempt accepted, rejected or dropped?

Run as a program inside the peer's network namespace (a process that lives there for its
whole life): it reads a JSON list of probes on stdin and prints a JSON list of results.
  accepted  the service answered (TCP handshake, UDP reply, ICMP echo reply)
  rejected  a fast refusal: TCP RST, or an ICMP error (port unreachable, prohibited)
  dropped   nothing came back before the timeout
"""

from __future__ import annotations

import errno
import json
import os
import select
import socket
import struct
import sys
import time
from concurrent.futures import ThreadPoolExecutor

TIMEOUT = 1.0
# Over IPv6 a TCP connect learns of an ICMPv6 refusal only when the SYN is sent again, one
# second later (seen on this kernel): a TCP probe must wait longer than that before it may
# call silence a drop.
TCP_TIMEOUT = 2.5
REFUSALS = {
    errno.ECONNREFUSED,
    errno.EHOSTUNREACH,
    errno.ENETUNREACH,
    errno.EACCES,
    errno.EPERM,
    errno.EHOSTDOWN,
    errno.ECONNRESET,
}


def _family(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def _outcome(attempt) -> str:
    """accepted if `attempt()` returns, dropped on timeout, rejected on a refusal."""
    try:
        attempt()
        return "accepted"
    except TimeoutError:
        return "dropped"
    except OSError as error:
        if error.errno in REFUSALS:
            return "rejected"
        raise


def probe_tcp(address: str, port: int, timeout: float = TCP_TIMEOUT, source: str = "") -> str:
    with socket.socket(_family(address), socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        if source:  # one of the prober's addresses (tests of zones bound by source)
            sock.bind((source, 0))
        return _outcome(lambda: sock.connect((address, port)))


# A datagram, its echo or the ICMP error about it may be lost on the way (a neighbour being
# resolved, the kernel's rate limit on ICMP errors per peer, a busy machine): silence counts
# as dropped only after this many datagrams, each given the whole timeout.
UDP_ATTEMPTS = 2


def probe_udp(address: str, port: int, timeout: float = TIMEOUT) -> str:
    with socket.socket(_family(address), socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.connect((address, port))

        def exchange():
            for attempt in range(UDP_ATTEMPTS):
                sock.send(b"nmz-probe")
                try:
                    sock.recv(512)
                    return
                except TimeoutError:
                    if attempt == UDP_ATTEMPTS - 1:
                        raise

        return _outcome(exchange)


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def probe_ping(address: str, timeout: float = TIMEOUT) -> str:
    """ICMP echo through a raw socket; an ICMP error counts only if it quotes our echo."""
    v6 = ":" in address
    family = socket.AF_INET6 if v6 else socket.AF_INET
    proto = socket.IPPROTO_ICMPV6 if v6 else socket.IPPROTO_ICMP
    ident = (os.getpid() ^ id(address) ^ int(time.monotonic() * 1e6)) & 0xFFFF
    echo_type, reply_type, error_type = (128, 129, 1) if v6 else (8, 0, 3)
    header = struct.pack("!BBHHH", echo_type, 0, 0, ident, 1)
    payload = b"nmz-ping"
    if not v6:  # the kernel computes ICMPv6 checksums itself
        header = struct.pack("!BBHHH", echo_type, 0, _checksum(header + payload), ident, 1)
    with socket.socket(family, socket.SOCK_RAW, proto) as sock:
        sock.sendto(header + payload, (address, 0))
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([sock], [], [], left)
            if not ready:
                break
            packet = sock.recv(2048)
            if not v6:
                packet = packet[(packet[0] & 0x0F) * 4 :]  # raw IPv4 sockets include the IP header
            kind = packet[0]
            if kind == reply_type and struct.unpack("!H", packet[4:6])[0] == ident:
                return "accepted"
            if kind == error_type:
                quoted = packet[8:]  # the packet the error is about: IP header, then ours
                quoted = quoted[40:] if v6 else quoted[(quoted[0] & 0x0F) * 4 :]
                ours = len(quoted) >= 6 and quoted[0] == echo_type
                if ours and struct.unpack("!H", quoted[4:6])[0] == ident:
                    return "rejected"
    return "dropped"


def run_probe(spec: dict) -> str:
    kind, address = spec["kind"], spec["address"]
    timeout = spec.get("timeout", TIMEOUT)
    if kind == "tcp":
        timeout = spec.get("timeout", TCP_TIMEOUT)
        return probe_tcp(address, spec["port"], timeout, spec.get("source", ""))
    if kind == "udp":
        return probe_udp(address, spec["port"], timeout)
    if kind == "ping":
        return probe_ping(address, timeout)
    raise ValueError(f"unknown probe kind {kind!r}")


def run_all(specs: list[dict]) -> list[str]:
    with ThreadPoolExecutor(max_workers=max(1, min(64, len(specs)))) as pool:
        return list(pool.map(run_probe, specs))


if __name__ == "__main__":
    print(json.dumps(run_all(json.load(sys.stdin))))
