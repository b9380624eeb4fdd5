"""Block means block: a switch to a stricter zone ends the open flows the new zone forbids.

Real sessions (tests/harness/session.py) between the peer and the zoned host, IPv4 and IPv6,
across a veth pair; the switch is `nm-zones apply`, which ends flows through conntrack.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading

import pytest

from nm_zones.compiled import load as load_compiled
from nm_zones.flows import tightens
from nm_zones.paths import Paths
from tests.harness.lab import HARNESS, PYTHON

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


@pytest.mark.parametrize("zone", ["block", "drop", "home"])
def test_an_open_session_to_8080_ends_when_trusted_switches_to(lab, zone):
    link = lab.add_link()
    server = Server(lab, lab.zoned)
    lab.nm_zones("apply", link.name, "trusted")
    web = sessions(lab, lab.peer, "tcp", 8080, link)
    assert send_all(web, "before") == ["ok", "ok"]
    out = lab.nm_zones("apply", link.name, zone).stdout
    assert send_all(web, "after") == ["dead", "dead"]  # no echo within a second
    assert send_all(web, "later") == ["dead", "dead"]
    assert (server.got("before"), server.got("after"), server.got("later")) == (2, 0, 0)
    assert f"{link.name}: trusted -> {zone} (command line); ended 2 open flow(s)" in out
    assert flows_ended(lab, link.name) == 2
    assert "flows ended: 2" in lab.nm_zones("status").stdout


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
    assert server.got("after") == 2  # the ssh sessions' only
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
    assert server.got("after") == 2
    assert lab.probe([{"kind": "tcp", "address": link.ipv4, "port": 8080}]) == ["rejected"]


def test_a_switch_that_does_not_tighten_imports_no_pyroute2(lab):
    """Ending flows costs pyroute2's import (hundreds of ms): only a switch that tightens
    pays it, even with open flows in the table. Run as installed (python -S)."""
    from nm_zones.install import package_paths

    link = lab.add_link()
    Server(lab, lab.zoned)
    lab.nm_zones("apply", link.name, "public")
    ssh = sessions(lab, lab.peer, "tcp", 22, link)
    assert send_all(ssh, "open") == ["ok", "ok"]  # the table is not empty

    def imported(zone: str) -> set[str]:
        argv = [PYTHON, "-S", "-X", "importtime", "-m", "nm_zones", "apply", link.name, zone]
        result = lab.run(lab.zoned, argv, PYTHONPATH=":".join(package_paths()))
        return {
            line.rsplit("|", 1)[1].strip() for line in result.stderr.splitlines() if "|" in line
        }

    assert "pyroute2" not in imported("home")  # public -> home: laxer
    assert "pyroute2" not in imported("internal")  # the same openings
    assert "pyroute2" in imported("public")  # stricter, and the ssh flows are looked at
    assert send_all(ssh, "after") == ["ok", "ok"]


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


def test_the_setting_travels_in_the_compiled_config(tmp_path):
    paths = Paths(config=str(tmp_path / "etc"), state=str(tmp_path / "state"))
    assert load_compiled(paths, False).settings == {"end-forbidden-flows": True}
    assert check(tmp_path, "end-forbidden-flows: false\n").returncode == 0
    assert load_compiled(paths, False).settings == {"end-forbidden-flows": False}
    assert check(tmp_path, "").returncode == 0  # empty: every default
    assert load_compiled(paths, False).settings == {"end-forbidden-flows": True}
    assert check(tmp_path, "end-forbidden-flows: 1\n").returncode == 2  # broken: the shipped
    assert load_compiled(paths, False).settings == {"end-forbidden-flows": True}
