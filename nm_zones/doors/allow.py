"""`nm-zones allow` and `nm-zones revoke`: open a port or a service now, for a while, or for
good, on one interface, on every interface of a zone, or on a known network (whichever
interface is on it, now and whenever it is recognised again: ruleset/allowances.py).

A runtime change (ruleset/allowances.py) lives in the state and in the kernel, committed with the
interface's chains; `--permanent` edits the admin's zone file (config/zonefile.py) and re-applies
like `reload`. Every change runs under the state lock after engine.prepare (cli._run_changes).
"""

from __future__ import annotations

import math
import time

from ..engine import IN_KERNEL, Engine
from ..errors import UsageError, unknown_zone
from ..log import to_syslog
from ..ruleset.allowances import (
    DEADLINE,
    FOREVER,
    deadlines_after,
    expired,
    network_owner,
)
from ..state import State, Status
from ..text import duration_text

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SECONDS = 366 * 86400


def parse_duration(text: str) -> int:
    """`30s`, `10m`, `2h`, `1d` (a bare number is seconds) in seconds."""
    value = text.strip().lower()
    unit = value[-1:] if value[-1:] in UNITS else "s"
    number = value[:-1] if value[-1:] in UNITS else value
    if (
        not (number.isascii() and number.isdigit())
        or not 0 < int(number) * UNITS[unit] <= MAX_SECONDS
    ):
        raise UsageError(
            f"--for {text!r}: give a duration such as 30s, 10m, 2h or 1d (at most 366d)"
        )
    return int(number) * UNITS[unit]


def check_what(text: str, loaded) -> str:
    """WHAT in its canonical form (`8080/tcp`, `60000-61000/udp`, or a service name),
    validated with the zone files' own messages."""
    from ..config.load import SERVICE_NAME, _FileChecker, _hint

    item = text.strip()
    if item.startswith("app:"):  # an application, as the state and the zone editor name it
        from .apps import app_what

        return app_what(item[len("app:") :])
    if "/" in item or item[:1].isdigit():
        check = _FileChecker("WHAT")
        port = check.port(0, "", item)
        if port is None:
            raise UsageError(check.problems[0].message)
        return str(port)
    services = loaded.config.services
    if not SERVICE_NAME.match(item):
        raise UsageError(f"{item!r} is neither a service name nor a port such as 8080/tcp")
    if item not in services:
        raise UsageError(f"unknown service {item!r} ({_hint(item, services)})")
    return item


def port_covered(what: str, ports) -> bool:
    """Whether the port or range `what` lies within one of `ports` (model.PortRange)."""
    numbers, _, protocol = what.rpartition("/")
    first, _, last = numbers.partition("-")
    first, last = int(first), int(last or first)
    return any(p.protocol == protocol and p.first <= first and last <= p.last for p in ports)


def opened_by_zone(zone, what: str, config) -> str:
    """How the zone's own definition already opens `what`, or "" (always for a runtime
    masquerade, forward port or removal: ruleset/runtime_features.py)."""
    from ..ruleset.runtime_features import is_feature

    if zone is None or is_feature(what):
        return ""
    if zone.target == "accept":
        return "it accepts everything"
    if what.startswith("app:"):
        return "it lists the application" if what[4:] in zone.applications else ""
    if "/" not in what:
        return "it lists the service" if what in zone.services else ""
    if port_covered(what, zone.ports):
        return "its ports"
    for name in zone.services:
        if port_covered(what, config.services[name].ports):
            return f"service {name}"
    return ""


def until_text(wall: int, remaining: float) -> str:
    """` until 16:40`, with seconds when near, with the date when not today: the wall clock
    at the deadline as it was when granted (`wall`), or, when the clock was stepped since,
    as it stands now (`remaining` seconds from now, on the clock no one can set)."""
    if wall == FOREVER:
        return ""
    if abs(time.time() + remaining - wall) > 2:
        wall = math.ceil(time.time() + remaining)
    moment = time.localtime(wall)
    if time.strftime("%Y-%m-%d", moment) != time.strftime("%Y-%m-%d"):
        return time.strftime(" until %Y-%m-%d %H:%M", moment)
    near = remaining < 3600
    return time.strftime(" until %H:%M:%S" if near else " until %H:%M", moment)


def remaining_text(seconds: float) -> str:
    """`1h 5m left`, `42s left`."""
    return f"{duration_text(seconds)} left"


class Request:
    """One allow or revoke, as the command line gave it."""

    def __init__(self, args, what: str, loaded):
        self.grant = args.command == "allow"
        self.what = what
        self.zone = args.zone or ""
        self.interface = args.interface or ""
        self.network = getattr(args, "network", None) or ""  # a known network's id
        self.network_label = ""
        self.paths = None  # the engine's (run)
        self.seconds = parse_duration(args.duration) if args.duration else 0
        self.permanent = args.permanent
        self.loaded = loaded
        self.note = ""  # said when the scope was chosen for the user

    @property
    def owner(self) -> str:
        """The allowance's first field: the interface, the network's key, or "" (a zone)."""
        return network_owner(self.network) if self.network else self.interface

    def resolve(self, state: State) -> None:
        """The interface or zone the change is for (exactly one bound interface: that one)."""
        bound = {name: b for name, b in sorted(state.interfaces.items()) if b.status in IN_KERNEL}
        if self.network:
            self.network_label = known_network(self.paths, self.network).label
            return
        if self.interface:
            binding = bound.get(self.interface)
            if binding is None:
                raise UsageError(f"{self.interface} is not bound to a zone (see: nm-zones status)")
            self.zone = binding.zone
        elif not self.zone:
            if len(bound) != 1:
                names = ", ".join(bound) or "none"
                raise UsageError(
                    f"give --zone ZONE or --interface IFACE (interfaces bound: {names})"
                )
            self.interface, binding = next(iter(bound.items()))
            self.zone = binding.zone
            self.note = f" ({self.interface} is the only interface bound)"

    def label(self, interface: str, zone: str = "") -> str:
        if interface and self.network:
            return f"{interface} ({zone}, network {self.network_label!r})"
        if interface:
            return f"{interface} ({zone or self.zone})"
        if self.network:
            return f"network {self.network_label!r} ({self.network})"
        return f"zone {self.zone}"


def known_network(paths, network_id: str):
    """The known network `network_id` names (networks/store.py); exit 2 when there is none
    (a broken store: exit 2 with its FILE:LINE)."""
    from .networks import known_networks

    network = known_networks(paths).find(network_id)
    if network is None:
        raise UsageError(
            f"--network {network_id}: no known network has this id (see: nm-zones networks)"
        )
    return network


def run(engine: Engine, request: Request, state: State) -> None:
    """The change, under the state lock after engine.prepare; what it says goes with the
    engine's changes (printed by cli._run_changes)."""
    request.paths = engine.paths
    request.resolve(state)
    if request.grant and request.network:
        refuse_closed_network(request, state)
    elif request.grant:
        refuse_closed_zone(request)
    if request.permanent and request.network:
        _permanent_network(engine, request, state)
    elif request.permanent:
        _permanent(engine, request, state)
    elif request.grant:
        _allow(engine, request, state)
    else:
        _revoke(engine, request, state)


def refuse_closed_zone(request: Request) -> None:
    """A zone that refuses everyone (target reject or drop, nothing open: block, drop)
    promises that nobody gets in; an allowance would quietly break that promise."""
    zone = request.loaded.config.zones.get(request.zone)
    if zone is None or zone.target not in ("reject", "drop"):
        return
    if zone.services or zone.ports or zone.protocols or zone.forward_ports:
        return
    where = f"{request.interface} is in zone {zone.name}" if request.interface else ""
    where = where or f"zone {zone.name}"
    move = request.interface or "IFACE"
    raise UsageError(
        f"{where}, which lets nobody in (target {zone.target}): nothing is allowed into it; "
        f"allow it in another zone (--zone public) or move the interface there first "
        f"(nm-zones apply {move} public)"
    )


def refuse_closed_network(request: Request, state: State) -> None:
    """A network placed in a zone that lets nobody in (or on an interface in one now):
    its allowances would break that zone's promise (networks.change_network drops them
    when a network is placed in such a zone later)."""
    from .networks import closed_zone

    zones = request.loaded.config.zones
    network = known_network(request.paths, request.network)
    names = {network.zone} | {state.interfaces[n].zone for n in _reached(request, state)}
    for name in sorted(n for n in names if n):
        if closed_zone(zones.get(name)):
            raise UsageError(
                f"{request.label('')} is in zone {name}, which lets nobody in "
                f"(target {zones[name].target}): nothing is allowed into it; place the "
                f"network in another zone first (nm-zones networks zone {network.id} public)"
            )


def _say(engine: Engine, line: str) -> None:
    engine.changes.append(line)


def _reached(request: Request, state: State) -> list[str]:
    """The bound interfaces a runtime change of this scope reaches."""
    if request.interface:
        return [request.interface]
    if request.network:
        from ..networks.zone import current_network

        state_dir = request.paths.state
        return [
            name
            for name, b in sorted(state.interfaces.items())
            if b.status == Status.APPLIED
            and current_network(state_dir, name, b.reason, b.connection_uuid) == request.network
        ]
    return [
        name
        for name, b in sorted(state.interfaces.items())
        if b.status == Status.APPLIED and b.zone == request.zone
    ]


def _allow(engine: Engine, request: Request, state: State) -> None:
    zone = request.loaded.config.zones.get(request.zone)
    how = opened_by_zone(zone, request.what, request.loaded.config)
    label = request.label(request.interface)
    if how:
        _say(engine, f"{label}: {request.what} is already allowed by the zone ({how})")
        return
    deadline, wall = deadlines_after(request.seconds) if request.seconds else (FOREVER, FOREVER)
    key = (request.owner, request.zone, request.what)
    current = [a for a in state.allowances if a[:3] == key and not expired(a)]
    until = until_text(wall, request.seconds)
    if current and current[0][DEADLINE] == deadline:
        _say(engine, f"{label}: {request.what} is already allowed{until}")
        return
    replaced = [a for a in state.allowances if a[:3] == key]
    state.allowances = [a for a in state.allowances if a[:3] != key] + [(*key, deadline, wall)]
    said = f"{request.what} allowed{until}"
    if request.what.startswith("app:"):
        from .apps import follow_note

        said += follow_note(engine.paths.state)
    _commit(engine, request, state, said)
    _forget(engine, state, replaced)


def _forget(engine: Engine, state: State, allowances) -> None:
    """Deadlines no allowance has any more: what the backend kept for them goes."""
    left = {a[DEADLINE] for a in state.allowances}
    gone = {a[DEADLINE] for a in allowances if a[DEADLINE] != FOREVER} - left
    if gone:
        engine.forget_deadlines(state, gone)


def _revoke(engine: Engine, request: Request, state: State) -> None:
    key = (request.owner, request.zone, request.what)
    label = request.label(request.interface)
    if not any(a[:3] == key for a in state.allowances):
        zone = request.loaded.config.zones.get(request.zone)
        how = opened_by_zone(zone, request.what, request.loaded.config)
        if how:
            hint = f"the zone itself allows it ({how}): nm-zones revoke {request.what} "
            hint += f"--permanent --zone {request.zone}"
        elif request.interface and any(
            a[:3] == ("", request.zone, request.what) for a in state.allowances
        ):
            hint = f"it is allowed for all of zone {request.zone}: nm-zones revoke "
            hint += f"{request.what} --zone {request.zone}"
        elif request.network:
            hint = "nothing allowed it at runtime on this network"
        else:
            hint = "nothing allowed it at runtime"
        _say(engine, f"{label}: {request.what} not revoked: {hint}")
        return
    revoked = [a for a in state.allowances if a[:3] == key]
    state.allowances = [a for a in state.allowances if a[:3] != key]
    _commit(engine, request, state, f"{request.what} revoked")
    _forget(engine, state, revoked)


def _commit(engine: Engine, request: Request, state: State, said: str) -> None:
    """Commit the interfaces the change reaches (their digests include their allowances);
    say one line per interface."""
    reached = _reached(request, state)
    if not reached:
        engine.save(state)
        nobody = "on it" if request.network else "bound to it"
        line = f"{request.label('')}: {said} (no interface is {nobody} now"
        later = "that connect to it later" if request.network else "bound later"
        line += f"; it reaches those {later})" if request.grant else ")"
        to_syslog(line)
        _say(engine, line)
        return
    skipped = set()

    def reapply(name: str) -> None:
        warnings = len(engine.warnings)
        change = engine.reapply(name, state, said)
        if change is not None:
            engine.changes.remove(change)  # said below, in this command's words
        elif len(engine.warnings) > warnings:
            skipped.add(name)  # not committed (its warning says why): no line claims it was

    # every interface the change reaches in one transaction (engine/together.py)
    skipped |= engine.together(state, [lambda name=name: reapply(name) for name in reached])
    for name in reached:
        if name in skipped:
            continue
        binding = state.interfaces[name]
        line = f"{request.label(name, binding.zone)}: {said}"
        still = [a[2] for a in state.allowances if a[:2] == ("", binding.zone)]
        if not request.grant and request.what in still:
            line += f"; still allowed for all of zone {binding.zone}"
        _say(engine, line + request.note)
    engine.save(state)


def list_item(what: str) -> tuple[str, str]:
    """The zone file's list that holds `what`, and its item there."""
    if what.startswith("app:"):
        return "applications", what[4:]
    return ("ports" if "/" in what else "services"), what


def _permanent(engine: Engine, request: Request, state: State) -> None:
    """Edit the admin's zone file, then re-apply as `reload` does."""
    from ..config.zonefile import edit_zone_file

    if request.zone not in engine.known_zones():
        raise unknown_zone(request.zone)
    key, item = list_item(request.what)
    path = edit_zone_file(engine.paths, request.zone, key, item, request.grant)
    label = f"zone {request.zone}"
    if path is None:
        zone = request.loaded.config.zones.get(request.zone)
        if request.grant:
            how = opened_by_zone(zone, request.what, request.loaded.config)
            _say(engine, f"{label}: {request.what} is already allowed ({how or 'its file'})")
        else:
            how = opened_by_zone(zone, request.what, request.loaded.config)
            extra = f"; it comes with {how}" if how.startswith("service") else ""
            _say(engine, f"{label}: {request.what} is not in its {key}{extra}")
        return
    verb = "allowed" if request.grant else "revoked"
    line = f"{label}: {request.what} {verb} permanently ({path})"
    to_syslog(line)
    _say(engine, line)
    engine.config_changed()
    engine.reload(state)


def _permanent_network(engine: Engine, request: Request, state: State) -> None:
    """`--permanent --network ID`: WHAT joins (or leaves) the network's own `allow` in the
    known networks' store (networks/store.py), which outlives reboots and reloads; the
    interfaces on the network now are committed with it at once, and every interface that
    reaches the network later gets it with the network's zone."""
    from ..networks.store import store_path
    from ..networks.zone import follow
    from .networks import known_networks

    store = known_networks(engine.paths)
    changed = store.allow(request.network, request.what, request.grant)
    label = request.label("")
    if not changed:
        state_word = "is already allowed on it" if request.grant else "is not in its allow list"
        _say(engine, f"{label}: {request.what} {state_word}")
        return
    store.save()
    verb = "allowed" if request.grant else "revoked"
    line = f"{label}: {request.what} {verb} permanently ({store_path(engine.paths)})"
    to_syslog(line)
    _say(engine, line)
    follow(engine, state)
