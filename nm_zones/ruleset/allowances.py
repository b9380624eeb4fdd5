"""Runtime allowances: a port or service opened on an interface, or on every interface of a
zone, until a deadline or until reload, `down` or revoke (`nm-zones allow`, doors/allow.py).

An allowance is one more ACCEPT rule (per port of a service) in the interface's input chain,
just before the zone's tail (its LOG rule and its verdict), in both families, committed in
the same commit as the rest of the interface's chains. With a deadline it carries the `time`
match's `--datestop` (UTC): the kernel stops accepting at the deadline by itself, with no
process running (nftables says the same with `meta time < ...`). The state keeps every
allowance as committed until a run finds it expired and commits the interface without it.

This module is on the event path: plain tuples, no imports beyond `time`.
"""

from __future__ import annotations

import time

# An allowance as the state keeps it: (interface, or "" for every interface of the zone,
# zone, what: a service name or `8080/tcp` / `60000-61000/udp`, deadline: epoch seconds, 0
# for none). Interface allowances hold while the interface stays bound to that zone.
INTERFACE, ZONE, WHAT, DEADLINE = range(4)
FOREVER = 0


def effective(allowances, interface: str, zone: str) -> tuple[tuple[str, int], ...]:
    """(what, deadline) of the allowances that reach `interface` bound to `zone`: one per
    `what` (the later deadline wins, none beats any), sorted, expired ones included (they
    stay committed until a run expires them: expire())."""
    found: dict[str, int] = {}
    for owner, owner_zone, what, deadline in allowances:
        if owner_zone != zone or owner not in ("", interface):
            continue
        old = found.get(what)
        if old is None or (old != FOREVER and (deadline == FOREVER or deadline > old)):
            found[what] = deadline
    return tuple(sorted(found.items()))


def expired(allowance, now: float | None = None) -> bool:
    deadline = allowance[DEADLINE]
    return deadline != FOREVER and (time.time() if now is None else now) >= deadline


def datestop(deadline: int) -> str:
    """The time match's --datestop for a deadline: UTC, and the last second that still
    matches (the kernel compares whole seconds and matches up to and including datestop)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(deadline - 1))


def port_spec(what: str) -> tuple:
    """`8080/tcp` or `60000-61000/udp` as an ACCEPT rule spec (rules.Rule.spec)."""
    ports, _, protocol = what.rpartition("/")
    match = (protocol, (("dport", ports.replace("-", ":")),))
    return ("ACCEPT", (), None, None, protocol, (match,))


def specs(allowed, services: dict, family: str) -> tuple:
    """The rule specs of `allowed` ((what, deadline), ...) in one family; `services` maps a
    service name to its specs per family (cache.CompiledConfig.services). A service the
    config no longer has opens nothing."""
    result = []
    for what, deadline in allowed:
        if what.startswith("app:"):  # an application (ruleset/applications.py)
            from .applications import app_of
            from .applications import specs as app_specs

            found = app_specs(app_of(what))
        elif "/" in what:
            found = (port_spec(what),)
        else:
            found = services.get(what, {}).get(family, ())
        for spec in found:
            if deadline != FOREVER:
                target, options, source, destination, protocol, matches = spec
                matches = (*matches, ("time", (("datestop", datestop(deadline)),)))
                spec = (target, options, source, destination, protocol, matches)
            result.append(spec)
    return tuple(result)


def digest_text(allowed) -> str:
    """What the allowances add to an interface's digest: nothing when there are none, so
    that an interface without allowances keeps the digest it always had."""
    return f"\nallowed {allowed!r}" if allowed else ""
