"""Does the kernel match a received packet's socket by cgroup in the input hook? Run by
appsets.supported in a scratch network namespace (`unshare --net`): exit 0 when a SYN to a
listener in a scratch cgroup is accepted by exactly the rules nm-zones writes (and dropped
otherwise), else exit 1 with the reason on stdout. Kernels before the fix "nft_socket: make
cgroup match work in input too" load the rule but never match: only a packet tells.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from ...ruleset.applications import ROOT, set_name, specs
from .backend import rule_text
from .libnft import Nft, NftError

TABLE = "nmz-selftest"


def own_cgroup() -> str:
    with open("/proc/self/cgroup") as stream:
        for line in stream:
            if line.startswith("0::"):
                return line[3:].strip().lstrip("/")
    raise OSError("no cgroup v2 membership")


def run() -> str:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    parent = own_cgroup()
    scratch = os.path.join(parent, f"nmz-selftest-{os.getpid()}")
    os.mkdir(os.path.join(ROOT, scratch))
    try:
        with open(os.path.join(ROOT, scratch, "cgroup.procs"), "w") as procs:
            procs.write(str(os.getpid()))
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        with open(os.path.join(ROOT, parent, "cgroup.procs"), "w") as procs:
            procs.write(str(os.getpid()))  # the socket stays in the scratch cgroup
        rules = "\n".join(
            f"add rule inet {TABLE} input tcp dport {port} {rule_text('ipv4', spec)}"
            for spec in specs("x")
        ).replace("@" + set_name("x"), "@s")
        script = (
            f"add table inet {TABLE}\n"
            f'add set inet {TABLE} s {{ type cgroupsv2; elements = {{ "{scratch}" }}; }}\n'
            f"add chain inet {TABLE} input {{ type filter hook input priority 0; }}\n"
            + rules
            + f"\nadd rule inet {TABLE} input tcp dport {port} drop\n"
        )
        try:
            Nft().run(script)
        except NftError as error:
            return f"nftables refuses `socket cgroupv2` ({error})"
        client = socket.socket()
        client.settimeout(1.0)
        try:
            client.connect(("127.0.0.1", port))
        except OSError:
            return "the kernel does not look up the receiving socket's cgroup on input"
        finally:
            client.close()
            listener.close()
        return ""
    finally:
        os.rmdir(os.path.join(ROOT, scratch))


if __name__ == "__main__":
    try:
        reason = run()
    except (OSError, subprocess.CalledProcessError) as error:
        reason = f"the self-test failed ({error})"
    print(reason)
    sys.exit(1 if reason else 0)
