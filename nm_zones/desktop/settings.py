"""`nm-zones-settings`: the zone of every active connection, the defaults for wired, wireless
and unknown networks, the known networks (networks_page.py), the answers about refused
programs (programs_page.py), and zone support on or off, in
a GTK 4 window. Every change goes through `nm-zones serve` (polkit decides); the window
follows the service and NetworkManager live. `--allow-port ZONE` (the tray's "Allow a port
for 10 minutes…") opens it at that zone's allowance form, in the window already open if
there is one."""

from __future__ import annotations

import argparse
import sys

import gi

gi.require_version("Gtk", "4.0")
gi.require_version("Adw", "1")

from gi.repository import Adw, Gdk, Gio, GLib, Gtk  # noqa: E402

from ..text import printable  # noqa: E402
from .common import (  # noqa: E402
    Service,
    ServiceError,
    _,
    notifications_enabled,
    reason_text,
    set_notifications_enabled,
    zone_label,
)
from .networks_page import KnownNetworks  # noqa: E402
from .programs_page import ProgramAnswers  # noqa: E402
from .zone_editor import ZoneEditor  # noqa: E402

APP_ID = "org.nm_zones.Settings"
REFRESH_DELAY_MS = 150  # signals come in bursts: one refresh after the burst


def N_(text: str) -> str:
    """Marks a string for translation where it is defined; _() translates it where used."""
    return text


# the defaults' rows: (map key, title); wired and wireless may follow the unknown networks'
DEFAULTS = (
    ("wired-zone", N_("Wired networks")),
    ("wireless-zone", N_("Wireless networks")),
    ("default-zone", N_("Unknown networks")),
)


class ZoneChoice:
    """A drop-down of zones whose selection is set by the program without it counting as
    the user's choice."""

    def __init__(self, label: str, on_chosen, follow_default: bool = False):
        self.zones: list[str] = []
        self.follow_default = follow_default
        self.model = Gtk.StringList()
        self.widget = Gtk.DropDown(model=self.model, valign=Gtk.Align.CENTER)
        self.widget.update_property([Gtk.AccessibleProperty.DESCRIPTION], [label])
        self.on_chosen = on_chosen
        self.quiet = False
        self.widget.connect("notify::selected", self._selected)

    def set(self, zones: list[str], current: str) -> None:
        self.quiet = True
        try:
            values = ([""] if self.follow_default else []) + zones
            if values != self.zones:
                self.zones = values
                labels = [zone_label(zone) if zone else _("As unknown networks") for zone in values]
                self.model.splice(0, self.model.get_n_items(), labels)
            if current not in self.zones:
                self.zones.append(current)
                self.model.append(zone_label(current))
            self.widget.set_selected(self.zones.index(current))
        finally:
            self.quiet = False

    def _selected(self, *_args) -> None:
        if self.quiet:
            return
        index = self.widget.get_selected()
        if 0 <= index < len(self.zones):
            self.on_chosen(self.zones[index])


def switch_row(group, title: str, subtitle: str, active: bool = False) -> Gtk.Switch:
    """A row with a switch that the row's title names (for AT-SPI too)."""
    switch = Gtk.Switch(valign=Gtk.Align.CENTER, active=active)
    row = Adw.ActionRow(title=title, subtitle=subtitle, activatable_widget=switch)
    row.add_suffix(switch)
    group.add(row)
    return switch


class SettingsWindow(Adw.ApplicationWindow):
    def __init__(self, app: Adw.Application, service: Service):
        super().__init__(application=app, title=_("Network Zones"))
        self.set_default_size(640, 780)
        self.service = service
        self.rows: dict[str, tuple[Adw.ActionRow, ZoneChoice]] = {}
        self.zones: list[str] = []
        self.descriptions: dict[str, str] = {}
        self.pending_refresh = 0

        page = Adw.PreferencesPage()
        self.connections = Adw.PreferencesGroup(
            title=_("Active connections"),
            description=_("The zone decides what other hosts on that network may reach."),
        )
        self.empty = Adw.ActionRow(title=_("No active connection has a zone"))
        self.connections.add(self.empty)
        page.add(self.connections)
        page.add(self._defaults_group())
        self.networks = KnownNetworks(service, self.show, self.done, ZoneChoice)
        page.add(self.networks.widget)
        self.programs = ProgramAnswers(service, self.show, self.done)
        page.add(self.programs.widget)
        page.add(self._general_group())
        self.status = Gtk.Label(
            wrap=True,
            xalign=0,
            selectable=True,
            margin_start=18,
            margin_end=18,
            margin_top=6,
            margin_bottom=12,
            accessible_role=Gtk.AccessibleRole.STATUS,
        )
        self.status.update_property([Gtk.AccessibleProperty.LABEL], [_("Result")])
        self.editor = ZoneEditor(
            service, self.show, self.done, ZoneChoice(_("Zone to edit"), lambda _zone: None)
        )
        self.set_content(self._views(page))
        service.follow(self.on_signal, network_manager=True)
        self.refresh()

    def _defaults_group(self) -> Adw.PreferencesGroup:
        """The default zones of networks without one (wired, wireless, any)."""
        defaults = Adw.PreferencesGroup(
            title=_("Defaults"),
            description=_("The zone of networks that have no zone of their own."),
        )
        self.defaults: dict[str, ZoneChoice] = {}
        for key, title in DEFAULTS:
            choice = ZoneChoice(
                _(title), lambda zone, key=key: self.set_default(key, zone), key != "default-zone"
            )
            row = Adw.ActionRow(title=_(title), activatable_widget=choice.widget)
            row.add_suffix(choice.widget)
            defaults.add(row)
            self.defaults[key] = choice
        return defaults

    def _general_group(self) -> Adw.PreferencesGroup:
        """Zone support and notifications on or off."""
        general = Adw.PreferencesGroup(title=_("General"))
        self.enabled = switch_row(
            general,
            _("Zone support"),
            _("When off, nm-zones puts no firewall rules on any interface"),
        )
        self.enabled.connect("state-set", self.set_enabled)
        self.notify_switch = switch_row(
            general,
            _("Notifications"),
            _("Ask for the zone of a network that joins without one"),
            notifications_enabled(),
        )
        self.notify_switch.connect("notify::active", self.set_notifications)
        return general

    def _views(self, page: Adw.PreferencesPage) -> Gtk.Box:
        """The two pages (connections, zones) under a header that switches them, and the
        status line below."""
        self.views = Gtk.Stack(vexpand=True)
        self.views.add_titled(page, "connections", _("Connections"))
        self.views.add_titled(self.editor, "zones", _("Zones"))
        self.views.connect("notify::visible-child", lambda *_args: self.refresh())
        header = Adw.HeaderBar(title_widget=Gtk.StackSwitcher(stack=self.views))
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL)
        box.append(header)
        box.append(self.views)
        box.append(self.status)
        return box

    # -- reading -------------------------------------------------------------------------

    def on_signal(self, _interface: str, _member: str, _args: tuple) -> None:
        if not self.pending_refresh:
            self.pending_refresh = GLib.timeout_add(REFRESH_DELAY_MS, self._refresh_later)

    def _refresh_later(self) -> bool:
        self.pending_refresh = 0
        self.refresh()
        return GLib.SOURCE_REMOVE

    def refresh(self) -> None:
        try:
            self.descriptions = self.service.read("GetZoneDescriptions", "a{ss}")
            settings = self.service.read("GetSettings", "a{ss}")
            connections = self.service.read("GetConnections", "aa{ss}")
        except ServiceError as error:
            self.show(str(error))
            return
        self.zones = sorted(self.descriptions)
        for key, choice in self.defaults.items():
            choice.set(self.zones, settings.get(key, ""))
        enabled = settings.get("enabled") == "true"
        if self.enabled.get_active() != enabled or self.enabled.get_state() != enabled:
            self.enabled.handler_block_by_func(self.set_enabled)
            self.enabled.set_active(enabled)
            self.enabled.set_state(enabled)
            self.enabled.handler_unblock_by_func(self.set_enabled)
        self.show_connections([c for c in connections if c.get("zone")])
        self.networks.refresh(self.zones)
        self.programs.refresh()
        if self.views.get_visible_child() is self.editor:
            self.editor.refresh(self.zones, connections)

    def show_connections(self, connections: list[dict]) -> None:
        seen = set()
        for entry in connections:
            interface = entry["interface"]
            seen.add(interface)
            # escaped as `nm-zones status` shows it (a newline, U+202E), and for markup: the
            # rows read their title and subtitle as Pango markup
            name = printable(entry.get("connection") or interface)
            if interface not in self.rows:
                choice = ZoneChoice(
                    _("Zone of {name}").format(name=name),
                    lambda zone, interface=interface: self.assign(interface, zone),
                )
                row = Adw.ActionRow(activatable_widget=choice.widget)
                row.add_suffix(choice.widget)
                self.connections.add(row)
                self.rows[interface] = (row, choice)
            row, choice = self.rows[interface]
            row.set_title(GLib.markup_escape_text(name))
            zone = entry["zone"]
            why = reason_text(entry.get("reason", ""))
            if entry.get("status") == "disabled":
                why = _("zone support is off")
            description = self.descriptions.get(zone, "")
            subtitle = f"{interface} · {why}" + (f" · {description}" if description else "")
            if entry.get("degraded"):  # not the zone as configured: say what it has instead
                subtitle = f"{interface} · " + _("DEGRADED: {why}").format(why=entry["degraded"])
            row.set_subtitle(GLib.markup_escape_text(printable(subtitle)))
            row.update_property(
                [Gtk.AccessibleProperty.DESCRIPTION],
                [
                    _("{name} on {interface}: zone {zone}").format(
                        name=name, interface=interface, zone=zone
                    )
                ],
            )
            row.uuid = entry.get("uuid", "")
            choice.set(self.zones, zone)
        for interface in list(self.rows):
            if interface not in seen:
                row, _choice = self.rows.pop(interface)
                self.connections.remove(row)
        self.empty.set_visible(not self.rows)

    def show(self, text: str) -> None:
        """The result line (plain text, no markup), each line escaped (text.printable)."""
        self.status.set_text("\n".join(printable(line) for line in text.split("\n")))

    # -- changing ------------------------------------------------------------------------

    def done(self, lines: list[str] | None, error: ServiceError | None) -> None:
        if error is not None:
            self.show(str(error))
        else:
            self.show("\n".join(lines) if lines else _("Done: nothing needed to change."))
        self.refresh()  # a refused change puts the selectors back

    def assign(self, interface: str, zone: str) -> None:
        row = self.rows[interface][0]
        connection = getattr(row, "uuid", "") or interface
        self.show(_("Assigning zone {zone}…").format(zone=zone))
        self.service.assign(connection, zone, self.done)

    def set_default(self, key: str, zone: str) -> None:
        self.show(_("Setting the default…"))
        self.service.change("SetMapZone", GLib.Variant("(ss)", (key, zone)), self.done)

    def set_enabled(self, _switch, enabled: bool) -> bool:
        self.show(_("Turning zone support on…") if enabled else _("Turning zone support off…"))
        self.service.change("SetEnabled", GLib.Variant("(b)", (enabled,)), self.done)
        return True  # the switch's state follows the service (refresh), not the click

    def open_allow_form(self, zone: str) -> None:
        """The zone editor at `zone`'s page, the focus in its allowance form."""
        self.editor.zone = zone
        if self.views.get_visible_child() is self.editor:
            self.refresh()
        else:
            self.views.set_visible_child(self.editor)  # refreshes (notify::visible-child)
        self.editor.focus_allow_form()

    def set_notifications(self, switch, _param) -> None:
        try:
            set_notifications_enabled(switch.get_active())
        except OSError as error:
            self.show(_("Could not save the setting: {error}").format(error=error))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nm-zones-settings",
        description="The firewall zone of each network, the defaults, the known networks and "
        "a zone editor, in a window. One window per session: a second start brings the "
        "first to the front.",
        epilog="Example: nm-zones-settings --allow-port public",
    )
    parser.add_argument(
        "--allow-port", metavar="ZONE", default="",
        help="open the zone editor at ZONE's form that allows a port for a while",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Open the window (one per session: a second start raises the first, and passes it
    `--allow-port` as the action `allow-port`)."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv[1:])
    GLib.set_prgname("nm-zones-settings")  # the name assistive technologies list
    GLib.set_application_name(_("Network Zones"))
    if Gdk.Display.get_default() is None:
        print("nm-zones-settings: cannot open the display (is DISPLAY set?)", file=sys.stderr)
        return 1
    try:
        service = Service()
    except GLib.Error as error:
        print(f"nm-zones-settings: cannot reach the system bus: {error.message}", file=sys.stderr)
        return 1
    app = Adw.Application(application_id=APP_ID)
    wanted = {"zone": ""}  # the zone to open at, until the window exists

    def activate(application):
        window = application.get_active_window() or SettingsWindow(application, service)
        if wanted["zone"]:
            window.open_allow_form(wanted["zone"])
            wanted["zone"] = ""
        window.present()

    def allow_port(_action, zone: GLib.Variant) -> None:
        window = app.get_active_window()
        if window is None:
            wanted["zone"] = zone.get_string()  # activate opens it there
        else:
            window.open_allow_form(zone.get_string())

    action = Gio.SimpleAction.new("allow-port", GLib.VariantType("s"))
    action.connect("activate", allow_port)
    app.add_action(action)
    app.connect("activate", activate)
    if args.allow_port:
        app.register(None)  # primary: the action runs here; otherwise in the first window
        app.activate_action("allow-port", GLib.Variant("s", args.allow_port))
    return app.run(sys.argv[:1] if argv is None else argv[:1])


if __name__ == "__main__":
    sys.exit(main())
