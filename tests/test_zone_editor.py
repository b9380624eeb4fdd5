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
