"""nm-zones, shown: a real NetworkManager connection moves through public, home and block.

Everything runs in a namespace sandbox (its own network, mounts and processes): a private
NetworkManager and D-Bus, the nm-zones hook installed as an admin would, one veth link to a
peer host that probes what it can reach. This machine's own network is never touched, and
nothing is left behind. Run as root: `bash .ci/setup && .venv/bin/python3 demo/demo.py`.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from tests.harness.nm_sandbox import NMSandbox  # noqa: E402

PROBES = [("ssh", "tcp", 22), ("web", "tcp", 8080), ("printer", "udp", 631), ("ping", "ping", 0)]


def say(text: str = "") -> None:
    print(text, flush=True)


def show_reach(nm, link) -> None:
    specs = [
        {"kind": kind, "address": address, "port": port}
        for address in (link.ipv4, link.ipv6)
        for _, kind, port in PROBES
    ]
    results = nm.probe(specs)
    half = len(PROBES)
    say(f"    {'the peer host tries':<24} {'IPv4 ' + link.ipv4:<22} IPv6 {link.ipv6}")
    for i, (name, kind, port) in enumerate(PROBES):
        what = f"{name} ({kind}/{port})" if port else name
        say(f"    {what:<24} {results[i]:<22} {results[i + half]}")


def show_status(nm) -> None:
    for line in nm.nm_zones("status").stdout.splitlines()[1:]:
        say("    status: " + " ".join(line.split()))


def step(title: str) -> None:
    say()
    say(f"== {title}")


def main() -> int:
    if os.geteuid() != 0:
        print("demo: run as root (it makes network namespaces)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="nm-zones-demo-") as tmp, NMSandbox(tmp) as nm:
        say("A private NetworkManager is running in a sandbox; installing the nm-zones hook:")
        nm.install_hook()
        say("    " + nm.sh("ls /etc/NetworkManager/dispatcher.d/50-nm-zones").stdout.strip())
        link = nm.add_veth()
        nm.listen()
        say(
            f"Interface {link.name} in the sandbox, cabled to a peer host at {link.peer_ipv4} "
            f"and {link.peer_ipv6}; services listen on tcp/22, tcp/8080 and udp/631."
        )

        step('nmcli connection up "Cafe": a network nobody has placed gets default-zone')
        nm.add_connection(link, "Cafe")
        started = time.monotonic()
        nm.nmcli("connection", "up", "Cafe")
        nm.wait_zone(link.name, "public")
        say(f"    (connection up and zone applied in {time.monotonic() - started:.2f} s)")
        nm.wait_reachable(link)
        show_status(nm)
        show_reach(nm, link)

        # --profile: the zone goes into the profile (connection.zone), for every network it
        # is used on; without it nm-zones places the network the profile is on, and this
        # peer gives no lease and no gateway to tell that network apart by
        step("nm-zones assign Cafe home --profile: it is your home network after all")
        for line in nm.nm_zones("assign", "Cafe", "home", "--profile").stdout.splitlines():
            say("    " + line)
        show_reach(nm, link)

        step("nm-zones assign Cafe block --profile: now nobody may connect in")
        for line in nm.nm_zones("assign", "Cafe", "block", "--profile").stdout.splitlines():
            say("    " + line)
        show_reach(nm, link)

        step("nmcli connection down Cafe: its rules go with it")
        nm.nmcli("connection", "down", "Cafe")
        nm.wait_zone(link.name, None)
        rules = [line for line in nm.save("ipv4").splitlines() if link.name in line]
        say(f"    rules naming {link.name} left in the kernel: {len(rules)}")
    say()
    say("The sandbox is gone; this machine's network was never touched.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
