"""A question when a program is refused: which programs of a user's session listen on a
port that the zone of an active connection refuses (sock_diag: sockdiag.listening_sockets),
and the answers people gave, remembered per application and network (or zone, for a
connection on a network that was not identified) in DATA/listener-answers.json.

An answer "allow" (or "hour", until its end) is carried out as runtime allowances on the
interfaces that are on that network now: `app:APP` on nftables (ruleset/applications.py),
the ports it listened on on iptables. An interface going down forgets them (engine), so they
follow the network: `nm-zones serve` (doors/listeners_bus.py) grants them again whenever the
interface is on an allowed network. "block" only remembers that nobody is to be asked.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import json
import os
import time

from ..appnames import app_pattern, program_name, program_unit, session_uid
from ..files import read_trusted, write_atomically

ANSWERS_FILE = "listener-answers.json"
ANSWERS = ("allow", "hour", "block")
HOUR = 3600
ROOT = "/sys/fs/cgroup"
ASK_WHOM = ("session", "all", "none")  # nm-zones.yaml `ask-about-listeners`


class Answers:
    """The remembered answers: (APP, key) -> {"answer", "until", "ports", "name", ...};
    key: `network:ID` or `zone:ZONE`."""

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, ANSWERS_FILE)
        self.rows: dict[tuple[str, str], dict[str, str]] = {}
        raw = read_trusted(self.path)
        try:
            for row in json.loads(raw or b"[]"):
                if isinstance(row, dict) and row.get("answer") in ANSWERS:
                    clean = {str(k): str(v) for k, v in row.items()}
                    self.rows[(clean.get("app", ""), clean.get("key", ""))] = clean
        except (ValueError, TypeError):
            self.rows = {}  # unreadable: nobody's answer is assumed; people are asked again

    def save(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        data = json.dumps(sorted(self.rows.values(), key=lambda r: (r["app"], r["key"])), indent=1)
        write_atomically(self.path, data.encode())

    def current(self, app: str, key: str, now: float | None = None) -> dict | None:
        """The answer that holds for (app, key): an hour's answer past its end does not."""
        row = self.rows.get((app, key))
        if row and row["answer"] == "hour" and float(row.get("until", 0)) <= (now or time.time()):
            return None
        return row

    def remember(self, question: dict[str, str], answer: str) -> dict[str, str]:
        row = {k: question.get(k, "") for k in ("app", "key", "name", "ports", "zone", "label")}
        row.update(answer=answer, when=str(int(time.time())))
        if answer == "hour":
            row["until"] = str(int(time.time()) + HOUR)
        self.rows[(row["app"], row["key"])] = row
        self.save()
        return row

    def forget(self, app: str, key: str) -> dict | None:
        row = self.rows.pop((app, key), None)
        if row is not None:
            self.save()
        return row


def connection_key(network: str, zone: str) -> str:
    """Answers hold per network when the connection's was identified, else per zone."""
    return f"network:{network}" if network else f"zone:{zone}"


def cgroup_paths(root: str = ROOT) -> dict[int, str]:
    """cgroup id (the directory's inode) -> path relative to the cgroup v2 root."""
    found = {}
    for folder, _children, _files in os.walk(root):
        try:
            found[os.stat(folder).st_ino] = os.path.relpath(folder, root)
        except OSError:
            continue
    return found


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def programs(sockets, paths: dict[int, str], whom: str = "session") -> dict[str, dict]:
    """APP -> {"cgroup", "uid", "ports": {"3689/tcp", ...}} of the programs that listen
    beyond loopback: a user's session's only (`whom` "session"), services too ("all")."""
    found: dict[str, dict] = {}
    if whom == "none":
        return found
    for sock in sockets:
        cgroup = paths.get(sock.cgroup, "")
        if not cgroup or cgroup == "." or is_loopback(sock.address):
            continue
        uid = session_uid(cgroup)
        if uid is None and whom != "all":
            continue
        app = app_pattern(program_unit(cgroup))
        entry = found.setdefault(app, {"cgroup": cgroup, "uid": uid, "ports": set()})
        entry["ports"].add(f"{sock.port}/{sock.protocol}")
    return found


def refused_ports(app: str, cgroup: str, ports, zone, config, allowed: list[str]) -> list[str]:
    """The ports of `app` that `zone` (and the runtime allowances `allowed`) refuse."""
    from .allow import opened_by_zone

    if zone is None or zone.target == "accept":
        return []
    for what in [f"app:{a}" for a in zone.applications] + allowed:
        if what.startswith("app:") and _app_covers(what[4:], app, cgroup):
            return []
    refused = []
    for port in sorted(ports, key=_port_order):
        if opened_by_zone(zone, port, config):
            continue
        if any(_opens(what, port, config) for what in allowed):
            continue
        refused.append(port)
    return refused


def question_text(name: str, ports: list[str], label: str, zone: str) -> tuple[str, str]:
    """The question's summary and body, as the agent shows them."""
    summary = f"{name} is listening on {', '.join(ports)}"
    body = f"The network {label} (zone {zone}) refuses it."
    return summary, body


def describe(app: str, cgroup: str, uid) -> tuple[str, str]:
    """(name, icon) as the service sees it: for a user's program, the user's own desktop
    files first (the agent names it again with the session's XDG folders)."""
    dirs = None
    if isinstance(uid, int) and uid >= 0:
        import pwd

        from ..appnames import data_dirs

        try:
            dirs = data_dirs(pwd.getpwuid(uid).pw_dir)
        except KeyError:
            dirs = None
    return program_name(cgroup or app, dirs)


def _app_covers(allowed: str, app: str, cgroup: str) -> bool:
    unit = program_unit(cgroup)
    if "/" in allowed:
        return fnmatch.fnmatchcase(cgroup, allowed) or cgroup.startswith(allowed + "/")
    return (
        allowed == app
        or fnmatch.fnmatchcase(unit, allowed)
        or any(fnmatch.fnmatchcase(part, allowed) for part in cgroup.split("/"))
    )


def _opens(what: str, port: str, config) -> bool:
    from ..config.model import PortRange
    from .allow import port_covered

    if what.startswith("app:"):
        return False
    if "/" in what:
        numbers, _, protocol = what.rpartition("/")
        first, _, last = numbers.partition("-")
        return port_covered(port, [PortRange(int(first), int(last or first), protocol)])
    service = config.services.get(what)
    return bool(service) and port_covered(port, service.ports)


def _port_order(port: str) -> tuple[int, str]:
    number, _, protocol = port.partition("/")
    return int(number), protocol
