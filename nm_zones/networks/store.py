"""Known networks, kept in DATA/networks.yaml (/var/lib/nm-zones; NM_ZONES_DATA_DIR moves it).

    networks:
      - id: 3f2a9c1b07
        label: Home LAN
        zone: home                 # absent or null while nobody placed the network
        allow: ["8200/tcp", "app:minidlna.service"]   # open on this network only (optional)
        gateway-mac: 52:54:00:12:34:56
        dhcp-server: 192.168.1.1   # absent when the network had none
        domain: home.example
        first-seen: 2026-12-04T15:00:00Z
        last-seen: 2026-12-04T16:00:00Z

The file decides zones, so it is read like every config file: validated with FILE:LINE
problems, and, read by root, refused unless root owns it and its folder and nobody else can
write them. A broken store is never overwritten: nm-zones says why and treats every network as
unknown until someone repairs or removes it. nm-zones writes it whole or not at all
(files.write_atomically), always under the state lock.
"""

from __future__ import annotations

import marshal
import os
import time

from ..files import read_trusted, write_atomically
from .identity import FIELDS, STORE_FILE, Identity

CACHE_FILE = "networks-cache"  # the parsed store, in the state dir: events skip YAML
KEYS = ("id", "label", "zone", "allow", *FIELDS, "first-seen", "last-seen")
CACHE_VERSION = 2  # 2: a network's `allow`
# read only when the YAML itself is (events read the cache, and never import re)
ID = r"[0-9a-z-]{1,40}"
ZONE_NAME = r"[A-Za-z0-9_-]{1,17}"
MAC = r"[0-9a-f]{2}(:[0-9a-f]{2}){5,19}"
LABEL_MAX = 200
HEADER = (
    "# nm-zones' known networks: what identified each one and the zone it was given.\n"
    "# Change it with `nm-zones networks zone|rename|forget` (and a network's allow with\n"
    "# `nm-zones allow|revoke WHAT --network ID --permanent`); a network matches when its\n"
    "# gateway MAC matches and, where given here, its DHCP server, domain and SSID too.\n"
)


class Network:
    """One known network (a plain class: events import this module)."""

    __slots__ = ("allowed", "first_seen", "id", "identity", "label", "last_seen", "line", "zone")

    def __init__(
        self,
        id: str,
        label: str,
        zone: str,
        identity: Identity,
        first: str,
        last: str,
        allowed: tuple[str, ...] = (),
    ):
        self.id, self.label, self.zone, self.identity = id, label, zone, identity
        self.first_seen, self.last_seen = first, last
        # what `allow WHAT --network ID --permanent` opened on it: `8200/tcp`, a service,
        # `app:APP` (doors/allow.py), in the order given
        self.allowed = allowed
        self.line = 0  # where it was read from, for messages

    def matches(self, seen: Identity) -> bool:
        """The gateway MAC must match; the DHCP server, domain and SSID must match where
        this entry has them (a network seen without one of them is not this network)."""
        mine = self.identity
        if not seen.gateway_mac or mine.gateway_mac != seen.gateway_mac:
            return False
        return all(
            not wanted or wanted == got
            for wanted, got in (
                (mine.dhcp_server, seen.dhcp_server),
                (mine.domain, seen.domain),
                (mine.ssid, seen.ssid),
            )
        )

    def as_dict(self) -> dict:
        """The entry as `networks --json` shows it (zone None while unplaced)."""
        entry = {"id": self.id, "label": self.label, "zone": self.zone or None}
        entry["allow"] = list(self.allowed) or None
        entry.update({key: value or None for key, value in self.identity.fields().items()})
        entry.update({"first-seen": self.first_seen, "last-seen": self.last_seen})
        return entry


class Store:
    """The known networks of one file; `problems` non-empty means it is broken and must be
    neither believed nor written."""

    def __init__(self, path: str, networks=None, problems=None, cache_dir: str = ""):
        self.path = path
        self.networks: list[Network] = networks or []
        self.problems: list = problems or []  # config.model.Problem values
        self.cache_dir = cache_dir

    @property
    def broken(self) -> bool:
        return bool(self.problems)

    def match(self, seen: Identity) -> Network | None:
        """The stored network `seen` is, the most specific one when several match."""
        found = [n for n in self.networks if n.matches(seen)]
        return max(
            found, key=lambda n: len([v for v in n.identity.fields().values() if v]), default=None
        )

    def find(self, network_id: str) -> Network | None:
        return next((n for n in self.networks if n.id == network_id), None)

    def seen(self, identity: Identity, now: float | None = None) -> tuple[Network, bool]:
        """The network `identity` is, added (unplaced) when it is new, and whether the store
        changed: last-seen moves by the minute (an event on a network seen this minute
        writes nothing, and the next one can take the quick path)."""
        stamp = timestamp(now)
        network = self.match(identity)
        if network is None:
            network = Network(
                self.new_id(identity), default_label(identity), "", identity, stamp, stamp
            )
            self.networks.append(network)
            return network, True
        changed = network.last_seen[:16] != stamp[:16]
        network.last_seen = stamp if changed else network.last_seen
        return network, changed

    def new_id(self, identity: Identity) -> str:
        import hashlib

        digest = hashlib.sha256(repr(sorted(identity.fields().items())).encode()).hexdigest()
        taken = {n.id for n in self.networks}
        return next(digest[i : i + 10] for i in range(0, 54) if digest[i : i + 10] not in taken)

    def forget(self, network_id: str) -> Network:
        network = self._existing(network_id)
        self.networks.remove(network)
        return network

    def _existing(self, network_id: str) -> Network:
        from ..errors import UsageError

        network = self.find(network_id)
        if network is None:
            raise UsageError(f"no known network with id {network_id!r} (see: nm-zones networks)")
        return network

    def rename(self, network_id: str, label: str) -> Network:
        from ..errors import UsageError

        if not label.strip() or len(label) > LABEL_MAX or not label.isprintable():
            raise UsageError(f"a label is printable text of 1 to {LABEL_MAX} characters")
        network = self._existing(network_id)
        network.label = label
        return network

    def place(self, network_id: str, zone: str) -> Network:
        network = self._existing(network_id)
        network.zone = zone
        return network

    def allow(self, network_id: str, what: str, grant: bool) -> bool:
        """Add `what` to the network's `allow` (or take it out); whether that changed it."""
        network = self._existing(network_id)
        if grant == (what in network.allowed):
            return False
        if grant:
            network.allowed = (*network.allowed, what)
        else:
            network.allowed = tuple(w for w in network.allowed if w != what)
        return True

    def save(self) -> None:
        """Write the store whole (never a broken one: its problems are said instead)."""
        if self.broken:
            from ..errors import ConfigError

            raise ConfigError(self.problems)
        os.makedirs(os.path.dirname(self.path), mode=0o755, exist_ok=True)
        write_atomically(self.path, render(self.networks).encode("utf-8"), 0o644)
        if self.cache_dir:
            _write_cache(self.cache_dir, _file_key(self.path), self.networks)


def timestamp(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))


def default_label(identity: Identity) -> str:
    if identity.ssid:
        return identity.ssid
    if identity.domain:
        return identity.domain
    return f"gateway {identity.gateway_mac}"


def render(networks: list[Network]) -> str:
    """The YAML text of the store; every value a JSON string, which YAML reads as it is."""
    import json

    lines = [HEADER, "networks:" + ("" if networks else " []")]
    for network in networks:
        values = network.as_dict()
        first = True
        for key in KEYS:
            value = values[key]
            if value is None:
                continue
            lines.append(
                f"{'  - ' if first else '    '}{key}: {json.dumps(value, ensure_ascii=False)}"
            )
            first = False
    return "\n".join(lines) + "\n"


def store_path(paths) -> str:
    return os.path.join(paths.data, STORE_FILE)


def load_store(paths) -> Store:
    """The known networks; a missing file is an empty store, a broken one has problems.
    The parsed store is cached in the state directory, keyed by the file's identity."""
    path = store_path(paths)
    if not os.path.lexists(path):
        return Store(path, cache_dir=paths.state)
    problems = _insecure(path, os.path.dirname(path)) if os.geteuid() == 0 else []
    if problems:
        return Store(path, problems=problems)
    key = _file_key(path)
    networks = _cached(paths.state, key)
    if networks is None:
        from ..config.yamlsource import read_yaml

        doc = read_yaml(path, problems)
        networks = _networks(path, doc, problems) if not problems else []
        if problems:
            return Store(path, problems=problems)
        _write_cache(paths.state, key, networks)
    return Store(path, networks, cache_dir=paths.state)


def _file_key(path: str) -> tuple:
    info = os.lstat(path)
    fields = (path, info.st_size, info.st_mtime_ns, info.st_ino, info.st_uid, info.st_mode)
    return (CACHE_VERSION, *fields)


def _cached(state_dir: str, key: tuple) -> list[Network] | None:
    try:
        data = read_trusted(os.path.join(state_dir, CACHE_FILE))
        stored_key, rows = marshal.loads(data) if data else (None, [])
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if stored_key != key:
        return None
    networks = []
    for network_id, label, zone, fields, first, last, allowed in rows:
        networks.append(Network(network_id, label, zone, Identity(*fields), first, last, allowed))
    return networks


def _write_cache(state_dir: str, key: tuple, networks: list[Network]) -> None:
    rows = [
        (
            n.id,
            n.label,
            n.zone,
            tuple(n.identity.fields().values()),
            n.first_seen,
            n.last_seen,
            n.allowed,
        )
        for n in networks
    ]
    if not os.path.isdir(state_dir):
        return
    try:  # noqa: SIM105 - contextlib would cost every event 5 ms of imports
        write_atomically(os.path.join(state_dir, CACHE_FILE), marshal.dumps((key, rows)), 0o600)
    except OSError:  # not root, or read-only: work without the cache
        pass


def _problem(path: str, line: int, key: str, message: str):
    from ..config.model import Problem

    return Problem(path, line, key, message)


def _insecure(path: str, folder: str) -> list:
    """Run by root, the store decides zones: root alone may write it and its folder."""
    for place, what in ((folder, "folder"), (path, "file")):
        try:
            info = os.lstat(place)
        except OSError as error:
            return [_problem(place, 1, "", f"cannot read {what}: {error.strerror}")]
        if info.st_uid != 0:
            return [_problem(place, 1, "", f"{what} is not owned by root (chown root {place})")]
        if info.st_mode & 0o022:
            return [
                _problem(
                    place, 1, "", f"{what} is writable by group or others (chmod go-w {place})"
                )
            ]
    return []


def _networks(path: str, doc, problems: list) -> list[Network]:
    from ..config.yamlsource import LocList, LocMap

    if doc is None:
        return []
    if not isinstance(doc, LocMap) or set(doc) - {"networks"}:
        problems.append(
            _problem(
                path,
                getattr(doc, "line", 1),
                "",
                "must be a mapping with one key, networks (a list)",
            )
        )
        return []
    items = doc.get("networks")
    if items is None:
        return []
    if not isinstance(items, LocList):
        problems.append(_problem(path, doc.key_lines["networks"], "networks", "must be a list"))
        return []
    networks, ids = [], set()
    for index, item in enumerate(items):
        network = _network(path, item, items.item_lines[index], f"networks[{index}]", problems)
        if network is None:
            continue
        if network.id in ids:
            problems.append(
                _problem(
                    path, network.line, f"networks[{index}].id", f"duplicate id {network.id!r}"
                )
            )
        ids.add(network.id)
        networks.append(network)
    return networks


def _network(path: str, item, line: int, where: str, problems: list) -> Network | None:
    import re

    from ..config.yamlsource import LocMap

    if not isinstance(item, LocMap):
        problems.append(_problem(path, line, where, "must be a mapping (id, label, zone, ...)"))
        return None
    before = len(problems)

    def text(key: str, pattern=None, required: bool = False) -> str:
        value = item.get(key)
        key_line = item.key_lines.get(key, line)
        if value is None:
            if required:
                problems.append(_problem(path, line, f"{where}.{key}", "missing"))
            return ""
        if not isinstance(value, str) or len(value) > LABEL_MAX or not value.isprintable():
            problems.append(_problem(path, key_line, f"{where}.{key}", "must be printable text"))
            return ""
        if pattern is not None and not re.fullmatch(pattern, value):
            problems.append(_problem(path, key_line, f"{where}.{key}", f"{value!r} is not valid"))
            return ""
        return value

    for key in item:
        if key not in KEYS:
            problems.append(
                _problem(
                    path,
                    item.key_lines[key],
                    f"{where}.{key}",
                    f"unknown key (valid keys: {', '.join(KEYS)})",
                )
            )
    identity = Identity(
        text("gateway-mac", MAC, required=True),
        text("dhcp-server"),
        text("domain"),
        text("ssid"),
        text("bssid"),
    )
    network = Network(
        text("id", ID, required=True),
        text("label"),
        text("zone", ZONE_NAME),
        identity,
        text("first-seen"),
        text("last-seen"),
        _allowed(path, item, line, where, problems),
    )
    network.line = line
    if identity.gateway_mac and identity.gateway_mac != item.get("gateway-mac"):
        problems.append(
            _problem(
                path, item.key_lines["gateway-mac"], f"{where}.gateway-mac", "must be lower case"
            )
        )
    return network if len(problems) == before else None


def _allowed(path: str, item, line: int, where: str, problems: list) -> tuple[str, ...]:
    """A network's `allow`: a list of ports (`8200/tcp`, `60000-61000/udp`), service names
    and `app:APP`, each checked as `nm-zones allow` checks it (a service the config does not
    have opens nothing, as in a runtime allowance)."""
    from ..config.yamlsource import LocList

    value = item.get("allow")
    if value is None:
        return ()
    key_line = item.key_lines.get("allow", line)
    if not isinstance(value, LocList):
        problems.append(_problem(path, key_line, f"{where}.allow", "must be a list"))
        return ()
    found = []
    for index, entry in enumerate(value):
        at = value.item_lines[index] if index < len(value.item_lines) else key_line
        problem = _allow_problem(entry)
        if problem:
            problems.append(_problem(path, at, f"{where}.allow[{index}]", problem))
        elif entry not in found:
            found.append(entry)
    return tuple(found)


def _allow_problem(entry) -> str:
    """What is wrong with one item of a network's `allow` ("" when nothing)."""
    from ..config.load import SERVICE_NAME, _FileChecker

    if not isinstance(entry, str):
        return "must be a port such as 8200/tcp, a service name or app:APP"
    if entry.startswith("app:"):
        from ..config.appname import check_app

        try:
            app = check_app(entry[4:])
        except ValueError as error:
            return str(error)
        return "" if app == entry[4:] else f"write it as app:{app}"
    if "/" in entry or entry[:1].isdigit():
        check = _FileChecker("allow")
        port = check.port(0, "", entry)
        if port is None:
            return check.problems[0].message
        return "" if str(port) == entry else f"write it as {port}"
    return "" if SERVICE_NAME.match(entry) else f"{entry!r} is neither a port nor a service name"
