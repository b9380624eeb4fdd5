"""nm-zones beside firewalld 1.3.3, in one run: the same work asked of both, calls interleaved.

    python3 bench/versus.py [--runs 20] [--backend nftables|iptables|both] [--others 200]
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
  no-op switch     changeZoneOfInterface to the zone t0 already has (firewalld answers
                   ZONE_ALREADY_SET, nm-zones success: both count)
  reload, edited   the command (`firewall-cmd --reload`, `nm-zones reload`) after zone work,
                   which 30 interfaces are in, changed
  D-Bus reload()   the same through the bus
  port for 30 s    `firewall-cmd --zone=work --add-port=8080/tcp --timeout=30s` and
                   `nm-zones allow 8080/tcp --zone work --for 30s` (removed again, untimed)
  daemon RSS       VmRSS with N others bound
  start-up         from spawning the daemon to its first answer (getDefaultZone), the rules
                   committed

Figures are medians in milliseconds (MiB for RSS); the ratio is nm-zones / firewalld.
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

from tests.harness.firewalld import (  # noqa: E402
    FirewallD,
    firewall_cmd,
    firewalld_root,
    python_env,
)
from tests.harness.lab import PYTHON, base_env, wait_for  # noqa: E402
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

    # -- set-up ---------------------------------------------------------------------------

    def start(self, others: int) -> None:
        self.nm.start()
        self.nm.run(["ip", "-batch", "-"], input_text="".join(
            f"link add {name} type veth peer name p{name}\nlink set {name} up\n"
            for name in ["t0"] + [f"o{n}" for n in range(others)]
        ))
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
            self.serve = self.nm.serve(wait=False)
        self.connect()
        wait_for(lambda: self.answers("getDefaultZone"), 60, interval=0.002,
                 what=f"{self.name} to answer")
        return (time.perf_counter() - started) * 1000

    def stop_daemon(self) -> None:
        if self.firewalld:
            self.firewalld.stop()
        else:
            self.nm.run(["pkill", "-TERM", "-f", "nm_zones serve"], check=False)
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
        """firewall-cmd or nm-zones inside the sandbox, as a whole process."""
        if self.firewalld:
            argv, env = firewall_cmd(self.root, *args), python_env(self.root)
        else:
            argv, env = [PYTHON, "-m", "nm_zones", *args], base_env()
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


def measure(backend: str, runs: int, others: int, root: str) -> list[tuple[str, float, float]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix=f"nm-zones-versus-{backend}-") as tmp:
        sides = [Side("firewalld", tmp, backend, root), Side("nm-zones", tmp, backend, root)]
        try:
            for side in sides:
                side.start(others)
                side.bind("t0", "public")
                side.bind("o0", "public")

            def add(label: str, times: list[list[float]]) -> None:
                rows.append((label, statistics.median(times[0]), statistics.median(times[1])))

            add("D-Bus switch, 1 other bound", interleaved(sides, runs, switch))
            for side in sides:
                for n in range(1, others):
                    side.bind(f"o{n}", "work" if n < IN_WORK else "public")
                side.bind("o0", "work")
            add(f"D-Bus switch, {others} others bound", interleaved(sides, runs, switch))
            add(f"D-Bus no-op switch, {others} bound", interleaved(sides, runs, same))
            few = max(3, runs // 4)
            add(f"reload after editing a zone {IN_WORK} of {others} are in",
                interleaved(sides, few, reload_command))
            for side in sides:  # reload forgets runtime bindings in firewalld: bind again
                for n in range(others):
                    side.bind(f"o{n}", "work" if n < IN_WORK else "public")
                side.bind("t0", "public")
            add("the same through D-Bus reload()", interleaved(sides, few, reload_call))
            for side in sides:
                for n in range(others):
                    side.bind(f"o{n}", "work" if n < IN_WORK else "public")
                side.bind("t0", "public")
            add(f"open a port for 30 s in that zone ({IN_WORK} of {others})",
                interleaved(sides, few, port_for_30s))
            rows.append((f"daemon RSS with {others} bound (MiB)",
                         sides[0].rss_mib(), sides[1].rss_mib()))

            def restart(side: Side, run: int) -> float:
                side.stop_daemon()
                return side.start_daemon()

            add("start-up to first answer", interleaved(sides, max(3, runs // 5), restart))
        finally:
            for side in sides:
                side.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20, help="calls per figure (default 20)")
    parser.add_argument("--others", type=int, default=200,
                        help="other interfaces bound (default 200)")
    parser.add_argument("--backend", choices=("nftables", "iptables", "both"), default="both")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/versus.py: run it as root (namespaces, netfilter)", file=sys.stderr)
        return 1
    root = firewalld_root()
    if root is None or not shutil.which("nft"):
        print("bench/versus.py: needs firewalld's packages (apt-get download) and nft",
              file=sys.stderr)
        return 1
    print(f"nm-zones beside firewalld 1.3.3, medians of {args.runs} interleaved runs "
          f"(fewer for reloads and start-up); {os.cpu_count()} cores\n")
    for backend in ("nftables", "iptables") if args.backend == "both" else (args.backend,):
        print(f"### {backend}\n")
        print("| same work | firewalld | nm-zones | ratio |")
        print("|---|---|---|---|")
        for label, theirs, ours in measure(backend, args.runs, args.others, root):
            print(f"| {label} | {theirs:.1f} | {ours:.1f} | {ours / theirs:.2f}x |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
