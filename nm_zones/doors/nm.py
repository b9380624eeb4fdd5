"""The front-end functions of the Network Zones proposal, talking to NetworkManager via nmcli:
assign a zone to a connection, and turn nm-zones off and on again."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from ..engine import Engine, recorded_connection
from ..errors import KernelError, UsageError, describe
from ..ifname import interface_index, matches_exempt
from ..resolve import Connection, read_connection
from ..state import State, Status, write_atomically
from ..text import split_terse

NMCLI_TIMEOUT = 20


@dataclass(frozen=True)
class ActiveConnection:
    uuid: str
    id: str
    type: str
    device: str


def nmcli(*args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            ["nmcli", *args], capture_output=True, text=True, timeout=NMCLI_TIMEOUT
        )
    except FileNotFoundError:
        raise UsageError("nmcli is not installed (NetworkManager is needed)") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"nmcli {' '.join(args)} did not answer in {NMCLI_TIMEOUT} s") from None


def active_connections() -> list[ActiveConnection]:
    try:
        result = nmcli("-t", "-f", "UUID,NAME,TYPE,DEVICE", "connection", "show", "--active")
    except UsageError:
        return []
    if result.returncode != 0:
        return []
    found = []
    for line in result.stdout.splitlines():
        fields = split_terse(line)
        if len(fields) == 4 and fields[3]:
            found.append(ActiveConnection(*fields))
    return found


def assign(engine: Engine, connection: str, zone: str, state: State) -> None:
    """Store the zone in the profile; NetworkManager sends no event for that, so an active
    connection's interface is switched here and now. A profile non-admins may edit does not
    carry a zone they may not choose (resolve.py): that zone goes into the admin's map, by
    the profile's UUID, first (before NetworkManager passes the new zone to the service)."""
    profile = _profile(connection)
    if profile is not None and _refused(engine, profile, zone):
        from ..config.mapfile import set_connection_zone

        path = set_connection_zone(engine.paths, profile.uuid, zone)
        engine.config_changed()
        engine.warn(
            f"connection {profile.id!r} can be edited by non-admins; its zone {zone} is "
            f"kept by its UUID in {path}"
        )
    result = nmcli("connection", "modify", connection, "connection.zone", zone)
    if result.returncode != 0:
        message = result.stderr.strip() or result.stdout.strip()
        raise UsageError(f"nmcli could not set the zone of {connection!r}: {message}")
    if engine.paths.disabled or profile is None:
        return  # stored in the profile; applied when nm-zones is enabled again
    profile.zone = zone
    decision = engine.decide(profile)  # the zone, from the profile or the map
    for active in active_connections():
        if active.uuid == profile.uuid and interface_index(active.device):
            if matches_exempt(active.device, engine.compiled.exempt_interfaces):
                continue
            engine.apply_interface(
                active.device,
                decision.zone,
                decision.reason,
                Connection(profile.uuid, active.id, active.type, zone),
                state,
            )


def _profile(connection: str) -> Connection | None:
    """The profile `connection` (a name or UUID) as resolve reads it, or None."""
    details = nmcli("-g", "connection.uuid,connection.id", "connection", "show", connection)
    lines = details.stdout.split("\n")
    if details.returncode != 0 or len(lines) < 2 or not lines[0].strip():
        return None
    profile = read_connection(lines[0].strip(), lines[1].strip())
    return profile if profile.found else None


def _refused(engine: Engine, profile: Connection, zone: str) -> bool:
    """Whether `zone` in this profile would be refused as one its users chose."""
    from ..resolve import decide_zone, not_allowed

    trial = Connection(
        profile.uuid, profile.id, profile.type, zone, permissions=profile.permissions
    )
    decision = decide_zone(trial, engine.compiled, engine.known_zones())
    return not_allowed(zone) in decision.reason


def disable(engine: Engine, reason: str = "nm-zones disabled") -> None:
    """Remove every nm-zones rule; the flag in /etc/nm-zones keeps the hook quiet after a
    reboot and, written first, lets any later run finish a disable that was interrupted.
    Bindings stay in the state, marked disabled, so that enable can restore them. Refused
    while panic mode is on: it would lift panic mode too."""
    if engine.panic:
        raise UsageError("panic mode is on and disable would lift it (nm-zones panic off first)")
    os.makedirs(engine.paths.config, mode=0o755, exist_ok=True)
    folder = os.stat(engine.paths.config)
    if folder.st_uid != os.geteuid() or folder.st_mode & 0o022:
        raise UsageError(
            f"{engine.paths.config} can be written by others, so a disabled flag there would "
            f"not be obeyed (chown root {engine.paths.config}; chmod go-w {engine.paths.config})"
        )
    write_atomically(
        engine.paths.disabled_flag, b"nm-zones is disabled; `nm-zones enable` turns it back on\n"
    )
    engine.disable_all(engine.state_dir.load(), reason)


def enable(engine: Engine, state: State) -> None:
    """After the flag is gone and engine.prepare put hooks and catch-all back: the zone of
    every active connection; interfaces that NetworkManager does not know get back the zone
    they had."""
    exempt = engine.compiled.exempt_interfaces
    done = set()
    for active in active_connections():
        if active.device in done or not interface_index(active.device):
            continue
        if active.device == "lo" or matches_exempt(active.device, exempt):
            continue
        connection = read_connection(active.uuid, active.id)
        decision = engine.decide(connection)
        engine.apply_interface(active.device, decision.zone, decision.reason, connection, state)
        done.add(active.device)
    disabled = [n for n, b in sorted(state.interfaces.items()) if b.status == Status.DISABLED]
    # only "no such device" forgets a binding: after any other failure all are kept
    from ..ifname import interface_indexes

    try:
        present = interface_indexes([name for name in disabled if name not in done])
    except OSError as error:
        raise KernelError(
            f"cannot tell which disabled interfaces still exist: {describe(error)};"
            " run nm-zones enable again"
        ) from None
    for name, index in present.items():
        binding = state.interfaces[name]
        if index:
            binding.status = Status.APPLIED
            connection = recorded_connection(binding)
            engine.apply_interface(name, binding.zone, binding.reason, connection, state)
        else:
            del state.interfaces[name]
    engine.save(state)
