"""nm-zones beside firewalld 1.3.3, in one run: the same work asked of both, calls interleaved.

    /usr/bin/python3 bench/versus.py [--runs 20] [--backend nftables|iptables|both]
                                     [--others 200] [--flows 10000]
                                     (root; everything happens in two namespace sandboxes)

Each daemon runs in a NetworkManager sandbox of its own (tests/harness/nm_sandbox.py: private
network, mount and pid namespaces, a private system bus): firewalld from Debian's package,
unpacked and never installed (tests/harness/firewalld.py), and `nm-zones serve`. One client
process here holds a D-Bus connection to each sandbox's bus (through /proc/PID/root) and
alternates its calls between the two, so both see the same load on the machine. Commands
(firewall-cmd, nm-zones) run inside their sandbox, nsenter included on both sides.

Each sandbox has the interface `t0` that the switches use and `--others` more veth interfaces;
30 of the others are bound to zone work, the rest to public. Rows:

  switch           changeZoneOfInterface home <-> public of t0, with 1 and with N others bound
  commit floor     (nftables) after each: one libnftables transaction of a spare interface's
                   chains in nm-zones' table, in its sandbox, in-process as the service commits
  no-op switch     changeZoneOfInterface to the zone t0 already has (firewalld answers
                   ZONE_ALREADY_SET, nm-zones success: both count)
  reload, edited   the command (`firewall-cmd --reload`, `nm-zones reload`) after zone work,
                   which 30 interfaces are in, changed
  D-Bus reload()   the same through the bus
  lost in reloads  during both reload rows, a client on a peer host opens a new TCP connection
                   to port 22 (ssh, open in zone work) of interface w0 (zone work) every 20 ms;
                   those not answered within a second count as lost
  port for 30 s    `firewall-cmd --zone=work --add-port=8080/tcp --timeout=30s` and
                   `nm-zones allow 8080/tcp --zone work --for 30s` (removed again, untimed)
  tightening       changeZoneOfInterface home -> block of t0 (an address on it, so that a
                   switch that tightens looks at open flows), with none, 1 and --flows
                   unrelated UDP flows tracked (entries made through ctnetlink, from sources
                   routed through o0, with the ct mark o0's chains give a flow at its first
                   packet); then with the same flows unmarked (as flows older than nm-zones'
                   rules, or this host's own, are: nm-zones reads those); block -> home
                   again, untimed. With them, the floor: one conntrack dump the kernel
                   filters to nothing, timed inside nm-zones' sandbox
  daemon RSS       VmRSS with N others bound
  start-up         from spawning the daemon to its first answer (getDefaultZone), the rules
                   committed

Figures are medians in milliseconds (MiB for RSS); the ratio is nm-zones / firewalld.
firewalld always runs on Debian's /usr/bin/python3; nm-zones on the interpreter that runs this
script. Run it with /usr/bin/python3, the interpreter the Debian package runs nm-zones on, to
compare like with like: the header says which each side ran on.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from jeepney import DBusAddress, MessageType, new_method_call  # noqa: E402
from jeepney.io.blocking import open_dbus_connection  # noqa: E402

from bench import compile_package  # noqa: E402
from nm_zones.doors.install import COMMAND_PATH  # noqa: E402
from nm_zones.ruleset.layout import flow_mark  # noqa: E402
from tests.harness.firewalld import (  # noqa: E402
    SYSTEM_PYTHON,
    FirewallD,
    firewall_cmd,
    firewalld_root,
    python_env,
)
from tests.harness.lab import PYTHON, Link, base_env, wait_for  # noqa: E402
from tests.harness.nm_sandbox import NMSandbox  # noqa: E402

MAIN = DBusAddress("/org/fedoraproject/FirewallD1", bus_name="org.fedoraproject.FirewallD1",
                   interface="org.fedoraproject.FirewallD1")
ZONE = DBusAddress("/org/fedoraproject/FirewallD1", bus_name="org.fedoraproject.FirewallD1",
                   interface="org.fedoraproject.FirewallD1.zone")
BUS = DBusAddress("/org/freedesktop/DBus", bus_name="org.freedesktop.DBus",
                  interface="org.freedesktop.DBus")
IN_WORK = 30
WORK_XML = """<?xml version="1.0" encoding="utf-8"?>
<zone>
  <short>Work</short>
  <service name="ssh"/>
  <service name="dhcpv6-client"/>
  <port protocol="tcp" port="{port}"/>
</zone>
"""
WORK_YAML = """description: For use in work areas.
services: [ssh, dhcpv6-client]
ports: [{port}/tcp]
"""


class Side:
    """One daemon in its sandbox, and this process's connection to its bus."""

    def __init__(self, name: str, tmp: str, backend: str, root: str):
        self.name, self.backend, self.root = name, backend, root
        self.nm = NMSandbox(os.path.join(tmp, name))
        self.firewalld: FirewallD | None = None
        self.serve: subprocess.Popen | None = None
        self.connection = None
        self.edits = 0
        self.w0: Link | None = None

    # -- set-up ---------------------------------------------------------------------------

    def start(self, others: int) -> None:
        self.nm.start()
        self.nm.run(["ip", "-batch", "-"], input_text="".join(
            f"link add {name} type veth peer name p{name}\nlink set {name} up\n"
            for name in ["t0"] + [f"o{n}" for n in range(others)]
        ))
        self.w0 = self.nm.add_veth("w0")  # its peer end on the sandbox's peer host
        self.nm.run(["ip", "address", "add", f"{self.w0.ipv4}/24", "dev", "w0"])
        self.nm.run(["ip", "link", "set", "w0", "up"])
        self.nm.listen(tcp=(22,), udp=())
        if self.name == "firewalld":
            if self.backend == "iptables":  # firewalld runs `iptables-restore`: make it legacy
                for tool in ("iptables", "ip6tables"):
                    self.nm.run(["update-alternatives", "--set", tool, f"/usr/sbin/{tool}-legacy"])
            self.firewalld = FirewallD(self.nm, self.root, backend=self.backend)
        else:
            self.nm.install_hook()
            self.nm.sh(f"echo 'backend: {self.backend}' > /etc/nm-zones/nm-zones.yaml")
        self.start_daemon()

    def start_daemon(self) -> float:
        """Start the daemon; milliseconds from spawning it to its first answer."""
        started = time.perf_counter()
        if self.firewalld:
            self.firewalld.start()
        else:
            self.serve = self.nm.serve(wait=False, installed=True)  # as its unit starts it
        self.connect()
        wait_for(lambda: self.answers("getDefaultZone"), 60, interval=0.002,
                 what=f"{self.name} to answer")
        return (time.perf_counter() - started) * 1000

    def stop_daemon(self) -> None:
        if self.firewalld:
            self.firewalld.stop()
        else:
            self.nm.run(["pkill", "-TERM", "-f", "nm.zones serve"], check=False)
            assert self.serve is not None
            self.serve.wait(15)
            wait_for(lambda: not self.nm.name_owned(), 15, what="nm-zones serve to stop")
        if self.connection:
            self.connection.close()
            self.connection = None

    def connect(self) -> None:
        socket = f"/proc/{self.nm.pid}/root/run/dbus/system_bus_socket"
        self.connection = open_dbus_connection(f"unix:path={socket}")

    def close(self) -> None:
        if self.connection:
            self.connection.close()
        if self.firewalld:
            self.firewalld.stop()
        self.nm.stop()

    # -- calls ----------------------------------------------------------------------------

    def call(self, address: DBusAddress, method: str, signature=None, body=()):
        message = new_method_call(address, method, signature, body)
        return self.connection.send_and_get_reply(message, timeout=120)

    def answers(self, method: str) -> bool:
        try:
            return self.call(MAIN, method).header.message_type == MessageType.method_return
        except (ConnectionError, OSError, TimeoutError):
            return False

    def timed(self, address: DBusAddress, method: str, signature=None, body=(),
              ok: tuple[str, ...] = ()) -> float:
        started = time.perf_counter()
        reply = self.call(address, method, signature, body)
        elapsed = (time.perf_counter() - started) * 1000
        if reply.header.message_type != MessageType.method_return and not any(
            code in str(reply.body) for code in ok
        ):
            raise RuntimeError(f"{self.name}: {method}{body}: {reply.body}")
        return elapsed

    def bind(self, interface: str, zone: str) -> None:
        self.timed(ZONE, "changeZoneOfInterface", "ss", (zone, interface),
                   ok=("ZONE_ALREADY_SET",))

    def command(self, *args: str) -> float:
        """firewall-cmd or nm-zones inside the sandbox, as a whole process, each as it is
        run once installed (nm-zones: the launcher `nm-zones install` wrote, `python -S`)."""
        if self.firewalld:
            argv, env = firewall_cmd(self.root, *args), python_env(self.root)
        else:
            argv, env = [f"/{COMMAND_PATH}", *args], base_env()
        started = time.perf_counter()
        result = self.nm.run(argv, check=False, env=env)
        elapsed = (time.perf_counter() - started) * 1000
        if result.returncode != 0:
            raise RuntimeError(f"{self.name}: {args}: {result.stdout}{result.stderr}")
        return elapsed

    def edit_work(self) -> None:
        """Change zone work (another port each time), so that a reload has work to do."""
        self.edits += 1
        port = 9000 + self.edits
        if self.firewalld:
            path = os.path.join(self.firewalld.config, "zones", "work.xml")
            with open(path, "w") as stream:
                stream.write(WORK_XML.format(port=port))
        else:
            self.nm.run(["sh", "-c", "cat > /etc/nm-zones/zones.d/work.yaml"],
                        input_text=WORK_YAML.format(port=port))

    def rss_mib(self) -> float:
        pid = self.call(BUS, "GetConnectionUnixProcessID", "s", (MAIN.bus_name,)).body[0]
        status = self.nm.run(["cat", f"/proc/{pid}/status"]).stdout
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024


# -- the rows ---------------------------------------------------------------------------------


def interleaved(sides: list[Side], runs: int, work: Callable[[Side, int], float]) -> list[list]:
    """`work(side, run)` for each run, alternating between the sides; per side its times."""
    times: list[list[float]] = [[] for _ in sides]
    for run in range(runs):
        order = list(enumerate(sides)) if run % 2 == 0 else list(enumerate(sides))[::-1]
        for index, side in order:
            times[index].append(work(side, run))
    return times


def switch(side: Side, run: int) -> float:
    return side.timed(ZONE, "changeZoneOfInterface", "ss", (("home", "public")[run % 2], "t0"))


def same(side: Side, run: int) -> float:
    zone = ("home", "public")[run % 2]
    side.bind("t0", zone)
    return side.timed(ZONE, "changeZoneOfInterface", "ss", (zone, "t0"), ok=("ZONE_ALREADY_SET",))


def reload_command(side: Side, run: int) -> float:
    side.edit_work()
    return side.command("--reload") if side.firewalld else side.command("reload")


def reload_call(side: Side, run: int) -> float:
    side.edit_work()
    elapsed = side.timed(MAIN, "reload")
    # firewalld's reload() returns before its rules are back: wait for the state, untimed
    wait_for(lambda: side.answers("getDefaultZone"), 60, interval=0.01, what="the reload")
    return elapsed


def port_for_30s(side: Side, run: int) -> float:
    if side.firewalld:
        elapsed = side.command("--zone=work", "--add-port=8080/tcp", "--timeout=30s")
        side.command("--zone=work", "--remove-port=8080/tcp")
    else:
        elapsed = side.command("allow", "8080/tcp", "--zone", "work", "--for", "30s")
        side.command("revoke", "8080/tcp", "--zone", "work")
    return elapsed


def add_flows(side: Side, count: int, mark: int) -> None:
    """`count` UDP flows in the sandbox's conntrack table, from 10.201.0.0/16 (routed through
    o0) to o0's address: unrelated to t0. Made with ctnetlink, no packet sent, with ct mark
    `mark` (o0's, as its chains set it at a flow's first packet, or 0); they live an hour."""
    side.nm.run([PYTHON, "-c", ADD_FLOWS, str(count), str(mark)], timeout=600)


ADD_FLOWS = """
import sys
from pyroute2 import NFCTSocket
from pyroute2.netlink.nfnetlink.nfctsocket import NFCTAttrTuple
with NFCTSocket() as conntrack:
    for n in range(int(sys.argv[1])):
        source, port = f"10.201.{n // 250}.{n % 250 + 2}", 20000 + n % 40000
        conntrack.entry(
            "add", timeout=3600, mark=int(sys.argv[2]),
            tuple_orig=NFCTAttrTuple(saddr=source, daddr="10.201.255.1", proto=17,
                                     sport=port, dport=53),
            tuple_reply=NFCTAttrTuple(saddr="10.201.255.1", daddr=source, proto=17,
                                      sport=53, dport=port))
"""


CONNECTOR = """
import select, socket, sys, time
tried = lost = 0
while not select.select([sys.stdin], [], [], 0)[0]:
    tried += 1
    try:
        socket.create_connection((sys.argv[1], 22), timeout=1).close()
    except OSError:
        lost += 1
    time.sleep(0.02)
print(tried, lost)
"""


def start_connecting(side: Side) -> subprocess.Popen:
    """CONNECTOR on the peer host, opening connections to w0 until its input closes."""
    return subprocess.Popen(
        ["ip", "netns", "exec", side.nm.peer, PYTHON, "-c", CONNECTOR, side.w0.ipv4],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=base_env(),
    )


def stop_connecting(process: subprocess.Popen) -> tuple[int, int]:
    """(connections tried, lost)."""
    tried, lost = process.communicate("stop\n", timeout=30)[0].split()
    return int(tried), int(lost)


def tighten(side: Side, run: int) -> float:
    side.bind("t0", "home")
    return side.timed(ZONE, "changeZoneOfInterface", "ss", ("block", "t0"))


DUMP_FLOOR = """
import statistics, sys, time
from nm_zones.conntrack import Conntrack
times = []
conntrack = Conntrack()
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    assert not conntrack.marked(0xFF, 0xFF)  # no flow here has its low 8 mark bits all set
    times.append((time.perf_counter() - start) * 1000)
print(statistics.median(times))
"""


def dump_floor(side: Side, runs: int) -> float:
    """The median time of one conntrack dump that the kernel filters to nothing, in the
    sandbox: what a switch that looks at flows cannot go below (the walk of the kernel's
    whole hash table, every namespace's entries and every bucket)."""
    return float(side.nm.run([PYTHON, "-c", DUMP_FLOOR, str(runs)]).stdout)


READ_FLOOR = """
import statistics, sys, time
from nm_zones.backends.iptables.held import table_blob
times = []
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    for family in ("ipv4", "ipv6"):
        table_blob(family, "filter")
    times.append((time.perf_counter() - start) * 1000)
print(statistics.median(times))
"""


def read_floor(side: Side, runs: int) -> float:
    """The median time of reading both legacy filter tables once, in the sandbox: what any
    call that checks the kernel costs at least with iptables (x_tables has no generation
    number; a table is read whole, counters and all)."""
    return float(side.nm.run([PYTHON, "-c", READ_FLOOR, str(runs)]).stdout)


COMMIT_FLOOR = """
import statistics, sys, time
sys.path.insert(0, sys.argv[2])
from bench import nft_floor_scripts
from nm_zones.backends.nftables.libnft import Nft

add, undo = nft_floor_scripts("floor0", as_switch=True)
nft, times = Nft(), []
for _ in range(int(sys.argv[1])):
    start = time.perf_counter()
    nft.run(add)
    times.append((time.perf_counter() - start) * 1000)
    nft.run(undo)
print(statistics.median(times))
"""


def commit_floor(side: Side, runs: int) -> float:
    """The median time of one libnftables transaction putting a spare interface's `public`
    chains and map elements into nm-zones' table, in-process as the service commits, in the
    service's sandbox with the table as it is (removed again after each, untimed): what a
    switch's commit costs at least with the table's size. The service reads its table whole
    once afterwards (the generation id moved); an untimed call pays for that."""
    bench_folder = os.path.dirname(os.path.abspath(__file__))
    floor = float(side.nm.run([PYTHON, "-c", COMMIT_FLOOR, str(runs), bench_folder]).stdout)
    same(side, 0)
    return floor


def flush_flows(side: Side) -> None:
    side.nm.run([PYTHON, "-c", "from pyroute2 import NFCTSocket\n"
                 "with NFCTSocket() as c: c.flush()"])


def conntrack_count(side: Side) -> int:
    return int(side.nm.run(["cat", "/proc/sys/net/netfilter/nf_conntrack_count"]).stdout)


Row = tuple[str, str, float, float]  # key, label, firewalld's median, nm-zones' median


def measure(backend: str, runs: int, others: int, root: str, flows: int = 10000) -> list[Row]:
    """Every row for one backend, both daemons started afresh in sandboxes of their own."""
    rows: list[Row] = []
    connectors: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix=f"nm-zones-versus-{backend}-") as tmp:
        sides = [Side("firewalld", tmp, backend, root), Side("nm-zones", tmp, backend, root)]
        try:
            for side in sides:
                side.start(others)
                side.bind("t0", "public")
                side.bind("o0", "public")

            def add(key: str, label: str, times: list[list[float]]) -> None:
                rows.append((key, label, statistics.median(times[0]),
                             statistics.median(times[1])))

            add("switch1", "D-Bus switch, 1 other bound", interleaved(sides, runs, switch))
            if backend == "nftables":
                rows.append(("commitfloor1", "floor: one libnftables transaction of an "
                             "interface's chains in the service's table, 1 other bound", 0.0,
                             commit_floor(sides[1], runs)))
            in_work = min(IN_WORK, others)

            def bind_all(side: Side) -> None:
                for n in range(others):
                    side.bind(f"o{n}", "work" if n < in_work else "public")
                side.bind("t0", "public")
                side.bind("w0", "work")

            for side in sides:
                for n in range(1, others):
                    side.bind(f"o{n}", "work" if n < in_work else "public")
                side.bind("o0", "work")
            add("switchN", f"D-Bus switch, {others} others bound",
                interleaved(sides, runs, switch))
            add("noop", f"D-Bus no-op switch, {others} bound", interleaved(sides, runs, same))
            if backend == "nftables":
                rows.append(("commitfloorN", "floor: the same transaction, "
                             f"{others} others bound", 0.0, commit_floor(sides[1], runs)))
            if backend == "iptables":
                rows.append(("readfloor", f"floor: reading both filter tables once, {others} "
                             "bound (what checking the kernel costs at least)", 0.0,
                             read_floor(sides[1], runs)))
            few = max(3, runs // 4)
            for side in sides:
                side.bind("w0", "work")
            connectors += [start_connecting(side) for side in sides]
            add("reload", f"reload after editing a zone {in_work} of {others} are in",
                interleaved(sides, few, reload_command))
            for side in sides:  # reload forgets runtime bindings in firewalld: bind again
                bind_all(side)
            add("reload_call", "the same through D-Bus reload()",
                interleaved(sides, few, reload_call))
            (fw_tried, fw_lost), (our_tried, our_lost) = map(stop_connecting, connectors)
            rows.append(("lost", f"new connections lost during these {2 * few} reloads "
                         f"(of {fw_tried} / {our_tried} tried)", fw_lost, our_lost))
            for side in sides:
                bind_all(side)
            add("port", f"open a port for 30 s in that zone ({in_work} of {others})",
                interleaved(sides, few, port_for_30s))
            rows.append(("rss", f"daemon RSS with {others} bound (MiB)",
                         sides[0].rss_mib(), sides[1].rss_mib()))
            if flows:
                for side in sides:  # t0 routed (a switch that tightens looks at flows then)
                    side.nm.run(["ip", "-batch", "-"], input_text=(
                        "address add 10.99.0.1/24 dev t0\nlink set pt0 up\n"
                        "address add 10.201.255.1/16 dev o0\nlink set po0 up\n"))
                    side.bind("t0", "home")
                    flush_flows(side)  # the connections of the reload rows, among others
                counts = [conntrack_count(side) for side in sides]
                before = "/".join(map(str, counts))
                add("tighten0", f"tightening switch (home -> block), {before} flows tracked",
                    interleaved(sides, runs, tighten))
                rows.append(("tracked0", "flows tracked before that switch (a count)",
                             *map(float, counts)))
                # the dump walks every bucket: with no flow it costs what it costs with many
                rows.append(("dumpfloor0", "floor: the same conntrack dump before the "
                             "flows were added", 0.0, dump_floor(sides[1], runs)))
                for side in sides:
                    add_flows(side, 1, flow_mark("o0"))
                add("tighten1", "the same, 1 unrelated flow tracked",
                    interleaved(sides, runs, tighten))
                for side in sides:
                    flush_flows(side)
                    add_flows(side, flows, flow_mark("o0"))
                tracked = "/".join(str(conntrack_count(side)) for side in sides)
                add("tightenF", f"tightening switch (home -> block), {flows} unrelated flows "
                    f"tracked ({tracked} in the tables, {before} before)",
                    interleaved(sides, few, tighten))
                rows.append(("dumpfloor", "floor: one conntrack dump the kernel filters to "
                             "nothing (it walks the whole hash table)", 0.0,
                             dump_floor(sides[1], runs)))
                for side in sides:
                    flush_flows(side)
                    add_flows(side, flows, 0)
                add("tightenU", f"the same, the {flows} flows unmarked (older than the rules)",
                    interleaved(sides, few, tighten))
                for side in sides:
                    flush_flows(side)
                    side.bind("t0", "public")

            def restart(side: Side, run: int) -> float:
                side.stop_daemon()
                return side.start_daemon()

            add("startup", "start-up to first answer",
                interleaved(sides, max(3, runs // 5), restart))
        finally:
            for process in connectors:
                process.kill()
                process.wait()
            for side in sides:
                side.close()
    return rows


def interpreters() -> str:
    """Which Python each side ran on: a ratio between two interpreters measures them too
    (pyenv's, built without PGO, starts and runs slower than Debian's)."""
    def described(python: str) -> str:
        version = subprocess.run([python, "-S", "-c", "import platform; "
                                  "print(platform.python_version())"],
                                 capture_output=True, text=True).stdout.strip()
        return f"{os.path.realpath(python)} (Python {version})"
    ours, theirs = described(sys.executable), described(SYSTEM_PYTHON)
    if ours == theirs:
        return f"both on {ours}"
    return (f"nm-zones on {ours}, firewalld on {theirs}: not the same interpreter, the "
            f"ratios compare them too (run the bench with {SYSTEM_PYTHON})")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20, help="calls per figure (default 20)")
    parser.add_argument("--others", type=int, default=200,
                        help="other interfaces bound (default 200)")
    parser.add_argument("--backend", choices=("nftables", "iptables", "both"), default="both")
    parser.add_argument("--flows", type=int, default=10000,
                        help="unrelated flows tracked for the tightening switch (default "
                             "10000; 0: no tightening rows)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/versus.py: run it as root (namespaces, netfilter)", file=sys.stderr)
        return 1
    root = firewalld_root()
    if root is None or not shutil.which("nft"):
        print("bench/versus.py: needs firewalld's packages (apt-get download) and nft",
              file=sys.stderr)
        return 1
    compile_package()
    print(f"nm-zones beside firewalld 1.3.3, medians of {args.runs} interleaved runs "
          f"(fewer for reloads and start-up); {os.cpu_count()} cores; {interpreters()}\n")
    for backend in ("nftables", "iptables") if args.backend == "both" else (args.backend,):
        print(f"### {backend}\n")
        print("| same work | firewalld | nm-zones | ratio |")
        print("|---|---|---|---|")
        for _key, label, theirs, ours in measure(backend, args.runs, args.others, root,
                                                 args.flows):
            ratio = f"{ours / theirs:.2f}x" if theirs else ""
            print(f"| {label} | {theirs:.1f} | {ours:.1f} | {ratio} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
