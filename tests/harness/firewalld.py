"""firewalld 1.3.3, Debian's package, run for comparison inside the NetworkManager sandbox.

The package is never installed on this machine: installing it marks firewalld enabled (and
`nm-zones serve` rightly refuses to start then). Instead its two .deb files (firewalld and
python3-firewall) are fetched with `apt-get download` once and unpacked with `dpkg -x` into a
cache folder; the daemon and `firewall-cmd` run from there with Debian's /usr/bin/python3
(which needs python3-dbus, python3-gi, python3-nftables and gir1.2-nm-1.0: .ci/setup installs
them). Inside the sandbox, firewalld's bus policy goes into the sandbox's own /usr overlay and
its configuration into a folder of the test's, so nothing of it reaches this machine.

    root = firewalld_root()                      # None when the packages cannot be had
    with FirewallD(nm, root, backend="nftables"):
        nm.run(firewall_cmd(root, "--get-zones"))
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from .lab import wait_for

PACKAGES = ("firewalld", "python3-firewall")
CACHE = os.environ.get("NM_ZONES_TEST_CACHE", "/var/cache/nm-zones-tests")
SYSTEM_PYTHON = "/usr/bin/python3"
BUS_POLICY = "usr/share/dbus-1/system.d/FirewallD.conf"
# The package's postinst picks the server variant of its polkit actions (priority 20 over 10).
POLKIT_CHOICE = "usr/share/polkit-1/actions/org.fedoraproject.FirewallD1.server.policy.choice"
POLKIT_ACTIONS = "usr/share/polkit-1/actions/org.fedoraproject.FirewallD1.policy"


def firewalld_root(cache: str = CACHE) -> str | None:
    """The folder holding firewalld's unpacked packages (made on first use), or None when
    they cannot be downloaded here."""
    root = os.path.join(cache, "firewalld")
    if os.path.exists(os.path.join(root, "usr/sbin/firewalld")):
        return root
    os.makedirs(cache, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as download:
        os.chmod(download, 0o755)  # apt's _apt user writes the files
        result = subprocess.run(
            ["apt-get", "download", *PACKAGES], cwd=download, capture_output=True, text=True
        )
        debs = [name for name in os.listdir(download) if name.endswith(".deb")]
        if result.returncode != 0 or len(debs) != len(PACKAGES):
            return None
        unpacked = os.path.join(download, "root")
        for deb in debs:
            subprocess.run(["dpkg", "-x", os.path.join(download, deb), unpacked], check=True)
        os.replace(unpacked, root)
    return root


def python_env(root: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.path.join(root, "usr/lib/python3/dist-packages"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def firewall_cmd(root: str, *args: str) -> list[str]:
    """The argv of the real firewall-cmd client (run it with `python_env(root)`)."""
    return [SYSTEM_PYTHON, os.path.join(root, "usr/bin/firewall-cmd"), *args]


class FirewallD:
    """firewalld in the foreground inside `nm` (an NMSandbox), with a private configuration:
    `--system-config` a fresh copy of the package's /etc/firewalld (backend set), and
    `--default-config` the package's /usr/lib/firewalld."""

    def __init__(self, nm, root: str, backend: str = "nftables"):
        self.nm, self.root, self.backend = nm, root, backend
        self.config = os.path.join(nm.tmp, "firewalld-etc")
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> FirewallD:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        shutil.rmtree(self.config, ignore_errors=True)
        shutil.copytree(os.path.join(self.root, "etc/firewalld"), self.config)
        conf = os.path.join(self.config, "firewalld.conf")
        with open(conf) as stream:
            lines = [
                f"FirewallBackend={self.backend}\n" if line.startswith("FirewallBackend=") else line
                for line in stream
            ]
        with open(conf, "w") as stream:
            stream.writelines(lines)
        self.nm.run(["install", "-D", "-m", "0644", os.path.join(self.root, BUS_POLICY),
                     "/" + BUS_POLICY])
        self.nm.run(["install", "-D", "-m", "0644", os.path.join(self.root, POLKIT_CHOICE),
                     "/" + POLKIT_ACTIONS])
        self.nm.run(["gdbus", "call", "--system", "--dest", "org.freedesktop.DBus",
                     "--object-path", "/org/freedesktop/DBus",
                     "--method", "org.freedesktop.DBus.ReloadConfig"])
        log = open(os.path.join(self.nm.tmp, "firewalld.log"), "ab")  # noqa: SIM115 - the child's
        self.process = subprocess.Popen(
            [
                *self.nm.enter(),
                SYSTEM_PYTHON,
                os.path.join(self.root, "usr/sbin/firewalld"),
                "--nofork",
                "--nopid",
                "--log-target=console",
                "--system-config", self.config,
                "--default-config", os.path.join(self.root, "usr/lib/firewalld"),
            ],
            stdout=log,
            stderr=log,
            env=python_env(self.root),
        )
        log.close()
        try:
            wait_for(self.running, 30, what="firewalld to run")
        except AssertionError as error:
            raise AssertionError(f"{error}\n{self.log()}") from None

    def running(self) -> bool:
        if self.process is None or self.process.poll() is not None:
            raise AssertionError(f"firewalld exited\n{self.log()}")
        result = self.nm.run(
            firewall_cmd(self.root, "--state"), check=False, env=python_env(self.root)
        )
        return result.returncode == 0

    def cmd(self, *args: str):
        """firewall-cmd against whatever owns the name in the sandbox now."""
        return self.nm.run(firewall_cmd(self.root, *args), check=False, env=python_env(self.root))

    def log(self) -> str:
        path = os.path.join(self.nm.tmp, "firewalld.log")
        if not os.path.exists(path):
            return ""
        with open(path, errors="replace") as stream:
            return stream.read()[-4000:]

    def stop(self) -> None:
        """SIGTERM to the daemon itself (the process started here is nsenter, which passes no
        signal on), then wait until it is gone and its name is free."""
        if self.process is None:
            return
        daemon = os.path.join(self.root, "usr/sbin/firewalld")
        self.nm.run(["pkill", "-TERM", "-f", daemon], check=False)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.nm.run(["pkill", "-KILL", "-f", daemon], check=False)
            self.process.wait()
        self.process = None
        wait_for(lambda: not self.nm.name_owned(), 10, what="firewalld's bus name to be free")


def name_owner_command(nm, name: str = "org.fedoraproject.FirewallD1") -> str:
    """The command line of the process owning `name` on the sandbox's bus: which daemon
    answered."""
    reply = nm.gdbus(
        "org.freedesktop.DBus.GetConnectionUnixProcessID",
        name,
        dest="org.freedesktop.DBus",
        path="/org/freedesktop/DBus",
    )
    pid = reply.stdout.strip().strip("(),").split()[-1].rstrip(",")
    return nm.run(["cat", f"/proc/{pid}/cmdline"]).stdout.replace("\0", " ")
