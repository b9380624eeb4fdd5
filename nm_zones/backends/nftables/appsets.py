"""The application sets of nm-zones' table (ruleset/applications.py): declared with the
rules that use them, filled with the cgroups that match their application now, and kept
current while `nm-zones serve` runs (Keeper: a rescan of the cgroup tree every second).

A set's elements are nm-zones' own data, outside the view that fail-closed repair compares:
they change whenever a program starts or stops. Every fill replaces a set's elements whole
(flush and add in one transaction), and the keeper compares the kernel's elements with the
scan, so an element another program added is taken out again within a second while the
service runs, and by every commit that touches the set's rules.

The set's comment holds its application, so that the keeper needs nothing but the table.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

from ...ruleset.applications import ROOT, matching, set_name
from .libnft import FAMILY, TABLE, Nft, NftError

RESCAN_SECONDS = 1.0


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def declare(apps) -> list[str]:
    """`add set` lines (idempotent) for the sets of `apps`, before the rules that use them."""
    t = f"{FAMILY} {TABLE}"
    return [
        f"add set {t} {set_name(app)} {{ type cgroupsv2; comment {_quoted(app)}; }}"
        for app in sorted(apps)
    ]


def scan(app: str, root: str = ROOT) -> list[str]:
    """The cgroups of `app`; none when `root` is no cgroup v2 mount (on a hybrid layout
    /sys/fs/cgroup holds v1 hierarchies, whose directories' inodes are no cgroup v2 ids)."""
    return matching(app, root) if is_cgroup2(root) else []


def is_cgroup2(root: str = ROOT) -> bool:
    """Whether `root` is a cgroup v2 mount (the last mount there wins)."""
    found = False
    with contextlib.suppress(OSError), open("/proc/self/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) > 2 and fields[1] == root:
                found = fields[2] == "cgroup2"
    return found


def fill_script(app: str, paths: list[str]) -> str:
    t = f"{FAMILY} {TABLE}"
    lines = [f"flush set {t} {set_name(app)}"]
    if paths:
        lines.append(f"add element {t} {set_name(app)} {{ {', '.join(map(_quoted, paths))} }}")
    return "\n".join(lines) + "\n"


def fill(nft: Nft, app: str, root: str = ROOT, tries: int = 3) -> list[str]:
    """Make the set of `app` hold the cgroups that match it now; the paths written. A
    cgroup that vanished between the scan and the load fails the transaction (nft resolves
    each path): scan again."""
    for attempt in range(tries):
        paths = scan(app, root)
        try:
            nft.run(fill_script(app, paths))
            return paths
        except NftError:
            if attempt == tries - 1:
                raise
    return []


def table_sets(nft: Nft) -> dict[str, str]:
    """{set name: application} of the application sets in nm-zones' table."""
    try:
        text = nft.run(f"list sets {FAMILY}")
    except NftError:
        return {}
    found, current, in_table = {}, "", False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("table "):
            in_table = line.split()[1:3] == [FAMILY, TABLE]
        elif in_table and line.startswith("set nmz-app-"):
            current = line.split()[1]
        elif in_table and current and line.startswith("comment "):
            found[current] = _unquoted(line[len("comment ") :])
            current = ""
    return found


def _unquoted(text: str) -> str:
    text = text.strip()
    if text.startswith('"') and text.endswith('"'):
        text = text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return text


def elements(nft: Nft, name: str) -> list[str]:
    """The cgroup paths a set holds, as nft lists them."""
    try:
        text = nft.run(f"list set {FAMILY} {TABLE} {name}")
    except NftError:
        return []
    joined = " ".join(text.split())
    start = joined.find("elements = {")
    if start < 0:
        return []
    body = joined[start + len("elements = {") :].split("}", 1)[0]
    return sorted(_unquoted(item) for item in body.split(",") if item.strip())


class Keeper:
    """Keeps every application set of the table equal to its application's cgroups."""

    def __init__(self, root: str = ROOT):
        self.root = root
        self.nft = Nft(1 << 2)  # stateless listing

    def once(self) -> list[str]:
        """One rescan: the sets corrected (by name)."""
        corrected = []
        for name, app in sorted(table_sets(self.nft).items()):
            wanted = scan(app, self.root)
            if elements(self.nft, name) != wanted:
                try:
                    fill(self.nft, app, self.root)
                except NftError:
                    continue  # the next rescan tries again
                corrected.append(name)
        return corrected


PID_FILE = "appsets.pid"


def keeper_running(state_dir: str) -> bool:
    """Whether a keeper (`nm-zones serve`) runs for this state directory."""
    try:
        with open(os.path.join(state_dir, PID_FILE)) as stream:
            os.kill(int(stream.read().strip()), 0)
    except (OSError, ValueError):
        return False
    return True


def keep(state_dir: str, stop=None, root: str = ROOT) -> None:
    """Rescan every RESCAN_SECONDS until `stop` (a threading.Event) is set, announcing
    itself in the state directory for `allow --app` (keeper_running)."""
    import threading
    import time

    stop = stop or threading.Event()
    keeper = Keeper(root)
    marker = os.path.join(state_dir, PID_FILE)
    os.makedirs(state_dir, exist_ok=True)
    with open(marker, "w") as stream:
        stream.write(f"{os.getpid()}\n")
    try:
        while not stop.is_set():
            started = time.monotonic()
            keeper.once()
            stop.wait(max(0.0, RESCAN_SECONDS - (time.monotonic() - started)))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(marker)


def cgroup2_missing() -> str:
    """Why nft cannot resolve cgroup paths here, or "" (it reads them under ROOT)."""
    if is_cgroup2(ROOT):
        return ""
    return f"cgroup v2 is not mounted at {ROOT}"


def supported() -> str:
    """Empty when the kernel matches a received packet's socket by cgroup in the input
    hook, else why not; found by a self-test in a scratch network namespace (not by
    version)."""
    try:
        done = subprocess.run(
            ["unshare", "--net", sys.executable, "-m", "nm_zones.backends.nftables.selftest"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"the self-test could not run ({error})"
    if done.returncode == 0:
        return ""
    return " ".join(done.stdout.split() + done.stderr.split()[-12:]) or "the self-test failed"


if __name__ == "__main__":  # the keeper alone, as `nm-zones serve` runs it (tests use this)
    from ...paths import Paths

    with contextlib.suppress(KeyboardInterrupt):
        keep(Paths.from_environment().state)
