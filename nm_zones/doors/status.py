"""`nm-zones status`: what is bound, what the kernel holds of it, and what is wrong (one
interface's detail: detail.py)."""

from __future__ import annotations

import os
import time

from ..paths import Paths
from ..state import StateDir, Status
from ..text import printable
from .common import (
    EXIT_DISABLED,
    EXIT_FAILURE,
    EXIT_OK,
    PANIC_LINE,
    open_engine,
    print_json,
)


def _kernel_word(held: bool | None) -> str:
    return {True: "in place", False: "DIFFERS", None: "unknown"}[held]


def status_row(engine, state, name: str, binding, root: bool) -> dict:
    """One bound interface as `status` shows it; the kernel is asked only as root."""
    from ..ifname import interface_index

    usable = engine.usable_zone(binding.zone)
    held = None
    if usable and root and binding.status == Status.APPLIED:
        from ..engine import allowed_for, binding_network, interface_plan

        network = binding_network(engine.paths.state, name, binding)
        allowed = allowed_for(state, name, usable.name, network, engine.paths)
        plan = interface_plan(engine.compiled, name, usable, allowed, engine.paths)
        held = engine.backend.holds(plan)
    return {
        "interface": name,
        "zone": binding.zone,
        "reason": binding.reason,
        "connection": binding.connection_id,
        "connection_uuid": binding.connection_uuid,
        "since": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(binding.since)),
        "status": binding.status,
        "present": interface_index(name) == binding.ifindex,
        "kernel": _kernel_word(held),
        "degraded": binding.degraded,
        "flows_ended": binding.flows_ended,
    }


def show_status(args) -> int:
    """`nm-zones status` without an interface: every binding, the catch-all, problems."""
    paths = Paths.from_environment()
    state = StateDir(paths.state).load()
    disabled = paths.disabled
    engine = open_engine()
    root = os.geteuid() == 0
    rows = [
        status_row(engine, state, name, binding, root)
        for name, binding in sorted(state.interfaces.items())
    ]
    catchall, problems = status_problems(engine, state, disabled, root)
    sources = _source_rows(engine, state)
    panic = panic_row(engine, root)
    if args.json:
        print_json(
            {
                "enabled": not disabled,
                "panic": panic,
                "backend": _held_by(state),
                "default_zone": state.catchall_zone,
                "catchall": catchall,
                "sources": sources,
                "problems": problems,
                "interfaces": rows,
            }
        )
    else:
        if disabled:
            print("nm-zones is disabled (nm-zones enable)")
        if panic["on"]:
            print(panic_text(panic) + (f"  kernel: {panic['kernel']}" if root else ""))
        print(
            f"unclaimed interfaces: {state.catchall_zone or '(catch-all not installed)'}"
            + (f"  kernel: {catchall['kernel']}" if root and state.catchall_zone else "")
        )
        print(f"rules held by: {_held_by(state)}")
        if sources:
            print("sources: " + ", ".join(f"{s} {zone}" for s, zone in sources.items()))
        for problem in problems:
            print(printable(problem))
        for row in rows:
            print(printable(_status_line(row)))
    if panic["on"]:
        return EXIT_FAILURE
    if disabled:
        return EXIT_DISABLED
    bad = problems or any(
        r["degraded"] or r["kernel"] == "DIFFERS" or r["status"] != Status.APPLIED for r in rows
    )
    return EXIT_FAILURE if bad else EXIT_OK


def _status_line(row: dict) -> str:
    """One bound interface on one line of `status`."""
    line = (
        f"{row['interface']:<15} {row['zone']:<10} since {row['since']}  "
        f"kernel: {row['kernel']:<8}  why: {row['reason']}"
    )
    if row["connection"]:
        line += f"  connection: {row['connection']}"
    if row["flows_ended"]:
        line += f"  flows ended: {row['flows_ended']}"
    if row["status"] != Status.APPLIED:
        line += f"  ({row['status'].upper()})"
    if not row["present"]:
        line += "  (interface gone)"
    if row["degraded"]:
        line += f"  DEGRADED: {row['degraded']}"
    return line


def panic_text(panic: dict) -> str:
    return f"{PANIC_LINE}, since {panic['since']} (nm-zones panic off)"


def panic_row(engine, root: bool) -> dict:
    """Panic mode as `status` shows it: on or off, since when (its flag's time, readable by
    anyone), whether the kernel holds its rules (asked only as root)."""
    if not engine.panic:
        return {"on": False, "since": "", "kernel": _kernel_word(None)}
    try:
        moment = os.lstat(engine.paths.panic_flag).st_mtime
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment))
    except OSError:
        since = "?"
    held = engine.backend.holds_panic() if root else None
    return {"on": True, "since": since, "kernel": _kernel_word(held)}


def status_problems(engine, state, disabled: bool, root: bool) -> tuple[dict, list[str]]:
    """The catch-all's row and what is wrong besides the interfaces: a lost state, an
    interrupted commit, hooks or catch-all missing, tables another program changed."""
    catchall = {"zone": state.catchall_zone, "kernel": _kernel_word(None)}
    tables_changed: list[str] = []
    if root and not disabled:
        catchall["kernel"] = _kernel_word(_catchall_held(engine, state))
        tables_changed = _tables_changed(state)
    problems = []
    untrusted = engine.state_dir.untrusted()
    if untrusted:  # every change is refused until it is fixed
        problems.append(untrusted)
    if state.lost:
        problems.append(f"state lost: {state.lost}")
    if None in state.kernel.values():
        problems.append("a commit was interrupted (the next run of nm-zones finishes it)")
    if not disabled and not state.catchall_zone:
        problems.append("catch-all not installed (nm-zones reload)")
    elif catchall["kernel"] == "DIFFERS":
        problems.append("hooks or catch-all missing from the kernel (nm-zones reload)")
    problems += [
        f"{table}: nm-zones' rules changed by another program (nm-zones reload)"
        for table in tables_changed
    ]
    if root and not disabled:
        problems += _rules_ahead(state)
        unlistable = _unlistable(engine)
        if unlistable:
            problems.append(unlistable)
    return catchall, problems


def _unlistable(engine) -> str:
    """Why the rows' "unknown" (another program's name the listing cannot show), if so."""
    from ..errors import NmZonesError

    try:
        return engine.backend.unlistable()
    except (NmZonesError, OSError) as error:
        return str(error)


def _rules_ahead(state) -> list[str]:
    """Other programs' rules ahead of nm-zones' jumps that can accept what it refuses."""
    from ..backends import rules_ahead

    try:
        return [line for key in sorted(state.kernel) for line in rules_ahead(key)]
    except OSError:
        return []


def _source_rows(engine, state) -> dict[str, str]:
    """Bound source (canonical) -> zone, the zone files' and the runtime's (committed with
    the catch-all, whose kernel check covers them)."""
    if "error" in engine.compiled.catchall:
        return {}
    from ..ruleset.sources import by_address

    return by_address(engine.compiled.source_bindings(state.sources))


def _catchall_held(engine, state) -> bool | None:
    """Whether the hooks and the catch-all (as the config says it now) are in the kernel."""
    catchall = engine.compiled.catchall
    if not state.catchall_zone or "error" in catchall:
        return None
    return engine.backend.holds(engine.compiled.catchall_plan(state.sources))


def _held_by(state) -> str:
    """Which backend holds nm-zones' rules, by the views the state recorded."""
    from ..backends import backend_of_key

    return ", ".join(sorted({backend_of_key(key) for key in state.kernel})) or "none"


def _tables_changed(state) -> list[str]:
    """Tables whose nm-zones rules differ from the view recorded after its last commit."""
    from ..backends.views import differs

    try:
        return [
            " ".join(key)
            for key, view in sorted(state.kernel.items())
            if view is not None and differs(key, view)
        ]
    except OSError:
        return []
