"""The house's measures (tools/house.py) may only get better: each limit is today's count,
lowered as the code is cleaned up (the goal: no function over 60 lines, no import circle, no
upward import between stages, no positional use of a rule spec outside its module)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.harness.lab import REPO

LIMITS = {
    "long-functions": 0,
    "event-path-long-functions": 0,
    "circles": 0,
    "upward-edges": 0,
    "positional-spec-uses": 0,
}


def test_the_house_gets_no_worse():
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "tools", "house.py"), "--json"],
        capture_output=True, text=True, check=True,
    )
    numbers = json.loads(result.stdout)
    over = {key: numbers[key] for key, limit in LIMITS.items() if len(numbers[key]) > limit}
    assert not over, f"over the limits {LIMITS}: {json.dumps(over, indent=1)}"


def _house():
    """tools/house.py as a module (tools/ is no package)."""
    if "house" not in sys.modules:  # dataclasses looks the module up there
        path = os.path.join(REPO, "tools", "house.py")
        found = importlib.util.spec_from_file_location("house", path)
        sys.modules["house"] = importlib.util.module_from_spec(found)
        found.loader.exec_module(sys.modules["house"])
    return sys.modules["house"]


@pytest.mark.pure
def test_the_event_path_is_the_import_budget_of_one_hook_event():
    """house.py's event path names the nm-zones modules test_import_budget allows one
    event, both backends' together: a module added to one is added to the other."""
    from tests.test_import_budget import BACKEND, NM_ZONES

    budget = {m for m in NM_ZONES + BACKEND["iptables"] + BACKEND["nftables"]}
    own = {m.removeprefix("nm_zones.") for m in budget if m.startswith("nm_zones.")}
    assert set(_house().EVENT_PATH) == own


# the modules only `nm-zones serve` runs: it pays their imports once, at start-up
RESIDENT = ("service", "service_log", "direct", "expiry", "limits", "watch", "nflog")


@pytest.mark.pure
def test_the_resident_service_imports_nothing_inside_functions():
    """Function-local imports are for the event path's budget; the service's own modules
    import at the top, where a circle cannot hide."""
    modules = _house().read_package()
    resident = [
        m
        for name, m in modules.items()
        if name.startswith("nm_zones.doors.")
        and (
            name.rsplit(".", 1)[1] in RESIDENT
            or name.endswith("_bus")
            or name.startswith("nm_zones.doors.firewalld_")
        )
    ]
    assert len(resident) >= 14
    local = {m.name: sum(1 for top in m.statements if not top) for m in resident}
    assert not {name: n for name, n in local.items() if n}, local


@pytest.mark.parametrize(
    "source",
    [
        "target, options, *rest = spec",
        "print(spec[0])",
        "print(spec[-1])",
        "print(spec[2:])",
        "for target, options, source, destination, protocol, matches in specs: pass",
        "targets = [target for target, *_ in specs]",
    ],
)
def test_a_new_positional_use_of_a_rule_spec_is_caught(source):
    """Outside ruleset/plan.py a rule spec is read by its index names only."""
    house = _house()
    assert house.positional_spec_uses(source, "nm_zones.flows") == [1]
    assert house.positional_spec_uses(source, "nm_zones.ruleset.plan") == []


@pytest.mark.parametrize("source", ["print(spec[TARGET])", "print(spec[SOURCE:])", "x = spec"])
def test_reading_a_rule_spec_by_its_names_is_not_positional(source):
    assert _house().positional_spec_uses(source, "nm_zones.flows") == []


def _top_level_names(path: str) -> set[str]:
    """What a module defines or imports at its top level (under `if` and `try` too)."""
    import ast

    with open(path) as source:
        tree = ast.parse(source.read())
    names: set[str] = set()
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try)):
            pending += node.body + node.orelse + getattr(node, "finalbody", [])
            for handler in getattr(node, "handlers", []):
                pending += handler.body
    return names


@pytest.mark.pure
def test_every_import_of_the_package_names_something_that_exists():
    """Also the imports inside functions, which run only when their path does (a name
    moved by a merge once broke AnswerListener with an ImportError at the first answer)."""
    import ast

    package = os.path.join(REPO, "nm_zones")

    def module_file(dotted: str) -> str | None:
        base = os.path.join(REPO, *dotted.split("."))
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.exists(candidate):
                return candidate
        return None

    broken = []
    for folder, _dirs, files in os.walk(package):
        for name in (f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            parts = os.path.relpath(path, REPO)[:-3].split(os.sep)
            here = parts[:-1]  # the package a relative import starts from
            with open(path) as source:
                tree = ast.parse(source.read())
            for node in ast.walk(tree):
                if not isinstance(node, ast.ImportFrom):
                    continue
                if node.level:
                    base = here[: len(here) - node.level + 1] + (node.module or "").split(".")
                    dotted = ".".join(p for p in base if p)
                else:
                    dotted = node.module or ""
                if not dotted.startswith("nm_zones"):
                    continue
                target = module_file(dotted)
                if target is None:
                    broken.append(f"{path}:{node.lineno}: no module {dotted}")
                    continue
                defined = _top_level_names(target)
                for alias in node.names:
                    if alias.name not in defined and not module_file(f"{dotted}.{alias.name}"):
                        broken.append(f"{path}:{node.lineno}: {dotted} has no {alias.name}")
    assert not broken, "\n".join(broken)
