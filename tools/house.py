#!/usr/bin/env python3
"""The house's measures, repeatable by anyone: long functions (and long functions on the
event path), import circles and upward edges between the package's stages, and positional
uses of rule specs.

    python3 tools/house.py            # the report
    python3 tools/house.py --json     # the same numbers, for tests and comparisons

Stages, lowest first: plain helpers, config, ruleset, backends, the engine in the middle,
and the doors (and the desktop) on top. An import may point to its own stage or a lower
one; one that points higher is an "upward edge". Function-local imports count as edges too:
they hide circles, they do not remove them.

The event path is what one NetworkManager hook event imports (the modules below, kept equal
to tests/test_import_budget.py's budget by a test): its functions are held to
EVENT_PATH_FUNCTION lines, since every boot and every switch runs them.

A rule spec (nm_zones/ruleset/plan.py) is read by its index names; a "positional use" is a name
with `spec` in it indexed or sliced by a number, or unpacked into a tuple (also in a `for` or a
comprehension), anywhere but in plan.py itself.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "nm_zones"
LONG_FUNCTION = 60  # lines, body and signature
EVENT_PATH_FUNCTION = 45  # lines, for the functions of the modules a hook event imports
EVENT_PATH = (  # `.*`: the package and everything in it
    "addresses", "backends", "backends.clib", "backends.common", "backends.views",
    "backends.iptables", "backends.iptables.backend", "backends.iptables.entries",
    "backends.iptables.held", "backends.iptables.iptc_env", "backends.iptables.kernel",
    "backends.iptables.libiptc", "backends.nftables",
    "backends.nftables.backend", "backends.nftables.libnft", "backends.nftables.nfnetlink",
    "backends.nftables.view", "config", "config.appname", "config.load", "config.model",
    "config.yamlsource", "digest", "doors", "doors.event", "engine", "engine.*", "errors",
    "files", "flows", "ifname", "lazy", "locks", "log", "netlink", "networks", "networks.identity",
    "networks.zone", "paths", "protocols", "quick", "resolve", "ruleset",
    "ruleset.allowances", "ruleset.build", "ruleset.cache", "ruleset.layout", "ruleset.plan",
    "ruleset.rules", "ruleset.sources", "state", "text",
)
SPEC_MODULE = f"{PACKAGE}.ruleset.plan"  # the one module that reads a rule spec by position
STAGES = (
    ("helpers", ("addresses", "appnames", "conntrack", "digest", "errors", "files", "flowcount",
                 "ifname", "lazy", "linkwatch", "locks", "log", "netlink", "paths", "protocols",
                 "routing", "text")),
    ("config", ("config",)),
    ("ruleset", ("ruleset",)),
    ("backends", ("backends",)),
    ("engine", ("engine", "state", "quick", "flows", "resolve", "sockdiag", "networks")),
    ("doors", ("doors", "desktop", "cli", "event", "__main__", "__init__")),
)


@dataclass
class Module:
    name: str
    path: str
    lines: int
    imports: list[tuple[str, bool]] = field(default_factory=list)  # (target, at top level)
    functions: list[tuple[str, int, int]] = field(default_factory=list)  # (name, line, length)
    positional_specs: list[int] = field(default_factory=list)  # lines
    statements: list[bool] = field(default_factory=list)  # each import statement: at top level


def stage_of(module: str) -> int:
    """The stage index of a dotted module name inside the package."""
    first = module.split(".")[1] if "." in module else "__init__"
    for index, (_, members) in enumerate(STAGES):
        if first in members:
            return index
    return len(STAGES)


def module_name(path: str) -> str:
    relative = os.path.relpath(path, REPO)[: -len(".py")]
    parts = relative.split(os.sep)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def resolve(current: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The package modules an ImportFrom names (`from .x import y` may import module x.y)."""
    if node.level:
        base = current.split(".")
        base = base if is_package else base[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    if not prefix.startswith(PACKAGE):
        return []
    return [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]


class _Reader(ast.NodeVisitor):
    def __init__(self, module: Module, is_package: bool):
        self.module, self.is_package, self.depth = module, is_package, 0

    def _function(self, node) -> None:
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        self.module.functions.append((node.name, node.lineno, length))
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_Import(self, node: ast.Import) -> None:
        self.module.statements.append(self.depth == 0)
        for alias in node.names:
            if alias.name.startswith(PACKAGE):
                self.module.imports.append((alias.name, self.depth == 0))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.module.statements.append(self.depth == 0)
        for target in resolve(self.module.name, self.is_package, node):
            self.module.imports.append((target, self.depth == 0))

    def _positional(self, line: int) -> None:
        if self.module.name != SPEC_MODULE:
            self.module.positional_specs.append(line)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        index = node.slice
        if isinstance(index, ast.Slice):  # spec[2:], spec[:3]: numbers only, or nothing
            bounds = (index.lower, index.upper, index.step)
            by_number = any(b is not None for b in bounds) and all(
                b is None or _is_number(b) for b in bounds
            )
        else:
            by_number = _is_number(index)
        if isinstance(node.value, ast.Name) and "spec" in node.value.id and by_number:
            self._positional(node.lineno)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        value = node.value
        if (
            isinstance(value, ast.Name)
            and "spec" in value.id
            and any(isinstance(target, ast.Tuple) for target in node.targets)
        ):
            self._positional(node.lineno)
        self.generic_visit(node)

    def _unpacking_loop(self, node: ast.For | ast.comprehension, line: int) -> None:
        target, source = node.target, node.iter
        if isinstance(target, ast.Tuple) and isinstance(source, ast.Name) and "spec" in source.id:
            self._positional(line)

    def visit_For(self, node: ast.For) -> None:
        self._unpacking_loop(node, node.lineno)
        self.generic_visit(node)

    def _comprehension(self, node) -> None:
        for generator in node.generators:
            self._unpacking_loop(generator, node.lineno)
        self.generic_visit(node)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):  # spec[-1]
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, int)


def positional_spec_uses(source: str, module: str = "snippet") -> list[int]:
    """The lines of `source` (as module `module`) that use a rule spec by position."""
    found = Module(module, "<source>", source.count("\n"))
    _Reader(found, False).visit(ast.parse(source))
    return found.positional_specs


def read_package() -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for folder, dirs, files in os.walk(os.path.join(REPO, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as stream:
                source = stream.read()
            module = Module(module_name(path), path, source.count("\n"))
            _Reader(module, name == "__init__.py").visit(ast.parse(source, path))
            modules[module.name] = module
    for module in modules.values():  # keep only targets that are modules of the package
        module.imports = sorted(
            {(target, top) for target, top in module.imports if target in modules}
            - {(module.name, True), (module.name, False)}
        )
    return modules


def circles(modules: dict[str, Module]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    graph = {name: sorted({t for t, _ in m.imports}) for name, m in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, edge = work.pop()
            if edge == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = graph[node]
            if edge < len(targets):
                work.append((node, edge + 1))
                target = targets[edge]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found)


def on_event_path(module: str) -> bool:
    name = module.removeprefix(f"{PACKAGE}.") if module != PACKAGE else ""
    return name in EVENT_PATH or any(
        entry.endswith(".*") and (name + ".").startswith(entry[:-1]) for entry in EVENT_PATH
    )


def measure() -> dict:
    modules = read_package()
    functions = sorted(
        ((length, f"{m.name}.{name}", line) for m in modules.values()
         for name, line, length in m.functions),
        reverse=True,
    )
    upward = sorted(
        (m.name, target)
        for m in modules.values()
        for target, _ in m.imports
        if stage_of(target) > stage_of(m.name)
    )
    local_imports = sum(1 for m in modules.values() for top in m.statements if not top)
    all_imports = sum(len(m.statements) for m in modules.values())
    return {
        "long-functions": [
            {"function": name, "line": line, "lines": length}
            for length, name, line in functions
            if length > LONG_FUNCTION
        ],
        "event-path-long-functions": [
            {"function": name, "line": line, "lines": length}
            for length, name, line in functions
            if length > EVENT_PATH_FUNCTION and on_event_path(name.rsplit(".", 1)[0])
        ],
        "longest-functions": [
            {"function": name, "lines": length} for length, name, _ in functions[:10]
        ],
        "largest-modules": sorted(
            ({"module": m.name, "lines": m.lines} for m in modules.values()),
            key=lambda row: -row["lines"],
        )[:10],
        "circles": circles(modules),
        "upward-edges": [{"from": a, "to": b} for a, b in upward],
        "imports": all_imports,
        "function-local-imports": local_imports,
        "positional-spec-uses": sorted(
            f"{os.path.relpath(m.path, REPO)}:{line}"
            for m in modules.values()
            for line in m.positional_specs
        ),
    }


def report(numbers: dict) -> str:
    lines = [f"Functions over {LONG_FUNCTION} lines: {len(numbers['long-functions'])}"]
    lines += [f"  {row['lines']:4}  {row['function']}" for row in numbers["longest-functions"]]
    lines.append(
        f"Event-path functions over {EVENT_PATH_FUNCTION} lines: "
        f"{len(numbers['event-path-long-functions'])}"
    )
    event_path = numbers["event-path-long-functions"]
    lines += [f"  {row['lines']:4}  {row['function']}" for row in event_path]
    lines.append("Largest modules:")
    lines += [f"  {row['lines']:4}  {row['module']}" for row in numbers["largest-modules"]]
    lines.append(f"Import circles: {len(numbers['circles'])}")
    lines += ["  " + " <-> ".join(circle) for circle in numbers["circles"]]
    lines.append(f"Upward edges (a lower stage importing a higher one): "
                 f"{len(numbers['upward-edges'])}")
    lines += [f"  {row['from']} -> {row['to']}" for row in numbers["upward-edges"]]
    lines.append(f"Import statements inside functions: {numbers['function-local-imports']} "
                 f"of {numbers['imports']}")
    lines.append(f"Positional uses of rule specs: {len(numbers['positional-spec-uses'])}")
    lines += [f"  {where}" for where in numbers["positional-spec-uses"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args(argv)
    numbers = measure()
    print(json.dumps(numbers, indent=2) if args.json else report(numbers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
