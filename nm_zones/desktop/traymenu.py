"""The tray's menu, icon, status and tooltip as plain data, built from what the service
reports: the shape is decided here, without a bus or GLib (tested without PyGObject);
desktop/tray.py exports it."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from ..text import printable
from .words import _, zone_label

# Laxest first. Zones not listed rank with public: unknown is treated as untrusted.
STRICTNESS = (
    "trusted", "internal", "home", "work", "nm-shared", "dmz", "external", "public", "block",
    "drop",
)
ICONS = {"trusted": "security-low", "internal": "security-medium", "home": "security-medium",
         "work": "security-medium", "nm-shared": "security-medium"}
STRICT_ICON = "security-high"
# reasons of a connection whose network has no zone of its own yet
UNPLACED = ("default-zone", "default for wired", "default for wireless",
            "unknown wired network", "unknown wireless network", "identifying")


@dataclass(frozen=True)
class Item:
    """One menu entry: its dbusmenu properties (only those that differ from the defaults)
    and its children."""

    id: int
    properties: tuple[tuple[str, object], ...] = ()
    children: tuple[Item, ...] = ()

    def find(self, wanted: int) -> Item | None:
        if self.id == wanted:
            return self
        for child in self.children:
            found = child.find(wanted)
            if found is not None:
                return found
        return None


@dataclass
class Ids:
    """Stable item ids: the same key (a connection's zone choice, the panic toggle...) keeps
    its id across rebuilds, so a panel's open menu stays valid."""

    known: dict[tuple, int] = field(default_factory=dict)

    def of(self, key: tuple) -> int:
        if key not in self.known:
            self.known[key] = len(self.known) + 1  # 0 is the root
        return self.known[key]


@dataclass(frozen=True)
class Situation:
    """What the tray shows, as the service and the user's settings report it."""

    connections: tuple[tuple[str, str, str, str], ...]  # (name, uuid, zone, reason)
    zones: tuple[str, ...]
    panic: bool | None  # None: the service has no panic mode
    notifications: bool
    problem: str = ""  # the last refusal, until the next change


def by_strictness(zones) -> tuple[str, ...]:
    """Laxest first, as the menu lists them; zones of the admin's own after public."""
    rank = {zone: index for index, zone in enumerate(STRICTNESS)}
    return tuple(sorted(zones, key=lambda zone: (rank.get(zone, rank["public"] + 0.5), zone)))


def strictest(zones) -> str:
    """The strictest of `zones` (by STRICTNESS; an unknown zone ranks as public)."""
    rank = {zone: index for index, zone in enumerate(STRICTNESS)}
    default = rank["public"]
    return max(zones, key=lambda zone: rank.get(zone, default), default="")


def icon_name(situation: Situation) -> str:
    if situation.panic:
        return "network-error"
    zone = strictest(zone for _, _, zone, _ in situation.connections)
    if not zone:
        return "network-offline"
    return ICONS.get(zone, STRICT_ICON)


def status(situation: Situation) -> str:
    needs = situation.panic or situation.problem or any(
        reason in UNPLACED for _, _, _, reason in situation.connections
    )
    return "NeedsAttention" if needs else "Active"


def tooltip(situation: Situation) -> tuple[str, str]:
    """(title, text): "Home LAN: home, Hotel Wi-Fi: public", names escaped."""
    if situation.panic:
        text = _("All network traffic is blocked (panic mode).")
    elif situation.connections:
        text = ", ".join(
            f"{printable(name)}: {zone}" for name, _uuid, zone, _reason in situation.connections
        )
    else:
        text = _("No active connection")
    if situation.problem:
        text = f"{text}\n{situation.problem}"
    return _("Network zones"), escape(text, quote=False)


def build_menu(situation: Situation, ids: Ids) -> tuple[Item, dict[int, tuple]]:
    """The menu, and what a click on each clickable item does: ("assign", uuid, zone),
    ("allow", zone), ("panic", on), ("notifications", on) or ("settings",).

    "Allow a port for 10 minutes…" is in each connection's submenu, not once in the menu:
    what a port opens depends on the network it is opened to, and with two connections (a
    wired LAN and a hotel's Wi-Fi) a single item would have to guess which one is meant."""
    actions: dict[int, tuple] = {}
    entries: list[Item] = []
    for name, uuid, current, _reason in situation.connections:
        choices = []
        for zone in situation.zones:
            item_id = ids.of(("zone", uuid, zone))
            actions[item_id] = ("assign", uuid, zone)
            choices.append(Item(item_id, (
                ("label", zone_label(zone)),
                ("toggle-type", "radio"),
                ("toggle-state", 1 if zone == current else 0),
            )))
        choices.append(Item(ids.of(("separator", uuid)), (("type", "separator"),)))
        allow_id = ids.of(("allow", uuid))
        actions[allow_id] = ("allow", current)
        choices.append(Item(allow_id, (
            ("label", _("Allow a port for 10 minutes…")),
            ("accessible-desc", _("Allow a port for 10 minutes on {name} (zone {zone})").format(
                name=printable(name), zone=current)),
        )))
        label = f"{printable(name)}: {zone_label(current)}".replace("_", "__")
        entries.append(Item(ids.of(("connection", uuid)), (
            ("label", label),
            ("children-display", "submenu"),
        ), tuple(choices)))
    if not situation.connections:
        entries.append(Item(ids.of(("none",)), (
            ("label", _("No active connection")), ("enabled", False),
        )))
    entries.append(Item(ids.of(("separator", 1)), (("type", "separator"),)))
    if situation.panic is not None:
        panic_id = ids.of(("panic",))
        actions[panic_id] = ("panic", not situation.panic)
        entries.append(Item(panic_id, (
            ("label", _("Block all network traffic")),
            ("toggle-type", "checkmark"),
            ("toggle-state", 1 if situation.panic else 0),
        )))
    notify_id = ids.of(("notifications",))
    actions[notify_id] = ("notifications", not situation.notifications)
    entries.append(Item(notify_id, (
        ("label", _("Notifications")),
        ("toggle-type", "checkmark"),
        ("toggle-state", 1 if situation.notifications else 0),
    )))
    settings_id = ids.of(("settings",))
    actions[settings_id] = ("settings",)
    entries.append(Item(settings_id, (("label", _("Settings…")),)))
    return Item(0, (("children-display", "submenu"),), tuple(entries)), actions
