"""Fixtures: a fresh network lab per test, and a guard on this machine's own firewall."""

from __future__ import annotations

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


@pytest.fixture
def lab(tmp_path):
    if NEEDS_ROOT:
        pytest.skip("needs root and iptables-legacy")
    lab = Lab(str(tmp_path))
    try:
        yield lab
    finally:
        lab.close()
