"""Zones as data: loading, layering and validation. Pure: no root, no kernel."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nm_zones.config.load import ZONE_KEYS, load
from nm_zones.config.model import Problem
from nm_zones.doors.install import package_paths
from nm_zones.paths import Paths
from tests.harness.lab import REPO, base_env

SHIPPED_ZONES = [
    "block",
    "dmz",
    "docker",
    "drop",
    "external",
    "home",
    "internal",
    "libvirt",
    "nm-shared",
    "public",
    "trusted",
    "work",
]


def write(path, text: str | bytes) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as stream:
        stream.write(text.encode() if isinstance(text, str) else text)
    os.chmod(path, 0o644)
    return str(path)


@pytest.fixture
def etc(tmp_path):
    os.chmod(tmp_path, 0o755)
    return tmp_path


def load_with(etc, zones=None, services=None, cmap=None):
    for name, text in (zones or {}).items():
        write(etc / "zones.d" / f"{name}.yaml", text)
    for name, text in (services or {}).items():
        write(etc / "services.d" / f"{name}.yaml", text)
    if cmap is not None:
        write(etc / "connections-map.yaml", cmap)
    return load(Paths(config=str(etc), state=str(etc / "state")))


def messages(result) -> list[str]:
    return [f"{os.path.basename(p.file)}:{p.line}: {p.key}: {p.message}" for p in result.problems]


def only(result) -> Problem:
    assert len(result.problems) == 1, messages(result)
    return result.problems[0]


# -- the shipped configuration -----------------------------------------------------------


def test_shipped_config_is_valid(etc):
    result = load_with(etc)
    assert result.problems == []
    assert sorted(result.config.zones) == SHIPPED_ZONES
    assert len(result.config.services) >= 45
    assert result.config.connections_map.default_zone == "public"
    assert result.config.connections_map.connections == ()
    assert "lo" in result.config.connections_map.exempt_interfaces


def test_shipped_zones_follow_the_proposal(etc):
    zones = load_with(etc).config.zones
    assert zones["trusted"].target == "accept"
    assert zones["block"].target == "reject"
    assert zones["drop"].target == "drop"
    assert zones["external"].masquerade
    for name in ("home", "internal"):
        assert set(zones[name].services) == {
            "ssh",
            "mdns",
            "samba-client",
            "ipp-client",
            "dhcpv6-client",
        }
    assert set(zones["work"].services) == {"ssh", "ipp-client", "dhcpv6-client"}
    assert set(zones["public"].services) == {"ssh", "dhcpv6-client"}
    assert set(zones["dmz"].services) == {"ssh"}
    for zone in zones.values():
        assert zone.description


def test_service_catalog_facts(etc):
    services = load_with(etc).config.services
    assert dict(services["mdns"].destination) == {"ipv4": "224.0.0.251/32", "ipv6": "ff02::fb/128"}
    assert [str(p) for p in services["kdeconnect"].ports] == ["1714-1764/tcp", "1714-1764/udp"]
    assert [str(p) for p in services["upnp-client"].source_ports] == ["1900/udp"]
    assert services["ftp"].helpers == ("ftp",)
    assert services["ipsec"].protocols == ("esp", "ah")


# -- layering ------------------------------------------------------------------------------


def test_admin_zone_overrides_shipped_file_by_file(etc):
    result = load_with(etc, zones={"public": "services: [http]\n", "lab": "ports: [8080/tcp]\n"})
    assert result.problems == []
    assert result.config.zones["public"].services == ("http",)
    assert result.config.zones["home"].services[0] == "ssh"  # untouched
    assert str(result.config.zones["lab"].ports[0]) == "8080/tcp"


def test_admin_service_overrides_and_adds(etc):
    result = load_with(
        etc,
        services={"ssh": "ports: [2222/tcp]\n", "game": "ports: [7777/udp]\n"},
        zones={"lab": "services: [ssh, game]\n"},
    )
    assert result.problems == []
    assert str(result.config.services["ssh"].ports[0]) == "2222/tcp"
    assert result.config.zones["lab"].services == ("ssh", "game")


def test_backup_and_hidden_files_are_ignored(etc):
    write(etc / "zones.d" / "public.yaml~", "target: nonsense\n")
    write(etc / "zones.d" / ".public.yaml", "target: nonsense\n")
    write(etc / "zones.d" / "public.yaml.dpkg-old", "target: nonsense\n")
    assert load_with(etc).problems == []


# -- validation: one precise line per problem --------------------------------------------

CASES = [
    # (zone file text, expected key, expected message part)
    ("targte: drop\n", "targte", "unknown key (did you mean 'target'?)"),
    ("services: [ssh, sshh]\n", "services[1]", "unknown service 'sshh' (did you mean 'ssh'?)"),
    ("ports: [0/tcp]\n", "ports[0]", "port 0 is out of range (1-65535)"),
    ("ports: [70000/udp]\n", "ports[0]", "port 70000 is out of range (1-65535)"),
    ("ports: [2000-1000/tcp]\n", "ports[0]", "range 2000-1000 is reversed (write 1000-2000)"),
    ("ports: [22]\n", "ports[0]", "22 has no protocol (add one: 22/tcp or 22/udp)"),
    ("ports: [22/icmp]\n", "ports[0]", "unknown protocol 'icmp'"),
    ("ports: [ssh]\n", "ports[0]", "'ssh' is not a port (as in 22/tcp or 60000-61000/udp)"),
    ("ports: [\uff18\uff10/tcp]\n", "ports[0]", "is not a port (ASCII digits only, as in 22/tcp)"),
    ("ports: [8\u0660/tcp]\n", "ports[0]", "is not a port (ASCII digits only"),
    (
        "forward-ports:\n  - {port: 80/tcp, to-port: \uff18\uff10}\n",
        "forward-ports[0].to-port",
        "is not a port number (1-65535)",
    ),
    ("ports: 22/tcp\n", "ports", "must be a list, as in ports: [ ... ]"),
    ("target: dorp\n", "target", "unknown target 'dorp' (did you mean 'drop'?)"),
    ("masquerade: yes please\n", "masquerade", "must be true or false, not 'yes please'"),
    ("log-denied: 1\n", "log-denied", "must be true or false, not 1"),
    ("description: [a, b]\n", "description", "must be text"),
    ("protocols: [grr]\n", "protocols[0]", "unknown protocol 'grr' (did you mean 'gre'?)"),
    (
        "icmp-blocks: [echo-requst]\n",
        "icmp-blocks[0]",
        "unknown ICMP type 'echo-requst' (did you mean 'echo-request'?)",
    ),
    ("forward-ports:\n  - {port: 80/tcp}\n", "forward-ports[0]", "needs to-port, to-addr or both"),
    (
        "forward-ports:\n  - {port: 80/tcp, to-port: 99999}\n",
        "forward-ports[0].to-port",
        "99999 is not a port number (1-65535)",
    ),
    (
        "forward-ports:\n  - {port: 80/tcp, to-addr: 10.0.0.300}\n",
        "forward-ports[0].to-addr",
        "'10.0.0.300' is not an IPv4 or IPv6 address",
    ),
    ("forward-ports:\n  - {to-port: 8080}\n", "forward-ports[0].port", "missing"),
    ("target: drop\ntarget: accept\n", "target", "duplicate key (first given on line 1)"),
    ("- ssh\n- http\n", "", "a zone file must be a mapping of keys"),
    (
        "services: !!python/object/apply:os.system [echo hacked]\n",
        "services",
        "YAML tag tag:yaml.org,2002:python/object/apply:os.system is not allowed",
    ),
    ("description: !!binary aGVsbG8=\n", "description", "YAML tag tag:yaml.org,2002:binary"),
    ("services: [ssh\n", "", "not valid YAML"),
    # sources: addresses and networks only; hostile text never reaches a rule
    ("sources: 10.0.0.1\n", "sources", "must be a list, as in sources: [ ... ]"),
    ("sources: [10.0.0.300]\n", "sources[0]", "'10.0.0.300' is not an IPv4 or IPv6 address"),
    ("sources: ['fd00::/129']\n", "sources[0]", "'fd00::/129' is not an IPv4 or IPv6 address"),
    ("sources: ['10.0.0.1 -j ACCEPT']\n", "sources[0]", "is not an IPv4 or IPv6 address"),
    ("sources: ['!10.0.0.1']\n", "sources[0]", "is not an IPv4 or IPv6 address"),
    ("sources: [ipset:x]\n", "sources[0]", "is not an IPv4 or IPv6 address"),
    ("sources: ['00:11:22:33:44:55']\n", "sources[0]", "is not an IPv4 or IPv6 address"),
    ("sources: ['']\n", "sources[0]", "is not an IPv4 or IPv6 address"),
    ("sources: [true]\n", "sources[0]", "must be an address or network"),
    ("sources: [{a: b}]\n", "sources[0]", "must be an address or network"),
]


@pytest.mark.parametrize(("text", "key", "message"), CASES, ids=[c[1] or c[2] for c in CASES])
def test_zone_validation_message(etc, text, key, message):
    problem = only(load_with(etc, zones={"lab": text}))
    assert problem.file == str(etc / "zones.d" / "lab.yaml")
    assert problem.key == key
    assert message in problem.message
    assert problem.line >= 1


def test_sources_are_canonical_in_both_families(etc):
    text = "sources: [10.0.0.5, 10.1.2.3/16, 'FD00::7', 'fd00:1::9/64', 10.0.0.5/32]\n"
    result = load_with(etc, zones={"lab": text})
    assert not result.problems
    assert result.config.zones["lab"].sources == (
        "10.0.0.5/32",
        "10.1.0.0/16",
        "fd00::7/128",
        "fd00:1::/64",
    )


def test_a_source_in_two_zones_breaks_the_second(etc):
    """Which zone the source gets would be a guess: the second file is not used (firewalld:
    ZONE_CONFLICT); each problem names the file and the other zone."""
    result = load_with(
        etc, zones={"alpha": "sources: [10.9.9.9]\n", "beta": "sources: ['10.9.9.9/32']\n"}
    )
    assert "beta" in result.broken_zones and "beta" not in result.config.zones
    (problem,) = [p for p in result.problems if p.key == "sources"]
    assert problem.file.endswith("beta.yaml")
    assert "source 10.9.9.9/32 is already in zone 'alpha'" in problem.message


def test_problem_names_the_line_of_the_item(etc):
    problem = only(load_with(etc, zones={"lab": "description: x\nports:\n  - 22/tcp\n  - 0/udp\n"}))
    assert (problem.line, problem.key) == (4, "ports[1]")
    assert str(problem).endswith("lab.yaml:4: ports[1]: port 0 is out of range (1-65535)")


def test_zone_names(etc):
    problem = only(load_with(etc, zones={"a-very-long-zone-name-x": "target: drop\n"}))
    assert "is not valid (1-17 letters, digits, '-' or '_'" in problem.message
    os.unlink(problem.file)
    problem = only(load_with(etc, zones={"bad name": ""}))
    assert "zone name 'bad name' is not valid" in problem.message
    os.unlink(problem.file)
    assert load_with(etc, zones={"exactly17chars_ok": "target: drop\n"}).problems == []


def test_file_over_one_mebibyte(etc):
    problem = only(load_with(etc, zones={"big": "# " + "x" * (1024 * 1024) + "\n"}))
    assert "larger than 1 MiB" in problem.message


def test_bytes_that_are_not_utf8(etc):
    problem = only(load_with(etc, zones={"latin": b"description: caf\xe9\n"}))
    assert problem.message == "bytes that are not UTF-8 (save the file as UTF-8)"
    assert problem.line == 1


def test_alias_bomb_is_refused(etc):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):
        bomb += (
            f"{'abcdefghij'[i]}: &{'abcdefghij'[i]} ["
            + ", ".join([f"*{'abcdefghij'[i - 1]}"] * 10)
            + "]\n"
        )
    problem = only(load_with(etc, zones={"bomb": bomb}))
    assert "too large or too deeply nested" in problem.message


def test_service_validation(etc):
    result = load_with(
        etc,
        services={
            "s1": "ports: [80/tcp]\ndestination: {ipv4: 10.0.0.0/33}\n",
            "s2": "helpers: [ftpp]\nports: [21/tcp]\n",
            "s3": "destination: {ipv5: '::1'}\n",
            "s4": "destination: {ipv4: 'ff02::fb'}\n",
        },
    )
    text = "\n".join(messages(result))
    assert "s1.yaml:2: destination.ipv4: '10.0.0.0/33' is not an ipv4 address or network" in text
    assert "s2.yaml:1: helpers[0]: unknown conntrack helper 'ftpp' (did you mean 'ftp'?)" in text
    assert "s3.yaml:1: destination.ipv5: unknown family (did you mean 'ipv6'?)" in text
    assert "s4.yaml:1: destination.ipv4: ff02::fb is not an ipv4 address" in text


def test_zone_using_a_broken_service_is_broken_too(etc):
    result = load_with(
        etc, services={"game": "ports: [0/udp]\n"}, zones={"lab": "services: [game]\n"}
    )
    assert "lab" in result.broken_zones
    assert "service 'game' cannot be loaded (see its own file)" in "\n".join(messages(result))


def test_map_validation(etc):
    result = load_with(
        etc,
        cmap=(
            "default-zone: pubic\nwired-zone: home\nwireless-zone: nope\n"
            "connections:\n  Cafe: drpo\n  ok-one: work\nexempt-interfaces: [lo, 'bad name']\n"
            "defualt-zone: x\n"
        ),
    )
    text = "\n".join(messages(result))
    assert (
        "connections-map.yaml:8: defualt-zone: unknown key (did you mean 'default-zone'?)" in text
    )
    assert "connections-map.yaml:7: exempt-interfaces[1]: 'bad name' is not an interface" in text
    # the broken map is replaced by the shipped one, which is valid
    assert result.config.connections_map.default_zone == "public"


def test_map_naming_zones_that_do_not_exist(etc):
    result = load_with(
        etc, cmap="default-zone: pubic\nwireless-zone: nope\nconnections:\n  Cafe: drpo\n"
    )
    text = "\n".join(messages(result))
    assert (
        "connections-map.yaml:1: default-zone: zone 'pubic' does not exist (did you mean "
        "'public'?)" in text
    )
    assert "connections-map.yaml:2: wireless-zone: zone 'nope' does not exist" in text
    assert (
        "connections-map.yaml:4: connections.Cafe: zone 'drpo' does not exist (did you mean "
        "'drop'?)" in text
    )


def test_map_that_is_not_a_mapping(etc):
    problem = only(load_with(etc, cmap="- public\n"))
    assert "a connections map file must be a mapping of keys" in problem.message


def test_insecure_admin_files_are_refused_when_root(etc):
    if os.geteuid() != 0:
        pytest.skip("ownership rules apply to root only")
    path = write(etc / "zones.d" / "public.yaml", "target: accept\n")
    os.chmod(path, 0o666)
    result = load_with(etc)
    assert "public" in result.broken_zones
    assert "writable by group or others (chmod go-w" in result.broken_zones["public"][0].message
    os.chmod(path, 0o644)
    os.chown(path, 1234, 0)
    assert "not owned by root" in load_with(etc).broken_zones["public"][0].message
    os.chown(path, 0, 0)
    os.chmod(etc / "zones.d", 0o777)
    assert "folder is writable by group or others" in str(load_with(etc).broken_zones["public"][0])
    os.chmod(etc / "zones.d", 0o755)
    write(etc / "connections-map.yaml", "default-zone: trusted\n")
    os.chmod(etc, 0o775)  # the folder holding the map: anyone in the group could swap it
    result = load_with(etc)
    assert result.config.connections_map.default_zone == "public"
    assert "folder is writable by group or others" in str(result.map_broken)


# -- the check command --------------------------------------------------------------------

BROKEN_FOLDER = {
    "unknown-key": "servics: [ssh]\n",
    "unknown-service": "services: [shh]\n",
    "port-zero": "ports: [0/tcp]\n",
    "port-high": "ports: [65536/tcp]\n",
    "reversed": "ports: [20-10/udp]\n",
    "no-protocol": "ports: ['22']\n",
    "bad-target": "target: refuse\n",
    "wrong-type": "masquerade: maybe\n",
    "duplicate": "target: drop\ntarget: drop\n",
    "not-mapping": "just text\n",
    "python-tag": "target: !!python/name:os.system\n",
}


def run_check(etc, iptables: str = "legacy") -> subprocess.CompletedProcess:
    """`nm-zones check`, with an `iptables` on PATH that says it is the `iptables` variant
    (legacy or nf_tables) this machine may or may not have."""
    tools = etc.parent / f"{etc.name}-tools"
    tools.mkdir(exist_ok=True)
    stub = tools / "iptables"
    stub.write_text(f"#!/bin/sh\necho 'iptables v1.8.9 ({iptables})'\n")
    stub.chmod(0o755)
    env = base_env(NM_ZONES_CONFIG_DIR=str(etc), NM_ZONES_STATE_DIR=str(etc / "state"))
    env["PATH"] = f"{tools}:{env['PATH']}"
    return subprocess.run(
        [sys.executable, "-m", "nm_zones", "check"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
    )


@pytest.mark.parametrize("backend", ["iptables", "nftables"])
def test_check_warns_when_iptables_is_the_nft_variant_and_rules_are_legacy(etc, backend):
    write(etc / "nm-zones.yaml", f"backend: {backend}\n")
    result = run_check(etc, iptables="nf_tables")
    assert result.returncode == 0
    if backend == "iptables":
        assert "`iptables` is the nft variant" in result.stderr
        assert len(result.stderr.splitlines()) == 1
    else:
        assert result.stderr == ""
    assert run_check(etc, iptables="legacy").stderr == ""


@pytest.mark.parametrize("value", ["ipfw", "yes", "[nftables]"])
def test_a_backend_that_does_not_exist_is_refused_with_file_and_line(etc, value):
    write(etc / "nm-zones.yaml", f"# settings\nbackend: {value}\n")
    result = run_check(etc)
    assert result.returncode == 2
    assert "nm-zones.yaml:2: backend:" in result.stderr, result.stderr


def test_check_reports_one_line_per_problem(etc):
    for name, text in BROKEN_FOLDER.items():
        write(etc / "zones.d" / f"{name}.yaml", text)
    write(etc / "zones.d" / "too-big.yaml", "#" * (1024 * 1024 + 1))
    write(etc / "zones.d" / "latin1.yaml", b"description: \xff\n")
    write(etc / "zones.d" / "name with space.yaml", "target: drop\n")
    write(etc / "connections-map.yaml", "default-zone: nowhere\n")
    result = run_check(etc)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert "Traceback" not in result.stderr
    names = [*BROKEN_FOLDER, "too-big", "latin1", "name with space", "connections-map"]
    for name in names:
        hits = [line for line in lines if f"/{name}.yaml:" in line]
        assert len(hits) == 1, (name, lines)
    assert len(lines) == len(names)


def test_check_passes_on_shipped_config(etc):
    result = run_check(etc)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_check_and_reload_name_a_yml_file_they_ignore(lab):
    etc = pathlib.Path(lab.config_dir)
    write(etc / "zones.d" / "lab.yml", "target: accept\n")
    write(etc / "services.d" / "web.yml", "ports: [80/tcp]\n")
    write(etc / "zones.d" / ".hidden.yml", "target: accept\n")
    result = run_check(etc)
    assert result.returncode == 0 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"nm-zones: {etc}/zones.d/lab.yml: ignored: only files named NAME.yaml are read",
        f"nm-zones: {etc}/services.d/web.yml: ignored: only files named NAME.yaml are read",
    ]
    reload = lab.nm_zones("reload")
    assert reload.stderr == result.stderr
    assert "lab" not in load_with(etc).config.zones


def test_an_admin_map_overrides_the_shipped_one_key_by_key(etc):
    shipped = load_with(etc).config.connections_map
    assert "docker*" in shipped.exempt_interfaces
    for text in ("", "# nothing set\n", "wired-zone: home\n"):
        result = load_with(etc, cmap=text)
        assert result.problems == [], text
        cmap = result.config.connections_map
        assert cmap.exempt_interfaces == shipped.exempt_interfaces
        assert cmap.default_zone == shipped.default_zone
    assert cmap.wired_zone == "home"
    cmap = load_with(etc, cmap="exempt-interfaces: [lo]\n").config.connections_map
    assert cmap.exempt_interfaces == ("lo",) and cmap.default_zone == "public"
    assert messages(load_with(etc, cmap="[a list]\n"))[0].startswith("connections-map.yaml:1: ")


# -- property-based: any input ends in a config or clean problems ----------------------

yaml_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-70000, 70000)
    | st.text(max_size=12)
    | st.sampled_from(
        [
            "22/tcp",
            "1-2/udp",
            "ssh",
            "drop",
            "accept",
            "echo-request",
            "gre",
            "10.0.0.1",
            "fe80::/64",
        ]
    ),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["port", "to-port", "to-addr", "ipv4", "ipv6", "x"]),
            children,
            max_size=3,
        )
    ),
    max_leaves=12,
)
zone_docs = st.dictionaries(
    st.sampled_from([*ZONE_KEYS, "bogus"]),
    yaml_values,
    max_size=6,
)


def _assert_clean(result):
    for problem in result.problems:
        assert isinstance(problem, Problem)
        assert problem.line >= 1 and problem.message


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(doc=zone_docs)
def test_random_zone_documents(etc, doc):
    result = load_with(etc, zones={"fuzz": yaml.safe_dump(doc)})
    _assert_clean(result)
    assert ("fuzz" in result.config.zones) != ("fuzz" in result.broken_zones)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=300), cut=st.integers(0, 400))
def test_mutated_bytes(etc, data, cut):
    with open(os.path.join(REPO, "zones.d", "home.yaml"), "rb") as stream:
        shipped = stream.read()
    text = shipped[:cut] + data + shipped[cut:]
    result = load_with(etc, zones={"fuzz": text}, cmap=data)
    _assert_clean(result)
    assert ("fuzz" in result.config.zones) != ("fuzz" in result.broken_zones)


# -- names the kernel sees ---------------------------------------------------------------

interface_names = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=15
)


@settings(max_examples=300, deadline=None)
@given(first=interface_names, second=interface_names)
def test_chain_names_fit_and_never_collide(first, second):
    from nm_zones.errors import UsageError
    from nm_zones.ifname import chain_name, check_interface
    from nm_zones.ruleset.layout import CHAIN_KINDS

    names = []
    for name in (first, second):
        try:
            names.append(check_interface(name))
        except UsageError:
            continue
    chains = {}
    for name in set(names):
        for kind in CHAIN_KINDS:
            chain = chain_name(name, kind)
            assert len(chain) <= 28 and chain.startswith("nmz-if-")
            assert chain not in chains, (name, chains.get(chain))
            chains[chain] = name


@settings(max_examples=500, deadline=None)
@given(name=st.one_of(interface_names, st.from_regex(r"[a-z$]{13,14}\*", fullmatch=True)))
def test_every_name_taken_is_one_nft_can_match_exactly(name):
    """A name nm-zones takes is written for nft whole, quoted, a trailing `*` escaped (nft's
    wildcard), within nft's 16 bytes: longer, nft refuses the script, and every commit of
    the table with it. A 15-byte name ending in `*` is refused instead, saying why."""
    from nm_zones.backends.nftables.backend import quote_interface
    from nm_zones.errors import UsageError
    from nm_zones.ifname import IFNAMSIZ, check_interface

    try:
        check_interface(name)
    except UsageError as error:
        if name.endswith("*") and len(name) == IFNAMSIZ and name.isascii():
            assert "nftables cannot match exactly" in str(error)
        return
    quoted = quote_interface(name)
    assert quoted.startswith('"') and quoted.endswith('"')
    assert len(quoted) - 2 <= IFNAMSIZ, quoted
    assert quoted[1:-1].replace("\\*", "*") == name


@settings(max_examples=200, deadline=None)
@given(names=st.lists(st.one_of(interface_names, st.text(max_size=20)), max_size=5))
def test_interface_indexes_over_one_socket_agree_with_if_nametoindex(names):
    """The garbage collection's one-socket lookup answers as glibc does, name by name:
    `lo`, absent names, names too long or with bytes the kernel never allows (read only)."""
    import socket

    from nm_zones.ifname import interface_indexes

    def glibc(name):
        try:
            return socket.if_nametoindex(name)
        except (OSError, ValueError, UnicodeEncodeError):
            return 0

    names = [*names, "lo", "l" + "o" * 15]
    assert interface_indexes(names) == {name: glibc(name) for name in names}
    assert interface_indexes(["lo"])["lo"] == socket.if_nametoindex("lo") > 0


def test_interface_indexes_take_only_no_such_device_for_gone(monkeypatch):
    """Pure logic: the garbage collection removes the rules of an interface found gone, so
    only ENODEV means gone; ENOMEM (say) is raised, and no interface loses its rules."""
    import errno
    import fcntl

    from nm_zones.ifname import interface_indexes

    def ioctl(fd, request, argument, errno_value=errno.ENODEV):
        raise OSError(errno_value, os.strerror(errno_value))

    monkeypatch.setattr(fcntl, "ioctl", ioctl)
    assert interface_indexes(["eth0"]) == {"eth0": 0}
    monkeypatch.setattr(fcntl, "ioctl", lambda *a: ioctl(*a, errno_value=errno.ENOMEM))
    with pytest.raises(OSError, match="Cannot allocate memory"):
        interface_indexes(["eth0"])


def test_bulk_hashing_loads_openssl_only_when_it_pays_and_gives_the_same_digests():
    """A legacy table of a few interfaces is hashed with the built-in SHA-256 (loading
    OpenSSL costs more than it saves); a large one with OpenSSL's, loaded for it: the
    recorded views must not depend on which one a process used."""
    code = (
        "import sys, os\n"
        "from nm_zones.digest import OPENSSL_WORTH, bulk_sha256, sha256\n"
        "data = os.urandom(OPENSSL_WORTH)\n"
        "small = bulk_sha256(1000)\n"
        "print(small is sha256, '_hashlib' in sys.modules)\n"
        "large = bulk_sha256(len(data))\n"
        "print(large is not sha256, '_hashlib' in sys.modules)\n"
        "print(large(data).hexdigest() == small(data).hexdigest())\n"
    )
    assert printed_by_bare_python(code).split() == ["True", "False", "True", "True", "True"]


@settings(max_examples=200, deadline=None)
@given(zone=st.from_regex(r"[A-Za-z0-9_-]{1,17}", fullmatch=True), interface=interface_names)
def test_log_prefix_fits_iptables_and_keeps_the_interface(zone, interface):
    from nm_zones.ruleset.layout import LOG_PREFIX_MAX, log_prefix

    prefix = log_prefix(zone, interface)
    assert len(prefix) <= LOG_PREFIX_MAX
    # whole, with `$` spelled `_` (nft would read `$name` as a variable)
    assert prefix.startswith("nmz ") and prefix.endswith(f" {interface.replace('$', '_')}: ")
    assert "$" not in prefix


def test_loading_the_config_does_not_import_inspect():
    """dataclasses imports inspect only for classes without a docstring; with it deferred
    (lazy.py) and a docstring on every model class, a command starts 10 ms sooner."""
    code = (
        "import sys\n"
        "from nm_zones.config.load import load\n"
        "from nm_zones.ruleset.build import compile_interface\n"
        "from nm_zones.paths import Paths\n"
        "config = load(Paths(config='/nonexistent')).config\n"
        "compile_interface('eth0', config.zones['home'], config)\n"
        "print(sorted({'inspect', 'ast', 'dis'} & set(sys.modules)))\n"
    )
    assert printed_by_bare_python(code).strip() == "[]"


def printed_by_bare_python(code: str) -> str:
    """What `code` prints in a `python -S` with only nm-zones importable, as installed."""
    result = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={"PYTHONPATH": ":".join(package_paths())},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


# -- the loaded configuration kept between commands (config/kept.py) ----------------------


def kept_paths(etc) -> Paths:
    os.makedirs(etc / "state", mode=0o755, exist_ok=True)
    return Paths(config=str(etc), state=str(etc / "state"))


def zones_command(etc) -> subprocess.CompletedProcess:
    """`nm-zones zones` as its own process, its imports listed (-X importtime)."""
    env = base_env(NM_ZONES_CONFIG_DIR=str(etc), NM_ZONES_STATE_DIR=str(etc / "state"))
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "nm_zones", "zones"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        check=True,
    )


def imported(result: subprocess.CompletedProcess) -> set[str]:
    return {line.split("|")[-1].strip() for line in result.stderr.splitlines() if "|" in line}


def test_a_command_reads_the_files_again_exactly_when_they_changed(etc):
    write(etc / "zones.d" / "lab.yaml", "description: first\ntarget: drop\n")
    kept_paths(etc)
    first = zones_command(etc)
    assert "yaml" in imported(first) and "first" in first.stdout
    again = zones_command(etc)  # nothing changed: the kept copy, PyYAML never imported
    assert "yaml" not in imported(again) and again.stdout == first.stdout
    write(etc / "zones.d" / "lab.yaml", "description: second\ntarget: drop\n")
    edited = zones_command(etc)
    assert "yaml" in imported(edited) and "second" in edited.stdout
    write(etc / "zones.d" / "new.yaml", "description: added\n")
    assert "added" in zones_command(etc).stdout
    os.unlink(etc / "zones.d" / "new.yaml")
    assert "added" not in zones_command(etc).stdout


def test_the_kept_configuration_equals_a_fresh_load(etc):
    from nm_zones.config.kept import load_kept

    write(etc / "zones.d" / "broken.yaml", "target: maybe\n")
    write(etc / "services.d" / "mine.yaml", "ports: [8080/tcp]\n")
    paths = kept_paths(etc)
    fresh = load(paths)
    assert load_kept(paths) == fresh  # read from the files, then kept
    assert os.stat(etc / "state" / "loaded").st_mode & 0o777 == 0o600
    assert load_kept(paths) == fresh  # the kept copy, problems and broken zones included
    assert load_kept(paths).broken_zones.keys() == {"broken"}


class Planted:
    """Unpickled, it leaves a file: the proof that a kept copy was trusted."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


@pytest.mark.parametrize("how", ["others can write it", "another user's", "another key"])
def test_a_kept_copy_nm_zones_did_not_write_is_never_unpickled(etc, how):
    import pickle

    from nm_zones.config import kept

    paths = kept_paths(etc)
    load = kept.load_kept(paths)
    path = etc / "state" / kept.KEPT_FILE
    marker = etc / "unpickled"
    key = pickle.loads(path.read_bytes())  # the key comes first in the file
    if how == "another key":
        key = (key[0] + 1, *key[1:])
    path.write_bytes(pickle.dumps(key) + pickle.dumps(Planted(str(marker))))
    os.chmod(path, 0o666 if how == "others can write it" else 0o600)
    if how == "another user's":
        os.chown(path, 65534, 65534)
    assert kept.load_kept(paths) == load
    assert not marker.exists()
    assert os.stat(path).st_uid == os.geteuid()  # written again, by this user
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_a_fifo_where_the_kept_copy_should_be_is_read_around(etc):
    from nm_zones.config.kept import KEPT_FILE, load_kept

    paths = kept_paths(etc)
    os.mkfifo(etc / "state" / KEPT_FILE)
    assert load_kept(paths) == load(paths)  # never blocks; replaced by a regular file
    assert os.path.isfile(etc / "state" / KEPT_FILE)
