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
