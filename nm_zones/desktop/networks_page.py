"""The settings window's "Known networks" group: every network nm-zones recognised (a wired
profile reaches many; networks/store.py), with its label, zone, gateway, domain and when it
was last seen; the zone can be changed and the network forgotten, through `nm-zones serve`
(SetNetworkZone, ForgetNetwork: polkit's org.nm-zones.assign decides). Kept apart from
settings.py, which adds the group to its page and refreshes it with the rest."""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable

from gi.repository import Adw, GLib, Gtk

from ..text import printable
from .common import Service, ServiceError, _, zone_label


def last_seen_text(stamp: str) -> str:
    """The store's UTC stamp (2026-12-04T16:10:00Z) in local time; as stored if odd."""
    try:
        seconds = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))
    except (ValueError, TypeError):
        return stamp
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))


def network_facts(network: dict) -> str:
    """The subtitle of a network's row: what identifies it, and when it was last seen."""
    facts = []
    if network.get("ssid"):
        facts.append(_("Wi-Fi {ssid}").format(ssid=network["ssid"]))
    if network.get("gateway-mac"):
        facts.append(_("gateway {mac}").format(mac=network["gateway-mac"]))
    if network.get("domain"):
        facts.append(_("domain {domain}").format(domain=network["domain"]))
    facts.append(_("last seen {when}").format(when=last_seen_text(network.get("last-seen", ""))))
    return " · ".join(facts)


class KnownNetworks:
    """The group (`widget`), one row per known network: a zone selector ("As unknown
    networks" while unplaced) and a Forget button. `show` writes the window's result line;
    `done(lines, error)` is the window's answer to a change (it shows it and refreshes);
    `zone_choice` makes the selectors, as the window's own."""

    def __init__(self, service: Service, show: Callable[[str], None], done, zone_choice):
        self.zone_choice = zone_choice  # settings.ZoneChoice (settings imports this module)
        self.service, self.show, self.done = service, show, done
        self.widget = Adw.PreferencesGroup(
            title=_("Known networks"),
            description=_(
                "Networks recognised by their gateway and DHCP server. A connection "
                "without a zone of its own gets the zone of the network it is on."
            ),
        )
        self.empty = Adw.ActionRow(title=_("No known networks yet"))
        self.widget.add(self.empty)
        self.rows: dict[str, tuple[Adw.ActionRow, object]] = {}

    def refresh(self, zones: list[str]) -> None:
        try:
            networks = self.service.read("GetNetworks", "aa{ss}")
        except ServiceError as error:
            self.show(str(error))
            return
        seen = set()
        for network in networks:
            network_id = network["id"]
            seen.add(network_id)
            if network_id not in self.rows:
                self.rows[network_id] = self._row(network_id)
            row, choice = self.rows[network_id]
            # escaped as `nm-zones networks` shows it, and for markup (rows read Pango)
            label = printable(network.get("label") or network_id)
            row.set_title(GLib.markup_escape_text(label))
            row.set_subtitle(GLib.markup_escape_text(printable(network_facts(network))))
            zone = network.get("zone", "")
            shown = zone_label(zone) if zone else _("As unknown networks")
            row.update_property(
                [Gtk.AccessibleProperty.DESCRIPTION],
                [_("Network {label}: {zone}").format(label=label, zone=shown)],
            )
            choice.widget.update_property(
                [Gtk.AccessibleProperty.DESCRIPTION],
                [_("Zone of network {label}").format(label=label)],
            )
            row.forget.update_property(
                [Gtk.AccessibleProperty.LABEL], [_("Forget {label}").format(label=label)]
            )
            choice.set(zones, zone)
        for network_id in list(self.rows):
            if network_id not in seen:
                row, _choice = self.rows.pop(network_id)
                self.widget.remove(row)
        self.empty.set_visible(not self.rows)

    def _row(self, network_id: str):
        choice = self.zone_choice(
            _("Zone of network"),
            lambda zone: self.set_zone(network_id, zone),
            follow_default=True,
        )
        row = Adw.ActionRow(activatable_widget=choice.widget)
        row.add_suffix(choice.widget)
        forget = Gtk.Button(
            icon_name="user-trash-symbolic",
            valign=Gtk.Align.CENTER,
            tooltip_text=_("Forget this network"),
        )
        forget.add_css_class("flat")
        forget.connect("clicked", lambda _button: self.forget(network_id))
        row.add_suffix(forget)
        row.forget = forget
        self.widget.add(row)
        return row, choice

    def set_zone(self, network_id: str, zone: str) -> None:
        if not zone:
            self.done([_("To make a network unknown again, forget it.")], None)
            return
        self.show(_("Setting the zone of the network…"))
        self.service.change("SetNetworkZone", GLib.Variant("(ss)", (network_id, zone)), self.done)

    def forget(self, network_id: str) -> None:
        self.show(_("Forgetting the network…"))
        self.service.change("ForgetNetwork", GLib.Variant("(s)", (network_id,)), self.done)
