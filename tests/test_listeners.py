"""A question when a program is refused (doors/listeners.py, doors/listeners_bus.py,
desktop/listener_question.py) and the names people know programs by (appnames.py).

For real: the NetworkManager sandbox on the nftables backend, cabled to network A and then
B (tests/harness/networks.py), `nm-zones serve`, the notification agent under dunst; a
listener started in a cgroup shaped like a user's app scope (under a scratch cgroup of the
machine's cgroup v2 tree, which the sandbox mounts at /sys/fs/cgroup); probes from the
network's peer, IPv4 and IPv6."""

from __future__ import annotations

import ast
import os
import secrets

import pytest

from tests.harness.cgroups import cgroup2_mount, procs_of
from tests.harness.lab import base_env, start_listener, wait_for

DESKTOP_FILE = """[Desktop Entry]
Type=Application
Name=Music Box
Name[de]=Musikkiste
Icon=music-box
Exec=musicbox
"""

# -- names people know (pure) ---------------------------------------------------------------


@pytest.mark.pure
def test_an_app_scope_is_named_by_its_desktop_file(tmp_path):
    from nm_zones.appnames import app_pattern, program_name

    applications = tmp_path / "share" / "applications"
    applications.mkdir(parents=True)
    (applications / "org.example.Music.desktop").write_text(DESKTOP_FILE)
    (applications / "foo-bar.desktop").write_text("[Desktop Entry]\nName=Foo Bar\n")
    dirs = [str(tmp_path / "nothing"), str(tmp_path / "share")]
    scope = "user.slice/user-1000.slice/user@1000.service/app.slice/"
    scope += "app-gnome-org.example.Music-4711.scope"
    assert program_name(scope, dirs) == ("Music Box", "music-box")
    assert program_name(app_pattern("app-gnome-org.example.Music-4711.scope"), dirs)[0] == (
        "Music Box"
    )
    assert program_name("app-org.example.Music@a1b2.service", dirs)[0] == "Music Box"
    assert program_name("app-foo\\x2dbar-9.scope", dirs) == ("Foo Bar", "application-x-executable")
    # no desktop file: the unit's own name, never an inode or the whole path
    assert program_name(scope.replace("Music", "Gone"), dirs)[0] == (
        "app-gnome-org.example.Gone-4711.scope"
    )


@pytest.mark.pure
def test_a_service_is_named_by_its_unit_description(tmp_path):
    from nm_zones.appnames import program_name, unit_description

    (tmp_path / "minidlna.service").write_text(
        "[Unit]\nDescription=MiniDLNA media server\n\n[Service]\nExecStart=/x\n"
    )
    (tmp_path / "getty@.service").write_text("[Unit]\nDescription=Getty on %I\n")
    dirs = (str(tmp_path / "none"), str(tmp_path))
    assert unit_description("minidlna.service", dirs) == "MiniDLNA media server"
    assert unit_description("getty@tty1.service", dirs) == "Getty on %I"
    assert program_name("system.slice/minidlna.service", [], dirs)[0] == "MiniDLNA media server"
    assert program_name("system.slice/unknown.service", [], dirs)[0] == "unknown.service"


@pytest.mark.pure
def test_session_programs_beyond_loopback_are_the_ones_asked_about():
    from nm_zones.appnames import session_uid
    from nm_zones.doors.listeners import programs
    from nm_zones.sockdiag import Listening

    music = "user.slice/user-1000.slice/user@1000.service/app.slice/app-org.x.Music-12.scope"
    paths = {10: music, 11: "system.slice/minidlna.service", 12: "user.slice/user-1000.slice"}
    sockets = [
        Listening("tcp", "::", 3689, 1000, 10),
        Listening("udp", "0.0.0.0", 5353, 1000, 10),
        Listening("tcp", "127.0.0.1", 4000, 1000, 12),  # loopback only: never asked about
        Listening("tcp", "::ffff:127.0.0.1", 4001, 1000, 12),
        Listening("tcp", "0.0.0.0", 8200, 0, 11),  # a system service
    ]
    found = programs(sockets, paths)
    assert list(found) == ["app-org.x.Music-*.scope"]
    assert found["app-org.x.Music-*.scope"]["ports"] == {"3689/tcp", "5353/udp"}
    assert session_uid(music) == 1000 and session_uid(paths[11]) is None
    assert sorted(programs(sockets, paths, "all")) == [
        "app-org.x.Music-*.scope",
        "minidlna.service",
    ]
    assert programs(sockets, paths, "none") == {}


@pytest.mark.pure
def test_what_the_zone_or_an_allowance_opens_is_not_refused():
    from nm_zones.config.load import load
    from nm_zones.doors.listeners import refused_ports
    from nm_zones.paths import Paths

    config = load(Paths(config="/nonexistent")).config
    public, trusted = config.zones["public"], config.zones["trusted"]
    app, cgroup = "app-x-*.scope", "user.slice/app-x-1.scope"
    ports = {"22/tcp", "3689/tcp", "5353/udp"}
    assert refused_ports(app, cgroup, ports, public, config, []) == ["3689/tcp", "5353/udp"]
    assert refused_ports(app, cgroup, ports, public, config, ["mdns"]) == ["3689/tcp"]
    assert refused_ports(app, cgroup, ports, public, config, ["3000-4000/tcp", "mdns"]) == []
    assert refused_ports(app, cgroup, ports, public, config, ["app:app-x-*.scope"]) == []
    assert refused_ports(app, cgroup, ports, trusted, config, []) == []


# -- for real --------------------------------------------------------------------------------

USER = "nmzdesk"


@pytest.fixture
def world(tmp_path):
    """The sandbox (nftables, cgroup2 at /sys/fs/cgroup, serving), a desktop user and
    networks A and B."""
    from tests.harness.networks import PeerNetwork
    from tests.harness.nm_sandbox import NMSandbox
    from tests.test_desktop import NEEDS_DESKTOP
    from tests.test_networks import A_MAC, B_MAC, NEEDS_NM
    from tests.test_service import reload_bus_config

    if NEEDS_DESKTOP or NEEDS_NM or not cgroup2_mount():
        pytest.skip("needs the desktop tools, NetworkManager, dnsmasq and cgroup v2")
    nm = NMSandbox(str(tmp_path / "sandbox"))
    a = PeerNetwork(str(tmp_path), "a", A_MAC, "home.example")
    b = PeerNetwork(str(tmp_path), "b", B_MAC, "hotel.example")
    scratch = os.path.join(cgroup2_mount(), f"nmz-test-{secrets.token_hex(3)}")
    try:
        nm.start()
        nm.install_hook()
        reload_bus_config(nm)
        nm.sh("mkdir -p /etc/nm-zones && echo 'backend: nftables' > /etc/nm-zones/nm-zones.yaml")
        nm.sh("mount -t cgroup2 none /sys/fs/cgroup")
        nm.serve()
        nm.add_user(USER, "netdev")
        a.start()
        b.start()
        yield nm, a, b, scratch
    finally:
        for folder in sorted((f for f, _, _ in os.walk(scratch)), key=len, reverse=True):
            if procs_of(folder):
                with open(os.path.join(folder, "cgroup.kill"), "w") as kill:
                    kill.write("1")
                wait_for(lambda f=folder: not procs_of(f), what=f"{folder} emptied")
            os.rmdir(folder)
        a.stop()
        b.stop()
        nm.stop()


def start_in(nm, scratch: str, cgroup: str, tcp, udp):
    """A listener moved into `scratch/cgroup` (made), inside the sandbox's namespaces."""
    folder = os.path.join(scratch, cgroup)
    move = f'mkdir -p "{folder}" && echo $$ > "{folder}/cgroup.procs" && exec "$@"'
    listener = start_listener(["sh", "-c", move, "sh", *nm.enter()], base_env(), tcp, udp)
    nm.listeners.append(listener)
    return listener


def stop_in(nm, scratch: str, cgroup: str, listener) -> None:
    folder = os.path.join(scratch, cgroup)
    with open(os.path.join(folder, "cgroup.kill"), "w") as kill:  # nsenter forked it
        kill.write("1")
    listener.wait()
    nm.listeners.remove(listener)
    wait_for(lambda: not procs_of(folder), what=f"{cgroup} emptied")
    os.rmdir(folder)


def app_specs(tcp=3689, udp=3690) -> list[dict]:
    from tests.harness.networks import CLIENT, CLIENT_IPV6

    return [
        {"kind": kind, "address": address, "port": port}
        for address in (CLIENT, CLIENT_IPV6)
        for kind, port in (("tcp", tcp), ("udp", udp))
    ]


def questions(desktop, program: str) -> list[dict]:
    from tests.test_desktop import notify_calls

    return [c for c in notify_calls(desktop) if c["summary"].startswith(f"{program} is listening")]


# dunst's menu lines are `#LABEL (SUMMARY) [ID,KEY]`: the answer is picked by summary and key
# (the agent's question about the network itself has a `block` too); menu.log keeps the menus
PICK = """#!/bin/sh
tee -a {home}/menu.log | grep -m1 -e "$(cat {home}/want)"
"""


def answer(nm, desktop, home: str, program: str, key: str, answered) -> None:
    """The user picks `key` in dunst's menu for the question about `program`, until
    `answered()` (dunst may not show the question yet when first asked)."""
    nm.sh(f"echo '({program} is listening.*,{key}]' > {home}/want")

    def picked():
        desktop.run(["dunstctl", "context"])
        return wait_for_quietly(answered)

    try:
        wait_for(picked, 20, interval=0.5, what=f"the answer {key} for {program}")
    except AssertionError as failed:  # what dunst offered, what the agent and service said
        menus = nm.sh(f"cat {home}/menu.log").stdout
        with open(os.path.join(nm.tmp, "serve.log")) as serve:
            said = serve.read()[-3000:]
        raise AssertionError(
            f"{failed}\nmenus:\n{menus}\nagent:\n{desktop.log('notify.log')}\nservice:\n{said}"
        ) from None


def wait_for_quietly(condition, timeout: float = 2.0):
    try:
        return wait_for(condition, timeout, interval=0.2)
    except AssertionError:
        return None


def answers(nm) -> list[dict]:
    reply = nm.gdbus("org.nm_zones.Manager1.GetListenerAnswers")
    assert reply.returncode == 0, reply.stderr
    return ast.literal_eval(reply.stdout.strip().replace("@aa{ss} ", ""))[0]


def test_a_refused_program_is_asked_about_once_per_network_and_the_answer_holds(world):
    from tests.test_desktop import agent_session
    from tests.test_networks import connect, known, on_unknown_network, wait_reason

    nm, a, b, scratch = world
    desktop, home = agent_session(nm)
    applications = f"{home}/.local/share/applications"
    nm.sh(f"mkdir -p {applications}")
    nm.run(["sh", "-c", f"cat > {applications}/org.example.Music.desktop"], input_text=DESKTOP_FILE)
    uid = nm.sh(f"id -u {USER}").stdout.strip()
    session = f"user.slice/user-{uid}.slice/user@{uid}.service/app.slice"
    on_unknown_network(nm, a)
    [network_a] = known(nm)
    nm.run(["sh", "-c", f"cat > {home}/pick"], input_text=PICK.format(home=home))

    music = f"{session}/app-gnome-org.example.Music-1.scope"
    listener = start_in(nm, scratch, music, [3689], [3690])
    summary = "Music Box is listening on 3689/tcp, 3690/udp"
    asked = wait_for(
        lambda: questions(desktop, "Music Box"),
        10,
        what=f"the question\n{desktop.log('notify.log')}",
    )
    assert len(asked) == 1, asked
    assert asked[0]["summary"] == summary
    assert asked[0]["body"] == f"The network {network_a['label']} (zone public) refuses it."
    assert asked[0]["icon"] == "music-box"
    assert asked[0]["actions"] == [
        "allow", "Allow on this network", "hour", "Allow for an hour", "block", "Keep blocked"
    ]  # fmt: skip
    assert a.probe(app_specs()) == ["rejected"] * 4

    answer(nm, desktop, home, "Music Box", "allow", lambda: answers(nm))
    wait_for(lambda: a.probe(app_specs()) == ["accepted"] * 4, 15, what="allowed on A")
    assert a.probe(app_specs(8080, 631)) == ["rejected"] * 4  # nothing else of the zone opens
    [row] = answers(nm)
    assert (row["app"], row["key"], row["answer"]) == (
        "app-gnome-org.example.Music-*.scope", f"network:{network_a['id']}", "allow"
    )  # fmt: skip
    assert len(questions(desktop, "Music Box")) == 1  # not asked again on A

    # network B: refused there, and asked about once for B
    connect(nm, b)
    wait_reason(nm, "public", "unknown wired network")
    # (a fresh link's IPv6 address and neighbours settle a moment after `up`)
    wait_for(lambda: b.probe(app_specs()) == ["rejected"] * 4, 15, what="refused on B")
    wait_for(lambda: len(questions(desktop, "Music Box")) == 2, 10, what="the question on B")
    assert "hotel.example" in questions(desktop, "Music Box")[1]["body"]
    answer(nm, desktop, home, "Music Box", "block", lambda: len(answers(nm)) == 2)

    # restarted in a new scope: still kept blocked on B, no question; another program is
    # asked about in the same scan, so its question proves the scan happened
    stop_in(nm, scratch, music, listener)
    start_in(nm, scratch, f"{session}/app-gnome-org.example.Music-2.scope", [3689], [3690])
    start_in(nm, scratch, f"{session}/app-org.example.Other-3.scope", [5000], [])
    wait_for(lambda: questions(desktop, "app-org.example.Other-3.scope"), 10, what="Other asked")
    assert len(questions(desktop, "Music Box")) == 2
    assert b.probe(app_specs()) == ["rejected"] * 4

    # back on A: the answer for A holds again, with no question
    connect(nm, a)
    wait_reason(nm, "public", "unknown wired network")  # known, not placed
    wait_for(lambda: a.probe(app_specs()) == ["accepted"] * 4, 15, what="allowed on A again")
    assert len(questions(desktop, "Music Box")) == 2
    status = nm.nm_zones("status", "ethz0").stdout
    assert "app:app-gnome-org.example.Music-*.scope (Music Box: every port" in status, status

    # the settings window lists both answers by the program's name; Undo on A's closes it
    from tests.test_desktop import APP, Window

    desktop.program("nm_zones.desktop.settings", "settings.log")
    window = Window(desktop)
    allowed = f"allowed on network {network_a['label']} (zone public)"

    def undo_button():
        return next(
            (
                e
                for e in window.tree()
                if e["role"] == "push button" and e["name"] == f"Undo: Music Box {allowed}"
            ),
            None,
        )

    wait_for(undo_button, 30, what=f"the Programs rows\n{desktop.log('settings.log')}")
    described = {e["description"] for e in window.tree() if e["role"] == "list item"}
    assert f"Music Box: {allowed}" in described, described
    assert "Music Box: kept blocked on network hotel.example (zone public)" in described
    desktop.atspi("action", APP, undo_button()["path"], "click")
    window.wait_status(f"forgot the answer for Music Box on {network_a['label']}")
    wait_for(lambda: a.probe(app_specs()) == ["rejected"] * 4, 15, what="closed again on A")
    assert [row["key"] for row in answers(nm)] == [f"network:{known(nm)[1]['id']}"]
    assert "Traceback" not in desktop.log("notify.log") + desktop.log("settings.log")
