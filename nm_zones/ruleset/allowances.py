"""Runtime allowances: a port or service opened on an interface, or on every interface of a
zone, until a deadline or until reload, `down` or revoke (`nm-zones allow`, doors/allow.py).

An allowance is one more ACCEPT rule (per port of a service) in the interface's input chain,
just before the zone's tail (its LOG rule and its verdict), in both families, committed in
the same commit as the rest of the interface's chains.

A deadline is kept on CLOCK_BOOTTIME, which no one can set: a wall clock stepped back (an
unauthenticated NTP answer on a hostile network) neither extends nor revives an allowance.
Its rule carries the deadline as a comment naming it (`nmz-until-SECONDS`, seconds since
boot). In nftables that name is a set with an element timeout (`iifname @nmz-until-...`):
the kernel counts it down on its own clock and the rule matches nothing once it ran out.
Legacy iptables has nothing that counts down, so there the rule also carries the `time`
match's `--datestop` (the wall clock at the deadline, as it was when the allowance was
granted) as a belt. Either way the rule itself leaves the kernel at the deadline, taken out
by whichever nm-zones process runs then: the D-Bus service's timer, an event, any command
(engine.expire_allowances).

This module is on the event path: plain tuples, no imports beyond `time` and the plan's
names (ruleset/plan.py, which the event has loaded already).
"""

from __future__ import annotations

import time

from .plan import Spec, make_spec, with_matches

# An allowance as the state keeps it: (interface, or "" for every interface of the zone,
# zone, what: a service name or `8080/tcp` / `60000-61000/udp`, deadline: CLOCK_BOOTTIME
# seconds, 0 for none, and the wall clock's epoch seconds at that deadline as it was when
# granted, for iptables' --datestop and for display). Interface allowances hold while the
# interface stays bound to that zone. A network's allowance (`allow --network ID`) has the
# owner `network:ID` (the key listener answers use, doors/listeners.py) and no zone: it
# reaches every interface identified on that known network (networks/zone.py), whatever
# zone the network has.
INTERFACE, ZONE, WHAT, DEADLINE, WALL_DEADLINE = range(5)
FOREVER = 0
SET_PREFIX = "nmz-until-"  # the comment on a timed rule; in nftables, its set
NETWORK_PREFIX = "network:"  # an interface name never holds a colon (the kernel refuses it)


def network_owner(network_id: str) -> str:
    """The owner of a network's allowances."""
    return f"{NETWORK_PREFIX}{network_id}"


def for_network(allowance) -> bool:
    """Whether an allowance is a network's, not an interface's or a zone's."""
    return allowance[INTERFACE].startswith(NETWORK_PREFIX)


def boottime() -> float:
    """Seconds since boot, suspend included: the clock deadlines are kept on."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def ceil(value: float) -> int:
    """math.ceil without the math module (one import less on every event)."""
    return -int(-value // 1)


def deadlines_after(seconds: int) -> tuple[int, int]:
    """(deadline on CLOCK_BOOTTIME, the wall clock then) `seconds` from now."""
    return ceil(boottime() + seconds), ceil(time.time() + seconds)


def upgraded(allowance) -> tuple:
    """An allowance as an older nm-zones kept it (its deadline on the wall clock alone) in
    today's form; its deadline moved to CLOCK_BOOTTIME as the clocks stand now."""
    allowance = tuple(allowance)
    if len(allowance) != 4:
        return allowance
    wall = allowance[DEADLINE]
    if wall == FOREVER:
        return (*allowance, FOREVER)
    return (*allowance[:DEADLINE], ceil(boottime() + wall - time.time()), wall)


def reaches(allowance, interface: str, zone: str, network: str = "") -> bool:
    """Whether `allowance` reaches `interface` bound to `zone` and on the known network
    `network` ("" when none: not identified, or its zone does not follow its network)."""
    owner, owner_zone = allowance[INTERFACE], allowance[ZONE]
    if network and owner == network_owner(network):
        return True
    return owner_zone == zone and owner in ("", interface)


def effective(
    allowances, interface: str, zone: str, network: str = ""
) -> tuple[tuple[str, int, int], ...]:
    """(what, deadline, wall deadline) of the allowances that reach `interface` bound to
    `zone` on `network`: one per `what` (the later deadline wins, none beats any), sorted,
    expired ones included (they stay committed until a run expires them: expired())."""
    found: dict[str, tuple[int, int]] = {}
    for allowance in allowances:
        if not reaches(allowance, interface, zone, network):
            continue
        what, deadline, wall = allowance[WHAT:]
        old = found.get(what)
        if old is None or (old[0] != FOREVER and (deadline == FOREVER or deadline > old[0])):
            found[what] = (deadline, wall)
    return tuple(sorted((what, *deadlines) for what, deadlines in found.items()))


def expired(allowance, now: float | None = None) -> bool:
    """Whether its deadline passed (`now` on CLOCK_BOOTTIME)."""
    deadline = allowance[DEADLINE]
    return deadline != FOREVER and (boottime() if now is None else now) >= deadline


def next_deadline(allowances) -> int:
    """The earliest deadline of any allowance (0 when none has one)."""
    return min((a[DEADLINE] for a in allowances if a[DEADLINE] != FOREVER), default=FOREVER)


def set_name(deadline: int) -> str:
    return f"{SET_PREFIX}{deadline}"


def deadline_of(comment: str) -> int | None:
    """The deadline a rule's comment names (None: not an allowance's)."""
    if comment.startswith(SET_PREFIX) and comment[len(SET_PREFIX) :].isdigit():
        return int(comment[len(SET_PREFIX) :])
    return None


def datestop(wall: int) -> str:
    """The time match's --datestop for a wall-clock deadline: UTC, and the last second that
    still matches (the kernel compares whole seconds and matches up to and including it)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall - 1))


def port_spec(what: str) -> Spec:
    """`8080/tcp` or `60000-61000/udp` as an ACCEPT rule spec (plan.Spec)."""
    ports, _, protocol = what.rpartition("/")
    match = (protocol, (("dport", ports.replace("-", ":")),))
    return make_spec("ACCEPT", protocol=protocol, matches=(match,))


def specs(allowed, services: dict, family: str) -> tuple:
    """The rule specs of `allowed` ((what, deadline, wall deadline), ...) in one family;
    `services` maps a service name to its specs per family (cache.CompiledConfig.services).
    A service the config no longer has opens nothing."""
    result = []
    for what, deadline, wall in allowed:
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
                spec = with_matches(
                    spec,
                    ("time", (("datestop", datestop(wall)),)),
                    ("comment", (("comment", set_name(deadline)),)),
                )
            result.append(spec)
    return tuple(result)


def digest_text(allowed) -> str:
    """What the allowances add to an interface's digest: nothing when there are none, so
    that an interface without allowances keeps the digest it always had."""
    return f"\nallowed {allowed!r}" if allowed else ""
