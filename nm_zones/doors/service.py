"""`nm-zones serve`: NetworkManager's front door. A resident process on the system bus that
owns firewalld's name, `org.fedoraproject.FirewallD1`, and answers the calls NetworkManager
and the connection editors make (doors/busapi.py has the names and signatures).

NetworkManager calls `changeZoneOfInterface(zone, interface)` in activation stage 3, before
any address is configured, and waits for the reply; it calls it again when `connection.zone`
of an active connection changes (no dispatcher event comes then), and `removeInterface` on
deactivation. Each call runs the same engine as the dispatcher hook, in this process (one
loaded backend, one compiled config refreshed when a config file changes), under the same
state lock. An empty zone means "nm-zones decides": the service asks NetworkManager which
profile is active on the interface and applies resolve.decide_zone, as the hook does, and it
records the inputs the hook will compute for the same profile (quick.inputs_key), so the
hook's `pre-up`/`up` that follow are no-ops.

Changes need root or polkit (org.nm-zones.assign, org.nm-zones.configure, org.nm-zones.panic);
reads are open.
The D-Bus plumbing is jeepney's (messages, authentication, asyncio transport); this module
only routes method calls and matches replies to its own outgoing calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading

from jeepney import (
    DBusAddress,
    HeaderFields,
    MessageFlag,
    MessageType,
    new_error,
    new_method_call,
    new_method_return,
    new_signal,
)
from jeepney.io.asyncio import open_dbus_connection

from ..backends import choose
from ..backends.nftables.appsets import keep
from ..config.load import load
from ..config.mapfile import set_map_zone
from ..engine import REASON_DBUS, Engine
from ..errors import NmZonesError, UsageError, describe
from ..ifname import check_interface, interface_index, matches_exempt
from ..linkwatch import LinkWatch
from ..networks.zone import quick_after
from ..networks.zone import recorded as recorded_network
from ..paths import Paths, config_fingerprint
from ..quick import inputs_key
from ..resolve import Connection, decide_zone, not_allowed
from ..state import Status
from ..text import shorten, shown_arguments
from . import firewalld_props as props
from . import firewalld_sources, networks_bus
from .busapi import (
    ACTION_ASSIGN,
    ACTION_CONFIGURE,
    ACTION_PANIC,
    BUS_NAME,
    ERROR_NAME,
    INTROSPECTION,
    MAIN_INTERFACE,
    NMZ_INTERFACE,
    NOT_AUTHORIZED,
    OBJECT_PATH,
    ZONE_INTERFACE,
    FirewallError,
    child_introspection,
)
from .direct import ACTION_DIRECT, DIRECT_INTERFACE, passthrough
from .direct import introspection as direct_introspection
from .expiry import expire_at_deadlines
from .firewalld_objects import ConfigObjects
from .firewalld_props import PROPERTIES_INTERFACE, PropertyError
from .firewalld_zone import PendingInterfaces, RuntimeZones, method_xml
from .limits import RefusalLog, bounded_reply, too_large
from .listeners_bus import ListenerWatch
from .memory import GiveBack, share_one_arena
from .networks import assign_on_bus
from .nflog import DeniedPackets
from .nm import assign, disable, enable
from .service_log import LOG_LIMIT, log
from .zone_editor import edit_zone, revoke_allowance, zone_details

NM_BUS = "org.freedesktop.NetworkManager"
NM_PATH = "/org/freedesktop/NetworkManager"
NM_DEVICE = "org.freedesktop.NetworkManager.Device"
NM_ACTIVE = "org.freedesktop.NetworkManager.Connection.Active"
NM_SETTINGS = "org.freedesktop.NetworkManager.Settings"
NM_PROFILE = "org.freedesktop.NetworkManager.Settings.Connection"
POLKIT_BUS = "org.freedesktop.PolicyKit1"
POLKIT_PATH = "/org/freedesktop/PolicyKit1/Authority"
POLKIT_INTERFACE = "org.freedesktop.PolicyKit1.Authority"
PROPERTIES = "org.freedesktop.DBus.Properties"

# firewalld's unit, once enabled, has this alias: its presence means firewalld starts at boot
FIREWALLD_ENABLED = "/etc/systemd/system/dbus-org.fedoraproject.FirewallD1.service"
NAME_FLAG_DO_NOT_QUEUE = 4
NAME_PRIMARY_OWNER = 1
CALL_TIMEOUT = 25.0
POLKIT_TIMEOUT = 120.0  # an authentication dialog may be answered by a human
ALLOW_USER_INTERACTION = 1
MAP_KEYS = ("default-zone", "wired-zone", "wireless-zone")
SUMMARY_AFTER = 2.0  # seconds between the summaries of refusals held back (limits.RefusalLog)
CACHE_LIMIT = 4096
NM_DEVICES = (  # a device appears: a binding made before it existed applies now
    f"type='signal',sender='{NM_BUS}',interface='{NM_BUS}',member='DeviceAdded'"
)
NM_RESTARTS = (
    "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',"
    f"member='NameOwnerChanged',arg0='{NM_BUS}'"
)


class Refused(NmZonesError):
    """The service cannot start; the message says why, on one line."""


class BusCallFailed(NmZonesError):
    def __init__(self, name: str, text: str):
        self.name = name
        super().__init__(f"{name}: {text}")


class Bus:
    """One connection to the system bus: sends, matches replies to our calls, and hands
    every incoming method call to `on_call`."""

    def __init__(self, connection):
        self.connection = connection
        self.unique_name = connection.unique_name
        self._fields, self._types = HeaderFields, MessageType
        self._pending: dict[int, asyncio.Future] = {}
        self._serials = connection.outgoing_serial

    async def send(self, message) -> None:
        await self.connection.send(message)

    async def call(
        self,
        destination: str,
        path: str,
        interface: str,
        method: str,
        signature: str | None = None,
        body: tuple = (),
        timeout: float = CALL_TIMEOUT,
    ) -> tuple:
        """The body of the reply; BusCallFailed on an error reply."""
        message = new_method_call(
            DBusAddress(path, bus_name=destination, interface=interface), method, signature, body
        )
        serial = next(self._serials)
        future = asyncio.get_running_loop().create_future()
        self._pending[serial] = future
        try:
            await self.connection.send(message, serial=serial)
            reply = await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(serial, None)
        if reply.header.message_type == self._types.error:
            name = reply.header.fields.get(self._fields.error_name, "")
            text = reply.body[0] if reply.body and isinstance(reply.body[0], str) else ""
            raise BusCallFailed(name, text)
        return reply.body

    async def run(self, on_call, on_signal) -> None:
        """Until the bus goes away (EOFError)."""
        while True:
            message = await self.connection.receive()
            kind = message.header.message_type
            if kind in (self._types.method_return, self._types.error):
                serial = message.header.fields.get(self._fields.reply_serial)
                future = self._pending.get(serial)
                if future is not None and not future.done():
                    future.set_result(message)
            elif kind == self._types.method_call:
                on_call(message)
            elif kind == self._types.signal:
                on_signal(message)


class Request:
    """One incoming method call."""

    def __init__(self, message):
        fields = message.header.fields
        self.message = message
        self.sender: str = fields.get(HeaderFields.sender, "")
        self.path: str = fields.get(HeaderFields.path, "")
        self.interface: str = fields.get(HeaderFields.interface, "")
        self.member: str = fields.get(HeaderFields.member, "")
        self.signature: str = fields.get(HeaderFields.signature, "")
        self.body: tuple = tuple(message.body)
        self.size: int = message.header.body_length  # bytes of the arguments, as sent
        self.wants_reply = not message.header.flags & MessageFlag.no_reply_expected


# (interface, member) -> (input signature, output signature, polkit action or None, handler)
def _methods(service: ZoneService) -> dict:
    return {
        (MAIN_INTERFACE, "getDefaultZone"): ("", "s", None, service.get_default_zone),
        (MAIN_INTERFACE, "setDefaultZone"): ("s", "", ACTION_CONFIGURE, service.set_default_zone),
        (MAIN_INTERFACE, "reload"): ("", "", ACTION_CONFIGURE, service.reload),
        (MAIN_INTERFACE, "enablePanicMode"): ("", "", ACTION_PANIC, service.enable_panic),
        (MAIN_INTERFACE, "disablePanicMode"): ("", "", ACTION_PANIC, service.disable_panic),
        (MAIN_INTERFACE, "queryPanicMode"): ("", "b", None, service.query_panic),
        (ZONE_INTERFACE, "getZones"): ("", "as", None, service.get_zones),
        (ZONE_INTERFACE, "getActiveZones"): ("", "a{sa{sas}}", None, service.get_active_zones),
        (ZONE_INTERFACE, "getZoneOfInterface"): ("s", "s", None, service.get_zone_of_interface),
        (ZONE_INTERFACE, "addInterface"): ("ss", "s", ACTION_ASSIGN, service.add_interface),
        (ZONE_INTERFACE, "changeZoneOfInterface"): ("ss", "s", ACTION_ASSIGN, service.change_zone),
        (ZONE_INTERFACE, "changeZone"): ("ss", "s", ACTION_ASSIGN, service.change_zone),
        (ZONE_INTERFACE, "removeInterface"): ("ss", "s", ACTION_ASSIGN, service.remove_interface),
        (ZONE_INTERFACE, "getInterfaces"): ("s", "as", None, service.get_interfaces),
        (ZONE_INTERFACE, "queryInterface"): ("ss", "b", None, service.query_interface),
        (DIRECT_INTERFACE, "passthrough"): ("sas", "s", ACTION_DIRECT, service.passthrough),
        (DIRECT_INTERFACE, "getAllPassthroughs"): ("", "a(sas)", None, service.no_passthroughs),
        (DIRECT_INTERFACE, "removeAllPassthroughs"): ("", "", ACTION_DIRECT, service.nothing),
        (NMZ_INTERFACE, "AssignConnection"): ("ss", "as", ACTION_ASSIGN, service.assign),
        (NMZ_INTERFACE, "SetMapZone"): ("ss", "as", ACTION_CONFIGURE, service.set_map_zone),
        (NMZ_INTERFACE, "SetEnabled"): ("b", "as", ACTION_CONFIGURE, service.set_enabled),
        (NMZ_INTERFACE, "GetConnections"): ("", "aa{ss}", None, service.get_connections),
        (NMZ_INTERFACE, "GetZoneDescriptions"): ("", "a{ss}", None, service.get_descriptions),
        (NMZ_INTERFACE, "GetSettings"): ("", "a{ss}", None, service.get_settings),
        **service.runtime_zones.methods(),  # firewall-cmd's (doors/firewalld_zone.py)
        (NMZ_INTERFACE, "GetZone"): ("s", "a{sv}", None, service.get_zone),
        (NMZ_INTERFACE, "EditZone"): ("ssb", "as", ACTION_CONFIGURE, service.edit_zone),
        (NMZ_INTERFACE, "RevokeAllowance"): ("sss", "as", ACTION_CONFIGURE, service.revoke),
        (NMZ_INTERFACE, "GetDeniedPackets"): ("s", "aa{ss}", None, service.get_denied),
        **networks_bus.methods(service),  # GetNetworks, SetNetworkZone, ...
        **service.listeners.methods(),  # AnswerListener, ... (doors/listeners_bus.py)
        **firewalld_sources.methods(service),
    }


class ZoneService:
    """The methods; every change runs under `self.mutex` (in arrival order, after its
    authorization), in a worker thread so that reads and polkit checks go on meanwhile."""

    def __init__(self, paths: Paths, bus: Bus):
        self.paths, self.bus = paths, bus
        self.mutex = asyncio.Lock()
        self.runtime_zones = RuntimeZones(self)
        self.pending = PendingInterfaces()  # bound before they exist
        self.listeners = ListenerWatch(self)  # programs refused: questions, answers
        self.denied = DeniedPackets()  # what log-denied zones refused (doors/nflog.py)
        self.methods = _methods(self)
        self.config_objects = ConfigObjects(self, log)
        self._compiled = None
        self._compiled_key: tuple | None = None
        self._backend = None
        self.links = LinkWatch()  # no bound interface can be gone while it hears nothing
        self._tasks: set[asyncio.Task] = set()
        self.refusals = RefusalLog()  # what callers make the service log, rate-limited
        self._summary: asyncio.TimerHandle | None = None
        self.memory = GiveBack()  # what a burst of calls freed, returned once it is over
        self._descriptions: tuple[tuple | None, dict[str, str]] = (None, {})
        # bus round trips saved on every call; each is only a shortcut to something stable:
        self._uids: dict[str, int] = {}  # unique bus name -> uid (names are never reused)
        self._devices: dict[str, tuple[int, str]] = {}  # interface -> (ifindex, NM device)
        self._profiles: dict[str, str] = {}  # NM active connection -> its profile (settings)

    # -- the engine, shared pieces kept between calls --------------------------------------

    def engine(self, fresh: bool = False, locked: bool = False) -> Engine:
        """A new Engine per call, sharing the compiled config and the opened backend while
        no config file changed; after any change both are taken afresh, so the service
        follows the settings (`backend:` included) exactly as the command does and the two
        never move the rules back and forth. `locked`: for a call whose engine runs under
        the state lock before it reads the config, where it looks for changes itself
        (Engine.begin), so the files are not looked at twice."""
        followed = locked and not fresh and self._compiled_key is not None
        key = self._compiled_key if followed else config_fingerprint(self.paths)
        if fresh or key != self._compiled_key:
            self._compiled, self._compiled_key, self._backend = None, key, None
        engine = Engine(
            self.paths,
            use_cache=not fresh,
            compiled=self._compiled,
            backend=self._backend,
            links=self.links,
        )
        self._compiled = engine.compiled
        return engine

    def finish(self, engine: Engine) -> list[str]:
        """Keep what the engine built for the next call; log its changes and warnings."""
        if engine._backend is not None:
            self._backend = engine._backend
        if engine._compiled is not None and engine._compiled is not self._compiled:
            # the engine found the config changed under the lock, and read it again
            self._compiled, self._compiled_key = engine._compiled, engine._compiled.key[2]
        engine.report().show("nm-zones serve", changes_to=sys.stderr, prefix_changes=True)
        return [str(change) for change in engine.changes]

    def locked(self, engine: Engine, work):
        """`work(state)` under the state lock, after what every run does first
        (engine.prepare: the kernel made to hold what the state says); while nm-zones is
        disabled, an interrupted disable is finished instead of prepare."""
        with engine.state_dir.locked():
            state = engine.state_dir.load()
            engine.begin(state)
            return work(state)

    def start(self) -> None:
        """At start: finish what an interrupted run left, drop gone interfaces, and make sure
        the hooks and the catch-all are in place."""
        engine = self.engine()
        self.locked(engine, lambda state: None)  # prepare() installs hooks and catch-all
        self.finish(engine)

    async def expire(self) -> None:
        """Timed allowances at their deadline (doors/expiry.py): their rules leave the
        kernel now, in turn with the calls; an error is logged and tried again."""
        engine = self.engine()
        try:
            async with self.mutex:
                await self.in_worker(engine, lambda state: None)  # prepare() expires them
        except FirewallError as error:
            log(f"timed allowances: {error}", warning=True)

    # -- calls -----------------------------------------------------------------------------

    def signalled(self, message) -> None:
        """NetworkManager restarted (its name changed owner): its object paths start over."""
        if message.header.fields.get(HeaderFields.member) == "DeviceAdded":
            if self.pending.zones and message.body:
                self.keep(self.device_added(message.body[0]))
        elif message.body[:1] == (NM_BUS,):
            self._devices.clear()
            self._profiles.clear()

    def keep(self, coroutine) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def device_added(self, device: str) -> None:
        """Apply a binding made before the interface existed."""
        try:
            interface = await self.nm_property(device, NM_DEVICE, "Interface")
        except (TimeoutError, BusCallFailed):
            return
        zone = self.pending.zones.get(interface)
        if zone is None:
            return
        async with self.mutex:
            if self.pending.zones.get(interface) != zone:
                return
            del self.pending.zones[interface]
            try:
                await self.bind(zone, interface, adding=False)
            except FirewallError as error:
                log(f"{interface} appeared; its zone {zone} could not be applied: {error}", True)

    def received(self, message) -> None:
        self.keep(self.dispatch(Request(message)))

    async def dispatch(self, request: Request) -> None:
        def error_reply(name: str, text: str):
            return new_error(request.message, name, "s", (bounded_reply(text, request.body),))

        try:
            signature, body = await self.answer(request)
            reply = new_method_return(request.message, signature or None, body)
        except Exception as error:  # one bad call must not end the service
            reply = error_reply(*self.failed_call(request, error))
        if request.wants_reply:
            await self.bus.send(reply)
        self.memory.after_work()

    def failed_call(self, request: Request, error: Exception) -> tuple[str, str]:
        """The service's one error handler for calls: the D-Bus error name and text of a
        refused call, as its error carries them (errors.py); any other error did not mean
        to answer a caller (a bug, a failure in a handler): logged, answered COMMAND_FAILED."""
        if isinstance(error, (FirewallError, NotAuthorized, UnknownCall, PropertyError)):
            return error.bus_name, error.bus_message()
        self.log_about(request, f"internal error: {type(error).__name__}: {error}", True)
        return ERROR_NAME, f"COMMAND_FAILED: {error}"

    def log_about(self, request: Request, what: str, warning: bool = False) -> None:
        """A line about a caller's call (its arguments shortened), unless the caller has had
        its share of lines (limits.RefusalLog): then it is counted for a summary."""
        if self.refusals.admit(request.sender):
            call = f"{request.member}{shown_arguments(request.body)}"
            log(f"{call} from {request.sender}: {shorten(what, LOG_LIMIT // 2)}", warning)
        elif self._summary is None:
            loop = asyncio.get_running_loop()
            self._summary = loop.call_later(SUMMARY_AFTER, self._log_summaries)

    def _log_summaries(self) -> None:
        self._summary = None
        for line in self.refusals.summaries():
            log(line)

    async def answer(self, request: Request) -> tuple[str, tuple]:
        refusal = too_large(request.size)
        if refusal:  # before polkit is asked: junk costs no round trip
            self.log_about(request, f"refused ({refusal})")
            raise FirewallError("INVALID_VALUE", refusal)
        if request.interface == "org.freedesktop.DBus.Introspectable":
            return "s", (self.introspect(request.path),)
        if request.interface == "org.freedesktop.DBus.Peer":
            if request.member == "GetMachineId":
                return "s", (_machine_id(),)
            return "", ()
        methods = self.methods if request.path == OBJECT_PATH else None
        if request.interface == PROPERTIES_INTERFACE and methods is not None:
            methods = properties_methods()
        elif methods is None:
            methods = self.config_objects.methods(request.path)
        if methods is None:
            raise UnknownCall("org.freedesktop.DBus.Error.UnknownObject", request.path)
        found = methods.get((request.interface, request.member))
        if found is None and not request.interface:  # the interface header is optional
            found = next((m for (i, name), m in methods.items() if name == request.member), None)
        if found is None:
            raise UnknownCall(
                "org.freedesktop.DBus.Error.UnknownMethod",
                f"no method {request.member} on {request.interface or 'any interface'}",
            )
        in_signature, out_signature, action, handler = found
        if request.signature not in in_signature.split("|"):
            raise UnknownCall(
                "org.freedesktop.DBus.Error.InvalidArgs",
                f"{request.member} takes ({in_signature}), not ({request.signature})",
            )
        if action is None:
            return out_signature, await handler(*request.body)
        if not await self.authorized(request, action):
            self.log_about(request, f"refused ({action})")
            raise NotAuthorized(f"Not Authorized(polkit): {action}")
        async with self.mutex:
            return out_signature, await handler(*request.body)

    def introspect(self, path: str) -> str:
        if path == OBJECT_PATH:
            return firewalld_introspection(INTROSPECTION)
        if path.startswith(f"{OBJECT_PATH}/"):
            return self.config_objects.introspect(path) or child_introspection([])
        parts = [p for p in OBJECT_PATH.split("/") if p]
        here = [p for p in path.split("/") if p]
        if here == parts[: len(here)]:
            return child_introspection([parts[len(here)]])
        return child_introspection([])

    async def authorized(self, request: Request, action: str) -> bool:
        """root always; anyone else as polkit decides (no polkit: nobody else)."""
        sender = request.sender
        uid = self._uids.get(sender)
        if uid is None:
            try:
                (uid,) = await self.bus.call(
                    "org.freedesktop.DBus",
                    "/org/freedesktop/DBus",
                    "org.freedesktop.DBus",
                    "GetConnectionUnixUser",
                    "s",
                    (sender,),
                )
            except BusCallFailed:
                return False
            if len(self._uids) > CACHE_LIMIT:
                self._uids.clear()
            self._uids[sender] = uid
        if uid == 0:
            return True
        subject = ("system-bus-name", {"name": ("s", sender)})
        try:
            result = await self.bus.call(
                POLKIT_BUS,
                POLKIT_PATH,
                POLKIT_INTERFACE,
                "CheckAuthorization",
                "(sa{sv})sa{ss}us",
                (subject, action, {}, ALLOW_USER_INTERACTION, ""),
                timeout=POLKIT_TIMEOUT,
            )
        except (TimeoutError, BusCallFailed) as error:
            self.log_about(request, f"polkit could not decide {action} (uid {uid}): {error}", True)
            return False
        return bool(result[0][0])

    # -- NetworkManager --------------------------------------------------------------------

    async def nm_property(self, path: str, interface: str, name: str):
        (value,) = await self.bus.call(NM_BUS, path, PROPERTIES, "Get", "ss", (interface, name))
        return value[1]

    async def nm_profile(self, interface: str):
        """(Connection, the dispatcher variables NM would pass for it) of the profile active
        on `interface`; (Connection(found=False), {}) when NetworkManager knows none."""
        try:
            device = await self.nm_device(interface, interface_index(interface))
            active = await self.nm_property(device, NM_DEVICE, "ActiveConnection")
            if active == "/":
                return Connection(found=False), {}
            profile = self._profiles.get(active)
            if profile is None:
                profile = await self.nm_property(active, NM_ACTIVE, "Connection")
                if len(self._profiles) > CACHE_LIMIT:
                    self._profiles.clear()
                self._profiles[active] = profile
            (settings,), filename = await asyncio.gather(
                self.bus.call(NM_BUS, profile, NM_PROFILE, "GetSettings"),
                self.nm_property(profile, NM_PROFILE, "Filename"),
            )
        except (TimeoutError, BusCallFailed, ValueError, TypeError):
            self._devices.pop(interface, None)
            return Connection(found=False), {}
        connection = _connection_from_settings(settings)
        env = {
            "CONNECTION_UUID": connection.uuid,
            "CONNECTION_ID": connection.id,
            "CONNECTION_FILENAME": filename,
        }
        return connection, env

    async def nm_device(self, interface: str, ifindex: int) -> str:
        """NetworkManager's device object for the interface, kept while its index is."""
        known = self._devices.get(interface)
        if known and known[0] == ifindex:
            return known[1]
        (device,) = await self.bus.call(
            NM_BUS, NM_PATH, NM_BUS, "GetDeviceByIpIface", "s", (interface,)
        )
        if len(self._devices) > CACHE_LIMIT:
            self._devices.clear()
        self._devices[interface] = (ifindex, device)
        return device

    async def profile_zones(self) -> set[str]:
        """Every zone a NetworkManager profile names (editors drop a zone not listed)."""
        zones = set()
        try:
            (paths,) = await self.bus.call(
                NM_BUS, f"{NM_PATH}/Settings", NM_SETTINGS, "ListConnections"
            )
            for path in paths:
                (settings,) = await self.bus.call(NM_BUS, path, NM_PROFILE, "GetSettings")
                zone = settings.get("connection", {}).get("zone", ("s", ""))[1]
                if zone:
                    zones.add(zone)
        except (TimeoutError, BusCallFailed):
            pass
        return zones

    # -- signals ---------------------------------------------------------------------------

    async def emit(
        self, interface: str, name: str, signature: str = "", body: tuple = (), path=OBJECT_PATH
    ):
        emitter = DBusAddress(path, interface=interface)
        await self.bus.send(new_signal(emitter, name, signature or None, body))

    # -- read-only methods -----------------------------------------------------------------

    async def get_default_zone(self) -> tuple:
        return (self.engine().compiled.default_zone,)

    async def get_zones(self) -> tuple:
        return (sorted(self.engine().known_zones() | await self.profile_zones()),)

    async def get_active_zones(self) -> tuple:
        engine = self.engine()
        # only zones with something bound, and only the keys that list something: the
        # catch-all binds nothing (as in firewalld)
        active: dict[str, dict[str, list[str]]] = {}
        for name, binding in sorted(engine.state_dir.load().interfaces.items()):
            if binding.status in Status.IN_KERNEL:
                entry = active.setdefault(binding.zone, {"interfaces": []})
                entry["interfaces"].append(name)
        for name, zone in sorted(self.pending.zones.items()):
            active.setdefault(zone, {"interfaces": []})["interfaces"].append(name)
        state = engine.state_dir.load()
        firewalld_sources.add_active(active, engine.compiled.source_bindings(state.sources))
        return (active,)

    async def get_zone_of_interface(self, interface: str) -> tuple:
        binding = self.engine().state_dir.load().interfaces.get(interface)
        if binding and binding.status in Status.IN_KERNEL:
            return (binding.zone,)
        return (self.pending.zones.get(interface, ""),)

    async def get_interfaces(self, zone: str) -> tuple:
        """The interfaces bound to `zone` (Docker asks before adding docker0)."""
        engine = self.engine()
        if zone and zone not in engine.known_zones():
            raise FirewallError("INVALID_ZONE", zone)
        zone = zone or engine.compiled.default_zone
        bindings = engine.state_dir.load().interfaces
        bound = [
            name
            for name, binding in bindings.items()
            if binding.zone == zone and binding.status in Status.IN_KERNEL
        ]
        return (sorted(bound + self.pending.in_zone(zone)),)

    async def query_interface(self, zone: str, interface: str) -> tuple:
        return (interface in (await self.get_interfaces(zone))[0],)

    # -- firewalld's direct interface (doors/direct.py) -------------------------------------

    async def passthrough(self, ipv: str, args: list[str]) -> tuple:
        return (await asyncio.to_thread(passthrough, ipv, args),)

    async def no_passthroughs(self) -> tuple:
        """nm-zones runs passthroughs, it does not keep them (no addPassthrough)."""
        return ([],)

    async def nothing(self) -> tuple:
        return ()

    # -- changes ---------------------------------------------------------------------------

    async def add_interface(self, zone: str, interface: str) -> tuple:
        return await self.bind(zone, interface, adding=True)

    async def change_zone(self, zone: str, interface: str) -> tuple:
        return await self.bind(zone, interface, adding=False)

    async def bind(self, zone: str, interface: str, adding: bool) -> tuple:
        _check_name(interface)
        if self.paths.disabled:
            return (zone,)
        if not interface_index(interface):  # bound when it appears (device_added)
            engine = self.engine()
            target = zone or engine.compiled.default_zone
            if target not in engine.known_zones():
                raise FirewallError("INVALID_ZONE", target)
            self.pending.add(target, interface, adding)
            signal_name = "InterfaceAdded" if adding else "ZoneOfInterfaceChanged"
            await self.emit(ZONE_INTERFACE, signal_name, "ss", (target, interface))
            return (target,)
        self.pending.zones.pop(interface, None)
        connection, env = await self.nm_profile(interface)
        engine = self.engine(locked=True)  # everything below runs in work(), under the lock

        def work(state):
            known = engine.known_zones()
            decision = decide_zone(connection, engine.compiled, known)
            # NetworkManager passes the profile's own zone: that zone has only the
            # authority of whoever may edit the profile (resolve.py)
            from_profile = zone == connection.zone and not_allowed(zone) in decision.reason
            if zone == "" or from_profile:
                decision = engine.decide(connection)  # logs a missing or refused zone
                # a replay (a restart of this service) keeps an identified network's zone
                bound = state.interfaces.get(interface)
                decision = recorded_network(engine, interface, connection, decision, bound)
                target, reason = decision.zone, decision.reason
            elif zone not in known:
                raise FirewallError("INVALID_ZONE", zone)
            else:
                target = zone
                # a zone named by the caller, not one it fell to, is an explicit binding
                agreed = decision.zone == zone and decision.reason != "default-zone"
                reason = decision.reason if agreed else REASON_DBUS
            if matches_exempt(interface, engine.compiled.exempt_interfaces):
                reason = REASON_DBUS  # a claim: it binds an interface nobody else filters
            old = state.interfaces.get(interface)
            if adding and old is not None and old.status == Status.APPLIED:
                code = "ZONE_ALREADY_SET" if old.zone == target else "ZONE_CONFLICT"
                raise FirewallError(code, f"'{interface}' already bound to '{old.zone}'")
            if not interface_index(interface):
                raise FirewallError("INVALID_INTERFACE", f"'{interface}' does not exist")
            agrees = connection.found and decision.zone == target
            agrees = agrees and quick_after(connection, engine.compiled)  # `up` identifies
            inputs = inputs_key(self.paths, env) if agrees else ""
            change = engine.apply_interface(interface, target, reason, connection, state, inputs)
            return target, change

        target, change = await self.in_worker(engine, work)
        if change is not None:
            signal_name = "InterfaceAdded" if adding else "ZoneOfInterfaceChanged"
            await self.emit(ZONE_INTERFACE, signal_name, "ss", (change.new_zone, interface))
        fulfilled(engine)
        return (target,)

    async def remove_interface(self, zone: str, interface: str) -> tuple:
        _check_name(interface)
        if interface in self.pending.zones:
            removed = self.pending.remove(zone, interface)
            await self.emit(ZONE_INTERFACE, "InterfaceRemoved", "ss", (removed, interface))
            return (removed,)
        engine = self.engine()

        def work(state):
            old = state.interfaces.get(interface)
            if old is None or old.status == Status.DISABLED:
                raise FirewallError("UNKNOWN_INTERFACE", f"'{interface}' is not in any zone")
            if zone and zone != old.zone:
                raise FirewallError(
                    "ZONE_CONFLICT", f"remove_interface({zone}, {interface}): zoi='{old.zone}'"
                )
            engine.remove_interface(interface, "removeInterface over D-Bus", state)
            return old.zone

        removed = await self.in_worker(engine, work)
        await self.emit(ZONE_INTERFACE, "InterfaceRemoved", "ss", (removed, interface))
        return (removed,)

    async def in_worker(self, engine: Engine, work):
        """`work(state)` under the state lock (after the repairs every event makes)."""
        return await self.run_engine(engine, lambda: self.locked(engine, work))

    async def run_engine(self, engine: Engine, action, usage_code: str = "INVALID_INTERFACE"):
        """`action()` in a worker thread, then keep and log what the engine did; the
        engine's errors become firewalld's."""

        def run():
            try:
                return action()
            finally:
                self.finish(engine)

        try:
            return await asyncio.to_thread(run)
        except (NmZonesError, OSError) as error:
            raise as_firewall_error(error, usage_code) from None
        finally:
            await self.announce(engine)

    async def announce(self, engine: Engine) -> None:
        """`ZoneChanged` for every change the engine made: what the desktop front ends
        follow (which connection, from which zone to which, and why)."""
        for change in engine.changes:
            if isinstance(change, str):  # a line of allow/revoke (doors/allow.py), no zone change
                continue
            details = {
                "interface": change.interface,
                "zone": change.new_zone,
                "old-zone": change.old_zone,
                "reason": change.reason,
                "connection": change.connection,
                "uuid": change.uuid,  # the profile it is (or was, when unbound) bound with
                "type": change.connection_type,
                "degraded": change.degraded,  # the zone could not be used as configured
            }
            await self.emit(NMZ_INTERFACE, "ZoneChanged", "a{ss}", (details,))

    async def reload(self) -> tuple:
        await self.reload_dropping_runtime(fresh=False)
        return ()

    async def reload_dropping_runtime(self, fresh: bool) -> None:
        """firewalld's reload: what was changed at runtime ends (ports and services opened,
        zones callers set on interfaces over D-Bus), as with `nm-zones reload`; what
        runtimeToPermanent wrote stays."""
        self.pending.zones.clear()
        await self._reload(fresh, runtime=False)

    async def _reload(self, fresh: bool, runtime: bool = True) -> list[str]:
        """Re-apply what the config now says, keeping the runtime changes when `runtime`
        (a new default zone); after a reload, `Reloaded` makes NetworkManager push the zone
        of every active device again."""
        if self.paths.disabled:
            return []
        engine = self.engine(fresh=fresh)

        def work(state):
            if not runtime:  # firewalld keeps what has a timeout, until it expires
                state.allowances = [a for a in state.allowances if a[0] == "" and a[3]]
            engine.reload(state, keep_explicit=runtime)
            if not runtime:
                engine.save(state)  # allowances that reached no interface end too

        await self.run_engine(engine, lambda: self.locked(engine, work), "COMMAND_FAILED")
        if not runtime:
            await self.emit(MAIN_INTERFACE, "Reloaded")
        fulfilled(engine)
        return [str(change) for change in engine.changes]

    async def make_bindings_permanent(self) -> None:
        """runtimeToPermanent for interfaces: the zone a caller set over D-Bus goes into the
        profile of the connection active on it (as `nm-zones assign`); an interface with no
        NetworkManager connection has nowhere to keep it, and the log says so."""
        engine = self.engine()

        def work(state):
            for name, binding in sorted(state.interfaces.items()):
                if binding.reason != REASON_DBUS or binding.status != Status.APPLIED:
                    continue
                if not binding.connection_uuid:
                    log(f"{name}: zone {binding.zone} stays runtime only (no connection)")
                    continue
                assign(engine, binding.connection_uuid, binding.zone, state)

        await self.in_worker(engine, work)

    async def enable_panic(self) -> tuple:
        await self._set_panic(True)
        return ()

    async def disable_panic(self) -> tuple:
        await self._set_panic(False)
        return ()

    async def query_panic(self) -> tuple:
        return (self.paths.panic,)

    async def _set_panic(self, on: bool) -> None:
        """Panic mode as firewalld's calls ask (engine.set_panic), with its answers when it
        already is so (ALREADY_ENABLED, NOT_ENABLED) and its signals once the kernel holds
        it (PanicModeEnabled, PanicModeDisabled)."""
        engine = self.engine()

        def work(state):
            if on == engine.panic:
                code = "ALREADY_ENABLED" if on else "NOT_ENABLED"
                raise FirewallError(
                    code, "panic mode " + ("already enabled" if on else "is not enabled")
                )
            if on and self.paths.disabled:
                raise FirewallError("NOT_RUNNING", "nm-zones is disabled (nm-zones enable)")
            engine.set_panic(state, on, REASON_DBUS)

        await self.in_worker(engine, work)
        await self.emit(MAIN_INTERFACE, "PanicModeEnabled" if on else "PanicModeDisabled")

    async def set_default_zone(self, zone: str) -> tuple:
        await self._set_map_zone("default-zone", zone)
        return ()

    async def set_map_zone(self, key: str, zone: str) -> tuple:
        return (await self._set_map_zone(key, zone),)

    async def _set_map_zone(self, key: str, zone: str) -> list[str]:
        if key not in MAP_KEYS:
            raise FirewallError("INVALID_VALUE", f"{key!r}: one of {', '.join(MAP_KEYS)}")
        if zone not in self.engine().known_zones() and not (zone == "" and key != MAP_KEYS[0]):
            raise FirewallError("INVALID_ZONE", zone)
        await asyncio.to_thread(set_map_zone, self.paths, key, zone)
        lines = await self._reload(fresh=True)
        if key == "default-zone":  # no Reloaded: NetworkManager's replay would undo bindings
            await self.emit(MAIN_INTERFACE, "DefaultZoneChanged", "s", (zone,))
        else:
            await self.emit(MAIN_INTERFACE, "Reloaded")
        await self.emit(NMZ_INTERFACE, "SettingsChanged")
        return lines

    async def assign(self, connection: str, zone: str) -> tuple:
        """`nm-zones assign` for a caller polkit allows: the zone goes to the network an
        identified connection without a zone of its own is on (doors/networks.py), else
        into the profile; an active connection's interface switches now."""
        engine = self.engine()
        if zone not in engine.known_zones():
            raise FirewallError("INVALID_ZONE", zone)

        said: list[str] = []

        def work(state):
            said.append(assign_on_bus(engine, connection, zone, state))
            if not said[-1]:  # not on an identified network: the profile's zone, as ever
                assign(engine, connection, zone, state)

        await self.run_engine(engine, lambda: self.locked(engine, work), "INVALID_VALUE")
        fulfilled(engine)
        return ([*filter(None, said), *(str(change) for change in engine.changes)],)

    async def set_enabled(self, enabled: bool) -> tuple:
        """`nm-zones enable` / `disable` for a caller polkit allows."""
        engine = self.engine()

        def action():
            if not enabled:
                with engine.state_dir.locked():
                    disable(engine)
                return
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.paths.disabled_flag)
            self.locked(engine, lambda state: enable(engine, state))

        await self.run_engine(engine, action, "COMMAND_FAILED")
        await self.emit(NMZ_INTERFACE, "SettingsChanged")
        if enabled:
            await self.emit(MAIN_INTERFACE, "Reloaded")  # NetworkManager replays every zone
        fulfilled(engine)
        return ([str(change) for change in engine.changes],)

    # -- what the desktop front ends read --------------------------------------------------

    async def get_connections(self) -> tuple:
        """Every interface nm-zones holds a zone for, with its connection and the reason."""
        rows = []
        engine = self.engine()
        for name, binding in sorted(engine.state_dir.load().interfaces.items()):
            rows.append(
                {
                    "interface": name,
                    "zone": binding.zone,
                    "reason": binding.reason,
                    "status": binding.status,
                    "connection": binding.connection_id,
                    "uuid": binding.connection_uuid,
                    "type": binding.connection_type,
                    "degraded": binding.degraded,
                    **networks_bus.identification(engine, name, binding),
                }
            )
        return (rows,)

    async def get_descriptions(self) -> tuple:
        """Every zone with its one-line description."""
        key = config_fingerprint(self.paths)
        if self._descriptions[0] != key:  # read the zone files again only when one changed
            zones = (await asyncio.to_thread(load, self.paths)).config.zones
            known = self.engine().known_zones()
            text = {name: zones[name].description if name in zones else "" for name in known}
            self._descriptions = (key, text)
        return (self._descriptions[1],)

    async def get_settings(self) -> tuple:
        compiled = self.engine().compiled
        return (
            {
                "default-zone": compiled.default_zone,
                "wired-zone": compiled.wired_zone,
                "wireless-zone": compiled.wireless_zone,
                "enabled": "false" if self.paths.disabled else "true",
            },
        )

    # -- the zone editor of nm-zones-settings (doors/zone_editor.py) -----------------------

    async def get_zone(self, zone: str) -> tuple:
        loaded = await asyncio.to_thread(load, self.paths)
        state = self.engine().state_dir.load()
        try:
            return (zone_details(loaded, state, zone),)
        except UsageError as error:
            raise FirewallError("INVALID_ZONE", str(error)) from None

    async def get_denied(self, zone: str) -> tuple:
        """The zone's last refused packets, newest first, from the NFLOG group."""
        return (self.denied.of_zone(zone),)

    async def edit_zone(self, zone: str, what: str, add: bool) -> tuple:
        """`allow|revoke WHAT --zone ZONE --permanent` for a caller polkit allows."""
        return await self._zone_change(
            lambda e, loaded, s: edit_zone(e, loaded, zone, what, add, s)
        )

    async def revoke(self, zone: str, interface: str, what: str) -> tuple:
        """`revoke WHAT --interface IFACE` (or `--zone ZONE`), a runtime allowance."""
        return await self._zone_change(
            lambda e, loaded, s: revoke_allowance(e, loaded, zone, interface, what, s)
        )

    async def _zone_change(self, change) -> tuple:
        engine = self.engine()
        loaded = await asyncio.to_thread(load, self.paths)
        await self.run_engine(
            engine,
            lambda: self.locked(engine, lambda s: change(engine, loaded, s)),
            "INVALID_VALUE",
        )
        await self.emit(NMZ_INTERFACE, "SettingsChanged")
        return ([str(change) for change in engine.changes],)


def properties_methods() -> dict:
    """org.freedesktop.DBus.Properties on the main object (doors/firewalld_props.py)."""

    async def get(interface: str, name: str) -> tuple:
        return (props.get(interface, name),)

    async def get_all(interface: str) -> tuple:
        return (props.get_all(interface),)

    async def set_(interface: str, name: str, value) -> tuple:
        props.refuse_set(interface, name)
        return ()

    return {
        (PROPERTIES_INTERFACE, "Get"): ("ss", "v", None, get),
        (PROPERTIES_INTERFACE, "GetAll"): ("s", "a{sv}", None, get_all),
        (PROPERTIES_INTERFACE, "Set"): ("ssv", "", None, set_),
    }


def firewalld_introspection(base: str) -> str:
    """The main object's introspection with what firewalld's clients use besides
    NetworkManager's calls: the properties, zone.getInterfaces/queryInterface, the direct
    interface, and the config object below."""
    zone_opening = f'<interface name="{ZONE_INTERFACE}">\n'
    extra_zone = (
        '    <method name="getInterfaces"><arg name="zone" type="s" direction="in"/>'
        '<arg type="as" direction="out"/></method>\n'
        '    <method name="queryInterface"><arg name="zone" type="s" direction="in"/>'
        '<arg name="interface" type="s" direction="in"/><arg type="b" direction="out"/>'
        "</method>\n"
    )
    runtime = RuntimeZones(None).methods()  # firewall-cmd's (doors/firewalld_zone.py)
    extra_zone += method_xml(runtime, ZONE_INTERFACE) + firewalld_sources.INTROSPECTION
    main_opening = f'<interface name="{MAIN_INTERFACE}">\n'
    xml = base.replace(zone_opening, zone_opening + extra_zone, 1)
    xml = xml.replace(main_opening, main_opening + method_xml(runtime, MAIN_INTERFACE), 1)
    xml = xml.replace("</node>", f'{direct_introspection()}  <node name="config"/>\n</node>', 1)
    return props.with_properties(xml)


class NotAuthorized(NmZonesError):
    """polkit said no: firewalld's NotAuthorizedException."""

    bus_name = NOT_AUTHORIZED

    def bus_message(self) -> str:
        return str(self)


class UnknownCall(NmZonesError):
    """A method or interface the service does not have, under the bus's own error name."""

    def __init__(self, name: str, text: str):
        self.name = self.bus_name = name
        super().__init__(text)

    def bus_message(self) -> str:
        return str(self)


def as_firewall_error(error: NmZonesError | OSError, usage_code: str) -> FirewallError:
    """An engine's error as firewalld's: bad input under the code the call names
    (`usage_code`), any other under its own code (errors.py)."""
    if isinstance(error, FirewallError):
        return error
    if isinstance(error, UsageError):
        return FirewallError(usage_code, str(error))
    if isinstance(error, NmZonesError):
        return FirewallError(error.bus_code, "; ".join(error.lines()))
    return FirewallError("COMMAND_FAILED", describe(error))  # a full disk, an untrusted file


def fulfilled(engine: Engine) -> None:
    """A zone that could not be used as configured is a failed call, though the interface
    got what stands in for it (engine/binding.py): COMMAND_FAILED says what it got instead."""
    if engine.unfulfilled:
        raise FirewallError("COMMAND_FAILED", "; ".join(engine.unfulfilled.values()))


def _check_name(interface: str) -> None:
    try:
        check_interface(interface)
    except UsageError as error:
        raise FirewallError("INVALID_INTERFACE", str(error)) from None


def _connection_from_settings(settings: dict):
    """resolve.Connection from NetworkManager's GetSettings (a{sa{sv}})."""

    def value(group: str, key: str) -> str | list:
        found = settings.get(group, {}).get(key)
        return found[1] if found else ""

    shared = "shared" in (value("ipv4", "method"), value("ipv6", "method"))
    permissions = value("connection", "permissions")  # `as`, e.g. ['user:alice::']
    return Connection(
        value("connection", "uuid"),
        value("connection", "id"),
        value("connection", "type"),
        value("connection", "zone"),
        shared=shared,
        permissions=";".join(map(str, permissions)) if permissions else "",
    )


def _machine_id() -> str:
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path) as stream:
                return stream.read().strip()
        except OSError:
            continue
    return ""


def _process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as stream:
            words = stream.read().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(w.decode("utf-8", "replace") for w in words if w)
    if "nm_zones" in text or "nm-zones" in text:
        return "another nm-zones serve"
    return os.path.basename(words[0].decode("utf-8", "replace")) if words else "?"


async def claim_name(bus: Bus) -> None:
    """Own the name, or say who does."""
    dbus = ("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus")
    try:
        (result,) = await bus.call(*dbus, "RequestName", "su", (BUS_NAME, NAME_FLAG_DO_NOT_QUEUE))
    except BusCallFailed as error:
        if error.name == "org.freedesktop.DBus.Error.AccessDenied":
            raise Refused(
                f"the system bus does not let this process own {BUS_NAME}: install the "
                "D-Bus policy (nm-zones install) and run as root"
            ) from None
        raise Refused(f"cannot own {BUS_NAME}: {error}") from None
    if result == NAME_PRIMARY_OWNER:
        return
    who = "an unknown process"
    try:
        (owner,) = await bus.call(*dbus, "GetNameOwner", "s", (BUS_NAME,))
        (pid,) = await bus.call(*dbus, "GetConnectionUnixProcessID", "s", (owner,))
        who = f"{_process_name(pid)} (PID {pid})"
    except BusCallFailed:
        pass
    raise Refused(
        f"{BUS_NAME} is already owned by {who}: only one firewall service can answer "
        "NetworkManager (stop it first)"
    )


def check_firewalld(enabled_marker: str = FIREWALLD_ENABLED) -> None:
    if os.path.lexists(enabled_marker):
        raise Refused(
            f"firewalld is installed and enabled ({enabled_marker}): nm-zones serve and "
            "firewalld cannot both own its D-Bus name (systemctl disable --now firewalld)"
        )


async def serve(paths: Paths) -> int:
    check_firewalld()
    share_one_arena()  # before any worker thread
    try:
        connection = await open_dbus_connection("SYSTEM")
    except (OSError, ValueError) as error:
        raise Refused(f"cannot reach the system bus: {error}") from None
    bus = Bus(connection)
    service = ZoneService(paths, bus)
    stopping = asyncio.get_running_loop().create_future()
    for number in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(
            number, lambda n=number: stopping.done() or stopping.set_result(n)
        )
    receiving = asyncio.create_task(bus.run(service.received, service.signalled))
    timer = None
    try:
        await claim_name(bus)
        for rule in (NM_RESTARTS, NM_DEVICES):
            await bus.call(
                "org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus",
                "AddMatch",
                "s",
                (rule,),
            )
        await asyncio.to_thread(service.start)
        service.denied.start()
        if service.denied.problem:
            log(f"no list of refused packets: {service.denied.problem}", warning=True)
        watch = networks_bus.watch_identifications(service)
        if watch is None:
            log("cannot watch the hook's identifications: NetworksChanged only for own changes")
        keeper = follow_applications(paths)
        log(f"owns {BUS_NAME} on the system bus as {bus.unique_name}")
        await service.emit(MAIN_INTERFACE, "Reloaded")  # NetworkManager replays every zone
        timer = asyncio.create_task(expire_at_deadlines(paths, service.expire))
        service.keep(service.listeners.run())  # ends with the loop's tasks
        waiting = {receiving, stopping, timer}
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if stopping in done:
            log(f"stopping on signal {signal.Signals(stopping.result()).name}")
            return 0
        failed = timer if timer in done else receiving
        error = failed.exception()
        if failed is timer:
            raise Refused(f"the allowances' timer stopped ({type(error).__name__}: {error})")
        raise Refused(f"lost the system bus ({type(error).__name__}: {error})")
    finally:
        if "keeper" in locals() and keeper is not None:
            keeper.set()
        receiving.cancel()
        if timer is not None:
            timer.cancel()
        await connection.close()


def follow_applications(paths: Paths):
    """The application sets kept current (backends/nftables/appsets.py) in a thread while
    the service runs, on the nftables backend; the Event that stops it, or None."""

    if choose(load(paths).config.settings.backend)[0] != "nftables":
        return None
    stop = threading.Event()
    threading.Thread(target=keep, args=(paths.state, stop), daemon=True).start()
    return stop


def main(paths: Paths) -> int:
    """`nm-zones serve`: exit 1 with one line when it cannot start or loses the bus."""
    if os.geteuid() != 0:
        print("nm-zones: serve changes the firewall: run it as root", file=sys.stderr)
        return 1
    try:
        return asyncio.run(serve(paths))
    except NmZonesError as error:  # it cannot start (Refused), or its config cannot be used
        log("; ".join(error.lines()), warning=True)
        return 1
