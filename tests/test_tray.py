"""nm-zones-tray, for real: a StatusNotifierItem on a desktop user's session bus, hosted by
the real `status-notifier-watcher` (no panel, no X needed), against the real `nm-zones
serve`, polkitd and NetworkManager of the namespace sandbox. The menu is read and clicked as
a panel does (GetLayout, Event), and the kernel's rules are judged by probes from the peer."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from nm_zones.desktop import traymenu as tray
from tests.harness.desktop import Desktop, desktop_python
from tests.harness.lab import HARNESS, wait_for
from tests.test_desktop import GRANT, USER, Window, control, grant, screenshot, up
from tests.test_nm import HOME, PUBLIC, specs
from tests.test_service import nm as served_sandbox  # noqa: F401 - a fixture, shared

NEEDS_TRAY = desktop_python() is None or not shutil.which("status-notifier-watcher")
# a real panel for the pictures: Xfce's, with only its tray (it hosts StatusNotifierItems)
PANEL_CONFIG = """<?xml version="1.0" encoding="UTF-8"?>
<channel name="xfce4-panel" version="1.0">
  <property name="configver" type="int" value="2"/>
  <property name="panels" type="array">
    <value type="int" value="1"/>
    <property name="panel-1" type="empty">
      <property name="position" type="string" value="p=6;x=0;y=0"/>
      <property name="length" type="uint" value="100"/>
      <property name="position-locked" type="bool" value="true"/>
      <property name="size" type="uint" value="32"/>
      <property name="plugin-ids" type="array">
        <value type="int" value="1"/>
        <value type="int" value="2"/>
      </property>
    </property>
  </property>
  <property name="plugins" type="empty">
    <property name="plugin-1" type="string" value="separator">
      <property name="expand" type="bool" value="true"/>
      <property name="style" type="uint" value="0"/>
    </property>
    <property name="plugin-2" type="string" value="systray">
      <property name="square-icons" type="bool" value="true"/>
    </property>
  </property>
</channel>
"""


@pytest.fixture
def session(served_sandbox):  # noqa: F811 - the fixture imported above
    """The service's sandbox, serving, with a desktop user's session (Xvfb, session bus)."""
    if NEEDS_TRAY:
        pytest.skip("needs PyGObject and status-notifier-watcher (see .ci/setup)")
    served_sandbox.serve()
    served_sandbox.add_user(USER, "netdev")
    desktop = Desktop(served_sandbox, USER)
    desktop.start()
    return desktop


@pytest.fixture
def host(session):
    """The session with the headless tray host, status-notifier-watcher."""
    session.background(session.as_user(["status-notifier-watcher"]), "watcher.log")
    wait_for(lambda: sni(session, "items", check=False) is not None, 20, what="the watcher")
    return session


def sni(desktop: Desktop, *args: str, check: bool = True):
    result = desktop.run([desktop.python, os.path.join(HARNESS, "sni_tool.py"), *args],
                         check=check)
    if result.returncode != 0:
        return None
    return json.loads(result.stdout.splitlines()[-1])


def start_tray(desktop: Desktop, env: dict[str, str] | None = None) -> str:
    desktop.program("nm_zones.desktop.tray", "tray.log", env=env)
    items = wait_for(lambda: sni(desktop, "items", check=False), 20,
                     what=f"the tray to register\n{desktop.log('tray.log')}")
    return items[0].split("/", 1)[0]  # Xfce's watcher lists "NAME/PATH"


def connection_menu(desktop: Desktop, item: str, name: str) -> dict | None:
    layout = sni(desktop, "layout", item)
    return next((entry for entry in layout["root"]["children"]
                 if entry.get("label", "").startswith(f"{name}: ")), None)


def zone_item(menu: dict, zone: str) -> dict:
    label = tray.zone_label(zone)
    return next(entry for entry in menu["children"] if entry.get("label") == label)


def radio_items(menu: dict) -> dict[str, dict]:
    """A connection's zones, by their label."""
    return {entry["label"]: entry for entry in menu["children"]
            if entry.get("toggle-type") == "radio"}


def lan_in_the_tray(host):
    """A connection `lan` up in zone public (no zone of its own), listeners behind it, and
    the tray showing it: (its link, the tray's bus name, lan's submenu)."""
    nm = host.nm
    link = up(nm, "lan")
    nm.listen()
    nm.wait_zone(link.name, "public")
    nm.wait_reachable(link)
    item = start_tray(host)
    menu = wait_for(lambda: connection_menu(host, item, "lan"), 10, what="lan in the menu")
    return link, item, menu


def test_the_menu_lists_connections_with_zones_and_a_click_assigns(host):
    nm = host.nm
    grant(nm, host)
    link, item, menu = lan_in_the_tray(host)
    radios = radio_items(menu)
    assert {"Home", "Public", "Block", "Trusted"} <= set(radios)
    checked = [label for label, entry in radios.items() if entry.get("toggle-state") == 1]
    assert checked == ["Public"]
    props = sni(host, "props", item)
    assert "lan: public" in props["ToolTip"][3]
    assert props["Status"] == "NeedsAttention"  # lan has no zone of its own

    sni(host, "click", item, str(zone_item(menu, "home")["id"]))
    nm.wait_zone(link.name, "home", timeout=5)
    assert nm.probe(specs(link)) == HOME
    wait_for(lambda: zone_item(connection_menu(host, item, "lan"), "home").get("toggle-state")
             == 1, 5, what="Home checked in the menu")
    assert "lan: home" in sni(host, "props", item)["ToolTip"][3]


def test_without_polkit_a_click_changes_nothing_and_says_why(host):
    nm = host.nm
    link, item, menu = lan_in_the_tray(host)

    sni(host, "click", item, str(zone_item(menu, "trusted")["id"]))
    wait_for(lambda: "Not authorized" in sni(host, "props", item)["ToolTip"][3], 10,
             what=f"the refusal in the tooltip\n{host.log('tray.log')}")
    assert nm.zone_of(link.name) == "public"
    assert nm.probe(specs(link)) == PUBLIC
    assert sni(host, "props", item)["Status"] == "NeedsAttention"


ALLOW = "Allow a port for 10 minutes…"


def test_allow_a_port_opens_the_settings_at_the_zones_form_and_the_kernel_opens_it(host):
    nm = host.nm
    grant(nm, host)
    link, item, menu = lan_in_the_tray(host)
    allow = next((e for e in menu["children"] if e.get("label") == ALLOW), None)
    assert allow is not None, [e.get("label") for e in menu["children"]]
    assert allow["accessible-desc"] == "Allow a port for 10 minutes on lan (zone public)"

    sni(host, "click", item, str(allow["id"]))
    window = Window(host)
    field = "Port to allow in zone public"
    wait_for(lambda: any(e["role"] == "text" and e["name"].startswith(field)
                         for e in window.tree()), 30,
             what=f"the settings with public's allowance form\n{host.log('tray.log')}")
    tree = window.tree()
    assert any(e["role"] == "page tab" and e["name"] == "Zones" and "selected" in e["states"]
               for e in tree), "not on the zone editor's page"
    zone_choice = next(e for e in tree if e["role"] == "combo box" and e["name"] == "Zone to edit")
    shown = [e.get("text") for e in tree if e["role"] == "label"
             and e["path"].startswith(zone_choice["path"] + ".")]
    assert "Public" in shown, shown
    duration = control(window, "For how long")
    assert any(e.get("text") == "10 minutes" for e in tree
               if e["path"].startswith(duration["path"] + ".")), "not preset to 10 minutes"

    # the focus is in the port field: typed at once, Return allows it
    host.point_at(host.window("--name", "Network Zones")[0])
    host.run(["xdotool", "type", "--delay", "60", "8080"])
    host.keys("Return")
    window.wait_status(r"^Port 8080/tcp allowed in zone public for 10 minutes$")
    assert nm.probe(specs(link)) == ["accepted", "accepted", "rejected"] * 2  # IPv4, IPv6

    def time_left() -> str:
        texts = " ".join(e.get("text", "") for e in window.tree() if e["role"] == "label")
        found = re.search(r"every interface of the zone · (9m \d+s|10m) left", texts)
        return found.group(0) if found else ""

    wait_for(time_left, 10, what="the allowance with its time left")
    assert "8080/tcp" in nm.nm_zones("status", link.name).stdout
    assert "Traceback" not in host.log("tray.log")


PANIC_GRANT = """polkit.addRule(function(action, subject) {
    if (action.id == "org.nm-zones.panic" && subject.user == "USER")
        return polkit.Result.YES;
});
""".replace("USER", USER)


def test_the_panic_item_blocks_everything_and_unchecking_restores_the_zone(host):
    nm = host.nm
    link, item, _menu = lan_in_the_tray(host)
    nm.sh("mkdir -p /etc/polkit-1/rules.d")
    nm.run(["sh", "-c", "cat > /etc/polkit-1/rules.d/50-panic.rules"], input_text=PANIC_GRANT)
    check = "pkcheck --action-id org.nm-zones.panic --process $$"
    wait_for(lambda: host.run(["sh", "-c", check], check=False).returncode == 0, 20,
             what="polkit to grant panic mode")

    def panic_item() -> dict:
        entries = sni(host, "layout", item)["root"]["children"]
        return next(e for e in entries if e.get("label") == "Block all network traffic")

    assert panic_item().get("toggle-state", 0) == 0
    sni(host, "click", item, str(panic_item()["id"]))
    wait_for(lambda: panic_item().get("toggle-state") == 1, 10, what="the item checked")
    # the service raises its flag before its commits: the kernel follows a moment later
    wait_for(lambda: nm.probe(specs(link)) == ["dropped"] * 6, 10, what="every probe dropped")
    props = sni(host, "props", item)
    assert props["Status"] == "NeedsAttention" and "panic mode" in props["ToolTip"][3]

    sni(host, "click", item, str(panic_item()["id"]))
    wait_for(lambda: panic_item().get("toggle-state", 0) == 0, 10, what="the item unchecked")
    wait_for(lambda: nm.probe(specs(link)) == PUBLIC, 10, what="the zone's answers again")


def test_a_connection_that_comes_up_appears_in_the_menu(host):
    nm = host.nm
    first = up(nm, "lan")
    nm.wait_zone(first.name, "public")
    item = start_tray(host)
    wait_for(lambda: connection_menu(host, item, "lan"), 10, what="lan in the menu")

    waiting = subprocess.Popen(
        host.as_user([host.python, os.path.join(HARNESS, "sni_tool.py"), "wait-update", item,
                      "10"]),
        stdout=subprocess.PIPE, text=True,
    )
    assert waiting.stdout.readline().strip() == "waiting"
    second = up(nm, "office", "connection.zone", "work")
    nm.wait_zone(second.name, "work")
    revision = json.loads(waiting.stdout.readline())
    waiting.wait()
    assert revision is not None, "no LayoutUpdated after a connection came up"
    menu = connection_menu(host, item, "office")
    assert menu is not None and zone_item(menu, "work").get("toggle-state") == 1
    assert "office: work" in sni(host, "props", item)["ToolTip"][3]


def test_the_menu_speaks_the_users_language(host):
    nm = host.nm
    link = up(nm, "lan")
    nm.wait_zone(link.name, "public")
    item = start_tray(host, env={"LANG": "de_DE.UTF-8"})
    menu = wait_for(lambda: connection_menu(host, item, "lan"), 10, what="lan in the menu")
    assert menu["label"] == "lan: Öffentlich"
    labels = [entry.get("label") for entry in sni(host, "layout", item)["root"]["children"]]
    assert {"Einstellungen …", "Benachrichtigungen"} <= set(labels), labels
    assert {"Zuhause", "Sperren"} <= set(radio_items(menu))
    assert "Einen Port für 10 Minuten öffnen …" in [e.get("label") for e in menu["children"]]
    assert sni(host, "props", item)["ToolTip"][2] == "Netzwerkzonen"


@pytest.mark.skipif(not shutil.which("xfce4-panel"), reason="needs xfce4-panel (see .ci/setup)")
def test_a_real_panel_shows_the_item_and_its_menu(session, tmp_path):
    """Xfce's panel (its own watcher) hosts the item under Xvfb: right-click opens the menu,
    a connection's submenu lists the zones; the pictures are the handbook's
    (NM_ZONES_SCREENSHOTS=docs)."""
    host = session
    nm = host.nm
    home = up(nm, "Home LAN", "connection.zone", "home")
    hotel = up(nm, "Hotel Wi-Fi")
    nm.wait_zone(home.name, "home")
    nm.wait_zone(hotel.name, "public")
    xml = f"{host.home}/.config/xfce4/xfconf/xfce-perchannel-xml/xfce4-panel.xml"
    nm.sh(f"mkdir -p $(dirname {xml})")
    nm.run(["sh", "-c", f"cat > {xml}"], input_text=PANEL_CONFIG)
    nm.sh(f"chown -R {USER} {host.home}/.config")
    host.background(host.as_user(["xfce4-panel"]), "panel.log")
    panel = host.window("--class", "xfce4-panel")
    item = start_tray(host)  # registered with the panel's own watcher
    wait_for(lambda: connection_menu(host, item, "Hotel Wi-Fi"), 10, what="the menu")
    _id, x, y, width, height = panel
    icon_x, icon_y = x + width - 16, y + height // 2

    def drawn(name: str, geometry: str) -> bool:
        """That part of the screen shows more than one background colour."""
        shot = str(tmp_path / f"{name}.png")
        host.screenshot(shot, "root", geometry)
        colours = subprocess.run(["identify", "-format", "%k", shot], capture_output=True,
                                 text=True, check=True).stdout
        return int(colours) > 8

    wait_for(lambda: drawn("icon", f"24x24+{icon_x - 12}+{icon_y - 12}"), 20, interval=0.5,
             what="the item's icon in the panel")

    def menu_shown() -> bool:
        host.run(["xdotool", "mousemove", str(icon_x), str(icon_y), "click", "3"])
        try:
            wait_for(lambda: drawn("menu", f"120x60+{icon_x - 120}+{y + height + 2}"), 3,
                     interval=0.3)
        except AssertionError:
            return False
        return True

    wait_for(menu_shown, 20, what=f"the panel's menu\n{host.log('panel.log')}")
    right = x + width - 460
    screenshot(host, tmp_path, "tray-menu.png", "root", f"460x150+{right}+{y}")
    host.run(["xdotool", "mousemove", str(icon_x - 110), str(y + height + 40)])  # Hotel Wi-Fi
    # the submenu opens to the left of the menu, as wide as its longest label ("Allow a port
    # for 10 minutes…"): a strip across its radio buttons and their labels
    wait_for(lambda: drawn("submenu", f"240x60+{icon_x - 440}+{y + height + 60}"), 10,
             interval=0.3, what="the submenu")
    screenshot(host, tmp_path, "tray-zones.png", "root", f"480x400+{x + width - 480}+{y}")


# -- the menu as data, without a bus --------------------------------------------------------


def situation(**changes) -> tray.Situation:
    values = {
        "connections": (("Home LAN", "u1", "home", "map: uuid"),
                        ("Hotel Wi-Fi", "u2", "public", "default for wireless")),
        "zones": ("block", "home", "public", "trusted"),
        "panic": False,
        "notifications": True,
    }
    values.update(changes)
    return tray.Situation(**values)


def test_zones_are_listed_laxest_first():
    assert tray.by_strictness(["public", "block", "mine", "trusted", "home"]) == (
        "trusted", "home", "public", "mine", "block"
    )


def test_the_strictest_zone_decides_the_icon():
    assert tray.strictest(["home", "public", "trusted"]) == "public"
    assert tray.strictest(["home", "my-own-zone"]) == "my-own-zone"  # unknown ranks as public
    assert tray.icon_name(situation()) == "security-high"
    only_home = situation(connections=(("Home LAN", "u1", "home", "map: uuid"),))
    assert tray.icon_name(only_home) == "security-medium"
    assert tray.status(only_home) == "Active"
    assert tray.status(situation()) == "NeedsAttention"  # the hotel has no zone of its own
    assert tray.icon_name(situation(panic=True)) == "network-error"


def test_menu_ids_stay_stable_and_names_are_escaped():
    ids = tray.Ids()
    menu, actions = tray.build_menu(situation(), ids)
    again, _ = tray.build_menu(situation(), ids)
    assert again == menu
    hotel = menu.children[1]
    choices = {dict(item.properties).get("label"): item for item in hotel.children}
    assert actions[choices["Home"].id] == ("assign", "u2", "home")
    assert dict(choices["Public"].properties)["toggle-state"] == 1
    panic = next(i for i in menu.children if dict(i.properties).get("label", "").startswith(
        "Block all"))
    assert actions[panic.id] == ("panic", True)
    allow = next(i for i in hotel.children if dict(i.properties).get("label", "").startswith(
        "Allow a port"))
    assert actions[allow.id] == ("allow", "public")  # the zone of that connection
    assert dict(allow.properties)["accessible-desc"] == (
        "Allow a port for 10 minutes on Hotel Wi-Fi (zone public)")
    home_lan = menu.children[0]
    assert actions[home_lan.children[-1].id] == ("allow", "home")
    without_panic, _ = tray.build_menu(situation(panic=None), ids)
    assert all("Block all" not in dict(i.properties).get("label", "")
               for i in without_panic.children)

    hostile = situation(connections=(("<b>x</b>\n\u202eevil", "u3", "home", ""),))
    _title, text = tray.tooltip(hostile)
    assert "\n" not in text and "\u202e" not in text and "<b>" not in text
    assert "&lt;b&gt;" in text


GRANT  # noqa: B018 - imported for readers: the rule `grant` installs
