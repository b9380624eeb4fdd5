"""The real firewall-cmd (Debian's firewalld 1.3.3 client) against `nm-zones serve` and
against firewalld itself, in the same NetworkManager sandbox one after the other: the same
command must print the same and exit the same.

SAME lists the commands nm-zones answers as firewalld does; DIFFERENT those where nm-zones
differs on purpose (its own catalogue of zones and services, no rich rules: the admin guide's
firewall-cmd section says why), each checked for exactly the documented difference.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import subprocess
import xml.etree.ElementTree as ElementTree

import pytest
from pyroute2 import NetNS, netns

from nm_zones.config.load import load
from nm_zones.paths import Paths
from tests.harness.firewalld import (
    FirewallD,
    firewall_cmd,
    firewalld_root,
    name_owner_command,
    python_env,
)
from tests.harness.lab import wait_for
from tests.test_firewalld_clients import (
    peer_web,
    sandbox,  # noqa: F401 - the sandbox on a backend
)
from tests.test_service import (
    nm,  # noqa: F401 - the sandbox fixture
    reload_bus_config,
)

# Run in this order against each daemon (DIFFERENT first), once ethz0's connection is up in
# zone home. SAME: the answers must match firewalld's. DIFFERENT: they differ exactly as the
# admin guide says (differ_as_documented).
SAME = (
    ("--get-default-zone",),
    ("--get-zone-of-interface=ethz0",),
    ("--get-zone-of-interface=nosuch0",),
    ("--set-default-zone=work",),
    ("--get-default-zone",),
    ("--set-default-zone=public",),
    ("--reload",),
    ("--state",),  # the Properties interface (doors/firewalld_props.py)
    ("--get-active-zones",),  # the catch-all binds nothing: public is not listed
    ("--list-all",),  # zone settings (doors/firewalld_zone.py)
    ("--zone=public", "--list-services"),
    ("--zone=home", "--list-ports"),
    ("--zone=home", "--query-service=ssh"),
    # runtime ports and services: runtime allowances for the whole zone (doors/allow.py)
    ("--zone=home", "--add-port=8080/tcp"),
    ("--zone=home", "--add-port=8080/tcp"),  # ALREADY_ENABLED: a warning, exit 0
    ("--zone=home", "--query-port=8080/tcp"),
    ("--zone=home", "--list-ports"),
    ("--zone=home", "--remove-port=8080/tcp"),
    ("--zone=home", "--remove-port=8080/tcp"),  # NOT_ENABLED: a warning, exit 0
    ("--zone=home", "--query-port=8080/tcp"),
    ("--zone=home", "--add-port=8080"),
    ("--zone=home", "--add-port=99999/tcp"),
    ("--zone=nosuch", "--add-port=8080/tcp"),
    ("--zone=home", "--add-service=http"),
    ("--zone=home", "--add-service=http"),
    ("--zone=home", "--query-service=http"),
    ("--zone=home", "--remove-service=http"),
    ("--zone=home", "--remove-service=http"),
    ("--zone=home", "--query-service=http"),
    ("--zone=home", "--add-service=nosuchservice"),
    # a service of the zone's file removed at runtime: gone until reload or an add
    ("--zone=home", "--remove-service=ssh"),
    ("--zone=home", "--query-service=ssh"),
    ("--zone=home", "--remove-service=ssh"),  # NOT_ENABLED: a warning, exit 0
    ("--zone=home", "--add-service=ssh"),
    ("--zone=home", "--query-service=ssh"),
    ("--zone=public", "--remove-service=dhcpv6-client"),
    ("--zone=public", "--list-services"),
    ("--zone=public", "--list-all"),
    ("--zone=external", "--remove-masquerade"),
    ("--zone=external", "--query-masquerade"),
    ("--zone=external", "--add-masquerade"),
    ("--zone=external", "--query-masquerade"),
    ("--zone=home", "--remove-service=ssh"),
    ("--reload",),
    ("--zone=home", "--query-service=ssh"),
    ("--zone=public", "--list-services"),
    # ... and made permanent: out of the zone's file
    ("--zone=home", "--remove-service=samba-client"),
    ("--runtime-to-permanent",),
    ("--permanent", "--zone=home", "--query-service=samba-client"),
    ("--reload",),
    ("--zone=home", "--query-service=samba-client"),
    ("--permanent", "--zone=home", "--add-service=samba-client"),
    ("--reload",),
    ("--zone=home", "--query-service=samba-client"),
    ("--zone=home", "--add-port=9090/tcp", "--timeout=30s"),
    ("--zone=home", "--query-port=9090/tcp"),
    ("--zone=home", "--remove-port=9090/tcp"),  # its 30 s must not decide what follows
    ("--zone=home", "--query-masquerade"),
    ("--zone=home", "--list-forward-ports"),
    # runtime masquerade and forward ports: runtime allowances too (ruleset/runtime_features.py)
    ("--zone=home", "--add-masquerade"),
    ("--zone=home", "--add-masquerade"),  # ALREADY_ENABLED: a warning, exit 0
    ("--zone=home", "--query-masquerade"),
    ("--zone=home", "--remove-masquerade"),
    ("--zone=home", "--remove-masquerade"),  # NOT_ENABLED: a warning, exit 0
    ("--zone=home", "--query-masquerade"),
    ("--zone=home", "--add-forward-port=port=2222:proto=tcp:toport=22"),
    ("--zone=home", "--add-forward-port=port=2222:proto=tcp:toport=22"),
    ("--zone=home", "--query-forward-port=port=2222:proto=tcp:toport=22"),
    ("--zone=home", "--list-forward-ports"),
    ("--zone=home", "--add-forward-port=port=2223:proto=udp:toport=53:toaddr=10.78.1.2"),
    ("--zone=home", "--list-forward-ports"),
    ("--zone=home", "--remove-forward-port=port=2222:proto=tcp:toport=22"),
    ("--zone=home", "--remove-forward-port=port=2222:proto=tcp:toport=22"),
    ("--zone=home", "--remove-forward-port=port=2223:proto=udp:toport=53:toaddr=10.78.1.2"),
    ("--zone=home", "--query-forward-port=port=2222:proto=tcp:toport=22"),
    ("--zone=home", "--add-forward-port=port=2222:proto=tcp:toport=99999"),
    ("--zone=home", "--add-forward-port=port=2222:proto=tcp:toaddr=no-address"),
    # interfaces; a new default zone leaves an explicitly bound interface where it is
    ("--zone=work", "--change-interface=ethz0"),
    ("--get-zone-of-interface=ethz0",),
    ("--get-active-zones",),
    ("--set-default-zone=work",),
    ("--set-default-zone=public",),
    ("--get-zone-of-interface=ethz0",),
    ("--zone=home", "--change-interface=ethz0"),
    ("--zone=work", "--add-interface=ethz0"),
    ("--zone=home", "--add-interface=ethz0"),
    ("--zone=work", "--remove-interface=ethz0"),
    ("--zone=work", "--add-interface=nosuch1"),  # bound before it exists
    ("--get-zone-of-interface=nosuch1",),
    ("--zone=work", "--remove-interface=nosuch1"),
    # --permanent: the zone's file (doors/firewalld_permanent.py)
    ("--permanent", "--zone=home", "--add-port=8081/tcp"),
    ("--permanent", "--zone=home", "--add-port=8081/tcp"),
    ("--permanent", "--zone=home", "--query-port=8081/tcp"),
    ("--permanent", "--zone=home", "--list-ports"),
    ("--permanent", "--zone=home", "--remove-port=8081/tcp"),
    ("--permanent", "--zone=home", "--remove-port=8081/tcp"),
    ("--permanent", "--zone=home", "--add-service=http"),
    ("--permanent", "--zone=home", "--query-service=http"),
    ("--permanent", "--zone=home", "--remove-service=http"),
    ("--permanent", "--zone=home", "--add-masquerade"),
    ("--permanent", "--zone=home", "--query-masquerade"),
    ("--permanent", "--zone=home", "--remove-masquerade"),
    ("--permanent", "--zone=home", "--add-forward-port=port=2222:proto=tcp:toport=22"),
    ("--permanent", "--zone=home", "--list-forward-ports"),
    ("--permanent", "--zone=home", "--remove-forward-port=port=2222:proto=tcp:toport=22"),
    # a reload ends runtime changes (not those with a timeout), unless made permanent
    ("--zone=home", "--add-port=7070/tcp"),
    ("--runtime-to-permanent",),
    ("--reload",),
    ("--zone=home", "--list-ports"),
    ("--permanent", "--zone=home", "--remove-port=7070/tcp"),
    ("--zone=home", "--add-port=7071/tcp"),
    ("--complete-reload",),
    ("--zone=home", "--list-ports"),
    ("--get-zone-of-interface=ethz0",),
    ("--query-panic",),
    ("--panic-on",),
    ("--query-panic",),
    ("--panic-on",),  # a warning, ALREADY_ENABLED
    ("--panic-off",),
    ("--panic-off",),  # a warning, NOT_ENABLED
    ("--query-panic",),
)
RICH_RULE = ("--zone=home", "--add-rich-rule=rule family=ipv4 source address=192.0.2.1 accept")
DIFFERENT = (
    ("--get-zones",),
    ("--get-services",),
    ("--list-all-zones",),
    ("--zone=home", "--list-services"),
    RICH_RULE,  # nm-zones has no rich rules: an error, never a silent success
)
COMMANDS = DIFFERENT + SAME  # the catalogues first: before any runtime change
# The documented differences (docs/admin-guide.md, firewall-cmd): the zones nm-zones ships
# beside firewalld's, the services only nm-zones' catalogue has, and the zones that open
# ipp-client as the Network Zones proposal had them (firewalld 1.3.3's no longer do).
OWN_ZONES = {"docker", "libvirt", "nm-shared"}
OWN_SERVICES = {"minecraft", "pptp"}
IPP_CLIENT_ZONES = {"home", "internal", "work"}


@pytest.fixture(scope="module")
def root():
    found = firewalld_root()
    if found is None:
        pytest.skip("firewalld's packages cannot be downloaded here")
    return found


def answers(daemon: FirewallD) -> list[tuple[int, str, str]]:
    results = []
    for command in COMMANDS:
        result = daemon.cmd(*command)
        results.append((result.returncode, result.stdout.strip(), result.stderr.strip()))
    return results


def test_firewall_cmd_answers_as_against_firewalld(nm, root):  # noqa: F811
    link = nm.add_veth()
    nm.add_connection(link, "lan", "connection.zone", "home")

    firewalld = FirewallD(nm, root)
    with firewalld:
        nm.nmcli("connection", "up", "lan")
        assert "firewalld" in name_owner_command(nm)
        expected = answers(firewalld)
        nm.nmcli("connection", "down", "lan")
    reload_bus_config(nm)

    serve = nm.serve()
    nm.nmcli("connection", "up", "lan")
    nm.wait_zone(link.name, "home")
    assert "nm_zones" in name_owner_command(nm)
    got = answers(firewalld)
    serve.terminate()
    serve.wait()

    by_command = list(zip(COMMANDS, expected, got, strict=True))
    differ = [
        f"firewall-cmd {' '.join(command)}: serve {have}, firewalld {want}"
        for command, want, have in by_command[len(DIFFERENT) :]
        if have != want
    ]
    assert not differ, "\n".join(differ)
    differ_as_documented(dict(zip(DIFFERENT, by_command[: len(DIFFERENT)], strict=True)))


def differ_as_documented(answers: dict) -> None:
    """Each of DIFFERENT: exactly the documented difference, the rest as firewalld's."""

    def pair(*command: str) -> tuple[tuple, tuple]:
        _, want, have = answers[command]
        assert have[0] == want[0] == 0 and have[2] == want[2] == "", (command, want, have)
        return want[1], have[1]

    want, have = pair("--get-zones")
    assert set(have.split()) == set(want.split()) | OWN_ZONES, (want, have)
    want, have = pair("--get-services")
    assert set(have.split()) - set(want.split()) == OWN_SERVICES, (want, have)
    assert len(set(want.split()) & set(have.split())) > 50
    want, have = pair("--zone=home", "--list-services")
    assert sorted(have.split()) == sorted([*want.split(), "ipp-client"]), (want, have)
    want, have = pair("--list-all-zones")
    theirs, ours = zone_blocks(want), zone_blocks(have)
    assert set(ours) == set(theirs) | OWN_ZONES, (sorted(theirs), sorted(ours))
    for zone, block in theirs.items():
        if zone in IPP_CLIENT_ZONES:
            block = block.replace("  services: ", "  services: ipp-client ", 1)
            assert sorted(ours[zone].split()) == sorted(block.split()), (zone, block, ours[zone])
        else:
            assert ours[zone] == block, (zone, block, ours[zone])
    # what nm-zones does not do fails with a firewalld code and says why
    _, want, rich = answers[RICH_RULE]
    assert want[0] == 0 and rich[0] == 122, (want, rich)
    assert rich[2] == "Error: INVALID_RULE: nm-zones has no rich rules"


def zone_blocks(text: str) -> dict[str, str]:
    """--list-all-zones' output by zone: its name (without "(active)", "(default)") to its
    block."""
    blocks = [block for block in text.split("\n\n") if block.strip()]
    return {block.split()[0]: block for block in blocks}


def firewalld_service(folder: str, name: str) -> dict[str, set[str]]:
    """A service of firewalld's catalogue (its XML file, includes resolved) as sets."""
    root = ElementTree.parse(os.path.join(folder, f"{name}.xml")).getroot()
    found = {
        "ports": {f"{p.get('port')}/{p.get('protocol')}" for p in root.iter("port")},
        "source-ports": {f"{p.get('port')}/{p.get('protocol')}" for p in root.iter("source-port")},
        "helpers": {h.get("name") for h in root.iter("helper")},
        "destination": {
            f"{family}={ipaddress.ip_network(address)}"
            for d in root.iter("destination")
            for family, address in d.attrib.items()
        },
    }
    # a protocol is either a protocol element or a port without a number
    found["protocols"] = {p.get("value") for p in root.iter("protocol")}
    found["protocols"] |= {p[1:] for p in found["ports"] if p.startswith("/")}
    found["ports"] = {p for p in found["ports"] if not p.startswith("/")}
    for include in root.iter("include"):
        for key, values in firewalld_service(folder, include.get("service")).items():
            found[key] |= values
    return found


def test_shared_services_open_what_firewalld_opens(root, tmp_path):
    """A service name nm-zones' catalogue shares with firewalld 1.3.3's opens the same ports,
    protocols, source ports, destinations and helpers: `--add-service=NAME` means the same."""
    folder = os.path.join(root, "usr/lib/firewalld/services")
    paths = Paths(config=str(tmp_path / "etc"), state=str(tmp_path / "run"))
    services = load(paths, shipped_only=True).config.services
    shared = sorted(n for n in services if os.path.exists(os.path.join(folder, f"{n}.xml")))
    assert len(shared) > 50 and set(services) - set(shared) == OWN_SERVICES
    differ = []
    for name in shared:
        service = services[name]
        ours = {
            "ports": {str(p) for p in service.ports},
            "source-ports": {str(p) for p in service.source_ports},
            "helpers": set(service.helpers),
            "destination": {f"{f}={ipaddress.ip_network(a)}" for f, a in service.destination},
            "protocols": set(service.protocols),
        }
        theirs = firewalld_service(folder, name)
        if name == "llmnr":  # documented: firewalld limits only 5355/udp to the groups
            theirs["destination"] = set()
        if ours != theirs:
            differ.append(f"{name}: nm-zones {ours}, firewalld {theirs}")
    assert not differ, "\n".join(differ)


def kernel_text(sandboxed, backend: str) -> str:
    if backend == "nftables":
        return sandboxed.run(["nft", "list", "ruleset"]).stdout
    return sandboxed.save("ipv4") + sandboxed.save("ipv6")


@pytest.mark.both_backends
def test_firewall_cmd_changes_reach_the_kernel(sandbox, root, backend):  # noqa: F811
    """firewall-cmd against serve, checked with packets from the peer: a zone set on an
    interface stays through a new default zone, ends with a reload, and survives one after
    --runtime-to-permanent (in the profile); runtime ports and services open at once and end
    with a reload, a timeout ends in the kernel, --permanent waits for the reload."""
    nm = sandbox  # noqa: F811
    nm.serve()
    link = nm.add_veth()
    nm.add_connection(link, "lan", "connection.zone", "home")
    nm.nmcli("connection", "up", "lan")
    nm.wait_zone(link.name, "home")
    nm.listen(tcp=(22, 80, 8080, 9090), udp=())
    nm.wait_reachable(link)

    def reach(port: int) -> list[str]:
        specs = [{"kind": "tcp", "address": a, "port": port} for a in (link.ipv4, link.ipv6)]
        return nm.probe(specs)

    def fw(*args: str) -> str:
        result = nm.run(firewall_cmd(root, *args), check=False, env=python_env(root))
        assert result.returncode == 0, f"firewall-cmd {' '.join(args)}: {result}"
        return result.stdout.strip()

    opened, closed = ["accepted"] * 2, ["rejected"] * 2
    # the interface's zone first, probed on ports whose fate both zones share: a zone switch
    # ends the flows the new zone forbids (flows.py), and its probes need no listener back
    fw("--zone=work", "--change-interface=ethz0")
    assert reach(8080) == closed and reach(22) == opened
    fw("--set-default-zone=work")
    fw("--set-default-zone=public")
    assert fw("--get-zone-of-interface=ethz0") == "work"
    fw("--reload")  # a runtime zone ends with a reload: NetworkManager's zone again
    nm.wait_zone(link.name, "home")
    fw("--zone=work", "--change-interface=ethz0")
    fw("--runtime-to-permanent")
    fw("--reload")
    assert fw("--get-zone-of-interface=ethz0") == "work"
    assert nm.nmcli("-g", "connection.zone", "connection", "show", "lan").stdout.strip() == "work"
    assert reach(22) == opened

    assert reach(8080) == closed and reach(80) == closed
    fw("--zone=work", "--add-port=8080/tcp")
    fw("--zone=work", "--add-service=http")
    assert reach(8080) == opened and reach(80) == opened
    fw("--zone=work", "--remove-port=8080/tcp")
    assert reach(8080) == closed and reach(80) == opened
    fw("--reload")
    assert reach(80) == closed

    # a service of the zone's file removed at runtime: closed until an add or a reload
    fw("--zone=work", "--remove-service=ssh")
    assert reach(22) == closed
    fw("--zone=work", "--add-service=ssh")
    assert reach(22) == opened
    fw("--zone=work", "--remove-service=ssh")
    assert reach(22) == closed
    fw("--reload")
    assert reach(22) == opened

    fw("--zone=work", "--add-port=9090/tcp", "--timeout=3s")
    assert reach(9090) == opened
    wait_for(lambda: reach(9090) == closed, 30, interval=0.5, what="the timeout to end")
    assert fw("--zone=work", "--list-ports") == ""

    fw("--permanent", "--zone=work", "--add-port=8080/tcp")
    assert reach(8080) == closed  # permanent: with the next reload, as in firewalld
    fw("--reload")
    assert reach(8080) == opened

    assert "masquerade" not in kernel_text(nm, backend).lower()
    fw("--permanent", "--zone=work", "--add-masquerade")
    fw("--reload")
    assert fw("--zone=work", "--query-masquerade") == "yes"
    assert "masquerade" in kernel_text(nm, backend).lower()


@pytest.mark.both_backends
def test_an_interface_bound_before_it_exists_gets_its_zone_when_it_appears(sandbox, root):  # noqa: F811
    """firewall-cmd --add-interface for an interface not there yet succeeds, as with
    firewalld; the zone applies when NetworkManager reports the device (lan7: not managed
    by the sandbox's NetworkManager, configured by hand)."""
    nm = sandbox  # noqa: F811
    nm.serve()

    def fw(*args: str) -> str:
        result = nm.run(firewall_cmd(root, *args), check=False, env=python_env(root))
        assert result.returncode == 0, f"firewall-cmd {' '.join(args)}: {result}"
        return result.stdout.strip()

    fw("--zone=work", "--add-interface=lan7")
    assert fw("--get-zone-of-interface=lan7") == "work"
    assert fw("--get-active-zones") == "work\n  interfaces: lan7"
    link = nm.add_veth("lan7")
    nm.wait_zone("lan7", "work")
    nm.run(["ip", "address", "add", f"{link.ipv4}/24", "dev", "lan7"])
    nm.run(["ip", "address", "add", f"{link.ipv6}/64", "dev", "lan7", "nodad"])
    nm.run(["ip", "link", "set", "lan7", "up"])
    nm.listen(tcp=(22, 8080), udp=())
    specs = [
        {"kind": "tcp", "address": address, "port": port}
        for address in (link.ipv4, link.ipv6)
        for port in (22, 8080)
    ]
    wait_for(lambda: nm.probe(specs)[0] != "dropped", 10, what="lan7 to answer")
    assert nm.probe(specs) == ["accepted", "rejected"] * 2  # work: ssh, not the rest
    assert fw("--zone=work", "--remove-interface=lan7") == "success"


# Sources (doors/firewalld_sources.py), run in this order against each daemon.
SOURCES_SAME = (
    ("--zone=trusted", "--add-source=10.78.1.3"),
    ("--get-zone-of-source=10.78.1.3",),
    ("--zone=trusted", "--add-source=10.78.1.3"),
    ("--zone=home", "--add-source=10.78.1.3"),
    ("--zone=trusted", "--query-source=10.78.1.3"),
    ("--zone=home", "--query-source=10.78.1.3"),
    ("--zone=trusted", "--add-source=fd78:1::3/128"),
    ("--zone=trusted", "--list-sources"),
    ("--get-active-zones",),
    ("--zone=trusted", "--list-all"),
    ("--zone=drop", "--change-source=fd78:1::3/128"),
    ("--get-zone-of-source=fd78:1::3/128",),
    ("--zone=home", "--remove-source=10.78.1.3"),
    ("--zone=trusted", "--remove-source=10.78.1.3"),
    ("--remove-source=fd78:1::3/128",),
    ("--get-zone-of-source=10.78.1.3",),
    ("--zone=trusted", "--add-source=no-address"),
    ("--zone=nosuch", "--add-source=10.78.1.3"),
    ("--remove-source=10.9.9.9",),
)


def test_firewall_cmd_sources_answer_as_against_firewalld(nm, root):  # noqa: F811
    def run(daemon) -> list[tuple[int, str, str]]:
        results = []
        for command in SOURCES_SAME:
            result = daemon.cmd(*command)
            results.append((result.returncode, result.stdout.strip(), result.stderr.strip()))
        return results

    firewalld = FirewallD(nm, root)
    with firewalld:
        assert "firewalld" in name_owner_command(nm)
        expected = run(firewalld)
    reload_bus_config(nm)

    serve = nm.serve()
    assert "nm_zones" in name_owner_command(nm)
    got = run(firewalld)
    serve.terminate()
    serve.wait()
    for command, want, have in zip(SOURCES_SAME, expected, got, strict=True):
        assert have == want, f"firewall-cmd {' '.join(command)}: serve {have}, firewalld {want}"


@pytest.fixture
def inner(sandbox):  # noqa: F811
    """A host behind the sandbox (its own namespace, 10.79.0.2, routed through inz0, which no
    zone claims): what the sandbox forwards to the peer comes from here."""
    name = f"nmz-inner-{secrets.token_hex(3)}"
    netns.create(name)
    with NetNS(name) as ns:
        ns.link("add", ifname="g0", kind="veth", peer={"ifname": "inz0"})
        ns.link("set", index=ns.link_lookup(ifname="inz0")[0], net_ns_pid=sandbox.pid)
        index = ns.link_lookup(ifname="g0")[0]
        ns.addr("add", index=index, address="10.79.0.2", prefixlen=24)
        ns.link("set", index=index, state="up")
        ns.route("add", dst="default", gateway="10.79.0.1")
    sandbox.run(["ip", "address", "add", "10.79.0.1/24", "dev", "inz0"])
    sandbox.run(["ip", "link", "set", "inz0", "up"])
    yield name
    netns.remove(name)


def fetched_from(namespace: str, address: str) -> str:
    request = f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | /bin/busybox nc -w 3 {address} 8080"
    command = ["ip", "netns", "exec", namespace, "/bin/sh", "-c", request]
    return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout


@pytest.mark.both_backends
def test_runtime_masquerade_and_forward_ports(sandbox, root, backend, inner, tmp_path):  # noqa: F811
    """firewall-cmd's runtime --add-masquerade: a host behind the sandbox reaches the peer
    (which has no route back to it) while it is on, and not after --remove-masquerade;
    --add-forward-port: the peer reaches ssh on port 2222 over IPv4 and IPv6, until
    --remove-forward-port, a reload, or its timeout."""
    nm = sandbox  # noqa: F811
    nm.serve()
    link = nm.add_veth()
    nm.add_connection(link, "lan", "connection.zone", "work")
    nm.nmcli("connection", "up", "lan")
    nm.wait_zone(link.name, "work")
    nm.listen(tcp=(22,), udp=())
    nm.wait_reachable(link)
    peer_web(nm, str(tmp_path))
    fw = firewall_cmd_runner(nm, root)

    def reach(port: int) -> list[str]:
        specs = [{"kind": "tcp", "address": a, "port": port} for a in (link.ipv4, link.ipv6)]
        return nm.probe(specs)

    opened, closed = ["accepted"] * 2, ["rejected"] * 2
    assert "from the peer" not in fetched_from(inner, link.peer_ipv4)
    fw("--zone=work", "--add-masquerade")
    assert fw("--zone=work", "--query-masquerade") == "yes"
    wait_for(
        lambda: "from the peer" in fetched_from(inner, link.peer_ipv4),
        10,
        what=f"the inner host to reach the peer\n{kernel_text(nm, backend)}",
    )
    fw("--zone=work", "--remove-masquerade")
    assert "masquerade" not in kernel_text(nm, backend).lower()
    assert "from the peer" not in fetched_from(inner, link.peer_ipv4)

    assert reach(2222) == closed
    fw("--zone=work", "--add-forward-port=port=2222:proto=tcp:toport=22")
    assert reach(2222) == opened
    fw("--zone=work", "--remove-forward-port=port=2222:proto=tcp:toport=22")
    assert reach(2222) == closed
    fw("--zone=work", "--add-forward-port=port=2222:proto=tcp:toport=22")
    fw("--reload")
    assert reach(2222) == closed
    fw("--zone=work", "--add-forward-port=port=2222:proto=tcp:toport=22", "--timeout=3s")
    assert reach(2222) == opened
    wait_for(lambda: reach(2222) == closed, 30, interval=0.5, what="the timeout to end")
    assert fw("--zone=work", "--list-forward-ports") == ""
    # made permanent: in the zone's file, through a reload
    fw("--zone=work", "--add-forward-port=port=2222:proto=tcp:toport=22")
    fw("--zone=work", "--add-masquerade")
    fw("--runtime-to-permanent")
    fw("--reload")
    assert reach(2222) == opened
    written = nm.sh("cat /etc/nm-zones/zones.d/work.yaml").stdout
    assert "masquerade: true" in written and "to-port: 22" in written, written
    # the file's masquerade and forward port removed at runtime: gone until the reload
    fw("--zone=work", "--remove-masquerade")
    fw("--zone=work", "--remove-forward-port=port=2222:proto=tcp:toport=22")
    assert "masquerade" not in kernel_text(nm, backend).lower()
    assert reach(2222) == closed
    fw("--reload")
    assert "masquerade" in kernel_text(nm, backend).lower()
    assert reach(2222) == opened


def firewall_cmd_runner(sandboxed, root):
    """firewall-cmd against whatever owns the name in `sandboxed`; its output, exit 0."""

    def fw(*args: str) -> str:
        result = sandboxed.run(firewall_cmd(root, *args), check=False, env=python_env(root))
        assert result.returncode == 0, f"firewall-cmd {' '.join(args)}: {result}"
        return result.stdout.strip()

    return fw
