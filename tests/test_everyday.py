"""Everyday commands: `allow` / `revoke` (runtime, for a while, permanent), `status IFACE`,
`log`. Real rules in a namespace, real packets across veth pairs, both families."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import threading
import time

import pytest

from nm_zones.config.zonefile import edit_list
from nm_zones.doors import denied
from nm_zones.doors.allow import parse_duration
from nm_zones.errors import UsageError
from nm_zones.state import STATE_FILE, Binding, State
from tests.harness.lab import PYTHON, wait_for
from tests.test_failclosed import keyfile_env
from tests.test_failsafe import hook, write_zone


def probe(lab, links, port: int = 8080, kind: str = "tcp") -> list[str]:
    """One probe per link and family, from the peer."""
    return lab.probe(
        [
            {"kind": kind, "address": address, "port": port}
            for link in links
            for address in (link.ipv4, link.ipv6)
        ]
    )


def status_json(lab, interface: str) -> dict:
    result = lab.nm_zones("status", interface, "--json", check=False)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def state_file(lab) -> str:
    return os.path.join(lab.state_dir, STATE_FILE)


def stored_allowances(lab) -> list:
    from nm_zones.state import StateDir

    return StateDir(lab.state_dir).load().allowances


# -- allow --for: the kernel ends it -------------------------------------------------------


def test_allow_for_opens_at_once_and_the_kernel_closes_it_at_the_deadline(lab):
    link = lab.add_link()
    lab.listen(tcp=(8080,), udp=())
    lab.nm_zones("apply", link.name, "home")
    assert probe(lab, [link]) == ["rejected", "rejected"]

    # in a time zone nine hours off UTC: the kernel's --datestop is UTC all the same
    started = time.time()
    result = lab.nm_zones("allow", "8080/tcp", "--interface", link.name, "--for", "3s", TZ="JST-9")
    finished = time.time()
    assert result.stdout.startswith(f"{link.name} (home): 8080/tcp allowed until "), result
    assert probe(lab, [link]) == ["accepted", "accepted"]
    view = status_json(lab, link.name)
    (allowance,) = view["allowances"]
    assert allowance["what"] == "8080/tcp" and allowance["scope"] == "interface"
    deadline = allowance["deadline"]
    assert started + 3 - 1 <= deadline <= finished + 3 + 1  # 3 s after the command ran
    assert view["kernel"] == "in place"
    written = os.stat(state_file(lab)).st_mtime_ns

    # no nm-zones process runs from here on, until the port is closed again
    def closed():
        outcome = probe(lab, [link])
        return outcome if outcome == ["rejected", "rejected"] else None

    deadline_wait = time.time() + 15
    while not closed():
        assert time.time() < deadline_wait, "the allowance never ended"
        time.sleep(0.2)
    assert time.time() >= deadline - 0.05  # not before its time
    assert os.stat(state_file(lab)).st_mtime_ns == written  # nobody changed the state
    for family in ("ipv4", "ipv6"):  # the rule is still there: the kernel ended it alone
        assert "--datestop" in lab.save(family, "filter")

    # status no longer lists it and still finds the kernel as it should be
    result = lab.nm_zones("status", link.name, "--json", check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["allowances"] == []
    # the next run drops it from the state and from the kernel
    result = lab.nm_zones("gc")
    assert "8080/tcp expired" in result.stdout
    assert "--datestop" not in lab.save("ipv4", "filter")
    assert stored_allowances(lab) == []
    assert status_json(lab, link.name)["kernel"] == "in place"


def timed_rules(lab) -> str:
    """The lines of the allowance's rules for 8080 (and nftables' sets) in the kernel."""
    lines = lab.held_text().splitlines()
    return "\n".join(line for line in lines if "dport 8080" in line or "nmz-until-" in line)


def wait_past_deadline(lab, link) -> None:
    """Until `status` no longer lists the interface's allowance: its deadline passed."""
    wait_for(lambda: status_json(lab, link.name)["allowances"] == [], 15, what="the deadline")


@pytest.mark.both_backends
def test_the_next_event_takes_a_timed_allowance_out_of_the_kernel(lab, tmp_path):
    """Past its deadline an allowance's rule leaves the kernel with the next run of any
    kind, even an event the quick path would otherwise end at once."""
    link = lab.add_link()
    lab.listen(tcp=(8080,), udp=())
    env = keyfile_env(tmp_path)
    assert hook(lab, link.name, "up", **env).returncode == 0
    lab.nm_zones("allow", "8080/tcp", "--interface", link.name, "--for", "2s")
    assert probe(lab, [link]) == ["accepted", "accepted"]
    assert timed_rules(lab)
    wait_past_deadline(lab, link)
    result = hook(lab, link.name, "up", **env)
    assert result.returncode == 0, result.stderr
    assert timed_rules(lab) == ""  # gone, not only inactive
    assert stored_allowances(lab) == []
    assert probe(lab, [link]) == ["rejected", "rejected"]
    assert lab.nm_zones("status", check=False).returncode == 0


@pytest.mark.both_backends
def test_a_deadline_is_kept_on_the_clock_no_one_can_set(lab):
    """A deadline is on CLOCK_BOOTTIME, not the wall clock: a run that sees the boot clock
    two hours on (a private time namespace; the wall clock is untouched) ends an allowance
    granted for one hour. So stepping the wall clock, which that run does not read, can
    neither extend nor bring back one."""
    link = lab.add_link()
    lab.listen(tcp=(8080,), udp=())
    lab.nm_zones("apply", link.name, "home")
    lab.nm_zones("allow", "8080/tcp", "--interface", link.name, "--for", "1h")
    assert probe(lab, [link]) == ["accepted", "accepted"]
    later = ["unshare", "--time", "--boottime", "7200", PYTHON, "-m", "nm_zones", "gc"]
    result = lab.run(lab.zoned, later, check=False)
    assert "8080/tcp expired" in result.stdout, result
    assert timed_rules(lab) == ""
    assert stored_allowances(lab) == []
    assert probe(lab, [link]) == ["rejected", "rejected"]
    assert lab.nm_zones("status", check=False).returncode == 0


# -- allow for a zone: every interface of it, now and later --------------------------------


def test_allow_a_service_for_a_zone_reaches_all_its_interfaces_and_later_ones(lab):
    write_zone(lab, "home", "services: [ssh]\n")
    first, second, other = lab.add_link(), lab.add_link(), lab.add_link()
    lab.listen(tcp=(), udp=(137, 138))
    lab.nm_zones("apply", first.name, "home")
    lab.nm_zones("apply", second.name, "home")
    lab.nm_zones("apply", other.name, "work")
    assert set(probe(lab, [first, second, other], 137, "udp")) == {"rejected"}

    result = lab.nm_zones("allow", "samba-client", "--zone", "home")
    assert result.stdout.splitlines() == [
        f"{first.name} (home): samba-client allowed",
        f"{second.name} (home): samba-client allowed",
    ]
    for port in (137, 138):
        assert probe(lab, [first, second], port, "udp") == ["accepted"] * 4
    assert probe(lab, [other], 137, "udp") == ["rejected"] * 2  # another zone: untouched

    later = lab.add_link()
    lab.nm_zones("apply", later.name, "home")
    assert probe(lab, [later], 137, "udp") == ["accepted"] * 2

    result = lab.nm_zones("revoke", "samba-client", "--zone", "home")
    assert len(result.stdout.splitlines()) == 3
    assert set(probe(lab, [first, second, later], 137, "udp")) == {"rejected"}
    result = lab.nm_zones("revoke", "samba-client", "--zone", "home")
    assert result.returncode == 0
    assert result.stdout == "zone home: samba-client not revoked: nothing allowed it at runtime\n"


def test_what_the_zone_already_allows_is_said_once(lab):
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    before = os.stat(state_file(lab)).st_mtime_ns
    result = lab.nm_zones("allow", "samba-client", "--zone", "home")
    assert result.returncode == 0
    assert (
        result.stdout == "zone home: samba-client is already allowed by the zone "
        "(it lists the service)\n"
    )
    result = lab.nm_zones("allow", "22/tcp", "--zone", "home")
    assert "already allowed by the zone (service ssh)" in result.stdout
    assert os.stat(state_file(lab)).st_mtime_ns == before
    assert stored_allowances(lab) == []


@pytest.mark.parametrize("zone", ["block", "drop"])
def test_nothing_is_allowed_into_a_zone_that_lets_nobody_in(lab, zone):
    link = lab.add_link()
    lab.listen()
    lab.nm_zones("apply", link.name, zone)
    before = probe(lab, [link])
    for scope in (["--zone", zone], ["--interface", link.name], ["--zone", zone, "--permanent"]):
        result = lab.nm_zones("allow", "8080/tcp", *scope, check=False)
        assert result.returncode == 2, result
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and "which lets nobody in" in lines[0], lines
        assert "another zone" in lines[0] and "nm-zones apply" in lines[0]
    assert stored_allowances(lab) == []
    assert not os.path.exists(os.path.join(lab.config_dir, "zones.d", f"{zone}.yaml"))
    assert probe(lab, [link]) == before == [{"block": "rejected", "drop": "dropped"}[zone]] * 2


@pytest.mark.parametrize(
    "what, says",
    [
        ("\uff18\uff10/tcp", "is not a port (ASCII digits only, as in 22/tcp)"),
        ("-1/tcp", "'-1/tcp' is not a port: ports are 1-65535"),
        ("-1", "'-1' is not a port: ports are 1-65535"),
    ],
)
def test_a_port_that_is_not_one_is_refused_in_one_line(lab, what, says):
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "public")
    for args in (["allow", what, "--zone", "public"], ["revoke", "--zone", "public", what]):
        result = lab.nm_zones(*args, check=False)
        assert result.returncode == 2, result
        assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
        assert "usage:" not in result.stderr
    assert stored_allowances(lab) == []


def test_without_a_scope_the_one_bound_interface_or_a_usage_error(lab):
    first, second = lab.add_link(), lab.add_link()
    lab.listen(tcp=(9090,), udp=())
    lab.nm_zones("apply", first.name, "public")
    result = lab.nm_zones("allow", "9090/tcp")
    assert result.stdout == (
        f"{first.name} (public): 9090/tcp allowed ({first.name} is the only interface bound)\n"
    )
    assert probe(lab, [first], 9090) == ["accepted"] * 2
    lab.nm_zones("apply", second.name, "public")
    result = lab.nm_zones("revoke", "9090/tcp", check=False)
    assert result.returncode == 2
    assert "give --zone ZONE or --interface IFACE (interfaces bound: vz1, vz2)" in result.stderr
    lab.nm_zones("revoke", "9090/tcp", "--interface", first.name)
    assert probe(lab, [first], 9090) == ["rejected"] * 2


# -- permanent, and what survives what ------------------------------------------------------


def test_permanent_survives_reload_and_down_up_and_runtime_does_not(lab, tmp_path):
    link = lab.add_link()
    lab.listen(tcp=(8080, 9090), udp=())
    env = keyfile_env(tmp_path, "home")
    assert hook(lab, link.name, "up", **env).returncode == 0
    assert probe(lab, [link]) == ["rejected"] * 2

    path = os.path.join(lab.config_dir, "zones.d", "home.yaml")
    result = lab.nm_zones("allow", "8080/tcp", "--zone", "home", "--permanent")
    assert result.stdout.splitlines()[0] == (f"zone home: 8080/tcp allowed permanently ({path})")
    with open(path) as stream:
        text = stream.read()
    assert text.startswith("# Mostly trusted")  # the shipped file's comment is kept
    assert text.endswith("ports: [8080/tcp]\n")
    assert probe(lab, [link]) == ["accepted"] * 2

    lab.nm_zones("allow", "9090/tcp", "--interface", link.name)
    assert probe(lab, [link], 9090) == ["accepted"] * 2
    lab.nm_zones("reload")
    assert probe(lab, [link]) == ["accepted"] * 2
    assert probe(lab, [link], 9090) == ["rejected"] * 2  # runtime ends with a reload

    lab.nm_zones("allow", "9090/tcp", "--interface", link.name)
    assert probe(lab, [link], 9090) == ["accepted"] * 2
    assert hook(lab, link.name, "down").returncode == 0
    assert hook(lab, link.name, "up", **env).returncode == 0
    assert probe(lab, [link]) == ["accepted"] * 2
    assert probe(lab, [link], 9090) == ["rejected"] * 2  # and with a down

    result = lab.nm_zones("revoke", "8080/tcp", "--zone", "home", "--permanent")
    assert result.stdout.startswith(f"zone home: 8080/tcp revoked permanently ({path})")
    assert probe(lab, [link]) == ["rejected"] * 2
    with open(path) as stream:
        assert stream.read() == text.replace("ports: [8080/tcp]\n", "ports: []\n")
    result = lab.nm_zones("revoke", "8080/tcp", "--zone", "home", "--permanent")
    assert result.stdout == "zone home: 8080/tcp is not in its ports\n"


def test_permanent_for_and_bad_what_are_usage_errors(lab):
    lab.add_link()
    write_zone(lab, "lab", "ports: [8080/tpc]\nservices: [sambaclient]\n")
    check = lab.nm_zones("check", check=False).stderr
    for what, message in (
        ("8080/tpc", "unknown protocol 'tpc' (did you mean 'tcp'?)"),
        ("sambaclient", "unknown service 'sambaclient' (did you mean 'samba-client'?)"),
    ):
        assert message in check  # the zone files' own words
        result = lab.nm_zones("allow", what, "--zone", "home", check=False)
        assert result.returncode == 2 and result.stderr == f"nm-zones: {message}\n"
    for what, message in (
        ("8080", "'8080' has no protocol (add one: 8080/tcp or 8080/udp)"),
        ("70000/tcp", "port 70000 is out of range (1-65535)"),
        ("9-1/udp", "range 9-1 is reversed (write 1-9)"),
    ):
        result = lab.nm_zones("revoke", what, "--zone", "home", check=False)
        assert result.returncode == 2 and result.stderr == f"nm-zones: {message}\n"
    for argv in (
        ["allow", "8080/tcp", "--zone", "home", "--permanent", "--for", "1m"],
        ["allow", "8080/tcp", "--zone", "home", "--for", "5x"],
        ["allow", "8080/tcp", "--zone", "nowhere"],
        ["allow", "8080/tcp", "--interface", "vz9"],
    ):
        result = lab.nm_zones(*argv, check=False)
        assert result.returncode == 2, (argv, result)
        assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
    assert not os.path.exists(os.path.join(lab.config_dir, "zones.d", "home.yaml"))


# -- status IFACE -----------------------------------------------------------------------------


def test_status_of_one_interface_shows_everything_open_on_it(lab):
    write_zone(
        lab,
        "lab",
        "services: [ssh, samba-client]\nports: [60000-61000/udp]\nmasquerade: true\n"
        "forward-ports:\n  - {port: 80/tcp, to-port: 8080}\nlog-denied: true\n",
    )
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "lab")
    lab.nm_zones("allow", "8443/tcp", "--interface", link.name, "--for", "2h")
    result = lab.nm_zones("status", link.name, check=False)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert f"{link.name}: zone lab (command line), since " in text
    assert "kernel:       in place" in text
    for expected in (
        "ssh 22/tcp",
        "samba-client 137/udp 138/udp",
        "60000-61000/udp",
        "8443/tcp  (runtime, this interface, until ",
        "forward-port: 80/tcp -> :8080",
        "masquerade:   yes (IPv4)",
        "log-denied:   yes",
    ):
        assert expected in text, (expected, text)
    view = status_json(lab, link.name)
    assert [e["what"] for e in view["open"]] == [
        "ssh",
        "samba-client",
        "60000-61000/udp",
        "8443/tcp",
    ]
    assert view["masquerade"] is True and view["forward_ports"][0]["to-port"] == 8080
    assert 7100 < view["allowances"][0]["remaining_seconds"] <= 7200

    # an interface another program changed: status IFACE says so, exit 1
    lab.shell(f"iptables-legacy -F nmz-if-{link.name}-in")
    result = lab.nm_zones("status", link.name, check=False)
    assert result.returncode == 1 and "kernel:       DIFFERS" in result.stdout
    result = lab.nm_zones("status", "nosuch0", check=False)
    assert result.returncode == 2


# -- log --------------------------------------------------------------------------------------

CAPTURED = [
    # /dev/kmsg records and journalctl -k -o short-iso lines, as this kernel writes them
    "4,1893,512345678,-;nmz home vz1: IN=vz1 OUT= MAC=4a:1c:2e:00:11:22:6e:5f:01:02:03:04:08:00 "
    "SRC=10.77.1.2 DST=10.77.1.1 LEN=60 TOS=0x00 PREC=0x00 TTL=64 ID=25101 DF PROTO=TCP "
    "SPT=41234 DPT=8080 WINDOW=64240 RES=0x00 SYN URGP=0 ",
    "2026-12-03T16:40:01+0000 laptop kernel: nmz public wlp3s0: IN=wlp3s0 OUT= "
    "MAC=33:33:00:00:00:01:6e:5f:01:02:03:04:86:dd SRC=fd77:0001:0000:0000:0000:0000:0000:0002 "
    "DST=fd77:0001:0000:0000:0000:0000:0000:0001 LEN=57 TC=0 HOPLIMIT=64 FLOWLBL=12345 "
    "PROTO=UDP SPT=50000 DPT=631 LEN=17 ",
    "4,1895,512399999,-;nmz work vz2: IN=vz2 OUT= SRC=10.77.2.2 DST=10.77.2.1 LEN=84 TOS=0x00 "
    "PREC=0x00 TTL=64 ID=1 PROTO=ICMP TYPE=8 CODE=0 ID=7 SEQ=1 ",
    "6,1896,512400000,-;eth0: link becomes ready",
]


def test_log_lines_are_parsed_into_time_interface_zone_protocol_source_port():
    booted = time.mktime((2026, 12, 3, 16, 0, 0, 0, 0, -1))
    first = denied.from_kmsg(CAPTURED[0], booted)
    assert first["time"] == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(booted + 512.345678))
    assert (first["interface"], first["zone"], first["protocol"]) == ("vz1", "home", "tcp")
    assert (first["source"], first["port"]) == ("10.77.1.2", "8080")
    second = denied.from_journal(CAPTURED[1])
    assert second["time"] == "2026-12-03 16:40:01"
    assert (second["interface"], second["zone"], second["protocol"]) == ("wlp3s0", "public", "udp")
    assert second["source"].startswith("fd77:0001") and second["port"] == "631"
    third = denied.from_kmsg(CAPTURED[2], booted)
    assert (third["protocol"], third["port"]) == ("icmp", "type 8")
    assert denied.from_kmsg(CAPTURED[3], booted) is None
    assert denied.line(first).split()[2:] == ["vz1", "home", "tcp", "10.77.1.2", "->", "8080"]


def test_log_says_how_to_turn_logging_on(lab):
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    result = lab.nm_zones("log", link.name, check=False)
    assert result.returncode == 0, result.stderr
    assert "vz1's zone does not log refused packets (zones: home)" in result.stderr
    assert "log-denied: true" in result.stderr


def test_log_shows_real_refused_packets(lab):
    with open("/proc/sys/net/netfilter/nf_log_all_netns") as stream:
        if stream.read().strip() != "1":
            pytest.skip(
                "the kernel logs netfilter LOG records of other network namespaces only with "
                "net.netfilter.nf_log_all_netns=1, a host-wide setting the tests never change"
            )
    write_zone(lab, "home", "services: [ssh]\nlog-denied: true\n")
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    probe(lab, [link], 8123)

    def logged():
        out = lab.nm_zones("log", link.name, check=False).stdout
        return [line for line in out.splitlines() if line.split()[-1] == "8123"]

    lines = []
    deadline = time.time() + 10
    while len(lines) < 2 and time.time() < deadline:
        lines = logged()
        time.sleep(0.2)
    assert len(lines) >= 2 and all(" vz1 " in line and " home " in line for line in lines)


@pytest.mark.both_backends
def test_refused_packets_reach_the_netlink_log_group_in_any_namespace(lab):
    """The NFLOG rule beside the LOG rule: the reader nm-zones serve uses (doors/nflog.py),
    run in the zoned namespace, gets each refused probe with its zone, interface and port,
    IPv4 and IPv6, without the host's nf_log_all_netns."""
    write_zone(lab, "home", "services: [ssh]\nlog-denied: true\n")
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    reader = subprocess.Popen(
        ["ip", "netns", "exec", lab.zoned, PYTHON, "-m", "nm_zones.doors.nflog"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=lab.env(),
    )
    lab.processes.append(reader)
    assert reader.stdout.readline() == "ready\n", reader.stderr.read()
    seen: list[dict] = []
    threading.Thread(
        target=lambda: seen.extend(json.loads(text) for text in reader.stdout), daemon=True
    ).start()
    assert probe(lab, [link], 8123) == ["rejected", "rejected"]
    peers = {str(ipaddress.ip_address(a)) for a in (link.peer_ipv4, link.peer_ipv6)}
    wait_for(lambda: {p["source"] for p in seen} >= peers, 10,
             what=lambda: f"both probes in the log group: {seen}")
    for packet in seen:
        assert (packet["zone"], packet["interface"]) == ("home", link.name), packet
        assert (packet["protocol"], packet["port"]) == ("tcp", "8123"), packet


# -- pure parts ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("10m", 600), ("2h", 7200), ("1d", 86400), ("45", 45)]
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "5x", "-3m", "1.5h", "400d", "m", "\uff11\uff10m"])
def test_bad_durations(text):
    with pytest.raises(UsageError):
        parse_duration(text)


SHIPPED_HOME = (
    "# Mostly trusted: your own home network.\n"
    'description: "Home network"\n'
    "services: [ssh, mdns]   # what home allows\n"
)
BLOCK_STYLE = (
    "# mine\nports:\n  - 22/tcp   # ssh by hand\n  # keep me\n  - 80/tcp\nlog-denied: true\n"
)


@pytest.mark.parametrize(
    ("text", "key", "item", "add", "expected"),
    [
        (SHIPPED_HOME, "ports", "8080/tcp", True, SHIPPED_HOME + "ports: [8080/tcp]\n"),
        (
            SHIPPED_HOME,
            "services",
            "http",
            True,
            SHIPPED_HOME.replace("mdns]", "mdns, http]"),
        ),
        (SHIPPED_HOME, "services", "ssh", False, SHIPPED_HOME.replace("ssh, ", "")),
        (SHIPPED_HOME, "services", "mdns", False, SHIPPED_HOME.replace(", mdns", "")),
        (SHIPPED_HOME, "services", "ssh", True, None),
        (SHIPPED_HOME, "ports", "1/tcp", False, None),
        (
            BLOCK_STYLE,
            "ports",
            "8080/tcp",
            True,
            BLOCK_STYLE.replace("  - 80/tcp\n", "  - 80/tcp\n  - 8080/tcp\n"),
        ),
        (
            BLOCK_STYLE,
            "ports",
            "22/tcp",
            False,
            BLOCK_STYLE.replace("  - 22/tcp   # ssh by hand\n", ""),
        ),
        ("ports: [1/TCP, 2/tcp]\n", "ports", "1/tcp", False, "ports: [2/tcp]\n"),
        ("ports: []\n", "ports", "1/tcp", True, "ports: [1/tcp]\n"),
        (
            "ports:\nlog-denied: true\n",
            "ports",
            "1/tcp",
            True,
            "ports: [1/tcp]\nlog-denied: true\n",
        ),
        ("", "services", "ssh", True, "services: [ssh]\n"),
        ("target: drop", "ports", "1/udp", True, "target: drop\nports: [1/udp]\n"),
    ],
)
def test_zone_file_edits_change_one_item_and_keep_the_rest(text, key, item, add, expected):
    assert edit_list(text, key, item, add) == expected


def test_a_version_4_state_file_is_read_without_allowances():
    import marshal

    binding = Binding("home")
    old = marshal.dumps(
        (4, Binding.__slots__, ("public", "d"), {"vz1": tuple(binding.as_dict().values())}, {})
    )
    state = State.loads(old)
    assert state.interfaces["vz1"] == binding and state.allowances == []
    state.allowances = [("vz1", "home", "8080/tcp", 0, 0)]
    assert State.loads(state.dumps()).allowances == state.allowances


def test_an_allowance_kept_on_the_wall_clock_is_moved_to_boottime():
    """A state written by an nm-zones that kept deadlines on the wall clock alone: read, its
    deadline is on CLOCK_BOOTTIME, as far off as it was."""
    import marshal

    from nm_zones.ruleset.allowances import boottime

    wall = int(time.time()) + 100
    old = marshal.dumps(
        (5, Binding.__slots__, ("public", "d"), {}, {}, (("vz1", "home", "8080/tcp", wall),))
    )
    ((interface, zone, what, deadline, kept),) = State.loads(old).allowances
    assert (interface, zone, what, kept) == ("vz1", "home", "8080/tcp", wall)
    assert 98 <= deadline - boottime() <= 101


def test_an_allowance_is_put_back_with_rules_another_program_removed(lab, tmp_path):
    """The binding's digest includes its allowances: a rebuild after another program flushed
    the chain restores them, and a no-op event (the quick path) keeps them."""
    link = lab.add_link()
    lab.listen(tcp=(8080,), udp=())
    env = keyfile_env(tmp_path, "home")
    assert hook(lab, link.name, "up", **env).returncode == 0
    lab.nm_zones("allow", "8080/tcp", "--interface", link.name)
    assert hook(lab, link.name, "up", **env).returncode == 0  # nothing changed
    assert probe(lab, [link]) == ["accepted"] * 2
    lab.shell(
        f"iptables-legacy -F nmz-if-{link.name}-in; ip6tables-legacy -F nmz-if-{link.name}-in"
    )
    result = lab.nm_zones("gc", check=False)
    assert result.returncode == 1 and "changed by another program" in result.stderr
    assert probe(lab, [link]) == ["accepted"] * 2
    assert status_json(lab, link.name)["kernel"] == "in place"
    lab.nm_zones("revoke", "8080/tcp", "--interface", link.name)
    assert probe(lab, [link]) == ["rejected"] * 2


def test_status_of_an_unbound_or_exempt_interface(lab):
    link = lab.add_link()
    lab.nm_zones("reload")
    result = lab.nm_zones("status", link.name, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{link.name}: zone public (not bound: the catch-all)")
    assert "ssh 22/tcp" in result.stdout
    result = lab.nm_zones("status", "lo", check=False)
    assert result.returncode == 0
    assert result.stdout == "lo: exempt (exempt-interfaces): nm-zones does not filter it\n"


@pytest.mark.parametrize("what", ["x" * 5000, "ssh\nvz1 (home): 1/tcp allowed", "../../etc", ""])
def test_hostile_what_is_one_line_and_exit_2(lab, what):
    lab.add_link()
    result = lab.nm_zones("allow", what, "--zone", "home", check=False)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert result.stdout == ""
