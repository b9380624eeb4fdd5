"""Allowances by application (`allow --app`, zone key `applications`): real listeners in
cgroups of a private cgroup v2 tree (tests/harness/cgroups.py), real packets from the peer,
IPv4 and IPv6."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from nm_zones.backends.nftables.appsets import is_cgroup2
from nm_zones.config.appname import check_app
from nm_zones.ruleset.applications import matching, set_name
from tests.harness.cgroups import CgroupSandbox, cgroup2_mount, procs_of
from tests.harness.lab import PYTHON, start_listener, wait_for
from tests.test_failsafe import write_zone

APP_PORTS = [("tcp", 9001), ("udp", 9002)]
OTHER_PORTS = [("tcp", 8080), ("udp", 631)]

pytestmark = pytest.mark.skipif(not cgroup2_mount(), reason="no cgroup v2 hierarchy")


@pytest.fixture
def sandbox(lab):
    box = CgroupSandbox(lab.zoned)
    yield box
    for process in lab.processes:
        process.kill()
        process.wait()
    lab.processes.clear()
    box.close()


def run(lab, box, *args, check=True):
    """nm-zones in the sandbox (its cgroup view and the zoned host's network)."""
    result = subprocess.run(
        [*box.enter(), PYTHON, "-m", "nm_zones", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=lab.env(),
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{args} exited {result.returncode}: {result.stdout}{result.stderr}")
    return result


def serve_in(lab, box, cgroup: str, ports) -> subprocess.Popen:
    tcp = [p for kind, p in ports if kind == "tcp"]
    udp = [p for kind, p in ports if kind == "udp"]
    process = start_listener(box.enter(cgroup), lab.env(), tcp, udp)
    lab.processes.append(process)
    return process


def stop(lab, process) -> None:
    process.kill()
    process.wait()
    lab.processes.remove(process)


def probe(lab, link, ports) -> list[str]:
    return lab.probe(
        [
            {"kind": kind, "address": address, "port": port}
            for kind, port in ports
            for address in (link.ipv4, link.ipv6)
        ]
    )


def keeper(lab, box) -> subprocess.Popen:
    """What `nm-zones serve` runs to keep the sets current, alone (no system bus here)."""
    argv = [*box.enter(), PYTHON, "-m", "nm_zones.backends.nftables.appsets"]
    process = subprocess.Popen(argv, env=lab.env())
    lab.processes.append(process)
    marker = os.path.join(lab.state_dir, "appsets.pid")
    wait_for(lambda: os.path.exists(marker), what="the keeper started")
    return process


ACCEPTED = ["accepted"] * 4
REFUSED = ["rejected"] * 4


@pytest.mark.parametrize("backend", ["nftables"])
def test_an_application_is_reached_on_its_ports_only_and_followed_across_restarts(lab, sandbox):
    link = lab.add_link()
    box = sandbox
    run(lab, box, "apply", link.name, "public")
    # the application is not running: the rule set loads all the same (an empty set)
    result = run(lab, box, "allow", "--app", "app-a", "--interface", link.name)
    assert f"{link.name} (public): app:app-a allowed" in result.stdout, result
    assert "only while `nm-zones serve` runs" in result.stdout
    assert f"set {set_name('app-a')}" in lab.nft_table()

    # the same ports served from another application are refused
    other = serve_in(lab, box, "app-b", APP_PORTS)
    assert probe(lab, link, APP_PORTS) == REFUSED
    stop(lab, other)

    box_keeper = keeper(lab, box)
    first = serve_in(lab, box, "app-a", APP_PORTS)
    serve_in(lab, box, "", OTHER_PORTS)  # the rest of the zone stays closed
    wait_for(lambda: probe(lab, link, APP_PORTS) == ACCEPTED, timeout=5, what="app-a reached")
    assert probe(lab, link, OTHER_PORTS) == REFUSED

    # restarted in a new cgroup of the same name: matched again (the keeper follows it)
    stop(lab, first)
    box.remove("app-a")
    serve_in(lab, box, "app-a", APP_PORTS)
    wait_for(lambda: probe(lab, link, APP_PORTS) == ACCEPTED, timeout=5, what="restart followed")
    # the set's elements are nm-zones' own data, outside the view: the rules are in place
    status = run(lab, box, "status", link.name, "--json", check=False)
    assert json.loads(status.stdout)["kernel"] == "in place", status

    result = run(lab, box, "revoke", "--app", "app-a", "--interface", link.name)
    assert f"{link.name} (public): app:app-a revoked" in result.stdout, result
    assert probe(lab, link, APP_PORTS) == REFUSED
    stop(lab, box_keeper)


@pytest.mark.parametrize("backend", ["nftables"])
def test_an_application_allowed_for_a_while_is_closed_by_the_kernel(lab, sandbox):
    link = lab.add_link()
    run(lab, sandbox, "apply", link.name, "public")
    serve_in(lab, sandbox, "app-a", APP_PORTS)
    run(lab, sandbox, "allow", "--app", "app-a", "--interface", link.name, "--for", "3s")
    assert probe(lab, link, APP_PORTS) == ACCEPTED
    wait_for(lambda: probe(lab, link, APP_PORTS) == REFUSED, timeout=15, what="the deadline")
    assert "iifname @nmz-until-" in lab.nft_table()  # no process ended it: the set element
    # timed out in the kernel (ruleset/allowances.py)


@pytest.mark.parametrize("backend", ["nftables"])
def test_a_permanent_application_survives_reload(lab, sandbox):
    link = lab.add_link()
    run(lab, sandbox, "apply", link.name, "public")
    serve_in(lab, sandbox, "app-a", APP_PORTS)
    result = run(lab, sandbox, "allow", "--app", "app-a", "--zone", "public", "--permanent")
    assert "app:app-a allowed permanently" in result.stdout, result
    with open(os.path.join(lab.config_dir, "zones.d", "public.yaml")) as zone:
        assert "applications:" in zone.read()
    run(lab, sandbox, "reload")
    assert probe(lab, link, APP_PORTS) == ACCEPTED
    assert probe(lab, link, OTHER_PORTS[:1]) == ["rejected"] * 2
    run(lab, sandbox, "revoke", "--app", "app-a", "--zone", "public", "--permanent")
    assert probe(lab, link, APP_PORTS) == REFUSED


@pytest.mark.parametrize("backend", ["iptables"])
def test_on_iptables_app_exits_2_and_a_zone_with_applications_warns(lab, tmp_path):
    link = lab.add_link()
    lab.listen(tcp=(22, 9001), udp=())
    lab.nm_zones("apply", link.name, "public")
    result = lab.nm_zones("allow", "--app", "app-a", "--interface", link.name, check=False)
    assert result.returncode == 2, result
    assert "--app needs the nftables backend" in result.stderr
    assert "backend: nftables" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1

    write_zone(lab, "home", "services: [ssh]\napplications: [app-a, 'app-org.x-*.scope']\n")
    result = lab.nm_zones("apply", link.name, "home")
    assert "no effect on the iptables backend" in result.stdout + result.stderr
    assert lab.probe([{"kind": "tcp", "address": link.ipv4, "port": p} for p in (22, 9001)]) == [
        "accepted",
        "rejected",
    ]
    status = lab.nm_zones("status", link.name, "--json", check=False)
    assert json.loads(status.stdout)["kernel"] == "in place", status


def test_applications_are_checked_and_matched_by_name_or_path(tmp_path):
    for folder in ("system.slice/minidlna.service", "user.slice/app.slice/app-kde-1.scope"):
        os.makedirs(tmp_path / folder)
    os.makedirs(tmp_path / "user.slice/app.slice/app-kde-1.scope/inner")
    assert matching("minidlna.service", str(tmp_path)) == ["system.slice/minidlna.service"]
    assert matching("app-kde-*.scope", str(tmp_path)) == ["user.slice/app.slice/app-kde-1.scope"]
    assert matching("/system.slice/minidlna.service", str(tmp_path)) == []  # not canonical
    assert matching(check_app("/system.slice/minidlna.service/"), str(tmp_path)) == [
        "system.slice/minidlna.service"
    ]
    for bad in ("", "../x", 'a"b', "a b"):
        with pytest.raises(ValueError):
            check_app(bad)


@pytest.mark.parametrize("backend", ["nftables"])
def test_an_element_added_by_someone_else_is_taken_out_again(lab, sandbox):
    link = lab.add_link()
    run(lab, sandbox, "apply", link.name, "public")
    run(lab, sandbox, "allow", "--app", "app-a", "--interface", link.name)
    keeper(lab, sandbox)
    serve_in(lab, sandbox, "app-b", APP_PORTS)
    assert probe(lab, link, APP_PORTS) == REFUSED
    nft = [*sandbox.enter(), "nft", "add", "element", "inet", "nm-zones", set_name("app-a")]
    subprocess.run([*nft, '{ "app-b" }'], check=True, env=lab.env())
    # the keeper's next rescan finds the set unlike the scan, and writes it whole again
    wait_for(lambda: probe(lab, link, APP_PORTS) == REFUSED, timeout=5, what="the repair")
    assert set_name("app-a") in lab.nft_table()


@pytest.mark.parametrize("backend", ["nftables"])
@pytest.mark.skipif(is_cgroup2(), reason="cgroup v2 is mounted at /sys/fs/cgroup here")
def test_without_cgroup2_at_the_root_app_exits_2_saying_why(lab):
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "public")
    result = lab.nm_zones("allow", "--app", "app-a", "--interface", link.name, check=False)
    assert result.returncode == 2, result
    assert "cgroup v2 is not mounted at /sys/fs/cgroup" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_nm_zones_serve_follows_an_application_across_restarts(tmp_path):
    """The whole path: NetworkManager places the connection, `nm-zones serve` (nftables)
    keeps the application's set current while the unit restarts in new cgroups."""
    from tests.harness.nm_sandbox import NMSandbox
    from tests.test_nm import NEEDS_NM
    from tests.test_service import reload_bus_config, up

    if NEEDS_NM:
        pytest.skip("needs root and NetworkManager")
    host = cgroup2_mount()
    app = f"nmz-app-{os.urandom(3).hex()}"  # at the root of the machine's cgroup v2 tree
    nm = NMSandbox(str(tmp_path / "sandbox"))
    nm.start()
    try:
        nm.install_hook()
        reload_bus_config(nm)
        nm.sh("mkdir -p /etc/nm-zones && echo 'backend: nftables' > /etc/nm-zones/nm-zones.yaml")
        nm.sh("mount -t cgroup2 none /sys/fs/cgroup")
        nm.serve()
        link = up(nm, "lan", "connection.zone", "public")
        nm.wait_zone(link.name, "public")
        nm.wait_reachable(link)
        result = nm.nm_zones("allow", "--app", app, "--interface", link.name)
        assert "only while" not in result.stdout, result.stdout  # the service follows it
        folder = os.path.join(host, app)

        def start():
            move = f'mkdir -p "{folder}" && echo $$ > "{folder}/cgroup.procs" && exec "$@"'
            listener = start_listener(
                ["sh", "-c", move, "sh", *nm.enter()], lab_env(), [9001], [9002]
            )
            nm.listeners.append(listener)
            return listener

        def reached():
            return nm.probe(
                [
                    {"kind": kind, "address": address, "port": port}
                    for kind, port in APP_PORTS
                    for address in (link.ipv4, link.ipv6)
                ]
            )

        for _ in range(2):  # started after the allowance, then restarted in a new cgroup
            listener = start()
            wait_for(lambda: reached() == ACCEPTED, timeout=5, what=f"{app} followed")
            with open(f"{folder}/cgroup.kill", "w") as kill:  # nsenter --pid forked it
                kill.write("1")
            listener.wait()
            nm.listeners.remove(listener)
            wait_for(lambda: not procs_of(folder), what=f"{app} emptied")
            os.rmdir(folder)
    finally:
        nm.stop()
        if os.path.isdir(os.path.join(host, app)):
            os.rmdir(os.path.join(host, app))


def lab_env() -> dict:
    from tests.harness.lab import base_env

    return base_env()
