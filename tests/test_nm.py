"""NetworkManager integration against the real NetworkManager, nm-dispatcher and nmcli."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from nm_zones.state import STATE_FILE
from tests.harness.lab import PYTHON, REPO, base_env, wait_for
from tests.harness.nm_sandbox import NMSandbox

HOOK = os.path.join(REPO, "dispatcher.d", "50-nm-zones")
NEEDS_NM = os.geteuid() != 0 or not shutil.which("NetworkManager")


@pytest.fixture
def nm(tmp_path):
    if NEEDS_NM:
        pytest.skip("needs root and NetworkManager")
    sandbox = NMSandbox(str(tmp_path / "sandbox"))
    sandbox.start()
    try:
        sandbox.install_hook()
        yield sandbox
    finally:
        sandbox.stop()


def specs(link):
    return [
        {"kind": kind, "address": address, "port": port}
        for address in (link.ipv4, link.ipv6)
        for kind, port in (("tcp", 22), ("tcp", 8080), ("udp", 631))
    ]


HOME = ["accepted", "rejected", "accepted"] * 2
BLOCK = ["rejected"] * 6
PUBLIC = ["accepted", "rejected", "rejected"] * 2
TRUSTED = ["accepted"] * 6
WORK = ["accepted", "rejected", "accepted"] * 2


def connect_in_zone(nm, zone: str):
    """A veth link with listeners, and a connection `lan` on it whose profile holds `zone`:
    brought up, its zone applied by the hook, its addresses answering."""
    link = nm.add_veth()
    nm.listen()
    nm.add_connection(link, "lan", "connection.zone", zone)
    nm.nmcli("connection", "up", "lan")
    nm.wait_zone(link.name, zone)
    nm.wait_reachable(link)
    return link


def test_zone_set_with_nmcli_is_applied_on_up(nm):
    link = connect_in_zone(nm, "home")
    assert nm.probe(specs(link)) == HOME
    status = nm.nm_zones("status").stdout
    assert "ethz0" in status and "home" in status and "why: nmcli connection.zone" in status
    assert "connection: lan" in status


def test_the_nftables_backend_under_the_real_networkmanager(nm):
    """The same events with `backend: nftables`: rules in nm-zones' nftables table only."""
    nm.sh("mkdir -p /etc/nm-zones && echo 'backend: nftables' > /etc/nm-zones/nm-zones.yaml")
    link = connect_in_zone(nm, "home")
    assert nm.probe(specs(link)) == HOME
    nm.nm_zones("assign", "lan", "block")
    nm.wait_zone(link.name, "block")
    assert nm.probe(specs(link)) == BLOCK
    table = nm.sh("nft list table inet nm-zones").stdout
    assert f'"{link.name}" : jump nmz-if-{link.name}-in' in table
    assert "nmz" not in nm.save("ipv4") + nm.save("ipv6")
    assert "rules held by: nftables" in nm.nm_zones("status").stdout
    nm.nmcli("connection", "down", "lan")
    nm.wait_zone(link.name, None)
    assert f"nmz-if-{link.name}-" not in nm.sh("nft list table inet nm-zones").stdout


LAX_FOR_USERS = "zone trusted not allowed for user-editable profiles"


def write_settings(nm, text: str) -> None:
    nm.sh("mkdir -p /etc/nm-zones")
    nm.run(["sh", "-c", "cat > /etc/nm-zones/nm-zones.yaml"], input_text=text)


def reconnect(nm, name: str, *settings: str) -> None:
    """Change the profile and bring it up again: NetworkManager's events run the hook."""
    nm.nmcli("connection", "modify", name, *settings)
    nm.nmcli("connection", "up", name)


def wait_both_families(nm, link) -> None:
    """Both addresses answer (IPv6 comes a moment after IPv4, once DAD is done)."""
    pings = [{"kind": "ping", "address": a} for a in (link.ipv4, link.ipv6)]
    wait_for(lambda: "dropped" not in nm.probe(pings), 20, 0.2, f"{link.name} to answer")


@pytest.mark.parametrize("backend", ["iptables", "nftables"])
def test_a_profile_its_user_may_edit_cannot_choose_trusted(nm, backend):
    """connection.permissions user:alice: alice may edit the profile, so its zone is only
    honoured when user-profile-zones lists it (trusted is not shipped there)."""
    write_settings(nm, f"backend: {backend}\n")
    nm.add_user("alice")
    link = nm.add_veth()
    nm.listen()
    owned = ("connection.permissions", "user:alice")
    nm.add_connection(link, "lan", *owned, "connection.zone", "trusted")
    nm.nmcli("connection", "up", "lan")
    nm.wait_zone(link.name, "public")
    wait_both_families(nm, link)
    assert nm.probe(specs(link)) == PUBLIC  # ssh answers, 8080 is refused
    status = nm.nm_zones("status", link.name, check=False).stdout
    assert f"zone public (default-zone; {LAX_FOR_USERS})" in status, status

    reconnect(nm, "lan", "connection.zone", "work")  # a zone users may choose
    nm.wait_zone(link.name, "work")
    wait_both_families(nm, link)
    assert nm.probe(specs(link)) == WORK

    reconnect(nm, "lan", "connection.zone", "trusted")
    nm.wait_zone(link.name, "public")
    wait_both_families(nm, link)
    assert nm.probe(specs(link)) == PUBLIC
    write_settings(
        nm,
        f"backend: {backend}\nuser-profile-zones: [public, work, dmz, external, block, drop, "
        "trusted]\n",
    )
    nm.nm_zones("reload")  # the admin allows trusted: the profile is read again
    assert nm.zone_of(link.name) == "trusted"
    assert nm.probe(specs(link)) == TRUSTED
    assert "zone trusted (nmcli connection.zone)" in nm.nm_zones("status", link.name).stdout
    write_settings(nm, f"backend: {backend}\nuser-profile-zones: []\n")
    nm.nm_zones("reload")  # and takes it back: the profile, read with nmcli, is refused
    assert nm.zone_of(link.name) == "public"
    assert nm.probe(specs(link)) == PUBLIC


NMCLI_LOGGED = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/runs"
exec /usr/bin/nmcli "$@"
"""
PROFILES = """
import json, sys
from nm_zones.resolve import nmcli_connections
print(json.dumps(nmcli_connections(sys.argv[1:])))
"""


def test_a_reload_reads_every_bound_profile_again_in_one_nmcli_run(nm, tmp_path):
    """A reload asks NetworkManager again for each profile whose own zone decided its
    interface: in one nmcli run however many are bound (a run each made a reload with 200
    bound take a second), and a UUID nmcli no longer knows does not hide the others."""
    uuids = []
    for n in range(3):
        link = nm.add_veth()
        uuids.append(nm.add_connection(link, f"lan{n}", "connection.zone", "home"))
        nm.nmcli("connection", "up", f"lan{n}")
        nm.wait_zone(link.name, "home")
    # the admin changes two profiles without reapplying them: no event comes
    nm.nmcli("connection", "modify", "lan0", "connection.zone", "work")
    nm.nmcli("connection", "modify", "lan2", "connection.zone", "block")
    assert [nm.zone_of(link.name) for link in nm.links] == ["home"] * 3
    wrapper = tmp_path / "wrap" / "nmcli"  # logs each run, then runs nmcli
    wrapper.parent.mkdir()
    wrapper.write_text(NMCLI_LOGGED)
    wrapper.chmod(0o755)
    env = base_env()
    env["PATH"] = f"{wrapper.parent}:{env['PATH']}"
    nm.run([PYTHON, "-m", "nm_zones", "reload"], env=env)
    assert [nm.zone_of(link.name) for link in nm.links] == ["work", "home", "block"]
    runs = (wrapper.parent / "runs").read_text().splitlines()
    assert len(runs) == 1 and all(uuid in runs[0] for uuid in uuids), runs
    asked = [uuids[0], "00000000-0000-0000-0000-000000000000", uuids[1], uuids[2]]
    found = json.loads(nm.run([PYTHON, "-c", PROFILES, *asked], env=env).stdout)
    assert sorted(found) == sorted(uuids)  # nmcli stopped at the unknown one: asked again
    assert found[uuids[2]][0] == "block" and found[uuids[1]][:2] == ["home", "802-3-ethernet"]
    asked = ["00000000-0000-0000-0000-000000000000", *uuids]  # the unknown one first
    found = json.loads(nm.run([PYTHON, "-c", PROFILES, *asked], env=env).stdout)
    assert sorted(found) == sorted(uuids)
    # nmcli's terse values are not escaped: a zone with newlines speaks for another profile
    forged = f"work\nconnection.uuid:{uuids[1]}\nconnection.zone:trusted"
    nm.nmcli("connection", "modify", "lan2", "connection.zone", forged)
    found = json.loads(nm.run([PYTHON, "-c", PROFILES, *uuids], env=env).stdout)
    # no zone, counted as user-editable; its type (before the zone: nmcli's own) is kept,
    # as wired-zone and wireless-zone may be stricter than default-zone
    assert found[uuids[2]] == ["", "802-3-ethernet", False, "unbelieved"], found
    assert found[uuids[1]][0] == "home", found
    assert found[uuids[0]][0] == "work"
    # a bridge port has no IP settings: a line added after its zone would make it shared
    nm.nmcli(
        "connection", "add", "type", "ethernet", "ifname", "ethport", "con-name", "port",
        "connection.autoconnect", "no", "master", "brz", "slave-type", "bridge",
    )  # fmt: skip
    port = nm.nmcli("-g", "connection.uuid", "connection", "show", "port").stdout.strip()
    found = json.loads(nm.run([PYTHON, "-c", PROFILES, port, uuids[0]], env=env).stdout)
    assert found[port][:3] == ["", "802-3-ethernet", False], found  # nmcli's real shape
    nm.nmcli("connection", "modify", "port", "connection.zone", "work\nipv4.method:shared")
    found = json.loads(nm.run([PYTHON, "-c", PROFILES, port, uuids[0]], env=env).stdout)
    assert found[port] == ["", "802-3-ethernet", False, "unbelieved"], found
    assert found[uuids[0]][0] == "work"


NMCLI_DOWN = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/runs"
echo "Error: NetworkManager is not running." >&2
exit 8
"""


def profiles_read_by(tmp_path, script: str, asked: list[str]) -> dict:
    """nmcli_connections(asked) with `script` as nmcli (it logs its runs in tmp_path/runs)."""
    wrapper = tmp_path / "nmcli"
    wrapper.write_text(script)
    wrapper.chmod(0o755)
    env = base_env()
    env["PATH"] = f"{tmp_path}:{env['PATH']}"
    found = subprocess.run(
        [PYTHON, "-c", PROFILES, *asked], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(found.stdout)


def test_profiles_are_not_asked_one_by_one_when_nmcli_cannot_answer(tmp_path):
    """NetworkManager not running: one nmcli run says so for every profile; asking each
    again (200 runs for 200 bound) would make a reload take seconds to learn nothing."""
    asked = [f"00000000-0000-0000-0000-00000000000{n}" for n in range(3)]
    assert profiles_read_by(tmp_path, NMCLI_DOWN, asked) == {}
    assert len((tmp_path / "runs").read_text().splitlines()) == 1


NMCLI_FAKE = """#!/usr/bin/env python3
import os, sys
with open(os.path.join(os.path.dirname(sys.argv[0]), "runs"), "a") as runs:
    print(*sys.argv[1:], file=runs)
for uuid in sys.argv[7::2]:
    print(f"connection.uuid:{uuid}")
    print("connection.type:802-3-ethernet")
    print("connection.permissions:")
    forged = "work\\nconnection.zone:trusted"
    print("connection.zone:" + (forged if uuid.endswith("17") else "home"))
    if not uuid.endswith("41"):  # a block cut short: its zone may not be all there is
        print("connection.metered:unknown")
"""


@pytest.mark.pure
def test_one_profile_of_the_wrong_shape_is_found_in_halves(tmp_path):
    """Pure logic, with a stand-in nmcli: two profiles among 64 whose output is not the
    shape asked for (a zone that adds a line, a block without its closing field) cost a
    reload two runs per halving (23 in all), not one per profile (65); every other profile is still
    read in full."""
    asked = [f"00000000-0000-0000-0000-0000000000{n:02}" for n in range(64)]
    profiles = profiles_read_by(tmp_path, NMCLI_FAKE.replace("/usr/bin/env python3", PYTHON), asked)
    for forged in (asked[17], asked[41]):
        assert profiles.pop(forged) == ["", "802-3-ethernet", False, "unbelieved"]
    others = [uuid for uuid in asked if uuid not in (asked[17], asked[41])]
    assert profiles == {uuid: ["home", "802-3-ethernet", False, ""] for uuid in others}
    # the whole, then each half of 32: itself, and per halving a good half and a bad one
    assert len((tmp_path / "runs").read_text().splitlines()) == 1 + 2 * (1 + 2 * 5)


def test_assign_gives_a_profile_its_user_may_edit_any_zone_through_the_map(nm):
    """`nm-zones assign` is the admin's choice: the zone a user could not choose is kept by
    the profile's UUID in the admin's map, so that it survives the next activation."""
    nm.add_user("alice")
    link = nm.add_veth()
    uuid = nm.add_connection(link, "lan", "connection.permissions", "user:alice")
    nm.nmcli("connection", "up", "lan")
    nm.wait_zone(link.name, "public")
    result = nm.nm_zones("assign", "lan", "trusted", "--profile")  # no network identified
    assert "ethz0: public -> trusted (map: uuid)" in result.stdout
    assert "can be edited by non-admins" in result.stderr
    assert f"'{uuid}': trusted" in nm.sh("cat /etc/nm-zones/connections-map.yaml").stdout
    reconnect(nm, "lan", "ipv4.dns", "10.78.1.53")
    nm.wait_zone(link.name, "trusted")
    assert nm.state()["interfaces"][link.name]["reason"] == "map: uuid"
    assert nm.nm_zones("check").returncode == 0


def test_assign_switches_an_active_connection_at_once(nm):
    link = nm.add_veth()
    nm.listen()
    nm.add_connection(link, "cafe")
    nm.nmcli("connection", "up", "cafe")
    nm.wait_zone(link.name, "public")
    out = nm.nm_zones("assign", "cafe", "block", "--profile").stdout
    assert out.strip() == "ethz0: public -> block (nmcli connection.zone) connection 'cafe'"
    assert nm.zone_of(link.name) == "block"
    assert nm.nmcli("-g", "connection.zone", "connection", "show", "cafe").stdout.strip() == "block"
    nm.wait_reachable(link)
    assert nm.probe(specs(link)) == BLOCK


def test_down_removes_the_rules_and_so_does_deleting_an_active_connection(nm):
    link = nm.add_veth()
    nm.add_connection(link, "lan", "connection.zone", "work")
    nm.nmcli("connection", "up", "lan")
    nm.wait_zone(link.name, "work")
    nm.nmcli("connection", "down", "lan")
    nm.wait_zone(link.name, None)
    assert "nmz-if-ethz0" not in nm.save("ipv4") + nm.save("ipv6")
    nm.nmcli("connection", "up", "lan")
    nm.wait_zone(link.name, "work")
    nm.nmcli("connection", "delete", "lan")
    nm.wait_zone(link.name, None)
    assert "nmz-if-ethz0" not in nm.save("ipv4") + nm.save("ipv6")


MAP_CASES = [
    # (map text, zone set on the profile, expected zone, expected reason)
    ("default-zone: public\nconnections:\n  UUID: work\n  lan: home\n", "", "work", "map: uuid"),
    ("default-zone: public\nconnections:\n  lan: home\n", "", "home", "map: name"),
    (
        "default-zone: public\nwired-zone: trusted\nwireless-zone: block\n",
        "",
        "trusted",
        "default for wired",
    ),
    ("default-zone: drop\n", "", "drop", "default-zone"),
    ("default-zone: public\nconnections:\n  lan: home\n", "dmz", "dmz", "nmcli connection.zone"),
    ("default-zone: block\nconnections:\n  lan: no-such-zone\n", "", "block", "default-zone"),
]


@pytest.mark.parametrize(
    ("cmap", "profile_zone", "zone", "reason"),
    MAP_CASES,
    ids=[c[3] + (" over map" if c[1] else "") for c in MAP_CASES],
)
def test_which_rule_decides_the_zone(nm, cmap, profile_zone, zone, reason):
    link = nm.add_veth()
    extra = ("connection.zone", profile_zone) if profile_zone else ()
    uuid = nm.add_connection(link, "lan", *extra)
    nm.run(
        ["sh", "-c", "cat > /etc/nm-zones/connections-map.yaml"],
        input_text=cmap.replace("UUID", uuid),
    )
    nm.nmcli("connection", "up", "lan")
    nm.wait_zone(link.name, zone)
    entry = nm.state()["interfaces"][link.name]
    assert entry["reason"] == reason
    assert entry["connection_uuid"] == uuid


def test_default_zone_command_moves_interfaces_that_got_it_that_way(nm):
    link, other = nm.add_veth(), nm.add_veth()
    nm.add_connection(link, "lan")
    nm.add_connection(other, "office", "connection.zone", "work")
    nm.nmcli("connection", "up", "lan")
    nm.nmcli("connection", "up", "office")
    nm.wait_zone(link.name, "public")
    nm.wait_zone(other.name, "work")
    assert nm.nm_zones("default-zone").stdout.strip() == "public"
    out = nm.nm_zones("default-zone", "--wired", "home").stdout
    assert "ethz0: public -> home (default for wired)" in out
    assert "ethz1" not in out  # its zone came from its profile
    assert nm.zone_of(other.name) == "work"
    assert nm.nm_zones("default-zone", "--wired").stdout.strip() == "home"
    result = nm.nm_zones("default-zone", "nope", check=False)
    assert result.returncode == 2 and "unknown zone 'nope'" in result.stderr


def test_disable_leaves_no_rule_and_enable_restores(nm):
    link = nm.add_veth()
    nm.listen()
    nm.add_connection(link, "lan", "connection.zone", "block")
    nm.nmcli("connection", "up", "lan")
    nm.wait_zone(link.name, "block")
    nm.nm_zones("disable")
    assert "nmz" not in nm.save("ipv4") + nm.save("ipv6")
    assert os.path.basename("/etc/nm-zones/disabled") in nm.sh("ls /etc/nm-zones").stdout
    nm.nmcli("connection", "down", "lan")  # events while disabled do nothing
    nm.nmcli("connection", "up", "lan")
    nm.wait_reachable(link)
    assert "nmz" not in nm.save("ipv4")
    assert nm.probe(specs(link)) == TRUSTED
    nm.nm_zones("enable")
    assert nm.zone_of(link.name) == "block"
    assert nm.probe(specs(link)) == BLOCK


# -- the hook itself, without NetworkManager ------------------------------------------


def run_hook(lab, interface: str, action: str, **env: str):
    return lab.run(
        lab.zoned, [sys.executable, "-X", "importtime", HOOK, interface, action], check=False, **env
    )


@pytest.mark.parametrize("action", ["connectivity-change", "hostname", "dns-change", "bogus"])
def test_ignored_actions_exit_without_importing_the_firewall_library(lab, action):
    result = run_hook(lab, "", action, CONNECTIVITY_STATE="FULL")
    assert result.returncode == 0
    assert "iptc" not in result.stderr and "yaml" not in result.stderr
    assert not os.path.exists(lab.state_dir)


def test_lo_external_and_interfaceless_vpn_get_no_binding(lab):
    link = lab.add_link()
    assert run_hook(lab, "lo", "up").returncode == 0
    assert run_hook(lab, link.name, "up", CONNECTION_EXTERNAL="1").returncode == 0
    assert (
        run_hook(
            lab, link.name, "vpn-up", VPN_IP_IFACE=link.name, DEVICE_IFACE=link.name
        ).returncode
        == 0
    )
    assert not os.path.exists(os.path.join(lab.state_dir, STATE_FILE))


def test_an_event_waiting_for_the_lock_respects_disable(lab, tmp_path):
    """`disable` may run while an event waits for the state lock: the event must then do
    nothing, not apply its zone after the rules were removed."""
    link = lab.add_link()
    os.makedirs(lab.state_dir)
    fd = os.open(os.path.join(lab.state_dir, "lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    hook = subprocess.Popen(
        ["ip", "netns", "exec", lab.zoned, sys.executable, HOOK, link.name, "up"],
        env=lab.env(CONNECTION_ID="lan"),
        stderr=subprocess.PIPE,
    )
    time.sleep(1.0)  # the hook has passed its first look at the flag and waits for the lock
    assert hook.poll() is None
    with open(os.path.join(lab.config_dir, "disabled"), "w") as stream:
        stream.write("disabled\n")
    os.close(fd)
    assert hook.wait(timeout=30) == 0
    assert "nmz" not in lab.save("ipv4") + lab.save("ipv6")


def test_stale_event_for_a_gone_interface_binds_nothing(lab):
    result = run_hook(lab, "gone0", "up", CONNECTION_ID="x", CONNECTION_UUID="u")
    assert result.returncode == 0
    assert "nmz-if-gone0" not in lab.save("ipv4")


def test_hook_applies_zone_from_keyfile_and_removes_on_down(lab, tmp_path):
    link = lab.add_link()
    keyfile = tmp_path / "lan.nmconnection"
    keyfile.write_text("[connection]\nid=lan\nuuid=1234\ntype=ethernet\nzone=dmz\n")
    env = {"CONNECTION_UUID": "1234", "CONNECTION_ID": "lan", "CONNECTION_FILENAME": str(keyfile)}
    assert run_hook(lab, link.name, "pre-up", **env).returncode == 0
    assert "-A nmz-input -i vz1 -j nmz-if-vz1-in" in lab.save("ipv4")
    assert "-A nmz-input -i vz1 -j nmz-if-vz1-in" in lab.save("ipv6")
    status = lab.nm_zones("status").stdout
    assert "dmz" in status and "nmcli connection.zone" in status
    assert run_hook(lab, link.name, "down", **env).returncode == 0
    assert "nmz-if-vz1" not in lab.save("ipv4")


@pytest.mark.parametrize("owner, mode", [(65534, 0o600), (0, 0o666)])
def test_a_keyfile_others_own_or_may_write_decides_nothing(lab, tmp_path, owner, mode):
    """CONNECTION_FILENAME names a file another user made (or anyone may change): its
    `zone=trusted` is not believed; the connection is placed as if it had no keyfile."""
    link = lab.add_link()
    keyfile = tmp_path / "lan.nmconnection"
    keyfile.write_text("[connection]\nid=lan\nuuid=1234\ntype=ethernet\nzone=trusted\n")
    os.chown(keyfile, owner, owner)
    os.chmod(keyfile, mode)
    env = {"CONNECTION_UUID": "1234", "CONNECTION_ID": "lan", "CONNECTION_FILENAME": str(keyfile)}
    result = run_hook(lab, link.name, "up", **env)
    assert f"{str(keyfile)!r}: not believed (owner uid {owner}" in result.stderr, result.stderr
    assert "asking nmcli instead" in result.stderr
    status = lab.nm_zones("status").stdout
    assert "vz1" in status and "trusted" not in status and "public" in status, status
    # nor does its identity pin the next event's quick path: nmcli decides each time
    from nm_zones.state import StateDir

    assert StateDir(lab.state_dir).load().interfaces[link.name].inputs == ""


@pytest.mark.both_backends
def test_the_hook_refuses_trusted_from_a_user_owned_keyfile_and_logs_why(lab, tmp_path):
    from tests.harness.syslog import run_with_syslog

    link = lab.add_link()
    keyfile = tmp_path / "lan.nmconnection"
    keyfile.write_text(
        "[connection]\nid=lan\nuuid=1234\ntype=ethernet\nzone=trusted\npermissions=user:alice;\n"
    )
    env = {"CONNECTION_UUID": "1234", "CONNECTION_ID": "lan", "CONNECTION_FILENAME": str(keyfile)}
    result, records = run_with_syslog(
        ["ip", "netns", "exec", lab.zoned, sys.executable, HOOK, link.name, "up"],
        lab.env(**env),
        str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert LAX_FOR_USERS in result.stderr and "using public" in result.stderr
    assert [r for r in records if LAX_FOR_USERS in r and "'lan'" in r], records
    status = lab.nm_zones("status", link.name, check=False).stdout
    assert f"zone public (default-zone; {LAX_FOR_USERS})" in status, status
    lab.listen()
    assert lab.probe(specs(link)) == PUBLIC


@pytest.mark.both_backends
def test_a_zone_switch_imports_only_the_event_path(lab, tmp_path):
    """Every event is a new process: once the config is compiled, switching a zone loads
    neither the YAML, the dataclass model, the compiler, json nor re (docs/performance.md).
    Run as installed: `python -S`, the package folders given, no .pth files."""
    from nm_zones.doors.install import package_paths

    link = lab.add_link()
    keyfile = tmp_path / "lan.nmconnection"
    env = {
        "CONNECTION_UUID": "1234",
        "CONNECTION_ID": "lan",
        "CONNECTION_FILENAME": str(keyfile),
        "PYTHONPATH": ":".join(package_paths()),
    }
    argv = [sys.executable, "-S", "-X", "importtime", HOOK, link.name]
    nftables = lab.backend == "nftables"
    imported, entries_file = {}, os.path.join(lab.state_dir, "entries")
    for zone, action in (("home", "up"), ("public", "reapply"), ("home", "reapply")):
        keyfile.write_text(f"[connection]\nid=lan\nuuid=1234\ntype=ethernet\nzone={zone}\n")
        kept = os.stat(entries_file) if os.path.exists(entries_file) else None
        result = lab.run(lab.zoned, [*argv, action], check=False, **env)
        assert result.returncode == 0, result.stderr
        imported[zone, action] = {
            line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if "|" in line
        }
        if nftables:
            assert f'"{link.name}" : jump nmz-if-{link.name}-in' in lab.nft_table()
            continue
        assert f"-A nmz-input -i {link.name} -j nmz-if-{link.name}-in" in lab.save("ipv6")
    if not nftables:  # home's entries were kept by the first event: the last wrote nothing
        assert (os.stat(entries_file).st_ino, os.stat(entries_file).st_mtime_ns) == (
            kept.st_ino,
            kept.st_mtime_ns,
        )
    assert {"yaml", "nm_zones.config.load"} <= imported["home", "up"]  # compiles, once
    for switch in (("public", "reapply"), ("home", "reapply")):
        # no Python binding beyond _ctypes: on iptables the first event built and kept the
        # entries of both zones (public's for the catch-all), so libiptc commits them as
        # they are; python-iptables is imported only to build an entry never seen
        assert not {"iptc", "ctypes"} & imported[switch], imported[switch]
        heavy = {"yaml", "dataclasses", "json", "re", "enum", "subprocess", "pickle"}
        heavy |= {"nm_zones.config.model", "nm_zones.config.load"}
        heavy |= {"nm_zones.ruleset.build", "nm_zones.ruleset.rules"}
        assert not heavy & imported[switch], heavy & imported[switch]


@pytest.mark.parametrize("name", ['Café ☕ "free" wifi', "x" * 5000, "-rf /", "a\nb", "$(reboot)"])
def test_strange_connection_names(lab, tmp_path, name):
    link = lab.add_link()
    with open(os.path.join(lab.config_dir, "connections-map.yaml"), "w") as stream:
        stream.write("default-zone: public\nconnections:\n  'Home': home\n")
    env = {"CONNECTION_UUID": "u-1", "CONNECTION_ID": name, "CONNECTION_FILENAME": "/nonexistent"}
    result = run_hook(lab, link.name, "up", **env)
    assert result.returncode == 0, result.stderr
    assert lab.nm_zones("status").returncode == 0
