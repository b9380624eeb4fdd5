"""PID 1 of a NetworkManager sandbox: private network, mount, pid and uts namespaces.

Started by NMSandbox through `unshare --pid --fork --kill-child --mount-proc --net --mount
--uts --propagation private`. It hides the machine's NetworkManager state behind tmpfs mounts,
puts overlays over /etc, /usr and /root (upper layers on its own tmpfs /run: what is installed
inside, /etc/nm-zones or /usr/local/sbin/nm-zones, never reaches this machine; /root is opened
to other users in the overlay only, so that a test user can run this Python and the worktree's
package), starts a private system bus and NetworkManager, prints `ready`, and then reaps
children until it is killed; the kernel then kills everything in the sandbox. polkitd is
started by the bus when first asked.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

WORK = "/run/nmz-sandbox"
DAEMON_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}
# Everything `nm-zones install --root /` writes (/etc/NetworkManager, /etc/nm-zones,
# /etc/systemd/system, /usr/local/sbin, /usr/lib/...) is under these: overlays keep it private.
# /var/lib too: nm-zones keeps its known networks in /var/lib/nm-zones.
OVERLAID = ["/etc", "/usr", "/root", "/var/lib"]
# What an earlier `nm-zones install` on this machine may have left: the sandbox starts as a
# machine without nm-zones (removed in the overlays only).
NOT_INSTALLED = [
    "/usr/local/sbin/nm-zones",
    "/etc/nm-zones",
    "/etc/systemd/system/nm-zones.service",
    "/var/lib/nm-zones",
]
HIDDEN = [
    "/etc/NetworkManager",
    "/var/lib/NetworkManager",
    "/usr/lib/NetworkManager/dispatcher.d",
    "/usr/lib/NetworkManager/conf.d",
    "/usr/lib/NetworkManager/system-connections",
]

DBUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=/run/dbus/system_bus_socket</listen>
  <auth>EXTERNAL</auth>
  <servicedir>{work}/services</servicedir>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Properties"/>
  </policy>
  <includedir>/usr/share/dbus-1/system.d</includedir>
  <includedir>/etc/dbus-1/system.d</includedir>
</busconfig>
"""

DISPATCHER_SERVICE = """[D-BUS Service]
Name=org.freedesktop.nm_dispatcher
Exec=/usr/lib/NetworkManager/nm-dispatcher
User=root
"""

POLKIT_SERVICE = """[D-BUS Service]
Name=org.freedesktop.PolicyKit1
Exec=/usr/lib/polkit-1/polkitd --no-debug
User=root
"""

NM_CONFIG = """[main]
plugins=keyfile
auth-polkit=false
dns=none
rc-manager=unmanaged
hostname-mode=none
no-auto-default=*
dhcp=internal
firewall-backend=none

[connectivity]
enabled=false

[logging]
level=INFO

[keyfile]
# the tests' other devices (virbr9, lan7, inz0, vnetz0, ...) are configured by hand, as
# libvirt configures its bridges: NetworkManager taking one over would flush its addresses
unmanaged-devices=except:interface-name:ethz*

[device-nmz-sandbox]
match-device=interface-name:ethz*
managed=1
"""


def overlay(place: str) -> None:
    """Writes to `place` land on the sandbox's tmpfs (/run); this machine's copy stays as is."""
    upper, work = f"{WORK}/upper{place}", f"{WORK}/overlay-work{place}"
    os.makedirs(upper, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    options = f"lowerdir={place},upperdir={upper},workdir={work}"
    sh("mount", "-n", "-t", "overlay", "overlay", "-o", options, place)


def forget(path: str) -> None:
    """Remove `path` from the sandbox's view: a whiteout in an overlay, never the real file."""
    if not os.path.lexists(path):
        return
    kind = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "--target", path], capture_output=True, text=True
    )
    if kind.stdout.strip() != "overlay":
        raise SystemExit(f"refusing to remove {path}: not on a sandbox overlay")
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True)


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as stream:
        stream.write(text)


def main() -> None:
    log_dir = sys.argv[1]
    sh("mount", "-n", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/run")
    for place in OVERLAID:
        overlay(place)
    for path in NOT_INSTALLED:
        forget(path)
    os.chmod("/root", 0o711)  # in the overlay only: test users reach this Python
    data_dir = sys.argv[3] if len(sys.argv) > 3 else ""
    if data_dir:  # the test's folder as /var/lib/nm-zones (the mount point is the overlay's)
        os.makedirs("/var/lib/nm-zones", mode=0o755)
        sh("mount", "-n", "--bind", data_dir, "/var/lib/nm-zones")
    for path in HIDDEN:
        if os.path.isdir(path):
            sh("mount", "-n", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", path)
    sh("mount", "-n", "-t", "sysfs", "-o", "ro", "sysfs", "/sys")
    sh("ip", "link", "set", "lo", "up")
    write(f"{WORK}/dbus.conf", DBUS_CONFIG.format(work=WORK))
    write(f"{WORK}/services/org.freedesktop.nm_dispatcher.service", DISPATCHER_SERVICE)
    write(f"{WORK}/services/org.freedesktop.PolicyKit1.service", POLKIT_SERVICE)
    os.makedirs("/etc/dbus-1/system.d", exist_ok=True)
    backend = sys.argv[2] if len(sys.argv) > 2 else "none"
    write(
        "/etc/NetworkManager/NetworkManager.conf",
        NM_CONFIG.replace("firewall-backend=none", f"firewall-backend={backend}"),
    )
    os.makedirs("/etc/NetworkManager/system-connections", mode=0o700, exist_ok=True)
    os.makedirs("/run/dbus", exist_ok=True)
    with open(os.path.join(log_dir, "dbus.log"), "ab") as dbus_log:
        subprocess.Popen(
            ["dbus-daemon", "--nofork", f"--config-file={WORK}/dbus.conf"],
            env=DAEMON_ENV,
            stdout=dbus_log,
            stderr=dbus_log,
        )
    deadline = time.monotonic() + 10
    while not os.path.exists("/run/dbus/system_bus_socket"):
        if time.monotonic() > deadline:
            raise SystemExit("dbus-daemon did not start")
        time.sleep(0.01)
    with open(os.path.join(log_dir, "NetworkManager.log"), "ab") as nm_log:
        subprocess.Popen(
            ["NetworkManager", "--debug"], env=DAEMON_ENV, stdout=nm_log, stderr=nm_log
        )
    subprocess.run(["nm-online", "-s", "-q", "-t", "20"], env=DAEMON_ENV)
    print("ready", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:  # PID 1 reaps every orphan in the sandbox
        try:
            os.wait()
        except ChildProcessError:
            time.sleep(0.2)


if __name__ == "__main__":
    main()
