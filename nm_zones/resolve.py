"""Which zone a connection gets, and why. First match wins:

1. the zone NetworkManager holds for it (connection.zone: keyfile, else nmcli),
2. its UUID in the connections map, 3. its name (connection.id) in the map,
4. wired-zone / wireless-zone by its type, 5. default-zone.
A shared connection (ipv4.method or ipv6.method `shared`) without a zone of its own gets
`nm-shared`, as NetworkManager itself does when it tells firewalld the zone.
A zone that does not exist falls back to default-zone, and the reason says so.

A profile that a non-admin can edit (one with connection.permissions, or any profile with
`user-editable-profiles: all`) names its own zone, by connection.zone or by its name in the
map; such a zone is honoured only if the settings list it in `user-profile-zones`. Otherwise
it is skipped and the rest of the order decides (the admin's map by UUID, wired-zone /
wireless-zone, default-zone), and the reason says why.
"""

from __future__ import annotations

import os

from .files import open_regular, read_all

WIRED_TYPES = ("802-3-ethernet", "ethernet", "veth")
WIRELESS_TYPES = ("802-11-wireless", "wifi")
KEYFILE_MAX_BYTES = 1024 * 1024
SHARED_ZONE = "nm-shared"
REASON_SHARED = "shared connection"
REASON_PROFILE = "nmcli connection.zone"
REASON_MAP_NAME = "map: name"
# the candidates whose zone a non-admin who can edit the profile chooses
USER_CHOSEN = (REASON_PROFILE, REASON_MAP_NAME)
NMCLI_TIMEOUT = 10


class Connection:
    """What nm-zones knows of a NetworkManager connection profile (a plain class: events
    import this module, and dataclasses cost more than an event's own work)."""

    __slots__ = ("found", "id", "permissions", "shared", "type", "uuid", "zone")

    def __init__(
        self,
        uuid: str = "",
        id: str = "",
        type: str = "",
        zone: str = "",
        found: bool = True,
        shared: bool = False,
        permissions: str = "",
    ):
        self.uuid, self.id, self.type = uuid, id, type
        self.zone = zone  # connection.zone as NetworkManager holds it; empty when unset
        self.found = found  # False when neither its keyfile nor nmcli knows the profile
        self.shared = shared  # ipv4.method or ipv6.method is `shared`
        # connection.permissions (`user:alice;`): set, the profile's users may edit it
        self.permissions = permissions

    def __eq__(self, other) -> bool:
        return isinstance(other, Connection) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__
        )

    def __repr__(self) -> str:
        return f"Connection({self.uuid!r}, {self.id!r}, {self.type!r}, {self.zone!r})"


def recorded_connection(binding) -> Connection:
    """The connection as a binding (state.Binding) remembers it from apply time: the
    profile may be gone since."""
    return Connection(binding.connection_uuid, binding.connection_id, binding.connection_type)


class Decision:
    __slots__ = ("reason", "warning", "zone")

    def __init__(self, zone: str, reason: str, warning: str = ""):
        self.zone, self.reason = zone, reason
        self.warning = warning  # set when a named zone did not exist and default-zone was used

    def __repr__(self) -> str:
        return f"Decision({self.zone!r}, {self.reason!r}, {self.warning!r})"


def read_keyfile(path: str) -> dict[str, str] | None:
    """The [connection] section of a NetworkManager keyfile, plus `ipv4.method` and
    `ipv6.method`; None if it cannot be read, or cannot be believed: NetworkManager's own
    keyfiles are root's and only root writes them, so a file another user owns or may write
    (its path comes from the event's CONNECTION_FILENAME) decides nothing (said, not used)."""
    try:  # never blocks on a FIFO
        fd = open_regular(path)
    except OSError:
        return None
    info = os.fstat(fd)
    if info.st_uid != 0 or info.st_mode & 0o022:
        os.close(fd)
        _not_believed(
            f"{path!r}: not believed (owner uid {info.st_uid}, mode {info.st_mode & 0o777:o}; "
            "a profile's keyfile is root's, writable by root only): asking nmcli instead"
        )
        return None
    try:
        data = read_all(fd, KEYFILE_MAX_BYTES)
    except OSError:
        return None
    if len(data) > KEYFILE_MAX_BYTES:
        return None
    values: dict[str, str] = {}
    section = ""
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line
        elif "=" in line and not line.startswith("#"):
            key, value = (part.strip() for part in line.split("=", 1))
            if section == "[connection]":
                values[key] = value
            elif section in ("[ipv4]", "[ipv6]") and key == "method":
                values[f"{section[1:-1]}.method"] = value
    return values


def _not_believed(message: str) -> None:
    """On stderr (NetworkManager's log, for the hook) and to syslog."""
    import sys

    from .log import to_syslog

    print(f"nm-zones: {message}", file=sys.stderr)
    to_syslog(message, warning=True)


def _shared(*methods: str) -> bool:
    return "shared" in methods


# in the order nmcli prints them (its settings' and properties' order, not the order asked).
# connection.metered, printed for every profile, closes the zone's line: what a zone with
# newlines adds after it comes before metered's own line, out of order (see _profiles)
NMCLI_FIELDS = "connection.uuid,connection.type,connection.permissions,connection.zone," + (
    "connection.metered,ipv4.method,ipv6.method"
)
CLOSING_FIELD = "connection.metered"


Profile = tuple[str, str, bool, str]  # (zone, type, shared, permissions), from nmcli


def nmcli_connection(uuid: str) -> Profile | None:
    """(zone, type, shared, permissions) of a profile from nmcli; None when nmcli does not
    know it."""
    return nmcli_connections([uuid]).get(uuid)


def nmcli_connections(uuids: list[str]) -> dict[str, Profile]:
    """(zone, type, shared, permissions) of each profile nmcli knows, by UUID, asked in as
    few runs as it takes: one nmcli costs 5-40 ms, and a reload asks for every profile
    bound. nmcli stops at the first UUID it does not know; the others are asked again. A
    run whose output does not have the shape asked for is asked again in halves, down to
    the profile whose own text is wrong, so that no profile's text can speak for another
    (see _profiles) and one such profile costs a reload a few runs, not one per profile."""
    found: dict[str, Profile] = {}
    left = list(dict.fromkeys(u for u in uuids if u))
    while left:
        answered, unknown, output = _nmcli_show(left)
        if answered is None:  # not the shape asked for
            if len(left) > 1:
                half = len(left) // 2
                found.update(nmcli_connections(left[:half]))
                found.update(nmcli_connections(left[half:]))
            else:  # its own zone is not believed: none, and counted as users' to edit
                found[left[0]] = ("", _type_before_zone(output, left[0]), False, UNBELIEVED)
            break
        found.update(answered)
        if unknown not in left:  # all answered, or nmcli cannot answer at all
            break
        left = [u for u in left if u not in answered and u != unknown]
    return found


def _nmcli_show(uuids: list[str]) -> tuple[dict[str, Profile] | None, str, str]:
    """One `nmcli connection show uuid A uuid B ...`: its answers by UUID, the UUID it
    stopped at as unknown ("" when none), and its output. None for answers when the output
    is not what was asked for."""
    import subprocess

    argv = ["nmcli", "-t", "-f", NMCLI_FIELDS, "connection", "show"]
    for uuid in uuids:
        argv += ["uuid", uuid]
    try:
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=NMCLI_TIMEOUT,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}, "", ""
    unknown = ""
    if result.returncode != 0:
        named = result.stderr.partition(" - no such connection profile")
        if not named[1]:
            return {}, "", ""  # nmcli cannot answer at all (NetworkManager not running, ...)
        unknown = named[0].rpartition(" ")[2]
    profiles = _profiles(result.stdout, uuids, unknown)
    if profiles is None:
        return None, unknown, result.stdout
    answers = {
        p["connection.uuid"]: (
            p.get("connection.zone", ""),
            p.get("connection.type", ""),
            _shared(p.get("ipv4.method", ""), p.get("ipv6.method", "")),
            p.get("connection.permissions", ""),
        )
        for p in profiles
    }
    return answers, unknown, result.stdout


def _type_before_zone(output: str, uuid: str) -> str:
    """The type in one profile's output whose zone is not believed: its first lines, uuid
    and type, come before the zone's and hold no newline (NetworkManager takes only setting
    names as types), and the type decides between wired-zone and wireless-zone, which may
    be stricter than default-zone."""
    lines = output.split("\n")
    if len(lines) > 1 and lines[0] == f"connection.uuid:{uuid}":
        field, _, value = lines[1].partition(":")
        if field == "connection.type":
            return value.strip()
    return ""


# the permissions of a profile whose nmcli output could not be believed: non-empty, so that
# it counts as one non-admins may edit (its zone is not honoured, the admin's choices are)
UNBELIEVED = "unbelieved"
NMCLI_FIELD_ORDER = {field: order for order, field in enumerate(NMCLI_FIELDS.split(","))}


def _profiles(output: str, uuids: list[str], unknown: str) -> list[dict[str, str]] | None:
    """nmcli's terse blocks (FIELD:VALUE lines, each block from its connection.uuid on), or
    None unless they are exactly what was asked: the fields known, each at most once and in
    the order nmcli prints them (NMCLI_FIELDS), CLOSING_FIELD in every block, and the
    blocks' UUIDs the ones asked, in order, up to the unknown one.
    Terse values are not escaped: a zone with a newline in it could otherwise add a line
    (`ipv4.method:shared` to a profile without IP settings), or a whole block in another
    profile's name."""
    profiles: list[dict[str, str]] = []
    last = -1
    for line in output.split("\n"):
        if not line:
            continue
        field, colon, value = line.partition(":")
        order = NMCLI_FIELD_ORDER.get(field)
        if not colon or order is None:
            return None
        if field == "connection.uuid":
            profiles.append({})
        elif not profiles or order <= last:
            return None
        last = order
        profiles[-1][field] = value.strip()
    if any(CLOSING_FIELD not in profile for profile in profiles):
        return None
    expected = uuids[: uuids.index(unknown)] if unknown in uuids else uuids
    got = [p["connection.uuid"] for p in profiles]
    # nmcli prints every profile before the unknown one, or none when it stops first
    if got != expected and not (unknown and not got):
        return None
    return profiles


def read_connection(uuid: str, name: str, filename: str = "") -> Connection:
    """The connection's zone and type: from its keyfile when it is one, else from nmcli."""
    if filename and filename.endswith(".nmconnection"):
        values = read_keyfile(filename)
        if values is not None and (not uuid or values.get("uuid", uuid) == uuid):
            shared = _shared(values.get("ipv4.method", ""), values.get("ipv6.method", ""))
            zone, kind = values.get("zone", ""), values.get("type", "")
            permissions = values.get("permissions", "")
            return Connection(uuid, name, kind, zone, shared=shared, permissions=permissions)
    if uuid:
        found = nmcli_connection(uuid)
        if found is not None:
            zone, kind, shared, permissions = found
            return Connection(uuid, name, kind, zone, shared=shared, permissions=permissions)
    return Connection(uuid, name, found=False)


def user_editable(connection: Connection, settings: dict) -> bool:
    """Whether non-admins may edit the profile, as far as nm-zones is told: its own
    connection.permissions, or the admin's word that any profile may be
    (`user-editable-profiles: all`, for systems that let groups such as netdev edit them)."""
    return bool(connection.permissions) or settings.get("user-editable-profiles") == "all"


NOT_ALLOWED_MARK = "not allowed for user-editable profiles"


def not_allowed(zone: str) -> str:
    return f"zone {zone} {NOT_ALLOWED_MARK}"


def decide_zone(connection: Connection, cmap, zones) -> Decision:
    """Apply the first-match-wins order. `cmap` has the connections map's default_zone,
    wired_zone, wireless_zone, zone_for(key) and the settings (a missing list of
    user-profile-zones allows none); `zones` is the set of zones that exist."""
    candidates = []
    if connection.zone:
        candidates.append((connection.zone, REASON_PROFILE))
    if connection.shared:  # after a zone of its own, which may be refused (below)
        candidates.append((SHARED_ZONE, REASON_SHARED))
    if connection.uuid and cmap.zone_for(connection.uuid):
        candidates.append((cmap.zone_for(connection.uuid), "map: uuid"))
    if connection.id and cmap.zone_for(connection.id):
        candidates.append((cmap.zone_for(connection.id), REASON_MAP_NAME))
    if connection.type in WIRED_TYPES and cmap.wired_zone:
        candidates.append((cmap.wired_zone, "default for wired"))
    elif connection.type in WIRELESS_TYPES and cmap.wireless_zone:
        candidates.append((cmap.wireless_zone, "default for wireless"))
    refused = ""
    settings = getattr(cmap, "settings", None) or {}
    if user_editable(connection, settings):
        allowed = settings.get("user-profile-zones", ())
        for zone, reason in candidates:
            if reason in USER_CHOSEN and zone not in allowed:
                refused = refused or zone
        candidates = [c for c in candidates if c[1] not in USER_CHOSEN or c[0] in allowed]
    decision = _first(candidates, cmap, zones)
    if refused and decision.zone != refused:  # (the admin's map may give it all the same)
        decision.reason = f"{decision.reason}; {not_allowed(refused)}"
        warning = f"{not_allowed(refused)} (user-profile-zones); using {decision.zone}"
        decision.warning = "; ".join(filter(None, (warning, decision.warning)))
    return decision


def _first(candidates: list[tuple[str, str]], cmap, zones) -> Decision:
    if not candidates:
        return Decision(cmap.default_zone, "default-zone")
    zone, reason = candidates[0]
    if zone in zones:
        return Decision(zone, reason)
    return Decision(
        cmap.default_zone,
        "default-zone",
        f"{reason} names zone {zone!r}, which does not exist; using default-zone",
    )
