"""Services on the zoned host: TCP accept and UDP echo on the given ports, IPv4 and IPv6.

Run inside the zoned namespace; prints `ready` once every socket listens, then serves until
killed. `python3 listen.py --tcp 22,8080 --udp 631 --whoami 7777`: a `--whoami` TCP port
answers each connection with the client's address as this host sees it (NAT shows), a line.
"""

from __future__ import annotations

import argparse
import selectors
import socket
import sys

IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)  # Linux's value; Python names it only on some builds


def listening(tcp: str, udp: str, whoami: str = ""):
    """(socket, role, port) bound on every address of both families, for comma-separated
    TCP, UDP and whoami port lists; TCP sockets listen. The role is the socket kind, or
    "whoami"."""
    for family, any_address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        for kind, ports, role in (
            (socket.SOCK_STREAM, tcp, socket.SOCK_STREAM),
            (socket.SOCK_DGRAM, udp, socket.SOCK_DGRAM),
            (socket.SOCK_STREAM, whoami, "whoami"),
        ):
            for port in filter(None, ports.split(",")):
                sock = socket.socket(family, kind)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((any_address, int(port)))
                if kind == socket.SOCK_STREAM:
                    sock.listen(128)
                elif family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
                else:
                    sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
                yield sock, role, int(port)


def echo_from_probed_address(sock: socket.socket) -> None:
    """Answer a datagram from the address it was sent to. A socket bound to the wildcard
    otherwise lets routing pick the source, which differs while the probed IPv6 address is
    still optimistic (DAD running), and the prober's connected socket drops such a reply."""
    data, ancillary, _, peer = sock.recvmsg(2048, socket.CMSG_SPACE(64))
    sock.sendmsg(
        [data],
        [(level, kind, info) for level, kind, info in ancillary if (level, kind) in PKTINFO],
        0,
        peer,
    )


PKTINFO = {(socket.IPPROTO_IPV6, socket.IPV6_PKTINFO), (socket.IPPROTO_IP, IP_PKTINFO)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tcp", default="")
    parser.add_argument("--udp", default="")
    parser.add_argument("--whoami", default="")
    args = parser.parse_args()
    selector = selectors.DefaultSelector()
    for sock, role, _ in listening(args.tcp, args.udp, args.whoami):
        selector.register(sock, selectors.EVENT_READ, role)
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            sock = key.fileobj
            if key.data == "whoami":
                connection, peer = sock.accept()
                with connection:
                    connection.sendall(f"{peer[0]}\n".encode())
            elif key.data == socket.SOCK_STREAM:
                connection, _ = sock.accept()
                selector.register(connection, selectors.EVENT_READ, "conn")
            elif key.data == "conn":
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                if data:
                    sock.sendall(data)
                else:
                    selector.unregister(sock)
                    sock.close()
            else:
                echo_from_probed_address(sock)


if __name__ == "__main__":
    sys.exit(main())
