"""`nm-zones install`: the dispatcher hook, root's `nm-zones` command, /etc/nm-zones and the
boot-time unit, for a `pip install` (a Debian package ships its own); for `nm-zones serve`,
its D-Bus policy, polkit actions and (not enabled) unit.

The hook runs as root whatever code its paths point at, so install refuses package folders
(and an interpreter) that root does not own or that group or others can write. The hook is a
small /bin/sh launcher: it starts the interpreter with `-S` (no site-packages scan: no .pth
file can slow down or change an event) and the package folders written in, because
NetworkManager gives hooks no environment; when the interpreter or the package is gone, or
the interpreter is now another Python version, it logs one line and exits 1, leaving the
kernel as it is (the default zone's catch-all stays). /usr/local/sbin/nm-zones, on root's
PATH, starts the command the same way and returns its exit status.

Every file install writes carries a stamp line with the digest of the rest of the file: a file
is install's own only while that digest matches. Anything else (an admin's file, or one of ours
edited since) is kept, and said so. --uninstall first removes every nm-zones rule from the
kernel, then the files that are still install's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys

from ..config.mapfile import MAP_NAME, commented_map
from ..paths import SHIPPED_DIR, Paths
from ..state import write_atomically

HOOK_NAME = "50-nm-zones"
HOOKS_DIR = "etc/NetworkManager/dispatcher.d"
COMMAND_PATH = "usr/local/sbin/nm-zones"
UNIT_NAME = "nm-zones.service"
UNITS_DIR = "etc/systemd/system"
CONFIG_DIR = "etc/nm-zones"
STAMP = "# written by `nm-zones install`; replaced or removed by it only while unedited: sha256 "
NEXT_STEPS = """\
next steps:
  systemctl daemon-reload
  systemctl enable nm-zones.service   # hooks and the default zone's catch-all at every boot
  nm-zones enable                     # now: hooks, catch-all, zones of connections already up"""
# `nm-zones serve`: (shipped file, where it goes, mode)
SERVICE_FILES = (
    ("nm-zones-dbus.conf", "etc/dbus-1/system.d/nm-zones.conf", 0o644),
    ("org.nm-zones.policy", "usr/share/polkit-1/actions/org.nm-zones.policy", 0o644),
    ("nm-zones-serve.service", "etc/systemd/system/nm-zones-serve.service", 0o644),
)


def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def _is_system_root(root: str) -> bool:
    return os.path.realpath(root) == "/"


# -- what the hook runs ------------------------------------------------------------------


def stable_interpreter(
    executable: str = sys.executable,
    in_venv: bool = sys.prefix != sys.base_prefix,
) -> str:
    """The interpreter path to write into the hook: one that survives what it can survive.

    A venv's own bin/python3 (a symlink the venv keeps) rather than the file it resolves to;
    `python3` rather than `python3.11` next to it; the system's /usr/bin/python3 when that is
    the interpreter running. The venv's or pyenv's version folder is only written when nothing
    stabler is the same interpreter.
    """
    real = os.path.realpath(executable)
    candidates = [os.path.join(os.path.dirname(executable), "python3")]
    if not in_venv:
        candidates.append("/usr/bin/python3")
    for candidate in candidates:
        if os.path.exists(candidate) and os.path.realpath(candidate) == real:
            return candidate
    return executable


def package_paths() -> list[str]:
    """The sys.path entries the hook needs: nm_zones, python-iptables (and its libxtwrapper),
    PyYAML, for when the config cache is rebuilt, and jeepney, for the D-Bus service."""
    import importlib.util

    found: list[str] = []
    for module in ("nm_zones", "iptc", "yaml", "jeepney"):
        spec = importlib.util.find_spec(module)
        if spec and spec.origin:
            folder = os.path.dirname(os.path.dirname(os.path.abspath(spec.origin)))
            if folder not in found:
                found.append(folder)
    return found


def _untrusted(path: str, ancestor: bool) -> str:
    """Why root must not run code from `path`, or "" when it may."""
    try:
        info = os.stat(path)
    except OSError as error:
        return f"{path}: {error.strerror}"
    if info.st_uid != 0:
        return f"{path} is owned by uid {info.st_uid}, not root"
    sticky = ancestor and info.st_mode & 0o1000  # like /tmp: nobody else can rename in it
    if info.st_mode & 0o022 and not sticky:
        return f"{path} is writable by group or others"
    return ""


def untrusted_paths(folders: list[str], interpreter: str) -> list[str]:
    """Problems with the code the hook would run as root: each package folder, the package
    folders in it and the files of nm_zones, the interpreter, and every folder above them
    must be root's and not writable by group or others (an editable checkout owned by a user
    would run that user's code as root)."""
    checks: dict[str, bool] = {}
    for folder in folders:
        checks[folder] = False
        for module in ("nm_zones", "iptc", "yaml"):
            package = os.path.join(folder, module)
            if os.path.isdir(package):
                checks[package] = False
    nm_zones = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for folder, _, names in sorted(os.walk(nm_zones)):
        for name in sorted(names):
            if name.endswith(".py"):
                checks[os.path.join(folder, name)] = False
    checks[interpreter] = False
    checks[os.path.realpath(interpreter)] = False
    for path in list(checks):
        parent = os.path.dirname(os.path.realpath(path))
        while parent not in checks:
            checks[parent] = True
            if parent == "/":
                break
            parent = os.path.dirname(parent)
    problems = [_untrusted(path, ancestor) for path, ancestor in checks.items()]
    return sorted({problem for problem in problems if problem})


SHOWN_PROBLEMS = 3  # an install refusal stays one readable line


def refusal_text(problems: list[str]) -> str:
    """The first few problems, top-most paths first (a folder others own explains every
    file in it), and how many more there are."""

    def depth(problem: str) -> tuple:
        path = problem.split(" ", 1)[0].rstrip(":")
        return (path.count("/"), problem)

    ordered = sorted(problems, key=depth)
    shown = "; ".join(ordered[:SHOWN_PROBLEMS])
    more = len(ordered) - SHOWN_PROBLEMS
    return shown + (f"; and {more} more below or beside them" if more > 0 else "")


def _stamped(text: str) -> str:
    """The text with the stamp line after its first line (#!, a comment, or an XML
    declaration: then the stamp is an XML comment)."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    first, _, rest = text.partition("\n")
    if first.startswith("<"):
        return f"{first}\n<!-- {STAMP}{digest} -->\n{rest}"
    return f"{first}\n{STAMP}{digest}\n{rest}"


def written_by_install(path: str) -> bool:
    """True for a file install wrote and nobody edited since (its stamp's digest matches)."""
    try:
        with open(path, encoding="utf-8") as stream:
            text = stream.read(1 << 20)
    except (OSError, UnicodeDecodeError):
        return False
    first, _, rest = text.partition("\n")
    stamp, _, body = rest.partition("\n")
    if stamp.startswith("<!-- ") and stamp.endswith(" -->"):
        stamp = stamp[len("<!-- ") : -len(" -->")]
    if not stamp.startswith(STAMP):
        return False
    original = f"{first}\n{body}"
    return hashlib.sha256(original.encode("utf-8")).hexdigest() == stamp[len(STAMP) :]


GONE = "firewall rules left as they are; reinstall nm-zones and run nm-zones install"


# The Python part of the hook: the written folders first on sys.path; an interpreter that is
# not the version nm-zones was installed for (an upgrade behind a stable path), or a package
# that cannot be imported, ends in one line on stderr and in syslog, and exit 1.
LAUNCH = """\
import sys
sys.path[:0] = @FOLDERS@
PYTHON, INSTALLED_FOR = @PYTHON@, @VERSION@
def fail(reason):
    import syslog
    message = "hook: %s: %s" % (reason, @GONE@)
    syslog.openlog("nm-zones", 0, syslog.LOG_DAEMON)
    syslog.syslog(syslog.LOG_ERR, message)
    sys.exit("nm-zones: " + message)
if sys.version_info[:2] != INSTALLED_FOR:
    now = "%d.%d" % sys.version_info[:2]
    fail("%s is Python %s now, nm-zones was installed for %d.%d" % ((PYTHON, now) + INSTALLED_FOR))
try:
    from nm_zones.doors.event import main
except ImportError as error:
    fail("cannot import nm-zones with %s (%s)" % (PYTHON, error))
main()
"""


def hook_text(
    python: str, folders: list[str], version: tuple[int, int] = sys.version_info[:2]
) -> str:
    import json  # double-quoted literals: the code needs no escapes inside '...' for sh
    import shlex

    launch = LAUNCH
    for name, value in (
        ("FOLDERS", json.dumps(folders)),
        ("PYTHON", json.dumps(python)),
        ("VERSION", repr(tuple(version))),
        ("GONE", json.dumps(GONE)),
    ):
        launch = launch.replace(f"@{name}@", value)
    return f"""#!/bin/sh
# nm-zones: NetworkManager dispatcher hook. On pre-up/up it applies the connection's zone to the
# interface, on pre-down/down it removes the interface's rules; other actions exit at once.
# A launcher: NetworkManager gives hooks no environment, so the interpreter and the package
# folders are written in (`python -S`: no site-packages scan). When either is gone (a removed
# venv), or an upgrade made it another Python version, it logs one line (syslog, nm-zones)
# and exits 1: the rules in the kernel stay as they are, and interfaces without rules of
# their own keep the default zone's catch-all that `nm-zones reload` put in place at boot.
# `nm-zones install` writes it again.
python={shlex.quote(python)}
package={shlex.quote(folders[0] if folders else "")}
fail() {{
    printf 'nm-zones: %s\\n' "$1" >&2
    logger -t nm-zones -p daemon.err -- "$1" 2>/dev/null
    exit 1
}}
[ -x "$python" ] || fail "hook: interpreter $python is gone: {GONE}"
[ -f "$package/nm_zones/doors/event.py" ] \\
    || fail "hook: package nm_zones is gone from $package: {GONE}"
exec "$python" -S -c {shlex.quote(launch)} "$@"
"""


def command_text(python: str, folders: list[str]) -> str:
    return (
        f"#!{python} -S\n"
        "# nm-zones: the command, started like the dispatcher hook: -S skips the site-packages\n"
        "# scan, so no .pth file slows it down or changes it.\n"
        "import sys\n\n"
        f"sys.path[:0] = {folders!r}\n\n"
        "from nm_zones.doors.cli import run  # noqa: E402\n\n"
        "run()\n"
    )


def shipped_text(shipped: str = UNIT_NAME) -> str:
    """A shipped file as installed; a unit starts the command's launcher (`python -S`, the package
    folders written in), as the hook is started, not `python -m`, whose site-packages scan
    (.pth files) costs every start-up and can change what is imported."""
    with open(os.path.join(SHIPPED_DIR, shipped), encoding="utf-8") as f:
        return f.read().replace("@COMMAND@", f"/{COMMAND_PATH}")


# -- install -----------------------------------------------------------------------------


class Outcome:
    """What install or uninstall did, line by line, and whether anything was kept."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.kept = False

    def keep(self, path: str, why: str) -> None:
        self.lines.append(f"kept {path}: {why}")
        self.kept = True


KEPT_WHY = (
    "not written by nm-zones install, or edited since (move it away and run install again "
    "to replace it)"
)


def _put(outcome: Outcome, path: str, text: str, mode: int) -> None:
    """Write a stamped file unless someone else's file is there."""
    stamped = _stamped(text)
    if os.path.lexists(path) and not written_by_install(path):
        outcome.keep(path, KEPT_WHY)
        return
    try:
        with open(path, encoding="utf-8") as stream:
            if stream.read() == stamped and os.stat(path).st_mode & 0o7777 == mode:
                return  # already as install writes it
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    write_atomically(path, stamped.encode("utf-8"), mode)
    outcome.lines.append(f"wrote {path}")


def _link(outcome: Outcome, target: str, path: str) -> None:
    if os.path.islink(path) and os.readlink(path) == target:
        return
    if os.path.lexists(path):
        outcome.keep(path, f"not the link to {target} that install makes")
        return
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    os.symlink(target, path)
    outcome.lines.append(f"wrote {path} -> {target}")


def install(root: str = "/") -> Outcome:
    """Write what is missing or still install's own; refuse untrusted package paths (raises
    PermissionError naming them)."""
    python = stable_interpreter()
    folders = package_paths()
    problems = untrusted_paths(folders, python)
    if problems:
        raise PermissionError(
            "refusing to install: the hook would run code as root from paths root does not "
            "control: " + refusal_text(problems)
        )
    outcome = Outcome()
    hooks = _under(root, HOOKS_DIR)
    _put(outcome, os.path.join(hooks, HOOK_NAME), hook_text(python, folders), 0o755)
    for sub in ("pre-up.d", "pre-down.d"):
        _link(outcome, f"../{HOOK_NAME}", os.path.join(hooks, sub, HOOK_NAME))
    _put(outcome, _under(root, COMMAND_PATH), command_text(python, folders), 0o755)
    config = _under(root, CONFIG_DIR)
    for sub in ("zones.d", "services.d"):
        folder = os.path.join(config, sub)
        if not os.path.isdir(folder):
            os.makedirs(folder, mode=0o755)
            outcome.lines.append(f"wrote {folder}/")
    cmap = os.path.join(config, MAP_NAME)
    if os.path.lexists(cmap) and not written_by_install(cmap):
        outcome.lines.append(f"kept {cmap}: this machine's map")  # the admin's, as it should be
    else:
        _put(outcome, cmap, commented_map(), 0o644)
    _put(outcome, _under(root, f"{UNITS_DIR}/{UNIT_NAME}"), shipped_text(), 0o644)
    for shipped, target, mode in SERVICE_FILES:  # `nm-zones serve`: not enabled
        _put(outcome, _under(root, target), shipped_text(shipped), mode)
    outcome.lines.append(NEXT_STEPS)
    return outcome


# -- uninstall ---------------------------------------------------------------------------


def remove_rules(outcome: Outcome) -> None:
    """Every nm-zones rule out of the kernel (hooks, catch-all, every interface, IPv4 and
    IPv6), under the state lock and with the disabled flag set, so that no event puts any
    back while the files go; the flag and the state go afterwards (uninstall_files)."""
    from ..engine import Engine
    from .nm import disable

    engine = Engine(Paths.from_environment())
    flag_was_there = engine.paths.disabled
    try:
        with engine.state_dir.locked():
            disable(engine, "nm-zones uninstalled")
    except BaseException:
        if not flag_was_there and os.path.exists(engine.paths.disabled_flag):
            os.unlink(engine.paths.disabled_flag)
        raise
    outcome.lines += [str(change) for change in engine.changes]
    outcome.lines.append("removed every nm-zones rule from the kernel (IPv4 and IPv6)")


def _remove(outcome: Outcome, path: str) -> None:
    if os.path.lexists(path):
        os.unlink(path)
        outcome.lines.append(f"removed {path}")


def _remove_if_ours(outcome: Outcome, path: str) -> None:
    if not os.path.lexists(path):
        return
    if written_by_install(path):
        _remove(outcome, path)
    else:
        outcome.keep(path, "not written by nm-zones install, or edited since")


def _remove_state(outcome: Outcome, paths: Paths) -> None:
    """The state folder (state, caches, lock: every file in it is nm-zones' own, whatever
    names later versions add) and the disabled flag."""
    try:
        names = sorted(os.listdir(paths.state))
    except OSError:
        names = []
    for name in names:
        path = os.path.join(paths.state, name)
        if os.path.isfile(path) and not os.path.islink(path):
            _remove(outcome, path)
    with contextlib.suppress(OSError):
        os.rmdir(paths.state)
        outcome.lines.append(f"removed {paths.state}/")
    _remove(outcome, paths.disabled_flag)


def uninstall(root: str = "/") -> Outcome:
    """On the running system (root /), the kernel's rules first; then the files install wrote
    and nobody edited; an admin's files are kept and named."""
    outcome = Outcome()
    system = _is_system_root(root)
    if system:
        remove_rules(outcome)
    hooks = _under(root, HOOKS_DIR)
    _remove_if_ours(outcome, os.path.join(hooks, HOOK_NAME))
    for sub in ("pre-up.d", "pre-down.d"):
        link = os.path.join(hooks, sub, HOOK_NAME)
        hook_gone = not os.path.lexists(os.path.join(hooks, HOOK_NAME))
        if hook_gone and os.path.islink(link) and os.readlink(link) == f"../{HOOK_NAME}":
            _remove(outcome, link)
    _remove_if_ours(outcome, _under(root, COMMAND_PATH))
    for _, target, _ in SERVICE_FILES:
        _remove_if_ours(outcome, _under(root, target))
    units = _under(root, UNITS_DIR)
    wants = os.path.join(units, "NetworkManager.service.wants", UNIT_NAME)
    if os.path.islink(wants) and os.readlink(wants).endswith(f"/{UNIT_NAME}"):
        _remove(outcome, wants)  # what `systemctl enable` made
    _remove_if_ours(outcome, os.path.join(units, UNIT_NAME))
    config = _under(root, CONFIG_DIR)
    cmap = os.path.join(config, MAP_NAME)
    if os.path.lexists(cmap):
        if written_by_install(cmap):
            _remove(outcome, cmap)
        else:
            outcome.lines.append(f"kept {cmap}: this machine's map")
    if system:
        _remove_state(outcome, Paths.from_environment())
    for folder in (os.path.join(config, "zones.d"), os.path.join(config, "services.d"), config):
        try:
            os.rmdir(folder)
            outcome.lines.append(f"removed {folder}/")
        except OSError:
            if os.path.isdir(folder) and folder != config:
                outcome.lines.append(f"kept {folder}: not empty")
    return outcome
