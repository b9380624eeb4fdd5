"""The pure parts of firewalld's API in nm-zones: passthrough's command line, the properties,
and the mapping between firewalld's zone settings and nm-zones' zone files (no root)."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

import pytest

from nm_zones.config.model import ForwardPort, PortRange, Zone
from nm_zones.doors import direct, firewalld_config, firewalld_props
from nm_zones.doors.busapi import INTROSPECTION, FirewallError

WEB = Zone(
    name="web",
    description="for the web",
    target="reject",
    services=("ssh",),
    ports=(PortRange(8080, 8080, "tcp"), PortRange(60000, 61000, "udp")),
    icmp_blocks=("echo-request",),
    masquerade=True,
    forward_ports=(ForwardPort(PortRange(80, 80, "tcp"), 8080, None),),
)


def code(call) -> str:
    with pytest.raises(FirewallError) as raised:
        call()
    return raised.value.code


# -- passthrough ---------------------------------------------------------------------------


def test_passthrough_runs_iptables_with_the_arguments_as_given():
    argv = direct.command_line("ipv4", ["-t", "nat", "-C", "POSTROUTING", "-j", "x; rm -rf /"])
    assert argv[0].endswith("/iptables")
    assert argv[1:] == ["-w10", "-t", "nat", "-C", "POSTROUTING", "-j", "x; rm -rf /"]
    assert direct.command_line("ipv6", ["--wait", "-L"])[0].endswith("/ip6tables")
    assert direct.command_line("ipv6", ["--wait", "-L"])[1:] == ["--wait", "-L"]
    assert direct.command_line("ipv4", ["-w", "-L"])[1:] == ["-w", "-L"]


def test_passthrough_refuses_what_it_does_not_run():
    assert code(lambda: direct.command_line("eb", ["-L"])) == "INVALID_IPV"
    assert code(lambda: direct.command_line("arp", ["-L"])) == "INVALID_IPV"
    assert code(lambda: direct.command_line("ipv4", [])) == "INVALID_PASSTHROUGH"
    assert code(lambda: direct.command_line("ipv4", ["-L"] * 300)) == "INVALID_PASSTHROUGH"
    assert code(lambda: direct.command_line("ipv4", ["x" * 70000])) == "INVALID_PASSTHROUGH"
    assert code(lambda: direct.command_line("ipv4", ["a\0b"])) == "INVALID_PASSTHROUGH"
    with pytest.raises(FirewallError) as raised:
        direct.command_line("eb", ["-L"])
    assert "nm-zones does not run ebtables" in str(raised.value)


# -- properties ----------------------------------------------------------------------------


def test_properties_have_firewalld_names_and_types():
    props = firewalld_props.properties()
    assert list(props)[:12] == [
        "version",
        "interface_version",
        "state",
        "IPv4",
        "IPv6",
        "IPv6_rpfilter",
        "BRIDGE",
        "IPSet",
        "IPSetTypes",
        "nf_conntrack_helper_setting",
        "nf_conntrack_helpers",
        "nf_nat_helpers",
    ]
    assert props["state"] == ("s", "RUNNING")
    assert props["nf_nat_helpers"] == ("a{sas}", {})
    assert firewalld_props.get("org.fedoraproject.FirewallD1", "BRIDGE") == ("b", False)
    assert firewalld_props.get_all("org.fedoraproject.FirewallD1.zone") == {}
    for interface, name, error in (
        ("org.fedoraproject.FirewallD1", "nope", firewalld_props.INVALID_ARGS),
        ("org.fedoraproject.FirewallD1.direct", "x", firewalld_props.INVALID_ARGS),
        ("org.example.Other", "x", firewalld_props.UNKNOWN_INTERFACE),
    ):
        with pytest.raises(firewalld_props.PropertyError) as raised:
            firewalld_props.get(interface, name)
        assert raised.value.name == error
    with pytest.raises(firewalld_props.PropertyError) as raised:
        firewalld_props.refuse_set("org.fedoraproject.FirewallD1", "state")
    assert raised.value.name == firewalld_props.READ_ONLY


def test_introspection_lists_the_properties_inside_the_main_interface():
    from nm_zones.doors.service import firewalld_introspection

    root = ElementTree.fromstring(firewalld_introspection(INTROSPECTION).split("\n", 2)[2])
    interfaces = {i.get("name"): i for i in root.findall("interface")}
    main = interfaces["org.fedoraproject.FirewallD1"]
    assert {p.get("name") for p in main.findall("property")} >= {"state", "version", "IPv6"}
    assert "org.freedesktop.DBus.Properties" in interfaces
    direct_methods = {m.get("name") for m in interfaces[direct.DIRECT_INTERFACE]}
    assert direct_methods == {"passthrough", "getAllPassthroughs", "removeAllPassthroughs"}
    zone_methods = {m.get("name") for m in interfaces["org.fedoraproject.FirewallD1.zone"]}
    assert {"getInterfaces", "queryInterface", "changeZoneOfInterface"} <= zone_methods
    assert [n.get("name") for n in root.findall("node")] == ["config"]


# -- zone settings -------------------------------------------------------------------------


def test_a_zone_as_firewalld_settings():
    settings = firewalld_config.settings_tuple(WEB, [])
    assert len(settings) == 16
    assert settings[:5] == ("", "web", "for the web", False, "%%REJECT%%")
    assert settings[5:10] == (
        ["ssh"],
        [("8080", "tcp"), ("60000-61000", "udp")],
        ["echo-request"],
        True,
        [("80", "tcp", "8080", "")],
    )
    as_dict = firewalld_config.settings_dict(WEB, ["eth0"])
    assert as_dict["target"] == ("s", "%%REJECT%%")
    assert as_dict["interfaces"] == ("as", ["eth0"])
    assert as_dict["forward_ports"] == ("a(ssss)", [("80", "tcp", "8080", "")])


def test_firewalld_settings_as_a_zone_file_round_trip():
    values = firewalld_config.from_tuple(firewalld_config.settings_tuple(WEB, []))
    document = firewalld_config.zone_document(values)
    assert document == {
        "description": "for the web",
        "target": "reject",
        "services": ["ssh"],
        "ports": ["8080/tcp", "60000-61000/udp"],
        "icmp-blocks": ["echo-request"],
        "masquerade": True,
        "forward-ports": [{"port": "80/tcp", "to-port": 8080}],
    }
    text = firewalld_config.zone_text("web", document)
    assert text.startswith("# zone web: written by nm-zones serve")


def test_dockers_settings_arrive_as_variants():
    """Docker (godbus) sends addZone's settings as an array of variants (`sav`)."""
    docker = [
        ("s", "1.0"),
        ("s", "docker"),
        ("s", "zone for docker bridge network interfaces"),
        ("b", False),
        ("s", "ACCEPT"),
        ("as", []),
        ("aav", []),
        ("as", []),
        ("b", False),
        ("aav", []),
        ("as", []),
        ("as", []),
        ("as", []),
        ("as", []),
        ("aav", []),
        ("b", False),
    ]
    values = firewalld_config.from_tuple(docker)
    assert firewalld_config.zone_document(values) == {
        "description": "zone for docker bridge network interfaces",
        "target": "accept",
    }


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("rules_str", ["rule family=ipv4 accept"], "INVALID_RULE"),
        ("source_ports", [("53", "udp")], "INVALID_PORT"),
        ("icmp_block_inversion", True, "INVALID_ICMPTYPE"),
        ("interfaces", ["eth0"], "INVALID_INTERFACE"),
        ("sources", ["10.0.0.0/8"], "INVALID_ADDR"),
        ("target", "CONTINUE", "INVALID_TARGET"),
    ],
)
def test_what_nm_zones_lacks_is_refused_with_a_firewalld_code(key, value, expected):
    values = firewalld_config.from_tuple(firewalld_config.settings_tuple(WEB, []))
    values[key] = value
    assert code(lambda: firewalld_config.zone_document(values)) == expected


def test_malformed_settings_are_refused():
    assert code(lambda: firewalld_config.from_tuple(["1.0", "x"])) == "INVALID_SETTING"
    assert code(lambda: firewalld_config.from_dict({"rules": ("as", [])})) == "INVALID_SETTING"
    assert firewalld_config.from_dict({"target": ("s", "DROP")}) == {"target": "DROP"}


def test_object_numbers_stay_with_their_zone():
    numbers = firewalld_config.ObjectNumbers()
    first = numbers.path("zone", "public")
    assert numbers.path("zone", "docker") != first
    assert numbers.path("zone", "public") == first
    assert numbers.name(first) == ("zone", "public")
    assert numbers.name(f"{firewalld_config.CONFIG_PATH}/zone/99") is None


@pytest.mark.root  # install refuses paths root does not own
def test_the_direct_action_is_installed_and_never_kept(tmp_path):
    """`nm-zones install` (and the Debian package, from the same file) ships
    org.nm-zones.direct with auth_admin: each passthrough by a user asks again."""
    import subprocess
    import sys

    from tests.harness.lab import base_env

    root = str(tmp_path / "image")
    run = [sys.executable, "-m", "nm_zones", "install", "--root", root]
    result = subprocess.run(run, env=base_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    actions = ElementTree.parse(f"{root}/usr/share/polkit-1/actions/org.nm-zones.policy")
    direct_action = next(a for a in actions.iter("action") if a.get("id") == direct.ACTION_DIRECT)
    defaults = {d.tag: d.text for d in direct_action.find("defaults")}
    assert set(defaults.values()) == {"auth_admin"}


# -- firewall-cmd's runtime zone methods (doors/firewalld_zone.py) -------------------------


def test_signatures_split_into_complete_types():
    from nm_zones.doors.firewalld_zone import split_signature

    assert split_signature("sssi") == ["s", "s", "s", "i"]
    assert split_signature("sa{sv}") == ["s", "a{sv}"]
    assert split_signature("aas") == ["aas"]
    assert split_signature("sa(ssss)b") == ["s", "a(ssss)", "b"]
    assert split_signature("") == []


def test_the_runtime_methods_are_introspected_with_firewalld_signatures():
    from nm_zones.doors.service import firewalld_introspection

    root = ElementTree.fromstring(firewalld_introspection(INTROSPECTION))
    zone = root.find("interface[@name='org.fedoraproject.FirewallD1.zone']")
    add_port = zone.find("method[@name='addPort']")
    assert [(a.get("type"), a.get("direction")) for a in add_port] == [
        ("s", "in"),
        ("s", "in"),
        ("s", "in"),
        ("i", "in"),
        ("s", "out"),
    ]
    main = root.find("interface[@name='org.fedoraproject.FirewallD1']")
    assert main.find("method[@name='authorizeAll']") is not None
    assert main.find("method[@name='runtimeToPermanent']") is not None


def test_interfaces_bound_before_they_exist_answer_as_firewalld():
    from nm_zones.doors.firewalld_zone import PENDING_LIMIT, PendingInterfaces

    pending = PendingInterfaces()
    pending.add("work", "veth9", adding=True)
    assert code(lambda: pending.add("work", "veth9", adding=True)) == "ZONE_ALREADY_SET"
    assert code(lambda: pending.add("home", "veth9", adding=True)) == "ZONE_CONFLICT"
    pending.add("home", "veth9", adding=False)  # changeZoneOfInterface moves it
    assert pending.in_zone("home") == ["veth9"]
    assert code(lambda: pending.remove("work", "veth9")) == "ZONE_CONFLICT"
    assert pending.remove("", "veth9") == "home"
    assert code(lambda: pending.remove("", "veth9")) == "UNKNOWN_INTERFACE"
    for number in range(PENDING_LIMIT):
        pending.add("work", f"v{number}", adding=True)
    assert code(lambda: pending.add("work", "one-more", adding=True)) == "INVALID_INTERFACE"


# -- runtime removals (ruleset/runtime_features.py) -----------------------------------------


def test_a_runtime_removal_compiles_the_zone_without_it():
    """`--remove-service=ssh` at runtime for what the zone's file lists: the zone as compiled
    until reload lacks it; an addition of the same kind still adds."""
    from nm_zones.ruleset.runtime_features import (
        MASQUERADE,
        forward_what,
        is_feature,
        removed,
        with_features,
        without,
    )

    gone = (
        without("ssh"),
        without("8080/tcp"),
        without(MASQUERADE),
        without(forward_what("80", "tcp", "8080", "")),
    )
    assert all(is_feature(what) for what in gone) and removed(gone[0]) == "ssh"
    assert removed("ssh") == "" and removed(MASQUERADE) == ""
    zone = with_features(WEB, gone)
    assert zone.services == () and zone.ports == (PortRange(60000, 61000, "udp"),)
    assert not zone.masquerade and zone.forward_ports == ()
    back = with_features(WEB, (*gone, MASQUERADE, forward_what("80", "tcp", "8080", "")))
    assert back.masquerade and back.forward_ports == WEB.forward_ports
    assert with_features(WEB, (without("60000/udp"),)).ports == WEB.ports  # exact entries only


def test_status_lists_a_runtime_removal_instead_of_what_it_removed():
    from nm_zones.doors.detail import open_list

    view = {
        "services": {"ssh": {"ports": ["22/tcp"], "source-ports": [], "protocols": []}},
        "ports": ["8080/tcp"],
        "protocols": [],
        "all_services": {},
    }
    entries = open_list(view, [("without:ssh", 0, 0, "zone")], now=100.0)
    assert [(e["what"], e["from"], e["opens"]) for e in entries] == [
        ("8080/tcp", "zone", ["8080/tcp"]),
        ("without:ssh", "runtime", []),
    ]
