"""Long-lived flows across a link: does an open session still get through after a change?

Run inside a namespace (a process that lives there for its whole life):

  session.py serve --tcp 8080,22 --udp 631
      echoes on those ports, IPv4 and IPv6; prints `ready`, then one line `got PROTO PORT
      TEXT` for every chunk it receives, so a test can tell what reached the server.
  session.py client --proto tcp --address 10.77.1.1 --port 8080 [--timeout 1]
      opens one session (a TCP connection, or a connected UDP socket) and exchanges `hello`
      (allowing 5 s); prints `open`. Then, for every line TOKEN on stdin, sends TOKEN on the
      same session and prints `ok TOKEN` when the echo comes back within the timeout, else
      `dead TOKEN WHY`.
"""

from __future__ import annotations

import argparse
import selectors
import socket
import sys

from listen import listening  # run as a program from this folder

OPEN_TIMEOUT = 5.0


def serve(tcp: str, udp: str) -> None:
    selector = selectors.DefaultSelector()
    for sock, kind, port in listening(tcp, udp):
        role = "listen" if kind == socket.SOCK_STREAM else "udp"
        selector.register(sock, selectors.EVENT_READ, (role, port))
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            sock, (role, port) = key.fileobj, key.data
            if role == "listen":
                connection, _ = sock.accept()
                selector.register(connection, selectors.EVENT_READ, ("tcp", port))
            elif role == "tcp":
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(sock)
                    sock.close()
                    continue
                print(f"got tcp {port} {data.decode(errors='replace').strip()}", flush=True)
                sock.sendall(data)
            else:
                data, peer = sock.recvfrom(2048)
                print(f"got udp {port} {data.decode(errors='replace').strip()}", flush=True)
                sock.sendto(data, peer)


def exchange(sock: socket.socket, token: str) -> str:
    """`ok` when the token comes back whole, else why not."""
    message = (token + "\n").encode()
    try:
        sock.send(message)
        received = b""
        while len(received) < len(message):
            chunk = sock.recv(len(message) - len(received))
            if not chunk:
                return "closed"
            received += chunk
    except TimeoutError:
        return "timeout"
    except OSError as error:
        return error.__class__.__name__
    return "ok" if received == message else "garbled"


def client(proto: str, address: str, port: int, timeout: float) -> None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    sock = socket.socket(family, kind)
    sock.settimeout(OPEN_TIMEOUT)  # opening on a busy machine may take a while
    sock.connect((address, port))
    result = exchange(sock, "hello")
    print("open" if result == "ok" else f"failed {result}", flush=True)
    sock.settimeout(timeout)
    for line in sys.stdin:
        token = line.strip()
        result = exchange(sock, token)
        print(f"ok {token}" if result == "ok" else f"dead {token} {result}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    server = sub.add_parser("serve")
    server.add_argument("--tcp", default="")
    server.add_argument("--udp", default="")
    peer = sub.add_parser("client")
    peer.add_argument("--proto", choices=("tcp", "udp"), default="tcp")
    peer.add_argument("--address", required=True)
    peer.add_argument("--port", type=int, required=True)
    peer.add_argument("--timeout", type=float, default=1.0)
    args = parser.parse_args()
    if args.mode == "serve":
        serve(args.tcp, args.udp)
    else:
        client(args.proto, args.address, args.port, args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
