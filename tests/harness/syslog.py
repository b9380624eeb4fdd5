"""Run a command with a private /dev/log and return what it sent to syslog.

This machine has no syslog socket; the command runs in a private mount namespace whose /dev
is a tmpfs (null, zero, full, random and urandom bound in) with a datagram server on /dev/log.
After the command, an end marker goes to the same socket, so every record the command sent
has been read when the server exits (datagrams on one socket arrive in order).
"""

from __future__ import annotations

import os
import subprocess

from .lab import PYTHON

END = "nmz-syslog-end"

SERVER = f"""
import socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind("/dev/log")
with open(sys.argv[1], "wb") as out:
    while (record := sock.recv(65536)) != b"{END}":
        out.write(record + b"\\n")
        out.flush()  # a test may read while the command still runs
"""

SANDBOX = r"""
set -e
mkdir -p "$NMZ_DEV"
mount -t tmpfs tmpfs "$NMZ_DEV"
for n in null zero full random urandom; do
    touch "$NMZ_DEV/$n"; mount --bind "/dev/$n" "$NMZ_DEV/$n"
done
mount --move "$NMZ_DEV" /dev
"$NMZ_PY" -c "$NMZ_SERVER" "$NMZ_LOG" &
server=$!
i=0; while [ ! -S /dev/log ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
set +e
"$@"
status=$?
"$NMZ_PY" -c 'import socket, sys; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(
    sys.argv[1].encode(), "/dev/log")' "$NMZ_END"
wait $server
exit $status
"""


def with_syslog(argv: list[str], env: dict, tmp: str) -> tuple[list[str], dict, str]:
    """(argv, environment, log file): `argv` wrapped to run with a private /dev/log whose
    records are appended to the log file, one a line, as they arrive."""
    log = os.path.join(tmp, "syslog.txt")
    sandbox_env = {
        **env,
        "NMZ_DEV": os.path.join(tmp, "dev"),
        "NMZ_PY": PYTHON,
        "NMZ_SERVER": SERVER,
        "NMZ_LOG": log,
        "NMZ_END": END,
    }
    wrapped = ["unshare", "--mount", "--propagation", "private", "sh", "-c", SANDBOX, "sh"]
    return [*wrapped, *argv], sandbox_env, log


def read_records(log: str) -> list[str]:
    """The syslog records written so far, one string each."""
    if not os.path.exists(log):
        return []
    with open(log, encoding="utf-8", errors="replace") as stream:
        return [line for line in stream.read().splitlines() if line]


def run_with_syslog(
    argv: list[str], env: dict, tmp: str, timeout: float = 60
) -> tuple[subprocess.CompletedProcess, list[str]]:
    """(the command's result, the syslog records it sent, one string each)."""
    wrapped, sandbox_env, log = with_syslog(argv, env, tmp)
    result = subprocess.run(
        wrapped, env=sandbox_env, capture_output=True, text=True, timeout=timeout
    )
    return result, read_records(log)
