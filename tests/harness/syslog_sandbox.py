"""`unshare --mount --propagation private python syslog_sandbox.py TMPDEV COMMAND...`: runs
COMMAND with a private /dev whose /dev/log is a socket bound here, and prints one JSON object:
its returncode, stdout, stderr and the syslog records it sent (this machine's /dev is never
touched). The records are read after COMMAND ended: a datagram is queued when it is sent."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys


def private_dev(folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", folder], check=True)
    for name in ("null", "zero", "full", "random", "urandom"):
        open(os.path.join(folder, name), "w").close()
        subprocess.run(["mount", "--bind", f"/dev/{name}", os.path.join(folder, name)], check=True)
    subprocess.run(["mount", "--move", folder, "/dev"], check=True)


def main() -> None:
    private_dev(sys.argv[1])
    log = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    log.bind("/dev/log")
    log.setblocking(False)
    result = subprocess.run(sys.argv[2:], capture_output=True, text=True, timeout=120)
    records = []
    while True:
        try:
            records.append(log.recv(65536).decode("utf-8", "replace"))
        except BlockingIOError:
            break
    print(
        json.dumps(
            {key: getattr(result, key) for key in ("returncode", "stdout", "stderr")}
            | {"records": records}
        )
    )


if __name__ == "__main__":
    main()
