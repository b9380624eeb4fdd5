"""sockdiag.destroy_tcp aborts exactly one connection: never the listener that the kernel's
lookup by addresses falls back to once the connection is gone. Run in a private network
namespace (unshare), on its loopback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.harness.lab import REPO, base_env

SCRIPT = """
import socket, sys
from nm_zones.sockdiag import destroy_tcp
subprocess_lo = __import__("subprocess").run(["ip", "link", "set", "lo", "up"], check=True)
listener = socket.create_server(("127.0.0.1", 0))
port = listener.getsockname()[1]

def connection():
    client = socket.create_connection(("127.0.0.1", port))
    server, _ = listener.accept()
    return client, server

client, server = connection()
client_port = client.getsockname()[1]
print("open", destroy_tcp("127.0.0.1", port, "127.0.0.1", client_port))
client.settimeout(2)
try:
    print("client", client.recv(1))
except OSError as error:
    print("client", type(error).__name__)

client, server = connection()
client_port = client.getsockname()[1]
client.close()
server.close()
print("gone", destroy_tcp("127.0.0.1", port, "127.0.0.1", client_port))
again, _ = connection()
print("listener alive", again is not None)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace)")
def test_only_the_connection_is_aborted_never_the_listener():
    result = subprocess.run(
        ["unshare", "--net", sys.executable, "-c", SCRIPT],
        capture_output=True, text=True, env=base_env(PYTHONPATH=REPO), timeout=30,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "open True"
    assert lines[1] in ("client ConnectionResetError", "client b''"), lines
    assert lines[2:] == ["gone False", "listener alive True"], result.stdout + result.stderr


LISTENING = """
import os, socket, subprocess
from nm_zones.sockdiag import listening_sockets
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
tcp4 = socket.create_server(("127.0.0.1", 0))
second = socket.create_server(("127.0.0.1", 0))  # a dump of more than one answer
tcp6 = socket.create_server(("::1", 0), family=socket.AF_INET6)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # connected: a client's, left out
client.connect(udp.getsockname())
dialer = socket.create_connection(tcp4.getsockname())  # an established TCP socket: left out
for entry in sorted(listening_sockets()):
    protocol, address, port, uid, cgroup = entry
    mine = {("tcp", tcp4.getsockname()[1]): "tcp4", ("tcp", second.getsockname()[1]): "tcp4",
            ("tcp", tcp6.getsockname()[1]): "tcp6",
            ("udp", udp.getsockname()[1]): "udp"}.get((protocol, port), "other")
    print(protocol, address, mine, uid == os.getuid(), cgroup > 0)  # Linux 5.8+ names it
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace)")
def test_listening_sockets_are_the_listeners_and_unconnected_udp_of_both_families():
    """One request per family and protocol over netlink.Channel: TCP listeners and bound,
    unconnected UDP sockets, each with its owner and cgroup; connected sockets left out."""
    result = subprocess.run(
        ["unshare", "--net", sys.executable, "-c", LISTENING],
        capture_output=True, text=True, env=base_env(PYTHONPATH=REPO), timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "tcp 127.0.0.1 tcp4 True True",
        "tcp 127.0.0.1 tcp4 True True",
        "tcp ::1 tcp6 True True",
        "udp 127.0.0.1 udp True True",
    ], result.stdout
