"""nm-connection-editor's "Firewall zone" row, listing nm-zones' zones: a screenshot.

Everything runs in the namespace sandbox of the tests: a private NetworkManager and system
bus, `nm-zones serve` owning firewalld's name, a profile that names a zone of its own
(`lab-bench`, which no zone file defines: the editor must still list it), and the editor on a
private X server (Xvfb, abstract socket only, in the sandbox's network namespace). The zone
list of the General tab is opened and the screen captured. Run as root:

    python3 demo/editor_screenshot.py docs/editor-zones.png

Needs network-manager-gnome, xvfb, imagemagick and xdotool (Debian packages).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from tests.harness.lab import base_env, wait_for  # noqa: E402
from tests.harness.nm_sandbox import NMSandbox  # noqa: E402

DISPLAY = ":73"


def x(nm, *argv: str, check: bool = True):
    """A program on the sandbox's X display."""
    return nm.run(["env", f"DISPLAY={DISPLAY}", "NO_AT_BRIDGE=1", *argv], check=check)


def window(nm) -> str:
    found = x(nm, "xdotool", "search", "--name", "Editing lan", check=False)
    return found.stdout.split()[0] if found.returncode == 0 and found.stdout.split() else ""


def main() -> int:
    output = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "editor-zones.png")
    with tempfile.TemporaryDirectory(prefix="nm-zones-screenshot-") as tmp:
        nm = NMSandbox(os.path.join(tmp, "sandbox"))
        nm.start()
        try:
            nm.install_hook()
            nm.serve()
            link = nm.add_veth()
            uuid = nm.add_connection(link, "lan", "connection.zone", "lab-bench")
            nm.nmcli("connection", "up", "lan")
            nm.sh("mount -n -t tmpfs tmpfs /var/lib/xkb")
            xvfb = subprocess.Popen(
                [
                    *(*nm.enter(), "Xvfb", DISPLAY, "-screen", "0", "720x640x24", "-nolock"),
                    *("-nolisten", "tcp", "-nolisten", "unix"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=base_env(),
            )
            nm.listeners.append(xvfb)
            wait_for(lambda: x(nm, "xdpyinfo", check=False).returncode == 0, 20, what="Xvfb")
            editor = subprocess.Popen(
                [
                    *(*nm.enter(), "env", f"DISPLAY={DISPLAY}", "NO_AT_BRIDGE=1"),
                    *("dbus-run-session", "--", "nm-connection-editor", f"--edit={uuid}"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=base_env(),
            )
            nm.listeners.append(editor)
            win = wait_for(lambda: window(nm), 30, what="the editor's window")
            x(nm, "xdotool", "windowmove", win, "0", "0")
            x(nm, "xdotool", "windowactivate", "--sync", win, check=False)
            time.sleep(1.0)  # let GTK draw; nothing to poll for on a plain X server
            # the General tab (the notebook's first), then the Firewall zone row's list
            x(nm, "xdotool", "mousemove", "--window", win, "50", "63", "click", "1")
            time.sleep(0.5)
            x(nm, "xdotool", "mousemove", "--window", win, "540", "219", "click", "1")
            time.sleep(1.0)
            x(nm, "import", "-window", "root", "-crop", "690x545+0+0", "+repage", output)
        finally:
            nm.stop()
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
