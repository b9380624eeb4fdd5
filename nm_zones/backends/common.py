"""What both backends need of the kernel beyond their own library: the refusal of a commit,
the test namespace guard, the faults tests inject, and IP forwarding.

It lives here, beside neither backend, so that backends/nftables/ never imports
backends/iptables/ (which loads libiptc, and python-iptables to build) and each backend
stays its own.
"""

from __future__ import annotations

import os

from ..errors import KernelError

REFUSE_NETNS_ENV = "NM_ZONES_REFUSE_NETNS"
FAULTS_ENV = "NM_ZONES_FAULTS"  # tests only: see Faults
FORWARDING_SYSCTLS = {
    "ipv4": "/proc/sys/net/ipv4/ip_forward",
    "ipv6": "/proc/sys/net/ipv6/conf/all/forwarding",
}


class CommitRefused(KernelError):
    """libiptc, libnftables or the kernel refused a commit (not: a lock could not be had)."""


def current_netns() -> str:
    info = os.stat("/proc/self/ns/net")
    return f"{info.st_dev}:{info.st_ino}"


def check_netns_allowed() -> None:
    """Tests name the network namespace they run in; nm-zones refuses to change it."""
    refused = os.environ.get(REFUSE_NETNS_ENV)
    if refused and current_netns() in refused.split(","):
        raise KernelError(
            f"refusing to change netfilter in this network namespace ({REFUSE_NETNS_ENV})"
        )


class Faults:
    """Faults the tests inject through NM_ZONES_FAULTS, to show that every run ends
    protected whatever stops it: `kill-after-commit=N` (SIGKILL right after the Nth commit
    of this process), `stop-before-commit=N` (SIGSTOP right before the Nth commit starts,
    after the run's check of the kernel: a test changes the kernel, then sends SIGCONT),
    `refuse-chain=CHAIN` (a commit of the interface owning CHAIN fails as if the kernel
    refused it)."""

    def __init__(self, spec: str):
        settings = dict(item.partition("=")[::2] for item in spec.split(",") if item)
        self.kill_after = int(settings.get("kill-after-commit") or 0)
        self.stop_before = int(settings.get("stop-before-commit") or 0)
        self.refused_chain = settings.get("refuse-chain", "")
        self.commits = 0
        self.started = 0

    def check(self, owned: frozenset[str]) -> None:
        if self.refused_chain in owned:
            raise CommitRefused(f"{self.refused_chain}: refused ({FAULTS_ENV})")

    def before_commit(self) -> None:
        self.started += 1
        if self.stop_before and self.started == self.stop_before:
            import signal  # tests only, as below

            os.kill(os.getpid(), signal.SIGSTOP)

    def after_commit(self) -> None:
        self.commits += 1
        if self.kill_after and self.commits >= self.kill_after:
            import signal  # tests only: an event does not pay for it

            os.kill(os.getpid(), signal.SIGKILL)


def faults_from_environment() -> Faults:
    return Faults(os.environ.get(FAULTS_ENV, ""))


def enable_forwarding(families) -> None:
    """Masquerade and forward-ports to other hosts need it; nm-zones never turns it off
    (others rely on it)."""
    for family in families:
        with open(FORWARDING_SYSCTLS[family], "w") as sysctl:
            sysctl.write("1\n")
