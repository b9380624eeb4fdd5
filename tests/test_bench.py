"""bench/targets.py runs end to end at its smallest size and prints every target of issue 25.

Only that the script works and says met, bounded or NOT met for each row: its figures judge
nothing here (no timed assertions); how a row is judged is tested on figures given. About
25 s per backend on the 2-core development machine.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.harness.firewalld import firewalld_root
from tests.harness.lab import REPO, base_env
from tests.test_nm import NEEDS_NM

ROWS = (
    "D-Bus switch, 1 other bound",
    "D-Bus switch, 2 others bound",
    "D-Bus no-op switch, 2 bound",
    "reload after editing a zone",
    "the same through D-Bus reload()",
    "open a port for 30 s",
    "tightening switch (home -> block), 50 unrelated flows tracked",
    "the same, 1 unrelated flow tracked",
    "the same, the 50 flows unmarked",
    "floor: one conntrack dump",
    "daemon RSS with 2 bound",
    "start-up to first answer",
    "new connections lost during these",
    "switch as a process: hook `reapply`, 2 bound / 0 bound",
    "switch as a process: `nm-zones apply`, 2 bound / 0 bound",
    "floor: ",
)


@pytest.mark.both_backends
def test_targets_quick_prints_every_target(backend):
    if NEEDS_NM or firewalld_root() is None:
        pytest.skip("needs root, NetworkManager and firewalld's packages")
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "bench", "targets.py"), "--quick",
         "--backend", backend, "--runs", "1", "--others", "2", "--flows", "50"],
        capture_output=True, text=True, timeout=300, env={**base_env(), "PYTHONPATH": ""},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    for label in ROWS:
        assert any(label in row for row in rows), f"no row {label!r}:\n{result.stdout}"
    met = sum(row.endswith("| met |") for row in rows)
    bounded = sum("| bounded: " in row for row in rows)
    judged = met + bounded + sum(row.endswith("| NOT met |") for row in rows)
    summary = f"targets met: {met} of {judged}; bounded by a floor of the same run: {bounded}"
    assert summary in result.stdout


@pytest.mark.pure
def test_a_target_missed_is_bounded_only_where_the_floor_alone_misses_it(monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(REPO, "bench"))
    import targets

    ratio = dict(label="x", theirs=None, ours=38.0, limit=1.2, basis=30.0, basis_name="0 bound")
    assert targets.Target(**ratio, least=37.0, least_why="w").verdict() == (
        "bounded: w, so at least 1.23"
    )
    assert targets.Target(**ratio, least=35.0, least_why="w").verdict() == "NOT met"
    assert targets.Target(**ratio).verdict() == "NOT met"
    met = {**ratio, "ours": 36.0}
    assert targets.Target(**met, least=40.0, least_why="w").verdict() == "met"
    absolute = targets.Target("y", 1.9, 10.3, 3.8, least=4.0, least_why="reading")
    assert absolute.bounded() and absolute.verdict() == "bounded: reading, so at least 4.00"
