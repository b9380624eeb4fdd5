"""A tray host's view of a StatusNotifierItem, for tests: run as the desktop user with a
Python that has PyGObject, on the user's session bus. Prints JSON.

  sni_tool.py items                    RegisteredStatusNotifierItems of the watcher
  sni_tool.py props ITEM               the item's properties (ToolTip, Status, IconName...)
  sni_tool.py layout ITEM              the whole menu: [{id, label, toggle-state, children}]
  sni_tool.py click ITEM ID            Event(ID, "clicked")
  sni_tool.py wait-update ITEM SECONDS waits for LayoutUpdated; prints its revision or null
"""

from __future__ import annotations

import json
import sys

from gi.repository import Gio, GLib

WATCHER = "org.kde.StatusNotifierWatcher"
ITEM = "org.kde.StatusNotifierItem"
MENU = "com.canonical.dbusmenu"


def call(bus, name, path, interface, method, args=None, reply=None):
    return bus.call_sync(name, path, interface, method, args,
                         GLib.VariantType(reply) if reply else None,
                         Gio.DBusCallFlags.NONE, 10_000, None).unpack()


def prop(bus, name, path, interface, key):
    return call(bus, name, path, "org.freedesktop.DBus.Properties", "Get",
                GLib.Variant("(ss)", (interface, key)), "(v)")[0]


def tree(node) -> dict:
    item_id, properties, children = node
    return {"id": item_id, **properties, "children": [tree(child) for child in children]}


def main() -> int:
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    command, *args = sys.argv[1:]
    if command == "items":
        print(json.dumps(prop(bus, WATCHER, "/StatusNotifierWatcher", WATCHER,
                              "RegisteredStatusNotifierItems")))
    elif command == "props":
        keys = ("Category", "Id", "Title", "Status", "IconName", "ToolTip", "Menu")
        print(json.dumps({key: prop(bus, args[0], "/StatusNotifierItem", ITEM, key)
                          for key in keys}))
    elif command in ("layout", "click"):
        menu = prop(bus, args[0], "/StatusNotifierItem", ITEM, "Menu")
        if command == "layout":
            revision, root = call(bus, args[0], menu, MENU, "GetLayout",
                                  GLib.Variant("(iias)", (0, -1, [])), "(u(ia{sv}av))")
            print(json.dumps({"revision": revision, "root": tree(root)}))
        else:
            call(bus, args[0], menu, MENU, "Event",
                 GLib.Variant("(isvu)", (int(args[1]), "clicked", GLib.Variant("s", ""), 0)))
            print("null")
    elif command == "wait-update":
        menu = prop(bus, args[0], "/StatusNotifierItem", ITEM, "Menu")
        loop, seen = GLib.MainLoop(), []

        def updated(*signal):
            seen.append(signal[-1].unpack()[0])
            loop.quit()

        bus.signal_subscribe(args[0], MENU, "LayoutUpdated", menu, None,
                             Gio.DBusSignalFlags.NONE, updated)
        print("waiting", flush=True)
        GLib.timeout_add(int(float(args[1]) * 1000), loop.quit)
        loop.run()
        print(json.dumps(seen[0] if seen else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
