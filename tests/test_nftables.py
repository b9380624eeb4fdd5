"""The nftables backend: `plan` is a script `nft -c -f -` accepts and is what `apply` puts in
place; other programs' nftables tables and iptables-nft rules keep their handles and
counters; a change of backend moves every rule before the old ones go, and a kill in
between leaves an interface filtered by both, never by neither."""

from __future__ import annotations

import json
import os
import re
import signal

import pytest

from tests.harness.lab import PYTHON, wait_for
from tests.test_failclosed import stopped_before_commit
from tests.test_plan import CUSTOM_ZONE, ZONES

pytestmark = pytest.mark.parametrize("backend", ["nftables"])


def write(lab, relative: str, text: str) -> None:
    path = os.path.join(lab.config_dir, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as stream:
        stream.write(text)


def probe_8080(lab, link) -> list[str]:
    return lab.probe(
        [{"kind": "tcp", "address": address, "port": 8080} for address in (link.ipv4, link.ipv6)]
    )


def test_plan_loads_with_nft_check_and_is_what_apply_puts_in_place(lab):
    write(lab, "zones.d/custom.yaml", CUSTOM_ZONE)
    link = lab.add_link()
    for zone in [*ZONES, "custom"]:
        text = lab.nm_zones("plan", link.name, zone).stdout
        assert text.startswith("# nftables\n"), text[:80]
        script = text[len("# nftables\n") :]
        checked = lab.run(lab.peer, ["nft", "-c", "-f", "-"], input_text=script, check=False)
        assert checked.returncode == 0, (zone, checked.stderr)
        # the plan loaded into an empty namespace holds exactly what apply holds
        lab.run(lab.peer, ["nft", "flush", "ruleset"])
        lab.run(lab.peer, ["nft", "-f", "-"], input_text=script)
        planned = lab.nft_listing(lab.peer)
        lab.nm_zones("apply", link.name, zone)
        applied = lab.nft_listing()
        for chain, rules in planned[0].items():
            if chain in ("input", "forward"):  # apply's also hold the catch-all after these
                assert applied[0][chain][: len(rules)] == rules, (zone, chain)
            else:
                assert applied[0][chain] == rules, (zone, chain)
        ours = {c for c in applied[0] if c.startswith(f"nmz-if-{link.name}-")}
        assert ours == {c for c in planned[0] if c.startswith("nmz-if-")}, zone
        for name, elements in planned[1].items():
            assert applied[1][name] == elements, (zone, name)
        # and the backend, reading the table back as JSON, finds the plan in place
        status = lab.nm_zones("status", link.name, "--json", check=False)
        assert json.loads(status.stdout)["kernel"] == "in place", (zone, status.stdout)
    lab.run(lab.peer, ["nft", "flush", "ruleset"])


def test_an_interface_named_with_a_dollar_and_a_trailing_star_is_matched_by_its_name_alone(lab):
    """nft reads `$z` in a log prefix as a variable and a trailing `*` in an interface's name
    as "any name with this prefix": such an interface is bound, switched and removed in a
    zone that logs what it refuses, and an interface its name would match as a prefix keeps
    its own zone."""
    write(lab, "zones.d/custom.yaml", CUSTOM_ZONE)  # log-denied, 8080/tcp open
    odd, prefixed = lab.add_link("v$z*"), lab.add_link("v$z1")
    lab.listen()
    lab.nm_zones("apply", prefixed.name, "trusted")
    for zone, seen in (("custom", "accepted"), ("public", "rejected"), ("custom", "accepted")):
        script = lab.nm_zones("plan", odd.name, zone).stdout[len("# nftables\n") :]
        checked = lab.run(lab.peer, ["nft", "-c", "-f", "-"], input_text=script, check=False)
        assert checked.returncode == 0, (zone, checked.stderr)
        result = lab.nm_zones("apply", odd.name, zone, check=False)
        assert result.returncode == 0 and result.stderr == "", result
        assert probe_8080(lab, odd) == [seen, seen], zone
        assert probe_8080(lab, prefixed) == ["accepted", "accepted"], zone
        assert lab.nm_zones("status", check=False).returncode == 0
    assert '"v$z*" : jump nmz-if-' in lab.nft_table()
    lab.nm_zones("remove", odd.name)
    assert "v$z*" not in lab.nft_table()
    assert lab.nm_zones("status", check=False).returncode == 0
    assert probe_8080(lab, prefixed) == ["accepted", "accepted"]


# what makes libnftables 1.0.6 fetch every chain of every table before it runs a script
FETCHES_EVERY_CHAIN = ("add rule ", "add element ", "insert ", "delete ", "replace ")


@pytest.mark.parametrize("zone", ZONES)
def test_a_switch_script_spares_libnftables_a_dump_of_every_chain(backend, zone):
    """With 200 interfaces bound, that dump was most of what a switch's commit cost more than
    with one. A switch's script for a zone (its chains as blocks, its elements in the maps'
    declarations) has no command that needs it when the run found absent the chains the
    plan drops; those it found present are deleted, with the elements leading to them."""
    from nm_zones.backends.nftables.backend import Script, interface_script, own_chains
    from nm_zones.backends.nftables.libnft import chain_ref
    from nm_zones.config.load import load
    from nm_zones.paths import Paths
    from nm_zones.ruleset.build import compile_interface
    from nm_zones.ruleset.plan import KernelPlan

    config = load(Paths(config="/nonexistent")).config
    chains_by_table = compile_interface("eth0", config.zones[zone], config).chains_by_table()
    plan = KernelPlan("eth0", chains_by_table)
    lines = interface_script(plan, present=set())
    assert [line for line in lines if line.startswith(FETCHES_EVERY_CHAIN)] == []
    everything = {chain_ref(chain) for chain in own_chains("eth0")}
    lines = interface_script(plan, present=everything)
    deleted = {line.split()[-1] for line in lines if line.startswith("delete chain ")}
    kept = {chain_ref(chain) for chain in Script(plan).chains}
    assert deleted and deleted == everything - kept, zone


def meanwhile(lab, command: str, *args: str) -> tuple[int, str]:
    """`nm-zones ARGS`, with `command` run in the zoned host between the run's check of the
    kernel and its first commit (NM_ZONES_FAULTS=stop-before-commit=1): exit code, stderr."""
    run = stopped_before_commit(lab, *args)
    try:
        lab.shell(command)
    finally:
        os.kill(run.pid, signal.SIGCONT)
    stdout, stderr = run.communicate(timeout=60)
    assert run.returncode in (0, 1) and "Traceback" not in stderr, (stdout, stderr)
    return run.returncode, stderr


def test_a_chain_the_switch_drops_made_after_its_check_is_taken_out(lab):
    """A switch deletes only the chains its plan drops that its check of the kernel found: one
    that another program makes between that check and the commit (with the element leading
    to it) is found after the commit, and the run rebuilds the table and says so."""
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    pre = f"nmz-if-{link.name}-pre"
    make = (
        f"nft add chain inet nm-zones {pre}; nft add rule inet nm-zones {pre} accept; "
        f"nft add element inet nm-zones nmz-pre '{{ \"{link.name}\" : jump {pre} }}'"
    )
    _, stderr = meanwhile(lab, make, "apply", link.name, "public")
    assert "changed by another program" in stderr, stderr
    assert pre not in lab.nft_table()
    assert lab.nm_zones("status", check=False).returncode == 0


@pytest.mark.parametrize("verdict", ["accept", "jump nmz-if-{other}-in"])
def test_an_element_added_meanwhile_under_the_name_for_a_kind_the_zone_drops_goes(lab, verdict):
    """The run's check found no forward-out chain for the interface, so its commit leaves the
    map nmz-forward-out alone. Another program's element under the interface's name added
    between that check and the commit (one that accepts what is forwarded out through it,
    or that sends it to another interface's chain) is deleted right after the commit, or
    the table rebuilt: nothing of it stays."""
    link, other = lab.add_link(), lab.add_link()
    lab.nm_zones("apply", other.name, "public")
    lab.nm_zones("apply", link.name, "public")
    element = f'"{link.name}" : {verdict.format(other=other.name)}'
    meanwhile(
        lab,
        f"nft add element inet nm-zones nmz-forward-out '{{ {element} }}'",
        *("apply", link.name, "block"),
    )
    assert element not in lab.nft_table()
    assert lab.nm_zones("status", check=False).returncode == 0


@pytest.mark.parametrize(
    "change",
    [
        "nft add rule inet nm-zones nmz-commit drop",
        "nft delete chain inet nm-zones nmz-commit",
        "nft add set inet nm-zones nmz-commit '{ type ipv4_addr; }'",  # a set of that name
    ],
)
def test_what_moves_the_generation_id_cannot_make_a_switch_fail(lab, change):
    """Each transaction moves the ruleset's generation id with the rule of a chain of its own,
    `nmz-commit`: another program's change to it between runs is seen by the next run's
    check (the table rebuilt), and the switch goes through."""
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    lab.nm_zones("apply", link.name, "public")
    lab.shell(change)
    result = lab.nm_zones("apply", link.name, "drop", check=False)
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result
    assert lab.nm_zones("status", check=False).returncode == 0
    assert f"jump nmz-if-{link.name}-in" in lab.nft_table()


FOREIGN_NFT = """
table inet admin {
    counter seen { }
    chain input {
        type filter hook input priority filter - 10; policy accept;
        tcp dport 22 counter name seen
        ip saddr 192.0.2.0/24 counter drop
    }
}
"""


def _foreign(lab) -> str:
    """Every table but nm-zones', with handles and counters, as the kernel lists them."""
    text = lab.run(lab.zoned, ["nft", "-a", "list", "ruleset"]).stdout
    tables = re.split(r"(?m)^(?=table )", text)
    return "".join(t for t in tables if not t.startswith("table inet nm-zones "))


def test_foreign_tables_and_iptables_nft_rules_keep_handles_and_counters(lab):
    a, b = lab.add_link(), lab.add_link()
    lab.run(lab.zoned, ["nft", "-f", "-"], input_text=FOREIGN_NFT)
    lab.shell(
        "iptables-nft -A INPUT -p tcp --dport 22 -j ACCEPT; "
        "iptables-nft -N admin-log; iptables-nft -A admin-log -j RETURN; "
        "ip6tables-nft -A INPUT -s 2001:db8::/32 -j DROP"
    )
    lab.nm_zones("apply", b.name, "home")
    lab.listen()
    assert lab.probe([{"kind": "tcp", "address": b.ipv4, "port": 22}] * 3) == ["accepted"] * 3
    before = _foreign(lab)
    assert re.search(r"counter seen \{[^}]*packets [1-9]", before), before
    assert "iptables" not in lab.nft_table()  # nothing of theirs is read into ours
    for i in range(50):
        lab.nm_zones("apply", a.name, ZONES[i % len(ZONES)])
    assert _foreign(lab) == before  # same handles, same counters, same order
    assert "table ip filter" in before and "admin-log" in before
    assert "nmz" not in lab.save("ipv4") + lab.save("ipv6")


def test_a_change_of_backend_moves_every_rule_and_a_kill_leaves_both(lab):
    a, b = lab.add_link(), lab.add_link()
    lab.listen()
    write(lab, "nm-zones.yaml", "backend: iptables\n")
    lab.nm_zones("apply", a.name, "home")
    lab.nm_zones("apply", b.name, "external")
    assert "rules held by: iptables" in lab.nm_zones("status").stdout
    assert lab.nft_table() == ""
    write(lab, "nm-zones.yaml", "backend: nftables\n")
    killed = lab.run(
        lab.zoned,
        [PYTHON, "-m", "nm_zones", "reload"],
        check=False,
        NM_ZONES_FAULTS="kill-after-commit=1",
    )
    assert killed.returncode == -9
    # the new backend holds everything, the old one still does: a packet passes both
    assert "nmz-if-" + a.name in lab.nft_table()
    assert "nmz-if-" + a.name in lab.save("ipv4") + lab.save("ipv6")
    assert probe_8080(lab, a) == ["rejected", "rejected"]
    finished = lab.nm_zones("reload", check=False)
    assert finished.returncode == 0, finished
    assert "nmz" not in lab.save("ipv4") + lab.save("ipv6")
    status = lab.nm_zones("status")
    assert "rules held by: nftables" in status.stdout
    assert status.stdout.count("kernel: in place") == 3  # catch-all, a and b
    assert probe_8080(lab, a) == ["rejected", "rejected"]
    assert probe_8080(lab, b) == ["rejected", "rejected"]
    write(lab, "nm-zones.yaml", "backend: iptables\n")
    back = lab.nm_zones("reload")
    assert "*: nftables -> iptables (rules moved to another backend)" in back.stdout
    assert lab.nft_table() == ""
    assert "rules held by: iptables" in lab.nm_zones("status").stdout
    assert probe_8080(lab, a) == ["rejected", "rejected"]


def test_a_backend_that_cannot_be_opened_gives_way_to_the_other(lab):
    link = lab.add_link()
    lab.listen()
    result = lab.nm_zones(
        "apply", link.name, "home", check=False, NM_ZONES_FAULTS="missing-backend=nftables"
    )
    assert "backend iptables used instead (nftables:" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert probe_8080(lab, link) == ["rejected", "rejected"]
    assert "nmz-if-" + link.name in lab.save("ipv4")


def test_disable_removes_the_table_and_enable_puts_it_back(lab):
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    lab.nm_zones("disable")
    assert lab.nft_table() == ""
    lab.nm_zones("enable")
    assert f'"{link.name}" : jump nmz-if-{link.name}-in' in lab.nft_table()


ALLOWANCE = """
import sys, time
from nm_zones.backends.nftables.backend import NftablesBackend
from nm_zones.ruleset.allowances import boottime, specs
from nm_zones.ruleset.build import compile_interface
from nm_zones.ruleset.plan import KernelPlan
from nm_zones.config.load import load
from nm_zones.paths import Paths

config = load(Paths(config="/nonexistent")).config
interface = sys.argv[1]
chains_by_table = compile_interface(interface, config.zones["block"], config).chains_by_table()
# 8080: an hour left on the clock no one can set, while the wall clock says it ended an hour
# ago; 22: the other way round. Only the first may be open.
allowed = (
    ("22/tcp", int(boottime()) - 1, int(time.time()) + 3600),
    ("8080/tcp", int(boottime()) + 3600, int(time.time()) - 3600),
)
for family in ("ipv4", "ipv6"):
    chains, dispatch = chains_by_table[(family, "filter")]
    extra = specs(allowed, {}, family)
    chains = tuple((c, extra + specs_ if c.endswith("-in") else specs_) for c, specs_ in chains)
    chains_by_table[(family, "filter")] = (chains, dispatch)
NftablesBackend().apply(KernelPlan(interface, chains_by_table))
"""


def test_an_allowance_ends_on_the_kernels_own_clock_not_the_wall_clock(lab):
    """The form `nm-zones allow --for` takes in nftables (ruleset/allowances.py): a rule
    matching a set whose element times out in the kernel; the wall clock decides nothing."""
    link = lab.add_link()
    lab.listen()
    lab.run(lab.zoned, [PYTHON, "-c", ALLOWANCE, link.name])
    got = lab.probe(
        [
            {"kind": "tcp", "address": address, "port": port}
            for address in (link.ipv4, link.ipv6)
            for port in (8080, 22)
        ]
    )
    assert got == ["accepted", "rejected", "accepted", "rejected"]
    table = lab.nft_table()
    assert "meta time" not in table and "flags timeout" in table, table
    assert re.search(r"tcp dport 8080 iifname @nmz-until-\d+ accept", table), table


def test_a_run_of_several_transactions_records_the_table_as_it_is(lab):
    """A reload re-applying two interfaces makes two transactions; the view it records
    after the second must include the first, or the next change to any other table (which
    makes nm-zones read its own table) would be taken for a change to nm-zones' rules."""
    a, b = lab.add_link(), lab.add_link()
    write(lab, "zones.d/lab.yaml", "services: [ssh]\n")
    lab.nm_zones("apply", a.name, "lab")
    lab.nm_zones("apply", b.name, "lab")
    write(lab, "zones.d/lab.yaml", "services: [ssh, mdns]\n")
    assert lab.nm_zones("reload").stdout.count("the zone's rules changed") == 2
    lab.run(lab.zoned, ["nft", "add", "table", "inet", "someone-else"])
    status = lab.nm_zones("status", check=False)
    assert status.returncode == 0, status.stdout
    assert "changed by another program" not in status.stdout


HOLD_AND_RELOAD = """
import sys
from nm_zones.engine import Engine
from nm_zones.paths import Paths
engine = Engine(Paths.from_environment(), use_cache=False)
with engine.state_dir.locked():
    print("locked", flush=True)
    sys.stdin.readline()  # the other run now waits for the lock; the settings changed
    state = engine.state_dir.load()
    engine.begin(state)
    engine.reload_everything(state)
print("".join(str(change) + "\\n" for change in engine.changes), end="", flush=True)
"""


def has_open(pid: int, path: str) -> bool:
    """Whether process `pid` has `path` open (nm-zones opens its lock file, then polls)."""
    folder = f"/proc/{pid}/fd"
    try:
        return any(os.readlink(os.path.join(folder, fd)) == path for fd in os.listdir(folder))
    except OSError:
        return False


def test_a_run_that_waited_behind_a_backend_move_does_not_move_the_rules_back(lab):
    """`nm-zones apply` read the settings (iptables), then waited for the state lock while
    a reload moved every rule to nftables: it follows the settings as they are now."""
    import subprocess

    link = lab.add_link()
    lab.listen()
    write(lab, "nm-zones.yaml", "backend: iptables\n")
    lab.nm_zones("apply", link.name, "home")
    enter = ["ip", "netns", "exec", lab.zoned]
    holder = subprocess.Popen(
        [*enter, PYTHON, "-c", HOLD_AND_RELOAD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=lab.env(),
    )
    lab.processes.append(holder)
    assert holder.stdout.readline().strip() == "locked"
    waiting = subprocess.Popen(
        [*enter, PYTHON, "-m", "nm_zones", "apply", link.name, "work"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=lab.env(),
    )
    lab.processes.append(waiting)
    lock = os.path.join(lab.state_dir, "lock")
    wait_for(lambda: has_open(waiting.pid, lock), 20, what="apply to wait for the state lock")
    write(lab, "nm-zones.yaml", "backend: nftables\n")
    moved, _ = holder.communicate("go\n", timeout=60)
    assert "*: iptables -> nftables (rules moved to another backend)" in moved, moved
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert out == f"{link.name}: home -> work (command line)\n"
    assert "nmz" not in lab.save("ipv4") + lab.save("ipv6")
    assert f"nmz-if-{link.name}-in" in lab.nft_table()
    assert "rules held by: nftables" in lab.nm_zones("status").stdout
    assert probe_8080(lab, link) == ["rejected", "rejected"]


BASE_CHAIN_TAMPERS = {
    "policy drop on input": "nft add chain inet nm-zones input '{ policy drop ; }'",
    "a base chain added": (
        "nft add chain inet nm-zones sneaky '{ type filter hook input priority -5 ; "
        "policy drop ; }'"
    ),
}


@pytest.mark.parametrize("tamper", sorted(BASE_CHAIN_TAMPERS))
def test_a_base_chain_changed_behind_its_back_is_seen_and_put_back(lab, tamper):
    """A base chain's policy (or a base chain of its own added to nm-zones' table) decides
    every packet: status says so, and the next run puts the table back, so loopback and
    exempt interfaces pass again while the bound one stays filtered."""
    link = lab.add_link()
    exempt = lab.add_link("docker7")
    lab.listen()
    lab.nm_zones("apply", link.name, "home")
    loopback = [{"kind": "tcp", "address": a, "port": 8080} for a in ("127.0.0.1", "::1")]
    assert probe_8080(lab, exempt) == ["accepted", "accepted"]
    assert lab.probe(loopback, namespace=lab.zoned) == ["accepted", "accepted"]
    assert lab.nm_zones("status", check=False).returncode == 0
    lab.shell(BASE_CHAIN_TAMPERS[tamper])
    assert probe_8080(lab, exempt) == ["dropped", "dropped"]  # really closed
    status = lab.nm_zones("status", check=False)
    assert status.returncode == 1, status.stdout
    assert "changed by another program" in status.stdout
    result = lab.nm_zones("reload", check=False)
    assert result.returncode == 1 and "changed by another program" in result.stderr, result
    assert probe_8080(lab, exempt) == ["accepted", "accepted"]
    assert lab.probe(loopback, namespace=lab.zoned) == ["accepted", "accepted"]
    assert probe_8080(lab, link) == ["rejected", "rejected"]
    table = lab.nft_table()
    assert "policy drop" not in table and "sneaky" not in table, table
    assert lab.nm_zones("status", check=False).returncode == 0


ODD_CHAIN = """
import socket, struct, sys
# a chain whose name (hex in argv[2]) is not UTF-8, added to nm-zones' table over netlink as
# a program built on libnftnl can (nft's own parser refuses such a name); or, with `count`,
# how many chains of the table have that name
NFT, TABLE, ODD = 10, b"nm-zones\\0", bytes.fromhex(sys.argv[2]) + b"\\0"
def attribute(kind, value):
    return (struct.pack("=HH", 4 + len(value), kind) + value).ljust((7 + len(value)) & ~3, b"\\0")
def message(kind, flags, body, seq):
    return struct.pack("=IHHII", 16 + len(body), kind, flags, seq, 0) + body
sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)
if sys.argv[1] == "add":
    batch = struct.pack(">BBH", 0, 0, NFT)
    chain = struct.pack(">BBH", 1, 0, 0) + attribute(1, TABLE) + attribute(3, ODD)
    sock.send(message(16, 1, batch, 1) + message((NFT << 8) | 3, 0x1 | 0x400 | 0x4, chain, 2)
              + message(17, 1, batch, 3))
    reply = sock.recv(65536)  # the acknowledgement: NLMSG_ERROR with no error
    assert struct.unpack_from("=H10xi", reply, 4) == (2, 0), reply
else:
    request = struct.pack(">BBH", 1, 0, 0) + attribute(1, TABLE)
    sock.send(message((NFT << 8) | 4, 0x1 | 0x300, request, 1))
    names, done = [], False
    while not done:
        data, at = sock.recv(1 << 20), 0
        while at < len(data):
            length, kind = struct.unpack_from("=IH", data, at)
            if kind in (2, 3):
                done = True
                break
            names.append(data[at + 20 : at + length])
            at += (length + 3) & ~3
    print(sum(ODD in name for name in names))
"""


@pytest.mark.parametrize("name", [b"nmz-\xffodd", b"nmz-if-\xff-in", b"odd\xff"])
def test_a_chain_whose_name_is_not_utf8_is_seen_and_taken_out(lab, name):
    """Chain names are bytes to the kernel: one that is not UTF-8, added to nm-zones' table
    by another program, is a change like any other (one line, exit 1, no traceback), status
    says why it cannot show the rules, and the next run takes it out, `gc` included (a name
    like an interface's chain's)."""
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    odd = [PYTHON, "-S", "-c", ODD_CHAIN]
    lab.run(lab.zoned, [*odd, "add", name.hex()])
    assert lab.run(lab.zoned, [*odd, "count", name.hex()]).stdout.split() == ["1"]
    status = lab.nm_zones("status", check=False)
    assert status.returncode == 1 and "changed by another program" in status.stdout, status
    assert "libnftables cannot list" in status.stdout, status.stdout
    assert "Traceback" not in status.stdout + status.stderr
    result = lab.nm_zones("gc", check=False)
    assert result.returncode == 1 and "changed by another program" in result.stderr, result
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert lab.run(lab.zoned, [*odd, "count", name.hex()]).stdout.split() == ["0"]
    assert lab.nm_zones("status", check=False).returncode == 0
    assert lab.nm_zones("apply", link.name, "public", check=False).returncode == 0
    assert probe_8080(lab, link) == ["rejected", "rejected"]  # public, as asked

LISTINGS = """
from nm_zones.backends.nftables import listing
from nm_zones.backends.nftables.backend import NftablesBackend
from nm_zones.backends.nftables.libnft import Nft

made = []
read = listing.read_listing
listing.read_listing = lambda names: made.append(1) or read(names)
backend = NftablesBackend()
first = backend.listing()
again = backend.listing()
Nft().run("add table inet scratch\\n")  # another program's transaction
moved = backend.listing()
print(len(made), first == again == moved, "nmz-input" in first[1])
"""


def test_the_table_is_listed_once_per_generation_of_the_ruleset(lab):
    """`status` asks for each interface whether its plan is in place; the table is listed (a
    child process each time) again only when the ruleset's generation id moved."""
    lab.nm_zones("apply", lab.add_link().name, "home")
    result = lab.run(lab.zoned, [PYTHON, "-S", "-c", LISTINGS])
    assert result.stdout.split() == ["2", "True", "True"], result.stdout + result.stderr


VIEW_READS = """
import os
from nm_zones import flowcount, netlink
from nm_zones.backends.nftables import nfnetlink
from nm_zones.backends.nftables.view import generation, read_view

first = read_view()
channel = nfnetlink.reader().channel
# a dump left unread on the shared socket: the next reads skip its replies by their number
channel.sock.send(netlink.NLMSGHDR.pack(20, (10 << 8) | nfnetlink.NFT_MSG_GETCHAIN,
    netlink.NLM_F_REQUEST | netlink.NLM_F_DUMP, 999, 0) + nfnetlink.NFGENMSG.pack(1, 0, 0))
again = read_view()
assert generation() == first["generation"]
# conntrack's requests (a tightening switch's) take the same socket
asked = channel.seq
assert flowcount.count_marked(0x5A5A, 0xFFFF) == 0
assert channel.seq == asked + 1, (asked, channel.seq)
assert nfnetlink.reader().channel is channel and len(netlink._kept) == 1
sockets = 0
for fd in os.listdir("/proc/self/fd"):
    try:
        sockets += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    except OSError:  # the listing's own descriptor, closed by now
        pass
print(first == again, sockets)
"""


def test_views_share_one_netlink_socket_and_skip_stale_replies(lab):
    """A close of an nf_tables socket after a commit waits for an RCU grace period: a process
    reads every view, and asks conntrack, through one socket (netlink.kept), kept open;
    replies to an earlier request (a dump given up on) are skipped, not taken for the next
    request's."""
    lab.nm_zones("reload")
    lab.nm_zones("apply", lab.add_link().name, "home")
    result = lab.run(lab.zoned, [PYTHON, "-S", "-c", VIEW_READS])
    assert result.stdout.split() == ["True", "1"], result.stdout + result.stderr


PARTIAL_READS = """
import sys
from nm_zones.backends.nftables import nfnetlink
from nm_zones.backends.nftables.libnft import Nft
from nm_zones.backends.nftables.view import KEY, read_view

own, other = sys.argv[1:]
whole = []
reads_whole = nfnetlink.Reader.chains
nfnetlink.Reader.chains = lambda self, table: whole.append(1) or reads_whole(self, table)
base = read_view()
Nft().run(f"flush chain inet nm-zones {own}\\n")  # as a commit of this process's would
before = len(whole)
proven = read_view(KEY, [own], base)
print(len(whole) - before, proven == read_view())
Nft().run(f"flush chain inet nm-zones {other}\\n")  # another program's, meanwhile
Nft().run(f"add rule inet nm-zones {own} accept\\n")
before = len(whole)
again = read_view(KEY, [own], proven)
print(len(whole) - before, again == read_view(), again["chains"][other] != base["chains"][other])
"""


def test_only_the_chains_a_commit_touched_are_read_back_when_nothing_else_committed(lab):
    """After a transaction, the view is the one before with only the touched chains read
    again, when the generation id shows no other transaction since; otherwise the whole
    table is read, and another program's change to an untouched chain is in it."""
    link, other = lab.add_link(), lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    lab.nm_zones("apply", other.name, "home")
    own, others = (f"nmz-if-{name}-in" for name in (link.name, other.name))
    result = lab.run(lab.zoned, [PYTHON, "-S", "-c", PARTIAL_READS, own, others])
    assert result.stdout.split() == ["0", "True", "1", "True", "True"], result


WHOLE_READS_OF_A_SWITCH = """
import sys
from nm_zones.backends.nftables import nfnetlink
from nm_zones.doors.cli import main

whole = []
reads_whole = nfnetlink.Reader.chains
nfnetlink.Reader.chains = lambda self, table: whole.append(1) or reads_whole(self, table)
status = main(["apply", *sys.argv[1:]])
print(status, len(whole))
"""


def test_after_another_programs_transaction_a_switch_reads_the_table_whole_once(lab):
    """A transaction of another program's, in a table of its own, moves the generation id:
    the next switch's check reads nm-zones' table whole, finds it as recorded, and starts
    from what it read then, so its own chains are read back alone after its commit (one
    whole read, not two); with nothing in between, the next switch reads it whole not at
    all. Another program's change to nm-zones' own chains is still found (test_failclosed)."""
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    lab.shell("nft add table inet scratch")
    for zone, whole_reads in (("public", "1"), ("home", "0")):
        result = lab.run(lab.zoned, [PYTHON, "-c", WHOLE_READS_OF_A_SWITCH, link.name, zone])
        assert result.stdout.splitlines()[-1].split() == ["0", whole_reads], result
    lab.shell("nft delete table inet scratch")
    assert lab.nm_zones("status", check=False).returncode == 0


CHANGELESS_COMMIT = """
import sys
from nm_zones.backends.nftables.backend import NftablesBackend
from nm_zones.backends.nftables.libnft import Nft
from nm_zones.backends.nftables.view import KEY, read_view

own, other = sys.argv[1:]
backend = NftablesBackend()
backend.trust({KEY: read_view()})
Nft().run(f"flush chain inet nm-zones {other}\\n")  # another program's, after the check
backend._commit(["add table inet nm-zones"], touched=[own])  # changes nothing by itself
print(backend.changed_meanwhile() == {KEY})
"""


def test_a_commit_that_changes_nothing_is_not_taken_for_another_programs(lab):
    """The kernel moves the generation id only for a transaction that changes something: a
    commit of nm-zones' that changed nothing, after one of another program's, must not let
    that one pass for its own (every such commit takes the rule of a chain of its own out
    and puts it back)."""
    link, other = lab.add_link(), lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    lab.nm_zones("apply", other.name, "home")
    own, others = (f"nmz-if-{name}-in" for name in (link.name, other.name))
    result = lab.run(lab.zoned, [PYTHON, "-S", "-c", CHANGELESS_COMMIT, own, others])
    assert result.stdout.split() == ["True"], result


def test_a_hashed_chain_name_is_read_back_as_the_kernel_spells_it(lab):
    """An interface whose name needs a hashed chain token (`nmz-if-~...` in the plans,
    `nmz-if-/...` in the kernel) is switched quietly after another program's transaction:
    the chains the switch touched are compared and read back by their kernel names."""
    link = lab.add_link("vz@1")
    lab.nm_zones("apply", link.name, "home")
    lab.shell("nft add table inet scratch")  # another transaction: the whole table is read
    result = lab.nm_zones("apply", link.name, "public", check=False)
    assert result.returncode == 0 and result.stderr == "", result
    assert lab.nm_zones("status", check=False).returncode == 0
    lab.shell("nft delete table inet scratch")
    result = lab.nm_zones("apply", link.name, "home", check=False)  # the partial read
    assert result.returncode == 0 and result.stderr == "", result
    assert lab.nm_zones("status", check=False).returncode == 0


COMMIT_AND_END = """
import os, sys
from nm_zones.backends.nftables.libnft import Nft
from nm_zones.doors import end_process

Nft().run("add table inet scratch\\nadd chain inet scratch c\\nflush chain inet scratch c\\n")
print(os.getpid(), flush=True)
end_process(3)
"""


def test_a_process_that_committed_hands_its_sockets_to_a_child_that_outlives_it(lab):
    """The release of an nf_tables socket after a commit waits for an RCU grace period; a
    process that committed leaves that to a child (libnft.outlive_grace_period), which
    keeps none of its standard streams: the caller has the status and the end of the
    output when the process ends."""
    argv = [PYTHON, "-S", "-c", COMMIT_AND_END]
    result = lab.run(lab.zoned, argv, check=False)  # returns once stdout and stderr end
    assert result.returncode == 3, result.stderr
    assert "chain c" in lab.run(lab.zoned, ["nft", "list", "table", "inet", "scratch"]).stdout
    lab.run(lab.zoned, ["nft", "delete", "table", "inet", "scratch"])
