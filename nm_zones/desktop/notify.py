"""`nm-zones-notify`: the user-session agent. It follows `nm-zones serve` on the system bus
and, when a network with no zone of its own connects and gets a default zone, asks in a
desktop notification which zone that network should have; the choice is assigned to the
connection for good (as `nm-zones assign`), through the service. A profile whose zone
follows the network it reached (a wired profile, by default: networks/zone.py) is asked
about per network instead, once the service reports the network identified (GetConnections'
`identification`, signalled by NetworksChanged): "New wired network, gateway MAC, domain
D: which zone?", the answer stored for that network (SetNetworkZone). Zone changes made
elsewhere get a quieter notification. A connection it placed is never asked about again
(remembered in the user's state folder); a placed network is known to the service;
`[notify] enabled = false` in the user's desktop.conf (the switch in nm-zones-settings)
keeps it quiet.

Any program on the session bus can emit a signal that looks like the notification server's:
an action counts only when its sender is the current owner of org.freedesktop.Notifications
and the very server that numbered that notification for this agent. What it shows is
escaped as `nm-zones status` escapes it (text.printable), and bodies for markup too."""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from gi.repository import Gio, GLib

from ..text import printable, shown_value
from .common import (
    DEFAULT_REASONS,
    LIKELY_ZONES,
    Service,
    ServiceError,
    _,
    notifications_enabled,
    placed,
    reason_text,
    remember_placed,
    run_until_signalled,
    zone_label,
)
from .listener_question import ListenerQuestions

NOTIFICATIONS = "org.freedesktop.Notifications"
NOTIFICATIONS_PATH = "/org/freedesktop/Notifications"
URGENCY_LOW, URGENCY_NORMAL = 0, 1
AUTOSTART_FILE = "nm-zones-notify.desktop"


def say(message: str) -> None:
    """What the agent decided, on stderr (the session's journal)."""
    print(f"nm-zones-notify: {message}", file=sys.stderr, flush=True)


def shown(summary: str, body: str) -> tuple[str, str]:
    """A notification's summary and body as the agent sends them: escaped as `nm-zones
    status` escapes text (text.printable: newlines, U+202E), and the body, which servers
    read as markup, for markup too (the summary is plain text to them)."""
    return printable(summary), GLib.markup_escape_text(printable(body))


class Notifier:
    """The session's notification server (org.freedesktop.Notifications): who owns the name
    now (followed through NameOwnerChanged), and its actions, from that owner only."""

    def __init__(self, on_action):
        self.bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        self.on_action = on_action
        self.owner = ""  # the server's unique name; "" while there is none
        self.bus.signal_subscribe(
            "org.freedesktop.DBus",
            "org.freedesktop.DBus",
            "NameOwnerChanged",
            "/org/freedesktop/DBus",
            NOTIFICATIONS,
            Gio.DBusSignalFlags.NONE,
            self._owner_changed,
        )
        try:  # after subscribing: a change meanwhile is not missed
            self.owner = self.bus.call_sync(
                "org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus",
                "GetNameOwner",
                GLib.Variant("(s)", (NOTIFICATIONS,)),
                GLib.VariantType("(s)"),
                Gio.DBusCallFlags.NONE,
                10_000,
                None,
            ).unpack()[0]
        except GLib.Error:
            self.owner = ""  # none yet; activation or a later start makes one
        self.bus.signal_subscribe(
            NOTIFICATIONS,
            NOTIFICATIONS,
            "ActionInvoked",
            NOTIFICATIONS_PATH,
            None,
            Gio.DBusSignalFlags.NONE,
            self._action,
        )

    def _owner_changed(self, _bus, _sender, _path, _interface, _member, args) -> None:
        name, _old, new = args.unpack()
        if name == NOTIFICATIONS:
            self.owner = new

    def _action(self, _bus, sender, _path, _interface, _member, args) -> None:
        if args.get_type_string() != "(us)":
            return
        number, key = args.unpack()
        if not sender or sender != self.owner:
            say(
                f"ignored action {shown_value(key)} on notification {number} from {sender}: "
                f"not the notification server ({self.owner or 'none'})"
            )
            return
        self.on_action(sender, number, key)

    def notify(
        self, summary: str, body: str, icon: str, actions: list[str], urgency: int, done=None
    ) -> None:
        """Show it, escaped (`shown`); `done(id, server)` once a server numbered it, with
        the server's unique name (0 and "": it could not be shown)."""
        summary, body = shown(summary, body)
        hints = {
            "urgency": GLib.Variant("y", urgency),
            "desktop-entry": GLib.Variant("s", "nm-zones-settings"),
        }
        if actions:
            hints["resident"] = GLib.Variant("b", True)
        args = GLib.Variant(
            "(susssasa{sv}i)",
            ("nm-zones", 0, icon, summary, body, actions, hints, 0 if actions else -1),
        )

        def finished(bus, result):
            try:
                reply = bus.send_message_with_reply_finish(result)
                reply.to_gerror()  # raises when the reply is an error
                number, server = reply.get_body().unpack()[0], reply.get_sender() or ""
            except (GLib.Error, TypeError, IndexError) as error:
                say(f"no notification server: {getattr(error, 'message', error)}")
                number, server = 0, ""
            if done:
                done(number, server)

        message = Gio.DBusMessage.new_method_call(
            NOTIFICATIONS, NOTIFICATIONS_PATH, NOTIFICATIONS, "Notify"
        )
        message.set_body(args)
        self.bus.send_message_with_reply(
            message, Gio.DBusSendMessageFlags.NONE, 10_000, None, finished
        )

    def close(self, number: int) -> None:
        self.bus.call(
            NOTIFICATIONS,
            NOTIFICATIONS_PATH,
            NOTIFICATIONS,
            "CloseNotification",
            GLib.Variant("(u)", (number,)),
            None,
            Gio.DBusCallFlags.NONE,
            10_000,
            None,
            None,
        )


class Agent:
    def __init__(self, service: Service, notifier_factory=Notifier):
        self.service = service
        self.notifier = notifier_factory(self.on_action)
        # notification id -> (what it asks about, the server that numbered it); what: the
        # ZoneChanged of a connection, or a network (its "network" key: its id)
        self.asking: dict[int, tuple[dict, str]] = {}
        self.expected: set[tuple[str, str]] = set()  # (uuid, zone) this agent asked for
        # connections that joined with a default zone, by UUID, until the service knows
        # whether their network was identified (then the question is about the network)
        self.waiting: dict[str, tuple[dict, str, str, str]] = {}
        self.asked_networks: set[str] = set()  # the network ids asked about this session
        self.listeners = ListenerQuestions(self, say)  # programs a zone refuses
        service.follow(self.on_signal, network_manager=False)
        self.check_networks()  # a new network identified before the session started

    def on_signal(self, interface: str, member: str, args: tuple) -> None:
        if member == "ZoneChanged" and args:
            self.zone_changed(args[0])
        elif member == "NetworksChanged":
            self.check_networks()
        elif member == "ListenerRefused" and args:
            self.listeners.refused(args[0])

    def zone_changed(self, change: dict) -> None:
        uuid, zone, old = change.get("uuid", ""), change.get("zone", ""), change.get("old-zone")
        name = change.get("connection") or change.get("interface", "")
        if (uuid, zone) in self.expected:
            self.expected.discard((uuid, zone))
            return  # the agent's own doing: already told
        if not zone:  # disconnected: not asked about, unless still up elsewhere (multi-connect)
            if uuid in self.waiting:
                self.check_networks()  # drops it unless the service still lists it
            return
        if not notifications_enabled():
            say(f"not asking about {name!r}: notifications are off")
            return
        icon = "network-wireless" if "wireless" in change.get("type", "") else "network-wired"
        if not old and change.get("reason") in DEFAULT_REASONS:
            if not uuid:
                return  # no NetworkManager profile to keep a zone in
            self.waiting[uuid] = (change, name, zone, icon)
            self.check_networks()
        elif change.get("degraded"):  # the zone asked for could not be used as configured
            self.notifier.notify(
                _("{name}: zone {zone} could not be applied as configured").format(
                    name=name, zone=zone
                ),
                change["degraded"],
                "dialog-warning",
                [],
                URGENCY_NORMAL,
            )
        elif old and old != zone:
            self.notifier.notify(
                _("{name}: zone {zone}").format(name=name, zone=zone),
                _("Was {old}; now {why}.").format(old=old, why=reason_text(change["reason"])),
                icon,
                [],
                URGENCY_LOW,
            )

    def check_networks(self) -> None:
        """Ask about each connection the service has identified on a network nobody placed
        yet (once per network and session); a waiting connection whose profile has its own
        zone or whose network could not be identified is asked about as a profile."""
        try:
            rows = self.service.read("GetConnections", "aa{ss}")
        except ServiceError as error:
            say(f"cannot read the connections: {error}")
            rows = []
        seen = {row.get("uuid", ""): row for row in rows if row.get("zone")}
        for uuid in [u for u in self.waiting if u not in seen]:
            del self.waiting[uuid]  # gone meanwhile (or the service is)
        networks: dict[str, dict] | None = None
        for uuid, row in seen.items():
            state = row.get("identification", "")
            if state == "pending":
                continue  # the hook has not looked yet: NetworksChanged follows
            waited = self.waiting.pop(uuid, None)
            if state != "identified":
                if waited:
                    self.ask_profile(*waited)
                continue
            if networks is None:
                networks = self.read_networks()
            network = networks.get(row.get("network", ""))
            if network is None or network.get("zone"):
                if waited and network is not None:  # placed: its zone applies
                    say(f"not asking about {waited[1]!r}: on known network {network['label']!r}")
                continue
            network_id = network["id"]
            if network_id in self.asked_networks:
                continue
            if not notifications_enabled():
                say(f"not asking about network {network_id}: notifications are off")
                continue
            self.asked_networks.add(network_id)
            self.ask_network(row, network)

    def read_networks(self) -> dict[str, dict]:
        try:
            return {n["id"]: n for n in self.service.read("GetNetworks", "aa{ss}")}
        except ServiceError as error:
            say(f"cannot read the known networks: {error}")
            return {}

    def ask_profile(self, change: dict, name: str, zone: str, icon: str) -> None:
        if change["uuid"] in placed():
            say(f"not asking about {name!r}: placed before")
            return
        summary = _("Connected to {name}: zone {zone} ({why})").format(
            name=name, zone=zone, why=reason_text(change["reason"])
        )
        body = _("Which zone should this network have from now on?")
        self.ask_choice(change, summary, body, icon)

    def ask_network(self, row: dict, network: dict) -> None:
        """The question about a network (not the profile): its answer goes to the network."""
        wireless = "wireless" in row.get("type", "")
        facts = {"mac": network.get("gateway-mac", ""), "domain": network.get("domain", "")}
        if wireless:
            summary = _("New wireless network {ssid}: which zone?").format(
                ssid=network.get("ssid") or facts["mac"]
            )
        elif facts["domain"]:
            summary = _("New wired network, gateway {mac}, domain {domain}: which zone?").format(
                **facts
            )
        else:
            summary = _("New wired network, gateway {mac}: which zone?").format(**facts)
        name = row.get("connection") or row.get("interface", "")
        body = _(
            "{name} is in zone {zone} until you choose; the choice is for this network "
            "only, every time you connect to it."
        ).format(name=name, zone=row["zone"])
        asked = {
            "network": network["id"],
            "label": network.get("label") or network["id"],
            "uuid": row.get("uuid", ""),
        }
        icon = "network-wireless" if wireless else "network-wired"
        self.ask_choice(asked, summary, body, icon)

    def ask_choice(self, asked: dict, summary: str, body: str, icon: str) -> None:
        actions = []
        for choice in LIKELY_ZONES:
            actions += [choice, zone_label(choice)]
        self.ask(asked, summary, body, icon, actions)

    def ask(self, asked: dict, summary: str, body: str, icon: str, actions: list[str]) -> None:
        """A question with `actions` (keys and labels); its answer comes to on_action."""

        def numbered(number: int, server: str) -> None:
            if number and server:
                self.asking[number] = (asked, server)

        self.notifier.notify(summary, body, icon, actions, URGENCY_NORMAL, numbered)

    def on_action(self, sender: str, number: int, key: str) -> None:
        """A choice, from the notification server that owns the name now (Notifier); it
        counts only for a question this agent asked through that very server."""
        asked = self.asking.get(number)
        if asked is None or asked[1] != sender:
            say(f"ignored action {shown_value(key)} from {sender}: it did not show {number}")
            return
        if "listener" in asked[0]:
            self.asking.pop(number)
            self.notifier.close(number)
            self.listeners.answer(asked[0], key)
            return
        if key not in LIKELY_ZONES:
            return
        change = self.asking.pop(number)[0]
        self.notifier.close(number)
        if "network" in change:
            self.place_network(change, key)
            return
        uuid, name = change["uuid"], change.get("connection") or change["uuid"]
        self.expected.add((uuid, key))

        def done(lines, error: ServiceError | None) -> None:
            if error is not None:
                self.failed(uuid, name, key, error)
                return
            try:
                remember_placed(uuid)
            except OSError as problem:
                print(f"nm-zones-notify: cannot remember {uuid}: {problem}", file=sys.stderr)
            self.notifier.notify(
                _("{name} is now in zone {zone}").format(name=name, zone=key),
                _("From now on, every time it connects."),
                "network-wired",
                [],
                URGENCY_LOW,
            )

        self.service.assign(uuid, key, done)

    def place_network(self, asked: dict, zone: str) -> None:
        """SetNetworkZone: the network keeps the zone; the profile stays without one."""
        uuid, label = asked["uuid"], asked["label"]
        self.expected.add((uuid, zone))

        def done(lines, error: ServiceError | None) -> None:
            if error is not None:
                self.failed(uuid, label, zone, error)
                self.asked_networks.discard(asked["network"])  # may be asked again
                return
            self.notifier.notify(
                _("{name} is now in zone {zone}").format(name=label, zone=zone),
                _("Every time you connect to this network."),
                "network-wired",
                [],
                URGENCY_LOW,
            )

        self.service.change("SetNetworkZone", GLib.Variant("(ss)", (asked["network"], zone)), done)

    def failed(self, uuid: str, name: str, zone: str, error: ServiceError) -> None:
        self.expected.discard((uuid, zone))
        self.notifier.notify(
            _("Could not give {name} the zone {zone}").format(name=name, zone=zone),
            str(error),
            "dialog-warning",
            [],
            URGENCY_NORMAL,
        )


def autostart_source() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), AUTOSTART_FILE)


def install_autostart() -> str:
    """Copy the XDG autostart file into the user's ~/.config/autostart."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    target = os.path.join(base, "autostart", AUTOSTART_FILE)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(autostart_source(), target)
    return target


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nm-zones-notify",
        description="Ask for the zone of a network that connects without one, and tell of "
        "zone changes, as desktop notifications. Runs in the user's session (started by "
        "the XDG autostart file); needs `nm-zones serve` on the system bus.",
        epilog="Example: nm-zones-notify --install-autostart   # start it with every session",
    )
    parser.add_argument(
        "--install-autostart",
        action="store_true",
        help=f"copy {AUTOSTART_FILE} into ~/.config/autostart and exit",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.install_autostart:
        try:
            print(install_autostart())
        except OSError as error:
            print(f"nm-zones-notify: {error}", file=sys.stderr)
            return 1
        return 0
    try:
        Agent(Service())
    except GLib.Error as error:
        print(f"nm-zones-notify: cannot reach a bus: {error.message}", file=sys.stderr)
        return 1
    run_until_signalled(lambda: say("listening"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
