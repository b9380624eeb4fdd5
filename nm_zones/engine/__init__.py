"""The pipeline both doors (the dispatcher hook and the `nm-zones` command) go through:
binding -> the zone's compiled plan (ruleset/cache.py) -> kernel -> state, with the fail-safe rules:

- a zone whose file (or a service it uses) cannot be loaded, or cannot be believed (others
  may write it), never opens anything: an interface already in that zone keeps its rules;
  any other gets the shipped definition, else the shipped `block`, and the run says so
  (`unfulfilled`: the D-Bus service answers COMMAND_FAILED, the command exits 1), so a failed
  switch never leaves an interface laxer than the zone it was asked for;
- the kernel is the truth: every run first compares what the kernel holds of nm-zones with
  the view recorded after nm-zones' own last commit (backends/iptables/held.py) and rebuilds
  any table that another program changed, before it commits anything itself;
- every transition is journaled (journal.py: `commit`, the one way into the kernel): an
  interface is marked `applying` or `removing` in the state before its commits, `disable`
  writes its flag first, so any later run finishes or repairs an interrupted one; panic
  mode's flag is written before its commits and removed after them, so a run cut anywhere
  in `panic on` or `panic off` ends in panic mode;
- errors stay with their interface: one that cannot be committed is marked degraded and the
  others are still repaired, collected and reloaded;
- nothing is committed when the compiled rules equal what was applied and the kernel still
  holds them (a no-op event does not even load libiptc).

The parts, one module each: core.py (the Engine, its inputs, what every run does first),
binding.py (one interface), recovery.py (reconcile, backend moves, interrupted runs, gone
interfaces), catchall.py (hooks and catch-all, panic mode, disable), reload.py (reload,
expiry of allowances), journal.py (the state, the one commit path), report.py (one run's
report, as every door shows it), basics.py (reasons, table sets, an interface's plan).
"""

from __future__ import annotations

from ..errors import describe
from ..resolve import recorded_connection
from .basics import (
    ALL_TABLES,
    FILTER_TABLES,
    IN_KERNEL,
    PANIC_WORD,
    REASON_COMMAND,
    REASON_DBUS,
    REASON_NM,
    allowed_for,
    binding_network,
    forget_allowances,
    interface_digest,
    interface_plan,
    network_for,
)
from .core import Engine
from .report import RunReport

__all__ = [
    "ALL_TABLES",
    "FILTER_TABLES",
    "IN_KERNEL",
    "PANIC_WORD",
    "REASON_COMMAND",
    "REASON_DBUS",
    "REASON_NM",
    "Engine",
    "RunReport",
    "allowed_for",
    "binding_network",
    "describe",
    "forget_allowances",
    "interface_digest",
    "interface_plan",
    "network_for",
    "recorded_connection",
]
