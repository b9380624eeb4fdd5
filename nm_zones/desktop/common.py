"""What both desktop programs share: translations, the service on the system bus (through
GDBus), the user's own settings and the agent's memory of the connections it placed."""

from __future__ import annotations

import configparser
import os
from collections.abc import Callable

from gi.repository import Gio, GLib

from ..doors.busapi import BUS_NAME, NMZ_INTERFACE, NOT_AUTHORIZED, OBJECT_PATH
from .words import (  # noqa: F401 - the programs import the words from here too
    DEFAULT_REASONS,
    DOMAIN,
    LIKELY_ZONES,
    _,
    reason_text,
    zone_label,
)

NM_BUS = "org.freedesktop.NetworkManager"
CALL_TIMEOUT_MS = 130_000  # polkit may ask a human for a password
READ_TIMEOUT_MS = 5_000


def run_until_signalled(ready: Callable[[], None] = lambda: None) -> None:
    """The GLib main loop of a session program, until SIGTERM or SIGINT."""
    loop = GLib.MainLoop()
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, 15, loop.quit)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, 2, loop.quit)
    ready()
    loop.run()


class ServiceError(Exception):
    """A refused or failed call; `not_authorized` when polkit said no."""

    def __init__(self, message: str, not_authorized: bool = False):
        self.not_authorized = not_authorized
        super().__init__(message)


def service_error(error: GLib.Error) -> ServiceError:
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

    def read(self, method: str, reply_type: str, args: GLib.Variant | None = None):
        """A read (open to everyone): its value; ServiceError when it fails."""
        try:
            reply = self.bus.call_sync(
                BUS_NAME,
                OBJECT_PATH,
                NMZ_INTERFACE,
                method,
                args,
                GLib.VariantType(f"({reply_type})"),
                Gio.DBusCallFlags.NONE,
                READ_TIMEOUT_MS,
                None,
            )
        except GLib.Error as error:
            raise service_error(error) from None
        return reply.unpack()[0]

    def change(
        self,
        method: str,
        args: GLib.Variant,
        done: Callable[[list[str] | None, ServiceError | None], None],
        interface: str = NMZ_INTERFACE,
    ) -> None:
        """A change, asynchronously (polkit may ask): `done(lines, None)` or
        `done(None, error)`. nm-zones' own methods answer with the lines of what changed;
        firewalld's (`interface` ZONE_INTERFACE) with the zone's name only: no lines."""

        def finished(bus, result):
            try:
                reply = bus.call_finish(result)
            except GLib.Error as error:
                done(None, service_error(error))
                return
            value = reply.unpack()
            done(list(value[0]) if interface == NMZ_INTERFACE else [], None)

        self.bus.call(
            BUS_NAME,
            OBJECT_PATH,
            interface,
            method,
            args,
            GLib.VariantType("(as)") if interface == NMZ_INTERFACE else None,
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
