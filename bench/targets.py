"""Issue 25's targets from one run: nm-zones beside firewalld 1.3.3, and against the floors.

    /usr/bin/python3 bench/targets.py [--quick] [--runs 20] [--others 200] [--flows 10000]
                                      [--backend nftables|iptables|both]  (root; namespaces only)

For each backend, bench/versus.py's rows (firewalld and `nm-zones serve` in namespace sandboxes
of their own, calls interleaved) and bench/bench.py's switches as whole processes (the hook's
`reapply` and `nm-zones apply`, with 0 and with --others other interfaces bound, beside the
floors: `nft -f` of the interface's chains and map elements, or iptables-legacy-restore plus
ip6tables-legacy-restore of them, one table per family; and a process started as nm-zones'
launchers start it), then one
table: each target, what was measured, the ratio it is judged by, and whether it is met. A
target missed where floors of the same run show that nm-zones could not meet it doing what
it must do is said to be bounded, and by what: the floor's own tool takes more time with 200
interfaces bound than the target allows the switch (for the nftables D-Bus switch, one
libnftables transaction in the service's own table, with 1 and with 200 bound); a process's
start (and, with 200 bound, what the floor's tool takes more than with none) takes longer
than a switch as a process is allowed; a check of the kernel on every call reads the legacy
filter tables; a switch that ends flows asks conntrack, whose dump takes longer than the
target allows.
Figures are medians in milliseconds (MiB for memory); every ratio is between figures of this
run. --quick is for development (3 runs, 20 others, 1000 flows): its figures judge nothing.
Run it with /usr/bin/python3 (as `/usr/bin/python3 bench/targets.py`): firewalld runs on it, and
so does nm-zones from the Debian package; the header says which interpreter each side ran on.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import versus

import bench

QUICK = {"runs": 3, "others": 20, "flows": 1000}


@dataclass
class Target:
    """One line of the table: `ours` judged as `ours / basis <= limit` (or `ours <= limit`
    when there is no basis). `least` is what nm-zones needs at least doing what it must, by
    a floor measured in this run: a target it already misses is bounded, not merely not
    met."""

    label: str
    theirs: float | None  # firewalld's figure, when it did the same work
    ours: float
    limit: float
    basis: float | None = None
    basis_name: str = ""
    least: float | None = None
    least_why: str = ""

    def judged(self, figure: float) -> float:
        return figure / self.basis if self.basis else figure

    def met(self) -> bool:
        return self.judged(self.ours) <= self.limit

    def bounded(self) -> bool:
        return not self.met() and self.least is not None and self.judged(self.least) > self.limit

    def verdict(self) -> str:
        if self.met():
            return "met"
        if self.bounded():
            return f"bounded: {self.least_why}, so at least {self.judged(self.least):.2f}"
        return "NOT met"

    def line(self) -> str:
        theirs = "" if self.theirs is None else f"{self.theirs:.1f}"
        versus_them = f"{self.ours / self.theirs:.2f}x" if self.theirs else ""
        if self.basis is None:
            target, judged = f"<= {self.limit:g}", f"{self.ours:.1f}"
        else:
            target = f"<= {self.limit:g}x {self.basis_name} ({self.basis:.1f})"
            judged = f"{self.judged(self.ours):.2f}x"
        return (f"| {self.label} | {theirs} | {self.ours:.1f} | {versus_them} | {target} "
                f"| {judged} | {self.verdict()} |")


def daemon_targets(backend: str, rows: dict, processes: dict, others: int) -> list[Target]:
    """The rows of the D-Bus service, judged against firewalld (or the floor, or itself)."""
    def row(key: str, limit: float, label: str = "", **basis) -> Target:
        _, text, theirs, ours = rows[key]
        if not basis:
            basis = {"basis": theirs, "basis_name": "firewalld's"}
        return Target(label or text, theirs, ours, limit, **basis)

    floor = statistics.median(processes["floor200"])
    targets = [row("switch1", 0.5)]
    if backend == "nftables":
        targets.append(row("switchN", 0.5))
        one = rows["switch1"][3]
        _, _, _, many = rows["switchN"]
        # what one libnftables transaction of an interface's chains takes more in the
        # service's own table with `others` bound than with 1 (libnftables' and the
        # kernel's work on the bigger table), the switch's commit takes more too
        growth = rows["commitfloorN"][3] - rows["commitfloor1"][3]
        targets.append(Target(f"D-Bus switch, {others} bound / 1 bound", None, many, 1.2,
                              basis=one, basis_name="the switch with 1 bound",
                              least=one + growth,
                              least_why=f"its commit alone takes {growth:.1f} ms more with "
                                        f"{others} bound"))
    else:
        targets.append(row("switchN", 2, basis=floor,
                           basis_name=f"the floor with {others} bound"))
    noop = row("noop", 2)
    if "readfloor" in rows:  # x_tables has no generation id: a check reads the tables whole
        noop.least = rows["readfloor"][3]
        noop.least_why = (f"checking the kernel on every call reads both filter tables, "
                          f"{noop.least:.1f} ms")
    targets += [noop, row("reload", 0.5), row("reload_call", 0.5), row("port", 0.5)]
    if "tightenF" in rows:
        none = rows["tighten0"][3]
        tighten = row("tightenF", 1.5, basis=none, basis_name="the same with none")
        if rows["tracked0"][3] == 0:  # the switch with none did not ask conntrack
            # a switch asks conntrack for the flows it may end, and any dump walks every
            # bucket, however the kernel filters it
            tighten.least = none + rows["dumpfloor"][3]
            tighten.least_why = f"asking conntrack takes {rows['dumpfloor'][3]:.1f} ms"
        targets.append(tighten)
    targets.append(row("rss", 0.6))
    targets.append(row("startup", 0.3))
    _, text, theirs, ours = rows["lost"]
    targets.append(Target(text, theirs, ours, 0))  # counts, not milliseconds
    return targets


def process_targets(backend: str, processes: dict, others: int) -> list[Target]:
    """The switch as a whole process: absolute limits, and flat in the interfaces bound.

    What a switch as a process needs at least, by floors of this run: a process started as
    the launchers start nm-zones (bench.start_floor); with `others` bound, also what the
    floor's tool takes more than
    with none: the kernel's and the library's work on the bigger table, the check's read of
    it included (the tool's own start cancels out). A run's own check of the kernel is not
    counted: for a lower bound, it could in principle be the library's read.
    """
    median = {key: statistics.median(values) for key, values in processes.items()}
    targets = []
    growth = median["floor200"] - median["floor"]  # what the floor's tool takes more
    start = f"starting Python as the launchers do takes {median['start']:.1f} ms"
    more = f"the floor's tool {growth:.1f} ms more with {others} bound than with none"
    for key, name, limit in (("b", "hook `reapply`", 25), ("apply", "`nm-zones apply`", 30)):
        zero, many = median[f"{key}0"], median[f"{key}200"]
        targets += [
            Target(f"switch as a process: {name}, 0 others bound", None, zero, limit,
                   least=median["start"], least_why=start),
            Target(f"switch as a process: {name}, {others} others bound", None, many, limit,
                   least=median["start"] + growth, least_why=f"{start}, {more}"),
            Target(f"switch as a process: {name}, {others} bound / 0 bound", None, many, 1.2,
                   basis=zero, basis_name="0 bound", least=zero + growth,
                   least_why=f"the floor alone takes {growth:.1f} ms more with {others} bound"),
        ]
    return targets


def floor_lines(backend: str, processes: dict, others: int) -> list[str]:
    tool = "nft -f" if backend == "nftables" else (
        "iptables-legacy-restore + ip6tables-legacy-restore")
    lines = [
        f"| floor: {tool}, one interface's chains, {n} others bound | | "
        f"{statistics.median(processes[key]):.1f} | | | | |"
        for n, key in ((0, "floor"), (others, "floor200"))
    ]
    lines.append(f"| floor: a process started as nm-zones' launchers start it | | "
                 f"{statistics.median(processes['start']):.1f} | | | | |")
    return lines


def unjudged_lines(rows: dict) -> list[str]:
    """Rows measured to be seen, not judged: the tightening switch with 1 flow tracked and
    with the flows unmarked (nm-zones reads those, whatever interface they came in by:
    flows.py), the floor of a switch that looks at flows (one conntrack dump, with the
    flows and before they were added: it walks every bucket either way), with nftables
    the floor of the D-Bus switch's commit (one libnftables transaction in the service's
    table, with 1 and with N bound), and with iptables the floor of any call that checks
    the kernel (both filter tables read)."""
    lines = []
    for key in ("commitfloor1", "commitfloorN", "tighten1", "tightenU", "dumpfloor",
                "dumpfloor0", "readfloor"):
        if key in rows:
            _, text, theirs, ours = rows[key]
            them, ratio = (f"{theirs:.1f}", f"{ours / theirs:.2f}x") if theirs else ("", "")
            lines.append(f"| {text} | {them} | {ours:.1f} | {ratio} | (not a target) | | |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, help="calls per figure (default 20; fewer for "
                        "reloads, ports, the switch with many flows and start-up)")
    parser.add_argument("--others", type=int, help="other interfaces bound (default 200)")
    parser.add_argument("--flows", type=int, help="unrelated flows tracked (default 10000)")
    parser.add_argument("--backend", choices=("nftables", "iptables", "both"), default="both")
    parser.add_argument("--quick", action="store_true",
                        help="3 runs, 20 others, 1000 flows: to try the script, not to judge")
    args = parser.parse_args()
    sizes = QUICK if args.quick else {"runs": 20, "others": 200, "flows": 10000}
    runs, others, flows = (getattr(args, key) or sizes[key] for key in ("runs", "others", "flows"))
    if os.geteuid() != 0:
        print("bench/targets.py: run it as root (namespaces, netfilter)", file=sys.stderr)
        return 1
    root = versus.firewalld_root()
    if root is None or not shutil.which("nft"):
        print("bench/targets.py: needs firewalld's packages (apt-get download) and nft",
              file=sys.stderr)
        return 1
    bench.compile_package()
    print(f"nm-zones' targets (issue 25) beside firewalld 1.3.3: medians of {runs} runs "
          f"(reloads, ports, the switch with many flows: {max(3, runs // 4)}; start-up: "
          f"{max(3, runs // 5)}), {others} other interfaces, {flows} flows; "
          f"{os.cpu_count()} cores; {versus.interpreters()}\n")
    met = bounded = total = 0
    for backend in ("nftables", "iptables") if args.backend == "both" else (args.backend,):
        rows = {row[0]: row for row in versus.measure(backend, runs, others, root, flows)}
        processes = bench.measure_in_namespace(runs, backend, others)
        if processes is None:
            return 1
        targets = daemon_targets(backend, rows, processes, others)
        targets += process_targets(backend, processes, others)
        print(f"### {backend}\n")
        print("| row | firewalld | nm-zones | nm-zones / firewalld | target | judged | |")
        print("|---|---|---|---|---|---|---|")
        for target in targets:
            print(target.line())
        print("\n".join(unjudged_lines(rows) + floor_lines(backend, processes, others)))
        print()
        met += sum(target.met() for target in targets)
        bounded += sum(target.bounded() for target in targets)
        total += len(targets)
        sys.stdout.flush()
    print(f"targets met: {met} of {total}; bounded by a floor of the same run: {bounded}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
