"""The desktop front ends, for real: `nm-zones-settings` and `nm-zones-notify` run as a desktop
user under Xvfb, with a session bus, the accessibility bus and dunst, against the real
`nm-zones serve`, polkitd and NetworkManager of the namespace sandbox. The window is read and
driven as a screen reader and a keyboard user would (AT-SPI, xdotool); the kernel's rules are
judged by probes from the peer host."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.harness.desktop import Desktop, desktop_python
from tests.harness.lab import PYTHON, REPO, base_env, wait_for
from tests.test_nm import HOME, PUBLIC, specs
from tests.test_service import nm as served_sandbox  # noqa: F401 - a fixture, shared

USER = "nmzdesk"
MANAGER = "org.nm_zones.Manager1"
APP = "nm-zones-settings"
GRANT = """polkit.addRule(function(action, subject) {
    if ((action.id == "org.nm-zones.assign" || action.id == "org.nm-zones.configure")
        && subject.user == "USER")
        return polkit.Result.YES;
});
""".replace("USER", USER)
# where the screenshots go: the test's own folder, or (to refresh the handbook's pictures)
# NM_ZONES_SCREENSHOTS=docs
SHOTS = os.environ.get("NM_ZONES_SCREENSHOTS", "")
# what dunst's menu program gets asked for: `dunstctl context` runs it with one line per action
PICK = """#!/bin/sh
want=$(cat {home}/want)
grep -m1 ",$want\\]"
"""
DUNSTRC = """[global]
    dmenu = {home}/pick
    font = DejaVu Sans 11
    width = 520
    origin = top-right
    offset = 10x10
[stay]
    appname = nm-zones
    override_dbus_timeout = 0
"""
NEEDS_DESKTOP = desktop_python() is None or not all(
    os.path.exists(path) for path in ("/usr/bin/Xvfb", "/usr/bin/dunst", "/usr/bin/xdotool")
)


@pytest.fixture
def desk(served_sandbox):  # noqa: F811 - the fixture imported above
    """The service's sandbox (test_service's `nm`), serving, with a desktop user."""
    if NEEDS_DESKTOP:
        pytest.skip("needs GTK 4, libadwaita, AT-SPI, Xvfb, dunst, xdotool (see .ci/setup)")
    served_sandbox.serve()
    served_sandbox.add_user(USER, "netdev")
    return served_sandbox


def screenshot(desktop: Desktop, tmp_path, name: str, window: str, crop: str = "") -> None:
    """Save a screenshot, and check that it shows something (a blank capture has 1-2
    colours)."""
    folder = os.path.join(REPO, SHOTS) if SHOTS else str(tmp_path)
    target = os.path.join(folder, name)
    desktop.screenshot(target, window, crop)
    colours = subprocess.run(
        ["identify", "-format", "%k", target], capture_output=True, text=True, check=True
    ).stdout
    assert int(colours) > 20, f"{target} looks blank ({colours} colours)"


def up(nm, name: str, *settings: str):
    link = nm.add_veth()
    nm.add_connection(link, name, *settings)
    nm.nmcli("connection", "up", name)
    return link


def profile_zone(nm, name: str) -> str:
    return nm.nmcli("-g", "connection.zone", "connection", "show", name).stdout.strip()


def grant(nm, desktop) -> None:
    """polkit grants the desktop user assign and configure (polkitd rereads its rules)."""
    nm.sh("mkdir -p /etc/polkit-1/rules.d")
    nm.run(["sh", "-c", "cat > /etc/polkit-1/rules.d/50-desktop.rules"], input_text=GRANT)
    check = "pkcheck --action-id org.nm-zones.configure --process $$"
    wait_for(
        lambda: desktop.run(["sh", "-c", check], check=False).returncode == 0,
        20,
        what="polkit to grant the desktop user",
    )


# -- reading the window as assistive technologies do --------------------------------------


class Window:
    """nm-zones-settings, read through AT-SPI and driven with the keyboard."""

    def __init__(self, desktop: Desktop):
        self.desktop = desktop

    def tree(self) -> list[dict]:
        found = self.desktop.atspi("dump", APP, check=False)
        return found if isinstance(found, list) else []

    def row(self, name: str) -> dict | None:
        """A connection's row: its name, its description and the zone its selector shows."""
        tree = self.tree()
        rows = [e for e in tree if e["role"] == "list item" and e["name"] == name]
        if not rows:
            return None
        return self._with_selector(tree, rows[0])

    def _with_selector(self, tree: list[dict], row: dict) -> dict:
        inside = [e for e in tree if e["path"].startswith(row["path"] + ".")]
        combo = next(e for e in inside if e["role"] == "combo box")
        shown = [
            e["text"]
            for e in inside
            if e["role"] == "label"
            and e["path"].startswith(combo["path"] + ".")
            and e["text"] != "(None)"
        ]
        labels = [e["text"] for e in inside if e["role"] == "label"]
        return {
            "description": row["description"],
            "labels": labels,
            "combo": combo,
            "zone": shown[0] if shown else "",
        }

    def status(self) -> str:
        return next((e["text"] for e in self.tree() if e["role"] == "status bar"), "")

    def switch(self, name: str) -> dict:
        return next(e for e in self.tree() if e["role"] == "check box" and name in e["name"])

    def wait_row(self, name: str, zone: str, timeout: float = 30) -> dict:
        return wait_for(
            lambda: (lambda r: r if r and r["zone"] == zone else None)(self.row(name)),
            timeout,
            what=f"the row of {name} showing zone {zone}: {self.row(name)}",
        )

    def wait_status(self, pattern: str, timeout: float = 30) -> str:
        return wait_for(
            lambda: (lambda s: s if re.search(pattern, s) else None)(self.status()),
            timeout,
            what=f"the result line to match {pattern!r}: {self.status()!r}",
        )

    def choose(self, combo: dict, label: str) -> None:
        """The keyboard only: Tab to the selector, Space opens its list, Home, Down to the
        item `label`, Return."""
        window = self.desktop.window("--name", "Network Zones")[0]
        self.desktop.point_at(window)  # no window manager: keyboard focus follows the pointer
        button = combo["path"] + ".0"
        for _tab in range(40):
            if any(e["path"] == button and "focused" in e["states"] for e in self.tree()):
                break
            self.desktop.keys("Tab")
        else:
            raise AssertionError(f"Tab never reached {combo['description']}")
        shown = {w[0] for w in self.desktop.windows("--name", "")}
        self.desktop.keys("space")
        wait_for(
            lambda: any(w[3] > 1 and w[0] not in shown for w in self.desktop.windows("--name", "")),
            10,
            what=f"the list of {combo['description']} to open",
        )
        labels = self._items(combo)
        self.desktop.keys("Home", *["Down"] * labels.index(label), "Return")

    def _items(self, combo: dict) -> list[str]:
        """The items of a selector's list, in order."""
        popup = combo["path"] + ".1."
        items = {e["path"]: e for e in self.tree() if e["path"].startswith(popup)}
        found = []
        for path, entry in items.items():
            if entry["role"] == "list item":
                texts = [
                    e["text"] for p, e in items.items() if p.startswith(path + ".") and "text" in e
                ]
                found.append(texts[0] if texts else "")
        return found


def test_the_window_shows_and_changes_zones_through_the_service(desk, tmp_path):
    nm = desk
    nm.listen()
    lan = up(nm, "lan")
    nm.wait_zone(lan.name, "public")
    desktop = Desktop(nm, USER, scale=2)
    desktop.start()
    desktop.program("nm_zones.desktop.settings", "settings.log")
    window = Window(desktop)
    row = window.wait_row("lan", "Public")
    assert row["description"] == "lan on ethz0: zone public"
    assert any(
        label.startswith("ethz0 · unknown network · Public network") for label in row["labels"]
    ), row["labels"]
    _id, _x, _y, width, height = desktop.window("--name", "Network Zones")
    assert width >= 1280 and height >= 1500, (width, height)  # 640x780, at 200 %

    # without polkit's grant: the refusal is shown, nothing changes
    window.choose(row["combo"], "Home")
    window.wait_status(r"^Not authorized: polkit refused org\.nm-zones\.assign$")
    assert profile_zone(nm, "lan") == "" and nm.zone_of(lan.name) == "public"
    nm.wait_reachable(lan)
    assert nm.probe(specs(lan)) == PUBLIC
    window.wait_row("lan", "Public")  # the selector shows the zone it has, not the refused one

    # granted: the profile gets the zone, and the kernel has it at once
    grant(nm, desktop)
    window.choose(window.row("lan")["combo"], "Home")
    window.wait_status(r"ethz0: public -> home \(nmcli connection.zone\) connection 'lan'")
    assert profile_zone(nm, "lan") == "home"
    assert nm.probe(specs(lan)) == HOME
    row = window.wait_row("lan", "Home")
    assert "ethz0 · its own zone · " in " ".join(row["labels"])

    # changed elsewhere: the window follows
    nm.nmcli("connection", "modify", "lan", "connection.zone", "work")
    window.wait_row("lan", "Work", timeout=10)

    # a connection coming up appears, with its zone and why
    lab = up(nm, "lab")
    row = window.wait_row("lab", "Public", timeout=20)
    assert row["description"] == f"lab on {lab.name}: zone public"

    # the wired default: written to the map, and the wired connection without a zone follows
    tree = window.tree()
    wired = next(e for e in tree if e["role"] == "list item" and e["name"] == "Wired networks")
    wired_combo = window._with_selector(tree, wired)["combo"]
    window.choose(wired_combo, "Block")
    window.wait_status(rf"{lab.name}: public -> block \(default for wired\)")
    assert "wired-zone: block" in nm.sh("cat /etc/nm-zones/connections-map.yaml").stdout
    nm.wait_zone(lab.name, "block")
    window.wait_row("lab", "Block")
    screenshot(
        desktop, tmp_path, "settings-window.png", desktop.window("--name", "Network Zones")[0]
    )

    # zone support off, then on again
    window.desktop.atspi("action", APP, window.switch("Zone support")["path"], "toggle")
    wait_for(
        lambda: nm.sh("test -e /etc/nm-zones/disabled", check=False).returncode == 0,
        20,
        what="the disabled flag",
    )
    wait_for(
        lambda: "nmz-if-" not in nm.save("ipv4") + nm.save("ipv6"),
        20,
        what="every interface's rules to go",
    )
    wait_for(
        lambda: "checked" not in window.switch("Zone support")["states"],
        10,
        what="the switch to show off",
    )
    window.desktop.atspi("action", APP, window.switch("Zone support")["path"], "toggle")
    nm.wait_zone(lan.name, "work")
    nm.wait_zone(lab.name, "block")
    assert nm.sh("test -e /etc/nm-zones/disabled", check=False).returncode != 0
    wait_for(
        lambda: "checked" in window.switch("Zone support")["states"],
        10,
        what="the switch to show on",
    )

    # the agent's switch: the user's own setting file
    window.desktop.atspi("action", APP, window.switch("Notifications")["path"], "toggle")
    conf = f"{desktop.home}/.config/nm-zones/desktop.conf"
    wait_for(
        lambda: "enabled = false" in nm.sh(f"cat {conf}", check=False).stdout,
        10,
        what="the notifications setting",
    )
    assert "Traceback" not in desktop.log("settings.log")


# the admin's own file of `home`: its comments and order must survive the editor's changes
HOME_FILE = """# Home, as this admin wants it
description: "Home network"   # shown in the window
services:
  - ssh          # remote login
  - mdns
  - ipp-client   # the printer
  - dhcpv6-client
# ports: none yet
"""


def zone_rows(window: Window) -> dict[str, dict]:
    """The zone page's rows by their name: services, ports, interfaces, allowances."""
    return {e["name"]: e for e in window.tree() if e["role"] == "list item" and e["name"]}


def control(window: Window, name: str) -> dict:
    """The one control (button, text field, combo box) whose accessible name is `name`."""
    tree = window.tree()
    found = [e for e in tree if e["name"] == name and e["role"] != "list item"]
    assert found, f"no control named {name!r} in {[e['name'] for e in tree if e['name']]}"
    return found[0]


def tab_to(window: Window, name: str) -> None:
    """The keyboard only: Tab until the control named `name` has the focus."""
    window.desktop.point_at(window.desktop.window("--name", "Network Zones")[0])
    seen = []
    for _tab in range(60):
        focused = [e for e in window.tree() if "focused" in e["states"]]
        if any(e["name"] == name for e in focused):
            return
        seen.append([(e["role"], e["name"], e["path"]) for e in focused])
        window.desktop.keys("Tab")
    raise AssertionError(f"Tab never reached {name!r}: {seen}")


def type_port(window: Window, port: str) -> None:
    """Into the port field by keyboard: Tab to its Add button, Shift+Tab back into the field
    (GTK does not tell AT-SPI when the field itself has the focus), type, Return."""
    tab_to(window, "Add port")
    window.desktop.keys("shift+Tab", "ctrl+a")
    window.desktop.run(["xdotool", "type", "--delay", "60", port])
    window.desktop.keys("Return")


def drawn(desktop: Desktop, window: str, tmp_path) -> bool:
    """Whether the bottom of the window shows something (X resizes at once, GTK draws after)."""
    target = str(tmp_path / "bottom.png")
    desktop.screenshot(target, window, "640x40+0+1290")
    colours = subprocess.run(["identify", "-format", "%k", target], capture_output=True, text=True)
    return colours.returncode == 0 and int(colours.stdout or 0) > 2


def home_lan(nm):
    """The peer listening, the admin's home.yaml (HOME_FILE), and `lan` up in zone home."""
    nm.listen()
    nm.sh("mkdir -p /etc/nm-zones/zones.d")
    nm.run(["sh", "-c", "cat > /etc/nm-zones/zones.d/home.yaml"], input_text=HOME_FILE)
    lan = up(nm, "lan", "connection.zone", "home")
    nm.wait_zone(lan.name, "home")
    nm.wait_reachable(lan)
    return lan


def test_the_zone_editor_changes_a_zone_file_through_the_service(desk, tmp_path):
    nm = desk
    lan = home_lan(nm)
    assert nm.probe(specs(lan)) == HOME
    nm.nm_zones("allow", "9090/tcp", "--interface", lan.name, "--for", "10m")
    desktop = Desktop(nm, USER)
    desktop.start()
    desktop.program("nm_zones.desktop.settings", "settings.log")
    window = Window(desktop)
    window.wait_row("lan", "Home")
    desktop.atspi("action", APP, control(window, "Zones")["path"], "click")

    # the page of home: its services with their ports, the interface, the allowance
    wait_for(
        lambda: (lambda r: r if "ipp-client" in r and "9090/tcp" in r else None)(zone_rows(window)),
        20,
        what=f"the page of zone home\n{desktop.log('settings.log')}",
    )
    texts = " ".join(e.get("text", "") for e in window.tree() if e["role"] == "label")
    assert "631/udp" in texts and "lan" in texts and lan.name in texts, texts
    assert re.search(rf"{lan.name} · (9m \d+s|10m) left", texts), texts

    # without polkit's grant: refused, shown, nothing changes
    desktop.atspi("action", APP, control(window, "Remove service ipp-client")["path"], "click")
    window.wait_status(r"^Not authorized: polkit refused org\.nm-zones\.configure$")
    assert nm.sh("cat /etc/nm-zones/zones.d/home.yaml").stdout == HOME_FILE
    assert nm.probe(specs(lan)) == HOME

    # granted: a service removed and a port added (typed, Return), the file keeps its comments
    grant(nm, desktop)
    desktop.atspi("action", APP, control(window, "Remove service ipp-client")["path"], "click")
    window.wait_status(r"^zone home: ipp-client revoked permanently")
    type_port(window, "8080/tcp")
    window.wait_status(r"^zone home: 8080/tcp allowed permanently")
    text = nm.sh("cat /etc/nm-zones/zones.d/home.yaml").stdout
    assert text == HOME_FILE.replace("  - ipp-client   # the printer\n", "") + "ports: [8080/tcp]\n"
    assert nm.probe(specs(lan)) == ["accepted", "accepted", "rejected"] * 2
    wait_for(lambda: "8080/tcp" in zone_rows(window), 10, what="the port's row")
    assert "ipp-client" not in zone_rows(window)

    # a port that cannot be: the zone file's own message, the file unchanged
    type_port(window, "70000/tcp")
    window.wait_status(r"^port 70000 is out of range \(1-65535\)$")
    assert nm.sh("cat /etc/nm-zones/zones.d/home.yaml").stdout == text
    # the whole page in the picture: the window made taller (no window manager: xdotool)
    shown = desktop.window("--name", "Network Zones")[0]
    desktop.run(["xdotool", "windowsize", shown, "640", "1340"])
    wait_for(lambda: drawn(desktop, shown, tmp_path), 10, what="GTK to draw the taller window")
    screenshot(desktop, tmp_path, "zone-editor.png", shown)

    # the runtime allowance revoked from the window
    desktop.atspi("action", APP, control(window, f"Revoke 9090/tcp on {lan.name}")["path"], "click")
    window.wait_status(rf"{lan.name} \(home\): 9090/tcp revoked")
    assert "9090/tcp" not in nm.nm_zones("status", lan.name).stdout
    wait_for(lambda: "9090/tcp" not in zone_rows(window), 10, what="the allowance's row to go")
    assert "Traceback" not in desktop.log("settings.log")
    with open(os.path.join(nm.tmp, "serve.log"), errors="replace") as stream:
        served = stream.read()
    assert "internal error" not in served and "refused (org.nm-zones.configure)" in served


def labels(window: Window) -> str:
    return " ".join(e.get("text", "") for e in window.tree() if e["role"] == "label")


def test_the_zone_editor_lists_refused_packets_and_allows_one(desk):
    """A zone with log-denied: the service reads its NFLOG group; the page lists the refused
    probes, and "Allow this", by keyboard, opens the port for a while (the peer's next probe
    is accepted). A zone without it says how to turn it on."""
    nm = desk
    lan = home_lan(nm)
    desktop = Desktop(nm, USER)
    desktop.start()
    desktop.program("nm_zones.desktop.settings", "settings.log")
    window = Window(desktop)
    window.wait_row("lan", "Home")
    desktop.atspi("action", APP, control(window, "Zones")["path"], "click")
    wait_for(lambda: "This zone does not log refused packets" in labels(window), 30,
             what=lambda: f"the hint on turning logging on\n{desktop.log('settings.log')}")
    assert "Set log-denied: true in /etc/nm-zones/zones.d/home.yaml" in labels(window)

    # log-denied turned on, reloaded through the service (its Reloaded signal: the window
    # reads the zone again), then the peer's probes: 8080/tcp refused in both families
    home = HOME_FILE + "log-denied: true\n"
    nm.run(["sh", "-c", "cat > /etc/nm-zones/zones.d/home.yaml"], input_text=home)
    nm.gdbus("org.fedoraproject.FirewallD1.reload")
    wait_for(lambda: "No packet refused lately" in labels(window), 30, what="the empty list")
    assert nm.probe(specs(lan)) == HOME
    refused = [f"8080/tcp from {lan.peer_ipv4}", f"8080/tcp from {lan.peer_ipv6}"]
    wait_for(lambda: all(r in zone_rows(window) for r in refused), 30,
             what=lambda: f"the refused probes listed: {sorted(zone_rows(window))}")
    assert f"· {lan.name}" in labels(window)
    reply = nm.gdbus(f"{MANAGER}.GetDeniedPackets", "home", user=USER)  # open to users
    assert reply.returncode == 0 and "'port': '8080'" in reply.stdout, reply
    assert "'8080'" not in nm.gdbus(f"{MANAGER}.GetDeniedPackets", "public").stdout

    # "Allow this" by keyboard: refused without polkit's grant, then granted
    name = "Allow 8080/tcp in zone home for 10 minutes"
    tab_to(window, name)
    desktop.keys("space")
    window.wait_status(r"^Not authorized: polkit refused org\.nm-zones\.configure$")
    grant(nm, desktop)
    tab_to(window, name)
    desktop.keys("space")
    window.wait_status(r"^Port 8080/tcp allowed in zone home for 10 minutes$")
    assert nm.probe(specs(lan)) == ["accepted"] * 6
    assert "8080/tcp" in nm.nm_zones("status", lan.name).stdout
    assert "Traceback" not in desktop.log("settings.log")


SERVER = "org.freedesktop.Notifications"


def session_bus(desktop: Desktop, method: str, name: str) -> str:
    """A call to the session bus itself, as the desktop user: gdbus's reply."""
    return desktop.run(
        [
            *("gdbus", "call", "--session", "--dest", "org.freedesktop.DBus"),
            *("--object-path", "/org/freedesktop/DBus"),
            *("--method", f"org.freedesktop.DBus.{method}", name),
        ]
    ).stdout


def start_dunst(desktop: Desktop) -> None:
    """dunst, once it owns the server's name (a Notify meanwhile would start another)."""
    desktop.dunst()
    wait_for(lambda: "true" in session_bus(desktop, "NameHasOwner", SERVER), 10, what="dunst")


def agent_session(nm) -> tuple[Desktop, str]:
    """(the desktop, its home): polkit grants the user, dunst picks what `home/want` names,
    dbus-monitor writes every Notify call to notify-calls.log, and the agent listens."""
    home = f"/run/nmz-desktop/{USER}"
    desktop = Desktop(nm, USER, dunstrc=DUNSTRC.format(home=home))
    desktop.start()
    nm.run(
        ["sh", "-c", f"cat > {home}/pick && chmod 755 {home}/pick"],
        input_text=PICK.format(home=home),
    )
    grant(nm, desktop)
    start_dunst(desktop)
    monitor = f"interface='{SERVER}',member='Notify'"
    desktop.background(desktop.as_user(["dbus-monitor", "--session", monitor]), "notify-calls.log")
    desktop.program("nm_zones.desktop.notify", "notify.log")
    wait_for(lambda: "listening" in desktop.log("notify.log"), 30, what="the agent")
    return desktop, home


def test_the_agent_asks_for_the_zone_of_a_network_without_one(desk, tmp_path):
    nm = desk
    desktop, home = agent_session(nm)
    nm.listen()

    cafe = up(nm, "Cafe Wi-Fi")
    nm.wait_zone(cafe.name, "public")
    summary = "Connected to Cafe Wi-Fi: zone public (unknown network)"
    calls = wait_for(
        lambda: summary in desktop.log("notify-calls.log") and notify_calls(desktop),
        20,
        what="the notification",
    )
    asked = calls[0]
    assert (asked["app"], asked["icon"], asked["summary"]) == ("nm-zones", "network-wired", summary)
    assert asked["body"] == "Which zone should this network have from now on?"
    assert asked["actions"] == [
        "home",
        "Home",
        "work",
        "Work",
        "public",
        "Public",
        "block",
        "Block",
    ]
    assert asked["urgency"] == 1
    wait_for(
        lambda: desktop.run(["dunstctl", "count", "displayed"]).stdout.strip() == "1",
        10,
        what="dunst to show it",
    )
    _window, x, y, width, height = desktop.window("--class", "Dunst")
    screenshot(desktop, tmp_path, "notification.png", "root", f"{width}x{height}+{x}+{y}")

    # the user picks "Home" in dunst's action menu: the connection gets it for good
    nm.sh(f"echo home > {home}/want")
    desktop.run(["dunstctl", "context"])
    wait_for(lambda: profile_zone(nm, "Cafe Wi-Fi") == "home", 20, what="the zone assigned")
    nm.wait_zone(cafe.name, "home")
    nm.wait_reachable(cafe)
    assert nm.probe(specs(cafe)) == HOME
    uuid = nm.nmcli("-g", "connection.uuid", "connection", "show", "Cafe Wi-Fi").stdout.strip()
    placed = nm.sh(f"cat {home}/.local/state/nm-zones/placed").stdout.split()
    assert placed == [uuid]
    wait_for(
        lambda: "Cafe Wi-Fi is now in zone home" in desktop.log("notify-calls.log"),
        10,
        what="the confirmation",
    )

    # changed elsewhere: a quiet notification (low urgency, no actions)
    nm.nmcli("connection", "modify", "Cafe Wi-Fi", "connection.zone", "")
    quiet = wait_for(
        lambda: next(
            (c for c in notify_calls(desktop) if c["summary"] == "Cafe Wi-Fi: zone public"), None
        ),
        20,
        what="the quiet notification",
    )
    assert quiet["body"] == "Was home; now unknown network." and quiet["actions"] == []
    assert quiet["urgency"] == 0

    # placed before: never asked again, even with no zone of its own
    nm.nmcli("connection", "down", "Cafe Wi-Fi")
    nm.wait_zone(cafe.name, None)
    nm.nmcli("connection", "up", "Cafe Wi-Fi")
    wait_for(
        lambda: "not asking about 'Cafe Wi-Fi': placed before" in desktop.log("notify.log"),
        20,
        what="the agent to pass over a placed connection",
    )
    assert desktop.log("notify-calls.log").count(summary) == 1

    # turned off in the user's settings: no question for a new network either
    nm.sh(
        f"mkdir -p {home}/.config/nm-zones && printf '[notify]\\nenabled = false\\n'"
        f" > {home}/.config/nm-zones/desktop.conf"
    )
    airport = up(nm, "Airport")
    nm.wait_zone(airport.name, "public")
    wait_for(
        lambda: "not asking about 'Airport': notifications are off" in desktop.log("notify.log"),
        20,
        what="the agent to stay quiet",
    )
    assert "Connected to Airport" not in desktop.log("notify-calls.log")
    assert "Traceback" not in desktop.log("notify.log")


# a connection name that tries markup, a bidi override and a second line
HOSTILE = "<b>Evil</b> & Co\u202eexe.txt\nline 2"
HOSTILE_SHOWN = "<b>Evil</b> & Co\\u202eexe.txt\\nline 2"  # as `nm-zones status` escapes it
# a second client on the user's session bus that emits the notification server's signal
# ActionInvoked(id, "home") for the first 20 ids, to everyone and to every connection; with
# `own`, after taking the server's name (free once the server is gone)
SPOOF = """
import sys
from gi.repository import Gio, GLib
bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
NAME, PATH = "org.freedesktop.Notifications", "/org/freedesktop/Notifications"
def call(method, args, reply):
    return bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
        method, args, GLib.VariantType(reply), Gio.DBusCallFlags.NONE, 10000, None).unpack()
if sys.argv[1] == "own":
    got = call("RequestName", GLib.Variant("(su)", (NAME, 4)), "(u)")
    assert got == (1,), f"RequestName: {got}"
me = bus.get_unique_name()
names = [n for n in call("ListNames", None, "(as)")[0] if n.startswith(":") and n != me]
for number in range(1, 21):
    args = GLib.Variant("(us)", (number, "home"))
    for target in [None, *names]:
        bus.emit_signal(target, PATH, NAME, "ActionInvoked", args)
bus.flush_sync(None)
print(me)
"""


def test_the_agent_obeys_only_the_notification_server_and_escapes_names(desk, tmp_path):
    nm = desk
    desktop, home = agent_session(nm)

    link = up(nm, HOSTILE)
    nm.wait_zone(link.name, "public")
    summary = f"Connected to {HOSTILE_SHOWN}: zone public (unknown network)"
    asked = wait_for(
        lambda: next((c for c in notify_calls(desktop) if c["summary"] == summary), None),
        20,
        what=f"the question, its name escaped: {desktop.log('notify-calls.log')[-600:]}",
    )
    assert asked["actions"][:2] == ["home", "Home"]
    for forbidden in ("\u202e", "line 2\n"):
        assert forbidden not in desktop.log("notify-calls.log")
    wait_for(
        lambda: desktop.run(["dunstctl", "count", "displayed"]).stdout.strip() == "1",
        10,
        what="dunst to show it",
    )
    # the settings window shows the name escaped the same way (its rows read markup)
    desktop.program("nm_zones.desktop.settings", "settings.log")
    row = Window(desktop).wait_row(HOSTILE_SHOWN, "Public")
    assert row["description"] == f"{HOSTILE_SHOWN} on {link.name}: zone public"

    # another client of the session bus "clicks" Home: first as itself...
    desktop.run([desktop.python, "-c", SPOOF, "as-itself"])
    # ...then as the owner of the server's name, once the server is gone
    pid = re.search(r"(\d+),\)", session_bus(desktop, "GetConnectionUnixProcessID", SERVER))
    nm.run(["kill", pid.group(1)])
    wait_for(
        lambda: "false" in session_bus(desktop, "NameHasOwner", SERVER),
        10,
        what=f"dunst to stop; the agent said: {desktop.log('notify.log')[-2000:]}"
        f"; the profile's zone: {profile_zone(nm, HOSTILE)!r} (the agent obeyed a spoof?)",
    )
    owned = desktop.run([desktop.python, "-c", SPOOF, "own"], check=False)
    assert owned.returncode == 0, (
        f"{owned.stderr[-300:]}; the profile's zone: {profile_zone(nm, HOSTILE)!r}, the agent"
        f" said: {desktop.log('notify.log')[-1000:]}"
    )
    owner = owned.stdout.strip()
    wait_for(
        lambda: f"from {owner}: it did not show" in desktop.log("notify.log"),
        20,
        what=f"the agent to ignore the new owner's actions: {desktop.log('notify.log')}",
    )
    # every spoofed signal was read by now (the bus delivers in order); none counted
    assert profile_zone(nm, HOSTILE) == "" and nm.zone_of(link.name) == "public"
    assert "is now in zone" not in desktop.log("notify-calls.log")

    # the real server's action still counts: dunst again, the network asked about again
    start_dunst(desktop)
    nm.nmcli("connection", "down", HOSTILE)
    nm.wait_zone(link.name, None)
    nm.nmcli("connection", "up", HOSTILE)
    wait_for(
        lambda: [c for c in notify_calls(desktop) if c["summary"] == summary][1:],
        20,
        what="the question again",
    )
    wait_for(
        lambda: desktop.run(["dunstctl", "count", "displayed"], check=False).stdout.strip() == "1",
        10,
        what="dunst to show it",
    )
    nm.sh(f"echo home > {home}/want")
    desktop.run(["dunstctl", "context"])
    wait_for(lambda: profile_zone(nm, HOSTILE) == "home", 20, what="the zone assigned")
    nm.wait_zone(link.name, "home")
    wait_for(
        lambda: f"{HOSTILE_SHOWN} is now in zone home" in desktop.log("notify-calls.log"),
        10,
        what="the confirmation, its name escaped",
    )
    assert "Traceback" not in desktop.log("notify.log")


def test_notification_bodies_are_escaped_for_markup_too():
    """Servers read a notification's body as markup, its summary as plain text."""
    if NEEDS_DESKTOP:
        pytest.skip("needs GTK 4, libadwaita, AT-SPI, Xvfb, dunst, xdotool (see .ci/setup)")
    script = (
        "import json, sys; from nm_zones.desktop.notify import shown;"
        " print(json.dumps(shown(sys.argv[1], sys.argv[1])))"
    )
    result = subprocess.run(
        [desktop_python(), "-c", script, HOSTILE],
        capture_output=True,
        text=True,
        env=base_env(),
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    summary, body = json.loads(result.stdout)
    assert summary == HOSTILE_SHOWN
    assert body == "&lt;b&gt;Evil&lt;/b&gt; &amp; Co\\u202eexe.txt\\nline 2"


WAITING_AFTER_DOWN = """
import json
from nm_zones.desktop.notify import Agent

UP_ON_ETH0 = [{"uuid": "u1", "zone": "public", "interface": "eth0", "identification": "pending"}]

class Service:  # GetConnections: u1 still up on eth0, then on no device
    rows = UP_ON_ETH0
    def follow(self, *args, **kwargs): pass
    def read(self, *args): return self.rows

agent = Agent(Service(), lambda on_action: None)
# up on eth0, then on eth1 (the question waiting is eth1's), then down on eth1
agent.waiting["u1"] = ({"interface": "eth1", "uuid": "u1"}, "lan", "public", "network-wired")
seen = []
for _ in range(2):  # down on eth1 while still up on eth0; then down everywhere
    agent.zone_changed({"interface": "eth1", "uuid": "u1", "zone": "", "old-zone": "public"})
    seen.append("u1" in agent.waiting)
    Service.rows = []
print(json.dumps(seen))
"""


def test_a_profile_going_down_on_another_device_keeps_its_question_waiting():
    """Pure logic in the agent: a multi-connect profile up on two devices and down on the
    one its question came from is still asked about while the service lists it up; once
    it is up nowhere, it is not."""
    if NEEDS_DESKTOP:
        pytest.skip("needs GTK 4, libadwaita, AT-SPI, Xvfb, dunst, xdotool (see .ci/setup)")
    result = subprocess.run(
        [desktop_python(), "-c", WAITING_AFTER_DOWN],
        capture_output=True,
        text=True,
        env=base_env(),
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [True, False]


def test_the_window_and_the_agent_speak_the_users_language(desk):
    nm = desk
    desktop = Desktop(nm, USER)
    desktop.start()
    desktop.dunst()
    monitor = "interface='org.freedesktop.Notifications',member='Notify'"
    desktop.background(desktop.as_user(["dbus-monitor", "--session", monitor]), "notify-calls.log")
    german = {"LANG": "de_DE.UTF-8"}
    desktop.program("nm_zones.desktop.notify", "notify.log", env=german)
    wait_for(lambda: "listening" in desktop.log("notify.log"), 30, what="the agent")

    cafe = up(nm, "Cafe")
    nm.wait_zone(cafe.name, "public")
    summary = "Verbunden mit Cafe: Zone public (unbekanntes Netzwerk)"
    calls = wait_for(
        lambda: [c for c in notify_calls(desktop) if c["summary"] == summary],
        20,
        what=f"the German notification\n{desktop.log('notify-calls.log')}",
    )
    assert calls[0]["body"] == "Welche Zone soll dieses Netzwerk ab jetzt haben?"
    assert calls[0]["actions"][:2] == ["home", "Zuhause"]

    desktop.program("nm_zones.desktop.settings", "settings.log", env=german)
    window = Window(desktop)
    wait_for(
        lambda: "Aktive Verbindungen" in json.dumps(window.tree(), ensure_ascii=False),
        30,
        what=f"the German window\n{desktop.log('settings.log')}",
    )


def test_the_agent_says_a_switch_failed_instead_of_announcing_it(desk):
    """A typo in the admin's block.yaml: the switch gets shipped block and fails, and the
    agent says so instead of "now block"."""
    nm = desk
    home = f"/run/nmz-desktop/{USER}"
    desktop = Desktop(nm, USER, dunstrc=DUNSTRC.format(home=home))
    desktop.start()
    desktop.dunst()
    monitor = "interface='org.freedesktop.Notifications',member='Notify'"
    desktop.background(desktop.as_user(["dbus-monitor", "--session", monitor]), "notify-calls.log")
    desktop.program("nm_zones.desktop.notify", "notify.log")
    wait_for(lambda: "listening" in desktop.log("notify.log"), 30, what="the agent")
    link = up(nm, "lan", "connection.zone", "trusted")
    nm.wait_zone(link.name, "trusted")
    nm.sh(
        "mkdir -p /etc/nm-zones/zones.d && echo 'targte: reject' > /etc/nm-zones/zones.d/block.yaml"
    )
    refused = nm.gdbus(
        "org.fedoraproject.FirewallD1.zone.changeZoneOfInterface", "block", link.name
    )
    assert "COMMAND_FAILED" in refused.stderr, refused
    said = wait_for(
        lambda: next(
            (c for c in notify_calls(desktop) if "could not be applied" in c["summary"]), None
        ),
        20,
        what="the failure notification",
    )
    assert said["summary"] == "lan: zone block could not be applied as configured"
    assert "cannot be loaded" in said["body"] and "using the shipped definition" in said["body"]
    assert said["icon"] == "dialog-warning"
    assert [c["summary"] for c in notify_calls(desktop)] == [said["summary"]]  # nothing else


def notify_calls(desktop: Desktop) -> list[dict]:
    """Every Notify call dunst received, in order: app, icon, summary, body, actions (keys
    and labels, alternating) and the urgency hint, as dbus-monitor printed them."""
    calls = []
    for block in desktop.log("notify-calls.log").split("method call ")[1:]:
        if "member=Notify" not in block:
            continue
        parts = block.split("array [", 2)
        head = re.findall(r'^\s+string "(.*)"$', parts[0], re.MULTILINE)
        actions = re.findall(r'^\s+string "(.*)"$', parts[1], re.MULTILINE)
        urgency = re.search(r'string "urgency"\s+variant\s+byte (\d)', parts[2])
        calls.append(
            {
                "app": head[0],
                "icon": head[1],
                "summary": head[2],
                "body": head[3],
                "actions": actions,
                "urgency": int(urgency.group(1)) if urgency else None,
            }
        )
    return calls


# -- packaging -----------------------------------------------------------------------------


def test_the_core_never_imports_gtk():
    """Servers never need GTK: importing the command, the hook's path and the service
    imports no `gi`."""
    script = (
        "import sys; import nm_zones.doors.cli, nm_zones.doors.event, nm_zones.engine,"
        " nm_zones.doors.service;"
        " print(sorted(m for m in sys.modules if m == 'gi' or m.startswith('gi.')))"
    )
    python = desktop_python() or PYTHON  # one that has gi, where a stray import would work
    result = subprocess.run([python, "-c", script], capture_output=True, text=True, env=base_env())
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr


def test_the_desktop_extra_declares_the_programs():
    import configparser

    setup = configparser.ConfigParser()
    setup.read(os.path.join(REPO, "setup.cfg"))
    assert setup["options.extras_require"]["desktop"].split() == ["PyGObject>=3.42"]
    entry_points = setup["options.entry_points"]
    assert "nm-zones-settings = nm_zones.desktop.settings:main" in entry_points["gui_scripts"]
    assert "nm-zones-notify = nm_zones.desktop.notify:main" in entry_points["console_scripts"]
    assert "nm-zones-tray = nm_zones.desktop.tray:main" in entry_points["console_scripts"]
    for program in ("nm-zones-notify", "nm-zones-tray"):
        with open(os.path.join(REPO, "nm_zones", "desktop", f"{program}.desktop")) as stream:
            autostart = stream.read()
        assert f"Exec={program}\n" in autostart and "Type=Application" in autostart


def test_the_agent_installs_its_autostart_file(tmp_path):
    if NEEDS_DESKTOP:
        pytest.skip("needs GTK 4, libadwaita, AT-SPI, Xvfb, dunst, xdotool (see .ci/setup)")
    env = base_env(XDG_CONFIG_HOME=str(tmp_path / "config"), HOME=str(tmp_path))
    result = subprocess.run(
        [desktop_python(), "-m", "nm_zones.desktop.notify", "--install-autostart"],
        capture_output=True,
        text=True,
        env=env,
    )
    target = tmp_path / "config" / "autostart" / "nm-zones-notify.desktop"
    assert result.returncode == 0 and result.stdout == f"{target}\n", result.stderr
    assert "Exec=nm-zones-notify\n" in target.read_text()


def test_nothing_outside_the_desktop_package_imports_it():
    for folder, _dirs, files in os.walk(os.path.join(REPO, "nm_zones")):
        if folder.endswith("desktop"):
            continue
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name)) as stream:
                    imports = re.findall(r"^\s*(?:from|import) (\S+)", stream.read(), re.MULTILINE)
                assert not [i for i in imports if "desktop" in i or i.split(".")[0] == "gi"], name


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
