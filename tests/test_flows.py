"""Block means block: a switch to a stricter zone ends the open flows the new zone forbids.

Real sessions (tests/harness/session.py) between the peer and the zoned host, IPv4 and IPv6,
across a veth pair; the switch is `nm-zones apply`, which ends flows through conntrack.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import threading
import time

import pytest
from pyroute2 import NetNS, netns

from nm_zones.config.model import Settings
from nm_zones.flows import Packet, accepts, tightens, translation
from nm_zones.paths import Paths
from nm_zones.ruleset.cache import load as load_compiled
from nm_zones.ruleset.layout import flow_mark
from tests.harness.lab import HARNESS, PYTHON, Link, configure_end

SESSION = os.path.join(HARNESS, "session.py")


class Server:
    """session.py serve in a namespace; remembers every line it printed."""

    def __init__(self, lab, namespace: str, tcp: str = "22,8080", udp: str = "631"):
        self.process = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                namespace,
                PYTHON,
                SESSION,
                "serve",
                "--tcp",
                tcp,
                "--udp",
                udp,
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=lab.env(),
        )
        lab.processes.append(self.process)
        assert self.process.stdout.readline().strip() == "ready"
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.strip())

    def got(self, token: str) -> int:
        """How many sessions delivered `token` to the server."""
        return sum(1 for line in list(self.lines) if line.endswith(f" {token}"))

    def got_at_least(self, token: str, count: int) -> int:
        """got(), once `count` deliveries were logged or after a deadline: the server logs a
        line after its echo, which the client may have seen first."""
        deadline = time.monotonic() + 5
        while self.got(token) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.got(token)


class Session:
    """session.py client: one open flow; send() answers within the client's 1 s timeout."""

    def __init__(self, lab, namespace: str, proto: str, address: str, port: int):
        self.process = subprocess.Popen(
            [
                *("ip", "netns", "exec", namespace, PYTHON, SESSION, "client"),
                *("--proto", proto, "--address", address, "--port", str(port)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=lab.env(),
        )
        lab.processes.append(self.process)
        assert self.process.stdout.readline().strip() == "open"

    def send(self, token: str) -> str:
        """`ok` when the token came back within a second, else `dead`."""
        self.process.stdin.write(token + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().split()[0]


def sessions(lab, namespace: str, proto: str, port: int, link, peer: bool = False) -> list:
    """One session per family, to the zoned host's addresses (or the peer's)."""
    addresses = (link.peer_ipv4, link.peer_ipv6) if peer else (link.ipv4, link.ipv6)
    return [Session(lab, namespace, proto, address, port) for address in addresses]


def send_all(open_sessions: list, token: str) -> list[str]:
    return [session.send(token) for session in open_sessions]


def flows_ended(lab, interface: str) -> int:
    status = lab.nm_zones("status", "--json", check=False)
    rows = {row["interface"]: row for row in json.loads(status.stdout)["interfaces"]}
    return rows[interface]["flows_ended"]


def write_settings(lab, text: str) -> None:
    path = os.path.join(lab.config_dir, "nm-zones.yaml")
    with open(path, "w") as stream:
        stream.write(text)
    os.chmod(path, 0o644)


# -- real sessions -------------------------------------------------------------------------


@pytest.mark.parametrize("zone, ended", [("block", 4), ("drop", 4), ("home", 2)])
def test_an_open_session_to_8080_ends_when_trusted_switches_to(lab, zone, ended):
    """The two TCP sessions end; so do the two pings' flows, except in home (ICMP allowed)."""
    link = lab.add_link()
    server = Server(lab, lab.zoned)
    lab.nm_zones("apply", link.name, "trusted")
    web = sessions(lab, lab.peer, "tcp", 8080, link)
    assert send_all(web, "before") == ["ok", "ok"]
    pings = [{"kind": "ping", "address": address} for address in (link.ipv4, link.ipv6)]
    assert lab.probe(pings) == ["accepted", "accepted"]
    out = lab.nm_zones("apply", link.name, zone).stdout
    assert send_all(web, "after") == ["dead", "dead"]  # no echo within a second
    assert send_all(web, "later") == ["dead", "dead"]
    before = server.got_at_least("before", 2)
    assert (before, server.got("after"), server.got("later")) == (2, 0, 0)
    assert f"{link.name}: trusted -> {zone} (command line); ended {ended} open flow(s)" in out
    assert flows_ended(lab, link.name) == ended
    assert f"flows ended: {ended}" in lab.nm_zones("status").stdout


def test_home_to_public_keeps_ssh_and_ends_the_printer_flow(lab):
    link = lab.add_link()
    server = Server(lab, lab.zoned)
    lab.nm_zones("apply", link.name, "home")
    ssh = sessions(lab, lab.peer, "tcp", 22, link)
    ipp = sessions(lab, lab.peer, "udp", 631, link)
    assert send_all(ssh + ipp, "before") == ["ok"] * 4
    out = lab.nm_zones("apply", link.name, "public").stdout
    assert send_all(ssh, "after") == ["ok", "ok"]
    assert send_all(ipp, "after") == ["dead", "dead"]
    assert server.got_at_least("after", 2) == 2  # the ssh sessions' only
    assert not [line for line in server.lines if line.startswith("got udp") and "after" in line]
    assert "ended 2 open flow(s)" in out


def test_connections_the_host_opened_survive_a_switch_to_block(lab):
    link = lab.add_link()
    Server(lab, lab.peer, tcp="8080", udp="")
    Server(lab, lab.zoned, tcp="8080", udp="")
    lab.nm_zones("apply", link.name, "trusted")
    outgoing = sessions(lab, lab.zoned, "tcp", 8080, link, peer=True)
    incoming = sessions(lab, lab.peer, "tcp", 8080, link)
    assert send_all(outgoing + incoming, "before") == ["ok"] * 4
    out = lab.nm_zones("apply", link.name, "block").stdout
    assert send_all(outgoing, "after") == ["ok", "ok"]
    assert send_all(incoming, "after") == ["dead", "dead"]
    assert "ended 2 open flow(s)" in out


def test_end_forbidden_flows_false_keeps_open_sessions_as_firewalld_does(lab):
    write_settings(lab, "end-forbidden-flows: false\n")
    link = lab.add_link()
    server = Server(lab, lab.zoned)
    lab.nm_zones("apply", link.name, "trusted")
    web = sessions(lab, lab.peer, "tcp", 8080, link)
    assert send_all(web, "before") == ["ok", "ok"]
    out = lab.nm_zones("apply", link.name, "block").stdout
    assert "ended" not in out
    assert send_all(web, "after") == ["ok", "ok"]
    assert server.got_at_least("after", 2) == 2
    assert lab.probe([{"kind": "tcp", "address": link.ipv4, "port": 8080}]) == ["rejected"]


def imported_by_apply(lab, link, zone: str) -> set[str]:
    """The modules `nm-zones apply LINK ZONE` imports, run as installed (python -S)."""
    from nm_zones.doors.install import package_paths

    argv = [PYTHON, "-S", "-X", "importtime", "-m", "nm_zones", "apply", link.name, zone]
    result = lab.run(lab.zoned, argv, PYTHONPATH=":".join(package_paths()))
    return {line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if "|" in line}


def test_a_switch_that_does_not_tighten_reads_no_flow(lab):
    """Reading flows costs a dump of the conntrack table and a parse of each entry: only a
    switch that tightens pays it, even with open flows in the table."""
    link = lab.add_link()
    Server(lab, lab.zoned)
    lab.nm_zones("apply", link.name, "public")
    ssh = sessions(lab, lab.peer, "tcp", 22, link)
    assert send_all(ssh, "open") == ["ok", "ok"]  # the table is not empty
    assert "nm_zones.flowcount" not in imported_by_apply(lab, link, "home")  # laxer
    assert "nm_zones.flowcount" not in imported_by_apply(lab, link, "internal")  # the same
    # stricter, and the ssh flows are read, and their routes looked up
    stricter = imported_by_apply(lab, link, "public")
    assert {"nm_zones.conntrack", "nm_zones.routing"} <= stricter
    assert "pyroute2" not in stricter  # never: 200-600 ms of imports, 20 MiB
    assert send_all(ssh, "after") == ["ok", "ok"]
    lab.nm_zones("apply", link.name, "home")
    lab.shell(f"ip address flush dev {link.name}")  # no route through it: nothing to look at
    assert "nm_zones.flowcount" not in imported_by_apply(lab, link, "public")


COUNT_MARKED = """
import sys
from nm_zones.flowcount import count_marked
from nm_zones.flows import _outside
print(*(count_marked(0, _outside(name)) for name in sys.argv[1:]))
"""


def test_a_tightening_switch_no_flow_of_its_interface_entered_by_parses_no_entry(lab):
    """The switch first counts, in one dump the kernel filters and nothing parses
    (flowcount.py), the flows that may have entered through its interface: with none, other
    interfaces' flows in the table cost it no parse (conntrack.py is not imported)."""
    one, two = lab.add_link(), lab.add_link()
    assert flow_mark(one.name) != flow_mark(two.name)
    Server(lab, lab.zoned)
    lab.nm_zones("apply", one.name, "trusted")
    lab.nm_zones("apply", two.name, "trusted")
    second = sessions(lab, lab.peer, "tcp", 8080, two)
    assert send_all(second, "before") == ["ok", "ok"]
    counted = lab.run(lab.zoned, [PYTHON, "-c", COUNT_MARKED, one.name, two.name]).stdout
    assert counted.split() == ["0", "2"]  # two's flows, IPv4 and IPv6; none of one's
    tightening = imported_by_apply(lab, one, "block")  # tightens, and the table is not empty
    assert "nm_zones.flowcount" in tightening and "nm_zones.conntrack" not in tightening
    assert send_all(second, "after") == ["ok", "ok"]


@contextlib.contextmanager
def behind(lab, via):
    """A third namespace behind the zoned host, reached from the peer through it: link vb1
    (10.78.0.1, fd78::1 on the zoned host; .2 and ::2 behind), forwarding on in the zoned
    host, routes both ways. Yields (namespace, the link)."""
    name = f"nmz-b-{secrets.token_hex(3)}"
    netns.create(name)
    link = Link("vb1", "vh1", "10.78.0.1", "fd78::1", "10.78.0.2", "fd78::2")
    try:
        with NetNS(lab.zoned) as ns:
            ns.link(
                "add",
                ifname=link.name,
                kind="veth",
                peer={"ifname": link.peer_name, "net_ns_fd": name},
            )
            configure_end(ns, link.name, link.ipv4, link.ipv6)
        with NetNS(name) as ns:
            ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
            configure_end(ns, link.peer_name, link.peer_ipv4, link.peer_ipv6)
            ns.route("add", dst="0.0.0.0/0", gateway=link.ipv4)
            ns.route("add", dst="::/0", gateway=link.ipv6)
        with NetNS(lab.peer) as ns:
            ns.route("add", dst="10.78.0.0/24", gateway=via.ipv4)
            ns.route("add", dst="fd78::/64", gateway=via.ipv6)
        lab.shell("sysctl -q -w net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1")
        yield name, link
    finally:
        with contextlib.suppress(OSError):
            netns.remove(name)


def test_forwarded_flows_end_unless_address_translation_still_allows_them(lab):
    """Flows routed through the host are judged by the zone's forward rules and its port
    forwarding: a plain forwarded session ends on trusted -> block; one that arrives through
    a DNAT rule someone else wrote (as docker publishes ports) is accepted by block's
    forward rules and goes on; one forwarded by the zone's own forward-ports goes on while
    the new zone forwards that port the same way, and ends when it no longer does."""
    link = lab.add_link()
    with behind(lab, link) as (hidden, inside):
        Server(lab, hidden, tcp="8080", udp="")
        zones = os.path.join(lab.config_dir, "zones.d")
        os.makedirs(zones)
        forwards = (
            "forward-ports:\n"
            f"  - {{port: 80/tcp, to-addr: {inside.peer_ipv4}, to-port: 8080}}\n"
            f"  - {{port: 80/tcp, to-addr: '{inside.peer_ipv6}', to-port: 8080}}\n"
        )
        for name, extra in (("gw", ""), ("gw-strict", "icmp-blocks: [echo-request]\n")):
            with open(os.path.join(zones, f"{name}.yaml"), "w") as stream:
                stream.write(forwards + extra)
        lab.shell(
            f"iptables-legacy -t nat -A PREROUTING -p tcp --dport 8081 -j DNAT"
            f" --to-destination {inside.peer_ipv4}:8080 &&"
            f" ip6tables-legacy -t nat -A PREROUTING -p tcp --dport 8081 -j DNAT"
            f" --to-destination [{inside.peer_ipv6}]:8080"
        )
        lab.nm_zones("apply", link.name, "trusted")
        straight = [
            Session(lab, lab.peer, "tcp", address, 8080)
            for address in (inside.peer_ipv4, inside.peer_ipv6)
        ]
        published = sessions(lab, lab.peer, "tcp", 8081, link)
        assert send_all(straight + published, "before") == ["ok"] * 4
        out = lab.nm_zones("apply", link.name, "block").stdout
        assert send_all(straight, "after") == ["dead", "dead"]
        assert send_all(published, "after") == ["ok", "ok"]
        assert "ended 2 open flow(s)" in out

        lab.nm_zones("apply", link.name, "gw")
        forwarded = sessions(lab, lab.peer, "tcp", 80, link)
        assert send_all(forwarded, "before") == ["ok", "ok"]
        out = lab.nm_zones("apply", link.name, "gw-strict").stdout  # tightens: pings
        assert send_all(forwarded, "kept") == ["ok", "ok"]
        assert "ended" not in out
        out = lab.nm_zones("apply", link.name, "public").stdout
        assert send_all(forwarded, "after") == ["dead", "dead"]
        assert send_all(published, "after") == ["ok", "ok"]  # public forwards DNAT'ed too
        assert "ended 2 open flow(s)" in out


# -- the kernel hands a switch only its interface's flows (ct mark bits) -------------------

# Run in the zoned host: every flow's original (source, destination, port) with its ct mark,
# and for each interface named, the flows flows.candidates() reads for it.
READ_MARKS = """
import json, sys
from pyroute2.netlink.nfnetlink.nfctsocket import NFCTSocket
from nm_zones.conntrack import Conntrack
from nm_zones.flows import AF_UNSPEC, candidates
def key(source, destination, port):
    return [source, destination, port]
table = NFCTSocket(nfgen_family=AF_UNSPEC)  # pyroute2: an independent reading of the table
marks = []
for message in table.dump():
    orig = dict(message.get_attr("CTA_TUPLE_ORIG").get_attr("CTA_TUPLE_IP")["attrs"])
    ports = dict(message.get_attr("CTA_TUPLE_ORIG").get_attr("CTA_TUPLE_PROTO")["attrs"])
    source = orig.get("CTA_IP_V4_SRC") or orig.get("CTA_IP_V6_SRC")
    destination = orig.get("CTA_IP_V4_DST") or orig.get("CTA_IP_V6_DST")
    port = ports.get("CTA_PROTO_DST_PORT")
    marks.append([*key(source, destination, port), message.get_attr("CTA_MARK") or 0])
table.close()
conntrack = Conntrack()
read = {
    name: [
        key(flow.source(), flow.destination(), flow.orig.get("CTA_PROTO_DST_PORT"))
        for flow in candidates(conntrack, name)
    ]
    for name in sys.argv[1:]
}
print(json.dumps({"marks": marks, "read": read}))
"""


def read_marks(lab, *interfaces: str) -> dict:
    """{"marks": [[source, destination, port, mark], ...], "read": {interface: [[source,
    destination, port], ...]}}: the zoned host's conntrack table as the kernel filters it."""
    return json.loads(lab.run(lab.zoned, [PYTHON, "-c", READ_MARKS, *interfaces]).stdout)


def marks_to(table: dict, link, port: int) -> list[int]:
    """The ct marks of the flows from the peer to `link`'s two addresses on `port`."""
    addresses = (link.ipv4, link.ipv6)
    return sorted(
        mark for _, to, dport, mark in table["marks"] if to in addresses and dport == port
    )


OTHERS_BITS = 0x1234  # a mark someone else sets on every flow (a VPN client, say)


@pytest.mark.both_backends
def test_a_switch_reads_only_its_interface_flows_and_keeps_others_mark_bits(lab):
    """Each interface's chains give a new flow the interface's mark bits (and leave the bits
    another program set); a switch asks the kernel for its interface's flows only, ends the
    forbidden ones, and the other interface's flows are neither read nor touched."""
    one, two = lab.add_link(), lab.add_link()
    assert flow_mark(one.name) != flow_mark(two.name)  # vz1, vz2: the test needs them apart
    Server(lab, lab.zoned)
    for tool in ("iptables-legacy", "ip6tables-legacy"):
        lab.shell(f"{tool} -t mangle -A PREROUTING -j CONNMARK --set-xmark {OTHERS_BITS:#x}/0xffff")
    lab.nm_zones("apply", one.name, "trusted")
    lab.nm_zones("apply", two.name, "trusted")
    first, second = (
        sessions(lab, lab.peer, "tcp", 8080, one),
        sessions(lab, lab.peer, "tcp", 8080, two),
    )
    assert send_all(first + second, "before") == ["ok"] * 4
    table = read_marks(lab, one.name)
    assert marks_to(table, one, 8080) == [flow_mark(one.name) | OTHERS_BITS] * 2
    assert marks_to(table, two, 8080) == [flow_mark(two.name) | OTHERS_BITS] * 2
    read = {tuple(flow) for flow in table["read"][one.name]}
    assert {(one.peer_ipv4, one.ipv4, 8080), (one.peer_ipv6, one.ipv6, 8080)} <= read
    assert not [flow for flow in read if flow[1] in (two.ipv4, two.ipv6)]
    out = lab.nm_zones("apply", one.name, "block").stdout
    assert "ended 2 open flow(s)" in out
    assert send_all(first, "after") == ["dead", "dead"]
    assert send_all(second, "after") == ["ok", "ok"]
    assert marks_to(read_marks(lab), two, 8080) == [flow_mark(two.name) | OTHERS_BITS] * 2
    lab.nm_zones("status")  # exit 0: the kernel holds the rules as planned, mark rules too


@pytest.mark.both_backends
def test_a_flow_that_came_in_while_the_interface_had_no_zone_still_ends(lab):
    """The catch-all's chains leave a flow unmarked: binding the interface to a stricter zone
    reads those too, and ends what the zone forbids."""
    bound, loose = lab.add_link(), lab.add_link()
    Server(lab, lab.zoned)
    lab.nm_zones("apply", bound.name, "public")  # the catch-all (public) is in the kernel
    ssh = sessions(lab, lab.peer, "tcp", 22, loose)
    assert send_all(ssh, "before") == ["ok", "ok"]
    table = read_marks(lab, loose.name, bound.name)
    assert marks_to(table, loose, 22) == [0, 0]
    for name in (loose.name, bound.name):  # unmarked: read whichever interface switches
        assert [loose.peer_ipv4, loose.ipv4, 22] in table["read"][name]
    out = lab.nm_zones("apply", loose.name, "block").stdout
    assert "ended 2 open flow(s)" in out
    assert send_all(ssh, "after") == ["dead", "dead"]


# -- which switches tighten (the compiled plans of the shipped zones) ----------------------


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flows")
    return load_compiled(Paths(config=str(tmp / "etc"), state=str(tmp / "state")), False)


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("trusted", "block", True),
        ("trusted", "home", True),
        ("home", "public", True),
        ("work", "public", True),
        ("public", "dmz", True),
        ("public", "block", True),
        ("public", "external", True),
        ("public", "home", False),
        ("public", "work", False),
        ("home", "internal", False),
        ("block", "drop", False),
        ("drop", "block", False),
        ("block", "public", False),
        ("external", "dmz", False),
        ("dmz", "trusted", False),
        ("home", "home", False),
    ],
)
def test_which_switches_tighten(shipped, old, new, expected):
    assert tightens(shipped.zone(old), shipped.zone(new)) is expected


def test_a_zone_that_adds_an_icmp_block_or_drops_a_port_forward_tightens(tmp_path):
    zones = tmp_path / "etc" / "zones.d"
    zones.mkdir(parents=True)
    (zones / "a.yaml").write_text(
        "services: [ssh]\nforward-ports: [{port: 80/tcp, to-port: 8080}]\n"
    )
    (zones / "b.yaml").write_text("services: [ssh]\n")
    (zones / "c.yaml").write_text(
        "services: [ssh]\nicmp-blocks: [echo-request]\n"
        "forward-ports: [{port: 80/tcp, to-port: 8080}]\n"
    )
    (zones / "d.yaml").write_text(
        "services: [ssh, https]\nforward-ports: [{port: 80/tcp, to-port: 8080}]\n"
    )
    compiled = load_compiled(Paths(config=str(tmp_path / "etc"), state=str(tmp_path / "s")), False)
    zone = compiled.zone
    assert tightens(zone("a"), zone("b"))  # the forward is gone
    assert not tightens(zone("b"), zone("a"))
    assert tightens(zone("a"), zone("c"))  # pings refused now
    assert not tightens(zone("c"), zone("a"))
    assert not tightens(zone("a"), zone("d"))  # https added


def test_the_first_packet_meets_port_forwarding_and_the_chain(shipped):
    """Pure: how a flow's first packet is read against a zone's compiled rules."""

    def tcp(port: int, family: str = "ipv4", daddr: str = "10.0.0.1") -> Packet:
        import ipaddress

        address = ipaddress.ip_address(daddr)
        return Packet(family, 6, ipaddress.ip_address("10.0.0.2"), address, 40000, port)

    dnat = ("DNAT", (("to-destination", "{}"),), None, None, "tcp", (("tcp", (("dport", "80"),)),))
    for written, expected in (
        ("10.1.1.1", ("10.1.1.1", None)),
        ("10.1.1.1:8080", ("10.1.1.1", 8080)),
        ("[fd00::1]:8080", ("fd00::1", 8080)),
        ("fd00::1", ("fd00::1", None)),
    ):
        spec = (dnat[0], (("to-destination", written),), *dnat[2:])
        assert translation((spec,), tcp(80)) == expected
        assert translation((spec,), tcp(81)) is None
    redirect = ("REDIRECT", (("to-ports", "8080"),), None, None, "tcp", dnat[5])
    assert translation((redirect,), tcp(80)) == (None, 8080)
    home = shipped.zone("home").chains_by_table[("ipv4", "filter")][0]
    chain = dict(home)["in"]
    assert accepts(chain, tcp(22)) and not accepts(chain, tcp(8080))
    mdns = tcp(5353, daddr="224.0.0.251")
    mdns.proto, mdns.sport = 17, 5353
    assert accepts(chain, mdns)
    mdns.daddr = tcp(1).daddr  # mdns is opened for its multicast group only
    assert not accepts(chain, mdns)
    unknown = ("ACCEPT", (), None, None, "tcp", (("recent", (("rcheck", ""),)),))
    assert not accepts((unknown,), tcp(22))  # read the strict way


# -- the setting ---------------------------------------------------------------------------


def check(tmp_path, text: str) -> subprocess.CompletedProcess:
    config = tmp_path / "etc"
    config.mkdir(exist_ok=True)
    (config / "nm-zones.yaml").write_text(text)
    env = {**os.environ, "NM_ZONES_CONFIG_DIR": str(config)}
    return subprocess.run(
        [PYTHON, "-m", "nm_zones", "check"], capture_output=True, text=True, env=env
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("end-forbidden-flows: yes please\n", "2: end-forbidden-flows: must be true or false"),
        ("end-forbidden-flow: false\n", "2: end-forbidden-flow: unknown key (did you mean"),
        ("[end-forbidden-flows]\n", "2: a settings file must be a mapping of keys"),
        ("end-forbidden-flows: !!python/object:os.system x\n", "2: end-forbidden-flows: YAML tag"),
    ],
)
def test_a_bad_settings_file_is_named_with_its_line_and_key(tmp_path, text, message):
    result = check(tmp_path, "# nm-zones settings\n" + text)
    assert result.returncode == 2
    assert result.stderr.startswith(f"{tmp_path}/etc/nm-zones.yaml:{message}")
    assert len(result.stderr.splitlines()) == 1


SHIPPED_SETTINGS = Settings().plain()  # every key at its default


def test_a_huge_settings_file_is_refused_and_the_shipped_settings_hold(tmp_path):
    result = check(tmp_path, "end-forbidden-flows: false\n" + "#" * (2 << 20) + "\n")
    assert result.returncode == 2
    assert "nm-zones.yaml:1: file is larger than 1 MiB" in result.stderr
    paths = Paths(config=str(tmp_path / "etc"), state=str(tmp_path / "state"))
    assert load_compiled(paths, False).settings == SHIPPED_SETTINGS


def test_the_setting_travels_in_the_compiled_config(tmp_path):
    paths = Paths(config=str(tmp_path / "etc"), state=str(tmp_path / "state"))
    assert load_compiled(paths, False).settings == SHIPPED_SETTINGS
    assert check(tmp_path, "end-forbidden-flows: false\n").returncode == 0
    assert load_compiled(paths, False).settings["end-forbidden-flows"] is False
    assert check(tmp_path, "").returncode == 0  # empty: every default
    assert load_compiled(paths, False).settings == SHIPPED_SETTINGS
    assert check(tmp_path, "end-forbidden-flows: 1\n").returncode == 2  # broken: the shipped
    assert load_compiled(paths, False).settings == SHIPPED_SETTINGS
    if os.geteuid() == 0:  # root reads only admin files others cannot change
        assert check(tmp_path, "end-forbidden-flows: false\n").returncode == 0
        os.chmod(tmp_path / "etc" / "nm-zones.yaml", 0o666)
        assert load_compiled(paths, False).settings == SHIPPED_SETTINGS


def test_the_change_record_says_how_many_flows_were_ended():
    """The line a command prints, and (with its time) the one sent to syslog."""
    from nm_zones.log import Change

    change = Change("eth0", "trusted", "block", "command line", "Cafe", 41.0, flows_ended=3)
    assert str(change) == (
        "eth0: trusted -> block (command line) connection 'Cafe';"
        " ended 3 open flow(s) the zone forbids"
    )
    assert "ended" not in str(Change("eth0", "block", "trusted", "command line"))


class _Routing:
    """Pure logic: a route lookup that fails with a given errno (0: routed out of ifindex 7)."""

    def __init__(self, errno_value: int):
        self.errno_value = errno_value

    def addresses(self):
        return [(7, "192.0.2.1", "192.0.2.255")]

    def route_interface(self, source, via):
        if self.errno_value:
            raise OSError(self.errno_value, os.strerror(self.errno_value))
        return 7


class _Marked:
    """Pure logic: a flow whose ct mark is `mark` (entry.mark, what marked_here reads)."""

    def __init__(self, mark: int):
        self.entry = type("Entry", (), {"mark": mark})()


@pytest.mark.pure
@pytest.mark.parametrize(
    "errno_value, entered, reported",
    [(0, True, False), (101, False, False), (113, False, False), (12, None, True), (1, None, True)],
)
def test_a_route_lookup_that_fails_for_another_reason_is_decided_by_the_mark(
    errno_value, entered, reported
):
    """No route back (ENETUNREACH, EHOSTUNREACH, ...) means the flow came in elsewhere; any
    other failure (ENOMEM, EPERM) tells nothing, and the switch is told why: then a flow the
    interface's own chains marked counts as entered here (the zone's refusal still ends
    it), and an unmarked one (the catch-all's, a container bridge's) is kept."""
    import ipaddress

    from nm_zones.flows import Host

    code = flow_mark("eth0")
    host = Host(_Routing(errno_value), 7, code)
    source = ipaddress.ip_address("198.51.100.9")
    assert host.entered_here(source, ipaddress.ip_address("192.0.2.1")) is entered
    assert bool(host.problems) is reported
    if reported:
        assert "198.51.100.9" in host.problems[0] and os.strerror(errno_value) in host.problems[0]
    destination = ipaddress.ip_address("192.0.2.1")
    marked, unmarked = _Marked(code | 0x2A), _Marked(0x2A)  # the low 24 bits are not ours
    if entered is None:  # the mark decides
        assert host.came_in_here(marked, source, destination)
        assert not host.came_in_here(unmarked, source, destination)
    else:  # the route decides, whatever the mark
        assert host.came_in_here(marked, source, destination) is entered
        assert host.came_in_here(unmarked, source, destination) is entered
    assert not Host(_Routing(0), 7, 0).marked_here(_Marked(0))  # no code: never "marked"
