"""`nm-zones log [IFACE] [--follow]`: the packets that zones with `log-denied: true` refused,
read back from the kernel log, one line each: time, interface, zone, protocol, source -> port.

nm-zones' LOG rules prefix every record with `nmz ZONE IFACE: ` (layout.log_prefix); the
fields after it are the kernel's (IN=, SRC=, PROTO=, DPT=, ...). Where the records are read:

- `journalctl -k` when systemd's journal runs (its socket exists): this boot's kernel
  messages, with their wall-clock times, as the admin's journal keeps them;
- otherwise `/dev/kmsg`, the kernel's own ring buffer (what dmesg reads, without starting
  it): times are the kernel's since boot, turned into wall-clock time here. The ring is small
  and old records fall out of it.

Both need root (or membership of the journal's groups, or CAP_SYSLOG). A LOG rule inside a
network namespace other than the first one is written to the kernel log only when the host
sets `net.netfilter.nf_log_all_netns=1`.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import sys
import time

RECORD = re.compile(r"nmz (?P<zone>\S*) (?P<interface>\S+): (?P<fields>IN=.*)")
JOURNAL_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)")
JOURNAL_SOCKET = "/run/systemd/journal/socket"
KMSG = "/dev/kmsg"


def parse(message: str, when: str = "") -> dict | None:
    """One kernel log message as a refused packet, or None when it is not nm-zones'."""
    match = RECORD.search(message)
    if match is None:
        return None
    fields: dict[str, str] = {}
    for token in match["fields"].split():
        key, equals, value = token.partition("=")
        if equals and key.isupper():
            fields.setdefault(key, value)  # an ICMP error quotes its packet's fields later
    protocol = fields.get("PROTO", "?").lower()
    if "DPT" in fields:
        port = fields["DPT"]
    elif "TYPE" in fields:
        port = f"type {fields['TYPE']}"
    else:
        port = "-"
    return {
        "time": when,
        "interface": fields.get("IN") or match["interface"],
        "zone": match["zone"],
        "protocol": protocol,
        "source": fields.get("SRC", "?"),
        "source_port": fields.get("SPT", ""),
        "port": port,
    }


def line(packet: dict) -> str:
    return (
        f"{packet['time']:<19}  {packet['interface']:<15} {packet['zone']:<10} "
        f"{packet['protocol']:<7} {packet['source']} -> {packet['port']}"
    )


def from_journal(text_line: str) -> dict | None:
    """A `journalctl -k -o short-iso` line: `2026-12-03T16:40:01+0000 host kernel: ...`."""
    found = JOURNAL_TIME.match(text_line)
    when = found.group(1).replace("T", " ") if found else ""
    return parse(text_line, when)


def from_kmsg(record: str, booted: float) -> dict | None:
    """A /dev/kmsg record: `PRIORITY,SEQUENCE,MICROSECONDS,FLAGS;message`."""
    header, _, message = record.partition(";")
    parts = header.split(",")
    if len(parts) < 3 or not parts[2].isdigit():
        return None
    moment = booted + int(parts[2]) / 1e6
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(moment))
    return parse(message.rstrip("\n"), when)


def _journal_lines(follow: bool):
    argv = ["journalctl", "-k", "-b", "-o", "short-iso", "--no-pager", "-q"]
    if follow:
        argv += ["-f", "-n", "all"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, errors="replace") as process:
        try:
            for text_line in process.stdout:
                yield from_journal(text_line)
        finally:
            process.terminate()


def _kmsg_records(follow: bool, path: str = KMSG):
    """Each record of the kernel's ring buffer, then (with follow) each new one."""
    booted = time.time() - time.monotonic()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        while True:
            try:
                data = os.read(fd, 8192)
            except BlockingIOError:
                if not follow:
                    return
                select.select([fd], [], [])
                continue
            except BrokenPipeError:  # records overwritten while we read: go on
                continue
            if not data:
                return
            yield from_kmsg(data.decode("utf-8", "replace"), booted)
    finally:
        os.close(fd)


def journal_available() -> bool:
    return bool(shutil.which("journalctl")) and os.path.exists(JOURNAL_SOCKET)


def packets(follow: bool):
    """Refused packets from the kernel log, oldest first (see the module's docstring)."""
    source = _journal_lines(follow) if journal_available() else _kmsg_records(follow)
    for packet in source:
        if packet is not None:
            yield packet


def logging_zones(state, config, interface: str = "") -> tuple[set[str], set[str]]:
    """(zones in use that log refused packets, zones in use): bound interfaces' zones and
    the catch-all's, or the one interface's."""
    if interface:
        binding = state.interfaces.get(interface)
        used = {binding.zone} if binding else {state.catchall_zone}
    else:
        used = {b.zone for b in state.interfaces.values()} | {state.catchall_zone}
    used.discard("")
    logging = {z for z in used if z in config.zones and config.zones[z].log_denied}
    return logging, used


def show(state, config, interface: str, follow: bool, out=sys.stdout) -> None:
    logging, used = logging_zones(state, config, interface)
    if not logging:
        subject = f"{interface}'s zone does not" if interface else "no zone in use does"
        print(
            f"nm-zones: {subject} log refused packets (zones: {', '.join(sorted(used)) or 'none'})"
            ": add `log-denied: true` to /etc/nm-zones/zones.d/ZONE.yaml (a copy of the "
            "file nm-zones show ZONE names), then nm-zones reload",
            file=sys.stderr,
        )
    for packet in packets(follow):
        if interface and packet["interface"] != interface:
            continue
        out.write(line(packet) + "\n")
        if follow:
            out.flush()
