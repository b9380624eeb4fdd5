"""Who may choose a lax zone: a zone named by a profile that a non-admin can edit is honoured
only if `user-profile-zones` lists it. The pure decision here; the real NetworkManager in
tests/test_nm.py (hook) and tests/test_service.py (D-Bus service)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nm_zones.config.load import load_settings
from nm_zones.config.model import USER_PROFILE_ZONES, Settings
from nm_zones.paths import SHIPPED_DIR
from nm_zones.resolve import Connection, _profiles, _type_before_zone, decide_zone, read_connection

ZONES = {"public", "work", "trusted", "home", "block", "drop", "dmz", "external", "internal"}
OWNED = "user:alice;"


class Map:
    """The connections map and settings as the engine's compiled config offers them."""

    def __init__(self, connections=None, wired="", settings=None):
        self.default_zone, self.wired_zone, self.wireless_zone = "public", wired, ""
        self.connections = connections or {}
        self.settings = Settings(**(settings or {})).plain()

    def zone_for(self, key):
        return self.connections.get(key)


def decide(connection, **map_args):
    decision = decide_zone(connection, Map(**map_args), ZONES)
    return decision.zone, decision.reason


@pytest.mark.parametrize("zone", ["trusted", "home", "internal"])
def test_a_user_owned_profile_cannot_name_a_lax_zone(zone):
    decision = decide_zone(
        Connection("u1", "lan", "ethernet", zone, permissions=OWNED), Map(), ZONES
    )
    assert decision.zone == "public"
    assert decision.reason == f"default-zone; zone {zone} not allowed for user-editable profiles"
    assert "user-profile-zones" in decision.warning


@pytest.mark.parametrize("zone", USER_PROFILE_ZONES)
def test_a_user_owned_profile_may_name_a_listed_zone(zone):
    owned = Connection("u1", "lan", "ethernet", zone, permissions=OWNED)
    assert decide(owned) == (zone, "nmcli connection.zone")


def test_a_system_profile_names_any_zone_unless_the_admin_says_all_are_editable():
    system = Connection("u1", "lan", "ethernet", "trusted")
    assert decide(system) == ("trusted", "nmcli connection.zone")
    zone, reason = decide(system, settings={"user_editable_profiles": "all"})
    assert zone == "public" and "zone trusted not allowed" in reason


def test_the_admin_may_allow_more_zones():
    owned = Connection("u1", "lan", "ethernet", "trusted", permissions=OWNED)
    allowed = {"user_profile_zones": (*USER_PROFILE_ZONES, "trusted")}
    assert decide(owned, settings=allowed) == ("trusted", "nmcli connection.zone")
    zone, _ = decide(owned, settings={"user_profile_zones": ()})
    assert zone == "public"


def test_a_refused_zone_gives_way_to_the_admins_map_by_uuid_and_the_wired_zone():
    owned = Connection("u1", "lan", "ethernet", "trusted", permissions=OWNED)
    zone, reason = decide(owned, connections={"u1": "home"})
    assert (zone, reason.split("; ")[0]) == ("home", "map: uuid")
    zone, reason = decide(owned, wired="work")
    assert (zone, reason.split("; ")[0]) == ("work", "default for wired")


def test_a_shared_profile_whose_zone_is_refused_keeps_nm_shared():
    hotspot = Connection("u1", "hotspot", "ethernet", "trusted", shared=True, permissions=OWNED)
    decision = decide_zone(hotspot, Map(), ZONES | {"nm-shared"})
    assert decision.zone == "nm-shared"
    assert decision.reason.startswith("shared connection; zone trusted not allowed")
    with_zone = Connection("u1", "hotspot", "ethernet", "block", shared=True, permissions=OWNED)
    assert decide_zone(with_zone, Map(), ZONES | {"nm-shared"}).zone == "block"


def test_the_name_of_a_user_owned_profile_is_its_users_choice_too():
    """A user may name their profile after an admin's map entry by name."""
    owned = Connection("u1", "Office LAN", "ethernet", permissions=OWNED)
    zone, reason = decide(owned, connections={"Office LAN": "trusted"})
    assert zone == "public" and "zone trusted not allowed" in reason
    assert decide(owned, connections={"Office LAN": "work"}) == ("work", "map: name")


def test_without_settings_no_zone_is_allowed_to_a_user_owned_profile():
    """A compiled config from before the key (or a bare fake) fails closed."""

    class Bare:
        default_zone, wired_zone, wireless_zone = "public", "", ""

        def zone_for(self, key):
            return None

    owned = Connection("u1", "lan", "ethernet", "work", permissions=OWNED)
    assert decide_zone(owned, Bare(), ZONES).zone == "public"


@pytest.mark.root  # a keyfile is believed only when root's
def test_permissions_are_read_from_the_keyfile(tmp_path):
    keyfile = tmp_path / "lan.nmconnection"
    keyfile.write_text(
        "[connection]\nid=lan\nuuid=u1\ntype=ethernet\nzone=trusted\npermissions=user:alice;\n"
    )
    connection = read_connection("u1", "lan", str(keyfile))
    assert connection.permissions == "user:alice;"
    assert decide(connection)[0] == "public"


def test_settings_file_keys(tmp_path):
    path = tmp_path / "nm-zones.yaml"
    path.write_text("user-profile-zones: [public, trusted]\nuser-editable-profiles: all\n")
    settings, problems = load_settings(str(path))
    assert problems == [] and settings.user_profile_zones == ("public", "trusted")
    assert settings.user_editable_profiles == "all"
    path.write_text("backend: auto\n")
    assert load_settings(str(path))[0].user_profile_zones == USER_PROFILE_ZONES
    path.write_text("user-profile-zones: [tru sted]\nuser-editable-profiles: some\n")
    settings, problems = load_settings(str(path))
    assert settings is None
    assert [(p.line, p.key) for p in problems] == [
        (1, "user-profile-zones[0]"),
        (2, "user-editable-profiles"),
    ]


def test_the_shipped_settings_file_says_what_the_defaults_are():
    shipped = os.path.join(SHIPPED_DIR, "nm-zones.yaml")
    settings, problems = load_settings(shipped)
    assert problems == [] and settings == Settings()


def test_assign_keeps_a_refused_zone_in_the_admins_map_by_uuid(tmp_path):
    """What `nm-zones assign` writes for a profile non-admins may edit (doors/nm.py)."""
    from nm_zones.config.load import load_map
    from nm_zones.config.mapfile import set_connection_zone
    from nm_zones.errors import UsageError
    from nm_zones.paths import Paths

    paths = Paths(config=str(tmp_path), state=str(tmp_path / "run"))
    shipped = os.path.join(SHIPPED_DIR, "connections-map.yaml")
    path = set_connection_zone(paths, "u-1", "trusted")  # no admin map yet
    set_connection_zone(paths, "u-2", "home")
    set_connection_zone(paths, "u-1", "internal")  # replaces its entry
    cmap = load_map(path, shipped)[0]
    assert dict(cmap.connections) == {"u-1": "internal", "u-2": "home"}
    assert cmap.exempt_interfaces == load_map(shipped)[0].exempt_interfaces

    (tmp_path / "connections-map.yaml").write_text(
        "default-zone: block\nconnections: {}\nwired-zone: work  # wired\n"
    )
    set_connection_zone(paths, "u-3", "trusted")
    cmap = load_map(path, shipped)[0]
    assert (dict(cmap.connections), cmap.wired_zone) == ({"u-3": "trusted"}, "work")

    flow = "default-zone: block\nconnections: {Cafe: public}\n"
    (tmp_path / "connections-map.yaml").write_text(flow)
    with pytest.raises(UsageError, match="block mapping"):
        set_connection_zone(paths, "u-4", "trusted")
    assert (tmp_path / "connections-map.yaml").read_text() == flow


# -- nmcli's terse output, whose values are not escaped --------------------------------------


def block(uuid: str, zone: str, kind: str = "802-3-ethernet", methods=("manual", "auto")) -> str:
    """One profile as `nmcli -t -f resolve.NMCLI_FIELDS connection show` prints it: its
    fields in nmcli's order, the zone as it is (a newline in it starts a line), the IP
    methods only when the profile has IP settings."""
    lines = [f"connection.uuid:{uuid}", f"connection.type:{kind}", "connection.permissions:"]
    lines += [f"connection.zone:{zone}", "connection.metered:unknown"]
    if methods:
        lines += [f"ipv4.method:{methods[0]}", f"ipv6.method:{methods[1]}"]
    return "\n".join(lines) + "\n"


def test_output_that_stops_at_an_unknown_uuid_is_believed_whole_or_empty():
    """Pure logic: nmcli prints every profile asked before the one it does not know, or
    none; output with only some of them is not believed (one of them could be forged)."""
    asked = ["a", "b", "U", "c"]
    both = _profiles(block("a", "home") + block("b", "work"), asked, "U")
    assert [(p["connection.uuid"], p["connection.zone"]) for p in both] == [
        ("a", "home"),
        ("b", "work"),
    ]
    assert _profiles(block("a", "home"), asked, "U") is None
    assert _profiles("", asked, "U") == []


FIELD_LINES = st.sampled_from(
    [
        "connection.uuid:b",
        "connection.uuid:c",
        "connection.type:802-11-wireless",
        "connection.permissions:",
        "connection.zone:trusted",
        "connection.metered:no",
        "ipv4.method:shared",
        "ipv6.method:shared",
        "",
    ]
)
FORGED_ZONES = st.lists(st.one_of(FIELD_LINES, st.text(max_size=8)), min_size=1, max_size=8).map(
    "\n".join
)


@settings(max_examples=400, deadline=None)
@given(zone=FORGED_ZONES, port=st.booleans(), position=st.integers(0, 2))
def test_no_zone_makes_nmcli_output_say_anything_else_about_any_profile(zone, port, position):
    """Pure logic, hostile input: whatever one profile's zone holds (lines of any field,
    other profiles' UUIDs, blank lines), the output of a run is either not believed or read
    as it is: every profile with its own zone, type and methods, and a profile without IP
    settings never shared. A profile whose output is not believed keeps only its type."""
    uuids = ["a", "b", "c"]
    forger = uuids[position]
    text = "".join(
        block(u, zone, methods=None if port else ("manual", "auto"))
        if u == forger
        else block(u, "home")
        for u in uuids
    )
    profiles = _profiles(text, uuids, "")
    if profiles is not None:
        read = {p["connection.uuid"]: p for p in profiles}
        assert sorted(read) == uuids
        assert read[forger]["connection.zone"] == zone.strip()
        assert "\n" not in zone.strip()  # believed only when nothing was added
        for uuid in uuids:
            assert read[uuid]["connection.type"] == "802-3-ethernet"
            if uuid == forger and port:
                assert "ipv4.method" not in read[uuid] and "ipv6.method" not in read[uuid]
            elif uuid != forger:
                assert read[uuid]["connection.zone"] == "home"
                assert read[uuid]["ipv4.method"] == "manual"
    alone = block(forger, zone, methods=None if port else ("manual", "auto"))
    assert _type_before_zone(alone, forger) == "802-3-ethernet"
