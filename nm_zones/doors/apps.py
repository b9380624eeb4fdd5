"""`allow --app` and `revoke --app` (ruleset/applications.py): the checks before the change,
and what is said after it. The change itself is an allowance like any other (doors/allow.py)
whose `what` is `app:APP`."""

from __future__ import annotations

from ..config.appname import check_app
from ..errors import UsageError
from ..ruleset.applications import PREFIX

REMEDY = "set `backend: nftables` in /etc/nm-zones/nm-zones.yaml"


def app_what(text: str) -> str:
    """--app APP as an allowance's `what`; exit 2 when APP is no unit, scope or path."""
    try:
        return PREFIX + check_app(text)
    except ValueError as error:
        raise UsageError(f"--app: {error}") from None


def check_app_support(backend: str) -> None:
    """Exit 2 unless the backend and the kernel can match a received packet's socket by
    its cgroup (a self-test in a scratch namespace, backends/nftables/appsets.py)."""
    if backend != "nftables":
        raise UsageError(
            f"--app needs the nftables backend (the {backend} backend cannot match the "
            f"receiving socket's cgroup): {REMEDY}"
        )
    from ..backends.nftables.appsets import cgroup2_missing, supported

    missing = cgroup2_missing()
    if missing:
        raise UsageError(
            f"--app: {missing}: applications are known by their cgroup v2 "
            "(boot with systemd.unified_cgroup_hierarchy=1)"
        )
    reason = supported()
    if reason:
        raise UsageError(
            f"--app: this kernel cannot match the receiving socket's cgroup ({reason}); "
            "it needs Linux 5.13 or later with `socket cgroupv2` on input"
        )


def follow_note(state_dir: str) -> str:
    """Said after `allow --app` when no process keeps the application's set current."""
    from ..backends.nftables.appsets import keeper_running

    if keeper_running(state_dir):
        return ""
    return (
        " (it follows the application's restarts only while `nm-zones serve` runs; "
        "until then it matches the cgroups the application has now)"
    )
