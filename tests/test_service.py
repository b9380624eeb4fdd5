"""`nm-zones serve` against the real NetworkManager, nm-dispatcher, dbus-daemon (with the D-Bus
policy `nm-zones install` writes) and polkitd, all in the namespace sandbox."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time

import pytest

from tests.harness.lab import PYTHON, base_env, wait_for
from tests.harness.nm_sandbox import NMSandbox
from tests.test_nm import (
    BLOCK,
    HOME,
    LAX_FOR_USERS,
    NEEDS_NM,
    PUBLIC,
    TRUSTED,
    WORK,
    connect_in_zone,
    specs,
    wait_both_families,
    write_settings,
)

ZONE = "org.fedoraproject.FirewallD1.zone"
MAIN = "org.fedoraproject.FirewallD1"
NETDEV_RULE = """polkit.addRule(function(action, subject) {
    if (action.id == "org.nm-zones.assign" && subject.isInGroup("netdev"))
        return polkit.Result.YES;
});
"""


@pytest.fixture
def nm(tmp_path):
    """The sandbox with `nm-zones install` done (hook, D-Bus policy, polkit actions)."""
    if NEEDS_NM:
        pytest.skip("needs root and NetworkManager")
    sandbox = NMSandbox(str(tmp_path / "sandbox"))
    sandbox.start()
    try:
        sandbox.install_hook()
        reload_bus_config(sandbox)
        yield sandbox
    finally:
        sandbox.stop()


@pytest.fixture
def served(nm):
    nm.serve()
    return nm


def reload_bus_config(nm) -> None:
    nm.run(
        [
            "gdbus",
            "call",
            "--system",
            "--dest",
            "org.freedesktop.DBus",
            "--object-path",
            "/org/freedesktop/DBus",
            "--method",
            "org.freedesktop.DBus.ReloadConfig",
        ]
    )


def call(nm, method: str, *args: str, user: str | None = None) -> str:
    """A call that must succeed; its reply as gdbus prints it."""
    result = nm.gdbus(method, *args, user=user)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def error(nm, method: str, *args: str, user: str | None = None) -> str:
    """A call that must fail; `ERROR.NAME: message`."""
    result = nm.gdbus(method, *args, user=user)
    assert result.returncode != 0, result.stdout
    return result.stderr.strip().removeprefix("Error: GDBus.Error:")


def up(nm, name: str = "lan", *settings: str):
    link = nm.add_veth()
    nm.add_connection(link, name, *settings)
    nm.nmcli("connection", "up", name)
    return link


def nm_path() -> str:
    return "/org/fedoraproject/FirewallD1"


def service_pid(nm) -> int:
    reply = nm.gdbus(
        "org.freedesktop.DBus.GetConnectionUnixProcessID",
        MAIN,
        dest="org.freedesktop.DBus",
        path="/org/freedesktop/DBus",
    )
    return int(re.search(r"(\d+),\)", reply.stdout).group(1))


class Monitor:
    """`gdbus monitor` on the service's name: the signals it emits, as lines."""

    def __init__(self, nm):
        self.process = subprocess.Popen(
            [*nm.enter(), "gdbus", "monitor", "--system", "--dest", MAIN],
            stdout=subprocess.PIPE,
            env=base_env(),
        )
        nm.listeners.append(self.process)  # stopped with the sandbox
        self.lines: list[str] = []
        self.partial = b""
        self.wait_for("is owned by")  # subscribed

    def wait_for(self, text: str, timeout: float = 10) -> str:
        """The first line not seen before that holds `text` (unbuffered reads: select
        must see every byte)."""
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        while time.monotonic() < deadline:
            for line in self.lines:
                if text in line:
                    self.lines.remove(line)
                    return line
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                self.partial += os.read(fd, 65536)
                *complete, self.partial = self.partial.split(b"\n")
                self.lines += [line.decode("utf-8", "replace") for line in complete]
        raise AssertionError(f"no signal {text!r} within {timeout} s: {self.lines}")


# -- NetworkManager through the front door ----------------------------------------------


PRE_UP_CHECK = """#!{python} -S
# runs at pre-up just before 50-nm-zones: would the hook's quick path end the event?
import os, sys
sys.path[:0] = {paths!r}
from nm_zones.paths import Paths
from nm_zones.quick import inputs_key, nothing_changed
paths = Paths.from_environment()
done = nothing_changed(paths, sys.argv[1], inputs_key(paths, dict(os.environ)))
with open("/run/nmz-pre-up-check", "a") as stream:
    stream.write(f"{{sys.argv[1]}} {{sys.argv[2]}} {{done}}\\n")
"""


def test_activation_filters_the_interface_before_its_addresses_exist(served):
    from nm_zones.doors.install import package_paths

    nm = served
    script = PRE_UP_CHECK.format(python=PYTHON, paths=package_paths())
    check = "/etc/NetworkManager/dispatcher.d/pre-up.d/49-nmz-check"
    nm.run(["sh", "-c", f"cat > {check} && chmod 755 {check}"], input_text=script)
    nm.nmcli("general", "logging", "level", "DEBUG", "domains", "FIREWALL,PLATFORM")
    nm.listen()
    link = up(nm, "lan", "connection.zone", "home")
    nm.wait_zone(link.name, "home")
    nm.wait_reachable(link)
    assert nm.probe(specs(link)) == HOME
    with open(os.path.join(nm.tmp, "NetworkManager.log"), errors="replace") as stream:
        log = stream.read().splitlines()
    zone_done = next(
        i for i, line in enumerate(log) if re.search(r'change:"ethz0".*complete: success', line)
    )
    first_address = next(
        i for i, line in enumerate(log) if "(ethz0) address: adding" in line and "10.78." in line
    )
    assert zone_done < first_address, "\n".join(log[zone_done - 3 : first_address + 3])
    state = nm.state()["interfaces"][link.name]
    assert state["reason"] == "nmcli connection.zone" and state["connection_id"] == "lan"
    # the dispatcher hook that follows finds the binding current: its quick path ends it
    seen = [
        line for line in nm.sh("cat /run/nmz-pre-up-check").stdout.splitlines() if "ethz0" in line
    ]
    assert seen == ["ethz0 pre-up True"], seen


def hook_sees_nothing_to_do(nm, connection: str, interface: str) -> bool:
    """What the hook's quick path decides for an event with this profile's variables."""
    fields = nm.nmcli(
        "-g", "connection.uuid,connection.id", "connection", "show", connection
    ).stdout.split("\n")
    filename = nm.sh(
        f"grep -l '^uuid={fields[0]}' /etc/NetworkManager/system-connections/*"
    ).stdout.strip()
    env = {"CONNECTION_UUID": fields[0], "CONNECTION_ID": fields[1]}
    env["CONNECTION_FILENAME"] = filename
    script = (
        "import json, sys; from nm_zones.paths import Paths;"
        " from nm_zones.quick import inputs_key, nothing_changed;"
        " paths = Paths.from_environment(); env = json.loads(sys.argv[1]);"
        f" print(nothing_changed(paths, {interface!r}, inputs_key(paths, env)))"
    )
    return nm.run([PYTHON, "-c", script, json.dumps(env)]).stdout.strip() == "True"


def test_nmcli_zone_edit_on_a_live_connection_applies_within_a_second(served):
    nm = served
    nm.listen()
    link = up(nm, "lan", "connection.zone", "home")
    nm.wait_zone(link.name, "home")
    nm.wait_reachable(link)
    assert nm.probe(specs(link)) == HOME
    active = nm.nmcli("-g", "GENERAL.DBUS-PATH", "connection", "show", "lan").stdout.strip()
    nm.nmcli("connection", "modify", "lan", "connection.zone", "block")
    edited = time.monotonic()
    ssh = [{"kind": "tcp", "address": link.ipv4, "port": 22}]
    wait_for(lambda: nm.probe(ssh) == ["rejected"], 1.0, interval=0, what="ssh refused")
    assert time.monotonic() - edited < 1.0
    assert nm.probe(specs(link)) == BLOCK
    # no reconnect: the same active connection, still activated
    assert nm.nmcli("-g", "GENERAL.DBUS-PATH", "connection", "show", "lan").stdout.strip() == active
    assert "activated" in nm.nmcli("-g", "GENERAL.STATE", "connection", "show", "lan").stdout
    entry = nm.state()["interfaces"][link.name]
    assert (entry["zone"], entry["reason"]) == ("block", "nmcli connection.zone")
    assert hook_sees_nothing_to_do(nm, "lan", link.name)
    # back to "nm-zones decides": the map's wired default, at once
    nm.nmcli("connection", "modify", "lan", "connection.zone", "")
    nm.wait_zone(link.name, "public", timeout=2)
    assert nm.probe(specs(link)) == PUBLIC


@pytest.mark.parametrize("backend", ["iptables", "nftables"])
def test_the_zone_networkmanager_passes_from_a_user_editable_profile_is_checked(nm, backend):
    """NetworkManager passes the profile's own zone to changeZoneOfInterface, at activation
    and on a live edit: from a profile its user may edit, trusted is refused."""
    write_settings(nm, f"backend: {backend}\n")
    nm.serve()
    nm.add_user("alice")
    nm.listen()
    link = up(nm, "lan", "connection.permissions", "user:alice", "connection.zone", "trusted")
    nm.wait_zone(link.name, "public")
    wait_both_families(nm, link)
    assert nm.probe(specs(link)) == PUBLIC
    assert nm.state()["interfaces"][link.name]["reason"] == f"default-zone; {LAX_FOR_USERS}"
    assert hook_sees_nothing_to_do(nm, "lan", link.name)  # the hook decides the same
    status = nm.nm_zones("status", link.name, check=False).stdout
    assert f"zone public (default-zone; {LAX_FOR_USERS})" in status, status

    nm.nmcli("connection", "modify", "lan", "connection.zone", "work")  # live: no event
    nm.wait_zone(link.name, "work")
    assert nm.probe(specs(link)) == WORK
    nm.nmcli("connection", "modify", "lan", "connection.zone", "trusted")
    nm.wait_zone(link.name, "public")
    assert nm.probe(specs(link)) == PUBLIC

    allowed = "user-profile-zones: [public, work, dmz, external, block, drop, trusted]\n"
    write_settings(nm, f"backend: {backend}\n{allowed}")
    nm.nm_zones("reload")
    nm.wait_zone(link.name, "trusted")
    assert nm.probe(specs(link)) == TRUSTED


def test_down_removes_the_rules(served):
    nm = served
    link = up(nm, "lan", "connection.zone", "work")
    nm.wait_zone(link.name, "work")
    nm.nmcli("connection", "down", "lan")
    nm.wait_zone(link.name, None)
    assert "nmz-if-ethz0" not in nm.save("ipv4") + nm.save("ipv6")
    assert call(nm, f"{ZONE}.getZoneOfInterface", "ethz0") == "('',)"


@pytest.mark.parametrize("backend", ["iptables", "nftables"])
def test_the_service_takes_a_timed_allowance_out_of_the_kernel_at_its_deadline(nm, backend):
    """`allow --for 3s` from the command line: with no other run of nm-zones, the running
    service's timer takes the rule out of the kernel (not only out of use) at the deadline."""
    if backend == "nftables":
        nm.sh("mkdir -p /etc/nm-zones && echo 'backend: nftables' > /etc/nm-zones/nm-zones.yaml")
    nm.serve()
    link = up(nm, "lan", "connection.zone", "home")
    nm.wait_zone(link.name, "home")
    nm.listen(tcp=(8080,), udp=())
    nm.wait_reachable(link)
    ports = [{"kind": "tcp", "address": a, "port": 8080} for a in (link.ipv4, link.ipv6)]
    assert nm.probe(ports) == ["rejected", "rejected"]

    def timed_rules() -> str:
        held = nm.save("ipv4") + nm.save("ipv6")
        held += nm.run(["nft", "list", "table", "inet", "nm-zones"], check=False).stdout
        lines = held.splitlines()
        return "\n".join(line for line in lines if "dport 8080" in line or "nmz-until-" in line)

    nm.nm_zones("allow", "8080/tcp", "--interface", link.name, "--for", "3s")
    assert nm.probe(ports) == ["accepted", "accepted"]
    assert timed_rules()
    (allowance,) = nm.state()["allowances"]
    wait_for(lambda: timed_rules() == "", 15, what=f"the rule to go\n{nm.logs()}")
    from nm_zones.ruleset.allowances import boottime

    assert boottime() >= allowance[3]  # not before its time
    assert nm.state()["allowances"] == []
    assert nm.probe(ports) == ["rejected", "rejected"]
    assert nm.nm_zones("status", check=False).returncode == 0


def test_calls_answer_with_firewalld_codes_signals_and_introspection(served):
    nm = served
    monitor = Monitor(nm)
    link = nm.add_veth()
    assert call(nm, f"{MAIN}.getDefaultZone") == "('public',)"
    assert call(nm, f"{ZONE}.changeZoneOfInterface", "home", link.name) == "('home',)"
    monitor.wait_for(f"ZoneOfInterfaceChanged ('home', '{link.name}')")
    assert call(nm, f"{ZONE}.getZoneOfInterface", link.name) == "('home',)"
    active = call(nm, f"{ZONE}.getActiveZones")
    assert "'home': {'interfaces': ['ethz0']}" in active
    assert "'public'" not in active  # the catch-all binds nothing, as in firewalld
    # firewalld returns the zone for an equal change, refuses an equal add
    assert call(nm, f"{ZONE}.changeZone", "home", link.name) == "('home',)"
    name = "org.fedoraproject.FirewallD1.Exception"
    assert error(nm, f"{ZONE}.addInterface", "home", link.name) == (
        f"{name}: ZONE_ALREADY_SET: 'ethz0' already bound to 'home'"
    )
    assert error(nm, f"{ZONE}.addInterface", "work", link.name) == (
        f"{name}: ZONE_CONFLICT: 'ethz0' already bound to 'home'"
    )
    assert error(nm, f"{ZONE}.changeZoneOfInterface", "nosuch", link.name) == (
        f"{name}: INVALID_ZONE: nosuch"
    )
    assert error(nm, f"{ZONE}.changeZoneOfInterface", "home", "bad+").startswith(
        f"{name}: INVALID_INTERFACE: "
    )
    assert error(nm, f"{ZONE}.removeInterface", "", "ethz9") == (
        f"{name}: UNKNOWN_INTERFACE: 'ethz9' is not in any zone"
    )
    assert call(nm, f"{ZONE}.removeInterface", "", link.name) == "('home',)"
    monitor.wait_for(f"InterfaceRemoved ('home', '{link.name}')")
    assert call(nm, f"{ZONE}.addInterface", "", link.name) == "('public',)"
    monitor.wait_for(f"InterfaceAdded ('public', '{link.name}')")
    assert nm.zone_of(link.name) == "public"
    assert "ZONE_ALREADY_SET" in error(nm, f"{ZONE}.addInterface", "", link.name)
    assert "org.freedesktop.DBus.Error.InvalidArgs: getZones takes (), not (s)" in error(
        nm, f"{ZONE}.getZones", "x"
    )
    xml = call(nm, "org.freedesktop.DBus.Introspectable.Introspect")
    for member in ("changeZoneOfInterface", "removeInterface", "getZones", "Reloaded"):
        assert f'name="{member}"' in xml
    # `nm-zones reload` makes the service emit Reloaded: NetworkManager then replays zones
    nm.nm_zones("reload")
    monitor.wait_for("org.fedoraproject.FirewallD1.Reloaded ()")
    nm.nm_zones("default-zone", "work")
    monitor.wait_for("Reloaded ()")
    assert call(nm, f"{MAIN}.setDefaultZone", "dmz") == "()"
    monitor.wait_for("DefaultZoneChanged ('dmz',)")
    assert call(nm, f"{MAIN}.getDefaultZone") == "('dmz',)"
    assert "default-zone: dmz" in nm.sh("cat /etc/nm-zones/connections-map.yaml").stdout
    assert nm.zone_of(link.name) == "dmz"  # it got its zone as the default


def test_a_second_instance_and_another_owner_are_refused(served):
    nm = served
    second = nm.nm_zones("serve", check=False)
    assert second.returncode == 1
    assert re.search(
        r"org.fedoraproject.FirewallD1 is already owned by another nm-zones serve \(PID \d+\)",
        second.stderr,
    ), second.stderr
    assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr
    nm.run(["kill", str(service_pid(nm))])
    wait_for(lambda: not nm.name_owned(), 10, what="the service to stop")
    # a firewalld on the bus: here a stand-in process that owns the name
    owner = subprocess.Popen(
        [*nm.enter(), PYTHON, "-c", OWN_THE_NAME],
        stdout=subprocess.PIPE,
        text=True,
        env=base_env(),
    )
    nm.listeners.append(owner)
    assert owner.stdout.readline().strip() == "owned"
    refused = nm.nm_zones("serve", check=False)
    assert refused.returncode == 1 and "already owned by" in refused.stderr, refused.stderr
    owner.kill()
    # firewalld installed and enabled (its unit's D-Bus alias exists): refused before the bus
    nm.sh(
        "ln -s /usr/lib/systemd/system/firewalld.service "
        "/etc/systemd/system/dbus-org.fedoraproject.FirewallD1.service"
    )
    refused = nm.nm_zones("serve", check=False)
    assert refused.returncode == 1
    assert "firewalld is installed and enabled" in refused.stderr, refused.stderr


OWN_THE_NAME = """
from jeepney import new_method_call
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection
import time
c = open_dbus_connection("SYSTEM")
reply = c.send_and_get_reply(new_method_call(
    message_bus, "RequestName", "su", ("org.fedoraproject.FirewallD1", 4)))
assert reply.body == (1,), reply.body
print("owned", flush=True)
time.sleep(600)
"""


def test_killed_mid_change_the_next_run_repairs_the_kernel(served):
    nm = served
    nm.listen()
    link = up(nm, "lan", "connection.zone", "home")
    nm.wait_zone(link.name, "home")
    # hold the xtables lock: the service marks the change `applying`, then waits for it
    holder = subprocess.Popen(
        [*nm.enter(), "sh", "-c", "echo $$; exec flock --no-fork /run/xtables.lock sleep 600"],
        stdout=subprocess.PIPE,
        text=True,
        env=base_env(),
    )
    nm.listeners.append(holder)
    holder_pid = holder.stdout.readline().strip()  # in the sandbox's PID namespace
    wait_for(
        lambda: nm.sh("flock -n /run/xtables.lock true", check=False).returncode != 0,
        10,
        what="the xtables lock to be held",
    )
    pending = subprocess.Popen(
        [
            *nm.enter(),
            *("gdbus", "call", "--system", "--dest", MAIN, "--object-path", nm_path()),
            *("--method", f"{ZONE}.changeZoneOfInterface", "block", link.name),
        ],
        env=base_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    nm.listeners.append(pending)
    wait_for(
        lambda: nm.state()["interfaces"][link.name]["status"] == "applying",
        10,
        what="the change to be marked applying",
    )
    nm.run(["kill", "-KILL", str(service_pid(nm))])
    wait_for(lambda: not nm.name_owned(), 10, what="the service to die")
    nm.run(["kill", holder_pid])
    status = nm.nm_zones("status", check=False)
    assert "(APPLYING)" in status.stdout, status.stdout
    nm.serve()  # the next run repairs what was interrupted, then NetworkManager replays
    wait_for(
        lambda: "ethz0: block -> block (D-Bus call; repairing an interrupted apply)" in nm.logs(),
        10,
        what="the repair",
    )
    nm.wait_zone(link.name, "home")  # the profile's zone, pushed again on `Reloaded`
    assert "kernel: in place" in nm.nm_zones("status").stdout
    nm.wait_reachable(link)
    assert nm.probe(specs(link)) == HOME


# -- authorization --------------------------------------------------------------------


def test_users_read_freely_and_change_only_with_polkit(served):
    nm = served
    nm.add_user("nmzplain")
    nm.add_user("nmzadmin", "netdev")
    nm.sh("mkdir -p /etc/polkit-1/rules.d")
    nm.run(["sh", "-c", "cat > /etc/polkit-1/rules.d/50-nm-zones.rules"], input_text=NETDEV_RULE)
    link = up(nm, "lan", "connection.zone", "home")
    nm.wait_zone(link.name, "home")
    for user in ("nmzplain", "nmzadmin"):
        assert "'home'" in call(nm, f"{ZONE}.getZones", user=user)
        assert call(nm, f"{ZONE}.getZoneOfInterface", link.name, user=user) == "('home',)"
    refused = error(nm, f"{ZONE}.changeZoneOfInterface", "block", link.name, user="nmzplain")
    assert refused == (
        "org.fedoraproject.FirewallD1.NotAuthorizedException: "
        "Not Authorized(polkit): org.nm-zones.assign"
    )
    assert nm.zone_of(link.name) == "home"
    # the same user through the command: refused, nothing changes
    as_plain = user_nm_zones(nm, "nmzplain", "assign", "lan", "block")
    assert as_plain.returncode == 1 and "not authorized" in as_plain.stderr, as_plain.stderr
    assert nm.nmcli("-g", "connection.zone", "connection", "show", "lan").stdout.strip() == "home"
    # the netdev rule of docs/admin-guide.md grants assigning, not configuring
    assert call(nm, f"{ZONE}.changeZoneOfInterface", "work", link.name, user="nmzadmin")
    assert nm.zone_of(link.name) == "work"
    granted = user_nm_zones(nm, "nmzadmin", "assign", "lan", "block")
    assert granted.returncode == 0, granted.stderr
    assert granted.stdout.strip() == "ethz0: work -> block (nmcli connection.zone) connection 'lan'"
    assert nm.nmcli("-g", "connection.zone", "connection", "show", "lan").stdout.strip() == "block"
    configure = user_nm_zones(nm, "nmzadmin", "default-zone", "--wired", "trusted")
    assert configure.returncode == 1 and "org.nm-zones.configure" in configure.stderr
    assert "wired-zone: trusted" not in nm.sh("cat /etc/nm-zones/connections-map.yaml").stdout
    # granted configuring too (polkitd rereads its rules when a file changes)
    nm.run(
        ["sh", "-c", "cat > /etc/polkit-1/rules.d/60-nm-zones-configure.rules"],
        input_text=NETDEV_RULE.replace("org.nm-zones.assign", "org.nm-zones.configure"),
    )
    wait_for(
        lambda: user_nm_zones(nm, "nmzadmin", "default-zone", "--wired", "trusted").returncode == 0,
        10,
        what="polkit to grant org.nm-zones.configure",
    )
    assert "wired-zone: trusted" in nm.sh("cat /etc/nm-zones/connections-map.yaml").stdout
    # without the service, a user is told to be root
    nm.run(["kill", str(service_pid(nm))])
    wait_for(lambda: not nm.name_owned(), 10, what="the service to stop")
    alone = user_nm_zones(nm, "nmzadmin", "assign", "lan", "home")
    assert alone.returncode == 1 and "run it as root" in alone.stderr


def user_nm_zones(nm, user: str, *args: str):
    return nm.run(["runuser", "-u", user, "--", PYTHON, "-m", "nm_zones", *args], check=False)


def test_the_bus_policy_lets_only_root_own_the_name(nm):
    nm.add_user("nmzplain")
    result = nm.run(
        ["runuser", "-u", "nmzplain", "--", PYTHON, "-c", OWN_THE_NAME], check=False, timeout=30
    )
    assert result.returncode != 0 and "not allowed to own" in result.stderr, result.stderr


# -- what a caller can make the service write ----------------------------------------------

LARGE_CALLS = """
import json, sys
from jeepney import DBusAddress, HeaderFields, new_method_call
from jeepney.io.blocking import open_dbus_connection
count, zone, interface = int(sys.argv[1]), sys.argv[2], sys.argv[3] * int(sys.argv[4])
target = DBusAddress(
    "/org/fedoraproject/FirewallD1",
    bus_name="org.fedoraproject.FirewallD1",
    interface="org.fedoraproject.FirewallD1.zone",
)
with open_dbus_connection("SYSTEM") as bus:
    print(json.dumps(bus.unique_name), flush=True)
    for _ in range(count):
        call = new_method_call(target, "changeZoneOfInterface", "ss", (zone, interface))
        reply = bus.send_and_get_reply(call, timeout=60)
        error = reply.header.fields.get(HeaderFields.error_name, "")
        print(json.dumps([error, reply.body[0] if reply.body else ""]), flush=True)
"""
MIB = 1 << 20
LOG_LINE = 400  # bytes: a refusal line, its call's arguments shortened
BURST, PER_SECOND, SUMMARY_EVERY = 5, 1.0, 2.0  # limits.RefusalLog, service.SUMMARY_AFTER


def large_calls(nm, count: int, zone: str, text: str, repeat: int, user: str = "nobody"):
    """`count` calls changeZoneOfInterface(zone, text * repeat) on one connection as `user`
    (uid 65534 by default): (its bus name, [(error name, message)] of the replies)."""
    argv = [PYTHON, "-c", LARGE_CALLS, str(count), zone, text, str(repeat)]
    result = nm.run(["runuser", "-u", user, "--", *argv], timeout=300)
    sender, *replies = (json.loads(line) for line in result.stdout.splitlines())
    return sender, replies


def grown(path: str, since: int) -> bytes:
    with open(path, "rb") as stream:
        stream.seek(since)
        return stream.read()


def test_refused_megabyte_calls_cost_the_log_and_the_reply_a_few_hundred_bytes(nm):
    from tests.harness.syslog import read_records

    nm.serve(syslog=True)
    syslog, serve_log = (os.path.join(nm.tmp, name) for name in ("syslog.txt", "serve.log"))
    wait_for(lambda: read_records(syslog), 10, what="the service's first syslog record")
    assert not nm.name_owned("org.freedesktop.PolicyKit1")  # started by the bus when asked
    sizes = [os.path.getsize(path) for path in (syslog, serve_log)]

    started = time.monotonic()
    sender, replies = large_calls(nm, 100, "block", "x", MIB)
    elapsed = time.monotonic() - started
    assert len(replies) == 100
    for name, message in replies:  # refused whole, in a short reply, before polkit is asked
        assert name == "org.fedoraproject.FirewallD1.Exception", (name, message[:200])
        assert message.startswith("INVALID_VALUE: the call's arguments take 10"), message[:200]
        assert len(message) < 200, len(message)
    assert not nm.name_owned("org.freedesktop.PolicyKit1")

    def logged() -> tuple[list[str], list[str], int] | None:
        """(refusal lines, summary lines, refusals they count) once all 100 are counted."""
        records = [r for r in read_records(syslog) if f" from {sender}" in r]
        refusals = [r for r in records if "refused (the call's arguments take" in r]
        summary = [r for r in records if f"refusals from {sender} suppressed" in r]
        held = sum(int(r.split(" more refusals")[0].rsplit(" ", 1)[1]) for r in summary)
        return (refusals, summary, records) if len(refusals) + held >= 100 else None

    refusals, summary, records = wait_for(
        logged, SUMMARY_EVERY + 10, what=f"all 100 refusals logged or summed up: {logged()}"
    )
    assert all(len(r.encode()) <= LOG_LINE for r in records), records
    assert "'block', '" + "x" * 64 + "'…(1048576 characters)) from " in refusals[0]
    # at most BURST lines at once, then PER_SECOND, and a summary every SUMMARY_EVERY
    assert len(refusals) <= BURST + PER_SECOND * elapsed + 1, (elapsed, refusals)
    assert len(summary) <= elapsed / SUMMARY_EVERY + 2, summary
    # both logs (syslog and stderr, the journal) grew by a few kilobytes for 100 MiB sent
    bound = LOG_LINE * len(records)
    assert len(grown(syslog, sizes[0])) <= bound < 16_384, (bound, len(grown(syslog, sizes[0])))
    assert len(grown(serve_log, sizes[1])) <= bound, len(grown(serve_log, sizes[1]))

    # under the size limit, polkit refuses; the log line shows the argument shortened
    sender, [(name, message)] = large_calls(nm, 1, "block", "y", 3000)
    assert name == "org.fedoraproject.FirewallD1.NotAuthorizedException", message
    assert message == "Not Authorized(polkit): org.nm-zones.assign"
    line = wait_for(
        lambda: next((r for r in read_records(syslog) if f" from {sender}" in r), None),
        10,
        what="the refusal's log line",
    )
    assert "'" + "y" * 64 + "'…(3000 characters)) from " in line and len(line) <= LOG_LINE

    # root's calls: what an error reply echoes is shortened too
    reply = error(nm, f"{ZONE}.changeZoneOfInterface", "z" * 3000, "lo")
    assert reply == (
        "org.fedoraproject.FirewallD1.Exception: INVALID_ZONE: " + "z" * 64 + "…(3000 characters)"
    )
    reply = error(nm, f"{ZONE}.changeZoneOfInterface", "block", "i" * 3000)
    assert reply.startswith("org.fedoraproject.FirewallD1.Exception: INVALID_INTERFACE: ")
    assert "i" * 64 + "…(3000 characters)" in reply and len(reply) < 300, reply


# -- the front ends ---------------------------------------------------------------------


def test_get_zones_lists_zones_that_profiles_name(served):
    nm = served
    link = nm.add_veth()
    nm.add_connection(link, "lab", "connection.zone", "lab-bench")
    zones = call(nm, f"{ZONE}.getZones")
    assert "'lab-bench'" in zones and "'public'" in zones and "'nm-shared'" in zones


# -- install ------------------------------------------------------------------------------


def test_install_writes_the_bus_policy_polkit_actions_and_the_service_unit(tmp_path):
    root = str(tmp_path / "image")
    run = [sys.executable, "-m", "nm_zones", "install", "--root", root]
    result = subprocess.run(run, env=base_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert f"wrote {root}/etc/dbus-1/system.d/nm-zones.conf" in result.stdout
    with open(os.path.join(root, "etc/dbus-1/system.d/nm-zones.conf")) as stream:
        policy = stream.read()
    assert '<policy user="root">' in policy and 'own="org.fedoraproject.FirewallD1"' in policy
    with open(os.path.join(root, "usr/share/polkit-1/actions/org.nm-zones.policy")) as stream:
        actions = stream.read()
    assert 'id="org.nm-zones.assign"' in actions and 'id="org.nm-zones.configure"' in actions
    assert 'id="org.nm-zones.panic"' in actions
    assert actions.count("<allow_active>auth_admin_keep</allow_active>") == 3
    with open(os.path.join(root, "etc/systemd/system/nm-zones-serve.service")) as stream:
        unit = stream.read()
    assert "Conflicts=firewalld.service" in unit and "Before=NetworkManager.service" in unit
    assert "ExecStart=/usr/local/sbin/nm-zones serve" in unit  # the launcher: python -S
    with open(os.path.join(root, "usr/local/sbin/nm-zones")) as stream:
        assert stream.readline() == f"#!{sys.executable} -S\n"
    with open(os.path.join(root, "etc/systemd/system/nm-zones.service")) as stream:
        boot = stream.read()
    assert "Conflicts=firewalld.service" in boot
    assert "ExecStart=/usr/local/sbin/nm-zones reload" in boot
    subprocess.run([*run, "--uninstall"], env=base_env(), check=True)
    for path in ("etc/dbus-1/system.d/nm-zones.conf", "etc/systemd/system/nm-zones-serve.service"):
        assert not os.path.exists(os.path.join(root, path))


# -- shared connections -------------------------------------------------------------------

DNS_QUERY = """
import socket, sys
query = bytes.fromhex("12340100000100000000000007657861"
                      "6d706c650474657374000001 0001".replace(" ", ""))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
s.sendto(query, (sys.argv[1], 53))
try:
    reply = s.recv(512)
    print("answered" if reply[:2] == query[:2] else "garbled")
except socket.timeout:
    print("silence")
except OSError as error:
    print(f"refused: {error}")
"""


def test_a_shared_connection_gets_nm_shared_and_routes_its_clients(tmp_path):
    """A client behind a shared connection gets an address by DHCP and an answer by DNS from
    this machine, reaches a host beyond the uplink (NetworkManager masquerades, nm-shared
    lets it through), and finds nothing else of this machine open."""
    if NEEDS_NM:
        pytest.skip("needs root and NetworkManager")
    from pyroute2 import NetNS, netns

    from tests.harness.lab import run_probes, start_listener

    nm = NMSandbox(str(tmp_path / "sandbox"), firewall_backend="nftables")
    client = f"nmz-client-{os.urandom(3).hex()}"
    lease, pidfile = str(tmp_path / "lease"), str(tmp_path / "dhclient.pid")
    nm.start()
    try:
        nm.install_hook()
        reload_bus_config(nm)
        nm.serve()
        nm.listen()
        uplink = up(nm, "uplink")
        nm.wait_zone(uplink.name, "public")
        netns.create(client)
        with NetNS(client) as ns:
            ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
            ns.link("add", ifname="vc1", kind="veth", peer={"ifname": "ethz1"})
            ns.link("set", index=ns.link_lookup(ifname="ethz1")[0], net_ns_pid=nm.pid)
            ns.link("set", index=ns.link_lookup(ifname="vc1")[0], state="up")
        nm.nmcli(
            *("connection", "add", "type", "ethernet", "ifname", "ethz1", "con-name", "hotspot"),
            *("connection.autoconnect", "no", "ipv4.method", "shared", "ipv6.method", "disabled"),
        )
        nm.nmcli("connection", "up", "hotspot")
        nm.wait_zone("ethz1", "nm-shared")
        assert nm.state()["interfaces"]["ethz1"]["reason"] == "shared connection"
        assert hook_sees_nothing_to_do(nm, "hotspot", "ethz1")
        in_client = ["ip", "netns", "exec", client]
        got = subprocess.run(
            [
                *(*in_client, "dhclient", "-1", "-4", "-sf", "/bin/true"),
                *("-lf", lease, "-pf", pidfile, "vc1"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert got.returncode == 0, got.stderr
        with open(lease) as stream:
            text = stream.read()
        address = re.search(r"fixed-address ([\d.]+);", text).group(1)
        router = re.search(r"option routers ([\d.]+);", text).group(1)
        dns = re.search(r"option domain-name-servers ([\d.]+)", text).group(1)
        subprocess.run([*in_client, "ip", "addr", "add", f"{address}/24", "dev", "vc1"], check=True)
        subprocess.run([*in_client, "ip", "route", "add", "default", "via", router], check=True)
        answer = subprocess.run(
            [*in_client, PYTHON, "-c", DNS_QUERY, dns], capture_output=True, text=True, timeout=30
        )
        assert answer.stdout.strip() == "answered", answer.stdout + answer.stderr
        nm.listeners.append(
            start_listener(["ip", "netns", "exec", nm.peer], base_env(), (8080,), ())
        )
        beyond = {"kind": "tcp", "address": uplink.peer_ipv4, "port": 8080}
        host = [{"kind": "tcp", "address": router, "port": port} for port in (22, 8080)]
        host.append({"kind": "udp", "address": router, "port": 631})
        assert run_probes(client, [beyond, *host], base_env()) == ["accepted"] + ["rejected"] * 3
    finally:
        if os.path.exists(pidfile):
            with open(pidfile) as stream:
                pid = stream.read().strip()
            if pid:
                subprocess.run(["kill", pid], check=False)
        nm.stop()
        if client in netns.listnetns():
            netns.remove(client)


# -- the pure parts -----------------------------------------------------------------------


def test_a_shared_profile_without_a_zone_resolves_to_nm_shared(tmp_path):
    from nm_zones.resolve import Connection, decide_zone, read_connection

    class Map:
        default_zone, wired_zone, wireless_zone = "public", "home", ""

        def zone_for(self, key):
            return None

    zones = {"public", "home", "block", "nm-shared"}
    keyfile = tmp_path / "hotspot.nmconnection"
    keyfile.write_text(
        "[connection]\nid=hotspot\nuuid=u1\ntype=ethernet\n\n[ipv4]\nmethod=shared\n"
        "\n[ipv6]\nmethod=disabled\n"
    )
    shared = read_connection("u1", "hotspot", str(keyfile))
    assert shared.shared and shared.zone == ""
    decision = decide_zone(shared, Map(), zones)
    assert (decision.zone, decision.reason) == ("nm-shared", "shared connection")
    # a zone of its own still wins, as in NetworkManager
    own = Connection("u1", "hotspot", "ethernet", "block", shared=True)
    assert decide_zone(own, Map(), zones).zone == "block"
    plain = Connection("u2", "lan", "ethernet")
    assert decide_zone(plain, Map(), zones).zone == "home"


def test_forward_target_is_checked(tmp_path):
    config = tmp_path / "etc"
    (config / "zones.d").mkdir(parents=True)
    (config / "zones.d" / "lab.yaml").write_text("services: [ssh]\nforward-target: maybe\n")
    result = subprocess.run(
        [sys.executable, "-m", "nm_zones", "check"],
        capture_output=True,
        text=True,
        env=base_env(NM_ZONES_CONFIG_DIR=str(config), NM_ZONES_STATE_DIR=str(tmp_path / "s")),
    )
    assert result.returncode == 2
    assert "lab.yaml:2: forward-target: unknown target 'maybe'" in result.stderr, result.stderr


def test_after_networkmanager_restarts_the_service_asks_it_afresh(served):
    """The service keeps NetworkManager's device and profile objects between calls; their
    paths start over when NetworkManager restarts, so it must forget them then."""
    nm = served
    nm.add_connection(nm.add_veth("ethz9"), "gone")  # numbered before "first", deleted below
    first = up(nm, "first", "connection.zone", "home")
    nm.wait_zone(first.name, "home")
    nm.nmcli("connection", "delete", "gone")
    reply = nm.gdbus(
        "org.freedesktop.DBus.GetConnectionUnixProcessID",
        "org.freedesktop.NetworkManager",
        dest="org.freedesktop.DBus",
        path="/org/freedesktop/DBus",
    )
    nm.run(["kill", re.search(r"(\d+),\)", reply.stdout).group(1)])
    wait_for(lambda: not nm.name_owned("org.freedesktop.NetworkManager"), 20, what="NM to stop")
    with open(os.path.join(nm.tmp, "NetworkManager.log"), "ab") as log:
        restarted = subprocess.Popen(
            [
                *(*nm.enter(), "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"),
                *("LANG=C.UTF-8", "NetworkManager", "--debug"),
            ],
            stdout=log,
            stderr=log,
        )
    nm.listeners.append(restarted)
    nm.run(["nm-online", "-s", "-q", "-t", "30"], check=False)
    # the new NetworkManager numbers its objects from scratch: "first" now has the number
    # "gone" had, and "second" the number "first" had
    second = up(nm, "second", "connection.zone", "work")
    nm.wait_zone(second.name, "work")
    assert nm.state()["interfaces"][second.name]["connection_id"] == "second"
    nm.nmcli("connection", "modify", "first", "connection.zone", "block")
    nm.wait_zone(first.name, "block", timeout=5)
    assert nm.state()["interfaces"][first.name]["connection_id"] == "first"


# -- a zone that cannot be used ---------------------------------------------------------


def test_a_switch_to_a_broken_zone_fails_loudly_and_gets_the_shipped_one(served):
    """A typo in the admin's block.yaml: the interface gets shipped block, and every door
    says the call failed (firewalld's COMMAND_FAILED), the ZoneChanged signal included."""
    nm = served
    link = connect_in_zone(nm, "trusted")
    assert nm.probe(specs(link)) == TRUSTED
    nm.sh("mkdir -p /etc/nm-zones/zones.d")
    nm.sh("echo 'targte: reject' > /etc/nm-zones/zones.d/block.yaml")
    monitor = Monitor(nm)
    failed = error(nm, f"{ZONE}.changeZoneOfInterface", "block", link.name)
    assert failed.startswith(
        "org.fedoraproject.FirewallD1.Exception: COMMAND_FAILED: ethz0: zone 'block' cannot be "
        "loaded ("
    ), failed
    assert failed.endswith("; using the shipped definition"), failed
    signal = monitor.wait_for("ZoneChanged")
    assert "'zone': 'block'" in signal and "cannot be loaded" in signal, signal
    uuid = nm.nmcli("-g", "connection.uuid", "connection", "show", "lan").stdout.strip()
    assert f"'uuid': '{uuid}'" in signal and "'type': '802-3-ethernet'" in signal, signal
    assert nm.zone_of(link.name) == "block"
    assert nm.probe(specs(link)) == BLOCK
    # back to trusted, then the zone assigned to the profile, as the agent and the window do
    assert call(nm, f"{ZONE}.changeZoneOfInterface", "trusted", link.name) == "('trusted',)"
    failed = error(nm, "org.nm_zones.Manager1.AssignConnection", "lan", "block")
    assert "COMMAND_FAILED: ethz0: zone 'block' cannot be loaded" in failed, failed
    assert nm.probe(specs(link)) == BLOCK
    rows = call(nm, "org.nm_zones.Manager1.GetConnections")
    assert "'degraded': \"zone 'block' cannot be loaded" in rows, rows
    # a broken connections map does not matter to a caller that names the zone
    nm.sh("echo 'default-zone: [' > /etc/nm-zones/connections-map.yaml")
    assert call(nm, f"{ZONE}.changeZoneOfInterface", "work", link.name) == "('work',)"
    assert nm.probe(specs(link)) == WORK
    # an interface unbound, or every one on disable, still names the profile it was bound with
    assert call(nm, f"{ZONE}.removeInterface", "", link.name) == "('work',)"
    signal = monitor.wait_for("'old-zone': 'work'")
    assert "'zone': ''" in signal and f"'uuid': '{uuid}'" in signal, signal
    assert call(nm, f"{ZONE}.changeZoneOfInterface", "home", link.name) == "('home',)"
    call(nm, "org.nm_zones.Manager1.SetEnabled", "false")
    signal = monitor.wait_for("'old-zone': 'home'")
    assert "'zone': ''" in signal and f"'uuid': '{uuid}'" in signal, signal
    assert "'type': '802-3-ethernet'" in signal, signal


# -- the settings, changed under a running service -----------------------------------------


def test_a_backend_change_is_followed_by_the_running_service(served):
    """`backend: nftables` and `nm-zones reload` move every rule; the service, asked to
    reload by the command and called again afterwards, keeps them there."""
    nm = served
    link = connect_in_zone(nm, "home")
    assert "rules held by: iptables" in nm.nm_zones("status").stdout
    nm.sh("mkdir -p /etc/nm-zones && echo 'backend: nftables' > /etc/nm-zones/nm-zones.yaml")
    moved = nm.nm_zones("reload", check=False)
    assert moved.returncode == 0, moved.stderr
    assert "*: iptables -> nftables (rules moved to another backend)" in moved.stdout
    # the service has reloaded (it emits Reloaded; NetworkManager replays every zone)
    assert call(nm, f"{ZONE}.changeZoneOfInterface", "work", link.name) == "('work',)"
    assert call(nm, f"{MAIN}.reload") == "()"
    status = nm.nm_zones("status", check=False)
    assert status.returncode == 0, status.stdout + nm.logs()
    assert "rules held by: nftables" in status.stdout
    assert "nmz" not in nm.save("ipv4") + nm.save("ipv6")
    assert f"nmz-if-{link.name}-in" in nm.sh("nft list table inet nm-zones").stdout
    assert "rules moved to another backend" not in nm.logs().split("--- serve.log")[-1]
    assert nm.probe(specs(link)) == WORK


def test_the_bus_reload_ends_runtime_allowances_as_the_command_does(served):
    """firewalld's reload drops runtime changes; so do `nm-zones reload` and reload()."""
    nm = served
    link = connect_in_zone(nm, "home")
    port_8080 = [{"kind": "tcp", "address": a, "port": 8080} for a in (link.ipv4, link.ipv6)]
    for reload in (lambda: call(nm, f"{MAIN}.reload"), lambda: nm.nm_zones("reload")):
        nm.nm_zones("allow", "8080/tcp", "--interface", link.name)
        nm.nm_zones("allow", "9090/tcp", "--zone", "dmz")  # reaches no interface
        assert nm.probe(port_8080) == ["accepted"] * 2
        reload()
        assert nm.state()["allowances"] == []
        assert nm.probe(port_8080) == ["rejected"] * 2
        assert nm.probe(specs(link)) == HOME


@pytest.mark.parametrize("backend", ["iptables", "nftables"])
def test_an_interface_deleted_under_the_running_service_loses_its_rules_at_the_next_call(
    nm, backend
):
    """The service looks bound interfaces up only when a link changed since its last call
    (linkwatch.py); a device deleted between two calls, with no event and no `down` for
    it, is still found gone by the next call, and one of that name made afresh is not
    taken for it."""
    write_settings(nm, f"backend: {backend}\n")
    nm.serve()
    nm.run(["ip", "-batch", "-"], input_text="".join(
        f"link add {name} type veth peer name p{name}\nlink set {name} up\n"
        for name in ("gone0", "kept0")
    ))
    for zone, name in (("home", "gone0"), ("work", "kept0"), ("public", "kept0")):
        assert call(nm, f"{ZONE}.changeZoneOfInterface", zone, name) == f"('{zone}',)"
    assert set(nm.state()["interfaces"]) >= {"gone0", "kept0"}

    def held() -> str:
        if backend == "iptables":
            return nm.save("ipv4") + nm.save("ipv6")
        return nm.sh("nft list table inet nm-zones").stdout

    assert "nmz-if-gone0-in" in held()
    nm.run(["ip", "link", "del", "gone0"])
    assert call(nm, f"{ZONE}.changeZoneOfInterface", "home", "kept0") == "('home',)"
    assert "gone0" not in nm.state()["interfaces"]
    assert "gone0" not in held()
    assert "gone0: home -> - (interface gone)" in nm.logs()

    # a new device of the same name, bound before: another index, so not the old binding
    assert call(nm, f"{ZONE}.changeZoneOfInterface", "dmz", "kept0") == "('dmz',)"
    nm.run(["ip", "-batch", "-"], input_text="link del kept0\nlink add kept0 type veth peer "
           "name pkept0\nlink set kept0 up\n")
    assert call(nm, f"{ZONE}.changeZoneOfInterface", "work", "kept0") == "('work',)"
    binding = nm.state()["interfaces"]["kept0"]
    assert binding["zone"] == "work"
    assert "kept0: dmz -> - (interface gone)" in nm.logs()


def test_a_rule_changed_in_place_behind_the_running_service_is_put_back_at_its_next_call(nm):
    """The service keeps each legacy table's last view with the table's bytes, and skips
    the walk when a read finds the same bytes (held.HeldTables): a change of one byte of
    one of its rules (the table the same size) is still seen by the next call, even one
    that changes nothing, and undone."""
    nm.serve()
    nm.run(["ip", "-batch", "-"], input_text="link add held0 type veth peer name pheld0\n")
    for zone in ("public", "home", "home"):  # the last: a no-op, the view kept and reused
        assert call(nm, f"{ZONE}.changeZoneOfInterface", zone, "held0") in (
            f"('{zone}',)", "ZONE_ALREADY_SET"
        )
    ssh = "-A nmz-if-held0-in -p tcp -m tcp --dport 22"
    before = nm.save("ipv4")
    assert ssh in before
    nm.sh("iptables-legacy-save | sed 's/--dport 22 /--dport 23 /' | iptables-legacy-restore")
    assert ssh not in nm.save("ipv4")
    assert call(nm, f"{ZONE}.changeZoneOfInterface", "home", "held0") == "('home',)"
    assert ssh in nm.save("ipv4")
    assert "ipv4 filter: nm-zones' rules had been changed by another program" in nm.logs()
