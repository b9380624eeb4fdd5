"""Names people know for programs known by their cgroup: a desktop application's Name and
Icon (its scope `app-[LAUNCHER-]DESKTOP_ID-RANDOM.scope` or unit
`app-[LAUNCHER-]DESKTOP_ID@RANDOM.service` names the .desktop file, as the XDG desktop entry
specification's systemd integration has it), a service's Description (read from its unit
file: no systemd is asked, so it works without one running), else the unit's name.

Also which cgroups are a user's session (user.slice, user@UID.service, app-*.scope) and
which APP (ruleset/applications.py) stands for a program whatever its launch: the random
part of a scope becomes `*`, so an allowance follows the next launch too.
"""

from __future__ import annotations

import configparser
import fnmatch
import os
import re

SYSTEM_UNIT_DIRS = (
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
)
USER_UNIT_DIRS = ("/etc/systemd/user", "/usr/local/lib/systemd/user", "/usr/lib/systemd/user")
UNIT_SUFFIXES = (".service", ".scope", ".socket", ".slice")
SCOPE = re.compile(r"^app-(?P<id>.+)-(?P<random>[^-]+)\.scope$")
APP_SERVICE = re.compile(r"^app-(?P<id>.+?)(@(?P<random>[^.]*))?\.service$")
USER_SLICE = re.compile(r"^user-(\d+)\.slice$")
USER_MANAGER = re.compile(r"^user@(\d+)\.service$")
DEFAULT_ICON = "application-x-executable"


def program_unit(cgroup: str) -> str:
    """The unit or scope a cgroup path belongs to: its deepest part named like a unit
    (`.../app-x-12.scope/inner` -> `app-x-12.scope`), else its last part."""
    parts = [p for p in cgroup.split("/") if p]
    for part in reversed(parts):
        if part.endswith(UNIT_SUFFIXES) and not USER_MANAGER.match(part):
            return part
    return parts[-1] if parts else ""


def session_uid(cgroup: str) -> int | None:
    """The uid whose session a cgroup belongs to (a user's slice, user manager or app
    scope), or None for a system service."""
    parts = [p for p in cgroup.split("/") if p]
    for part in parts:
        match = USER_SLICE.match(part) or USER_MANAGER.match(part)
        if match:
            return int(match[1])
    if "user.slice" in parts or any(SCOPE.match(p) for p in parts):
        return -1  # a session's, though no part names the user
    return None


def app_pattern(unit: str) -> str:
    """The APP that names this program at any launch: the random part of an app scope or
    app service instance as `*`; any other unit as it is."""
    match = SCOPE.match(unit)
    if match:
        return f"app-{match['id']}-*.scope"
    match = APP_SERVICE.match(unit)
    if match and match["random"] is not None:
        return f"app-{match['id']}@*.service"
    return unit


def desktop_ids(unit: str) -> list[str]:
    """The desktop file ids an app unit may name, most likely first: `app-gnome-org.x.Y-5.scope`
    -> org.x.Y (launcher gnome), gnome-org.x.Y; `\\x2d` is an escaped `-`."""
    match = SCOPE.match(unit) or APP_SERVICE.match(unit)
    if not match:
        return []
    whole = match["id"]
    ids = []
    if "-" in whole:
        ids.append(whole.split("-", 1)[1])  # after the launcher's name
    ids.append(whole)
    return [i.replace("\\x2d", "-") for i in ids]


def data_dirs(home: str = "") -> list[str]:
    """Where .desktop files live: XDG_DATA_HOME (or HOME/.local/share), then XDG_DATA_DIRS."""
    home = home or os.path.expanduser("~")
    own = os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    shared = os.environ.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share"
    return [own, *[d for d in shared.split(":") if d]]


def desktop_entry(desktop_id: str, dirs: list[str]) -> tuple[str, str] | None:
    """(Name, Icon) of the desktop file `desktop_id` in the first folder that has it."""
    for folder in dirs:
        path = os.path.join(folder, "applications", f"{desktop_id}.desktop")
        entry = _section(path, "Desktop Entry")
        if entry and entry.get("name"):
            return entry["name"], entry.get("icon", "")
    return None


def unit_description(unit: str, dirs=SYSTEM_UNIT_DIRS + USER_UNIT_DIRS) -> str:
    """The Description= of a unit file (a template's for an instance), "" when none."""
    names = [unit]
    if "@" in unit:
        base, _, rest = unit.partition("@")
        names.append(f"{base}@{rest[rest.rfind('.') :]}")
    for folder in dirs:
        for name in names:
            section = _section(os.path.join(folder, name), "Unit")
            if section and section.get("description"):
                return section["description"]
    return ""


def program_name(
    cgroup_or_app: str,
    desktop_dirs: list[str] | None = None,
    unit_dirs=SYSTEM_UNIT_DIRS + USER_UNIT_DIRS,
) -> tuple[str, str]:
    """(the name to show, an icon name) for a cgroup path or an APP (wildcards allowed):
    a desktop file's Name and Icon, a unit's Description, else the unit's name."""
    unit = program_unit(cgroup_or_app)
    dirs = data_dirs() if desktop_dirs is None else desktop_dirs
    for desktop_id in desktop_ids(unit):
        if "*" not in desktop_id:
            found = desktop_entry(desktop_id, dirs)
            if found:
                return found[0], found[1] or DEFAULT_ICON
    if "*" not in unit:
        description = unit_description(unit, unit_dirs)
        if description:
            return description, DEFAULT_ICON
    return unit or cgroup_or_app, DEFAULT_ICON


def labelled(app: str, desktop_dirs: list[str] | None = None) -> str:
    """`Name (APP)`, or APP alone when no better name is known: what status shows."""
    name, _icon = program_name(app, desktop_dirs)
    return app if fnmatch.fnmatchcase(name, app) or name == app else f"{name} ({app})"


def _section(path: str, name: str) -> dict[str, str] | None:
    """The keys of one section of an ini-like file (desktop entry, unit), lower-cased."""
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        with open(path, encoding="utf-8", errors="replace") as text:
            parser.read_file(text)
    except (OSError, configparser.Error):
        return None
    if not parser.has_section(name):
        return None
    return dict(parser.items(name))
