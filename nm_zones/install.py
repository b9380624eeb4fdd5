"""`nm-zones install`: the dispatcher hook, root's `nm-zones` command, /etc/nm-zones and the
boot-time unit; for `nm-zones serve`, its D-Bus policy, polkit actions and (not enabled) unit.

The hook is written for the interpreter nm-zones is installed under, started with `-S` (no
site-packages scan: no .pth file can slow down or change an event) and the package folders
written into it, because NetworkManager gives hooks no environment. /usr/local/sbin/nm-zones
starts the command the same way (root's PATH finds it before pip's script in bin/), so a
`reload` costs what an event costs plus the YAML. An admin's file is never overwritten, and
--uninstall removes only what install wrote.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys

from .paths import SHIPPED_DIR
from .state import write_atomically

HOOK_NAME = "50-nm-zones"
HOOK_MARKER = "nm-zones: NetworkManager dispatcher hook"
COMMAND_PATH = "usr/local/sbin/nm-zones"
COMMAND_MARKER = "nm-zones: the command, started like the dispatcher hook"
UNIT_NAME = "nm-zones.service"
# `nm-zones serve`: (shipped file, where it goes, mode); each carries the word nm-zones
SERVICE_FILES = (
    ("nm-zones-dbus.conf", "etc/dbus-1/system.d/nm-zones.conf", 0o644),
    ("org.nm-zones.policy", "usr/share/polkit-1/actions/org.nm-zones.policy", 0o644),
    ("nm-zones-serve.service", "etc/systemd/system/nm-zones-serve.service", 0o644),
)
SERVICE_MARKER = "nm-zones"


def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def package_paths() -> list[str]:
    """The sys.path entries the hook needs: nm_zones, python-iptables (and its libxtwrapper)
    and PyYAML, for when the config cache is rebuilt."""
    found: list[str] = []
    for module in ("nm_zones", "iptc", "yaml", "jeepney"):
        spec = importlib.util.find_spec(module)
        if spec and spec.origin:
            folder = os.path.dirname(os.path.dirname(os.path.abspath(spec.origin)))
            if folder not in found:
                found.append(folder)
    return found


def hook_text() -> str:
    with open(os.path.join(SHIPPED_DIR, "dispatcher.d", HOOK_NAME), encoding="utf-8") as f:
        lines = f.read().splitlines()
    lines[0] = f"#!{sys.executable} -S"
    text = "\n".join(lines) + "\n"
    return text.replace(
        "NM_ZONES_PATHS: list[str] = []", f"NM_ZONES_PATHS: list[str] = {package_paths()!r}"
    )


def command_text() -> str:
    return (
        f"#!{sys.executable} -S\n"
        f"# {COMMAND_MARKER} (written by `nm-zones install`):\n"
        "# -S skips the site-packages scan, so no .pth file slows it down or changes it.\n"
        "import sys\n\n"
        f"sys.path[:0] = {package_paths()!r}\n\n"
        "from nm_zones.cli import main  # noqa: E402\n\n"
        "main()\n"
    )


def unit_text() -> str:
    with open(os.path.join(SHIPPED_DIR, UNIT_NAME), encoding="utf-8") as f:
        return f.read().replace("@PYTHON@", sys.executable)


def _write(path: str, text: str, mode: int) -> None:
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    write_atomically(path, text.encode("utf-8"), mode)


def _link(target: str, path: str) -> None:
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    if os.path.islink(path) or os.path.exists(path):
        os.unlink(path)
    os.symlink(target, path)


def install(root: str = "/") -> list[str]:
    """Returns notes on what was kept as it was; nothing when all went as planned."""
    notes = []
    hooks = _under(root, "etc/NetworkManager/dispatcher.d")
    _write(os.path.join(hooks, HOOK_NAME), hook_text(), 0o755)
    for sub in ("pre-up.d", "pre-down.d"):
        _link(f"../{HOOK_NAME}", os.path.join(hooks, sub, HOOK_NAME))
    command = _under(root, COMMAND_PATH)
    if os.path.exists(command) and not _written_by_us(command, COMMAND_MARKER):
        notes.append(f"kept {command}: not written by nm-zones")
    else:
        _write(command, command_text(), 0o755)
    config = _under(root, "etc/nm-zones")
    for sub in ("zones.d", "services.d"):
        os.makedirs(os.path.join(config, sub), mode=0o755, exist_ok=True)
    cmap = os.path.join(config, "connections-map.yaml")
    if os.path.exists(cmap):
        notes.append(f"kept {cmap} as it is")
    else:
        shutil.copyfile(os.path.join(SHIPPED_DIR, "connections-map.yaml"), cmap)
        os.chmod(cmap, 0o644)
    units = _under(root, "etc/systemd/system")
    _write(os.path.join(units, UNIT_NAME), unit_text(), 0o644)
    _link(f"../{UNIT_NAME}", os.path.join(units, "NetworkManager.service.wants", UNIT_NAME))
    notes += install_service_files(root)
    return notes


def install_service_files(root: str) -> list[str]:
    """The D-Bus policy, the polkit actions and the unit of `nm-zones serve` (the unit is
    not enabled: it would stop firewalld)."""
    notes = []
    for shipped, target, mode in SERVICE_FILES:
        path = _under(root, target)
        if os.path.exists(path) and not _written_by_us(path, SERVICE_MARKER):
            notes.append(f"kept {path}: not written by nm-zones")
            continue
        with open(os.path.join(SHIPPED_DIR, shipped), encoding="utf-8") as stream:
            text = stream.read().replace("@PYTHON@", sys.executable)
        _write(path, text, mode)
    return notes


def _written_by_us(path: str, marker: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            return marker in stream.read(4096)
    except OSError:
        return False


def _remove(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)


def uninstall(root: str = "/") -> list[str]:
    notes = []
    hooks = _under(root, "etc/NetworkManager/dispatcher.d")
    for path, marker in (
        (os.path.join(hooks, HOOK_NAME), HOOK_MARKER),
        (_under(root, COMMAND_PATH), COMMAND_MARKER),
    ):
        if os.path.isfile(path):
            if _written_by_us(path, marker):
                _remove(path)
            else:
                notes.append(f"kept {path}: not written by nm-zones")
    for sub in ("pre-up.d", "pre-down.d"):
        link = os.path.join(hooks, sub, HOOK_NAME)
        if os.path.islink(link) and os.readlink(link) == f"../{HOOK_NAME}":
            _remove(link)
    for _, target, _ in SERVICE_FILES:
        path = _under(root, target)
        if os.path.isfile(path) and _written_by_us(path, SERVICE_MARKER):
            _remove(path)
    units = _under(root, "etc/systemd/system")
    _remove(os.path.join(units, "NetworkManager.service.wants", UNIT_NAME))
    _remove(os.path.join(units, UNIT_NAME))
    config = _under(root, "etc/nm-zones")
    cmap = os.path.join(config, "connections-map.yaml")
    shipped = os.path.join(SHIPPED_DIR, "connections-map.yaml")
    if os.path.isfile(cmap):
        with open(cmap, "rb") as a, open(shipped, "rb") as b:
            if a.read() == b.read():
                _remove(cmap)
            else:
                notes.append(f"kept {cmap}: changed by the admin")
    for sub in ("zones.d", "services.d", ""):
        folder = os.path.join(config, sub)
        try:
            os.rmdir(folder)
        except OSError:
            if os.path.isdir(folder) and sub:
                notes.append(f"kept {folder}: not empty")
    return notes
