"""nm-zones speed, measured as whole processes, against a floor measured in the same run.

    python3 bench/bench.py [--runs 20]          (root; everything happens in a network namespace)

Every NetworkManager event starts a new process, so the whole process is the product's
latency. Each figure is the wall time from spawning a process to reaping it, taken from inside
a private network namespace (the timing process lives there, so no `ip netns exec` is counted).
The floor is what one interface's rules cost with iptables' own C tools: its chains and
dispatch rules (zone `public`) loaded into the tables as they are with `iptables-legacy-restore
--noflush` plus `ip6tables-legacy-restore --noflush`, one process each, with 0 and with 200
other interfaces bound. Commands run as `nm-zones install` puts them on a system (`python -S`).

  a  hook `up` of a fresh interface (IPv4 and IPv6 rules applied)
  b  hook `reapply` switching a bound interface to another zone
  c  no-op events: connectivity-change, and `up` with nothing changed
  d  `nm-zones reload` after one zone file changed, with 1, 50 and 200 interfaces bound
  e  (b) with 0 and with 200 other interfaces bound

Last, what each layer of imports costs a process as installed (where a reload's time goes).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = sys.executable
TARGETS = {"a": 60.0, "b": 60.0, "c": 25.0}


def spawn(
    argv: list[str], env: dict, stdin_data: bytes | None = None, quiet: bool = False
) -> tuple[float, int]:
    """Run one process to completion; (wall milliseconds, peak RSS in KiB)."""
    read_fd = None
    if stdin_data is not None:
        read_fd, write_fd = os.pipe()
    file_actions = [(os.POSIX_SPAWN_DUP2, read_fd, 0)] if read_fd is not None else []
    if quiet:
        file_actions.append((os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0))
    started = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=file_actions)
    if read_fd is not None:
        os.close(read_fd)
        os.write(write_fd, stdin_data)
        os.close(write_fd)
    _, status, usage = os.wait4(pid, 0)
    elapsed = (time.perf_counter() - started) * 1000
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv} failed with {os.waitstatus_to_exitcode(status)}")
    return elapsed, usage.ru_maxrss


class Bench:
    def __init__(self, runs: int, tmp: str):
        self.runs = runs
        self.tmp = tmp
        self.config = os.path.join(tmp, "etc-nm-zones")
        # the state lives on tmpfs, as /run/nm-zones does (fsync costs nothing there)
        self.state = tempfile.mkdtemp(prefix="nm-zones-bench-state-", dir="/dev/shm")
        os.makedirs(os.path.join(self.config, "zones.d"), mode=0o755)
        self.env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "NM_ZONES_CONFIG_DIR": self.config,
            "NM_ZONES_STATE_DIR": self.state,
        }
        root = os.path.join(tmp, "root")
        subprocess.run(
            [PYTHON, "-m", "nm_zones", "install", "--root", root],
            check=True,
            env={**self.env, "PYTHONPATH": REPO},
            capture_output=True,
        )
        self.hook = os.path.join(root, "etc/NetworkManager/dispatcher.d/50-nm-zones")
        self.nm_zones = os.path.join(root, "usr/local/sbin/nm-zones")  # as root's PATH finds it
        self.peak_rss = 0
        self.links = 0

    # -- helpers ------------------------------------------------------------------------

    def add_links(self, count: int) -> list[str]:
        names = []
        for _ in range(count):
            name = f"bz{self.links}"
            subprocess.run(
                ["ip", "link", "add", name, "type", "veth", "peer", "name", f"bp{self.links}"],
                check=True,
            )
            subprocess.run(["ip", "link", "set", name, "up"], check=True)
            self.links += 1
            names.append(name)
        return names

    def keyfile(self, name: str, zone: str) -> str:
        path = os.path.join(self.tmp, f"{name}.nmconnection")
        text = f"[connection]\nid={name}\nuuid=uuid-{name}\ntype=ethernet\nzone={zone}\n"
        try:
            with open(path) as stream:
                unchanged = stream.read() == text
        except FileNotFoundError:
            unchanged = False
        if not unchanged:  # NetworkManager rewrites a profile only when it changes
            with open(path, "w") as stream:
                stream.write(text)
        return path

    def event(self, interface: str, action: str, zone: str | None = None) -> tuple[float, int]:
        env = dict(self.env)
        if zone is not None:
            env.update(
                CONNECTION_ID=interface,
                CONNECTION_UUID=f"uuid-{interface}",
                CONNECTION_FILENAME=self.keyfile(interface, zone),
                DEVICE_IFACE=interface,
                DEVICE_IP_IFACE=interface,
            )
        elif action == "connectivity-change":
            env["CONNECTIVITY_STATE"] = "FULL"
        elapsed, rss = spawn([self.hook, interface, action], env)
        self.peak_rss = max(self.peak_rss, rss)
        return elapsed, rss

    def command(self, *args: str) -> float:
        return spawn([self.nm_zones, *args], self.env, quiet=True)[0]

    def bind(self, names: list[str], zone: str = "public") -> None:
        for name in names:
            self.event(name, "up", zone)

    # -- the measurements ---------------------------------------------------------------

    def floor(self, interface: str) -> list[float]:
        """iptables' own C tools loading one interface's `public` chains and dispatch rules
        into the tables as they are (--noflush), IPv4 then IPv6: what any tool pays for the
        kernel's read and commit of the whole table. Removed again after each run, untimed."""
        from nm_zones.compile import compile_interface
        from nm_zones.config import load
        from nm_zones.paths import Paths

        config = load(Paths(config="/nonexistent")).config
        ruleset = compile_interface(interface, config.zones["public"], config)
        tools = {
            "ipv4": shutil.which("iptables-legacy-restore"),
            "ipv6": shutil.which("ip6tables-legacy-restore"),
        }
        texts = {family: _load_and_undo(ruleset.save_text(family)) for family in tools}
        for tool in tools.values():  # the dispatch chains, if nm-zones has none yet
            command = tool.replace("-restore", "")
            for chain in ("nmz-input", "nmz-forward", "nmz-forward-out"):
                subprocess.run([command, "-N", chain], stderr=subprocess.DEVNULL)
        times = []
        for _ in range(self.runs):
            elapsed = 0.0
            for family, tool in tools.items():
                elapsed += spawn([tool, "--noflush"], self.env, texts[family][0])[0]
            times.append(elapsed)
            for family, tool in tools.items():
                spawn([tool, "--noflush"], self.env, texts[family][1])
        return times

    def fresh_up(self, interface: str) -> list[float]:
        times = []
        for _ in range(self.runs):
            times.append(self.event(interface, "up", "home")[0])
            self.event(interface, "down")
        return times

    def switch(self, interface: str) -> list[float]:
        self.event(interface, "up", "home")
        zones = ["public", "home"]
        return [self.event(interface, "reapply", zones[i % 2])[0] for i in range(self.runs)]

    def noop_connectivity(self) -> list[float]:
        return [self.event("", "connectivity-change")[0] for _ in range(self.runs)]

    def noop_up(self, interface: str) -> list[float]:
        self.event(interface, "up", "home")
        return [self.event(interface, "up", "home")[0] for _ in range(self.runs)]

    def reload_one_changed(self, interface: str) -> list[float]:
        path = os.path.join(self.config, "zones.d", "bench.yaml")
        self.write_zone(path, 0)
        self.event(interface, "up", "bench")
        times = []
        for i in range(self.runs):
            self.write_zone(path, i + 1)
            times.append(self.command("reload"))
        self.event(interface, "down")
        return times

    @staticmethod
    def write_zone(path: str, n: int) -> None:
        with open(path, "w") as stream:
            stream.write(f"services: [ssh]\nports: [{10000 + n}/tcp]\n")
        os.chmod(path, 0o644)


def _load_and_undo(save_text: str) -> tuple[bytes, bytes]:
    """From `plan` text: restore input adding only the interface's chains and dispatch rules
    (no hooks: a ':chain' line would flush an existing dispatch chain), and one removing them."""
    load, undo_rules, chains = ["*filter"], ["*filter"], []
    for line in save_text.splitlines():
        if line.startswith(":nmz-if-"):
            chains.append(line[1:].split()[0])
            load.append(line)
        elif line.startswith("-A "):
            load.append(line)
            if not line.startswith("-A nmz-if-"):
                undo_rules.append("-D " + line[3:])
    undo_rules += [f"-F {chain}" for chain in chains] + [f"-X {chain}" for chain in chains]
    load.append("COMMIT\n")
    undo_rules.append("COMMIT\n")
    return "\n".join(load).encode(), "\n".join(undo_rules).encode()


# What a process pays before doing anything, as installed (`python -S`, package folders on
# sys.path): each line adds imports to the one before.
IMPORT_STEPS = (
    ("python -S, nothing imported", ""),
    (
        "+ python-iptables (nm_zones.iptc_env)",
        "from nm_zones.iptc_env import import_iptc\nimport_iptc()",
    ),
    ("+ the event path (engine, kernel)", "import nm_zones.engine, nm_zones.kernel"),
    ("+ PyYAML", "import yaml"),
    ("+ the dataclass model and compiler", "import nm_zones.config, nm_zones.compile"),
    ("+ argparse and the command line", "import nm_zones.cli; nm_zones.cli.build_parser()"),
)


def import_costs(runs: int, env: dict) -> list[str]:
    """Whole-process medians of IMPORT_STEPS, to show where a reload's time goes."""
    from nm_zones.install import package_paths

    env = {**env, "PYTHONPATH": ":".join(package_paths())}
    lines = ["| process | median | min | added |", "|---|---|---|---|"]
    code, previous = "", 0.0
    for label, step in IMPORT_STEPS:
        code += step + "\n"
        times = [spawn([PYTHON, "-S", "-c", code], env)[0] for _ in range(runs)]
        median = statistics.median(times)
        lines.append(f"| {label} | {median:.1f} | {min(times):.1f} | {median - previous:+.1f} |")
        previous = median
    return lines


def summary(times: list[float]) -> tuple[float, float, float]:
    return statistics.median(times), min(times), max(times)


def row(label: str, times: list[float], floor: float, target: str = "") -> str:
    median, low, high = summary(times)
    return f"| {label} | {median:.1f} | {low:.1f} | {high:.1f} | {median / floor:.1f}x | {target} |"


def inside(runs: int) -> int:
    sys.path.insert(0, REPO)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with tempfile.TemporaryDirectory(prefix="nm-zones-bench-") as tmp:
        bench = Bench(runs, tmp)
        target, spare = bench.add_links(2)  # spare: never bound, for the floor
        floor_times = bench.floor(spare)
        floor = statistics.median(floor_times)
        # leave the namespace as nm-zones expects to find it
        subprocess.run(
            "for t in iptables-legacy ip6tables-legacy; do $t -X nmz-input; $t -X nmz-forward;"
            " $t -X nmz-forward-out; done",
            shell=True,
            check=True,
        )
        results: dict[str, list[float]] = {}
        results["a"] = bench.fresh_up(target)
        results["b0"] = bench.switch(target)
        results["c-conn"] = bench.noop_connectivity()
        results["c-up"] = bench.noop_up(target)
        results["d1"] = bench.reload_one_changed(target)
        others = bench.add_links(49)
        bench.bind(others)
        results["d50"] = bench.reload_one_changed(target)
        more = bench.add_links(150)
        bench.bind(more)
        results["d200"] = bench.reload_one_changed(target)
        results["b200"] = bench.switch(target)
        floor200_times = bench.floor(spare)
        floor200 = statistics.median(floor200_times)
        b0, b200 = statistics.median(results["b0"]), statistics.median(results["b200"])
        lines = [
            f"nm-zones benchmark: {runs} runs each, whole processes, milliseconds "
            f"({os.cpu_count()} cores, Python {sys.version.split()[0]})",
            "",
            "| measurement | median | min | max | / floor | target |",
            "|---|---|---|---|---|---|",
            row(
                "floor: iptables-legacy-restore + ip6tables-legacy-restore, one interface "
                "in `public`, 0 others bound",
                floor_times,
                floor,
            ),
            row("a. hook `up`, fresh interface, IPv4 + IPv6", results["a"], floor, "<= 60"),
            row("b. hook `reapply`, zone switch, 0 others bound", results["b0"], floor, "<= 60"),
            row("c. hook `connectivity-change` (no-op)", results["c-conn"], floor, "<= 25"),
            row("c. hook `up`, nothing changed (no-op)", results["c-up"], floor, "<= 25"),
            row(
                "d. `nm-zones reload`, one zone changed, 1 bound",
                results["d1"],
                floor,
                f"<= 2 x b = {2 * b0:.0f}",
            ),
            row(
                "d. `nm-zones reload`, one zone changed, 50 bound",
                results["d50"],
                floor,
                f"<= {2 * b0:.0f}",
            ),
            row(
                "d. `nm-zones reload`, one zone changed, 200 bound",
                results["d200"],
                floor,
                f"<= {2 * b0:.0f}",
            ),
            row(
                "floor with 200 others bound (/ floor: against itself with 0 bound)",
                floor200_times,
                floor,
            ),
            row(
                "e. zone switch, 200 others bound (/ floor: against the floor with 200)",
                results["b200"],
                floor200,
                f"<= 1.3 x b = {1.3 * b0:.0f}",
            ),
            "",
            f"e. 200 bound / 0 bound: {b200 / b0:.2f} (target <= 1.3); the floor's own: "
            f"{floor200 / floor:.2f}, {floor200 - floor:.1f} ms more",
            f"peak RSS of the hook process: {bench.peak_rss / 1024:.1f} MiB (target <= 30)",
        ]
        lines += ["", "where a process's time goes (imports as installed):", ""]
        lines += import_costs(runs, bench.env)
        print("\n".join(lines))
        checks = [
            statistics.median(results["a"]) <= TARGETS["a"],
            b0 <= TARGETS["b"],
            statistics.median(results["c-conn"]) <= TARGETS["c"],
            statistics.median(results["c-up"]) <= TARGETS["c"],
            b200 <= 1.3 * b0,
            all(statistics.median(results[k]) <= 2 * b0 for k in ("d1", "d50", "d200")),
            bench.peak_rss / 1024 <= 30,
        ]
        print(f"targets met: {sum(checks)} of {len(checks)}")
        shutil.rmtree(bench.state, ignore_errors=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20, help="runs per figure (default 20)")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        return inside(args.runs)
    if os.geteuid() != 0:
        print("bench: run as root (it makes a network namespace)", file=sys.stderr)
        return 1
    name = f"nmz-bench-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        return subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                name,
                PYTHON,
                os.path.abspath(__file__),
                "--inside",
                "--runs",
                str(args.runs),
            ]
        ).returncode
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


if __name__ == "__main__":
    sys.exit(main())
