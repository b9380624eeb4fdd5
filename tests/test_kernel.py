"""Zones in the kernel, proven with real packets across veth pairs between namespaces."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
import sys
import threading

import pytest

from nm_zones.config.load import load
from nm_zones.ifname import chain_name
from nm_zones.paths import Paths
from tests.harness.lab import PYTHON, HostNetfilterRefused, base_env

CONFIG = load(Paths(config="/nonexistent")).config
ZONES = sorted(CONFIG.zones)
PROBES = (("tcp", 22), ("tcp", 8080), ("udp", 631), ("ping", 0))


def expected(zone_name: str, family: str, address: str, kind: str, port: int) -> str:
    """What the zone definition promises for one probe, read from the config model."""
    zone = CONFIG.zones[zone_name]
    if zone.target == "accept":
        return "accepted"
    if zone.target == "drop":
        return "dropped"
    if zone.target == "reject":
        return "rejected"
    if kind == "ping":
        return "rejected" if "echo-request" in zone.icmp_blocks else "accepted"
    opened = list(zone.ports)
    for name in zone.services:
        service = CONFIG.services[name]
        if not service.applies_to(family):
            continue
        destination = service.destination_for(family)
        if destination and ipaddress.ip_address(address) not in ipaddress.ip_network(destination):
            continue
        opened += service.ports
    hit = any(p.protocol == kind and p.first <= port <= p.last for p in opened)
    return "accepted" if hit else "rejected"


def probes_for(link):
    specs, meta = [], []
    for family, address in (("ipv4", link.ipv4), ("ipv6", link.ipv6)):
        for kind, port in PROBES:
            specs.append({"kind": kind, "address": address, "port": port})
            meta.append((family, address, kind, port))
    return specs, meta


def filter_rules(lab, family: str) -> list[str]:
    """Rules and chain headers of all tables, counters stripped."""
    lines = []
    for line in lab.save(family).splitlines():
        if line.startswith("#"):
            continue
        lines.append(re.sub(r" \[\d+:\d+\]$", "", line))
    return lines


# -- conformance -----------------------------------------------------------------------


@pytest.mark.both_backends
@pytest.mark.parametrize("zone", ZONES)
def test_zone_conformance(lab, zone):
    link = lab.add_link()
    lab.listen()
    lab.nm_zones("apply", link.name, zone)
    specs, meta = probes_for(link)
    got = lab.probe(specs)
    want = [expected(zone, *m) for m in meta]
    assert got == want, list(zip(meta, got, want, strict=True))


@pytest.mark.both_backends
def test_catchall_filters_unclaimed_interfaces_with_default_zone(lab):
    link = lab.add_link()
    lab.listen()
    lab.nm_zones("reload")  # hooks and catch-all, nothing bound
    specs, meta = probes_for(link)
    assert lab.probe(specs) == [expected("public", *m) for m in meta]


# -- nothing else changes --------------------------------------------------------------


@pytest.mark.both_backends
def test_established_connection_survives_switch_to_stricter_zone(lab):
    """With `end-forbidden-flows: false` (firewalld's behaviour; test_flows.py has the
    default, which ends such flows), a switch changes only what happens to new ones."""
    with open(os.path.join(lab.config_dir, "nm-zones.yaml"), "a") as stream:
        stream.write("end-forbidden-flows: false\n")
    link = lab.add_link()
    lab.listen()
    lab.nm_zones("apply", link.name, "trusted")
    code = f"""
import socket, sys, time
conns = [socket.create_connection((a, 8080), timeout=3) for a in ({link.ipv4!r}, {link.ipv6!r})]
for c in conns:
    c.sendall(b"before"); assert c.recv(64) == b"before"
print("open", flush=True)
sys.stdin.readline()
for c in conns:
    c.sendall(b"after"); print(c.recv(64).decode(), flush=True)
"""
    peer = subprocess.Popen(
        ["ip", "netns", "exec", lab.peer, sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=lab.env(),
    )
    try:
        assert peer.stdout.readline().strip() == "open"
        lab.nm_zones("apply", link.name, "drop")
        new = lab.probe([{"kind": "tcp", "address": link.ipv4, "port": 8080}])
        assert new == ["dropped"]  # new connections are refused...
        out, _ = peer.communicate("go\n", timeout=20)
        assert out.split() == ["after", "after"]  # ...the established ones go on
    finally:
        peer.kill()


@pytest.mark.both_backends
def test_switching_one_interface_loses_nothing_on_another(lab):
    a, b = lab.add_link(), lab.add_link()
    lab.listen()
    lab.nm_zones("apply", a.name, "public")
    lab.nm_zones("apply", b.name, "home")
    results: list[str] = []
    stop = threading.Event()

    def traffic():
        specs = [
            {"kind": "tcp", "address": b.ipv4, "port": 22},
            {"kind": "tcp", "address": b.ipv6, "port": 22},
            {"kind": "udp", "address": b.ipv4, "port": 631},
            {"kind": "ping", "address": b.ipv6},
        ] * 5
        while not stop.is_set():
            results.extend(lab.probe(specs))

    thread = threading.Thread(target=traffic)
    thread.start()
    try:
        for i in range(50):
            lab.nm_zones("apply", a.name, ("drop", "trusted", "block", "work")[i % 4])
    finally:
        stop.set()
        thread.join()
    assert len(results) >= 20
    assert set(results) == {"accepted"}, results.count("accepted")


FOREIGN_SETUP = """
set -e
iptables-legacy -N DOCKER-USER
iptables-legacy -A DOCKER-USER -j RETURN
iptables-legacy -I FORWARD -j DOCKER-USER
iptables-legacy -A INPUT -s 192.0.2.0/24 -j DROP
iptables-legacy -N admin-log
iptables-legacy -A admin-log -p tcp --dport 9999 -j LOG --log-prefix "admin: "
iptables-legacy -A INPUT -j admin-log
iptables-legacy -P FORWARD DROP
iptables-legacy -t nat -N DOCKER
iptables-legacy -t nat -A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
ip6tables-legacy -A INPUT -s 2001:db8::/32 -j DROP
ip6tables-legacy -N admin6
ip6tables-legacy -A admin6 -p udp --dport 9999 -j ACCEPT
"""


def _foreign(lines: list[str], before: list[str] | None = None) -> dict[str, list[str]]:
    """Table -> its lines that are not nm-zones'. With `before`, tables that did not exist
    then (python-iptables may instantiate an empty table) must be empty and accepting."""
    tables: dict[str, list[str]] = {}
    current = ""
    for line in lines:
        if line.startswith("*"):
            current = line[1:]
            tables[current] = []
        elif "nmz" not in line and line != "COMMIT":
            tables[current].append(line)
    if before is not None:
        known = _foreign(before)
        for table in set(tables) - set(known):
            assert all(re.fullmatch(r":[A-Z]+ ACCEPT", line) for line in tables[table]), table
            del tables[table]
    return tables


def test_foreign_rules_survive_fifty_switches(lab):
    a, b = lab.add_link(), lab.add_link()
    lab.shell(FOREIGN_SETUP)
    before = {f: filter_rules(lab, f) for f in ("ipv4", "ipv6")}
    lab.nm_zones("apply", b.name, "home")
    lab.listen()
    lab.probe([{"kind": "tcp", "address": b.ipv4, "port": 22}] * 3)
    packets_before = _counter(
        lab.shell("iptables-legacy-save -c").stdout, f"-A nmz-input -i {b.name} "
    )
    assert packets_before > 0
    for i in range(50):
        lab.nm_zones("apply", a.name, ZONES[i % len(ZONES)])
    for family in ("ipv4", "ipv6"):
        assert _foreign(filter_rules(lab, family), before[family]) == _foreign(before[family])
    packets_after = _counter(
        lab.shell("iptables-legacy-save -c").stdout, f"-A nmz-input -i {b.name} "
    )
    assert packets_after >= packets_before  # B's counters were never reset
    assert lab.shell("iptables-legacy -S FORWARD | head -1").stdout.strip() == "-P FORWARD DROP"


ODD_NAMES = ("odd\\377x", "nmz-\\377x", "nmz-if-\\377-in", "nmz-s-\\377")  # printf's spelling
ODD_CHAINS = (  # another program's chains whose names are not UTF-8 (x_tables takes any bytes)
    "for t in iptables-legacy ip6tables-legacy; do for n in "
    + " ".join(f"'{name}'" for name in ODD_NAMES)
    + "; do $t -N \"$(printf \"$n\")\" && $t -I INPUT -j \"$(printf \"$n\")\"; done; done"
)


def test_another_programs_chain_named_in_bytes_that_are_not_utf8_stops_nothing(lab):
    """Chains of another program's whose names are not UTF-8, jumped to from INPUT, some
    named like nm-zones' own: the first run after them sees nm-zones' view changed (one
    line, exit 1) and rebuilds; then switches, the catch-all's reload, status, a repair
    after a flush and disable go on as without them (python-iptables' own decoding of
    chain names would raise), and they stay: they are not nm-zones'."""
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    lab.shell(ODD_CHAINS)
    lab.listen()
    result = lab.nm_zones("apply", link.name, "public", check=False)
    lines = result.stderr.strip().splitlines()  # one a table: both families' filter
    assert result.returncode == 1 and len(lines) == 2, result
    assert all("changed by another program" in line for line in lines), lines
    for zone in ("home", "public"):
        result = lab.nm_zones("apply", link.name, zone, check=False)
        assert result.returncode == 0 and result.stderr == "", result
    assert lab.nm_zones("reload", check=False).returncode == 0
    status = lab.nm_zones("status", check=False)
    assert status.returncode == 0, status.stdout + status.stderr
    lab.shell(f"iptables-legacy -F nmz-if-{link.name}-in")  # a repair rebuilds the table
    result = lab.nm_zones("apply", link.name, "public", check=False)
    assert result.returncode == 1 and "changed by another program" in result.stderr, result
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr  # IPv4's table only
    assert lab.nm_zones("status", check=False).returncode == 0
    probes = [{"kind": "tcp", "address": a, "port": 8080} for a in (link.ipv4, link.ipv6)]
    assert lab.probe(probes) == ["rejected", "rejected"]  # public's: 8080 closed
    assert lab.nm_zones("disable", check=False).returncode == 0
    for tool in ("iptables-legacy-save", "ip6tables-legacy-save"):
        count = f"{tool} | LC_ALL=C grep %s | wc -l"
        odd = lab.shell(count % "\"$(printf '\\377')\"").stdout.split()
        assert odd == [str(2 * len(ODD_NAMES))], odd  # each chain and INPUT's jump to it
        ours = lab.shell(count % "nmz- | LC_ALL=C grep -v \"$(printf '\\377')\"").stdout
        assert ours.split() == ["0"], ours


def _counter(save_with_counters: str, prefix: str) -> int:
    for line in save_with_counters.splitlines():
        match = re.match(r"\[(\d+):\d+\] (.*)", line)
        if match and match.group(2).startswith(prefix):
            return int(match.group(1))
    raise AssertionError(f"no rule starting with {prefix!r}")


def test_remove_leaves_no_trace_of_the_interface(lab):
    link = lab.add_link("eth-x.1")
    lab.shell(FOREIGN_SETUP)
    before = {f: filter_rules(lab, f) for f in ("ipv4", "ipv6")}
    lab.nm_zones("apply", link.name, "external")
    lab.nm_zones("apply", link.name, "home")
    lab.nm_zones("remove", link.name)
    for family in ("ipv4", "ipv6"):
        after = filter_rules(lab, family)
        assert not [line for line in after if link.name in line]
        assert _foreign(after, before[family]) == _foreign(before[family])
        ours = [line for line in after if "nmz" in line]
        for line in ours:  # only hooks and the catch-all may remain
            assert re.match(
                r"(:nmz-(input|forward|forward-out|pre|post|raw|default-in|default-fwd) |"
                r"-A (INPUT|FORWARD|PREROUTING|POSTROUTING) -j nmz-|"
                r"-A nmz-(input|forward) (-i \S+ -j RETURN|-[jg] nmz-default-)|"
                r"-A nmz-default-)",
                line,
            ), line


def test_extra_rules_leading_to_an_interface_chain_do_not_block_a_switch(lab):
    """nm-zones deletes an interface's dispatch rules by their exact entries; a rule that
    someone added in a dispatch chain with other matches (or a duplicate) is found by
    reading the chain, so the switch and the removal still leave nothing behind."""
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    for tool in ("iptables-legacy", "ip6tables-legacy"):
        lab.shell(
            f"{tool} -A nmz-input -i {link.name} -p tcp -j nmz-if-{link.name}-in;"
            f" {tool} -I nmz-forward -i {link.name} -j nmz-if-{link.name}-fwd"
        )
    switched = lab.nm_zones("apply", link.name, "public", check=False)
    assert switched.returncode == 1 and "changed by another program" in switched.stderr
    for family in ("ipv4", "ipv6"):
        leads = re.compile(rf" -[jg] nmz-if-{re.escape(link.name)}-")
        leading = [line for line in filter_rules(lab, family) if leads.search(line)]
        assert sorted(leading) == [
            f"-A nmz-forward -i {link.name} -g nmz-if-{link.name}-fwd",
            f"-A nmz-input -i {link.name} -j nmz-if-{link.name}-in",
        ], family
    assert "kernel: in place" in lab.nm_zones("status").stdout
    lab.nm_zones("remove", link.name)
    for family in ("ipv4", "ipv6"):
        assert not [line for line in filter_rules(lab, family) if link.name in line]


def test_remove_command_output_and_status(lab):
    link = lab.add_link()
    out = lab.nm_zones("apply", link.name, "work").stdout
    assert f"{link.name}: - -> work (command line)" in out
    assert lab.nm_zones("apply", link.name, "work").stdout == ""  # quiet when nothing changed
    status = lab.nm_zones("status").stdout
    assert re.search(rf"{link.name}\s+work\s+since .* kernel: in place", status)
    lab.shell(f"iptables-legacy -F nmz-if-{link.name}-in")  # someone tampers with our chain
    result = lab.nm_zones("status", check=False)
    assert result.returncode == 1 and "DIFFERS" in result.stdout
    removed = lab.nm_zones("remove", link.name, check=False)  # says what it found, exit 1
    assert removed.returncode == 1 and "changed by another program" in removed.stderr
    assert removed.stdout.strip() == f"{link.name}: work -> - (removed)"


# -- hostile interface names -----------------------------------------------------------


@pytest.mark.parametrize("name", ["a+b", "x+", "w!f", "ab'c", 'q"t', "back\\s"])
def test_names_iptables_cannot_match_exactly_are_refused(lab, name):
    lab.add_link(name)
    result = lab.nm_zones("apply", name, "block", check=False)
    assert result.returncode == 2
    assert "iptables cannot match exactly" in result.stderr
    assert "nmz-if" not in lab.save("ipv4")


@pytest.mark.both_backends
@pytest.mark.parametrize("name", ["we@ird#n&me", "fifteen-chars-x", "a.b", "-lead"[1:]])
def test_odd_but_exact_names_filter_only_themselves(lab, name):
    odd = lab.add_link(name)
    other = lab.add_link()
    lab.listen()
    lab.nm_zones("apply", odd.name, "block")
    lab.nm_zones("apply", other.name, "trusted")
    got = lab.probe(
        [
            {"kind": "tcp", "address": odd.ipv4, "port": 8080},
            {"kind": "tcp", "address": odd.ipv6, "port": 8080},
            {"kind": "tcp", "address": other.ipv4, "port": 8080},
        ]
    )
    assert got == ["rejected", "rejected", "accepted"]
    chains = [line for line in lab.save("ipv4", "filter").splitlines() if line.startswith(":nmz")]
    assert all(len(line.split()[0]) - 1 <= 28 for line in chains)
    assert lab.backend == "iptables" or f'"{odd.name}" :' in lab.nft_table()
    lab.nm_zones("remove", odd.name)
    assert "nmz-if-" + odd.name not in lab.held_text()
    assert f'"{odd.name}"' not in lab.held_text()


@pytest.mark.both_backends
def test_ipv6_interface_match_is_exact(lab):
    """python-iptables writes IPv6 interface masks that compare one bit per character:
    `pq1` and `rs3` agree in every lowest bit, so its rules for one matched the other."""
    bound, bystander = lab.add_link("pq1"), lab.add_link("rs3")
    lab.listen()
    lab.nm_zones("apply", bystander.name, "trusted")
    lab.nm_zones("apply", bound.name, "block")
    got = lab.probe(
        [
            {"kind": "tcp", "address": bystander.ipv6, "port": 8080},
            {"kind": "tcp", "address": bound.ipv6, "port": 8080},
        ]
    )
    assert got == ["accepted", "rejected"]


# -- the rest of the zone language -----------------------------------------------------


@pytest.mark.both_backends
def test_forward_ports_masquerade_and_logging(lab):
    os.makedirs(os.path.join(lab.config_dir, "zones.d"))
    with open(os.path.join(lab.config_dir, "zones.d", "gateway.yaml"), "w") as stream:
        stream.write(
            "target: drop\nforward-ports:\n  - {port: 80/tcp, to-port: 8080}\n"
            "masquerade: true\nlog-denied: true\nservices: [ftp]\n"
        )
    link = lab.add_link()
    lab.listen()
    lab.shell("echo 0 > /proc/sys/net/ipv4/ip_forward")
    lab.nm_zones("apply", link.name, "gateway")
    got = lab.probe(
        [
            {"kind": "tcp", "address": link.ipv4, "port": 80},
            {"kind": "tcp", "address": link.ipv6, "port": 80},
            {"kind": "tcp", "address": link.ipv4, "port": 8080},
            {"kind": "ping", "address": link.ipv4},
        ]
    )
    assert got == ["accepted", "accepted", "dropped", "dropped"]
    assert lab.shell("cat /proc/sys/net/ipv4/ip_forward").stdout.strip() == "1"
    if lab.backend == "nftables":
        held = lab.nft_table()
        assert f'log prefix "nmz gateway {link.name}: "' in held
        assert 'ct helper set "nmz-ftp"' in held and 'type "ftp" protocol tcp' in held
        assert "meta nfproto ipv4 masquerade" in held
        assert "nmz" not in lab.save("ipv4") + lab.save("ipv6")
        return
    saved = lab.save("ipv4")
    assert f'--log-prefix "nmz gateway {link.name}: "' in saved
    assert "-j CT --helper ftp" in saved
    assert "-j MASQUERADE" in saved


def test_suite_refuses_to_change_the_runner_namespace(lab):
    with pytest.raises(HostNetfilterRefused):
        lab.run(None, ["true"])
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from nm_zones.backends.iptables.kernel import Netfilter; Netfilter()",
        ],
        capture_output=True,
        text=True,
        env=base_env(),
    )
    assert result.returncode != 0
    assert "refusing to change netfilter in this network namespace" in result.stderr


def test_commands_that_change_the_kernel_need_root(lab):
    link = lab.add_link()
    result = lab.run(
        lab.zoned,
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-m",
            "nm_zones",
            "apply",
            link.name,
            "home",
        ],
        check=False,
    )
    assert result.returncode == 1
    assert "run it as root" in result.stderr


# -- importing python-iptables ---------------------------------------------------------

IMPORT_CHECK = """
import sys
{before}
from nm_zones.backends.iptables.iptc_env import import_iptc

iptc = import_iptc()
left = {{"re", "subprocess", "shlex", "socket", "enum", "distutils"}} & set(sys.modules)
rule = iptc.Rule()
rule.protocol = "tcp"
match = rule.create_match("tcp")
match.dport = "22"
assert match.get_all_parameters() == {{"dport": ["22"]}}  # parsing back uses re
import re
assert type(re).__name__ == "module" and hasattr(re, "__file__")
print(sorted(left), iptc.ip4tc.re is re)
"""


@pytest.mark.parametrize(
    "before, expected",
    [("", "[] False"), ("import re, subprocess", "['enum', 're', 'subprocess'] True")],
)
def test_iptc_import_stand_ins_are_gone_afterwards(before, expected):
    """While iptc imports, re/shlex/subprocess/socket are stand-ins; afterwards nothing of
    them is left in sys.modules, modules imported before are the ones iptc uses, and the
    lazy re still parses (as installed: python -S, no .pth files)."""
    from nm_zones.doors.install import package_paths

    result = subprocess.run(
        [sys.executable, "-S", "-c", IMPORT_CHECK.format(before=before)],
        env={"PYTHONPATH": ":".join(package_paths()), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


HELD_READER = """
import json, subprocess, sys
from nm_zones.backends.iptables import held

walks, walk = [], held._walk
held._walk = lambda *args: walks.append(args[0]) or walk(*args)  # the reader's walks
reader = held.HeldTables()
FAMILIES = ("ipv4", "ipv6")
views = [reader.read_view(family, "filter") for family in FAMILIES]
blobs = [held.table_blob(family, "filter")[1] for family in FAMILIES]
for line in sys.stdin:  # a shell command that changes the tables, then both read again
    subprocess.run(["sh", "-c", line], check=True)
    views = [reader.read_view(family, "filter") for family in FAMILIES]
    walked = len(walks)
    fresh = [held.view_of(family, *held.table_blob(family, "filter")) for family in FAMILIES]
    del walks[walked:]
    before, blobs = blobs, [held.table_blob(family, "filter")[1] for family in FAMILIES]
    print(json.dumps({"walks": walked, "views": views, "fresh": fresh,
                      "bytes changed": before != blobs}), flush=True)
"""

def _entries_blob(family: str, extras: list[int]) -> bytes:
    """A table of entries as the kernel hands them out: each with its ip part, nfcache,
    offsets, comefrom and counters, then a target that is neither a verdict nor a chain's
    head (a LOG target: its first name byte is not 0, its name not ERROR)."""
    from nm_zones.backends.iptables.held import LAYOUT, TARGET_SIZE

    ip_size, offsets_at, entry_size = LAYOUT[family]
    blob = b""
    for number, extra in enumerate(extras):
        target = (TARGET_SIZE + extra).to_bytes(2, "little") + b"LOG".ljust(30, b"\0")
        target += bytes([number]) * extra
        head = bytes([0x40 + number]) * ip_size + bytes(offsets_at - ip_size)
        size = entry_size + len(target)
        offsets = entry_size.to_bytes(2, "little") + size.to_bytes(2, "little")
        blob += head + offsets + bytes([0xC0 + number]) * (entry_size - offsets_at - 4) + target
    return blob


@pytest.mark.pure
@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_a_tables_proof_compares_every_byte_but_comefrom_and_the_counters(family):
    """held._Proof, made from the walk's sizes of the entries, says a table read again is
    the one walked when only bytes the kernel changes by itself differ (each entry's
    comefrom and counters), and not when any other byte does."""
    from nm_zones.backends.iptables import held

    _, offsets_at, entry_size = held.LAYOUT[family]
    blob = _entries_blob(family, [8, 40, 8, 0, 24])
    walked = held._walk(family, (0, -1, -1, -1, -1), blob)
    assert sum(walked.sizes) == len(blob) and len(walked.sizes) == 5
    proof = held._Proof(walked)
    assert proof.matches(bytes(blob))
    kernel_owned, start = set(), 0
    for size in walked.sizes:
        kernel_owned |= set(range(start + offsets_at + 4, start + entry_size))
        start += size
    for position in range(len(blob)):
        changed = bytearray(blob)
        changed[position] ^= 0x01
        assert proof.matches(bytes(changed)) == (position in kernel_owned), position
    assert not proof.matches(blob + bytes(8)) and not proof.matches(blob[:-8])


TRAFFIC = (
    "import socket; [socket.socket(f).connect_ex((a, 9))"
    " for f, a in ((2, '127.0.0.1'), (10, '::1'))]"
)


def test_a_table_read_again_is_walked_again_exactly_when_its_rules_changed(lab):
    """The service and every run read a table's view more than once; a read that finds the
    table as it was (counters and all else the kernel changes by itself aside) keeps the
    view it made; a change of any rule, even of one byte in a table of the same size, is
    walked again."""
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    lab.shell("iptables-legacy -N FOREIGN; iptables-legacy -A FOREIGN -p tcp --dport 80 -j ACCEPT")
    tools = ("iptables-legacy", "ip6tables-legacy")
    both = "; ".join(f"{tool}-save | {tool}-restore" for tool in tools)
    incoming = chain_name(link.name, "in")
    commands = [
        f"{PYTHON} -c \"{TRAFFIC}\"",  # counters change
        both,  # both tables replaced with the same rules: counters zeroed, comefrom rebuilt
        # one byte of nm-zones' rules, the table the same size: ssh's port (22 -> 23)
        both.replace("-save |", "-save | sed 's/--dport 22 /--dport 23 /' |"),
        "iptables-legacy -R FOREIGN 1 -p tcp --dport 81 -j ACCEPT",  # another program's rule
        f"iptables-legacy -R {incoming} 1 -j DROP",  # a rule of nm-zones'
    ]
    result = lab.run(lab.zoned, [PYTHON, "-c", HELD_READER], input_text="\n".join(commands))
    reads = [json.loads(line) for line in result.stdout.splitlines()]
    assert all(read["views"] == read["fresh"] for read in reads)  # never a view not held
    assert all(read["bytes changed"] for read in reads)
    assert [read["walks"] for read in reads] == [2, 2, 4, 5, 6]
    first, same, port, foreign, verdict = (read["views"] for read in reads)
    assert first == same
    changed = {chain for chain in first[0] if first[0][chain] != port[0].get(chain)}
    assert changed and all(chain.startswith("nmz-") for chain in changed)
    assert port[1] != same[1]
    assert foreign == port  # another program's rules are not part of the view
    assert verdict[0][incoming] != foreign[0][incoming]


DAMAGED_READER = """
import random
from nm_zones.backends.iptables import held
random.seed(25)
for family in ("ipv4", "ipv6"):
    hooks, blob = held.table_blob(family, "filter")
    for trial in range(300):
        damaged = bytearray(blob[: random.randrange(len(blob))] if trial % 2 else blob)
        for _ in range(random.randrange(6)):
            damaged[random.randrange(len(damaged))] = random.randrange(256)
        offsets = tuple(h if h < 0 or random.random() < 0.5 else random.randrange(len(blob))
                        for h in hooks)
        held.view_of(family, offsets, bytes(damaged))  # whatever it finds, it returns
print("read")
"""


def test_a_damaged_table_gives_a_view_never_an_exception(lab):
    """The kernel hands out only well-formed tables, but the walk and the check for rules
    ahead of nm-zones' jump read offsets from the entries themselves: a table cut short, with
    bytes changed, or with hook offsets that are no entry's ends in a view (which then
    differs: the table is rebuilt), never in an exception or a loop."""
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    lab.shell("iptables-legacy -N FOREIGN; iptables-legacy -I INPUT -j FOREIGN; "
              "iptables-legacy -A FOREIGN -p tcp --dport 80 -j ACCEPT")
    result = lab.run(lab.zoned, [PYTHON, "-c", DAMAGED_READER], timeout=300)
    assert result.stdout.split() == ["read"], result.stderr


# -- a commit's view against the view checked before it (pure: views as dicts) -------------

CHECKED = {
    "nmz-if-vz1-in": "a",
    "nmz-if-vz2-in": "b",
    "nmz-input": "dispatch",
    "nmz-default-in": "c",
    "nmz-s-home-in": "d",
    "INPUT": ("nmz-input",),
}
VZ2 = frozenset({"nmz-if-vz2-in"})
PANIC = frozenset({"nmz-panic-in", "nmz-panic-fwd", "nmz-panic-out"})


@pytest.mark.parametrize(
    "after, touched, changed",
    [
        ({**CHECKED, "nmz-if-vz2-in": "new", "nmz-input": "new"}, VZ2, False),  # its own
        ({**CHECKED, "nmz-if-vz1-in": "flushed"}, VZ2, True),  # another interface's chain
        ({k: v for k, v in CHECKED.items() if k != "nmz-if-vz1-in"}, VZ2, True),  # gone
        ({**CHECKED, "nmz-if-vz3-in": "x"}, VZ2, True),  # a chain nobody committed
        ({**CHECKED, "nmz-default-in": "x"}, VZ2, True),  # the catch-all's
        ({**CHECKED, "nmz-s-home-in": "x"}, VZ2, True),  # a source zone's
        ({**CHECKED, "nmz-s-home-in": "x"}, frozenset({"nmz-default-in"}), False),
        ({**CHECKED, "INPUT": ()}, VZ2, True),  # the hook's jump gone
        ({**CHECKED, "INPUT": ("nmz-input", "nmz-raw")}, VZ2, False),  # a hook added
        ({**CHECKED, "INPUT bypass": (1,)}, VZ2, True),  # an ACCEPT put ahead of it
        ({**CHECKED, "INPUT": ("nmz-panic-in", "nmz-input")}, PANIC, False),  # panic on
        ({**CHECKED, "INPUT": ()}, PANIC, True),  # panic on, nm-zones' own jump gone
    ],
)
def test_a_commit_tells_its_own_changes_from_another_programs(after, touched, changed):
    from nm_zones.backends.iptables.kernel import changed_meanwhile

    assert changed_meanwhile(CHECKED, after, touched) is changed
    listed = {key: list(v) if isinstance(v, tuple) else v for key, v in after.items()}
    assert changed_meanwhile(CHECKED, listed, touched) is changed  # values not hashable
