"""The zone editor of nm-zones-settings: a page per zone with what it opens (services with
their ports, ports, protocols, masquerade, ICMP blocks), the interfaces in it now and the
runtime allowances that reach it, and the packets it refused lately (a zone with
`log-denied: true`: GetDeniedPackets, from the NFLOG group `nm-zones serve` reads), each with
"Allow this": its port opened for a while as the allowance form does. Adding or removing a
service or a port edits the admin's zone file through the service (EditZone, polkit's
org.nm-zones.configure), as `nm-zones allow --permanent` does; a refusal or a validation
error is shown, nothing changes.

Its first form allows a port for a while (10 minutes unless another time is picked): a
runtime allowance for every interface of the zone, through firewalld's `zone.addPort` with a
timeout (doors/firewalld_zone.py: `nm-zones allow PORT --zone ZONE --for TIME`, under the
same polkit action); the kernel ends it when the time is up."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import gi

gi.require_version("Gtk", "4.0")
gi.require_version("Adw", "1")

from gi.repository import Adw, GLib, Gtk  # noqa: E402

from ..doors.busapi import NMZ_INTERFACE, ZONE_INTERFACE  # noqa: E402
from ..text import duration_text, printable  # noqa: E402
from .common import Service, ServiceError, _, zone_label  # noqa: E402

CODE = re.compile(r"^[A-Z_]+: ")  # firewalld's error code before the message
Done = Callable[[list[str] | None, ServiceError | None], None]
PORT = re.compile(r"^([0-9]{1,5})(?:-([0-9]{1,5}))?$")  # 8080, or a range 8000-8100
PROTOCOLS = ("tcp", "udp")
DENIED_EVERY = 3  # seconds between reads of the refused packets while the page is shown


def N_(text: str) -> str:
    """Marks a string for translation where it is defined; _() translates it where used."""
    return text


# how long a port stays open, the first one preselected: (seconds, words)
DURATIONS = ((600, N_("10 minutes")), (3600, N_("1 hour")), (86400, N_("1 day")))


def port_problem(port: str) -> str:
    """Why `port` is not a port or a range of ports (empty when it is one)."""
    found = PORT.match(port)
    numbers = [int(n) for n in found.groups() if n] if found else []
    if not numbers or not all(1 <= n <= 65535 for n in numbers) or numbers != sorted(numbers):
        return _("{port} is not a port: give a number from 1 to 65535, such as 8080").format(
            port=port
        )
    return ""


def markup(text: str) -> str:
    """Rows read their title and subtitle as Pango markup: escaped, and printable."""
    return GLib.markup_escape_text(printable(text))


def named(widget: Gtk.Widget, name: str) -> Gtk.Widget:
    """What a screen reader says for the widget."""
    widget.update_property([Gtk.AccessibleProperty.LABEL], [name])
    return widget


def time_left(deadline: int) -> str:
    """`9m 12s left`, `2h 5m left`; `until revoked` for an allowance without end."""
    if not deadline:
        return _("until revoked")
    return _("{time} left").format(time=duration_text(deadline - time.time()))


def yes_no(value: bool) -> str:
    return _("yes") if value else _("no")


class ZonePage(Adw.PreferencesPage):
    """One zone: its groups are filled again from GetZone's answer (`fill`)."""

    def __init__(self, zone: str, change: Callable[..., None]):
        super().__init__()
        self.zone, self.change = zone, change
        self.rows: list[tuple[Adw.PreferencesGroup, Gtk.Widget]] = []
        self.logging, self.file = False, ""  # log-denied, and the zone's file (fill)
        self.timed: list[tuple[Adw.ActionRow, str, int]] = []  # allowance rows, their deadline

        self.title = Adw.PreferencesGroup(title=zone_label(zone))
        self.add(self.title)
        self.allow_group = Adw.PreferencesGroup(
            title=_("Allow a port for a while"),
            description=_("Opens it on every interface of this zone until the time is up"),
        )
        self.allow_port, self.allow_protocol, self.allow_for = self._allow_form()
        self.add(self.allow_group)
        self.services = Adw.PreferencesGroup(
            title=_("Services"), description=_("Services the zone opens, with their ports")
        )
        self.add_service = self._entry(self.services, _("Add a service, such as https"), "svc")
        self.add(self.services)
        self.ports = Adw.PreferencesGroup(title=_("Ports"))
        self.add_port = self._entry(self.ports, _("Add a port, such as 8080/tcp"), "port")
        self.add(self.ports)
        self.interfaces = Adw.PreferencesGroup(title=_("Interfaces in this zone now"))
        self.add(self.interfaces)
        self.allowances = Adw.PreferencesGroup(
            title=_("Runtime allowances"),
            description=_("Opened by nm-zones allow, until they end or are revoked"),
        )
        self.add(self.allowances)
        self.denied = Adw.PreferencesGroup(
            title=_("Refused packets"),
            description=_("The latest packets this zone refused, newest first"),
        )
        self.denied_rows: list[Gtk.Widget] = []
        self.denied_shown: tuple | None = None  # what the rows show: kept when unchanged
        self.allow_for.connect("notify::selected", lambda *_args: self._redraw_denied())
        self.add(self.denied)
        self.about = Adw.PreferencesGroup(title=_("Other settings"))
        self.add(self.about)

    def _entry(self, group: Adw.PreferencesGroup, title: str, kind: str) -> Adw.EntryRow:
        """A row to type a service or a port into; Return or its Add button adds it."""
        entry = Adw.EntryRow(title=title)
        button = named(
            Gtk.Button(label=_("Add"), valign=Gtk.Align.CENTER),
            _("Add service") if kind == "svc" else _("Add port"),
        )
        entry.add_suffix(button)
        entry.connect("entry-activated", lambda _row: self._add(entry))
        button.connect("clicked", lambda _button: self._add(entry))
        group.add(entry)
        return entry

    def _allow_form(self) -> tuple[Adw.EntryRow, Gtk.DropDown, Gtk.DropDown]:
        """Port, protocol, how long, Allow: one row, in that order for the keyboard too."""
        entry = named(Adw.EntryRow(title=_("Port, such as 8080")),
                      _("Port to allow in zone {zone}").format(zone=self.zone))
        protocol = named(Gtk.DropDown.new_from_strings(list(PROTOCOLS)), _("Protocol"))
        how_long = named(Gtk.DropDown.new_from_strings([_(words) for _s, words in DURATIONS]),
                         _("For how long"))
        button = named(Gtk.Button(label=_("Allow"), valign=Gtk.Align.CENTER),
                       _("Allow the port for a while"))
        for widget in (protocol, how_long):
            widget.set_valign(Gtk.Align.CENTER)
        for widget in (protocol, how_long, button):
            entry.add_suffix(widget)
        entry.connect("entry-activated", lambda _row: self._allow_for_a_while())
        button.connect("clicked", lambda _button: self._allow_for_a_while())
        self.allow_group.add(entry)
        return entry, protocol, how_long

    def _allow_for_a_while(self) -> None:
        port = self.allow_port.get_text().strip()
        if port:
            self.allow(port, PROTOCOLS[self.allow_protocol.get_selected()])

    def allow(self, port: str, protocol: str) -> None:
        """`port`/`protocol` opened in the zone for the time the form has chosen."""
        seconds, words = DURATIONS[self.allow_for.get_selected()]
        problem = port_problem(port)
        if problem:
            self.change(problem, "", None)
            return
        said = _("Port {port}/{protocol} allowed in zone {zone} for {time}").format(
            port=port, protocol=protocol, zone=self.zone, time=_(words)
        )
        self.change(
            _("Allowing {port}/{protocol}…").format(port=port, protocol=protocol),
            "addPort",
            GLib.Variant("(sssi)", (self.zone, port, protocol, seconds)),
            interface=ZONE_INTERFACE,
            said=said,
        )

    def focus_allow_form(self) -> None:
        """Where the tray's "Allow a port for 10 minutes…" leads: the port field."""
        self.allow_for.set_selected(0)
        self.allow_port.grab_focus()

    def _add(self, entry: Adw.EntryRow) -> None:
        what = entry.get_text().strip()
        if what:
            self.edit(what, True)

    def edit(self, what: str, add: bool) -> None:
        verb = _("Adding {what} to zone {zone}…") if add else _("Removing {what} from zone {zone}…")
        self.change(
            verb.format(what=what, zone=self.zone),
            "EditZone",
            GLib.Variant("(ssb)", (self.zone, what, add)),
        )

    def revoke(self, interface: str, what: str) -> None:
        self.change(
            _("Revoking {what}…").format(what=what),
            "RevokeAllowance",
            GLib.Variant("(sss)", (self.zone, interface, what)),
        )

    # -- showing -----------------------------------------------------------------------

    def _row(self, group, title: str, subtitle: str = "", button=None) -> Adw.ActionRow:
        row = Adw.ActionRow(title=markup(title), subtitle=markup(subtitle))
        if button is not None:  # not the row's activatable widget: its own name is said alone
            row.add_suffix(button)
        group.add(row)
        self.rows.append((group, row))
        return row

    def _button(self, label: str, name: str, clicked: Callable[[], None]) -> Gtk.Button:
        button = named(Gtk.Button(label=label, valign=Gtk.Align.CENTER), name)
        button.connect("clicked", lambda _button: clicked())
        return button

    def fill(self, details: dict, connections: dict[str, str]) -> None:
        for group, row in self.rows:
            group.remove(row)
        self.rows, self.timed = [], []
        self.logging, self.file = bool(details.get("log-denied")), details.get("file", "")
        self._clear_done(details)
        self.title.set_description(markup(details.get("description", "")))
        listed = ", ".join
        for title, value in (
            (_("Protocols"), listed(details.get("protocols", [])) or _("none")),
            (_("Masquerade"), yes_no(details.get("masquerade", False))),
            (_("ICMP blocks"), listed(details.get("icmp-blocks", [])) or _("none")),
            (_("Log denied packets"), yes_no(details.get("log-denied", False))),
            (_("Target"), details.get("target", "")),
            (_("File"), details.get("file", "")),
        ):
            self._row(self.about, title, value)
        for name, ports in details.get("services", []):
            remove = self._button(
                _("Remove"),
                _("Remove service {name}").format(name=name),
                lambda name=name: self.edit(name, False),
            )
            self._row(self.services, name, ports or _("no ports"), remove)
        for port in details.get("ports", []):
            remove = self._button(
                _("Remove"),
                _("Remove port {port}").format(port=port),
                lambda port=port: self.edit(port, False),
            )
            self._row(self.ports, port, "", remove)
        for entry in details.get("interfaces", []):
            interface = entry["interface"]
            name = entry.get("connection") or connections.get(interface) or interface
            self._row(self.interfaces, name, interface)
        if not details.get("interfaces"):
            self._row(self.interfaces, _("No interface is in this zone now"))
        for entry in details.get("allowances", []):
            interface, what = entry["interface"], entry["what"]
            deadline = int(entry.get("deadline") or 0)
            where = interface or _("every interface of the zone")
            revoke = self._button(
                _("Revoke"),
                _("Revoke {what} on {where}").format(what=what, where=where),
                lambda interface=interface, what=what: self.revoke(interface, what),
            )
            row = self._row(self.allowances, what, "", revoke)
            self.timed.append((row, where, deadline))
        if not details.get("allowances"):
            self._row(self.allowances, _("Nothing is allowed at runtime"))
        self.tick()

    def fill_denied(self, packets: list[dict[str, str]], logging: bool, file: str) -> None:
        """The refused packets, each with "Allow this" when its port can be opened; a zone
        that does not log them says how to start."""
        if (packets, logging) == self.denied_shown:
            return  # the rows stay, and the keyboard focus in them
        self.denied_shown = (packets, logging)
        for row in self.denied_rows:
            self.denied.remove(row)
        self.denied_rows = [self._denied_row(packet) for packet in packets]
        if not logging:
            hint = _("Set log-denied: true in {file} to list them here").format(file=file)
            self.denied_rows.append(self._plain(_("This zone does not log refused packets"), hint))
        elif not packets:
            self.denied_rows.append(self._plain(_("No packet refused lately")))
        for row in self.denied_rows:
            self.denied.add(row)

    def _redraw_denied(self) -> None:
        """Another time picked in the form: each "Allow this" names it."""
        shown, self.denied_shown = self.denied_shown, None
        if shown is not None:
            self.fill_denied(shown[0], shown[1], self.file)

    def _plain(self, title: str, subtitle: str = "") -> Adw.ActionRow:
        return Adw.ActionRow(title=markup(title), subtitle=markup(subtitle))

    def _denied_row(self, packet: dict[str, str]) -> Adw.ActionRow:
        protocol, port = packet.get("protocol", ""), packet.get("port", "")
        what = f"{port}/{protocol}" if protocol in PROTOCOLS and port.isdigit() else ""
        title = _("{what} from {source}").format(
            what=what or f"{protocol} {port}", source=packet.get("source", "")
        )
        row = self._plain(title, f"{packet.get('time', '')} · {packet.get('interface', '')}")
        if what:
            words = DURATIONS[self.allow_for.get_selected()][1]
            button = self._button(
                _("Allow this"),
                _("Allow {what} in zone {zone} for {time}").format(
                    what=what, zone=self.zone, time=_(words)
                ),
                lambda: self.allow(port, protocol),
            )
            row.add_suffix(button)
        return row

    def _clear_done(self, details: dict) -> None:
        """A field emptied once what was typed into it is there: its row says so."""
        runtime = [entry["what"] for entry in details.get("allowances", [])]
        typed = self.allow_port.get_text().strip()
        if any(f"{typed}/{protocol}" in runtime for protocol in PROTOCOLS):
            self.allow_port.set_text("")  # allowed: its row below shows the time left
        listed_now = [name for name, _ports in details.get("services", [])]
        for entry, items in (
            (self.add_service, listed_now),
            (self.add_port, details.get("ports", [])),
        ):
            if entry.get_text().strip().lower() in items:
                entry.set_text("")  # added: the row below says so

    def tick(self) -> None:
        """The time left of every allowance, again."""
        for row, where, deadline in self.timed:
            row.set_subtitle(markup(f"{where} · {time_left(deadline)}"))


class ZoneEditor(Gtk.Box):
    """A zone selector above a stack with one page per zone (made when first shown)."""

    def __init__(self, service: Service, show: Callable[[str], None], done: Done, choice):
        """`choice`: a settings.ZoneChoice whose `on_chosen` is set here."""
        super().__init__(orientation=Gtk.Orientation.VERTICAL)
        self.service, self.show, self.done = service, show, done
        self.pages: dict[str, ZonePage] = {}
        self.connections: dict[str, str] = {}
        self.zone = ""
        self.choice = choice
        choice.on_chosen = self.select
        named(choice.widget, _("Zone to edit"))
        label = Gtk.Label(label=_("Zone to edit"), xalign=0, hexpand=True)
        top = Gtk.Box(spacing=12, margin_start=18, margin_end=18, margin_top=12)
        top.append(label)
        top.append(self.choice.widget)
        self.append(top)
        self.stack = Gtk.Stack(vexpand=True)
        self.append(self.stack)
        self.ticks = 0
        GLib.timeout_add_seconds(1, self._tick)

    def _tick(self) -> bool:
        page = self.pages.get(self.zone)
        if page is not None and self.get_mapped():
            page.tick()
            self.ticks += 1
            if self.ticks % DENIED_EVERY == 0:
                self.read_denied(page)
        return GLib.SOURCE_CONTINUE

    def read_denied(self, page: ZonePage) -> None:
        """The zone's refused packets, as the service has read them lately."""
        if not page.logging:
            page.fill_denied([], False, page.file)
            return
        try:
            packets = self.service.read(
                "GetDeniedPackets", "aa{ss}", GLib.Variant("(s)", (page.zone,))
            )
        except ServiceError:
            return  # an older service, or none: the rest of the page says so
        page.fill_denied(list(packets), True, page.file)

    def select(self, zone: str) -> None:
        self.zone = zone
        self.refresh()

    def refresh(self, zones: list[str] | None = None, connections: list[dict] = ()) -> None:
        """The zone list (when given) and the shown zone's page, read again."""
        if connections:
            self.connections = {c["interface"]: c.get("connection", "") for c in connections}
        if zones is not None:
            if not self.zone:
                current = [c.get("zone") for c in connections if c.get("zone") in zones]
                self.zone = current[0] if current else ("public" if "public" in zones else "")
                self.zone = self.zone or (zones[0] if zones else "")
            if self.zone:
                self.choice.set(zones, self.zone)
        if not self.zone:
            return
        page = self.pages.get(self.zone)
        if page is None:
            page = self.pages[self.zone] = ZonePage(self.zone, self.change)
            self.stack.add_named(page, self.zone)
        self.stack.set_visible_child(page)
        try:
            details = self.service.read("GetZone", "a{sv}", GLib.Variant("(s)", (self.zone,)))
        except ServiceError as error:
            self.show(str(error))
            return
        page.fill(details, self.connections)
        self.read_denied(page)

    def change(self, saying: str, method: str, args: GLib.Variant | None,
               interface: str = NMZ_INTERFACE, said: str = "") -> None:
        """`saying` while the service works on it (or, without a `method`, why nothing was
        asked of it); `said` when it answered with no lines of its own."""
        self.show(saying)
        if not method:
            return

        def done(lines: list[str] | None, error: ServiceError | None) -> None:
            self._done(lines or ([said] if said and error is None else lines), error)

        self.service.change(method, args, done, interface)

    def _done(self, lines: list[str] | None, error: ServiceError | None) -> None:
        """The service's answer, without firewalld's error code (`INVALID_VALUE: `): the
        user reads what is wrong with what they typed."""
        if error is not None and not error.not_authorized:
            error = ServiceError(CODE.sub("", str(error), count=1))
        self.done(lines, error)

    def focus_allow_form(self) -> None:
        """The focus in the allowance form of the zone shown."""
        page = self.pages.get(self.zone)
        if page is not None:
            page.focus_allow_form()
