"""Masquerade and forward ports added at runtime (firewall-cmd's `--add-masquerade` and
`--add-forward-port` without `--permanent`).

They are runtime allowances (ruleset/allowances.py) whose `what` names a zone feature instead
of a port or a service, so they share the allowances' state, deadlines, expiry and their end at
`reload`. An interface one of them reaches is committed with its zone as if the zone's file
said so: the same compiler (ruleset/build.py), so the same rules as a file's `masquerade:` or
`forward-ports:`, in both backends. Compiling that variant reads the zone files, which costs
more than the cached plan: only interfaces of a zone with such an addition pay it.

A runtime removal (`--remove-service=ssh` without `--permanent`, for a service the zone's file
lists) is such a feature too, named `without:` and what it takes away (`without:ssh`,
`without:22/tcp`, `without:masquerade`, `without:forward-port:...`): the zone is compiled
without it until reload, as firewalld's runtime zone loses it until its permanent one is
loaded again.
"""

from __future__ import annotations

import dataclasses

MASQUERADE = "masquerade"
FORWARD_PREFIX = "forward-port:"
WITHOUT_PREFIX = "without:"


def forward_what(port: str, protocol: str, to_port: str, to_addr: str) -> str:
    """A forward port as an allowance names it: firewall-cmd's own notation."""
    return f"{FORWARD_PREFIX}port={port}:proto={protocol}:toport={to_port}:toaddr={to_addr}"


def forward_fields(what: str) -> tuple[str, str, str, str]:
    """(port, protocol, to_port, to_addr) of a forward port's allowance."""
    body = what[len(FORWARD_PREFIX) + len("port=") :]
    port, _, rest = body.partition(":proto=")
    protocol, _, rest = rest.partition(":toport=")
    to_port, _, to_addr = rest.partition(":toaddr=")
    return port, protocol, to_port, to_addr


def without(what: str) -> str:
    """The runtime removal of `what` (a service, a port, masquerade or a forward port)."""
    return f"{WITHOUT_PREFIX}{what}"


def removed(what: str) -> str:
    """What a runtime removal takes away ("" when `what` is no removal)."""
    return what[len(WITHOUT_PREFIX) :] if what.startswith(WITHOUT_PREFIX) else ""


def is_feature(what: str) -> bool:
    return what == MASQUERADE or what.startswith((FORWARD_PREFIX, WITHOUT_PREFIX))


def split(allowed) -> tuple[tuple[str, ...], tuple]:
    """(the zone features, the other allowances) of `allowed` ((what, deadline, wall), ...)."""
    features = tuple(a[0] for a in allowed if is_feature(a[0]))
    return features, tuple(a for a in allowed if not is_feature(a[0]))


def forward_port(what: str):
    """A forward port's allowance as the model's ForwardPort."""
    from ..config.model import ForwardPort, PortRange

    port, protocol, to_port, to_addr = forward_fields(what)
    first, _, last = port.partition("-")
    return ForwardPort(
        PortRange(int(first), int(last or first), protocol),
        int(to_port) if to_port else None,
        to_addr or None,
    )


def with_features(zone, features):
    """`zone` (model.Zone) with the runtime masquerade and forward ports in `features`, and
    without what their runtime removals take away."""
    gone = {removed(what) for what in features} - {""}
    forwards = [
        f
        for f in zone.forward_ports
        if f not in {forward_port(w) for w in gone if w.startswith(FORWARD_PREFIX)}
    ]
    for what in features:
        if what.startswith(FORWARD_PREFIX) and forward_port(what) not in forwards:
            forwards.append(forward_port(what))
    masquerade = (zone.masquerade and MASQUERADE not in gone) or MASQUERADE in features
    return dataclasses.replace(
        zone,
        services=tuple(s for s in zone.services if s not in gone),
        ports=tuple(p for p in zone.ports if str(p) not in gone),
        masquerade=masquerade,
        forward_ports=tuple(forwards),
    )


def variant_plan(paths, usable, features):
    """The ZonePlan (ruleset/plan.py) of `usable`'s zone with `features` added; a zone that
    cannot be loaded keeps its stand-in's plan (its stand-in is what applies)."""
    from ..config.load import load
    from .build import compile_interface
    from .cache import STAND_IN
    from .layout import CHAIN_KINDS
    from .plan import ZonePlan, template

    config = load(paths).config
    zone = config.zones.get(usable.name)
    if zone is None or usable.problem:
        return usable
    ruleset = compile_interface(STAND_IN, with_features(zone, features), config)
    return ZonePlan(
        {
            "name": usable.name,
            "digest": ruleset.digest(),
            "problem": "",
            "fallback": "",
            "forwarding": ruleset.needs_forwarding,
            "chains_by_table": template(ruleset.chains_by_table(), STAND_IN, CHAIN_KINDS),
        }
    )
