"""Panic mode (`nm-zones panic on|off`) on a real kernel with real packets: everything in,
out and forwarded is dropped but loopback, IPv4 and IPv6, whatever runs meanwhile (events,
reload, apply, a flush behind nm-zones' back, a kill after any commit), until `panic off`
gives every interface its zone back."""

from __future__ import annotations

import json
import os

import pytest

from tests.harness.lab import PYTHON, wait_for
from tests.test_failclosed import (
    NEXT_RUNS,
    _kernel_as_state_says,
    keyfile_env,
    killed_after,
    status,
)
from tests.test_failsafe import hook, state
from tests.test_nm import HOME, specs
from tests.test_service import MAIN, Monitor, call, error, service_pid, up
from tests.test_service import nm as sandbox  # noqa: F401 - a fixture, shared

DROPPED = ["dropped"] * 4


def incoming(lab, link) -> list[str]:
    """From the peer: ssh (open in home), IPv4 and IPv6, and ICMP echo, IPv4 and IPv6.
    Both ends' neighbour entries are pinned first: panic mode drops neighbour discovery
    too, and a peer whose IPv6 entry failed meanwhile reports "no route to host" (a
    refusal) instead of silence, though nothing got through either way."""
    pin_neighbours(lab, link)
    addresses = (link.ipv4, link.ipv6)
    specs = [{"kind": "tcp", "address": a, "port": 22} for a in addresses]
    return lab.probe(specs + [{"kind": "ping", "address": a} for a in addresses])


def pin_neighbours(lab, link) -> None:
    """Each end of the link knows the other's MAC address for good (nud permanent)."""
    import json

    def mac(namespace: str, name: str) -> str:
        shown = lab.run(namespace, ["ip", "-j", "link", "show", name]).stdout
        return json.loads(shown)[0]["address"]

    ends = (
        (lab.peer, link.peer_name, (link.ipv4, link.ipv6), mac(lab.zoned, link.name)),
        (lab.zoned, link.name, (link.peer_ipv4, link.peer_ipv6), mac(lab.peer, link.peer_name)),
    )
    for namespace, device, addresses, lladdr in ends:
        for address in addresses:
            pin = ["ip", "neigh", "replace", address, "lladdr", lladdr, "dev", device]
            lab.run(namespace, [*pin, "nud", "permanent"])


def outgoing(lab, link) -> list[str]:
    """From the zoned host to the peer's listeners, TCP and UDP, IPv4 and IPv6 (a packet
    the host's own OUTPUT drops fails at once with EPERM: `rejected`, never `accepted`)."""
    specs = []
    for address in (link.peer_ipv4, link.peer_ipv6):
        specs += [
            {"kind": "tcp", "address": address, "port": 22},
            {"kind": "udp", "address": address, "port": 631},
        ]
    return lab.probe(specs, namespace=lab.zoned)


def loopback(lab, link) -> list[str]:
    """The zoned host to itself: 127.0.0.1, ::1 and its own addresses (all through lo)."""
    addresses = ("127.0.0.1", "::1", link.ipv4, link.ipv6)
    return lab.probe(
        [{"kind": "tcp", "address": a, "port": 8080} for a in addresses], namespace=lab.zoned
    )


def panic_status(lab) -> dict:
    result = lab.nm_zones("status", "--json", check=False)
    return json.loads(result.stdout)["panic"]


def assert_panic(lab, link, door: str = "") -> None:
    assert incoming(lab, link) == DROPPED, door
    assert "accepted" not in outgoing(lab, link), door
    assert loopback(lab, link) == ["accepted"] * 4, door
    result = status(lab)
    assert result.returncode == 1 and "panic mode" in result.stdout, (door, result.stdout)
    assert panic_status(lab)["kernel"] == "in place", door


def assert_zone_home(lab, link) -> None:
    assert incoming(lab, link) == ["accepted"] * 4
    assert outgoing(lab, link) == ["accepted"] * 4
    assert status(lab).returncode == 0, status(lab).stdout


@pytest.fixture
def zoned(lab, tmp_path):
    """vz1 bound to home by a hook event (ssh open), vz2 up too; listeners on both hosts."""
    link, _ = lab.add_link(), lab.add_link()
    lab.listen()
    lab.listen(tcp=(22,), udp=(631,), namespace=lab.peer)
    env = keyfile_env(tmp_path)
    assert hook(lab, link.name, "up", **env).returncode == 0
    return link, env


@pytest.mark.both_backends
def test_panic_drops_everything_but_loopback_whatever_runs_until_off(lab, zoned):
    link, env = zoned
    assert_zone_home(lab, link)
    on = lab.nm_zones("panic", "on", check=False)
    assert on.returncode == 0 and on.stdout == "*: - -> panic mode (command line)\n", on
    assert_panic(lab, link)
    one = lab.nm_zones("status", link.name, check=False)
    assert one.returncode == 1 and one.stdout.startswith("panic mode: "), one.stdout
    assert lab.nm_zones("panic", "on", check=False).stdout == ""  # already on: nothing to do
    doors = {
        "hook up (quick path)": lambda: hook(lab, link.name, "up", **env),
        "hook up of another interface": lambda: hook(lab, "vz2", "up", CONNECTION_ID="x"),
        "zone switch": lambda: lab.nm_zones("apply", link.name, "trusted", check=False),
        "reload": lambda: lab.nm_zones("reload", check=False),
        "hook down of another interface": lambda: hook(lab, "vz2", "down"),
        "apply back": lambda: lab.nm_zones("apply", link.name, "home", check=False),
    }
    for door, run in doors.items():
        assert run().returncode == 0, door
        assert_panic(lab, link, door)
    off = lab.nm_zones("panic", "off", check=False)
    assert off.returncode == 0 and off.stdout == "*: panic mode -> - (command line)\n", off
    assert_zone_home(lab, link)
    assert panic_status(lab) == {"on": False, "since": "", "kernel": "unknown"}
    assert lab.nm_zones("status", link.name, check=False).returncode == 0
    assert lab.nm_zones("panic", "off", check=False).stdout == ""


def _each(command: str) -> str:
    """`command` for each built-in chain (INPUT, ...) with its panic chain (in, ...)."""
    pairs = (("INPUT", "in", "input"), ("FORWARD", "fwd", "forward"), ("OUTPUT", "out", "output"))
    return "; ".join(
        command.format(builtin=builtin, kind=kind, hook=hook) for builtin, kind, hook in pairs
    )


FLUSHES = {  # each opens the host again, in and out
    "iptables": {
        "flush the panic chains": _each(
            "iptables-legacy -F nmz-panic-{kind}; ip6tables-legacy -F nmz-panic-{kind}"
        ),
        "delete the panic hooks": _each(
            "iptables-legacy -D {builtin} -j nmz-panic-{kind}; "
            "ip6tables-legacy -D {builtin} -j nmz-panic-{kind}"
        ),
        "restore an empty ruleset": "iptables-legacy -F; iptables-legacy -X; "
        "ip6tables-legacy -F; ip6tables-legacy -X",
    },
    "nftables": {
        "flush the panic chains": _each("nft flush chain inet nm-zones panic-{hook}"),
        "delete the panic hooks": _each(
            "nft flush chain inet nm-zones panic-{hook}; "
            "nft delete chain inet nm-zones panic-{hook}"
        ),
        "restore an empty ruleset": "nft flush ruleset",
    },
}


@pytest.mark.both_backends
@pytest.mark.parametrize("flush", sorted(FLUSHES["iptables"]))
def test_a_flush_of_the_panic_rules_is_repaired_by_the_next_run(lab, zoned, flush):
    link, env = zoned
    lab.nm_zones("panic", "on")
    for door, run in {
        "hook up (quick path)": lambda: hook(lab, link.name, "up", **env),
        "reload": lambda: lab.nm_zones("reload", check=False),
        "gc": lambda: lab.nm_zones("gc", check=False),
    }.items():
        lab.shell(FLUSHES[lab.backend][flush])
        assert status(lab).returncode == 1, door
        assert panic_status(lab)["kernel"] == "DIFFERS", door
        assert incoming(lab, link)[:2] == ["accepted", "accepted"], door  # really open
        result = run()
        assert result.returncode == 1 and "changed by another program" in result.stderr, door
        assert_panic(lab, link, door)
    lab.nm_zones("panic", "off")
    assert_zone_home(lab, link)


@pytest.mark.both_backends
def test_the_repair_puts_panic_back_in_the_very_commit_that_rebuilds(lab, zoned):
    """A run killed right after its first commit has already put panic mode back in that
    table: the rebuild of a flushed table holds the panic rules, never a moment without."""
    lab.nm_zones("panic", "on")
    lab.shell(FLUSHES[lab.backend]["restore an empty ruleset"])
    killed = lab.nm_zones("gc", check=False, NM_ZONES_FAULTS="kill-after-commit=1")
    assert killed.returncode == -9
    if lab.backend == "nftables":
        held = lab.nft_table()
        assert "panic-input" in held and "panic-output" in held
    else:
        assert "-A nmz-panic-in -j DROP" in lab.save("ipv4", "filter")
        assert "-A INPUT -j nmz-panic-in\n-A INPUT -j nmz-input" in lab.save("ipv4", "filter")


OVERTAKES = {  # another program accepts everything before nm-zones' rules see it
    "iptables": "for t in iptables-legacy ip6tables-legacy; do "
    "$t -I INPUT -j ACCEPT; $t -I OUTPUT -j ACCEPT; done",
    "nftables": "nft add table inet other; "
    "nft add chain inet other in '{ type filter hook input priority -300; }'; "
    "nft add chain inet other out '{ type filter hook output priority -300; }'; "
    "nft add rule inet other in accept; nft add rule inet other out accept",
}


@pytest.mark.both_backends
def test_rules_of_another_program_above_panic_mode_are_overtaken(lab, zoned):
    """Panic mode comes first: an ACCEPT another program puts before it (iptables) is
    overtaken by the next run, and left in place; in nftables a drop is final anyway."""
    link, env = zoned
    lab.nm_zones("panic", "on")
    lab.shell(OVERTAKES[lab.backend])
    if lab.backend == "iptables":
        assert incoming(lab, link) == ["accepted"] * 4  # really open
        assert status(lab).returncode == 1 and panic_status(lab)["kernel"] == "DIFFERS"
        assert hook(lab, link.name, "up", **env).returncode == 1  # it says what it found
    assert_panic(lab, link)
    held = (
        lab.save("ipv4", "filter")
        if lab.backend == "iptables"
        else lab.shell("nft list ruleset").stdout
    )
    assert "-A INPUT -j ACCEPT" in held or "table inet other" in held  # theirs, kept


PANIC_RUNS = {
    "panic on": ["-m", "nm_zones", "panic", "on"],
    "panic off": ["-m", "nm_zones", "panic", "off"],
}


@pytest.mark.both_backends
@pytest.mark.parametrize("run", sorted(PANIC_RUNS))
def test_a_kill_after_each_commit_of_panic_ends_in_panic_mode(lab, run):
    """Killed after any commit, the next run of any kind ends in panic mode (on: it was
    half done; off: it had not finished), with every zone as the state says below it."""
    lab.add_link(), lab.add_link()
    next_runs = list(NEXT_RUNS.values())
    for after in range(1, 20):
        lab.flush_netfilter()
        for name in ("state", "quick", "panic"):
            path = os.path.join(lab.state_dir, name)
            if os.path.exists(path):
                os.unlink(path)
        lab.nm_zones("apply", "vz1", "home")
        lab.nm_zones("apply", "vz2", "work")
        if run == "panic off":
            lab.nm_zones("panic", "on")
        if not killed_after(lab, PANIC_RUNS[run], after):
            break
        follow = next_runs[after % len(next_runs)]
        lab.run(lab.zoned, [PYTHON, *follow], check=False)
        assert panic_status(lab)["kernel"] == "in place", (after, follow)
        assert status(lab).returncode == 1
        lab.nm_zones("panic", "off")
        assert panic_status(lab)["on"] is False
        _kernel_as_state_says(lab)
        assert "panic" not in lab.held_text(), after
    else:
        pytest.fail("the run never finished")


def test_panic_and_disable_exclude_each_other(lab, zoned):
    link, _ = zoned
    lab.nm_zones("panic", "on")
    refused = lab.nm_zones("disable", check=False)
    assert refused.returncode == 2, refused
    assert refused.stderr == (
        "nm-zones: panic mode is on and disable would lift it (nm-zones panic off first)\n"
    )
    assert not os.path.exists(os.path.join(lab.config_dir, "disabled"))
    assert incoming(lab, link) == DROPPED
    lab.nm_zones("panic", "off")
    lab.nm_zones("disable")
    refused = lab.nm_zones("panic", "on", check=False)
    assert refused.returncode == 2 and "nm-zones enable" in refused.stderr, refused
    assert "nmz" not in lab.held_text()
    assert status(lab).returncode == 3
    # a disabled flag planted beside panic mode waits: panic mode outranks it
    lab.nm_zones("enable")
    lab.nm_zones("panic", "on")
    open(os.path.join(lab.config_dir, "disabled"), "w").close()
    assert hook(lab, "vz2", "up", CONNECTION_ID="x").returncode == 0
    assert incoming(lab, link) == DROPPED
    assert status(lab).returncode == 1
    assert state(lab)["interfaces"]["vz1"]["status"] == "applied"


def test_the_flag_is_root_only_and_plan_says_panic_mode_is_on(lab, zoned):
    link, _ = zoned
    lab.nm_zones("panic", "on")
    flag = os.stat(os.path.join(lab.state_dir, "panic"))
    assert flag.st_uid == 0 and flag.st_mode & 0o777 == 0o600
    # a state folder others can write: every run refuses in one line, panic mode stays
    os.chmod(lab.state_dir, 0o777)
    refused = lab.nm_zones("panic", "off", check=False)
    assert refused.returncode == 1 and "can be written by others" in refused.stderr, refused
    assert len(refused.stderr.splitlines()) == 1
    assert incoming(lab, link) == DROPPED
    os.chmod(lab.state_dir, 0o755)
    plan = lab.nm_zones("plan", "vz1", "home")
    assert "panic mode" in plan.stderr and plan.stdout.startswith("# IPv4\n")


# -- over D-Bus, with the real service in the NetworkManager sandbox --------------------------

EXCEPTION = "org.fedoraproject.FirewallD1.Exception"


def test_dbus_panic_mode_as_firewalld_answers_it(sandbox):  # noqa: F811 - imported above
    nm = sandbox
    nm.serve()
    nm.add_user("nmzplain")
    monitor = Monitor(nm)
    link = up(nm, "lan", "connection.zone", "home")
    nm.wait_zone(link.name, "home")
    nm.listen()
    nm.wait_reachable(link)
    assert nm.probe(specs(link)) == HOME
    assert call(nm, f"{MAIN}.queryPanicMode") == "(false,)"
    assert error(nm, f"{MAIN}.enablePanicMode", user="nmzplain") == (
        "org.fedoraproject.FirewallD1.NotAuthorizedException: "
        "Not Authorized(polkit): org.nm-zones.panic"
    )
    assert call(nm, f"{MAIN}.queryPanicMode", user="nmzplain") == "(false,)"  # reads are open
    assert call(nm, f"{MAIN}.enablePanicMode") == "()"
    monitor.wait_for("org.fedoraproject.FirewallD1.PanicModeEnabled ()")
    assert error(nm, f"{MAIN}.enablePanicMode") == (
        f"{EXCEPTION}: ALREADY_ENABLED: panic mode already enabled"
    )
    assert call(nm, f"{MAIN}.queryPanicMode") == "(true,)"
    assert nm.probe(specs(link)) == ["dropped"] * 6
    assert nm.nm_zones("status", check=False).returncode == 1
    # NetworkManager re-activating the connection, and the service restarted: still panic
    nm.nmcli("connection", "up", "lan")
    nm.run(["kill", str(service_pid(nm))])
    wait_for(lambda: not nm.name_owned(), 10, what="the service to stop")
    nm.serve()
    assert call(nm, f"{MAIN}.queryPanicMode") == "(true,)"
    assert nm.probe(specs(link)) == ["dropped"] * 6
    assert error(nm, f"{MAIN}.disablePanicMode", user="nmzplain").endswith("org.nm-zones.panic")
    assert call(nm, f"{MAIN}.queryPanicMode") == "(true,)"
    monitor = Monitor(nm)
    assert call(nm, f"{MAIN}.disablePanicMode") == "()"
    monitor.wait_for("org.fedoraproject.FirewallD1.PanicModeDisabled ()")
    assert error(nm, f"{MAIN}.disablePanicMode") == (
        f"{EXCEPTION}: NOT_ENABLED: panic mode is not enabled"
    )
    assert call(nm, f"{MAIN}.queryPanicMode") == "(false,)"
    assert nm.probe(specs(link)) == HOME
    assert nm.nm_zones("status", check=False).returncode == 0
    xml = call(nm, "org.freedesktop.DBus.Introspectable.Introspect")
    for member in ("enablePanicMode", "disablePanicMode", "queryPanicMode", "PanicModeEnabled"):
        assert f'name="{member}"' in xml
