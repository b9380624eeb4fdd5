"""firewalld's D-Bus names, as NetworkManager and the connection editors use them, and the
small client the `nm-zones` command uses to reach the service (`nm-zones serve`).

Names, signatures, error names and `CODE: detail` messages are firewalld's own, so that
NetworkManager treats nm-zones as it treats firewalld: it matches the `ZONE_ALREADY_SET` and
`UNKNOWN_INTERFACE` prefixes of error messages, and it replays every device's zone when the
name appears or `Reloaded` is emitted. The jeepney library is imported only inside the
functions that talk to the bus.
"""

from __future__ import annotations

import os

from ..errors import FIREWALLD_EXCEPTION, NmZonesError

BUS_NAME = "org.fedoraproject.FirewallD1"
OBJECT_PATH = "/org/fedoraproject/FirewallD1"
MAIN_INTERFACE = "org.fedoraproject.FirewallD1"
ZONE_INTERFACE = "org.fedoraproject.FirewallD1.zone"
# nm-zones' own calls (connection zones and the connections map): not firewalld's namespace
NMZ_INTERFACE = "org.nm_zones.Manager1"
ERROR_NAME = FIREWALLD_EXCEPTION
NOT_AUTHORIZED = "org.fedoraproject.FirewallD1.NotAuthorizedException"

ACTION_ASSIGN = "org.nm-zones.assign"  # assign a zone to a connection or an interface
ACTION_CONFIGURE = "org.nm-zones.configure"  # change the configuration
ACTION_PANIC = "org.nm-zones.panic"  # panic mode on or off (every packet dropped)

SYSTEM_BUS_SOCKET = "/run/dbus/system_bus_socket"
CLIENT_TIMEOUT = 60.0


class FirewallError(NmZonesError):
    """An error as firewalld reports it: `CODE: detail` under ERROR_NAME."""

    def __init__(self, code: str, detail: str):
        self.code, self.detail = code, detail
        self.bus_code = code
        super().__init__(f"{code}: {detail}")

    def lines(self) -> list[str]:
        return [self.detail]


class ServiceError(NmZonesError):
    """The service (or the bus) refused or failed a call; the message is one line."""


def _system_bus_reachable() -> bool:
    address = os.environ.get("DBUS_SYSTEM_BUS_ADDRESS", "")
    if address:
        return True
    return os.path.exists(SYSTEM_BUS_SOCKET)


def call_service(
    interface: str, method: str, signature: str = "", args: tuple = (), timeout=CLIENT_TIMEOUT
) -> tuple | None:
    """Call the service on the system bus; None when no one owns the name (or there is no
    bus). Raises ServiceError with the service's message when the call fails."""
    if not _system_bus_reachable():
        return None
    try:
        from jeepney import DBusAddress, MessageType, new_method_call
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import open_dbus_connection
    except ImportError:
        raise ServiceError("the jeepney library is missing (pip install jeepney)") from None
    try:
        connection = open_dbus_connection("SYSTEM")
    except (OSError, ValueError):
        return None
    with connection:
        try:
            has_owner = connection.send_and_get_reply(
                new_method_call(message_bus, "NameHasOwner", "s", (BUS_NAME,)), timeout=timeout
            )
            if not has_owner.body or not has_owner.body[0]:
                return None
            target = DBusAddress(OBJECT_PATH, bus_name=BUS_NAME, interface=interface)
            reply = connection.send_and_get_reply(
                new_method_call(target, method, signature or None, args), timeout=timeout
            )
        except TimeoutError:
            raise ServiceError(f"{BUS_NAME} did not answer {method} in {timeout:.0f} s") from None
    if reply.header.message_type == MessageType.error:
        from jeepney import HeaderFields

        name = reply.header.fields.get(HeaderFields.error_name, "")
        text = reply.body[0] if reply.body else name
        if name == "org.freedesktop.DBus.Error.UnknownMethod":
            text = f"the owner of {BUS_NAME} is not nm-zones ({text})"
        elif name == NOT_AUTHORIZED:
            text = f"not authorized: {text}"
        raise ServiceError(text)
    return tuple(reply.body)


INTROSPECTION = """\
<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
<node>
  <interface name="org.freedesktop.DBus.Introspectable">
    <method name="Introspect"><arg name="data" type="s" direction="out"/></method>
  </interface>
  <interface name="org.freedesktop.DBus.Peer">
    <method name="Ping"/>
    <method name="GetMachineId"><arg name="machine_uuid" type="s" direction="out"/></method>
  </interface>
  <interface name="org.fedoraproject.FirewallD1">
    <method name="getDefaultZone"><arg type="s" direction="out"/></method>
    <method name="setDefaultZone"><arg name="zone" type="s" direction="in"/></method>
    <method name="reload"/>
    <method name="enablePanicMode"/>
    <method name="disablePanicMode"/>
    <method name="queryPanicMode"><arg type="b" direction="out"/></method>
    <signal name="Reloaded"/>
    <signal name="PanicModeEnabled"/>
    <signal name="PanicModeDisabled"/>
    <signal name="DefaultZoneChanged"><arg name="zone" type="s"/></signal>
  </interface>
  <interface name="org.fedoraproject.FirewallD1.zone">
    <method name="getZones"><arg type="as" direction="out"/></method>
    <method name="getActiveZones"><arg type="a{sa{sas}}" direction="out"/></method>
    <method name="getZoneOfInterface">
      <arg name="interface" type="s" direction="in"/><arg type="s" direction="out"/>
    </method>
    <method name="addInterface">
      <arg name="zone" type="s" direction="in"/><arg name="interface" type="s" direction="in"/>
      <arg type="s" direction="out"/>
    </method>
    <method name="changeZoneOfInterface">
      <arg name="zone" type="s" direction="in"/><arg name="interface" type="s" direction="in"/>
      <arg type="s" direction="out"/>
    </method>
    <method name="changeZone">
      <arg name="zone" type="s" direction="in"/><arg name="interface" type="s" direction="in"/>
      <arg type="s" direction="out"/>
    </method>
    <method name="removeInterface">
      <arg name="zone" type="s" direction="in"/><arg name="interface" type="s" direction="in"/>
      <arg type="s" direction="out"/>
    </method>
    <signal name="InterfaceAdded">
      <arg name="zone" type="s"/><arg name="interface" type="s"/>
    </signal>
    <signal name="ZoneOfInterfaceChanged">
      <arg name="zone" type="s"/><arg name="interface" type="s"/>
    </signal>
    <signal name="InterfaceRemoved">
      <arg name="zone" type="s"/><arg name="interface" type="s"/>
    </signal>
  </interface>
  <interface name="org.nm_zones.Manager1">
    <method name="AssignConnection">
      <arg name="connection" type="s" direction="in"/><arg name="zone" type="s" direction="in"/>
      <arg name="changes" type="as" direction="out"/>
    </method>
    <method name="SetMapZone">
      <arg name="key" type="s" direction="in"/><arg name="zone" type="s" direction="in"/>
      <arg name="changes" type="as" direction="out"/>
    </method>
    <method name="SetEnabled">
      <arg name="enabled" type="b" direction="in"/>
      <arg name="changes" type="as" direction="out"/>
    </method>
    <method name="GetConnections">
      <arg name="connections" type="aa{ss}" direction="out"/>
    </method>
    <method name="GetZoneDescriptions">
      <arg name="descriptions" type="a{ss}" direction="out"/>
    </method>
    <method name="GetSettings"><arg name="settings" type="a{ss}" direction="out"/></method>
    <method name="GetZone">
      <arg name="zone" type="s" direction="in"/><arg name="details" type="a{sv}" direction="out"/>
    </method>
    <method name="EditZone">
      <arg name="zone" type="s" direction="in"/><arg name="what" type="s" direction="in"/>
      <arg name="add" type="b" direction="in"/><arg name="changes" type="as" direction="out"/>
    </method>
    <method name="RevokeAllowance">
      <arg name="zone" type="s" direction="in"/><arg name="interface" type="s" direction="in"/>
      <arg name="what" type="s" direction="in"/><arg name="changes" type="as" direction="out"/>
    </method>
    <method name="GetDeniedPackets">
      <arg name="zone" type="s" direction="in"/><arg name="packets" type="aa{ss}" direction="out"/>
    </method>
    <signal name="ZoneChanged"><arg name="change" type="a{ss}"/></signal>
    <signal name="SettingsChanged"/>
    <method name="GetNetworks"><arg name="networks" type="aa{ss}" direction="out"/></method>
    <method name="SetNetworkZone">
      <arg name="id" type="s" direction="in"/><arg name="zone" type="s" direction="in"/>
      <arg name="changes" type="as" direction="out"/>
    </method>
    <method name="RenameNetwork">
      <arg name="id" type="s" direction="in"/><arg name="label" type="s" direction="in"/>
      <arg name="changes" type="as" direction="out"/>
    </method>
    <method name="ForgetNetwork">
      <arg name="id" type="s" direction="in"/>
      <arg name="changes" type="as" direction="out"/>
    </method>
    <signal name="NetworksChanged"/>
    <signal name="ListenerRefused"><arg name="question" type="a{ss}"/></signal>
    <method name="AnswerListener">
      <arg name="question" type="a{ss}" direction="in"/>
      <arg name="answer" type="s" direction="in"/>
      <arg name="changes" type="as" direction="out"/>
    </method>
    <method name="ForgetListenerAnswer">
      <arg name="app" type="s" direction="in"/><arg name="key" type="s" direction="in"/>
      <arg name="changes" type="as" direction="out"/>
    </method>
    <method name="GetListenerAnswers">
      <arg name="answers" type="aa{ss}" direction="out"/>
    </method>
  </interface>
</node>
"""


def child_introspection(children: list[str]) -> str:
    """Introspection of a path above the object: only the way down."""
    nodes = "".join(f'  <node name="{name}"/>\n' for name in children)
    return (
        '<!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"\n'
        ' "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">\n'
        f"<node>\n{nodes}</node>\n"
    )
