"""The desktop front ends and known networks, for real: one DHCP ethernet profile of the
NetworkManager sandbox cabled to network A, then B, then A again (tests/harness/networks.py);
`nm-zones-notify` asks about each new network through dunst, `nm-zones-settings` lists the
known networks and changes them through the service, under polkit."""

from __future__ import annotations

import pytest

from tests.harness.desktop import Desktop
from tests.harness.lab import wait_for
from tests.harness.networks import PeerNetwork, dhcp_profile
from tests.test_desktop import (
    APP,
    NEEDS_DESKTOP,
    USER,
    Window,
    agent_session,
    grant,
    notify_calls,
    profile_zone,
)
from tests.test_networks import A_MAC, B_MAC, NEEDS_NM, connect, known, see, wait_reason
from tests.test_nm import HOME, PUBLIC, WORK
from tests.test_service import nm as served_sandbox  # noqa: F401 - a fixture, shared

ASKED = "New wired network, gateway {mac}, domain {domain}: which zone?"


@pytest.fixture
def desk(served_sandbox, tmp_path):  # noqa: F811 - the fixture imported above
    """The serving sandbox with a desktop user, a listener, and networks A and B."""
    if NEEDS_DESKTOP or NEEDS_NM:
        pytest.skip("needs the desktop tools (.ci/setup), NetworkManager and dnsmasq")
    served_sandbox.serve()
    served_sandbox.add_user(USER, "netdev")
    served_sandbox.listen()
    a = PeerNetwork(str(tmp_path), "a", A_MAC, "home.example").start()
    b = PeerNetwork(str(tmp_path), "b", B_MAC, "hotel.example").start()
    try:
        yield served_sandbox, a, b
    finally:
        a.stop()
        b.stop()


def question(desktop: Desktop, summary: str) -> dict:
    return wait_for(
        lambda: next((c for c in notify_calls(desktop) if c["summary"] == summary), None),
        30,
        what=f"the question {summary!r}\n{desktop.log('notify.log')}",
    )


def test_the_agent_asks_about_each_new_wired_network_and_places_the_network(desk):
    nm, a, b = desk
    desktop, home = agent_session(nm)
    dhcp_profile(nm)

    connect(nm, a)
    wait_reason(nm, "public", "unknown wired network")
    asked = question(desktop, ASKED.format(mac=A_MAC, domain="home.example"))
    assert asked["body"] == (
        "lan is in zone public until you choose; the choice is for this network only, "
        "every time you connect to it."
    )
    assert asked["actions"][::2] == ["home", "work", "public", "block"]
    assert asked["urgency"] == 1
    wait_for(
        lambda: desktop.run(["dunstctl", "count", "displayed"]).stdout.strip() == "1",
        10,
        what="dunst to show it",
    )
    nm.sh(f"echo home > {home}/want")
    desktop.run(["dunstctl", "context"])  # the user picks "Home" in dunst's action menu
    wait_reason(nm, "home", 'known network "home.example"')
    [network_a] = known(nm)
    assert (network_a["gateway-mac"], network_a["zone"]) == (A_MAC, "home")
    assert profile_zone(nm, "lan") == ""  # the network has the zone, not the profile
    see(a, HOME)
    wait_for(
        lambda: "home.example is now in zone home" in desktop.log("notify-calls.log"),
        10,
        what="the confirmation",
    )

    connect(nm, b)  # re-plugged into the hotel's LAN: unknown, asked about again
    wait_reason(nm, "public", "unknown wired network")
    question(desktop, ASKED.format(mac=B_MAC, domain="hotel.example"))
    see(b, PUBLIC)

    connect(nm, a)  # back home: known, no question
    wait_reason(nm, "home", 'known network "home.example"')
    wait_for(
        lambda: (
            "not asking about 'lan': on known network 'home.example'" in desktop.log("notify.log")
        ),
        20,
        what=f"the agent to pass over a known network\n{desktop.log('notify.log')}",
    )
    see(a, HOME)
    asked_about = [c["summary"] for c in notify_calls(desktop) if c["actions"]]
    assert asked_about == [
        ASKED.format(mac=A_MAC, domain="home.example"),
        ASKED.format(mac=B_MAC, domain="hotel.example"),
    ]
    assert not any(c["summary"].startswith("lan: zone") for c in notify_calls(desktop))
    assert "Traceback" not in desktop.log("notify.log")


def test_the_window_lists_known_networks_and_changes_them_under_polkit(desk):
    nm, a, b = desk
    dhcp_profile(nm)
    connect(nm, a)
    wait_reason(nm, "public", "unknown wired network")
    nm.nm_zones("assign", "lan", "home")
    connect(nm, b)
    wait_reason(nm, "public", "unknown wired network")

    desktop = Desktop(nm, USER)
    desktop.start()
    desktop.program("nm_zones.desktop.settings", "settings.log")
    window = Window(desktop)
    row = window.wait_row("home.example", "Home")
    assert row["description"] == "Network home.example: Home"
    facts = f"gateway {A_MAC} · domain home.example · last seen "
    assert any(label.startswith(facts) for label in row["labels"]), row["labels"]
    row = window.wait_row("hotel.example", "As unknown networks")

    # without polkit's grant: refused, the network stays unplaced
    window.choose(row["combo"], "Work")
    window.wait_status(r"^Not authorized: polkit refused org\.nm-zones\.assign$")
    assert [n["zone"] for n in known(nm) if n["domain"] == "hotel.example"] == [None]
    window.wait_row("hotel.example", "As unknown networks")
    see(b, PUBLIC)

    # granted: B is work, and the connection on it follows at once
    grant(nm, desktop)
    window.choose(window.row("hotel.example")["combo"], "Work")
    window.wait_status(r"network 'hotel\.example' \(\w+\) is now work")
    wait_reason(nm, "work", 'known network "hotel.example"')
    see(b, WORK)
    window.wait_row("hotel.example", "Work")
    assert profile_zone(nm, "lan") == ""

    # forget A: gone from the store and the window
    forget = next(
        e
        for e in window.tree()
        if e["role"] == "push button" and e["name"] == "Forget home.example"
    )
    desktop.atspi("action", APP, forget["path"], "click")
    window.wait_status(r"forgot network 'home\.example'")
    wait_for(lambda: window.row("home.example") is None, 20, what="A's row to go")
    assert [n["domain"] for n in known(nm)] == ["hotel.example"]
    assert "Traceback" not in desktop.log("settings.log")


def test_the_service_notices_each_record_of_the_hook(tmp_path):
    """The hook replaces its record of which network an interface is on by a rename
    (files.write_atomically) and removes it; the service's watch fires for each."""
    import asyncio

    from nm_zones.doors.watch import FileWatch
    from nm_zones.files import write_atomically
    from nm_zones.networks.zone import SEEN_FILE

    async def watched() -> list[str]:
        fired: list[str] = []
        changed = asyncio.Event()

        def on_change() -> None:
            fired.append("seen")
            changed.set()

        watch = FileWatch(str(tmp_path), SEEN_FILE, on_change)
        assert watch.start()
        try:
            write_atomically(str(tmp_path / "state"), b"other")  # read past, not a record
            write_atomically(str(tmp_path / SEEN_FILE), b"record")
            await asyncio.wait_for(changed.wait(), 10)
            changed.clear()
            (tmp_path / SEEN_FILE).unlink()
            await asyncio.wait_for(changed.wait(), 10)
        finally:
            watch.stop()
        return fired

    assert asyncio.run(watched()) == ["seen", "seen"]
