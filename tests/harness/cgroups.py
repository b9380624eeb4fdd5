"""A private cgroup v2 tree for tests of allowances by application, whatever the machine's
cgroup layout (hybrid: cgroup2 at /sys/fs/cgroup/unified; unified: at /sys/fs/cgroup).

A scratch cgroup `nmz-test-TAG` is made in the machine's cgroup v2 hierarchy; a holder
process moves into it and unshares a cgroup and a mount namespace, where it mounts cgroup2 at
/sys/fs/cgroup: there the scratch cgroup is the root, so a test's `app-a` is
`/sys/fs/cgroup/app-a`, as nft resolves it. Every process of the test that needs that view
(nm-zones, nft, the listeners) is entered with `nsenter` into the holder's mount and cgroup
namespaces and the lab's network namespace (`ip netns exec` would mount a fresh /sys), and
first moves into the cgroup it is meant to be in (the root by default).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import time

from .lab import first_child, wait_for


def cgroup2_mount() -> str:
    """Where the machine mounts the cgroup v2 hierarchy ("" when nowhere)."""
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            if fields[2] == "cgroup2":
                return fields[1]
    return ""


class CgroupSandbox:
    def __init__(self, netns: str):
        self.netns = netns
        host = cgroup2_mount()
        if not host:
            raise RuntimeError("no cgroup v2 hierarchy on this machine")
        self.scratch = os.path.join(host, f"nmz-test-{secrets.token_hex(3)}")
        os.mkdir(self.scratch)
        script = (
            f'echo $$ > "{self.scratch}/cgroup.procs" && exec unshare --cgroup --mount '
            "--propagation private --fork sh -c 'mount -t cgroup2 none /sys/fs/cgroup && "
            "exec sleep infinity'"
        )
        self.holder = subprocess.Popen(["sh", "-c", script], start_new_session=True)
        self.pid = wait_for(lambda: first_child(self.holder.pid), what="the cgroup holder")
        wait_for(
            lambda: (
                os.path.exists(f"/proc/{self.pid}/root/sys/fs/cgroup/cgroup.procs")
                and _is_cgroup2(self.pid)
            ),
            what="cgroup2 mounted in the holder's namespace",
        )

    def enter(self, cgroup: str = "") -> list[str]:
        """argv prefix: moved into `cgroup` (made if missing; from outside, as a cgroup
        namespace allows moves within it only), then into this sandbox's namespaces."""
        folder = os.path.join(self.scratch, cgroup)
        namespaces = (
            f"nsenter --mount=/proc/{self.pid}/ns/mnt --cgroup=/proc/{self.pid}/ns/cgroup "
            f"--net=/run/netns/{self.netns}"
        )
        move = f'mkdir -p "{folder}" && echo $$ > "{folder}/cgroup.procs"'
        script = f'{move} && exec {namespaces} "$@"'
        return ["sh", "-c", script, "sh"]

    def path(self, cgroup: str) -> str:
        """`cgroup` as this process reaches it (through the holder's root)."""
        return os.path.join(self.scratch, cgroup)

    def remove(self, cgroup: str) -> None:
        """rmdir a cgroup once its processes are gone (a restart makes a new one)."""
        folder = self.path(cgroup)
        wait_for(lambda: not procs_of(folder), what=f"{cgroup} emptied")
        os.rmdir(folder)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.holder.pid, signal.SIGKILL)
        self.holder.wait()
        deadline = time.monotonic() + 10
        for folder, _, _ in sorted(os.walk(self.scratch), key=lambda f: -len(f[0])):
            while time.monotonic() < deadline:
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)


def procs_of(folder: str) -> str:
    try:
        with open(os.path.join(folder, "cgroup.procs")) as procs:
            return procs.read().strip()
    except FileNotFoundError:
        return ""


def _is_cgroup2(pid: int) -> bool:
    with open(f"/proc/{pid}/mounts") as mounts:
        return any(line.split()[1:3] == ["/sys/fs/cgroup", "cgroup2"] for line in mounts)
