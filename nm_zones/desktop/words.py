"""The words the desktop programs show, translatable (gettext domain `nm-zones`), without
GLib: the tray's menu is built from them in tests that have no PyGObject."""

from __future__ import annotations

import gettext
import os

DOMAIN = "nm-zones"
# The catalogs of a pip install are in the package (nm_zones/locale); a distribution's
# package moves them to the system's locale folder, where gettext looks by default.
PACKAGE_LOCALE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              "locale")
_ = gettext.translation(
    DOMAIN, localedir=PACKAGE_LOCALE if os.path.isdir(PACKAGE_LOCALE) else None, fallback=True
).gettext

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
