"""`nm-zones serve`: how long a D-Bus call takes, from the call to its reply, with the rules
committed (the service replies after the kernel commit).

    /usr/bin/python3 bench/service.py [--runs 50]        (root; everything happens in a sandbox)

The real NetworkManager, dbus-daemon and service run in the tests' namespace sandbox; an
interface with an active NetworkManager profile is switched between two zones the way
NetworkManager asks (`changeZoneOfInterface`, so the service also asks NetworkManager which
profile is active), then asked for the zone it already has (a no-op), then `getZones` (a read
that lists every profile's zone). The client is one process inside the sandbox that times
each call around a blocking jeepney round trip.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from tests.harness.lab import PYTHON  # noqa: E402
from tests.harness.nm_sandbox import NMSandbox  # noqa: E402

TARGET_MS = 10.0

CLIENT = """
import json, sys, time
from jeepney import DBusAddress, MessageType, new_method_call
from jeepney.io.blocking import open_dbus_connection

runs, interface = int(sys.argv[1]), sys.argv[2]
zone = DBusAddress("/org/fedoraproject/FirewallD1", bus_name="org.fedoraproject.FirewallD1",
                   interface="org.fedoraproject.FirewallD1.zone")
connection = open_dbus_connection("SYSTEM")

def timed(method, signature=None, body=()):
    started = time.perf_counter()
    reply = connection.send_and_get_reply(new_method_call(zone, method, signature, body))
    elapsed = (time.perf_counter() - started) * 1000
    if reply.header.message_type != MessageType.method_return:
        raise SystemExit(f"{method}{body}: {reply.body}")
    return elapsed

times = {"switch": [], "same": [], "getZones": []}
for run in range(runs):
    target = ("home", "public")[run % 2]
    times["switch"].append(timed("changeZoneOfInterface", "ss", (target, interface)))
    times["same"].append(timed("changeZoneOfInterface", "ss", (target, interface)))
    times["getZones"].append(timed("getZones"))
print(json.dumps(times))
"""


def row(label: str, times: list[float], target: str = "") -> str:
    median = statistics.median(times)
    return f"| {label} | {median:.1f} | {min(times):.1f} | {max(times):.1f} | {target} |"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=50, help="calls per figure (default 50)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/service.py: run it as root (namespaces, netfilter)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="nm-zones-bench-service-") as tmp:
        nm = NMSandbox(os.path.join(tmp, "sandbox"))
        nm.start()
        try:
            nm.install_hook()
            nm.serve()
            link = nm.add_veth()
            nm.add_connection(link, "lan")
            nm.nmcli("connection", "up", "lan")
            nm.wait_zone(link.name, "public")
            result = nm.run([PYTHON, "-c", CLIENT, str(args.runs), link.name], timeout=600)
            times = json.loads(result.stdout)
            held = nm.zone_of(link.name)
        finally:
            nm.stop()
    expected = ("home", "public")[(args.runs - 1) % 2]
    if held != expected:
        print(f"the last switch did not stick: {held} (expected {expected})", file=sys.stderr)
        return 1
    print(f"nm-zones serve: {args.runs} calls each, milliseconds from call to reply")
    print(f"({os.cpu_count()} cores, Python {sys.version.split()[0]})\n")
    print("| call | median | min | max | target |")
    print("|---|---|---|---|---|")
    print(row("changeZoneOfInterface, zone switch, rules committed", times["switch"], "< 10"))
    print(row("changeZoneOfInterface, the zone it has (no-op)", times["same"]))
    print(row("getZones (every zone and every profile's zone)", times["getZones"]))
    met = statistics.median(times["switch"]) < TARGET_MS
    print(f"\ntarget {'met' if met else 'NOT met'}: median switch under {TARGET_MS:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
