"""What both desktop programs share: translations, the service on the system bus (through
GDBus), the user's own settings and the agent's memory of the connections it placed."""

from __future__ import annotations

import configparser
import gettext
import os
from collections.abc import Callable

from gi.repository import Gio, GLib

from ..doors.busapi import BUS_NAME, NMZ_INTERFACE, NOT_AUTHORIZED, OBJECT_PATH

DOMAIN = "nm-zones"
_ = gettext.translation(DOMAIN, fallback=True).gettext

NM_BUS = "org.freedesktop.NetworkManager"
CALL_TIMEOUT_MS = 130_000  # polkit may ask a human for a password
READ_TIMEOUT_MS = 5_000
# the reasons the engine gives a connection that has no zone of its own
DEFAULT_REASONS = ("default for wired", "default for wireless", "default-zone")
LIKELY_ZONES = ("home", "work", "public", "block")


def reason_text(reason: str) -> str:
    """Why a connection has its zone, in words a user reads."""
    return {
        "nmcli connection.zone": _("its own zone"),
        "shared connection": _("a shared connection"),
        "map: uuid": _("set in the connections map"),
        "map: name": _("set in the connections map"),
        "default for wired": _("default for wired networks"),
        "default for wireless": _("default for wireless networks"),
        "default-zone": _("unknown network"),
        "command line": _("set by a command, until it reconnects"),
        "D-Bus call": _("set by another program, until it reconnects"),
    }.get(reason, reason)


def zone_label(zone: str) -> str:
    """`home` -> `Home`: the names of the shipped zones, translatable."""
    return {
        "trusted": _("Trusted"),
        "home": _("Home"),
        "work": _("Work"),
        "internal": _("Internal"),
        "dmz": _("DMZ"),
        "public": _("Public"),
        "external": _("External"),
        "block": _("Block"),
        "drop": _("Drop"),
        "nm-shared": _("Shared"),
    }.get(zone, zone)


class ServiceError(Exception):
    """A refused or failed call; `not_authorized` when polkit said no."""

    def __init__(self, message: str, not_authorized: bool = False):
        self.not_authorized = not_authorized
        super().__init__(message)


def _service_error(error: GLib.Error) -> ServiceError:
    name = Gio.DBusError.get_remote_error(error) or ""
    message = error.message
    if name and message.startswith(f"GDBus.Error:{name}: "):
        message = message[len(f"GDBus.Error:{name}: ") :]
    if name == NOT_AUTHORIZED:
        action = message.rpartition(": ")[2]
        return ServiceError(
            _("Not authorized: polkit refused {action}").format(action=action), True
        )
    if name == "org.freedesktop.DBus.Error.ServiceUnknown":
        return ServiceError(_("The nm-zones service is not running (nm-zones serve)."))
    return ServiceError(message)


class Service:
    """nm-zones' own interface of `nm-zones serve`, and the signals the front ends follow."""

    def __init__(self):
        self.bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)

    def read(self, method: str, reply_type: str):
        """A read (open to everyone): its value; ServiceError when it fails."""
        try:
            reply = self.bus.call_sync(
                BUS_NAME,
                OBJECT_PATH,
                NMZ_INTERFACE,
                method,
                None,
                GLib.VariantType(f"({reply_type})"),
                Gio.DBusCallFlags.NONE,
                READ_TIMEOUT_MS,
                None,
            )
        except GLib.Error as error:
            raise _service_error(error) from None
        return reply.unpack()[0]

    def change(
        self,
        method: str,
        args: GLib.Variant,
        done: Callable[[list[str] | None, ServiceError | None], None],
    ) -> None:
        """A change, asynchronously (polkit may ask): `done(lines, None)` or
        `done(None, error)`."""

        def finished(bus, result):
            try:
                reply = bus.call_finish(result)
            except GLib.Error as error:
                done(None, _service_error(error))
                return
            done(list(reply.unpack()[0]), None)

        self.bus.call(
            BUS_NAME,
            OBJECT_PATH,
            NMZ_INTERFACE,
            method,
            args,
            GLib.VariantType("(as)"),
            Gio.DBusCallFlags.ALLOW_INTERACTIVE_AUTHORIZATION,
            CALL_TIMEOUT_MS,
            None,
            finished,
        )

    def assign(self, connection: str, zone: str, done) -> None:
        self.change("AssignConnection", GLib.Variant("(ss)", (connection, zone)), done)

    def follow(self, on_signal: Callable[[str, str, tuple], None], network_manager: bool):
        """`on_signal(sender_name, member, args)` for every signal of the service (and of
        NetworkManager, when asked), and when the service starts or stops."""

        def received(_bus, _sender, _path, interface, member, parameters):
            on_signal(interface, member, parameters.unpack())

        self.bus.signal_subscribe(
            BUS_NAME, None, None, OBJECT_PATH, None, Gio.DBusSignalFlags.NONE, received
        )
        self.bus.signal_subscribe(
            "org.freedesktop.DBus",
            "org.freedesktop.DBus",
            "NameOwnerChanged",
            "/org/freedesktop/DBus",
            BUS_NAME,
            Gio.DBusSignalFlags.NONE,
            received,
        )
        if network_manager:
            self.bus.signal_subscribe(
                NM_BUS, None, None, None, None, Gio.DBusSignalFlags.NONE, received
            )


# -- the user's own files -----------------------------------------------------------------


def _xdg(variable: str, fallback: str) -> str:
    base = os.environ.get(variable) or os.path.join(os.path.expanduser("~"), fallback)
    return os.path.join(base, "nm-zones")


def settings_file() -> str:
    """The user's desktop settings: `[notify]` `enabled = false` turns the agent off."""
    return os.path.join(_xdg("XDG_CONFIG_HOME", ".config"), "desktop.conf")


def placed_file() -> str:
    """The connections (UUIDs) the agent placed in a zone: it never asks about them again."""
    return os.path.join(_xdg("XDG_STATE_HOME", ".local/state"), "placed")


def notifications_enabled() -> bool:
    parser = configparser.ConfigParser()
    try:
        parser.read(settings_file(), encoding="utf-8")
        return parser.getboolean("notify", "enabled", fallback=True)
    except (configparser.Error, ValueError, UnicodeDecodeError):
        return True


def set_notifications_enabled(enabled: bool) -> None:
    parser = configparser.ConfigParser()
    try:
        parser.read(settings_file(), encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        parser = configparser.ConfigParser()
    if not parser.has_section("notify"):
        parser.add_section("notify")
    parser.set("notify", "enabled", "true" if enabled else "false")
    _write(settings_file(), parser)


def placed() -> set[str]:
    try:
        with open(placed_file(), encoding="utf-8") as stream:
            return {line.strip() for line in stream if line.strip()}
    except (OSError, UnicodeDecodeError):
        return set()


def remember_placed(uuid: str) -> None:
    known = placed() | {uuid}
    _write(placed_file(), "".join(f"{item}\n" for item in sorted(known)))


def _write(path: str, content) -> None:
    """Whole or not at all: a new file renamed over the old one."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    temporary = f"{path}.new"
    with open(temporary, "w", encoding="utf-8") as stream:
        if isinstance(content, str):
            stream.write(content)
        else:
            content.write(stream)
    os.replace(temporary, path)
