"""A small network lab in namespaces: a zoned host and a peer, joined by veth pairs, and for
forwarding an inner namespace behind the zoned host (add_inner, route_via, enable_forwarding).

Nothing here ever changes the namespace the test runner lives in: namespaces and links are
made with pyroute2 (its netlink sockets live in the target namespace), and every process that
touches netfilter is started inside its namespace with `ip netns exec`, living there for its
whole life (python-iptables caches tables per process). Every nm-zones process also gets
NM_ZONES_REFUSE_NETNS naming the runner's namespace, so that even a mistake here cannot
change this machine's own firewall.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field

from pyroute2 import NetNS, netns

from nm_zones.backends.common import current_netns

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.path.join(REPO, "tests", "harness")
PYTHON = sys.executable
IFA_F_NODAD = 0x02


RUNNER_NETNS = current_netns()


def base_env(**extra: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONPATH": REPO,
        "PYTHONDONTWRITEBYTECODE": "1",
        "NM_ZONES_REFUSE_NETNS": RUNNER_NETNS,
    }
    env.update(extra)
    return env


class HostNetfilterRefused(RuntimeError):
    pass


@dataclass
class Link:
    name: str  # on the zoned host
    peer_name: str  # on the peer
    ipv4: str  # zoned host's address
    ipv6: str
    peer_ipv4: str
    peer_ipv6: str


@dataclass
class Lab:
    """`zoned` holds the interfaces nm-zones filters; `peer` probes them from outside;
    `inner`, once add_inner made it, is a host the zoned host routes for."""

    tmp: str
    backend: str = "iptables"  # written to nm-zones.yaml when it is nftables
    zoned: str = ""
    peer: str = ""
    inner: str = ""
    links: list[Link] = field(default_factory=list)
    processes: list[subprocess.Popen] = field(default_factory=list)

    def __post_init__(self):
        tag = secrets.token_hex(3)
        self.zoned, self.peer = f"nmz-z-{tag}", f"nmz-p-{tag}"
        netns.create(self.zoned)
        netns.create(self.peer)
        self.state_dir = os.path.join(self.tmp, "state")
        self.config_dir = os.path.join(self.tmp, "etc-nm-zones")
        self.data_dir = os.path.join(self.tmp, "var-lib-nm-zones")
        os.makedirs(self.config_dir, exist_ok=True)
        if self.backend != "iptables":
            with open(os.path.join(self.config_dir, "nm-zones.yaml"), "w") as settings:
                settings.write(f"backend: {self.backend}\n")
        for name in (self.zoned, self.peer):
            with NetNS(name) as ns:
                ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
        # The kernel rate-limits ICMP errors per peer; probes come in bursts, and a refusal
        # the kernel chose not to send would look like a drop.
        self.run(
            self.zoned,
            ["sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0", "net.ipv6.icmp.ratelimit=0"],
        )

    def add_link(self, name: str | None = None, namespace: str | None = None) -> Link:
        """A veth pair: `name` on the zoned host, its other end in `namespace` (the peer's)."""
        namespace = namespace or self.peer
        n = len(self.links) + 1
        name = name or f"vz{n}"
        link = Link(name, f"vp{n}", f"10.77.{n}.1", f"fd77:{n}::1", f"10.77.{n}.2", f"fd77:{n}::2")
        with NetNS(self.zoned) as ns:
            ns.link(
                "add",
                ifname=name,
                kind="veth",
                peer={"ifname": link.peer_name, "net_ns_fd": namespace},
            )
            configure_end(ns, name, link.ipv4, link.ipv6)
        with NetNS(namespace) as ns:
            configure_end(ns, link.peer_name, link.peer_ipv4, link.peer_ipv6)
        self.links.append(link)
        return link

    def add_inner(self, name: str | None = None) -> Link:
        """A link from the zoned host to the inner namespace (made on first use), which
        routes everything through the zoned host."""
        if not self.inner:
            self.inner = self.zoned.replace("nmz-z-", "nmz-i-")
            netns.create(self.inner)
            with NetNS(self.inner) as ns:
                ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
        link = self.add_link(name, self.inner)
        self.route_via(self.inner, link)
        return link

    def route_via(self, namespace: str, link: Link) -> None:
        """Default routes of `namespace`, both families, through the zoned end of `link`."""
        self.run(namespace, ["ip", "route", "add", "default", "via", link.ipv4])
        self.run(namespace, ["ip", "-6", "route", "add", "default", "via", link.ipv6])

    def enable_forwarding(self) -> None:
        """The zoned host routes, IPv4 and IPv6 (nm-zones itself turns on only what a zone
        needs)."""
        self.run(
            self.zoned,
            ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"],
        )

    def delete_link(self, name: str) -> None:
        with NetNS(self.zoned) as ns:
            ns.link("del", index=ns.link_lookup(ifname=name)[0])

    def env(self, **extra: str) -> dict[str, str]:
        return base_env(
            NM_ZONES_STATE_DIR=self.state_dir,
            NM_ZONES_CONFIG_DIR=self.config_dir,
            NM_ZONES_DATA_DIR=self.data_dir,
            **extra,
        )

    def run(
        self,
        namespace: str | None,
        argv: list[str],
        check: bool = True,
        timeout: float = 60,
        input_text: str | None = None,
        **extra_env: str,
    ) -> subprocess.CompletedProcess:
        """Run a process that lives in `namespace` for its whole life."""
        if namespace is None:
            raise HostNetfilterRefused("refusing to run a lab command in the runner's namespace")
        result = subprocess.run(
            ["ip", "netns", "exec", namespace, *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env(**extra_env),
            input=input_text,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{argv} exited {result.returncode}:\n{result.stdout}{result.stderr}"
            )
        return result

    def nm_zones(self, *args: str, check: bool = True, **extra_env: str):
        return self.run(self.zoned, [PYTHON, "-m", "nm_zones", *args], check=check, **extra_env)

    def save(self, family: str = "ipv4", table: str | None = None) -> str:
        tool = "iptables-legacy-save" if family == "ipv4" else "ip6tables-legacy-save"
        argv = [tool] + (["-t", table] if table else [])
        return self.run(self.zoned, argv).stdout

    def flush_netfilter(self) -> None:
        """Empty every legacy table, and nftables, of the zoned host (its own namespace,
        nobody else's)."""
        self.shell(
            "for t in iptables-legacy ip6tables-legacy; do for table in raw nat filter; "
            "do $t -t $table -F; $t -t $table -X; done; done"
        )
        if self.backend == "nftables":
            self.shell("nft flush ruleset")

    def nft_table(self) -> str:
        """nm-zones' nftables table as the zoned host's kernel lists it ("" when absent)."""
        result = self.run(self.zoned, ["nft", "list", "table", "inet", "nm-zones"], check=False)
        return result.stdout if result.returncode == 0 else ""

    def nft_listing(self, namespace: str | None = None):
        """nm-zones' table in the zoned host (or `namespace`) as the backend reads it back:
        ({chain: [rule, ...]}, {map: {interface: verdict}}) from `nft -j`, None when absent."""
        from nm_zones.backends.nftables.listing import parse_listing

        argv = ["nft", "-j", "list", "table", "inet", "nm-zones"]
        result = self.run(namespace or self.zoned, argv, check=False)
        return parse_listing(result.stdout if result.returncode == 0 else "")

    def held_text(self) -> str:
        """Everything nm-zones may hold in the zoned host's kernel, as text: both legacy
        families and nm-zones' nftables table."""
        return self.save("ipv4") + self.save("ipv6") + self.nft_table()

    def shell(self, command: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.run(self.zoned, ["sh", "-c", command], check=check)

    def listen(self, tcp=(22, 8080), udp=(631,), namespace: str | None = None, whoami=()):
        """Services in `namespace` (the zoned host's by default); see listen.py."""
        enter = ["ip", "netns", "exec", namespace or self.zoned]
        self.processes.append(start_listener(enter, self.env(), tcp, udp, whoami))

    def probe(self, specs: list[dict], namespace: str | None = None) -> list[str]:
        """Probes from `namespace` (the peer's by default)."""
        return run_probes(namespace or self.peer, specs, self.env())

    def close(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait()
        for name in (self.zoned, self.peer, self.inner):
            if name:
                with contextlib.suppress(OSError):
                    netns.remove(name)


def configure_end(ns, name: str, ipv4: str, ipv6: str) -> None:
    """Addresses on one end of a link (IPv6 without duplicate detection), and up."""
    index = ns.link_lookup(ifname=name)[0]
    ns.addr("add", index=index, address=ipv4, prefixlen=24)
    ns.addr("add", index=index, address=ipv6, prefixlen=64, flags=IFA_F_NODAD)
    ns.link("set", index=index, state="up")


def start_listener(enter: list[str], env: dict, tcp, udp, whoami=()) -> subprocess.Popen:
    """listen.py started through `enter` (ip netns exec, nsenter), once it is listening."""
    process = subprocess.Popen(
        [
            *enter,
            PYTHON,
            os.path.join(HARNESS, "listen.py"),
            "--tcp",
            ",".join(map(str, tcp)),
            "--udp",
            ",".join(map(str, udp)),
            "--whoami",
            ",".join(map(str, whoami)),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout.readline().strip() == "ready"
    return process


def run_probes(peer: str, specs: list[dict], env: dict) -> list[str]:
    """probe.py in the peer's namespace: accepted, rejected or dropped for each spec."""
    completed = subprocess.run(
        ["ip", "netns", "exec", peer, PYTHON, os.path.join(HARNESS, "probe.py")],
        input=json.dumps(specs),
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    if completed.returncode != 0:
        raise AssertionError(f"probe failed: {completed.stderr}")
    return json.loads(completed.stdout)


def first_child(pid: int) -> int:
    """The first child of a process, 0 while it has none: PID 1 of the namespaces that
    `unshare --fork` (process `pid`) made."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = f.read().split()
    except OSError:
        return 0
    return int(children[0]) if children else 0


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.05, what="condition"):
    """`predicate()`'s first true value within `timeout`; else an AssertionError naming
    `what` (a string, or a function that describes the state at the time of failure)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    described = what() if callable(what) else what
    raise AssertionError(f"timed out after {timeout} s waiting for {described}")
