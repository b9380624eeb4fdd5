"""Known networks: the zone follows the network a wired profile reached, not the profile."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from nm_zones.networks.identity import (
    Identity,
    from_access_point_properties,
    lease_facts,
    parse_wifi_list,
)
from nm_zones.networks.store import load_store, render
from nm_zones.paths import Paths
from tests.harness.lab import PYTHON, REPO, base_env, wait_for
from tests.harness.networks import PeerNetwork, dhcp_profile, plug, probe_specs
from tests.harness.nm_sandbox import NMSandbox
from tests.test_nm import HOME, HOOK, PUBLIC, WORK
from tests.test_service import reload_bus_config, service_pid

NEEDS_NM = os.geteuid() != 0 or not shutil.which("NetworkManager") or not shutil.which("dnsmasq")
A_MAC, B_MAC = "02:aa:00:00:00:01", "02:bb:00:00:00:02"

# -- identity, from what NetworkManager gives ---------------------------------------------


def test_lease_facts_come_from_the_dispatcher_environment():
    env = {
        "IP4_GATEWAY": "192.168.1.1",
        "DHCP4_DHCP_SERVER_IDENTIFIER": "192.168.1.1",
        "DHCP4_DOMAIN_NAME": "Home.Example.",
        "IP6_GATEWAY": "fe80::1",
    }
    assert lease_facts(env) == ("192.168.1.1", "192.168.1.1", "home.example")
    ipv6_only = {"IP6_GATEWAY": "fe80::1", "DHCP6_DHCP6_DOMAIN_SEARCH": "lan.example other"}
    assert lease_facts(ipv6_only) == ("fe80::1", "", "lan.example")
    assert lease_facts({"CONNECTION_UUID": "x"}) == ("", "", "")  # pre-up: nothing yet


# Recorded from NetworkManager 1.42: `nmcli -t -f IN-USE,SSID,BSSID device wifi list` and
# the properties of org.freedesktop.NetworkManager.AccessPoint as read over D-Bus.
NMCLI_WIFI = (
    " :Neighbours:AA\\:BB\\:CC\\:00\\:11\\:22\n"
    "*:Cafe\\: Free Wi-Fi:F4\\:EC\\:38\\:9A\\:01\\:7E\n"
    " :Cafe\\: Free Wi-Fi:F4\\:EC\\:38\\:9A\\:01\\:7F\n"
)
ACCESS_POINT = {
    "Ssid": b"Cafe: Free Wi-Fi",
    "HwAddress": "F4:EC:38:9A:01:7E",
    "Strength": 71,
}


def test_wifi_identity_is_the_ssid_and_the_access_point_in_use():
    assert parse_wifi_list(NMCLI_WIFI) == ("Cafe: Free Wi-Fi", "f4:ec:38:9a:01:7e")
    assert from_access_point_properties(ACCESS_POINT) == ("Cafe: Free Wi-Fi", "f4:ec:38:9a:01:7e")
    assert parse_wifi_list(" :Neighbours:AA\\:BB\\:CC\\:00\\:11\\:22\n") == ("", "")


# -- the store ----------------------------------------------------------------------------


def paths_in(tmp_path) -> Paths:
    return Paths(
        config=str(tmp_path / "etc"), state=str(tmp_path / "run"), data=str(tmp_path / "lib")
    )


def test_a_network_matches_by_gateway_mac_and_the_dhcp_facts_it_was_stored_with(tmp_path):
    paths = paths_in(tmp_path)
    store = load_store(paths)
    home, new = store.seen(Identity(A_MAC, "10.0.0.1", "home.example"), now=0)
    assert new and store.seen(Identity(A_MAC, "10.0.0.1", "home.example"), now=59) == (home, False)
    assert store.seen(Identity(A_MAC, "10.0.0.1", "home.example"), now=60) == (home, True)
    home.zone = "home"
    static, _ = store.seen(Identity(B_MAC), now=0)  # a network without DHCP: the MAC alone
    store.save()
    again = load_store(paths)
    assert not again.broken and [n.id for n in again.networks] == [home.id, static.id]
    assert again.match(Identity(A_MAC, "10.0.0.1", "home.example")).zone == "home"
    # A's gateway MAC copied, another DHCP server or domain: not A
    assert again.match(Identity(A_MAC, "10.0.0.2", "home.example")) is None
    assert again.match(Identity(A_MAC, "10.0.0.1", "hotel.example")) is None
    assert again.match(Identity(A_MAC, "", "")) is None  # seen without A's DHCP facts
    assert again.match(Identity("02:aa:00:00:00:09", "10.0.0.1", "home.example")) is None
    assert again.match(Identity(B_MAC, "10.9.9.9", "any.example")).id == static.id
    assert again.match(Identity()) is None  # unidentified never matches
    entry = again.find(home.id).as_dict()
    assert entry["zone"] == "home" and entry["gateway-mac"] == A_MAC and entry["ssid"] is None
    assert again.find(static.id).as_dict()["zone"] is None


BROKEN_STORES = [
    ("networks:\n  - id: abc\n    zone: home\n", ":2: networks[0].gateway-mac: missing"),
    ("networks:\n  - id: abc\n    gateway-mac: 02:AA:00:00:00:01\n", ":3: networks[0].gateway-mac"),
    ("networks:\n  - id: abc\n    gateway-mac: 02:aa:00:00:00:01\n    zone: [x]\n", ":4:"),
    ("networks:\n  - id: a\n    gateway-mac: 02:aa:00:00:00:01\n    colour: red\n", ":4:"),
    ("networks: {\n", ":2: not valid YAML"),
]


@pytest.mark.parametrize(("text", "expected"), BROKEN_STORES)
def test_a_broken_store_is_refused_with_its_file_and_line(tmp_path, text, expected):
    paths = paths_in(tmp_path)
    os.makedirs(paths.data)
    with open(os.path.join(paths.data, "networks.yaml"), "w") as stream:
        stream.write(text)
    store = load_store(paths)
    assert store.broken and store.networks == []
    assert expected in str(store.problems[0]), store.problems
    result = subprocess.run(
        [PYTHON, "-m", "nm_zones", "networks"],
        capture_output=True,
        text=True,
        env=base_env(NM_ZONES_DATA_DIR=paths.data, NM_ZONES_CONFIG_DIR=paths.config),
        cwd=REPO,
    )
    assert result.returncode == 2 and expected in result.stderr
    assert "Traceback" not in result.stderr


def test_the_store_is_written_as_yaml_it_reads_back(tmp_path):
    paths = paths_in(tmp_path)
    store = load_store(paths)
    odd, _ = store.seen(Identity(A_MAC, "10.0.0.1", 'quote" colon: # hash'), now=0)
    store.rename(odd.id, 'Home: "LAN" #1 — ünïcode')
    store.save()
    assert load_store(paths).find(odd.id).label == 'Home: "LAN" #1 — ünïcode'
    assert render([]).endswith("networks: []\n")


def test_events_read_the_parsed_store_from_a_cache_that_follows_the_file(tmp_path):
    paths = paths_in(tmp_path)
    os.makedirs(paths.state)
    store = load_store(paths)
    network, _ = store.seen(Identity(A_MAC, "10.0.0.1", "home.example"), now=0)
    store.save()
    assert os.path.exists(os.path.join(paths.state, "networks-cache"))
    assert load_store(paths).find(network.id).zone == ""
    path = os.path.join(paths.data, "networks.yaml")
    with open(path) as stream:
        text = stream.read()
    with open(path, "w") as stream:  # an admin's edit: the cache no longer counts
        stream.write(text.replace("    gateway-mac:", '    zone: "home"\n    gateway-mac:'))
    assert load_store(paths).find(network.id).zone == "home"
    with open(path, "a") as stream:
        stream.write("  - id: [\n")
    assert load_store(paths).broken


# -- the gateway's MAC, resolved on the wire ----------------------------------------------


def test_the_gateway_mac_is_resolved_actively_on_the_device(lab):
    link = lab.add_link()
    peer_mac = lab.run(lab.peer, ["cat", f"/sys/class/net/{link.peer_name}/address"]).stdout
    code = (
        "from nm_zones.networks.neighbours import gateway_mac; import sys;"
        f"print(gateway_mac({link.name!r}, sys.argv[1]))"
    )
    # the neighbour table is empty: the kernel is made to resolve the gateway
    assert "lladdr" not in lab.run(lab.zoned, ["ip", "neigh", "show", "dev", link.name]).stdout
    got = lab.run(lab.zoned, [PYTHON, "-c", code, link.peer_ipv4]).stdout.strip()
    assert got == peer_mac.strip()
    got6 = lab.run(lab.zoned, [PYTHON, "-c", code, link.peer_ipv6]).stdout.strip()
    assert got6 == peer_mac.strip()
    # a gateway that does not answer leaves the network unidentified
    assert lab.run(lab.zoned, [PYTHON, "-c", code, "10.77.1.99"]).stdout.strip() == ""


# -- with the real NetworkManager: one DHCP profile, networks A, B and C ---------------


@pytest.fixture
def world(tmp_path, backend):
    """The sandbox with the hook installed and a listener, and three networks on the same
    subnet: A (home), B (a hotel), C (A's gateway MAC copied, another DHCP server)."""
    if NEEDS_NM:
        pytest.skip("needs root, NetworkManager and dnsmasq")
    nm = NMSandbox(str(tmp_path / "sandbox"))
    networks = {
        "a": PeerNetwork(str(tmp_path), "a", A_MAC, "home.example"),
        "b": PeerNetwork(str(tmp_path), "b", B_MAC, "hotel.example"),
        "c": PeerNetwork(str(tmp_path), "c", A_MAC, "home.example", server="10.79.0.2"),
    }
    try:
        nm.start()
        nm.install_hook()
        if backend != "iptables":
            nm.sh(f"echo 'backend: {backend}' > /etc/nm-zones/nm-zones.yaml")
        nm.listen()
        for network in networks.values():
            network.start()
        yield nm, networks
    finally:
        for network in networks.values():
            network.stop()
        nm.stop()


def connect(nm, network: PeerNetwork, profile: str = "lan") -> None:
    """Cable ethz0 to `network` and bring `profile` up (it waits for the DHCP lease)."""
    plug(nm, network)
    wait_for(
        lambda: "ethz0" in nm.nmcli("-t", "-f", "DEVICE", "device").stdout,
        20,
        what="NetworkManager to see ethz0",
    )
    nm.nmcli("--wait", "60", "connection", "up", profile)


def binding(nm) -> dict:
    return nm.state().get("interfaces", {}).get("ethz0", {})


def wait_reason(nm, zone: str, reason: str) -> None:
    wait_for(
        lambda: binding(nm).get("zone") == zone and binding(nm).get("reason") == reason,
        20,
        what=f"ethz0 in {zone} ({reason}); now {binding(nm)}\n{nm.logs()}",
    )


def see(network: PeerNetwork, expected: list[str]) -> None:
    """Probes from `network` until they show `expected` (a fresh link's IPv6 address and
    neighbours settle a moment after `up`); the last answer is in the failure."""
    answers: list = []

    def shows() -> bool:
        answers[:] = network.probe(probe_specs())
        return answers == expected

    try:
        wait_for(shows, 15, interval=0.3, what="the probes")
    except Exception:
        assert answers == expected
        raise


def known(nm) -> list[dict]:
    return json.loads(nm.nm_zones("networks", "--json").stdout)["networks"]


def on_unknown_network(nm, network: PeerNetwork) -> None:
    """The wired DHCP profile (no zone of its own) brought up on `network`, not yet placed:
    it holds the zone of unknown wired networks."""
    dhcp_profile(nm)
    connect(nm, network)
    wait_reason(nm, "public", "unknown wired network")


@pytest.mark.both_backends
def test_the_zone_follows_the_network_a_wired_profile_reached(world, backend):
    nm, net = world
    on_unknown_network(nm, net["a"])
    see(net["a"], PUBLIC)
    [a] = known(nm)
    assert (a["gateway-mac"], a["domain"], a["dhcp-server"]) == (A_MAC, "home.example", "10.79.0.1")
    assert a["zone"] is None and a["label"] == "home.example"

    out = nm.nm_zones("assign", "lan", "home").stdout
    assert f"network 'home.example' ({a['id']}) is now home" in out
    assert 'ethz0: public -> home (known network "home.example")' in out
    assert nm.nmcli("-g", "connection.zone", "connection", "show", "lan").stdout.strip() == ""
    see(net["a"], HOME)

    connect(nm, net["b"])  # re-plugged into the hotel's LAN
    wait_reason(nm, "public", "unknown wired network")
    see(net["b"], PUBLIC)

    connect(nm, net["a"])  # back home
    wait_reason(nm, "home", 'known network "home.example"')
    see(net["a"], HOME)
    status = nm.nm_zones("status").stdout
    assert 'why: known network "home.example"' in status
    assert f"rules held by: {backend}" in status
    nm.nm_zones("reload")  # re-decides every interface: a known network keeps its zone
    nm.nm_zones("default-zone", "--wired", "block")  # so do unknown networks' zone changes
    assert binding(nm)["zone"] == "home"
    nm.nm_zones("default-zone", "--wired", "")

    connect(nm, net["c"])  # A's gateway MAC and domain, another DHCP server: not A
    wait_reason(nm, "public", "unknown wired network")
    see(net["c"], PUBLIC)

    listed = known(nm)
    assert sorted((n["gateway-mac"], n["dhcp-server"], n["zone"]) for n in listed) == [
        (A_MAC, "10.79.0.1", "home"),
        (A_MAC, "10.79.0.2", None),
        (B_MAC, "10.79.0.1", None),
    ]
    text = nm.nm_zones("networks").stdout
    assert a["id"] in text and "home.example" in text and "hotel.example" in text

    nm.nm_zones("networks", "forget", a["id"])
    connect(nm, net["a"])
    wait_reason(nm, "public", "unknown wired network")
    see(net["a"], PUBLIC)


def test_an_unidentified_connection_is_not_placed_by_assign(world):
    nm, _ = world
    link = nm.add_veth("ethz1")  # static addresses, no gateway: nothing to identify
    nm.add_connection(link, "static")
    nm.nmcli("connection", "up", "static")
    nm.wait_zone(link.name, "public")
    refused = nm.nm_zones("assign", "static", "home", check=False)
    assert refused.returncode == 2 and "could not identify" in refused.stderr
    assert "--profile" in refused.stderr and nm.zone_of(link.name) == "public"
    nm.nm_zones("assign", "static", "home", "--profile")
    assert nm.zone_of(link.name) == "home"
    assert (
        nm.nmcli("-g", "connection.zone", "connection", "show", "static").stdout.strip() == "home"
    )


def test_a_profile_with_a_zone_of_its_own_keeps_it_on_every_network(world):
    nm, net = world
    dhcp_profile(nm, "office", "connection.zone", "work")
    for network in (net["a"], net["b"]):
        connect(nm, network, "office")
        wait_reason(nm, "work", "nmcli connection.zone")
        see(network, WORK)
    assert known(nm) == []  # not identified at all


def test_a_broken_store_falls_back_to_the_zone_of_unknown_networks(world):
    nm, net = world
    on_unknown_network(nm, net["a"])
    nm.nm_zones("assign", "lan", "home")
    nm.nmcli("connection", "down", "lan")
    nm.sh("echo '  - broken: [' >> /var/lib/nm-zones/networks.yaml")
    result = nm.nm_zones("networks", check=False)
    assert result.returncode == 2 and "/var/lib/nm-zones/networks.yaml:" in result.stderr
    connect(nm, net["a"])
    wait_reason(nm, "public", "unknown wired network")
    see(net["a"], PUBLIC)


def test_with_the_service_an_identified_network_keeps_its_zone_across_replays(world):
    """NetworkManager asks the service before IP configuration (the unknown-network zone)
    and replays every zone when the service (re)starts: a connection on a known network
    keeps that network's zone through both."""
    nm, net = world
    reload_bus_config(nm)
    nm.serve()
    on_unknown_network(nm, net["a"])
    nm.nm_zones("assign", "lan", "home")
    wait_reason(nm, "home", 'known network "home.example"')
    replay = ("org.fedoraproject.FirewallD1.zone.changeZoneOfInterface", "", "ethz0")
    assert nm.gdbus(*replay).stdout.strip() == "('home',)"
    nm.run(["kill", str(service_pid(nm))])
    wait_for(lambda: not nm.name_owned(), 10, what="the service to stop")
    nm.serve()
    assert nm.gdbus(*replay).stdout.strip() == "('home',)"
    assert binding(nm)["reason"] == 'known network "home.example"'
    connect(nm, net["b"])
    wait_reason(nm, "public", "unknown wired network")
    assert nm.gdbus(*replay).stdout.strip() == "('public',)"
    connect(nm, net["a"])
    wait_reason(nm, "home", 'known network "home.example"')
    see(net["a"], HOME)
    # the same over org.nm_zones.Manager1
    manager = "org.nm_zones.Manager1"
    reply = nm.gdbus(f"{manager}.AssignConnection", "lan", "internal").stdout
    assert "is now internal: 'lan' gets internal on this network only" in reply
    wait_reason(nm, "internal", 'known network "home.example"')
    assert nm.nmcli("-g", "connection.zone", "connection", "show", "lan").stdout.strip() == ""
    listed = nm.gdbus(f"{manager}.GetNetworks").stdout
    a_id = next(n["id"] for n in known(nm) if n["domain"] == "home.example")
    assert "'gateway-mac': '02:aa:00:00:00:01'" in listed and "'zone': 'internal'" in listed
    reply = nm.gdbus(f"{manager}.SetNetworkZone", a_id, "work").stdout
    assert f"network 'home.example' ({a_id}) is now work" in reply
    assert 'ethz0: internal -> work (known network \\"home.example\\")' in reply
    wait_reason(nm, "work", 'known network "home.example"')
    nm.gdbus(f"{manager}.RenameNetwork", a_id, "Home LAN")
    assert {n["label"] for n in known(nm)} == {"Home LAN", "hotel.example"}
    nm.add_user("nmzplain")
    refused = nm.gdbus(f"{manager}.ForgetNetwork", a_id, user="nmzplain")
    assert refused.returncode != 0 and "org.nm-zones.assign" in refused.stderr
    assert "forgot network 'Home LAN'" in nm.gdbus(f"{manager}.ForgetNetwork", a_id).stdout
    assert [n["label"] for n in known(nm)] == ["hotel.example"]
    assert binding(nm)["zone"] == "public" and binding(nm)["reason"] == "unknown wired network"


HOLD_UP = """#!/bin/sh
# runs before 50-nm-zones: holds the `up` event (and so identification) until released
[ "$2" = up ] || exit 0
while [ ! -e /run/nmz-release-up ]; do sleep 0.05; done
"""


def test_until_the_network_is_identified_nothing_of_its_zone_is_open(world):
    """From pre-up until the `up` event has identified network A (held here by a dispatcher
    script that runs before nm-zones'), A's probes see the unknown-network zone only."""
    nm, net = world
    on_unknown_network(nm, net["a"])
    nm.nm_zones("assign", "lan", "home")
    nm.nmcli("connection", "down", "lan")
    nm.wait_zone("ethz0", None)
    nm.run(["sh", "-c", "cat > /etc/NetworkManager/dispatcher.d/40-hold"], input_text=HOLD_UP)
    nm.sh("chmod 0755 /etc/NetworkManager/dispatcher.d/40-hold")
    connect(nm, net["a"])
    wait_reason(nm, "public", "default-zone")  # pre-up: being identified
    see(net["a"], PUBLIC)
    assert binding(nm)["reason"] == "default-zone"  # still held: nothing identified yet
    nm.sh("touch /run/nmz-release-up")
    wait_reason(nm, "home", 'known network "home.example"')
    see(net["a"], HOME)


def test_known_networks_outlive_a_reboot_of_the_sandbox(tmp_path):
    """/var/lib/nm-zones is a folder of the test here, the rest of the sandbox starts anew
    (a reboot): the placed network is still known, and gets its zone again."""
    if NEEDS_NM:
        pytest.skip("needs root, NetworkManager and dnsmasq")
    data = tmp_path / "var-lib-nm-zones"
    data.mkdir(mode=0o755)
    home = PeerNetwork(str(tmp_path), "a", A_MAC, "home.example").start()
    try:
        for boot in ("first", "second"):
            nm = NMSandbox(str(tmp_path / f"sandbox-{boot}"), data_dir=str(data))
            try:
                nm.start()
                nm.install_hook()
                nm.listen()
                # NetworkManager's default: `up` may come before the lease, and then the
                # network is identified at dhcp4-change
                dhcp_profile(nm, "lan", "ipv4.may-fail", "yes")
                connect(nm, home)
                if boot == "first":
                    wait_reason(nm, "public", "unknown wired network")
                    nm.nm_zones("assign", "lan", "home")
                wait_reason(nm, "home", 'known network "home.example"')
                see(home, HOME)
            finally:
                nm.stop()
        assert "home.example" in (data / "networks.yaml").read_text()
    finally:
        home.stop()


def test_the_identify_networks_setting_is_checked_with_its_line(tmp_path):
    from nm_zones.config.load import load_settings

    path = tmp_path / "nm-zones.yaml"
    path.write_text("backend: auto\nidentify-networks: wireless\n")
    settings, problems = load_settings(str(path))
    assert settings is None
    assert [str(p) for p in problems] == [
        f"{path}:2: identify-networks: 'wireless' is not one of none, wired, all"
    ]
    path.write_text("identify-networks: none\n")
    assert load_settings(str(path))[0].identify_networks == "none"


def test_with_identify_networks_none_the_zone_follows_the_profile_only(world):
    nm, net = world
    nm.sh("mkdir -p /etc/nm-zones && echo 'identify-networks: none' > /etc/nm-zones/nm-zones.yaml")
    mark = '#!/bin/sh\n[ "$2" = up ] && touch /run/nmz-up-done\n'
    nm.run(["sh", "-c", "cat > /etc/NetworkManager/dispatcher.d/60-mark"], input_text=mark)
    nm.sh("chmod 0755 /etc/NetworkManager/dispatcher.d/60-mark")
    dhcp_profile(nm)
    connect(nm, net["a"])
    wait_for(
        lambda: nm.sh("test -e /run/nmz-up-done", check=False).returncode == 0,
        20,
        what="the up event (after nm-zones' own hook)",
    )
    assert binding(nm)["zone"] == "public" and binding(nm)["reason"] == "default-zone"
    assert known(nm) == []
    refused = nm.nm_zones("assign", "lan", "home")  # the profile's own zone, as before
    assert "(nmcli connection.zone)" in refused.stdout
    assert nm.nmcli("-g", "connection.zone", "connection", "show", "lan").stdout.strip() == "home"


@pytest.mark.both_backends
def test_an_event_on_a_known_network_imports_only_the_event_path(lab, tmp_path):
    """The hook alone, in the lab: the first `up` on a network identifies and stores it; on
    the next visit (pre-up, then up on the known network) nothing heavy is imported, and
    the gateway's MAC is what decided."""
    from nm_zones.doors.install import package_paths

    link = lab.add_link()
    keyfile = tmp_path / "lan.nmconnection"
    keyfile.write_text("[connection]\nid=lan\nuuid=1234\ntype=ethernet\n")
    env = {
        "CONNECTION_UUID": "1234",
        "CONNECTION_ID": "lan",
        "CONNECTION_FILENAME": str(keyfile),
        "PYTHONPATH": ":".join(package_paths()),
    }
    lease = {"IP4_GATEWAY": link.peer_ipv4, "DHCP4_DOMAIN_NAME": "lab.example"}
    argv = [sys.executable, "-S", "-X", "importtime", HOOK, link.name]

    def event(action: str, **extra: str) -> set[str]:
        result = lab.run(lab.zoned, [*argv, action], check=False, **env, **extra)
        assert result.returncode == 0, result.stderr
        return {
            line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if "|" in line
        }

    event("pre-up")
    event("up", **lease)
    state = json.loads(lab.nm_zones("status", "--json").stdout)
    assert [(i["zone"], i["reason"]) for i in state["interfaces"]] == [
        ("public", "unknown wired network")
    ]
    listed = json.loads(lab.nm_zones("networks", "--json").stdout)["networks"]
    assert [(n["domain"], n["zone"]) for n in listed] == [("lab.example", None)]
    assert lab.nm_zones("networks", "zone", listed[0]["id"], "home").returncode == 0
    store = os.path.join(lab.data_dir, "networks.yaml")

    def visit() -> tuple[set[str], bool]:
        """down, pre-up, up on the known network: what `up` imported, and whether it wrote
        the store (the minute of the network's last visit changed: json renders it)."""
        event("down")
        event("pre-up")  # nothing identified before `up`: the unknown-network zone
        state = json.loads(lab.nm_zones("status", "--json").stdout)
        assert [(i["zone"], i["reason"]) for i in state["interfaces"]] == [
            ("public", "default-zone")
        ]
        with open(store, "rb") as before:
            kept = before.read()
        imported = event("up", **lease)
        with open(store, "rb") as after:
            return imported, after.read() != kept

    imported, wrote = visit()
    if wrote:  # a minute turned since the last visit; the next one is within the same minute
        imported, wrote = visit()
        assert not wrote
    state = json.loads(lab.nm_zones("status", "--json").stdout)
    assert [(i["zone"], i["reason"]) for i in state["interfaces"]] == [
        ("home", 'known network "lab.example"')
    ]
    heavy = {"yaml", "dataclasses", "json", "re", "subprocess", "hashlib"}
    heavy |= {"nm_zones.config.model", "nm_zones.config.load", "nm_zones.config.yamlsource"}
    heavy |= {"socket", "selectors"}  # 5-6 ms an event: neighbours.py uses _socket
    assert "nm_zones.networks.neighbours" in imported
    assert not heavy & imported, heavy & imported
