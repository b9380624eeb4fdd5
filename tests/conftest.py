"""Fixtures: a fresh network lab per test, and a guard on this machine's own firewall."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from tests.harness.lab import Lab  # noqa: E402

NEEDS_ROOT = os.geteuid() != 0 or not shutil.which("iptables-legacy-save")


def host_firewall() -> str:
    """This namespace's legacy rules, counters stripped, for the before/after comparison."""
    text = ""
    for tool in ("iptables-legacy-save", "ip6tables-legacy-save"):
        if shutil.which(tool):
            out = subprocess.run([tool], capture_output=True, text=True).stdout
            text += "".join(
                line.split(" [")[0] + "\n" for line in out.splitlines() if not line.startswith("#")
            )
    return text


@pytest.fixture(scope="session", autouse=True)
def host_firewall_untouched():
    """The suite must never change the firewall of the namespace it was started in."""
    before = host_firewall()
    yield
    after = host_firewall()
    assert "nmz" not in after, "nm-zones rules leaked into the test runner's namespace"
    assert before == after, "the test runner's own firewall changed during the tests"


# Where `nm-zones install --root /` and a running nm-zones write on a system: the demo and
# the tests do that only inside the NetworkManager sandbox, whose /etc, /usr and /run are its own.
HOST_PLACES = (
    "/usr/local/sbin",
    "/usr/lib/NetworkManager",
    "/etc/NetworkManager/dispatcher.d",
    "/etc/nm-zones",
    "/run/nm-zones",
    "/etc/systemd/system",
    "/var/lib/nm-zones",
)


def _identity(path: str) -> tuple:
    """What a file is: type, mode, owner, size, mtime and its content's hash (or link target)."""
    info = os.lstat(path)
    if os.path.islink(path):
        content = os.readlink(path)
    elif os.path.isfile(path):
        with open(path, "rb") as stream:
            content = hashlib.sha256(stream.read()).hexdigest()
    else:
        content = ""
    return (info.st_mode, info.st_uid, info.st_size, info.st_mtime_ns, content)


def host_files(places=HOST_PLACES) -> dict[str, tuple]:
    """Every file and folder under the places nm-zones installs into, with its identity."""
    listing = {}
    for place in places:
        if not os.path.lexists(place):
            listing[place] = ("absent",)
            continue
        listing[place] = _identity(place)
        for folder, dirs, files in os.walk(place):
            for name in dirs + files:
                path = os.path.join(folder, name)
                listing[path] = _identity(path)
    return listing


@pytest.fixture(scope="session", autouse=True)
def host_files_untouched():
    """The demo's and the tests' installs stay inside their sandbox: this machine's /usr,
    /etc and /run are the same after the run as before."""
    before = host_files()
    yield
    after = host_files()
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    assert not changed, f"the tests changed this machine's files: {changed}"


BACKENDS = ("iptables", "nftables")


def pytest_generate_tests(metafunc):
    """Tests marked both_backends run once per backend: their lab's nm-zones.yaml names it."""
    if metafunc.definition.get_closest_marker("both_backends"):
        metafunc.parametrize("backend", BACKENDS)


@pytest.fixture
def backend() -> str:
    """The backend a lab's nm-zones uses (iptables unless the test is marked both_backends)."""
    return "iptables"


@pytest.fixture
def lab(tmp_path, backend):
    if NEEDS_ROOT:
        pytest.skip("needs root and iptables-legacy")
    if backend == "nftables" and not shutil.which("nft"):
        pytest.skip("needs nft (package nftables)")
    lab = Lab(str(tmp_path), backend=backend)
    try:
        yield lab
    finally:
        lab.close()


# Test tiers, named by what a test needs (markers registered in pyproject.toml): `pytest -m
# pure` runs in seconds without root. A module's tier is what its tests need at most; a test
# that takes the `lab` fixture needs at least network namespaces. A module not listed here is
# taken to need namespaces, so that `-m pure` never picks up a test that needs root.
# each tier needs what those before it need
TIERS = ("pure", "root", "netns", "nm_sandbox", "desktop", "deb")
MODULE_TIERS = {
    "test_cli.py": "pure",
    "test_config.py": "pure",
    "test_docs.py": "pure",
    "test_engine_journal.py": "pure",
    "test_firewalld_api.py": "pure",
    "test_house.py": "pure",
    "test_limits.py": "pure",
    "test_nft_listing.py": "pure",
    "test_plan.py": "pure",  # its tests that commit take `lab`
    "test_translations.py": "pure",
    "test_userzones.py": "pure",
    "test_zone_editor.py": "pure",
    "test_ended.py": "netns",
    "test_everyday.py": "netns",
    "test_failclosed.py": "netns",
    "test_failsafe.py": "netns",
    "test_flows.py": "netns",
    "test_forward.py": "netns",
    "test_import.py": "netns",
    "test_kernel.py": "netns",
    "test_nftables.py": "netns",
    "test_panic.py": "netns",
    "test_sockdiag.py": "netns",
    "test_bench.py": "netns",
    "test_import_budget.py": "netns",
    "test_sources.py": "netns",
    "test_allow_network.py": "nm_sandbox",  # its pure tests say so
    "test_applications.py": "nm_sandbox",
    "test_firewall_cmd.py": "nm_sandbox",
    "test_firewalld_clients.py": "nm_sandbox",
    "test_install.py": "nm_sandbox",
    "test_libvirt.py": "nm_sandbox",
    "test_networks.py": "nm_sandbox",
    "test_nm.py": "nm_sandbox",
    "test_podman.py": "nm_sandbox",
    "test_service.py": "nm_sandbox",
    "test_desktop.py": "desktop",
    "test_desktop_networks.py": "desktop",
    "test_listeners.py": "desktop",  # its pure tests say so
    "test_tray.py": "desktop",
    "test_deb.py": "deb",
}


def tier_of(item) -> str:
    """The one tier of a test: its own marker, else the most its module or `lab` needs."""
    for tier in TIERS:
        if item.get_closest_marker(tier) is not None:
            return tier
    module = MODULE_TIERS.get(os.path.basename(str(item.fspath)), "netns")
    if "lab" in getattr(item, "fixturenames", ()) and module == "pure":
        return "netns"
    return module


def pytest_collection_modifyitems(config, items):
    for item in items:
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            item.add_marker(tier_of(item))
