"""`nm-zones status IFACE`: one interface in full, everything open on it in one list.

The zone's services expanded to their ports, its own ports and protocols, the runtime
allowances that reach the interface with their remaining time, forward-ports, masquerade;
and the binding (zone, why, since, connection) with whether the kernel holds its rules. The
exit status is `status`'s, for this interface plus the hooks and the catch-all.
"""

from __future__ import annotations

import os
import sys

from ..state import Status
from ..text import printable
from .common import (
    EXIT_DISABLED,
    EXIT_FAILURE,
    EXIT_OK,
    load_config,
    open_engine,
    print_json,
    service_json,
    zone_json,
)
from .status import panic_row, panic_text, status_problems, status_row

TARGETS = {
    "default": "accept what is listed, reject the rest",
    "accept": "accept everything",
    "reject": "refuse everything with an ICMP error",
    "drop": "drop everything silently",
}


def open_list(
    zone_view: dict | None, allowed, now: float, remembered: dict[str, str] | None = None
) -> list[dict]:
    """What is open, one entry per service, port, protocol, application and runtime
    allowance (`now` on CLOCK_BOOTTIME, as allowances' deadlines are; `deadline` says the
    wall clock's); an application with the name people know it by (`remembered`: names
    given by the desktop, remembered_names)."""
    remembered = remembered or {}
    from ..ruleset.allowances import FOREVER

    entries = []
    if zone_view:
        for name, service in zone_view["services"].items():
            entries.append(
                {
                    "what": name,
                    "opens": service["ports"]
                    + [f"from {p}" for p in service["source-ports"]]
                    + service["protocols"],
                    "from": "zone",
                }
            )
        entries += [{"what": p, "opens": [p], "from": "zone"} for p in zone_view["ports"]]
        entries += [{"what": p, "opens": [p], "from": "zone"} for p in zone_view["protocols"]]
        entries += [
            {"what": f"app:{a}", "opens": [], "from": "zone"}
            for a in zone_view.get("applications", [])
        ]
    from ..ruleset.runtime_features import removed

    live = [a for a in allowed if a[1] == FOREVER or a[1] > now]
    gone = {removed(a[0]) for a in live}  # removed at runtime until reload (`without:ssh`)
    entries = [e for e in entries if e["what"] not in gone]
    for what, deadline, wall, scope in live:
        service = zone_view["all_services"].get(what) if zone_view else None
        opens = [what] if "/" in what else (service["ports"] if service else [])
        if what.startswith("app:") or removed(what):
            opens = []  # an application: every port it listens on; a removal: nothing
        entries.append(
            {
                "what": what,
                "opens": opens,
                "from": "network" if scope == "known network" else "runtime",
                "scope": scope,
                "deadline": wall or None,
                "remaining_seconds": int(deadline - now) if deadline else None,
            }
        )
    for entry in entries:
        if entry["what"].startswith("app:"):
            entry["name"] = program_name(entry["what"][4:], remembered)
    return entries


def remembered_names(data_dir: str) -> dict[str, str]:
    """APP -> the name the desktop gave it when its user answered a question about it
    (doors/listeners.py): root's status has no user's desktop files to read."""
    from .listeners import Answers

    return {app: row.get("name", "") for (app, _key), row in Answers(data_dir).rows.items()}


def program_name(app: str, remembered: dict[str, str]) -> str:
    """The name people know an application by (appnames.py), else the one remembered."""
    from ..appnames import program_name as named

    name = named(app)[0]
    if name == app or name == app.rsplit("/", 1)[-1]:
        return remembered.get(app) or name
    return name


def _allowed_with_scope(state, interface: str, binding, paths) -> list[tuple[str, int, int, str]]:
    """The allowances that reach the bound interface, each with the scope that granted it:
    "interface", "network" (`allow --network`: the known network it is on), "known network"
    (the network's own `allow`, for good) or "zone"."""
    from ..engine.basics import binding_network, kept_by_network
    from ..ruleset.allowances import FOREVER, effective, network_owner

    zone = binding.zone
    network = binding_network(paths.state, interface, binding)
    kept = kept_by_network(paths, network) if network else []
    mine = {a[2] for a in state.allowances if a[0] == interface and a[1] == zone}
    ours = {a[2] for a in state.allowances if network and a[0] == network_owner(network)}

    def scope(what: str, deadline: int) -> str:
        if deadline == FOREVER and what in {a[2] for a in kept}:
            return "known network"
        return "interface" if what in mine else "network" if what in ours else "zone"

    return [
        (what, deadline, wall, scope(what, deadline))
        for what, deadline, wall in effective(state.allowances + kept, interface, zone, network)
    ]


def show_interface(args) -> int:
    from ..errors import UsageError
    from ..ifname import check_interface, interface_index, matches_exempt
    from ..state import StateDir

    name = args.interface
    check_interface(name)
    engine = open_engine()
    paths = engine.paths
    state = StateDir(paths.state).load()
    disabled = paths.disabled
    root = os.geteuid() == 0
    binding = state.interfaces.get(name)
    if binding is None and not interface_index(name):
        raise UsageError(f"no interface named {name!r} is bound or present")
    catchall, problems = status_problems(engine, state, disabled, root)
    panic = panic_row(engine, root)
    if panic["on"]:  # first, and the exit status is 1
        problems = [panic_text(panic), *problems]
    loaded = load_config()
    config = loaded.config
    exempt = binding is None and matches_exempt(name, engine.compiled.exempt_interfaces)
    if binding is not None:
        row = status_row(engine, state, name, binding, root)
        zone_name = binding.zone
    else:
        zone_name = "" if exempt else state.catchall_zone
        row = {
            "interface": name,
            "zone": zone_name,
            "reason": "exempt-interfaces" if exempt else "not bound: the catch-all",
            "status": "exempt" if exempt else "catch-all",
            "kernel": catchall["kernel"],
            "degraded": "",
        }
    zone = config.zones.get(zone_name)
    zone_view = None
    if zone is not None:
        zone_view = zone_json(zone, config)
        zone_view["all_services"] = {n: service_json(s) for n, s in config.services.items()}
    allowed = _allowed_with_scope(state, name, binding, paths) if binding is not None else []
    from ..ruleset.allowances import boottime

    row["open"] = open_list(zone_view, allowed, boottime(), remembered_names(paths.data))
    row["allowances"] = [e for e in row["open"] if e["from"] == "runtime"]
    if zone_view:
        for key in ("target", "forward-ports", "masquerade", "log-denied", "icmp-blocks"):
            row[key.replace("-", "_")] = zone_view[key]
    if args.json:
        whole = {"enabled": not disabled, "panic": panic, "catchall": catchall}
        print_json({**row, **whole, "problems": problems})
    else:
        _print_interface(row, zone_view, problems, disabled)
    if disabled and not panic["on"]:
        return EXIT_DISABLED
    bad = problems or (
        binding is not None
        and (row["degraded"] or row["kernel"] == "DIFFERS" or row["status"] != Status.APPLIED)
    )
    return EXIT_FAILURE if bad else EXIT_OK


SCOPE_WORDS = {"interface": "this interface", "network": "this network", "zone": "its zone"}


def _print_interface(row: dict, zone_view: dict | None, problems, disabled: bool) -> None:
    from .allow import remaining_text, until_text

    lines = []
    if disabled:
        lines.append("nm-zones is disabled (nm-zones enable)")
    lines += problems
    if row["status"] == "exempt":
        lines.append(f"{row['interface']}: exempt (exempt-interfaces): nm-zones does not filter it")
        print("\n".join(printable(line) for line in lines))
        return
    head = f"{row['interface']}: zone {row['zone'] or '-'} ({row['reason']})"
    if row.get("since"):
        head += f", since {row['since']}"
    if row.get("connection"):
        head += f", connection {row['connection']!r}"
    lines.append(head)
    lines.append(f"  kernel:       {row['kernel']}")
    if row["status"] not in (Status.APPLIED, "catch-all"):
        lines.append(f"  state:        {row['status'].upper()}")
    if row["degraded"]:
        lines.append(f"  DEGRADED:     {row['degraded']}")
    if row.get("flows_ended"):
        lines.append(f"  flows ended:  {row['flows_ended']} at its last switch")
    if zone_view is None:
        lines.append("  (its zone cannot be loaded: see nm-zones check)")
        print("\n".join(printable(line) for line in lines))
        return
    lines.append(f"  target:       {zone_view['target']} ({TARGETS[zone_view['target']]})")
    label = "  open:        "
    for entry in row["open"]:
        text = entry["what"]
        if entry.get("name") and entry["name"] != entry["what"][4:]:
            text += f" ({entry['name']}: every port it listens on)"
        opens = [o for o in entry["opens"] if o != entry["what"]]
        if opens:
            text += " " + " ".join(opens)
        if entry["from"] == "runtime":
            scope = SCOPE_WORDS[entry["scope"]]
            text += f"  (runtime, {scope}"
            if entry["deadline"]:
                text += f",{until_text(entry['deadline'], entry['remaining_seconds'])}, "
                text += remaining_text(entry["remaining_seconds"])
            lines.append(f"{label} {text})")
        elif entry["from"] == "network":
            lines.append(f"{label} {text}  (this network, for good: nm-zones networks)")
        else:
            lines.append(f"{label} {text}")
        label = " " * len(label)
    if not row["open"]:
        lines.append(f"{label} nothing (besides replies and ICMP)")
    for forward in zone_view["forward-ports"]:
        to = (forward["to-addr"] or "") + (f":{forward['to-port']}" if forward["to-port"] else "")
        lines.append(f"  forward-port: {forward['port']} -> {to}")
    if zone_view["masquerade"]:
        lines.append("  masquerade:   yes (IPv4)")
    if zone_view["icmp-blocks"]:
        lines.append(f"  icmp-blocks:  {' '.join(zone_view['icmp-blocks'])}")
    lines.append(f"  log-denied:   {'yes (nm-zones log)' if zone_view['log-denied'] else 'no'}")
    sys.stdout.write("".join(printable(line) + "\n" for line in lines))
