"""A desktop session inside the NetworkManager sandbox: an X server (Xvfb, abstract socket
only, in the sandbox's network namespace), a session bus for one user, the accessibility bus
that bus starts on demand, and dunst as the notification server. Programs run as that user,
with the sandbox's system bus (where `nm-zones serve` and polkitd are).

    desktop = Desktop(nm, "nmzdesk")       # after nm.add_user("nmzdesk")
    desktop.start()
    desktop.popen(["nm-zones-settings"])   # the desktop programs run with DESKTOP_PYTHON
    desktop.atspi("dump", "nm-zones-settings")
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

from .lab import HARNESS, REPO, base_env, wait_for

RUN = "/run/nmz-desktop"
SCREEN = "1400x1700x24"  # room for a window at 200 %


def desktop_python() -> str | None:
    """A Python with PyGObject, GTK 4, libadwaita and AT-SPI's bindings: this one, or
    Debian's (a venv from another Python does not see Debian's python3-gi)."""
    probe = (
        "import gi; gi.require_version('Gtk', '4.0'); gi.require_version('Adw', '1');"
        " gi.require_version('Atspi', '2.0')"
    )
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            found = subprocess.run([python, "-c", probe], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if found.returncode == 0:
            return python
    return None


class Desktop:
    def __init__(self, nm, user: str, scale: int = 1, dunstrc: str = ""):
        self.nm, self.user, self.scale, self.dunstrc = nm, user, scale, dunstrc
        self.python = desktop_python()
        self.display = f":{secrets.randbelow(400) + 100}"
        self.home = f"{RUN}/{user}"
        self.bus = f"unix:path={self.home}/bus"

    def env(self) -> dict[str, str]:
        return base_env(
            DISPLAY=self.display,
            DBUS_SESSION_BUS_ADDRESS=self.bus,
            HOME=self.home,
            USER=self.user,
            XDG_RUNTIME_DIR=f"{self.home}/runtime",
            XDG_CONFIG_HOME=f"{self.home}/.config",
            XDG_STATE_HOME=f"{self.home}/.local/state",
            GDK_SCALE=str(self.scale),
            GSETTINGS_BACKEND="memory",
            GTK_A11Y="atspi",
        )

    def as_user(self, argv: list[str], extra: dict[str, str] | None = None) -> list[str]:
        pairs = [f"{key}={value}" for key, value in {**self.env(), **(extra or {})}.items()]
        return [*self.nm.enter(), "runuser", "-u", self.user, "--", "env", "-i", *pairs, *argv]

    def start(self) -> None:
        nm = self.nm
        nm.sh("mountpoint -q /var/lib/xkb || mount -n -t tmpfs tmpfs /var/lib/xkb")
        nm.sh(
            f"mkdir -p {self.home}/runtime && chown -R {self.user} {self.home}"
            f" && chmod 700 {self.home} {self.home}/runtime"
        )
        if self.dunstrc:
            nm.sh(f"mkdir -p {self.home}/.config/dunst")
            nm.run(
                ["sh", "-c", f"cat > {self.home}/.config/dunst/dunstrc"], input_text=self.dunstrc
            )
            nm.sh(f"chown -R {self.user} {self.home}/.config")
        self.background(
            [
                *nm.enter(),
                *("Xvfb", self.display, "-screen", "0", SCREEN, "-nolock"),
                # -noreset: a server that resets when its last client leaves refuses the
                # clients that connect meanwhile
                "-noreset",
                *("-nolisten", "tcp", "-nolisten", "unix"),
            ],
            "Xvfb.log",
        )
        wait_for(lambda: self.run(["xdpyinfo"], check=False).returncode == 0, 20, what="Xvfb")
        self.background(
            self.as_user(
                [
                    *("dbus-daemon", "--session", "--nofork", "--nopidfile"),
                    f"--address={self.bus}",
                ]
            ),
            "session-bus.log",
        )
        wait_for(
            lambda: (
                self.run(
                    [
                        "dbus-send",
                        "--session",
                        "--print-reply",
                        "--dest=org.freedesktop.DBus",
                        "/org/freedesktop/DBus",
                        "org.freedesktop.DBus.ListNames",
                    ],
                    check=False,
                ).returncode
                == 0
            ),
            20,
            what="the session bus",
        )

    def background(self, argv: list[str], log_name: str) -> subprocess.Popen:
        with open(os.path.join(self.nm.tmp, log_name), "ab") as log:
            process = subprocess.Popen(argv, stdout=log, stderr=log, env=base_env())
        self.nm.listeners.append(process)  # stopped with the sandbox
        return process

    def run(self, argv: list[str], check: bool = True, timeout: float = 60, input_text=None):
        result = subprocess.run(
            self.as_user(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input_text,
            env=base_env(),
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{argv} exited {result.returncode}:\n{result.stdout}{result.stderr}"
            )
        return result

    def program(
        self, module: str, log_name: str, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        """A desktop program of the package, as the user (its output in LOG_NAME), with
        `env` added to the session's environment (LANG=de_DE.UTF-8, say)."""
        return self.background(self.as_user([self.python, "-m", module, *args], env), log_name)

    def windows(self, *search: str) -> list[tuple[str, int, int, int, int]]:
        """(X window id, x, y, width, height) of the mapped windows `xdotool search` finds
        with these arguments (`--name TITLE`, `--class CLASS`)."""
        found = self.run(["xdotool", "search", "--onlyvisible", *search], check=False)
        windows = []
        for window in found.stdout.split():
            shown = self.run(["xdotool", "getwindowgeometry", "--shell", window], check=False)
            values = dict(line.split("=", 1) for line in shown.stdout.split() if "=" in line)
            if {"X", "Y", "WIDTH", "HEIGHT"} <= set(values):
                place = (int(values[key]) for key in ("X", "Y", "WIDTH", "HEIGHT"))
                windows.append((window, *place))
        return windows

    def window(self, *search: str) -> tuple[str, int, int, int, int]:
        """The largest visible window found (GTK also maps a 1x1 leader window)."""
        found = wait_for(lambda: self.windows(*search), 30, what=f"a window {search}")
        return max(found, key=lambda w: w[3] * w[4])

    def keys(self, *keys: str) -> None:
        """Keyboard input to the focused window (no window manager: focus follows the
        pointer, which `point_at` puts on a window)."""
        self.run(["xdotool", "key", "--delay", "120", *keys])

    def point_at(self, window: str) -> None:
        self.run(["xdotool", "mousemove", "--window", window, "20", "20"])

    def screenshot(self, target: str, window: str = "root", crop: str = "") -> None:
        """ImageMagick `import` of a window (or the screen), written to `target` (outside
        the sandbox: the same file system)."""
        inside = f"{self.home}/shot.png"
        argv = ["import", "-window", window]
        if crop:
            argv += ["-crop", crop, "+repage"]
        self.run([*argv, inside])
        self.nm.sh(f"cp {inside} {target}")

    def dunst(self) -> subprocess.Popen:
        return self.background(self.as_user(["dunst"]), "dunst.log")

    def atspi(self, *args: str, check: bool = True):
        result = self.run([self.python, os.path.join(HARNESS, "atspi_tool.py"), *args], check=check)
        if args[0] == "dump" and result.returncode == 0:
            return json.loads(result.stdout)
        return result

    def log(self, name: str) -> str:
        path = os.path.join(self.nm.tmp, name)
        if not os.path.exists(path):
            return ""
        with open(path, errors="replace") as stream:
            return stream.read()


__all__ = ["REPO", "Desktop", "desktop_python"]
