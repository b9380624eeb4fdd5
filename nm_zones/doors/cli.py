"""`nm-zones`: the command line door into the same pipeline the dispatcher hook uses."""

from __future__ import annotations

import os
import sys

from ..errors import ConfigError, NmZonesError, UsageError, describe, unknown_zone
from ..paths import Paths
from ..text import printable
from .common import (
    DISABLED,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    PANIC_LINE,
    load_config,
    open_engine,
    print_json,
    service_json,
    service_openings,
    zone_json,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # argparse is imported only for a command line that needs it
    import argparse

DESCRIPTION = """\
Network zones for NetworkManager: every network gets a trust level (a zone), and the moment
NetworkManager connects it, its interface gets exactly that zone's firewall rules (IPv4 and
IPv6, through iptables' legacy tables). Only that interface's rules change.

Zones: trusted, home, internal, work, dmz, public, external, block, drop (see: nm-zones zones).
Config: shipped defaults, overridden file by file from /etc/nm-zones/ (zones.d/NAME.yaml,
services.d/NAME.yaml, connections-map.yaml). NM_ZONES_CONFIG_DIR and NM_ZONES_STATE_DIR
move /etc/nm-zones and /run/nm-zones.
"""

EPILOG = """\
examples:
  nm-zones zones                          the zones and what they allow
  nm-zones assign "Cafe Wi-Fi" public     this network is public, from now on
  nm-zones default-zone --wireless public unknown Wi-Fi networks get public
  nm-zones plan eth0 home                 the exact rules apply would commit
  nm-zones status                         what is applied where, and why
  nm-zones status eth0                    everything open on eth0
  nm-zones allow 8000/tcp --for 2h        open a port for a while (one interface bound)
  nm-zones log --follow                   packets the zones refused and logged
  nm-zones panic on                       drop every packet but loopback's, now

exit status: 0 success, 1 failure (not root, degraded, kernel error), 2 bad usage or config;
  status: 0 the kernel holds everything nm-zones should enforce, 1 anything differs, is
  degraded, applying, removing or missing, or panic mode is on, 3 nm-zones is disabled
"""


ALLOW_DETAILS = """\
Without --permanent the change is at runtime: it goes into the kernel at once, IPv4 and IPv6,
for one interface (--interface) or for every interface bound to a zone (--zone), including
interfaces bound to it later. It lasts until `nm-zones reload`, until the interface goes
down (a reboot, a disconnect), until `nm-zones revoke`, or until the end of --for, kept on
the boot clock (a wall clock stepped back neither extends nor revives it): the rule leaves
the kernel then, taken out by `nm-zones serve`'s timer or the next run of nm-zones. Until
then the kernel stops accepting by itself: nftables with a set element that times out,
iptables with the `time` match's --datestop (the wall clock: with iptables and no service
running, a clock stepped back reopens it until the next run).
Without --zone, --interface and --network it applies to the one bound interface, when only
one is.

--network ID (an id of nm-zones networks) opens WHAT on that known network only: on every
interface identified on it, now and whenever a connection reaches it again (on any
interface), committed with the network's zone when the connection comes up; it stops
applying when the interface leaves the network. Only connections whose zone follows their
network are identified (a profile with no zone of its own; see nm-zones networks --help).
Without --permanent it is runtime, like --zone: it ends at reload, reboot, revoke or the
end of --for (not when an interface goes down). With --permanent, WHAT is kept with the
network in /var/lib/nm-zones/networks.yaml (its `allow`, listed by nm-zones networks): it
outlives reloads and reboots, until `revoke --permanent --network ID` or until the network
is forgotten. Placing the network in a zone that lets nobody in (block, drop) ends both.

With --permanent, WHAT is added to the zone's list (services or ports) in the admin's file
/etc/nm-zones/zones.d/ZONE.yaml (made from the shipped file when absent; comments and order
are kept), the file is checked like any zone file, and the zone's interfaces are re-applied.
A runtime allowance of a service opens its ports, not its conntrack helpers.

--app APP (nftables backend only) opens every port a program listens on, and nothing else:
new connections and datagrams whose receiving socket belongs to APP, a systemd unit or scope
name (wildcards allowed: 'app-org.kde.kdeconnect-*.scope') or a cgroup path relative to the
cgroup v2 root. The program may start later; a restarted unit is matched again within 2 s
while `nm-zones serve` runs (it keeps the set of APP's cgroups current)."""


def _paths() -> Paths:
    return Paths.from_environment()


def _need_root(command: str) -> None:
    if os.geteuid() != 0:
        raise PermissionError(f"{command} changes the firewall: run it as root")


# -- read-only commands ------------------------------------------------------------------


def cmd_zones(args) -> int:
    loaded = load_config()
    config = loaded.config
    default = config.connections_map.default_zone
    names = sorted(set(config.zones) | set(loaded.broken_zones))
    if args.json:
        print_json(
            [
                {
                    "name": name,
                    "description": config.zones[name].description if name in config.zones else "",
                    "target": config.zones[name].target if name in config.zones else None,
                    "default": name == default,
                    "broken": name in loaded.broken_zones,
                }
                for name in names
            ]
        )
        return EXIT_OK
    for name in names:
        mark = "*" if name == default else " "
        if name in loaded.broken_zones:
            print(f"{mark} {name:<17} BROKEN: {loaded.broken_zones[name][0]}")
        else:
            print(f"{mark} {name:<17} {config.zones[name].description}")
    return EXIT_OK


def _loaded_zone(name: str):
    """(zone, config) for a zone that can be shown; its problems or a usage error if not."""
    loaded = load_config()
    if name in loaded.broken_zones:
        raise ConfigError(loaded.broken_zones[name])
    if name not in loaded.config.zones:
        raise unknown_zone(name)
    return loaded.config.zones[name], loaded.config


def cmd_show(args) -> int:
    view = zone_json(*_loaded_zone(args.zone))
    if args.json:
        print_json(view)
        return EXIT_OK
    print(f"{view['name']}: {view['description']}")
    print(f"  file:         {view['file']}")
    print(f"  target:       {view['target']}")
    for name, service in view["services"].items():
        where = ", ".join(f"{k} {v}" for k, v in sorted(service["destination"].items()))
        print(
            f"  service:      {name:<16} {service_openings(service)}"
            + (f"  (to {where})" if where else "")
        )
    for key in ("ports", "protocols", "icmp-blocks", "sources", "applications"):
        if view[key]:
            print(f"  {key + ':':<13} {' '.join(view[key])}")
    if view["masquerade"]:
        print("  masquerade:   yes (IPv4)")
    for forward in view["forward-ports"]:
        to = f"{forward['to-addr'] or ''}{':' if forward['to-port'] else ''}"
        to += str(forward["to-port"] or "")
        print(f"  forward-port: {forward['port']} -> {to}")
    if view["log-denied"]:
        print("  log-denied:   yes")
    return EXIT_OK


def cmd_services(args) -> int:
    services = load_config().config.services
    if args.json:
        print_json({name: service_json(s) for name, s in sorted(services.items())})
        return EXIT_OK
    for name, service in sorted(services.items()):
        print(f"{name:<26} {service_openings(service_json(service)):<28} {service.description}")
    return EXIT_OK


def _warn_stray_files(paths: Paths) -> None:
    from ..paths import stray_yml_files

    for path in stray_yml_files(paths):
        print(f"nm-zones: {path}: ignored: only files named NAME.yaml are read", file=sys.stderr)


def cmd_check(args) -> int:
    from ..config.load import load

    _warn_stray_files(_paths())
    result = load(_paths())
    if result.problems:
        raise ConfigError(result.problems)
    _warn_iptables_variant(_plan_backend(result.config.settings.backend))
    return EXIT_OK


def _plan_backend(setting: str) -> str:
    """The backend the setting names (auto: as the kernel decides, see backends)."""
    from ..backends import choose

    return choose(setting)[0]


def _warn_iptables_variant(backend: str) -> None:
    """The admin's `iptables` shows nft's tables only: rules nm-zones keeps in legacy x_tables
    are invisible to it (it says only "iptables-legacy tables present")."""
    import shutil
    import subprocess

    if backend != "iptables" or not shutil.which("iptables"):
        return
    try:
        version = subprocess.run(
            ["iptables", "--version"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return
    if "nf_tables" in version:
        print(
            "nm-zones: warning: this system's `iptables` is the nft variant, but nm-zones keeps "
            "its rules in legacy x_tables (backend iptables): `iptables -S` will not show them "
            "(use iptables-legacy -S), or set `backend: nftables` in nm-zones.yaml",
            file=sys.stderr,
        )


def cmd_plan(args) -> int:
    from ..ifname import check_interface
    from ..ruleset.build import compile_interface

    check_interface(args.interface)
    zone, config = _loaded_zone(args.zone)
    if _paths().panic:
        print(f"nm-zones: {PANIC_LINE}; these rules take over then", file=sys.stderr)
    ruleset = _with_runtime_allowances(compile_interface(args.interface, zone, config), config)
    from ..ruleset.sources import plan_with_sources

    ruleset = plan_with_sources(ruleset, zone, config)
    if _plan_backend(config.settings.backend) == "nftables":
        from ..backends.nftables.backend import plan_script
        from ..ruleset.plan import KernelPlan

        plan = KernelPlan(args.interface, ruleset.chains_by_table(), ruleset.needs_forwarding)
        sys.stdout.write("# nftables\n" + plan_script(plan))
        return EXIT_OK
    if zone.applications:
        from ..backends.iptables.backend import without_applications
        from ..ruleset.applications import APPS_NO_EFFECT
        from ..ruleset.plan import KernelPlan
        from ..ruleset.rules import Ruleset

        plan = without_applications(KernelPlan(args.interface, ruleset.chains_by_table()))
        ruleset = Ruleset.from_chains_by_table(args.interface, zone.name, plan.chains_by_table)
        print(f"nm-zones: zone {zone.name}: {APPS_NO_EFFECT}", file=sys.stderr)
    sys.stdout.write("# IPv4\n" + ruleset.save_text("ipv4"))
    sys.stdout.write("# IPv6\n" + ruleset.save_text("ipv6"))
    return EXIT_OK


def _with_runtime_allowances(ruleset, config):
    """What `nm-zones allow` opened at runtime on the interface, or on every interface of
    the zone, is part of what apply would commit."""
    from ..engine import allowed_for
    from ..state import StateDir

    allowed = allowed_for(StateDir(_paths().state).load(), ruleset.interface, ruleset.zone)
    if not allowed:
        return ruleset
    from ..ruleset.allowances import specs
    from ..ruleset.build import compile_interface, service_specs, with_allowances
    from ..ruleset.layout import FAMILIES
    from ..ruleset.runtime_features import split, with_features

    features, allowed = split(allowed)
    if features and ruleset.zone in config.zones:  # a runtime masquerade or forward port
        zone = with_features(config.zones[ruleset.zone], features)
        ruleset = compile_interface(ruleset.interface, zone, config)

    services = {name: service_specs(service) for name, service in config.services.items()}
    return with_allowances(ruleset, {f: specs(allowed, services, f) for f in FAMILIES})


# -- commands that change the firewall ---------------------------------------------------


def _run_changes(engine, action, refused_while_disabled: str = "") -> int:
    """Run `action(state)` under the state lock, after engine.prepare (the kernel made to
    hold what the state says); say every change and warning, even when it fails. While
    nm-zones is disabled, an interrupted disable is finished first, and the action runs
    without prepare, or is refused with `refused_while_disabled`."""
    try:
        with engine.state_dir.locked():
            state = engine.state_dir.load()
            if not engine.begin(state) and refused_while_disabled:
                raise UsageError(refused_while_disabled)
            action(state)
    finally:
        engine.report().show("nm-zones", changes_to=sys.stdout)
    return engine.report().exit_status()


def cmd_apply(args) -> int:
    _need_root("apply")
    from ..ifname import check_interface

    check_interface(args.interface)
    engine = open_engine()
    if args.zone not in engine.known_zones():
        raise unknown_zone(args.zone)

    def action(state):
        from ..engine import REASON_COMMAND
        from ..ifname import interface_index

        if not interface_index(args.interface):
            raise UsageError(f"no interface named {args.interface!r}")
        engine.apply_interface(args.interface, args.zone, REASON_COMMAND, state=state)

    return _run_changes(engine, action, DISABLED)


def cmd_remove(args) -> int:
    _need_root("remove")
    from ..ifname import check_interface

    check_interface(args.interface)
    engine = open_engine()
    return _run_changes(engine, lambda state: engine.remove_interface(args.interface, state=state))


def cmd_reload(args) -> int:
    _need_root("reload")
    from ..engine import Engine

    engine = Engine(_paths(), use_cache=False)
    _warn_stray_files(engine.paths)
    if engine.compiled.problems:
        for problem in engine.compiled.problems:
            print(problem, file=sys.stderr)
        engine.degraded = True

    status = _run_changes(engine, engine.reload_everything, DISABLED)
    _tell_service_reloaded(report=status == EXIT_OK)
    return status


def cmd_panic(args) -> int:
    """Panic mode on or off (engine.set_panic), after what every run does first."""
    _need_root("panic")
    from ..engine import REASON_COMMAND

    engine = open_engine()
    on = args.state == "on"
    refused = "nm-zones is disabled: panic mode needs it enabled (nm-zones enable)" if on else ""
    return _run_changes(engine, lambda state: engine.set_panic(state, on, REASON_COMMAND), refused)


def cmd_allow(args) -> int:
    """allow and revoke: WHAT and the options checked first (exit 2), the change under the
    state lock (doors/allow.py)."""
    from ..ifname import check_interface
    from .allow import Request, check_what, known_network, run

    if args.permanent and args.duration:
        raise UsageError("--for and --permanent exclude each other: a permanent change has no end")
    if args.command == "revoke" and args.duration:
        raise UsageError("revoke takes no --for")
    if args.interface:
        check_interface(args.interface)
    loaded = load_config()
    if bool(args.app) == bool(args.what):
        raise UsageError("give WHAT (a service or a port) or --app APP, one of them")
    if args.app:  # doors/apps.py's imports cost a port's allowance 2-3 ms
        from .apps import app_what

        what = app_what(args.app)
    else:
        what = check_what(args.what, loaded)
    if args.network:
        known_network(_paths(), args.network)  # exit 2 at once for an id nobody knows
    request = Request(args, what, loaded)
    _need_root(args.command)
    engine = open_engine()
    if args.app and args.command == "allow":
        from .apps import check_app_support

        check_app_support(engine.backend.name)
    if args.zone and args.zone not in engine.known_zones():
        raise unknown_zone(args.zone)
    return _run_changes(engine, lambda state: run(engine, request, state), DISABLED)


def cmd_log(args) -> int:
    from ..ifname import check_interface
    from ..state import StateDir
    from .denied import show

    if args.interface:
        check_interface(args.interface)
    import contextlib

    paths = _paths()
    with contextlib.suppress(KeyboardInterrupt):
        show(StateDir(paths.state).load(), load_config().config, args.interface, args.follow)
    return EXIT_OK


def _tell_service_reloaded(report: bool = True) -> None:
    """When `nm-zones serve` runs, ask it to reload too: it then emits `Reloaded`, and
    NetworkManager pushes every active device's zone again. Its error is said only when
    this run had nothing to say (it would repeat what this run found)."""
    from .busapi import MAIN_INTERFACE, ServiceError, call_service

    try:
        call_service(MAIN_INTERFACE, "reload", timeout=10)
    except ServiceError as error:
        if report:
            print(f"nm-zones: the D-Bus service: {error}", file=sys.stderr)
    except (OSError, TimeoutError):
        pass  # no bus, or no answer: the kernel is reloaded all the same


def cmd_serve(args) -> int:
    from .service import main as serve

    return serve(_paths())


def cmd_gc(args) -> int:
    _need_root("gc")
    engine = open_engine()

    def action(state) -> None:
        if not engine.paths.disabled:
            engine.collect_orphans(state)

    return _run_changes(engine, action)


def cmd_status(args) -> int:
    if args.interface:
        from .detail import show_interface

        return show_interface(args)
    from .status import show_status

    return show_status(args)


def _through_service(command: str, method: str, args: tuple) -> int | None:
    """For a user who is not root: the same change through `nm-zones serve`, which asks
    polkit; None when no service runs (the caller then needs root)."""
    if os.geteuid() == 0:
        return None
    from .busapi import NMZ_INTERFACE, ServiceError, call_service

    try:
        reply = call_service(NMZ_INTERFACE, method, "ss", args)
    except ServiceError as error:
        raise PermissionError(f"{command}: {error}") from None
    if reply is None:
        return None
    for line in reply[0]:
        print(line)
    return EXIT_OK


def cmd_assign(args) -> int:
    from .nm import assign

    if args.profile:  # the service's AssignConnection places an identified network instead
        _need_root("assign --profile")
    through = _through_service("assign", "AssignConnection", (args.connection, args.zone))
    if through is not None:
        return through
    _need_root("assign")
    engine = open_engine()
    if args.zone not in engine.known_zones():
        raise unknown_zone(args.zone)

    def action(state) -> None:
        from .networks import assign_to_network

        said = "" if args.profile else assign_to_network(engine, args.connection, args.zone, state)
        if said:
            print(printable(said))
        else:
            assign(engine, args.connection, args.zone, state)

    return _run_changes(engine, action)


def cmd_networks(args) -> int:
    """The known networks (doors/networks.py): listed, or forgotten, renamed, placed."""
    from .networks import change_network, check_change, known_networks, listing

    if not args.action:
        store = known_networks(_paths())
        if args.json:
            print_json({"networks": [network.as_dict() for network in store.networks]})
        else:
            print("\n".join(printable(line) for line in listing(store)))
        return EXIT_OK
    _need_root(f"networks {args.action}")
    engine = open_engine()
    value = {"rename": getattr(args, "label", ""), "zone": getattr(args, "zone", "")}
    value = value.get(args.action, "")
    check_change(engine, args.action, value)  # before the lock: exit 2 at once

    def action(state) -> None:
        print(printable(change_network(engine, args.action, args.id, value, state)))

    return _run_changes(engine, action)


def cmd_default_zone(args) -> int:
    from ..config.mapfile import set_map_zone

    loaded = load_config()
    cmap = loaded.config.connections_map
    key = "wired-zone" if args.wired else "wireless-zone" if args.wireless else "default-zone"
    current = {
        "default-zone": cmap.default_zone,
        "wired-zone": cmap.wired_zone,
        "wireless-zone": cmap.wireless_zone,
    }[key]
    if args.zone is None:
        print(current or f"{cmap.default_zone} (default-zone)")
        return EXIT_OK
    through = _through_service("default-zone", "SetMapZone", (key, args.zone))
    if through is not None:
        return through
    _need_root("default-zone")
    known = set(loaded.config.zones) | set(loaded.broken_zones)
    if args.zone not in known and not (args.zone == "" and key != "default-zone"):
        raise unknown_zone(args.zone)
    paths = _paths()
    set_map_zone(paths, key, args.zone)
    if paths.disabled:
        return EXIT_OK
    from ..engine import Engine

    engine = Engine(paths, use_cache=False)
    status = _run_changes(engine, engine.reload)
    _tell_service_reloaded(report=status == EXIT_OK)
    return status


def cmd_enable(args) -> int:
    _need_root("enable")
    import contextlib

    from .nm import enable

    engine = open_engine()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(engine.paths.disabled_flag)
    return _run_changes(engine, lambda state: enable(engine, state))


def cmd_disable(args) -> int:
    _need_root("disable")
    from .nm import disable

    engine = open_engine()
    with engine.state_dir.locked():  # no prepare: nothing is rebuilt that is to go
        disable(engine)
    for change in engine.changes:
        print(printable(str(change)))
    return EXIT_OK


def cmd_install(args) -> int:
    from .install import install, uninstall

    if os.geteuid() != 0 and args.root == "/":
        raise PermissionError("install writes to /etc: run it as root, or give --root DIR")
    outcome = (uninstall if args.uninstall else install)(args.root)
    for line in outcome.lines:
        print(line)
    return EXIT_FAILURE if outcome.kept else EXIT_OK


# -- argument parsing --------------------------------------------------------------------


def package_version() -> str:
    """setup.cfg's version when running from a checkout, else the installed metadata's."""
    from ..paths import SHIPPED_DIR

    try:
        with open(os.path.join(os.path.dirname(SHIPPED_DIR), "setup.cfg")) as stream:
            pairs = [line.split("=", 1) for line in stream if "=" in line]
        fields = {key.strip(): value.strip() for key, value in pairs}
        if fields.get("name") == "nm-zones":
            return fields["version"]
    except (OSError, KeyError):
        pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nm-zones")
    except PackageNotFoundError:
        return "unknown"


def _version_action() -> type:
    """--version, worked out only when asked for (the parser is built for every command
    that is not a plain one, see plain_args)."""
    import argparse

    class Version(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            print(f"nm-zones {package_version()}")
            parser.exit()

    return Version


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line, one helper per group of commands (their order is --help's); with
    `only`, the subcommands but that one are left out (building them all costs ~10 ms):
    what it parses and says for `nm-zones ONLY ...` is the same."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="nm-zones",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from .networks import add_networks_commands

    parser.add_argument(
        "--version", action=_version_action(), nargs=0, help="print the version and exit"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.only, sub.names = only, []  # _command: the one to build; every one it was asked for
    parser.command_names = sub.names
    _add_config_commands(sub)
    _add_interface_commands(sub)
    _add_allow_commands(sub)
    _add_kernel_commands(sub)
    _add_nm_commands(sub)
    add_networks_commands(sub, _command, cmd_networks)
    _add_system_commands(sub)
    return parser


class _LeftOut:
    """What _command gives for a subcommand build_parser(only=...) leaves out: it takes
    the calls that would describe it and does nothing."""

    description = ""

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self


def _command(sub, name, func, summary, example, **kwargs) -> argparse.ArgumentParser:
    """One subcommand: its summary is both its --help line and its description."""
    getattr(sub, "names", []).append(name)
    if getattr(sub, "only", None) not in (None, name):
        return _LeftOut()  # type: ignore[return-value]
    import argparse

    p = sub.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kwargs,
    )
    p.set_defaults(func=func)
    return p


def _add_config_commands(sub) -> None:
    """The commands that read the config: zones, show, services, check, plan."""
    p = _command(sub, "zones", cmd_zones, "list the zones; * marks default-zone", "nm-zones zones")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = _command(
        sub,
        "show",
        cmd_show,
        "what a zone allows, services expanded to ports",
        "nm-zones show home",
    )
    p.add_argument("zone")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = _command(
        sub,
        "services",
        cmd_services,
        "list the service catalog (shipped + /etc)",
        "nm-zones services --json",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _command(
        sub,
        "check",
        cmd_check,
        "validate every zone, service and the map; one line per problem, exit 2 if any",
        "nm-zones check && nm-zones reload",
    )
    p = _command(
        sub,
        "plan",
        cmd_plan,
        "print the rules apply would commit: '# IPv4' then iptables-save text, '# IPv6' then "
        "ip6tables-save text, each loadable by iptables-legacy-restore --noflush "
        "(declaring a chain flushes it: load it into a scratch namespace, not a live system); "
        "runtime allowances the interface has in that zone (nm-zones allow) included",
        "nm-zones plan eth0 public",
    )
    p.add_argument("interface")
    p.add_argument("zone")


def _add_interface_commands(sub) -> None:
    """The commands on one interface: apply, remove, status."""
    p = _command(
        sub,
        "apply",
        cmd_apply,
        "bind an interface to a zone now (root)",
        "nm-zones apply eth0 home",
    )
    p.add_argument("interface")
    p.add_argument("zone")
    p = _command(
        sub,
        "remove",
        cmd_remove,
        "remove an interface's rules; it falls back to the catch-all (root)",
        "nm-zones remove eth0",
    )
    p.add_argument("interface")
    p = _command(
        sub,
        "status",
        cmd_status,
        "what is applied where, since when, why, whether the kernel still holds it, and how "
        "many open flows the interface's last switch ended; with IFACE, that interface in "
        "full: everything open on it (services expanded to ports, runtime allowances and "
        "their time left, forward-ports, masquerade)",
        "nm-zones status --json\n  nm-zones status wlan0",
    )
    p.add_argument("interface", nargs="?", metavar="IFACE", help="show this interface in full")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _add_allow_commands(sub) -> None:
    """Allow and revoke: one parser shape, two verbs."""
    for verb, summary, details, examples in (
        (
            "allow",
            "open a port or a service now, for a while, or for good (root)",
            ALLOW_DETAILS,
            "nm-zones allow 8000/tcp --for 2h\n  nm-zones allow samba-client --zone home "
            "--for 10m\n  nm-zones allow 60000-61000/udp --interface wlan0\n"
            "  nm-zones allow https --zone work --permanent\n"
            "  nm-zones allow --app minidlna.service --interface eth0\n"
            "  nm-zones allow 8200/tcp --network 3f2a9c1b07",
        ),
        (
            "revoke",
            "close again what allow opened (root)",
            "revoke takes back the runtime allowance of the same scope (--interface, --zone,\n"
            "--network, or the one bound interface), or with --permanent removes WHAT from\n"
            "the admin's zone file and re-applies the zone's interfaces.",
            "nm-zones revoke 8000/tcp\n  nm-zones revoke https --zone work --permanent\n"
            "  nm-zones revoke 8200/tcp --network 3f2a9c1b07",
        ),
    ):
        p = _command(sub, verb, cmd_allow, summary, examples)
        p.description = f"{summary}\n\n{details}"
        p.add_argument(
            "what",
            metavar="WHAT",
            nargs="?",
            help="a service (nm-zones services), 8080/tcp or 6000-6010/udp",
        )
        p.add_argument(
            "--app",
            metavar="APP",
            help="every port APP listens on: a unit or scope name, or a cgroup path (nftables)",
        )
        scope = p.add_mutually_exclusive_group()
        scope.add_argument("--zone", help="every interface bound to ZONE, now and later")
        scope.add_argument("--interface", metavar="IFACE", help="this bound interface only")
        scope.add_argument(
            "--network",
            metavar="ID",
            help="the known network ID (nm-zones networks): whichever interface is on it, "
            "now and whenever it is recognised again",
        )
        if verb == "allow":
            p.add_argument(
                "--for",
                dest="duration",
                metavar="DURATION",
                help="until DURATION from now: 30s, 10m, 2h, 1d (on the boot clock)",
            )
        else:
            p.set_defaults(duration=None)
        p.add_argument(
            "--permanent",
            action="store_true",
            help="change the zone's file (with --network: the network's entry) and re-apply",
        )


def _add_kernel_commands(sub) -> None:
    """The kernel log and the whole ruleset: log, reload, gc."""
    p = _command(
        sub,
        "log",
        cmd_log,
        "the packets zones with log-denied: true refused, from the kernel log (journalctl -k "
        "where the journal runs, else /dev/kmsg): time, interface, zone, protocol, "
        "source -> port (root)",
        "nm-zones log wlan0 --follow",
    )
    p.add_argument("interface", nargs="?", metavar="IFACE", help="only this interface")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new ones")
    _command(
        sub,
        "reload",
        cmd_reload,
        "re-read the config; re-apply only interfaces whose rules changed; installs the "
        "hooks and the catch-all even with nothing bound (root)",
        "nm-zones reload",
    )
    _command(
        sub,
        "gc",
        cmd_gc,
        "remove rules of interfaces that are gone and chains nobody owns (root)",
        "nm-zones gc",
    )


def _add_nm_commands(sub) -> None:
    """The commands that set zones in NetworkManager: assign, default-zone."""
    p = _command(
        sub,
        "assign",
        cmd_assign,
        "set a connection's zone and apply it at once if the connection is active (root): "
        "for a profile whose zone follows its network (no zone of its own, identify-networks), "
        "the zone of the network it is on now (nm-zones networks); else, or with --profile, "
        "the profile's own zone in NetworkManager (connection.zone), on every network; for "
        "a profile non-admins may edit, a zone outside user-profile-zones is also kept by "
        "its UUID in the connections map",
        'nm-zones assign "Home Wi-Fi" home\n  nm-zones assign "Wired connection 1" home',
    )
    p.add_argument("connection", help="connection name, UUID or path, as nmcli takes it")
    p.add_argument("zone")
    p.add_argument(
        "--profile",
        action="store_true",
        help="set connection.zone in the profile (every network), not the network's zone",
    )
    p = _command(
        sub,
        "default-zone",
        cmd_default_zone,
        "show or set the zone of networks nothing else places; interfaces that got "
        "their zone that way follow at once (root to set)",
        "nm-zones default-zone --wireless public",
    )
    p.add_argument("zone", nargs="?", help="the zone to set; omit to show the current one")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--wired", action="store_true", help="unknown wired networks only")
    which.add_argument("--wireless", action="store_true", help="unknown wireless networks only")


def _add_system_commands(sub) -> None:
    """Nm-zones as a whole: enable, disable, panic, serve, install."""
    _command(
        sub,
        "enable",
        cmd_enable,
        "turn nm-zones back on and apply the zones of all active connections (root)",
        "nm-zones enable",
    )
    _command(
        sub,
        "disable",
        cmd_disable,
        "remove every nm-zones rule and make the hook a no-op, across reboots; refused "
        "while panic mode is on (root)",
        "nm-zones disable",
    )
    p = _command(
        sub,
        "panic",
        cmd_panic,
        "panic mode: on drops every packet in, out and forwarded, IPv4 and IPv6, except "
        "loopback's, in one commit, above every zone, until off (events, reload and "
        "restarts keep it; lost at reboot); off gives every interface its zone back; "
        "status says so while it is on (root)",
        "nm-zones panic on\n  nm-zones panic off",
    )
    p.add_argument("state", choices=("on", "off"))
    _command(
        sub,
        "serve",
        cmd_serve,
        "run the D-Bus service in the foreground (root): own org.fedoraproject.FirewallD1 on "
        "the system bus and answer NetworkManager and the connection editors as firewalld "
        "would, so a connection's zone applies before its addresses, `nmcli connection "
        "modify X connection.zone Z` takes effect at once, and users polkit allows can "
        "assign zones; refuses to start beside firewalld. Logs to stderr and syslog",
        "nm-zones serve",
    )
    p = _command(
        sub,
        "install",
        cmd_install,
        "for a pip install: the NetworkManager hook, root's fast /usr/local/sbin/nm-zones, "
        "/etc/nm-zones with a commented map, and the boot-time unit; prints each file it "
        "wrote and the next steps. It refuses package folders root does not control, and "
        "keeps (naming them, exit 1) files it did not write or that were edited since",
        "nm-zones install && systemctl daemon-reload && systemctl enable nm-zones.service",
    )
    p.add_argument(
        "--root", default="/", metavar="DIR", help="write everything under DIR (default /)"
    )
    p.add_argument(
        "--uninstall",
        action="store_true",
        help="first remove every nm-zones rule from the kernel (with DIR /), then the files "
        "install wrote and nobody edited, the state and the disabled flag",
    )


def _dash_port(argv: list[str]) -> str:
    """A WHAT of allow or revoke that starts with '-' and a digit (`-1/tcp`): argparse would
    take it for an option and print its usage; it is a port out of range, said in one line.
    An option's value is not a WHAT (`--zone -5` is argparse's to judge), and -h is help."""
    if not argv or argv[0] not in ("allow", "revoke") or {"-h", "--help"} & set(argv):
        return ""
    words = iter(argv[1:])
    for word in words:
        if word == "--":
            return ""
        if word in ALLOW_OPTIONS:
            next(words, None)
        elif len(word) > 1 and word[0] == "-" and word[1].isdigit():
            return f"{word!r} is not a port: ports are 1-65535, as in 8080/tcp or 60000-61000/udp"
    return ""


class PlainArgs:
    """The parsed command line of a plain command (plain_args): what argparse's Namespace
    would hold."""

    def __init__(self, **values) -> None:
        self.__dict__.update(values)


# Commands whose parsers take positional arguments only, with their names: a command line
# of exactly these, none starting with '-', parses without argparse (whose import and
# parser cost a process 10-20 ms); anything else (-h, a missing or extra word) goes to
# argparse, which says what it always said. allow and revoke, whose options come up in
# scripts and timed openings, are parsed so too (plain_allow_args). test_cli checks each
# against argparse.
PLAIN_COMMANDS = {
    "apply": (cmd_apply, ("interface", "zone")),
    "remove": (cmd_remove, ("interface",)),
    "reload": (cmd_reload, ()),
    "gc": (cmd_gc, ()),
    "enable": (cmd_enable, ()),
    "disable": (cmd_disable, ()),
}


# allow and revoke: the options that take a value (with argparse's dest for it); --for is
# allow's alone, and --zone, --interface and --network exclude each other
ALLOW_OPTIONS = {
    "--app": "app",
    "--zone": "zone",
    "--interface": "interface",
    "--network": "network",
    "--for": "duration",
}
SCOPE_OPTIONS = frozenset({"--zone", "--interface", "--network"})


def plain_args(argv: list[str]) -> PlainArgs | None:
    """The parsed arguments of a plain command line (PLAIN_COMMANDS, or allow and revoke
    as plain_allow_args takes them), else None."""
    if argv and argv[0] in ("allow", "revoke"):
        return plain_allow_args(argv)
    if not argv or argv[0] not in PLAIN_COMMANDS:
        return None
    func, names = PLAIN_COMMANDS[argv[0]]
    words = argv[1:]
    if len(words) != len(names) or any(word.startswith("-") for word in words):
        return None
    return PlainArgs(command=argv[0], func=func, **dict(zip(names, words, strict=True)))


def plain_allow_args(argv: list[str]) -> PlainArgs | None:
    """allow or revoke with at most one WHAT and each option at most once, an option's
    value as the next word and none starting with '-' (`--for 2h`, not `--for=2h`), at
    most one of --zone, --interface and --network: what argparse makes of it, else None
    (argparse then takes it and says what it always said: -h, an abbreviation, `=`, a
    repeated or conflicting option, a missing value)."""
    verb, words = argv[0], argv[1:]
    options = {o: d for o, d in ALLOW_OPTIONS.items() if verb == "allow" or o != "--for"}
    values: dict = {"what": None, "permanent": False, **dict.fromkeys(ALLOW_OPTIONS.values())}
    seen: set[str] = set()  # the options given
    index = 0
    while index < len(words):
        word = words[index]
        if word in seen:
            return None
        if word == "--permanent":
            values["permanent"] = True
        elif word in options:
            index += 1
            if index == len(words) or words[index].startswith("-"):
                return None
            values[options[word]] = words[index]
        elif word.startswith("-") or values["what"] is not None:
            return None  # not an option of these, or a second WHAT
        else:
            values["what"] = word
        if word.startswith("-"):
            seen.add(word)
        index += 1
    if len(seen & SCOPE_OPTIONS) > 1:
        return None
    return PlainArgs(command=verb, func=cmd_allow, **values)


def parse(argv: list[str]):
    """The parsed command line: without argparse for a plain one, else with a parser that
    holds only the command given, or the whole tree (top-level options, --help, errors)."""
    args = plain_args(argv)
    if args is not None:
        return args
    only = argv[0] if argv and not argv[0].startswith("-") else None
    parser = build_parser(only)
    if only is not None and only not in parser.command_names:
        parser = build_parser()  # not a command: the whole tree names them all
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    dash_port = _dash_port(argv)
    if dash_port:
        print(f"nm-zones: {dash_port}", file=sys.stderr)
        return EXIT_USAGE
    args = parse(argv)
    try:
        return args.func(args)
    except (NmZonesError, OSError) as error:  # the backends turned their libraries' into these
        return _failed(error)


def run() -> None:
    """The command's process, as its launchers start it: main(), then the process's end
    (doors/__init__.py). main() itself returns, for callers in a process of their own."""
    from . import end_process

    end_process(main())


def _failed(error: NmZonesError | OSError) -> int:
    """The command's one error handler: what went wrong in one line (a config's problems,
    one line each), on stderr, and in syslog too when the system failed rather than the
    caller; the error's exit status (errors.py)."""
    if isinstance(error, BrokenPipeError):
        return EXIT_FAILURE  # the reader went away: nobody to tell
    if isinstance(error, ConfigError):
        for line in error.lines():
            print(line, file=sys.stderr)
        return error.exit_status
    if isinstance(error, (UsageError, PermissionError)):  # the caller's to mend: not logged
        print(f"nm-zones: {error}", file=sys.stderr)
        return getattr(error, "exit_status", EXIT_FAILURE)
    topic = getattr(error, "topic", "")
    status = _failure(f"{topic}: {error}" if topic else describe(error))
    return getattr(error, "exit_status", status)


def _failure(message: str) -> int:
    """One line on stderr and in syslog; exit status 1."""
    from ..log import to_syslog

    print(f"nm-zones: {printable(message)}", file=sys.stderr)
    to_syslog(message, warning=True)
    return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
