"""firewalld's `direct.passthrough(ipv, args)`: run the system's iptables or ip6tables with
the caller's arguments, for the programs that route every iptables command through firewalld
once they see its name on the bus (Docker does, about 80 times at start-up).

The rules are the caller's, not nm-zones': they are neither recorded nor repaired, and
nm-zones' own view of the kernel (its nmz- chains and its jumps) does not include them. The
command runs without a shell, with the argument list as given, as firewalld runs it
(`iptables -w10 ARGS`); a non-zero exit becomes firewalld's `COMMAND_FAILED: 'COMMAND'
failed: OUTPUT`, which Docker's `-C` probes rely on. `eb` (ebtables) is refused: nm-zones
does not drive bridge filtering.
"""

from __future__ import annotations

import shutil
import subprocess

from .busapi import FirewallError

DIRECT_INTERFACE = "org.fedoraproject.FirewallD1.direct"
ACTION_DIRECT = "org.nm-zones.direct"  # firewalld's own is org.fedoraproject.FirewallD1.direct
COMMANDS = {"ipv4": "iptables", "ipv6": "ip6tables"}
# where the system's iptables lives; the service's own PATH (systemd's) may be shorter
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/sbin:/usr/local/bin"
WAIT_OPTION = "-w10"  # firewalld's: wait up to 10 s for the xtables lock
WAIT_OPTIONS = ("-w", "--wait")
MAX_ARGS = 256
MAX_ARG_BYTES = 64 * 1024
RUN_TIMEOUT = 60.0
OUTPUT_LIMIT = 1024 * 1024


def command_line(ipv: str, args: list[str]) -> list[str]:
    """The argv that passthrough runs, or FirewallError saying why it will not."""
    if ipv == "eb":
        raise FirewallError(
            "INVALID_IPV",
            "'eb': nm-zones does not run ebtables (bridge filtering); only ipv4 and ipv6",
        )
    if ipv not in COMMANDS:
        raise FirewallError("INVALID_IPV", f"'{ipv}' is not ipv4 or ipv6")
    if not args:
        raise FirewallError("INVALID_PASSTHROUGH", "no arguments")
    size = sum(len(a.encode("utf-8", "replace")) for a in args)
    if len(args) > MAX_ARGS or size > MAX_ARG_BYTES:
        raise FirewallError(
            "INVALID_PASSTHROUGH", f"more than {MAX_ARGS} arguments or {MAX_ARG_BYTES} bytes"
        )
    if any("\0" in a for a in args):
        raise FirewallError("INVALID_PASSTHROUGH", "an argument holds a NUL byte")
    program = shutil.which(COMMANDS[ipv], path=SYSTEM_PATH)
    if program is None:
        raise FirewallError("COMMAND_FAILED", f"{COMMANDS[ipv]} is not installed")
    waits = any(a == WAIT_OPTION or a.startswith(WAIT_OPTIONS) for a in args)
    return [program, *([] if waits else [WAIT_OPTION]), *args]


def passthrough(ipv: str, args: list[str]) -> str:
    """Run it; its output (stdout and stderr, as firewalld returns them), or COMMAND_FAILED."""
    argv = command_line(ipv, list(args))
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=RUN_TIMEOUT,
            env={"PATH": SYSTEM_PATH, "LC_ALL": "C"},
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise FirewallError(
            "COMMAND_FAILED", f"'{' '.join(argv)}' did not end in {RUN_TIMEOUT:.0f} s"
        ) from None
    except OSError as error:
        raise FirewallError("COMMAND_FAILED", f"'{argv[0]}': {error.strerror}") from None
    output = done.stdout[:OUTPUT_LIMIT].decode("utf-8", "replace")
    if done.returncode != 0:
        raise FirewallError("COMMAND_FAILED", f"'{' '.join(argv)}' failed: {output}")
    return output


def introspection() -> str:
    """The direct interface as the service answers it."""
    return (
        f'  <interface name="{DIRECT_INTERFACE}">\n'
        '    <method name="passthrough"><arg name="ipv" type="s" direction="in"/>'
        '<arg name="args" type="as" direction="in"/><arg type="s" direction="out"/></method>\n'
        '    <method name="getAllPassthroughs"><arg type="a(sas)" direction="out"/></method>\n'
        '    <method name="removeAllPassthroughs"/>\n'
        "  </interface>\n"
    )
