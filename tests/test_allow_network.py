"""`nm-zones allow --network ID`: an allowance that holds on one known network, on whichever
interface is on it, and on no other network (ruleset/allowances.py, networks/zone.py)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from nm_zones.networks.identity import Identity
from nm_zones.networks.store import load_store
from nm_zones.ruleset.allowances import effective, network_owner, reaches
from tests.harness.cgroups import cgroup2_mount
from tests.harness.lab import PYTHON, REPO, base_env, wait_for
from tests.harness.networks import PeerNetwork
from tests.harness.nm_sandbox import NMSandbox
from tests.test_applications import (  # noqa: F401 - sandbox is a fixture
    ACCEPTED,
    APP_PORTS,
    OTHER_PORTS,
    REFUSED,
    probe,
    run,
    sandbox,
    serve_in,
)
from tests.test_networks import (  # noqa: F401 - world is a fixture
    A_MAC,
    B_MAC,
    NEEDS_NM,
    binding,
    connect,
    known,
    on_unknown_network,
    paths_in,
    see,
    wait_reason,
    world,
)
from tests.test_nm import HOOK, PUBLIC
from tests.test_service import reload_bus_config, service_pid

OPEN_8080 = ["accepted", "accepted", "rejected"] * 2  # 22/tcp, 8080/tcp, 631/udp; v4, v6
OPEN_BOTH = ["accepted"] * 6
OPEN_631 = ["accepted", "rejected", "accepted"] * 2

# -- which allowances reach an interface (pure) -------------------------------------------


@pytest.mark.pure
def test_a_networks_allowance_reaches_interfaces_on_that_network_only_in_any_zone():
    home = (network_owner("aa11"), "", "8080/tcp", 0, 0)
    zone_wide = ("", "public", "631/udp", 0, 0)
    own = ("eth1", "public", "22/tcp", 0, 0)
    allowances = [home, zone_wide, own]
    assert reaches(home, "eth0", "public", "aa11") and reaches(home, "eth7", "block", "aa11")
    assert not reaches(home, "eth0", "public", "bb22") and not reaches(home, "eth0", "public")
    assert effective(allowances, "eth0", "public", "aa11") == (
        ("631/udp", 0, 0),
        ("8080/tcp", 0, 0),
    )
    assert effective(allowances, "eth0", "public", "bb22") == (("631/udp", 0, 0),)
    assert effective(allowances, "eth1", "home", "aa11") == (("8080/tcp", 0, 0),)
    assert effective(allowances, "eth1", "public") == (("22/tcp", 0, 0), ("631/udp", 0, 0))


# -- the command line's checks (pure: they come before root and the kernel) --------------


def nm_zones(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = base_env(
        NM_ZONES_CONFIG_DIR=str(tmp_path / "etc"),
        NM_ZONES_STATE_DIR=str(tmp_path / "run"),
        NM_ZONES_DATA_DIR=str(tmp_path / "lib"),
    )
    return subprocess.run(
        [PYTHON, "-m", "nm_zones", *args], capture_output=True, text=True, env=env, cwd=REPO
    )


def one_line_error(result) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    return result.stderr


@pytest.mark.pure
@pytest.mark.parametrize("verb", ["allow", "revoke"])
def test_an_unknown_network_id_is_bad_usage_naming_the_id_and_the_listing(tmp_path, verb):
    error = one_line_error(nm_zones(tmp_path, verb, "8080/tcp", "--network", "0badc0ffee"))
    assert "--network 0badc0ffee" in error and "nm-zones networks" in error
    error = one_line_error(nm_zones(tmp_path, verb, "--app", "x.service", "--network", "0bad"))
    assert "--network 0bad:" in error


@pytest.mark.pure
def test_a_broken_store_is_named_with_its_file_and_line(tmp_path):
    os.makedirs(tmp_path / "lib")
    (tmp_path / "lib" / "networks.yaml").write_text("networks: {\n")
    result = nm_zones(tmp_path, "allow", "8080/tcp", "--network", "0badc0ffee")
    assert result.returncode == 2 and "networks.yaml:2:" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.pure
def test_other_scopes_and_bad_input_are_refused_with_a_network(tmp_path):
    error = one_line_error(
        nm_zones(tmp_path, "allow", "8080/tcp", "--network", "aa11", "--permanent")
    )
    assert "--network aa11: no known network" in error
    error = one_line_error(
        nm_zones(tmp_path, "allow", "8080/tcp", "--network", "aa11", "--for", "2h", "--permanent")
    )
    assert "--for and --permanent exclude each other" in error
    one_line_error(nm_zones(tmp_path, "revoke", "https", "--network", "aa11", "--permanent"))
    for scope in (["--zone", "home"], ["--interface", "eth0"]):
        result = nm_zones(tmp_path, "allow", "8080/tcp", "--network", "aa11", *scope)
        assert result.returncode == 2 and "not allowed with argument" in result.stderr
    error = one_line_error(nm_zones(tmp_path, "allow", "80/xyz", "--network", "aa11"))
    assert "unknown protocol 'xyz'" in error  # WHAT checked before the network
    assert "--network ID" in nm_zones(tmp_path, "allow", "--help").stdout
    assert "--network ID" in nm_zones(tmp_path, "revoke", "--help").stdout


# -- a network's own `allow` in the store (pure) -----------------------------------------


@pytest.mark.pure
def test_a_networks_allow_list_is_stored_and_read_back(tmp_path):
    paths = paths_in(tmp_path)
    store = load_store(paths)
    home, _ = store.seen(Identity(A_MAC, "10.0.0.1", "home.example"), now=0)
    assert store.allow(home.id, "8200/tcp", True) and store.allow(home.id, "app:x.service", True)
    assert not store.allow(home.id, "8200/tcp", True)
    store.save()
    again = load_store(paths).find(home.id)
    assert again.allowed == ("8200/tcp", "app:x.service")
    assert again.as_dict()["allow"] == ["8200/tcp", "app:x.service"]
    store.allow(home.id, "8200/tcp", False)
    store.save()
    assert load_store(paths).find(home.id).allowed == ("app:x.service",)


BAD_ALLOW = [
    ("allow: 8200/tcp", ":4: networks[0].allow: must be a list"),
    ("allow: [80/xyz]", ":4: networks[0].allow[0]: unknown protocol 'xyz'"),
    ("allow: [8200]", ":4: networks[0].allow[0]: must be a port"),
    ("allow: ['0080/tcp']", ":4: networks[0].allow[0]: write it as 80/tcp"),
    ("allow:\n      - ssh\n      - 'no way'", ":6: networks[0].allow[1]: 'no way' is neither"),
    ("allow: ['app:a b']", ":4: networks[0].allow[0]: 'a b' is not an application"),
]


@pytest.mark.pure
@pytest.mark.parametrize(("line", "expected"), BAD_ALLOW)
def test_a_bad_allow_list_is_refused_with_its_file_and_line(tmp_path, line, expected):
    paths = paths_in(tmp_path)
    os.makedirs(paths.data)
    text = "networks:\n  - id: abc\n    gateway-mac: 02:aa:00:00:00:01\n    " + line + "\n"
    with open(os.path.join(paths.data, "networks.yaml"), "w") as stream:
        stream.write(text)
    store = load_store(paths)
    assert store.broken and expected in str(store.problems[0]), store.problems


# -- with the real NetworkManager, networks A and B ---------------------------------------


def allowances(nm) -> list:
    return nm.state().get("allowances", [])


@pytest.mark.both_backends
def test_a_port_allowed_on_network_a_is_open_there_only(world, backend):  # noqa: F811
    nm, net = world
    on_unknown_network(nm, net["a"])
    see(net["a"], PUBLIC)
    [a] = known(nm)

    out = nm.nm_zones("allow", "8080/tcp", "--network", a["id"]).stdout
    assert "ethz0 (public, network 'home.example'): 8080/tcp allowed" in out
    see(net["a"], OPEN_8080)
    detail = nm.nm_zones("status", "ethz0").stdout
    assert "8080/tcp  (runtime, this network)" in detail, detail

    connect(nm, net["b"])  # the hotel: the same profile, interface and zone, another network
    wait_reason(nm, "public", "unknown wired network")
    see(net["b"], PUBLIC)
    out = nm.nm_zones("allow", "631/udp", "--network", a["id"]).stdout
    assert f"network 'home.example' ({a['id']}): 631/udp allowed (no interface is on it" in out
    see(net["b"], PUBLIC)

    connect(nm, net["a"])  # back home: both open again, with no command
    wait_reason(nm, "public", "unknown wired network")
    see(net["a"], OPEN_BOTH)

    out = nm.nm_zones("revoke", "8080/tcp", "--network", a["id"]).stdout
    assert "ethz0 (public, network 'home.example'): 8080/tcp revoked" in out
    see(net["a"], OPEN_631)
    again = nm.nm_zones("revoke", "8080/tcp", "--network", a["id"]).stdout
    assert "not revoked: nothing allowed it at runtime on this network" in again
    nm.nm_zones("revoke", "631/udp", "--network", a["id"])
    see(net["a"], PUBLIC)
    assert allowances(nm) == []

    nm.nm_zones("allow", "8080/tcp", "--network", a["id"], "--for", "3s")
    see(net["a"], OPEN_8080)
    see(net["a"], PUBLIC)  # the kernel stops accepting at the deadline by itself
    nm.nm_zones("gc")  # any run takes the rule out
    assert allowances(nm) == [] and binding(nm)["zone"] == "public"


def test_placing_a_network_in_block_ends_its_allowances(world):  # noqa: F811
    nm, net = world
    on_unknown_network(nm, net["a"])
    [a] = known(nm)
    nm.nm_zones("allow", "8080/tcp", "--network", a["id"])
    nm.nm_zones("allow", "631/udp", "--network", a["id"], "--permanent")
    see(net["a"], OPEN_BOTH)
    out = nm.nm_zones("networks", "zone", a["id"], "block").stdout
    assert "what was allowed on it ends (631/udp, 8080/tcp)" in out
    assert allowances(nm) == [] and known(nm)[0]["allow"] is None
    see(net["a"], ["rejected"] * 6)
    refused = nm.nm_zones("allow", "8080/tcp", "--network", a["id"], check=False)
    assert refused.returncode == 2 and "lets nobody in" in refused.stderr


@pytest.mark.both_backends
def test_allowed_for_good_on_network_a_outlives_reload_and_a_reboot(tmp_path, backend):
    """/var/lib/nm-zones is a folder of the test, the rest of the sandbox starts anew (a
    reboot): the port allowed on A with --permanent is open on A again, never on B."""
    if NEEDS_NM:
        pytest.skip("needs root, NetworkManager and dnsmasq")
    data = tmp_path / "var-lib-nm-zones"
    data.mkdir(mode=0o755)
    net = {
        "a": PeerNetwork(str(tmp_path), "a", A_MAC, "home.example").start(),
        "b": PeerNetwork(str(tmp_path), "b", B_MAC, "hotel.example").start(),
    }
    try:
        for boot in ("first", "second"):
            nm = NMSandbox(str(tmp_path / f"sandbox-{boot}"), data_dir=str(data))
            try:
                nm.start()
                nm.install_hook()
                if backend != "iptables":
                    nm.sh(f"echo 'backend: {backend}' > /etc/nm-zones/nm-zones.yaml")
                nm.listen()
                on_unknown_network(nm, net["a"])
                [a] = [n for n in known(nm) if n["domain"] == "home.example"]
                if boot == "first":
                    see(net["a"], PUBLIC)
                    out = nm.nm_zones("allow", "8080/tcp", "--network", a["id"], "--permanent")
                    assert "8080/tcp allowed permanently (/var/lib/nm-zones/networks.yaml)" in (
                        out.stdout
                    )
                    assert a["id"] in out.stdout
                    see(net["a"], OPEN_8080)
                    assert "(this network, for good" in nm.nm_zones("status", "ethz0").stdout
                    nm.nm_zones("reload")
                    assert nm.nm_zones("status").returncode == 0
                    see(net["a"], OPEN_8080)
                    connect(nm, net["b"])
                    wait_reason(nm, "public", "unknown wired network")
                    see(net["b"], PUBLIC)
                    continue
                assert a["allow"] == ["8080/tcp"]
                see(net["a"], OPEN_8080)  # after the reboot, with no command
                out = nm.nm_zones("revoke", "8080/tcp", "--network", a["id"], "--permanent")
                assert "8080/tcp revoked permanently" in out.stdout
                see(net["a"], PUBLIC)
                assert [n.get("allow") for n in known(nm)] == [None, None]
            finally:
                nm.stop()
    finally:
        for network in net.values():
            network.stop()


def test_with_the_service_a_networks_allowance_outlives_its_replays(world):  # noqa: F811
    """With `nm-zones serve`, NetworkManager asks it for the zone before IP configuration
    and replays every zone when it (re)starts: the allowance stays on A through both, and
    still never reaches B."""
    nm, net = world
    reload_bus_config(nm)
    nm.serve()
    on_unknown_network(nm, net["a"])
    [a] = known(nm)
    nm.nm_zones("allow", "8080/tcp", "--network", a["id"])
    see(net["a"], OPEN_8080)
    replay = ("org.fedoraproject.FirewallD1.zone.changeZoneOfInterface", "", "ethz0")
    assert nm.gdbus(*replay).stdout.strip() == "('public',)"
    nm.run(["kill", str(service_pid(nm))])
    wait_for(lambda: not nm.name_owned(), 10, what="the service to stop")
    nm.serve()
    assert nm.gdbus(*replay).stdout.strip() == "('public',)"
    see(net["a"], OPEN_8080)
    connect(nm, net["b"])
    wait_reason(nm, "public", "unknown wired network")
    see(net["b"], PUBLIC)
    connect(nm, net["a"])
    wait_reason(nm, "public", "unknown wired network")
    see(net["a"], OPEN_8080)


# -- an application on one network (nftables; the hook alone, in the lab) ----------------


@pytest.mark.netns
@pytest.mark.skipif(not cgroup2_mount(), reason="no cgroup v2 hierarchy")
@pytest.mark.parametrize("backend", ["nftables"])
def test_an_application_allowed_on_one_network_is_reached_there_only(lab, sandbox, tmp_path):  # noqa: F811
    """The hook identifies the lab link's network by its gateway's MAC and the lease's
    domain: `a.example` is network A, `b.example` (the same gateway) network B. app-a's
    ports are reached on A only, IPv4 and IPv6, and nothing else of the zone opens."""
    box = sandbox
    link = lab.add_link()
    keyfile = tmp_path / "lan.nmconnection"
    keyfile.write_text("[connection]\nid=lan\nuuid=1234\ntype=ethernet\n")
    connection = {"CONNECTION_UUID": "1234", "CONNECTION_ID": "lan"}
    connection["CONNECTION_FILENAME"] = str(keyfile)

    def visit(domain: str) -> None:
        """down (when bound), pre-up, then up with a lease naming `domain`."""
        lease = {"IP4_GATEWAY": link.peer_ipv4, "DHCP4_DOMAIN_NAME": domain}
        actions = [("down", {}), ("pre-up", {}), ("up", lease)]
        for action, extra in actions if lab_bound(lab, box) else actions[1:]:
            env = lab.env(**connection, **extra)
            result = subprocess.run(
                [*box.enter(), PYTHON, HOOK, link.name, action], env=env, capture_output=True
            )
            assert result.returncode == 0, result.stderr

    visit("a.example")
    [a] = json.loads(run(lab, box, "networks", "--json").stdout)["networks"]
    serve_in(lab, box, "app-a", APP_PORTS)
    serve_in(lab, box, "", OTHER_PORTS)
    result = run(lab, box, "allow", "--app", "app-a", "--network", a["id"])
    assert f"{link.name} (public, network 'a.example'): app:app-a allowed" in result.stdout
    assert probe(lab, link, APP_PORTS) == ACCEPTED
    assert probe(lab, link, OTHER_PORTS) == REFUSED

    visit("b.example")
    assert len(json.loads(run(lab, box, "networks", "--json").stdout)["networks"]) == 2
    assert probe(lab, link, APP_PORTS) == REFUSED

    visit("a.example")
    assert probe(lab, link, APP_PORTS) == ACCEPTED
    assert probe(lab, link, OTHER_PORTS) == REFUSED
    run(lab, box, "revoke", "--app", "app-a", "--network", a["id"])
    assert probe(lab, link, APP_PORTS) == REFUSED


def lab_bound(lab, box) -> bool:
    status = run(lab, box, "status", "--json", check=False)
    return bool(json.loads(status.stdout)["interfaces"])
