"""What the command line's commands share (cli.py, detail.py, status.py, zone_editor.py):
exit statuses, the engine and configuration of this environment, and the JSON forms of
zones and services. It imports none of them, so none of them needs another's private names.
"""

from __future__ import annotations

import sys

from ..errors import ConfigError
from ..paths import Paths

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_DISABLED = 0, 1, 2, 3
DISABLED = "nm-zones is disabled (nm-zones enable)"
PANIC_LINE = "panic mode: every packet in and out is dropped, loopback's excepted"


def open_engine():
    """The engine over the paths of this environment (imported here: `--help` needs none)."""
    from ..engine import Engine

    return Engine(Paths.from_environment())


def load_config(strict: bool = False):
    """The configuration as loaded from its files, kept between commands (config/kept.py)."""
    from ..config.kept import load_kept

    result = load_kept(Paths.from_environment())
    if strict and result.problems:
        raise ConfigError(result.problems)
    return result


def print_json(value) -> None:
    import json

    json.dump(value, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


def service_json(service) -> dict:
    return {
        "description": service.description,
        "ports": [str(p) for p in service.ports],
        "source-ports": [str(p) for p in service.source_ports],
        "protocols": list(service.protocols),
        "destination": dict(service.destination),
        "helpers": list(service.helpers),
    }


def service_openings(view: dict) -> str:
    """`22/tcp from 1900/udp gre`: what a service opens, on one line."""
    return " ".join(view["ports"] + [f"from {p}" for p in view["source-ports"]] + view["protocols"])


def zone_json(zone, config) -> dict:
    services = {name: service_json(config.services[name]) for name in zone.services}
    return {
        "name": zone.name,
        "description": zone.description,
        "target": zone.target,
        "services": services,
        "ports": [str(p) for p in zone.ports],
        "protocols": list(zone.protocols),
        "icmp-blocks": list(zone.icmp_blocks),
        "masquerade": zone.masquerade,
        "forward-ports": [
            {"port": str(f.port), "to-port": f.to_port, "to-addr": f.to_addr}
            for f in zone.forward_ports
        ],
        "log-denied": zone.log_denied,
        "sources": list(zone.sources),
        "applications": list(zone.applications),
        "file": zone.source,
    }
