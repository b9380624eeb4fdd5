"""NetworkManager dispatcher events: `50-nm-zones IFACE ACTION`, environment from NM.

Actions nm-zones ignores return before anything heavy is imported. NetworkManager waits for
pre-up and pre-down, and runs hooks one at a time for all devices, so every event is kept short.
"""

from __future__ import annotations

import os
import sys

APPLY_ACTIONS = frozenset({"pre-up", "up", "vpn-pre-up", "vpn-up"})
RECHECK_ACTIONS = frozenset({"reapply", "dhcp4-change", "dhcp6-change"})
REMOVE_ACTIONS = frozenset({"pre-down", "down", "vpn-pre-down", "vpn-down"})
HANDLED_ACTIONS = APPLY_ACTIONS | RECHECK_ACTIONS | REMOVE_ACTIONS


def vpn_without_interface(action: str, interface: str, env: dict) -> bool:
    """IPsec and the like report the physical device as VPN_IP_IFACE: leave it alone."""
    if not action.startswith("vpn-"):
        return False
    devices = {env.get("DEVICE_IFACE", ""), env.get("DEVICE_IP_IFACE", "")} - {""}
    return not interface or interface in devices


def _profile_deleted(env: dict) -> bool:
    filename = env.get("CONNECTION_FILENAME", "")
    return bool(filename) and not os.path.exists(filename)


def handle(argv: list[str], env: dict) -> int:
    """Run one event; returns the exit status (0 ok, 1 degraded or failed)."""
    interface = argv[1] if len(argv) > 1 else ""
    action = argv[2] if len(argv) > 2 else ""
    if action not in HANDLED_ACTIONS or not interface or interface == "none":
        return 0
    if interface == "lo" or env.get("CONNECTION_EXTERNAL") == "1":
        return 0
    if vpn_without_interface(action, interface, env):
        return 0
    from ..paths import Paths

    paths = Paths.from_environment()
    inputs = ""
    if action not in REMOVE_ACTIONS and not paths.disabled:
        from ..quick import inputs_key, nothing_changed

        inputs = inputs_key(paths, env)
        if nothing_changed(paths, interface, inputs):
            return 0
    try:
        return _run(paths, interface, action, env, inputs)
    except Exception as error:  # the hook's one handler: one line, never a traceback
        from ..errors import describe
        from ..log import to_syslog

        message = f"{interface} {action}: {describe(error)}"
        print(f"nm-zones: {message}", file=sys.stderr)
        to_syslog(message, warning=True)
        return 1


def _run(paths, interface: str, action: str, env: dict, inputs: str) -> int:
    """The full run of an event, under the state lock: first the kernel made to hold what the
    state says (engine.prepare), then this event's change."""
    from ..engine import Engine
    from ..ifname import interface_index, matches_exempt
    from ..networks.zone import IDENTIFYING_ACTIONS, quick_after, remember
    from ..networks.zone import decide as network_decision
    from ..resolve import read_connection

    engine = Engine(paths)
    with engine.state_dir.locked():
        state = engine.state_dir.load()
        try:
            if not engine.begin(state):  # disabled, maybe while we waited for the lock
                return 0
            if action in REMOVE_ACTIONS:
                engine.remove_interface(interface, f"NetworkManager {action}", state)
                remember(paths.state, interface, None)  # the next network is identified anew
            elif interface_index(interface) and not matches_exempt(
                interface, engine.compiled.exempt_interfaces
            ):
                connection = read_connection(
                    env.get("CONNECTION_UUID", ""),
                    env.get("CONNECTION_ID", ""),
                    env.get("CONNECTION_FILENAME", ""),
                )
                if not connection.found and _profile_deleted(env):
                    return 0  # a queued event for a profile deleted since: nothing to bind
                decision = engine.decide(connection)
                decision = network_decision(engine, interface, connection, decision, action, env)
                if action in IDENTIFYING_ACTIONS and not quick_after(connection, engine.compiled):
                    inputs = ""  # `up` looks for the network, whatever its inputs
                engine.apply_interface(
                    interface, decision.zone, decision.reason, connection, state, inputs
                )
        finally:
            engine.report().show("nm-zones")  # its changes are in syslog already
    return engine.report().exit_status()


def main() -> None:
    """The hook's process: the event, then its end (doors/__init__.py)."""
    from . import end_process

    end_process(handle(sys.argv, dict(os.environ)))
