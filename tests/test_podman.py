"""podman (Debian 12's podman 4.3 with netavark 1.4) against `nm-zones serve`: rootful
containers in the namespace sandbox, their NAT and a published port, and netavark's firewalld
calls (zone.getZoneOfSource, changeZoneOfSource of its subnet to `trusted`, removeSource at
teardown) answered without a warning.

podman runs only inside the sandbox: its storage under the test's tmp, its run root in the
sandbox's private /run, its configuration in the sandbox's /etc overlay."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.harness.lab import wait_for
from tests.test_firewalld_clients import (
    CGROUPS,
    lan,
    peer_fetches,
    peer_web,
    sandbox,  # noqa: F401 - the sandbox on a backend
)
from tests.test_service import MAIN, ZONE, call

NEEDS_PODMAN = not shutil.which("podman") or not os.path.exists("/usr/lib/podman/netavark")
SUBNET = "10.88.0.0/16"


class Podman:
    """Rootful podman inside the sandbox, everything it keeps under `root`."""

    def __init__(self, nm, root: str):
        self.nm, self.root = nm, root

    def prepare(self) -> None:
        os.makedirs(self.root, exist_ok=True)
        self.nm.sh(CGROUPS)

    def podman(self, *args: str, check: bool = True):
        return self.nm.run(
            [
                "podman",
                f"--root={self.root}/storage",
                "--runroot=/run/nmz-podman",
                "--storage-driver=vfs",
                "--network-backend=netavark",
                "--cgroup-manager=cgroupfs",
                "--events-backend=file",
                "--runtime=runc",
                *args,
            ],
            check=check,
        )

    def stop(self) -> None:
        self.podman("rm", "-a", "-f", "-t", "0", check=False)


@pytest.fixture
def podman(sandbox, tmp_path):  # noqa: F811
    if NEEDS_PODMAN:
        pytest.skip("needs podman and netavark")
    runner = Podman(sandbox, str(tmp_path / "podman"))
    runner.prepare()
    try:
        yield runner
    finally:
        runner.stop()


def image(podman: Podman, tmp: str) -> None:
    root = os.path.join(tmp, "rootfs")
    os.makedirs(f"{root}/bin")
    os.makedirs(f"{root}/www")
    shutil.copy("/bin/busybox", f"{root}/bin/busybox")
    for name in ("sh", "nc", "httpd", "printf"):
        os.symlink("busybox", f"{root}/bin/{name}")
    with open(f"{root}/www/index.html", "w") as stream:
        stream.write("from the container\n")
    subprocess.run(["tar", "-C", root, "-cf", f"{root}.tar", "."], check=True)
    podman.podman("import", f"{root}.tar", "bb")


WEB = ("bb", "/bin/httpd", "-f", "-p", "80", "-h", "/www")


def podman_works(nm, podman: Podman, link) -> None:
    """A container reaches the peer through NAT (the peer has no route to 10.88.0.0/16);
    the peer reaches the published port 8080."""
    request = f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 {link.peer_ipv4} 8080"
    fetched = podman.podman("run", "--rm", "bb", "/bin/sh", "-c", request, check=False)
    assert "from the peer" in fetched.stdout, fetched.stdout + fetched.stderr
    wait_for(
        lambda: "from the container" in peer_fetches(nm, link.ipv4),
        20,
        what=f"the published port to answer: {peer_fetches(nm, link.ipv4)}",
    )


@pytest.mark.both_backends
def test_podman_through_serve_without_a_warning(sandbox, podman, tmp_path):  # noqa: F811
    """Containers started while serve runs: netavark binds its subnet to `trusted` through
    serve (no warning), NAT and the published port work, through Reloaded and nm-zones
    reload; removing the last container removes the source binding, again without a warning."""
    nm = sandbox
    link = lan(nm)
    nm.serve()
    image(podman, str(tmp_path))
    peer_web(nm, str(tmp_path))
    started = podman.podman("run", "-d", "-p", "8080:80", *WEB)
    assert "WARN" not in started.stderr and "firewalld" not in started.stderr, started.stderr
    assert call(nm, f"{ZONE}.getZoneOfSource", SUBNET) == "('trusted',)"
    podman_works(nm, podman, link)
    call(nm, f"{MAIN}.reload")
    podman_works(nm, podman, link)
    assert nm.nm_zones("reload", check=False).returncode == 0
    podman_works(nm, podman, link)
    removed = podman.podman("rm", "-a", "-f", "-t", "0")
    assert "WARN" not in removed.stderr and "firewalld" not in removed.stderr, removed.stderr
    assert call(nm, f"{ZONE}.getZoneOfSource", SUBNET) == "('',)"


@pytest.mark.both_backends
def test_podman_started_before_serve_keeps_working(sandbox, podman, tmp_path):  # noqa: F811
    """A container published while nobody had firewalld's name keeps its NAT and its port
    when serve starts and reloads (nm-zones removes no rule it did not write)."""
    nm = sandbox
    link = lan(nm)
    image(podman, str(tmp_path))
    peer_web(nm, str(tmp_path))
    podman.podman("run", "-d", "-p", "8080:80", *WEB)
    podman_works(nm, podman, link)
    nm.serve()
    podman_works(nm, podman, link)
    call(nm, f"{MAIN}.reload")
    podman_works(nm, podman, link)
    podman.podman("run", "-d", "-p", "8081:80", *WEB)  # the next one goes through serve
    podman_works(nm, podman, link)
