"""Bulk TCP transfers that a peer can hold open: does a flow a switch ended stay ended?

Run inside a namespace (a process that lives there for its whole life):

  bulk.py serve --address A --port P --mode send|receive [--size N]
      accepts one connection; `send` writes N bytes to it, `receive` reads it slowly (so
      that its receive window keeps closing and opening). Prints `ready`, then `sent TOTAL`
      or `received TOTAL` as the count grows, and at the end `done TOTAL` or `error NAME`.
  bulk.py client --address A --port P --mode fetch|upload [--size N]
      connects (prints `open`); `fetch` reads nothing until a line `go` arrives on stdin
      (the peer holds the flow at zero window), then reads; `upload` writes N bytes. Prints
      the same lines as the server.
A small receive buffer on the reading side keeps a window's worth of data small, so a
transfer of a few MiB cannot finish without many acknowledgements.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time

CHUNK = 16384
REPORT_EVERY = 65536
SMALL_BUFFER = 8192  # the kernel doubles it, and never goes below a few KiB


def report(word: str, total: int) -> None:
    print(f"{word} {total}", flush=True)


def send(sock: socket.socket, size: int) -> None:
    data, total, reported = b"x" * CHUNK, 0, 0
    try:
        while total < size:
            total += sock.send(data[: size - total])
            if total - reported >= REPORT_EVERY:
                report("sent", total)
                reported = total
        sock.shutdown(socket.SHUT_WR)
        report("done", total)
    except OSError as error:
        print(f"error {error.__class__.__name__}", flush=True)


def receive(sock: socket.socket, slow: bool) -> None:
    total, reported = 0, 0
    try:
        while True:
            data = sock.recv(CHUNK)
            if not data:
                report("done", total)
                return
            total += len(data)
            if total - reported >= REPORT_EVERY:
                report("received", total)
                reported = total
            if slow:
                time.sleep(0.002)
    except OSError as error:
        print(f"error {error.__class__.__name__}", flush=True)


def family_of(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def serve(address: str, port: int, mode: str, size: int) -> None:
    listener = socket.socket(family_of(address), socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if mode == "receive":  # inherited by the accepted connection
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
    listener.bind((address, port))
    listener.listen(1)
    print("ready", flush=True)
    connection, _ = listener.accept()
    if mode == "send":
        send(connection, size)
    else:
        receive(connection, slow=True)
    time.sleep(3600)  # keep the socket (and what the kernel knows of it) for the test


def client(address: str, port: int, mode: str, size: int) -> None:
    sock = socket.socket(family_of(address), socket.SOCK_STREAM)
    if mode == "fetch":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
    sock.settimeout(5)
    sock.connect((address, port))
    sock.settimeout(None)
    print("open", flush=True)
    if mode == "fetch":
        sys.stdin.readline()  # hold the flow at zero window until told
        receive(sock, slow=False)
    else:
        send(sock, size)
    time.sleep(3600)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=("serve", "client"))
    parser.add_argument("--address", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", required=True)
    parser.add_argument("--size", type=int, default=8 << 20)
    args = parser.parse_args()
    (serve if args.role == "serve" else client)(args.address, args.port, args.mode, args.size)


if __name__ == "__main__":
    main()
