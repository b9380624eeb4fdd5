"""nm-zones-tray: the zone of the networks you are on, in the panel.

A StatusNotifierItem (the tray protocol of KDE Plasma, Xfce, LXQt, Budgie, waybar, and GNOME
with the AppIndicator extension) with a com.canonical.dbusmenu menu, exported on the session
bus through GDBus; no toolkit is loaded. The icon and tooltip show the strictest zone of the
active connections; the status asks for attention while a network has no zone of its own.
The menu lists each connection with its zones as radio items (choosing one assigns it
through `nm-zones serve`, under polkit) and "Allow a port for 10 minutes…" (the settings
window at that zone's allowance form), "Block all network traffic" (panic mode), the agent's
notifications on or off, and the settings window. It follows the service's signals and
NetworkManager's, and tells the panel with LayoutUpdated.

The menu is built as plain data (`build_menu`) from what the service reports, so the
shape is tested without a bus; `Tray` only exports it and carries out the clicks.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable

from gi.repository import Gio, GLib

from ..doors.busapi import BUS_NAME, MAIN_INTERFACE, OBJECT_PATH
from ..text import printable
from .common import (
    Service,
    ServiceError,
    notifications_enabled,
    run_until_signalled,
    service_error,
    set_notifications_enabled,
)
from .traymenu import (
    Ids,
    Item,
    Situation,
    build_menu,
    by_strictness,
    icon_name,
    status,
    tooltip,
)

WATCHER_NAME = "org.kde.StatusNotifierWatcher"
WATCHER_PATH = "/StatusNotifierWatcher"
ITEM_INTERFACE = "org.kde.StatusNotifierItem"
ITEM_PATH = "/StatusNotifierItem"
MENU_INTERFACE = "com.canonical.dbusmenu"
MENU_PATH = "/MenuBar"
REFRESH_DELAY_MS = 150  # NetworkManager's signals come in bursts: one refresh per burst

INTROSPECTION = f"""<node>
  <interface name="{ITEM_INTERFACE}">
    <method name="Activate"><arg type="i" direction="in"/><arg type="i" direction="in"/></method>
    <method name="SecondaryActivate">
      <arg type="i" direction="in"/><arg type="i" direction="in"/>
    </method>
    <method name="ContextMenu"><arg type="i" direction="in"/><arg type="i" direction="in"/></method>
    <method name="Scroll"><arg type="i" direction="in"/><arg type="s" direction="in"/></method>
    <property name="Category" type="s" access="read"/>
    <property name="Id" type="s" access="read"/>
    <property name="Title" type="s" access="read"/>
    <property name="Status" type="s" access="read"/>
    <property name="IconName" type="s" access="read"/>
    <property name="ToolTip" type="(sa(iiay)ss)" access="read"/>
    <property name="Menu" type="o" access="read"/>
    <property name="ItemIsMenu" type="b" access="read"/>
    <signal name="NewTitle"/>
    <signal name="NewIcon"/>
    <signal name="NewToolTip"/>
    <signal name="NewStatus"><arg type="s"/></signal>
  </interface>
  <interface name="{MENU_INTERFACE}">
    <method name="GetLayout">
      <arg type="i" name="parentId" direction="in"/>
      <arg type="i" name="recursionDepth" direction="in"/>
      <arg type="as" name="propertyNames" direction="in"/>
      <arg type="u" name="revision" direction="out"/>
      <arg type="(ia{{sv}}av)" name="layout" direction="out"/>
    </method>
    <method name="GetGroupProperties">
      <arg type="ai" name="ids" direction="in"/>
      <arg type="as" name="propertyNames" direction="in"/>
      <arg type="a(ia{{sv}})" name="properties" direction="out"/>
    </method>
    <method name="GetProperty">
      <arg type="i" name="id" direction="in"/>
      <arg type="s" name="name" direction="in"/>
      <arg type="v" name="value" direction="out"/>
    </method>
    <method name="Event">
      <arg type="i" name="id" direction="in"/>
      <arg type="s" name="eventId" direction="in"/>
      <arg type="v" name="data" direction="in"/>
      <arg type="u" name="timestamp" direction="in"/>
    </method>
    <method name="EventGroup">
      <arg type="a(isvu)" name="events" direction="in"/>
      <arg type="ai" name="idErrors" direction="out"/>
    </method>
    <method name="AboutToShow">
      <arg type="i" name="id" direction="in"/>
      <arg type="b" name="needUpdate" direction="out"/>
    </method>
    <method name="AboutToShowGroup">
      <arg type="ai" name="ids" direction="in"/>
      <arg type="ai" name="updatesNeeded" direction="out"/>
      <arg type="ai" name="idErrors" direction="out"/>
    </method>
    <property name="Version" type="u" access="read"/>
    <property name="TextDirection" type="s" access="read"/>
    <property name="Status" type="s" access="read"/>
    <property name="IconThemePath" type="as" access="read"/>
    <signal name="LayoutUpdated"><arg type="u"/><arg type="i"/></signal>
    <signal name="ItemsPropertiesUpdated">
      <arg type="a(ia{{sv}})"/><arg type="a(ias)"/>
    </signal>
  </interface>
</node>"""


def _variant(value) -> GLib.Variant:
    if isinstance(value, bool):
        return GLib.Variant("b", value)
    if isinstance(value, int):
        return GLib.Variant("i", value)
    return GLib.Variant("s", str(value))


def layout_variant(item: Item, depth: int, names: list[str]) -> GLib.Variant:
    """dbusmenu's (ia{sv}av) for `item`, children down to `depth` (-1: all)."""
    properties = {
        key: _variant(value) for key, value in item.properties if not names or key in names
    }
    children = []
    if depth != 0:
        children = [layout_variant(child, depth - 1, names) for child in item.children]
    return GLib.Variant("(ia{sv}av)", (item.id, properties, children))


# -- the item on the session bus ---------------------------------------------------------------


class Tray:
    def __init__(self, service: Service, session: Gio.DBusConnection,
                 launch: Callable[[list[str]], None] | None = None):
        self.service, self.session = service, session
        self.launch = launch or (lambda argv: subprocess.Popen(argv, start_new_session=True))
        self.ids = Ids()
        self.revision = 1
        self.problem = ""
        self.situation = self.read()
        self.menu, self.actions = build_menu(self.situation, self.ids)
        self._refresh_pending = 0
        info = Gio.DBusNodeInfo.new_for_xml(INTROSPECTION)
        for path, interface in ((ITEM_PATH, ITEM_INTERFACE), (MENU_PATH, MENU_INTERFACE)):
            session.register_object(
                path, info.lookup_interface(interface), self.on_call, self.on_property, None
            )
        self.bus_name = f"org.kde.StatusNotifierItem-{os.getpid()}-1"
        Gio.bus_own_name_on_connection(session, self.bus_name, Gio.BusNameOwnerFlags.NONE,
                                       None, None)
        Gio.bus_watch_name_on_connection(session, WATCHER_NAME, Gio.BusNameWatcherFlags.NONE,
                                         self.register, None)
        service.follow(self.on_signal, network_manager=True)

    # -- what to show --------------------------------------------------------------------

    def read(self) -> Situation:
        try:
            rows = self.service.read("GetConnections", "aa{ss}")
            zones = by_strictness(self.service.read("GetZoneDescriptions", "a{ss}"))
        except ServiceError as error:
            return Situation((), (), None, notifications_enabled(), str(error))
        connections = tuple(
            (row.get("connection") or row.get("interface", ""), row.get("uuid", ""),
             row.get("zone", ""), row.get("reason", ""))
            for row in rows
            if row.get("uuid") and row.get("status", "applied") == "applied"
        )
        return Situation(connections, zones, self.panic_mode(), notifications_enabled(),
                         self.problem)

    def panic_mode(self) -> bool | None:
        try:
            reply = self.service.bus.call_sync(
                BUS_NAME, OBJECT_PATH, MAIN_INTERFACE, "queryPanicMode", None,
                GLib.VariantType("(b)"), Gio.DBusCallFlags.NONE, 5000, None,
            )
        except GLib.Error:
            return None  # no service, or one without panic mode
        return bool(reply.unpack()[0])

    def refresh(self) -> bool:
        """Read again; tell the panel what changed."""
        self._refresh_pending = 0
        before = self.situation
        self.situation = self.read()
        menu, self.actions = build_menu(self.situation, self.ids)
        if menu != self.menu:
            self.menu = menu
            self.revision += 1
            self.emit(MENU_PATH, MENU_INTERFACE, "LayoutUpdated",
                      GLib.Variant("(ui)", (self.revision, 0)))
        if icon_name(before) != icon_name(self.situation):
            self.emit(ITEM_PATH, ITEM_INTERFACE, "NewIcon")
        if tooltip(before) != tooltip(self.situation):
            self.emit(ITEM_PATH, ITEM_INTERFACE, "NewToolTip")
        if status(before) != status(self.situation):
            self.emit(ITEM_PATH, ITEM_INTERFACE, "NewStatus",
                      GLib.Variant("(s)", (status(self.situation),)))
        return False

    def soon(self) -> None:
        if not self._refresh_pending:
            self._refresh_pending = GLib.timeout_add(REFRESH_DELAY_MS, self.refresh)

    def emit(self, path: str, interface: str, name: str, args: GLib.Variant | None = None):
        self.session.emit_signal(None, path, interface, name, args)

    def on_signal(self, interface: str, member: str, args: tuple) -> None:
        self.soon()

    def register(self, connection, name, owner) -> None:
        """Whenever a watcher appears (a panel started after us, or restarted)."""
        connection.call(
            WATCHER_NAME, WATCHER_PATH, WATCHER_NAME, "RegisterStatusNotifierItem",
            GLib.Variant("(s)", (self.bus_name,)), None, Gio.DBusCallFlags.NONE, 5000, None,
            None,
        )

    # -- the bus side ----------------------------------------------------------------------

    def on_property(self, connection, sender, path, interface, name):
        if interface == MENU_INTERFACE:
            return {
                "Version": GLib.Variant("u", 3),
                "TextDirection": GLib.Variant("s", "ltr"),
                "Status": GLib.Variant("s", "normal"),
                "IconThemePath": GLib.Variant("as", []),
            }.get(name)
        title, text = tooltip(self.situation)
        return {
            "Category": GLib.Variant("s", "SystemServices"),
            "Id": GLib.Variant("s", "nm-zones"),
            "Title": GLib.Variant("s", title),
            "Status": GLib.Variant("s", status(self.situation)),
            "IconName": GLib.Variant("s", icon_name(self.situation)),
            "ToolTip": GLib.Variant("(sa(iiay)ss)", (icon_name(self.situation), [], title, text)),
            "Menu": GLib.Variant("o", MENU_PATH),
            "ItemIsMenu": GLib.Variant("b", False),
        }.get(name)

    def on_call(self, connection, sender, path, interface, method, params, invocation):
        args = params.unpack()
        if method == "GetLayout":
            parent, depth, names = args
            item = self.menu.find(parent)
            if item is None:
                invocation.return_dbus_error("org.freedesktop.DBus.Error.InvalidArgs",
                                             f"no menu item {parent}")
                return
            layout = layout_variant(item, depth, list(names))
            invocation.return_value(GLib.Variant.new_tuple(GLib.Variant("u", self.revision),
                                                           layout))
        elif method == "GetGroupProperties":
            ids, names = args
            rows = []
            for item_id in ids or self.all_ids():
                item = self.menu.find(item_id)
                if item is not None:
                    rows.append((item.id, {k: _variant(v) for k, v in item.properties
                                           if not names or k in names}))
            invocation.return_value(GLib.Variant("(a(ia{sv}))", (rows,)))
        elif method == "GetProperty":
            item = self.menu.find(args[0])
            value = dict(item.properties).get(args[1]) if item else None
            if value is None:
                invocation.return_dbus_error("org.freedesktop.DBus.Error.InvalidArgs",
                                             f"no property {args[1]} on item {args[0]}")
                return
            invocation.return_value(GLib.Variant("(v)", (_variant(value),)))
        elif method == "Event":
            self.clicked(args[0], args[1])
            invocation.return_value(None)
        elif method == "EventGroup":
            unknown = [item_id for item_id, event, _data, _time in args[0]
                       if not self.clicked(item_id, event)]
            invocation.return_value(GLib.Variant("(ai)", (unknown,)))
        elif method == "AboutToShow":
            invocation.return_value(GLib.Variant("(b)", (False,)))
        elif method == "AboutToShowGroup":
            invocation.return_value(GLib.Variant("(aiai)", ([], [])))
        elif method in ("Activate", "SecondaryActivate"):
            self.launch(settings_command())
            invocation.return_value(None)
        else:  # ContextMenu, Scroll: the host shows the menu itself
            invocation.return_value(None)

    def all_ids(self) -> list[int]:
        found, stack = [], [self.menu]
        while stack:
            item = stack.pop()
            found.append(item.id)
            stack.extend(item.children)
        return found

    # -- clicks ----------------------------------------------------------------------------

    def clicked(self, item_id: int, event: str) -> bool:
        """Carry out a click; False for an id the menu does not have."""
        if item_id not in self.actions and self.menu.find(item_id) is None:
            return False
        if event != "clicked" or item_id not in self.actions:
            return True
        action = self.actions[item_id]
        if action[0] == "assign":
            self.service.assign(action[1], action[2], self.changed)
        elif action[0] == "panic":
            self.set_panic(action[1])
        elif action[0] == "notifications":
            set_notifications_enabled(action[1])
            self.refresh()
        elif action[0] == "allow":  # the settings window, at the zone's allowance form
            self.launch(settings_command("--allow-port", action[1]))
        elif action[0] == "settings":
            self.launch(settings_command())
        return True

    def set_panic(self, on: bool) -> None:
        def finished(bus, result):
            try:
                bus.call_finish(result)
            except GLib.Error as error:
                self.changed(None, service_error(error))
                return
            self.changed([], None)

        self.service.bus.call(
            BUS_NAME, OBJECT_PATH, MAIN_INTERFACE,
            "enablePanicMode" if on else "disablePanicMode", None, None,
            Gio.DBusCallFlags.ALLOW_INTERACTIVE_AUTHORIZATION, 130_000, None, finished,
        )

    def changed(self, lines: list[str] | None, error: ServiceError | None) -> None:
        """After a change through the service: a refusal shows in the tooltip (and the
        status asks for attention) until the next change succeeds."""
        self.problem = printable(str(error)) if error else ""
        if error:
            print(f"nm-zones-tray: {self.problem}", file=sys.stderr, flush=True)
        self.refresh()


def settings_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "nm_zones.desktop.settings", *args]


def build_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="nm-zones-tray",
        description="Show the zone of the networks you are on in the panel's tray "
        "(StatusNotifierItem), with a menu to change it, block all traffic, or open the "
        "settings. Runs in the user's session; needs `nm-zones serve` on the system bus and "
        "a panel that hosts StatusNotifierItems.",
        epilog="Example: nm-zones-tray &   # or let the XDG autostart file start it",
    )


def main(argv: list[str] | None = None) -> int:
    build_parser().parse_args(argv)
    try:
        session = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        Tray(Service(), session)
    except GLib.Error as error:
        print(f"nm-zones-tray: cannot reach a bus: {error.message}", file=sys.stderr)
        return 1
    run_until_signalled()
    return 0


if __name__ == "__main__":
    sys.exit(main())
