"""The real NetworkManager, nm-dispatcher and nmcli, isolated in namespaces, plus a peer host.

    with NMSandbox(tmp) as nm:
        link = nm.add_veth()                   # ethz0 in the sandbox, its peer outside
        nm.nmcli("connection", "add", ...)     # nmcli inside the sandbox
        nm.nm_zones("status")                  # nm-zones inside the sandbox
        nm.probe([...])                        # probes from the peer host

Commands run inside the sandbox with nsenter, so they share its mount, network, pid and uts
namespaces; the hook that NetworkManager runs there sees the sandbox's private /etc, /usr and
/run (overlays and a tmpfs), never this machine's: `nm-zones install --root /` is safe inside.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess

from pyroute2 import NetNS, netns

from nm_zones.doors.install import COMMAND_PATH

from .lab import (
    HARNESS,
    PYTHON,
    Link,
    base_env,
    configure_end,
    first_child,
    run_probes,
    start_listener,
    wait_for,
)
from .syslog import with_syslog


class NMSandbox:
    def __init__(self, tmp: str, firewall_backend: str = "none", data_dir: str = ""):
        """`firewall_backend`: NetworkManager's own rules for shared connections (its
        masquerade), `none` or `nftables`. `data_dir`: a folder of the test mounted as the
        sandbox's /var/lib/nm-zones, so that what nm-zones keeps there outlives the
        sandbox (a reboot); else it lives and dies with the sandbox's overlay."""
        self.tmp = tmp
        self.firewall_backend = firewall_backend
        self.data_dir = data_dir
        self.peer = f"nmz-nmpeer-{secrets.token_hex(3)}"
        self.process: subprocess.Popen | None = None
        self.pid = 0
        self.links: list[Link] = []
        self.listeners: list[subprocess.Popen] = []
        self.services: list[subprocess.Popen] = []

    def __enter__(self) -> NMSandbox:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        os.makedirs(self.tmp, exist_ok=True)
        self.process = subprocess.Popen(
            [
                "unshare",
                "--pid",
                "--fork",
                "--kill-child=SIGKILL",
                "--mount-proc",
                "--net",
                "--mount",
                "--uts",
                "--propagation",
                "private",
                PYTHON,
                os.path.join(HARNESS, "nm_sandbox_init.py"),
                self.tmp,
                self.firewall_backend,
                self.data_dir,
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=base_env(),
        )
        self.pid = wait_for(lambda: first_child(self.process.pid), 10, what="the sandbox's PID 1")
        line = self.process.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"NetworkManager sandbox did not start:\n{self.logs()}")
        netns.create(self.peer)
        with NetNS(self.peer) as ns:
            ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
        self.sh("sysctl -q -w net.ipv4.icmp_ratelimit=0 net.ipv6.icmp.ratelimit=0")

    def stop(self) -> None:
        for listener in self.listeners + self.services:
            listener.kill()
            listener.wait()
        if self.process:
            self.process.kill()  # --kill-child takes the whole sandbox down with it
            self.process.wait()
            self.process = None
        with contextlib.suppress(OSError):
            netns.remove(self.peer)

    def logs(self) -> str:
        text = ""
        for name in ("NetworkManager.log", "dbus.log", "serve.log"):
            path = os.path.join(self.tmp, name)
            if os.path.exists(path):
                with open(path, errors="replace") as stream:
                    text += f"--- {name}\n" + stream.read()[-6000:]
        return text

    # -- running things inside ------------------------------------------------------------

    def enter(self) -> list[str]:
        """The command prefix that runs a program inside the sandbox's namespaces."""
        return [
            "nsenter",
            "--target",
            str(self.pid),
            "--mount",
            "--net",
            "--pid",
            "--uts",
            "--wd=/",
        ]

    def run(
        self,
        argv: list[str],
        check: bool = True,
        timeout: float = 60,
        input_text: str | None = None,
        env: dict | None = None,
    ):
        result = subprocess.run(
            [*self.enter(), *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input_text,
            env=env or base_env(),
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{argv} exited {result.returncode}:\n{result.stdout}{result.stderr}\n{self.logs()}"
            )
        return result

    def sh(self, command: str, check: bool = True):
        return self.run(["sh", "-c", command], check=check)

    def nmcli(self, *args: str, check: bool = True):
        return self.run(["nmcli", *args], check=check)

    def nm_zones(self, *args: str, check: bool = True):
        """nm-zones as an admin runs it in the sandbox: real /etc/nm-zones and /run/nm-zones."""
        return self.run([PYTHON, "-m", "nm_zones", *args], check=check)

    def install_hook(self) -> None:
        self.nm_zones("install")

    def state(self) -> dict:
        result = self.run(
            [
                PYTHON,
                "-c",
                "import json, sys; from nm_zones.state import StateDir;"
                " json.dump(StateDir('/run/nm-zones').load().as_dict(), sys.stdout)",
            ],
            check=False,
        )
        return json.loads(result.stdout) if result.returncode == 0 else {}

    def zone_of(self, interface: str) -> str | None:
        entry = self.state().get("interfaces", {}).get(interface)
        return entry["zone"] if entry and entry["status"] == "applied" else None

    def wait_zone(self, interface: str, zone: str | None, timeout: float = 20) -> None:
        wait_for(
            lambda: self.zone_of(interface) == zone,
            timeout,
            what=f"{interface} in zone {zone}\n{self.logs()}",
        )

    def save(self, family: str = "ipv4") -> str:
        tool = "iptables-legacy-save" if family == "ipv4" else "ip6tables-legacy-save"
        return self.run([tool]).stdout

    # -- the D-Bus service and its callers ------------------------------------------------

    def serve(
        self, wait: bool = True, syslog: bool = False, installed: bool = False
    ) -> subprocess.Popen:
        """`nm-zones serve` inside the sandbox, its stderr in serve.log; with `wait`, once it
        owns its name; with `syslog`, its syslog records in syslog.txt (a private /dev/log,
        tests/harness/syslog.py); `installed`: started as its unit starts it, through the
        launcher `install_hook` wrote (python -S)."""
        argv = [f"/{COMMAND_PATH}"] if installed else [PYTHON, "-m", "nm_zones"]
        argv, env = [*argv, "serve"], base_env()
        if syslog:
            argv, env, _log = with_syslog(argv, env, self.tmp)
        log = open(os.path.join(self.tmp, "serve.log"), "ab")  # noqa: SIM115 - the child's
        process = subprocess.Popen([*self.enter(), *argv], stdout=log, stderr=log, env=env)
        log.close()
        self.services.append(process)
        if wait:
            wait_for(
                lambda: process.poll() is not None or self.name_owned(),
                20,
                what=f"nm-zones serve to own its name\n{self.logs()}",
            )
            if process.poll() is not None:
                raise AssertionError(f"nm-zones serve exited {process.returncode}\n{self.logs()}")
        return process

    def name_owned(self, name: str = "org.fedoraproject.FirewallD1") -> bool:
        result = self.gdbus(
            "org.freedesktop.DBus.NameHasOwner",
            name,
            dest="org.freedesktop.DBus",
            path="/org/freedesktop/DBus",
        )
        return result.returncode == 0 and "true" in result.stdout

    def gdbus(
        self,
        method: str,
        *args: str,
        user: str | None = None,
        dest: str = "org.fedoraproject.FirewallD1",
        path: str = "/org/fedoraproject/FirewallD1",
    ):
        """`gdbus call` on the sandbox's system bus, as root or as `user`."""
        argv = ["gdbus", "call", "--system", "--dest", dest, "--object-path", path]
        argv += ["--method", method, *args]
        if user:
            argv = ["runuser", "-u", user, "--", *argv]
        return self.run(argv, check=False)

    def add_user(self, name: str, *groups: str) -> None:
        """A user in the sandbox's own /etc (an overlay: this machine's /etc is untouched)."""
        if "overlay" not in self.sh("findmnt -n -o FSTYPE /etc").stdout:
            raise AssertionError("refusing to add a user: /etc is not the sandbox's overlay")
        extra = ["-G", ",".join(groups)] if groups else []
        self.run(["useradd", "-M", "-N", "-s", "/bin/sh", *extra, name])

    # -- links and the peer host ----------------------------------------------------------

    def add_veth(self, name: str | None = None) -> Link:
        n = len(self.links) + 1
        name = name or f"ethz{n - 1}"
        link = Link(
            name, f"vpeer{n}", f"10.78.{n}.1", f"fd78:{n}::1", f"10.78.{n}.2", f"fd78:{n}::2"
        )
        with NetNS(self.peer) as ns:
            ns.link("add", ifname=link.peer_name, kind="veth", peer={"ifname": name})
            ns.link("set", index=ns.link_lookup(ifname=name)[0], net_ns_pid=self.pid)
            configure_end(ns, link.peer_name, link.peer_ipv4, link.peer_ipv6)
        self.links.append(link)
        return link

    def add_connection(self, link: Link, name: str, *settings: str) -> str:
        """An ethernet profile with static addresses for the link; returns its UUID."""
        self.nmcli(
            "connection",
            "add",
            "type",
            "ethernet",
            "ifname",
            link.name,
            "con-name",
            name,
            "connection.autoconnect",
            "no",
            "ipv4.method",
            "manual",
            "ipv4.addresses",
            f"{link.ipv4}/24",
            "ipv6.method",
            "manual",
            "ipv6.addresses",
            f"{link.ipv6}/64",
            "ipv6.addr-gen-mode",
            "eui64",
            *settings,
        )
        return self.nmcli("-g", "connection.uuid", "connection", "show", name).stdout.strip()

    def listen(self, tcp=(22, 8080), udp=(631,)) -> None:
        self.listeners.append(start_listener(self.enter(), base_env(), tcp, udp))

    def probe(self, specs: list[dict]) -> list[str]:
        return run_probes(self.peer, specs, base_env())

    def wait_reachable(self, link: Link, timeout: float = 20) -> None:
        """Addresses come up a moment after `nmcli connection up` returns."""

        def ready():
            return (
                self.probe(
                    [{"kind": "ping", "address": link.ipv4}, {"kind": "ping", "address": link.ipv6}]
                )
                != ["dropped"] * 2
            )

        wait_for(ready, timeout, interval=0.2, what=f"{link.name} to answer")
