"""What the zone editor of nm-zones-settings reads (GetZone): pure, from files and a state.
The editor's changes are tested for real in tests/test_desktop.py."""

from __future__ import annotations

import time

import pytest

from nm_zones.doors.zone_editor import zone_details
from nm_zones.errors import UsageError
from nm_zones.state import Binding, State
from tests.test_config import load_with


def test_a_zone_as_the_editor_shows_it(tmp_path):
    loaded = load_with(
        tmp_path,
        zones={
            "lab": "description: Lab\nservices: [ssh, mdns]\nports: [8080/tcp]\n"
            "icmp-blocks: [echo-request]\nmasquerade: true\n"
        },
    )
    from nm_zones.ruleset.allowances import boottime

    soon = int(time.time()) + 600
    state = State(
        interfaces={
            "eth0": Binding("lab", connection_id="Lab LAN"),
            "eth1": Binding("public"),
            "eth2": Binding("lab", status="removing"),
        },
        allowances=[  # deadline on CLOCK_BOOTTIME, then the wall clock's (allowances.py)
            ("eth0", "lab", "9090/tcp", int(boottime()) + 600, soon),
            ("", "lab", "https", 0, 0),
            ("eth0", "lab", "7070/tcp", 1, 1),
            ("eth1", "public", "80/tcp", 0, 0),
        ],
    )
    details = {
        key: value for key, (_signature, value) in zone_details(loaded, state, "lab").items()
    }
    assert details["services"] == [("ssh", "22/tcp"), ("mdns", "5353/udp")]
    assert details["ports"] == ["8080/tcp"]
    assert details["icmp-blocks"] == ["echo-request"] and details["masquerade"] is True
    assert details["interfaces"] == [{"interface": "eth0", "connection": "Lab LAN"}]
    assert details["allowances"] == [  # the expired one left out, other zones' too
        {"interface": "eth0", "what": "9090/tcp", "deadline": str(soon)},
        {"interface": "", "what": "https", "deadline": "0"},
    ]
    assert details["file"].endswith("zones.d/lab.yaml")


def test_an_unknown_or_broken_zone_says_why(tmp_path):
    loaded = load_with(tmp_path, zones={"bad": "ports: [70000/tcp]\n"})
    with pytest.raises(UsageError, match="unknown zone 'nowhere'"):
        zone_details(loaded, State(), "nowhere")
    with pytest.raises(UsageError, match="70000"):
        zone_details(loaded, State(), "bad")


def test_time_left_in_its_two_largest_units():
    from nm_zones.doors.allow import remaining_text
    from nm_zones.text import duration_text

    assert [duration_text(s) for s in (0, 42, 552, 3900, 90061, -5)] == [
        "0s",
        "42s",
        "9m 12s",
        "1h 5m",
        "1d 1h",
        "0s",
    ]
    assert remaining_text(552) == "9m 12s left"


# -- the refused packets nm-zones serve reads from the NFLOG group (doors/nflog.py) --------


def _nflog_message(prefix: bytes, payload: bytes, kind: int = 0x400) -> bytes:
    """A packet message as nfnetlink_log sends it: header, nfgenmsg, prefix and payload."""
    from nm_zones.doors import nflog
    from nm_zones.netlink import attribute

    body = nflog.NFGENMSG.pack(2, 0, 0)
    body += attribute(nflog.NFULA_PREFIX, prefix + b"\0")
    body += attribute(nflog.NFULA_PAYLOAD, payload)
    return nflog.NLMSGHDR.pack(nflog.NLMSGHDR.size + len(body), kind, 0, 0, 0) + body


IPV4_TCP = (  # 10.0.0.2 -> 10.0.0.1, TCP 41000 -> 8080
    bytes.fromhex("45000028000040004006") + b"\0\0" + bytes([10, 0, 0, 2, 10, 0, 0, 1])
    + bytes.fromhex("a0281f90")
)
IPV6_HOP_UDP = (  # fd00::2 -> fd00::1, a hop-by-hop header, then UDP 5000 -> 631
    bytes.fromhex("6000000000100040")  # version 6, 16 bytes follow, next: hop-by-hop (0)
    + bytes.fromhex("fd000000000000000000000000000002")
    + bytes.fromhex("fd000000000000000000000000000001")
    + bytes([17, 0]) + b"\0" * 6 + bytes.fromhex("13880277")
)


def _read(data: bytes) -> list[dict]:
    from nm_zones.doors import nflog

    found = [nflog.parse(kind, attrs, 0.0) for kind, attrs in nflog.messages(data)]
    return [packet for packet in found if packet is not None]


def test_refused_packets_are_read_from_the_kernels_messages():
    (first, second) = _read(
        _nflog_message(b"nmz home nosuch9: ", IPV4_TCP)
        + _nflog_message(b"nmz public wlp3s0: ", IPV6_HOP_UDP)
    )
    assert (first["zone"], first["interface"], first["protocol"]) == ("home", "nosuch9", "tcp")
    assert (first["source"], first["port"]) == ("10.0.0.2", "8080")
    assert (second["zone"], second["protocol"], second["port"]) == ("public", "udp", "631")
    assert second["source"] == "fd00::2"


@pytest.mark.parametrize(
    ("prefix", "payload"),
    [
        (b"nmz home eth0: ", IPV4_TCP[:12]),  # cut inside the IP header
        (b"nmz home eth0: ", b""),
        (b"nmz home eth0: ", b"\x75" + IPV4_TCP[1:]),  # IP version 7
        (b"nmz home eth0: ", b"\x41" + IPV4_TCP[1:]),  # a header length of 4 bytes
        (b"someone else: ", IPV4_TCP),  # another program's NFLOG rule
        (b"nmz home eth0 ", IPV4_TCP),
    ],
)
def test_garbled_or_foreign_packets_are_skipped(prefix, payload):
    assert _read(_nflog_message(prefix, payload)) == []


def test_a_port_cut_off_is_shown_as_unknown_and_bad_lengths_end_the_message():
    from nm_zones.doors import nflog

    (packet,) = _read(_nflog_message(b"nmz home eth0: ", IPV4_TCP[:21]))
    assert packet["port"] == "-"
    good = _nflog_message(b"nmz home eth0: ", IPV4_TCP)
    assert _read(good[:-3]) == []  # the message longer than the datagram
    broken = bytearray(good)
    broken[nflog.NLMSGHDR.size + nflog.NFGENMSG.size] = 2  # an attribute of length 2
    assert _read(bytes(broken)) == []
    assert _read(_nflog_message(b"nmz home eth0: ", IPV4_TCP, kind=0x401)) == []


def test_the_ring_keeps_the_last_packets_and_answers_per_zone():
    from nm_zones.doors.nflog import DeniedPackets
    from nm_zones.ruleset.layout import log_prefix

    ring = DeniedPackets(size=3)
    long_zone = "a-zone-with-a-long-name"
    for number, zone in enumerate(["home", "home", "public", "home", long_zone]):
        prefix = log_prefix(zone, "eth0")
        ring.ring.append({"zone": prefix.split()[1], "interface": "eth0", "prefix": prefix,
                          "port": str(number)})
    assert len(ring.ring) == 3
    assert [p["port"] for p in ring.of_zone("home")] == ["3"]  # newest first, bounded
    assert [p["port"] for p in ring.of_zone(long_zone)] == ["4"]  # its prefix is trimmed
    assert "prefix" not in ring.of_zone("public")[0]


def test_random_bytes_never_stop_the_reader():
    import random

    from nm_zones.doors.nflog import read_packets

    chance = random.Random(23)
    good = _nflog_message(b"nmz home eth0: ", IPV4_TCP) + _nflog_message(
        b"nmz home eth0: ", IPV6_HOP_UDP
    )
    for _ in range(3000):
        data = bytearray(good)
        for _flip in range(chance.randint(1, 8)):
            data[chance.randrange(len(data))] = chance.randrange(256)
        cut = bytes(data[: chance.randint(0, len(data))])
        for packet in read_packets(cut):
            assert set(packet) >= {"zone", "interface", "protocol", "source", "port"}
