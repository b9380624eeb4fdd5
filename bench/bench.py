"""nm-zones speed, measured as whole processes, against a floor measured in the same run.

    /usr/bin/python3 bench/bench.py [--runs 20] [--backend iptables|nftables|both]
                                                (root; everything happens in network namespaces)

Every NetworkManager event starts a new process, so the whole process is the product's
latency. Each figure is the wall time from spawning a process to reaping it, taken from inside
a private network namespace (the timing process lives there, so no `ip netns exec` is counted).
The floor is what one interface's rules cost with iptables' own C tools: its chains and
dispatch rules (zone `public`) loaded into the tables as they are with `iptables-legacy-restore
--noflush` plus `ip6tables-legacy-restore --noflush`, one process each, with 0 and with 200
other interfaces bound; with the nftables backend it is `nft -f` of the same interface's chains
and map elements into nm-zones' table. Each backend runs in a fresh namespace of its own, and
the two are printed side by side. Commands run as `nm-zones install` puts them on a system
(`python -S`).

  a  hook `up` of a fresh interface (IPv4 and IPv6 rules applied)
  b  hook `reapply` switching a bound interface to another zone
  c  no-op events: connectivity-change, and `up` with nothing changed
  d  `nm-zones reload` after one zone file changed, with 1, 50 and 200 interfaces bound
  e  (b) with 0 and with 200 other interfaces bound
  f  a wired profile with no zone of its own: hook `pre-up` (NetworkManager waits for it:
     the unknown-network zone at once, nothing identified); hook `up` after a lease on a
     known network (its zone from networks.yaml, the gateway's MAC resolved on the wire)
     against the same event for a profile with connection.zone (a ratio); and the first
     identification of a network (an empty neighbour table, the network not yet stored),
     whose limit is 3 s. The gateway answers ARP from a namespace of its own (`unshare -n`,
     no /run/netns), over a veth pair.

Last, what each layer of imports costs a process as installed (where a reload's time goes).
For bench/targets.py (--switches-only), only (b) and the floor, with 0 and with N others
bound, and the start of a process as the launchers start it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = sys.executable
TARGETS = {"a": 60.0, "b": 60.0, "c": 25.0, "f-first": 3000.0}
KNOWN_RATIO = 1.5  # f: a known network's `up` against a profile's own zone's
GATEWAY, ADDRESS = "192.0.2.1", "192.0.2.10/24"  # TEST-NET-1: the gateway and the interface
LEASE = {  # what NetworkManager's dispatcher passes after a DHCP lease
    "IP4_GATEWAY": GATEWAY,
    "DHCP4_DHCP_SERVER_IDENTIFIER": GATEWAY,
    "DHCP4_DOMAIN_NAME": "bench.example",
}


def compile_package() -> None:
    """Every module of the package byte-compiled, as an install leaves it (Debian's
    py3compile, pip): no process measured compiles a module it imports. The environment the
    processes run in writes no bytecode (tests/harness/lab.py), so without this a module
    changed since its last compile is compiled again by every process, some milliseconds
    each (44 ms of the service's start-up after a day's edits)."""
    import compileall

    compileall.compile_dir(os.path.join(REPO, "nm_zones"), quiet=1)


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


def nft_floor_scripts(interface: str, as_switch: bool = False) -> tuple[str, str]:
    """The nftables floor's scripts: one interface's `public` chains and map elements put
    into nm-zones' table, and taken out again. For `nft -f`, as `nm-zones plan` prints them
    (`add rule` lines: a process that only adds closes its socket at once, where one whose
    transaction flushes or updates a chain waits for the kernel's RCU grace period); for
    bench/versus.py's in-process floor, `as_switch`, as a switch writes them (chains as
    blocks, elements in the maps' declarations: backends/nftables/backend.py), which spares
    libnftables a dump of every chain of every table."""
    from nm_zones.backends.nftables.backend import _drop_chains, interface_script
    from nm_zones.config.load import load
    from nm_zones.ifname import chain_name
    from nm_zones.paths import Paths
    from nm_zones.ruleset.build import compile_interface
    from nm_zones.ruleset.layout import CHAIN_KINDS
    from nm_zones.ruleset.plan import KernelPlan

    config = load(Paths(config="/nonexistent")).config
    ruleset = compile_interface(interface, config.zones["public"], config)
    plan = KernelPlan(interface, ruleset.chains_by_table())
    chains = [chain_name(interface, kind) for kind in CHAIN_KINDS]
    if as_switch:
        script = interface_script(plan, present=set())
    else:
        script = interface_script(plan, replace=False)
    return ("\n".join(script) + "\n",
            "\n".join(_drop_chains(interface, chains)) + "\n")


class Bench:
    def __init__(self, runs: int, tmp: str, backend: str = "iptables"):
        self.runs = runs
        self.tmp = tmp
        self.backend = backend
        self.config = os.path.join(tmp, "etc-nm-zones")
        # the state lives on tmpfs, as /run/nm-zones does (fsync costs nothing there)
        self.state = tempfile.mkdtemp(prefix="nm-zones-bench-state-", dir="/dev/shm")
        self.data = os.path.join(tmp, "var-lib-nm-zones")  # the known networks
        os.makedirs(os.path.join(self.config, "zones.d"), mode=0o755)
        os.makedirs(self.data, mode=0o755)
        with open(os.path.join(self.config, "nm-zones.yaml"), "w") as settings:
            settings.write(f"backend: {backend}\n")
        self.env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "NM_ZONES_CONFIG_DIR": self.config,
            "NM_ZONES_STATE_DIR": self.state,
            "NM_ZONES_DATA_DIR": self.data,
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

    def event(
        self, interface: str, action: str, zone: str | None = None, extra: dict | None = None
    ) -> tuple[float, int]:
        env = {**self.env, **(extra or {})}
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
        return self.nft_floor(interface) if self.backend == "nftables" else self.xt_floor(interface)

    def nft_floor(self, interface: str) -> list[float]:
        """`nft -f` loading one interface's `public` chains and map elements into nm-zones'
        table (made first when absent), one process; removed again after each run, untimed."""
        from nm_zones.backends.nftables.backend import table_script

        nft = shutil.which("nft")
        spawn([nft, "-f", "-"], self.env, ("\n".join(table_script()) + "\n").encode())
        load_text, undo = (script.encode() for script in nft_floor_scripts(interface))
        times = []
        for _ in range(self.runs):
            times.append(spawn([nft, "-f", "-"], self.env, load_text)[0])
            spawn([nft, "-f", "-"], self.env, undo)
        return times

    def xt_floor(self, interface: str) -> list[float]:
        """iptables' own C tools loading one interface's `public` chains and dispatch rules
        into the tables as they are (--noflush), IPv4 then IPv6: what any tool pays for the
        kernel's read and commit of the whole table. Removed again after each run, untimed."""
        from nm_zones.config.load import load
        from nm_zones.paths import Paths
        from nm_zones.ruleset.build import compile_interface

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

    def apply_switch(self, interface: str) -> list[float]:
        """`nm-zones apply` switching a bound interface to another zone, a whole process."""
        self.event(interface, "up", "home")
        zones = ["public", "home"]
        return [self.command("apply", interface, zones[i % 2]) for i in range(self.runs)]

    def noop_connectivity(self) -> list[float]:
        return [self.event("", "connectivity-change")[0] for _ in range(self.runs)]

    def noop_up(self, interface: str) -> list[float]:
        self.event(interface, "up", "home")
        return [self.event(interface, "up", "home")[0] for _ in range(self.runs)]

    # -- f: the zone that follows the network ------------------------------------------

    def gateway(self, interface: str, peer: str) -> subprocess.Popen:
        """`peer` moved into a namespace of its own (a process's, no /run/netns) holding the
        gateway's address; `interface` addressed on its subnet. The holder is returned."""
        holder = subprocess.Popen(["unshare", "-n", "sleep", "3600"])
        wait = time.monotonic() + 5
        while os.readlink(f"/proc/{holder.pid}/ns/net") == os.readlink("/proc/self/ns/net"):
            if time.monotonic() > wait:
                raise RuntimeError("unshare -n did not make a namespace")
            time.sleep(0.01)
        subprocess.run(["ip", "link", "set", peer, "netns", str(holder.pid)], check=True)
        inside = ["nsenter", "-t", str(holder.pid), "-n", "ip"]
        subprocess.run([*inside, "addr", "add", f"{GATEWAY}/24", "dev", peer], check=True)
        subprocess.run([*inside, "link", "set", peer, "up"], check=True)
        subprocess.run(["ip", "addr", "add", ADDRESS, "dev", interface], check=True)
        return holder

    def wired(self, interface: str, zone: str, action: str = "up") -> float:
        """One event of `interface`'s wired profile (`zone` "" : none of its own) after a
        lease, the neighbour table emptied first (a re-plugged cable starts from none)."""
        subprocess.run(["ip", "neigh", "flush", "dev", interface], check=True)
        return self.event(interface, action, zone, LEASE)[0]

    def networks(self, *args: str) -> str:
        return subprocess.run(
            [self.nm_zones, "networks", *args], env=self.env, check=True, capture_output=True,
            text=True,
        ).stdout

    def forget_networks(self) -> None:
        """No known network (the parsed cache in the state follows the file's identity)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.data, "networks.yaml"))

    def pre_up(self, interface: str) -> list[float]:
        """NetworkManager's stage-3 call of a profile without a zone (it waits for this one
        before configuring IP): the unknown-network zone at once, nothing identified."""
        times = []
        for _ in range(self.runs):
            times.append(self.event(interface, "pre-up", "")[0])
            self.event(interface, "down")
        return times

    def first_identification(self, interface: str) -> list[float]:
        """`up` of a profile without a zone on a network not yet stored, no ARP entry."""
        times = []
        for _ in range(self.runs):
            self.forget_networks()
            times.append(self.wired(interface, ""))
            self.event(interface, "down")
        return times

    def known_network(self, interface: str) -> tuple[list[float], list[float]]:
        """`up` on a known network (placed in `home`), and the same event of a profile with
        connection.zone home, alternating so both see the same machine."""
        self.forget_networks()
        self.wired(interface, "")
        self.event(interface, "down")
        stored = json.loads(self.networks("--json"))["networks"]
        self.networks("zone", stored[0]["id"], "home")
        known, own = [], []
        for _ in range(self.runs):
            known.append(self.wired(interface, ""))
            self.event(interface, "down")
            own.append(self.wired(interface, "home"))
            self.event(interface, "down")
        self.wired(interface, "")  # the figures are of the right path: check its zone and reason
        status = subprocess.run([self.nm_zones, "status", interface], env=self.env,
                                capture_output=True, text=True).stdout
        if "home" not in status or "known network" not in status:
            raise RuntimeError(f"the known network's zone was not applied:\n{status}")
        self.event(interface, "down")
        return known, own

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
        "+ the event path (engine, kernel)",
        "import nm_zones.engine, nm_zones.backends.iptables.kernel",
    ),
    (
        "+ python-iptables, to build a rule never seen (iptc_env)",
        "from nm_zones.backends.iptables.iptc_env import import_iptc\nimport_iptc()",
    ),
    ("+ PyYAML", "import yaml"),
    ("+ the dataclass model and compiler", "import nm_zones.config.load, nm_zones.ruleset.build"),
    (
        "+ argparse and the command line",
        "import nm_zones.doors.cli; nm_zones.doors.cli.build_parser()",
    ),
)


def import_costs(runs: int, env: dict) -> list[str]:
    """Whole-process medians of IMPORT_STEPS, to show where a reload's time goes."""
    from nm_zones.doors.install import package_paths

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


def first_floor(bench: Bench, spare: str) -> list[float]:
    """The floor with nothing bound, then the namespace left as nm-zones expects to find it
    (the floor made nm-zones' table or dispatch chains)."""
    times = bench.floor(spare)
    if bench.backend == "nftables":
        subprocess.run(["nft", "delete", "table", "inet", "nm-zones"], check=True)
    else:
        subprocess.run(
            "for t in iptables-legacy ip6tables-legacy; do $t -X nmz-input;"
            " $t -X nmz-forward; $t -X nmz-forward-out; done",
            shell=True,
            check=True,
        )
    return times


def start_floor(bench: Bench) -> list[float]:
    """What any switch as a process pays before it does anything of its own: a process
    started as the launchers start nm-zones, that ends at once (whole-process milliseconds,
    from spawn to reap). Each backend's library is loaded as part of the switch, not here:
    libnftables, or libiptc (python-iptables only builds a rule never seen, which a switch
    measured here never meets)."""
    from nm_zones.doors.install import package_paths

    env = {**bench.env, "PYTHONPATH": ":".join(package_paths())}
    return [spawn([PYTHON, "-S", "-c", "pass"], env)[0] for _ in range(bench.runs)]


def switches_only(bench: Bench, others: int) -> dict[str, list[float]]:
    """What bench/targets.py asks: a switch as the hook (`reapply`) and as `nm-zones apply`,
    and the floor, with 0 and with `others` other interfaces bound; and a process's start
    (start_floor)."""
    target, spare = bench.add_links(2)
    results = {"floor": first_floor(bench, spare), "start": start_floor(bench)}
    results["b0"] = bench.switch(target)
    results["apply0"] = bench.apply_switch(target)
    bench.bind(bench.add_links(others))
    results["b200"] = bench.switch(target)
    results["apply200"] = bench.apply_switch(target)
    results["floor200"] = bench.floor(spare)
    return results


def inside(runs: int, backend: str, others: int = 0) -> int:
    """One backend's figures, in this (fresh) namespace, as one JSON line; with `others`,
    only switches_only()'s."""
    sys.path.insert(0, REPO)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with tempfile.TemporaryDirectory(prefix="nm-zones-bench-") as tmp:
        bench = Bench(runs, tmp, backend)
        if others:
            print("RESULTS " + json.dumps(switches_only(bench, others)))
            shutil.rmtree(bench.state, ignore_errors=True)
            return 0
        target, spare = bench.add_links(2)  # spare: never bound, for the floor
        results: dict[str, list[float]] = {"floor": first_floor(bench, spare)}
        results["a"] = bench.fresh_up(target)
        wired, peer = bench.add_links(1)[0], f"bp{bench.links - 1}"
        holder = bench.gateway(wired, peer)
        try:
            results["f-pre-up"] = bench.pre_up(wired)
            results["f-known"], results["f-own"] = bench.known_network(wired)
            results["f-first"] = bench.first_identification(wired)
        finally:
            holder.kill()
            holder.wait()
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
        results["floor200"] = bench.floor(spare)
        results["rss"] = [bench.peak_rss / 1024]
        if backend == "iptables":
            results["imports"] = import_costs(runs, bench.env)
        print("RESULTS " + json.dumps(results))
        shutil.rmtree(bench.state, ignore_errors=True)
    return 0


FLOORS = {
    "iptables": "iptables-legacy-restore + ip6tables-legacy-restore",
    "nftables": "nft -f",
}
# (key, label, target as text, the backend's own limit or None); the switch ratio's target
# is per backend: 1.3 for iptables (a legacy commit copies the whole table), 1.1 for nftables
ROWS = (
    ("a", "a. hook `up`, fresh interface, IPv4 + IPv6", "<= 60"),
    ("b0", "b. hook `reapply`, zone switch, 0 others bound", "<= 60"),
    ("c-conn", "c. hook `connectivity-change` (no-op)", "<= 25"),
    ("c-up", "c. hook `up`, nothing changed (no-op)", "<= 25"),
    ("d1", "d. `nm-zones reload`, one zone changed, 1 bound", "<= 2 x b"),
    ("d50", "d. `nm-zones reload`, one zone changed, 50 bound", "<= 2 x b"),
    ("d200", "d. `nm-zones reload`, one zone changed, 200 bound", "<= 2 x b"),
    ("b200", "e. zone switch, 200 others bound", "<= 1.3 x b (iptables), 1.1 x b (nftables)"),
    ("f-pre-up", "f. hook `pre-up`, no zone of its own (nothing identified yet)", "<= 60"),
    ("f-own", "f. hook `up` after a lease, profile with connection.zone", "<= 60"),
    ("f-known", "f. hook `up` after a lease, no zone of its own, known network",
     f"<= 60, <= {KNOWN_RATIO} x f own"),
    ("f-first", "f. the same, first identification (empty ARP table, new network)", "<= 3000"),
)
SWITCH_RATIO = {"iptables": 1.3, "nftables": 1.1}


def report(runs: int, results: dict[str, dict]) -> tuple[list[str], int, int]:
    """The side-by-side table, and how many targets were met of how many."""
    names = list(results)
    header = "| measurement | " + " | ".join(f"{n} median | {n} / floor" for n in names)
    lines = [
        f"nm-zones benchmark: {runs} runs each, whole processes, milliseconds "
        f"({os.cpu_count()} cores, Python {sys.version.split()[0]})",
        "",
        header + " | target |",
        "|---|" + "---|---|" * len(names) + "---|",
    ]
    medians = {
        n: {k: statistics.median(v) for k, v in r.items() if k != "imports"}
        for n, r in results.items()
    }

    def cells(key: str, floor_key: str = "floor") -> str:
        return " | ".join(
            f"{medians[n][key]:.1f} | {medians[n][key] / medians[n][floor_key]:.1f}x" for n in names
        )

    lines.append(f"| floor, one interface in `public`, 0 others bound | {cells('floor')} | |")
    for key, label, target in ROWS:
        floor_key = "floor200" if key == "b200" else "floor"
        lines.append(f"| {label} | {cells(key, floor_key)} | {target} |")
    lines.append(f"| floor with 200 others bound | {cells('floor200')} | |")
    lines.append("")
    met = total = 0
    for name in names:
        m = medians[name]
        ratio = m["b200"] / m["b0"]
        lines.append(
            f"{name}: floors {', '.join(FLOORS[name].split(' + '))}; e. 200 bound / 0 bound: "
            f"{ratio:.2f} (target <= {SWITCH_RATIO[name]}); the floor's own: "
            f"{m['floor200'] / m['floor']:.2f}; peak RSS of the hook: {m['rss']:.1f} MiB; "
            f"f. known network / own zone: {m['f-known'] / m['f-own']:.2f} "
            f"(target <= {KNOWN_RATIO})"
        )
        checks = [
            m["a"] <= TARGETS["a"],
            m["b0"] <= TARGETS["b"],
            m["c-conn"] <= TARGETS["c"],
            m["c-up"] <= TARGETS["c"],
            ratio <= SWITCH_RATIO[name],
            all(m[k] <= 2 * m["b0"] for k in ("d1", "d50", "d200")),
            m["rss"] <= 30,
            m["f-pre-up"] <= TARGETS["a"],
            m["f-own"] <= TARGETS["a"],
            m["f-known"] <= TARGETS["a"],
            m["f-known"] <= KNOWN_RATIO * m["f-own"],
            max(results[name]["f-first"]) <= TARGETS["f-first"],
        ]
        met, total = met + sum(checks), total + len(checks)
    if "iptables" in results:
        lines += ["", "where a process's time goes (imports as installed):", ""]
        lines += results["iptables"]["imports"]
    return lines, met, total


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20, help="runs per figure (default 20)")
    parser.add_argument(
        "--backend",
        choices=("iptables", "nftables", "both"),
        default="both",
        help="which backend to measure (default both, side by side)",
    )
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--switches-only", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        return inside(args.runs, args.backend, args.switches_only)
    if os.geteuid() != 0:
        print("bench: run as root (it makes a network namespace)", file=sys.stderr)
        return 1
    compile_package()
    backends = ("iptables", "nftables") if args.backend == "both" else (args.backend,)
    results = {}
    for backend in backends:
        results[backend] = measure_in_namespace(args.runs, backend)
        if results[backend] is None:
            return 1
    lines, met, total = report(args.runs, results)
    print("\n".join(lines))
    print(f"targets met: {met} of {total}")
    return 0


def measure_in_namespace(runs: int, backend: str, switches_only: int = 0) -> dict | None:
    """inside() in a fresh network namespace of its own (`unshare -n`: nothing under
    /run/netns, gone with the process); its JSON line, or None when it failed.
    `switches_only`: only switches_only()'s figures, with that many others bound."""
    argv = [PYTHON, os.path.abspath(__file__), "--inside", "--runs", str(runs)]
    argv += ["--switches-only", str(switches_only)]
    result = subprocess.run(
        ["unshare", "-n", *argv, "--backend", backend], capture_output=True, text=True
    )
    for line in result.stdout.splitlines():
        if line.startswith("RESULTS "):
            return json.loads(line[len("RESULTS ") :])
    print(f"bench: {backend} failed:\n{result.stdout}{result.stderr}", file=sys.stderr)
    return None


if __name__ == "__main__":
    sys.exit(main())
