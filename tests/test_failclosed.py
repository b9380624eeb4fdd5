"""Fail closed on a real machine: whatever happens between two runs (another program flushing
chains, a kill after any commit, a full disk, a FIFO or a directory where a file should be, a
folder others can write), the next run ends with the kernel holding every interface's zone,
and the command says what went wrong in one line. Real rules in a namespace, real packets."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess

import pytest

from nm_zones.config.load import load
from nm_zones.paths import Paths
from tests.harness.lab import PYTHON
from tests.test_failsafe import HOOK, chain, hook, planned, state, write_zone

AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def probe_8080(lab, link) -> list[str]:
    """home and public refuse 8080: `rejected` while nm-zones' rules hold, `accepted` when
    they are gone."""
    return lab.probe(
        [{"kind": "tcp", "address": address, "port": 8080} for address in (link.ipv4, link.ipv6)]
    )


def status(lab, *args: str) -> subprocess.CompletedProcess:
    return lab.nm_zones("status", *args, check=False)


def keyfile_env(tmp_path, zone: str = "home") -> dict[str, str]:
    """A NetworkManager keyfile and the environment its events carry (the quick path needs
    a keyfile to pin the inputs down)."""
    keyfile = tmp_path / "lan.nmconnection"
    keyfile.write_text(f"[connection]\nid=lan\nuuid=u-lan\ntype=ethernet\nzone={zone}\n")
    return {"CONNECTION_UUID": "u-lan", "CONNECTION_ID": "lan", "CONNECTION_FILENAME": str(keyfile)}


def no_traceback(result: subprocess.CompletedProcess) -> str:
    """The error output of a failed run: one line, no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line]
    assert lines, result
    return result.stderr


# -- 1. rules removed behind nm-zones' back are put back -----------------------------------

ATTACKS = {
    "flush INPUT": "iptables-legacy -F INPUT; ip6tables-legacy -F INPUT",
    "delete the hooks": (
        "iptables-legacy -D INPUT -j nmz-input; ip6tables-legacy -D INPUT -j nmz-input"
    ),
    "restore an older ruleset": (
        "printf '*filter\\n:INPUT ACCEPT [0:0]\\n:FORWARD ACCEPT [0:0]\\n:OUTPUT ACCEPT [0:0]\\n"
        "COMMIT\\n' | iptables-legacy-restore; "
        "printf '*filter\\n:INPUT ACCEPT [0:0]\\n:FORWARD ACCEPT [0:0]\\n:OUTPUT ACCEPT [0:0]\\n"
        "COMMIT\\n' | ip6tables-legacy-restore"
    ),
    "flush the interface's chain": (
        "iptables-legacy -F nmz-if-vz1-in; ip6tables-legacy -F nmz-if-vz1-in"
    ),
    "open a port in its chain": (
        "iptables-legacy -I nmz-if-vz1-in 3 -p tcp --dport 8080 -j ACCEPT; "
        "ip6tables-legacy -I nmz-if-vz1-in 3 -p tcp --dport 8080 -j ACCEPT"
    ),
}
# The same attacks on nm-zones' nftables table.
NFT_ATTACKS = {
    "flush INPUT": "nft flush chain inet nm-zones input",
    "delete the hooks": (
        "nft flush chain inet nm-zones input; nft delete chain inet nm-zones input"
    ),
    "restore an older ruleset": "nft flush ruleset",
    "flush the interface's chain": "nft flush chain inet nm-zones nmz-if-vz1-in",
    "open a port in its chain": (
        "nft insert rule inet nm-zones nmz-if-vz1-in tcp dport 8080 accept"
    ),
}
DOORS = {
    "hook up (quick path)": lambda lab, env: hook(lab, "vz1", "up", **env),
    "hook down of another interface": lambda lab, env: hook(lab, "vz2", "down"),
    "reload": lambda lab, env: lab.nm_zones("reload", check=False),
    "gc": lambda lab, env: lab.nm_zones("gc", check=False),
    "apply": lambda lab, env: lab.nm_zones("apply", "vz1", "home", check=False),
}


@pytest.mark.both_backends
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_rules_removed_behind_its_back_are_put_back(lab, tmp_path, attack):
    link, _ = lab.add_link(), lab.add_link()
    lab.listen()
    env = keyfile_env(tmp_path)
    assert hook(lab, link.name, "up", **env).returncode == 0
    assert hook(lab, link.name, "up", **env).returncode == 0  # the quick path: nothing to do
    assert probe_8080(lab, link) == ["rejected", "rejected"]
    attacks = NFT_ATTACKS if lab.backend == "nftables" else ATTACKS
    for door, run in DOORS.items():
        lab.shell(attacks[attack])
        assert status(lab).returncode == 1, (door, status(lab).stdout)
        if attack != "flush the interface's chain":  # that one falls to the catch-all
            assert probe_8080(lab, link) == ["accepted", "accepted"], door  # really open
        result = run(lab, env)
        assert result.returncode == 1, (door, result)  # it says what it found
        assert "changed by another program" in no_traceback(result), door
        assert probe_8080(lab, link) == ["rejected", "rejected"], door
        assert status(lab).returncode == 0, (door, status(lab).stdout)
        for family in ("ipv4", "ipv6"):
            wanted = planned(link.name, "home", family, lab.backend)
            assert chain(lab, link.name, family) == wanted, door


def stopped_before_commit(lab, *args: str) -> subprocess.Popen:
    """`nm-zones ARGS` in the zoned host, stopped (SIGSTOP) right before its first commit:
    after it checked the kernel, before it changed anything; SIGCONT lets it go on."""
    run = subprocess.Popen(
        ["ip", "netns", "exec", lab.zoned, PYTHON, "-m", "nm_zones", *args],
        env=lab.env(NM_ZONES_FAULTS="stop-before-commit=1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, status = os.waitpid(run.pid, os.WUNTRACED)  # returns once it is stopped (or ended)
    assert os.WIFSTOPPED(status), f"{args} ended before any commit: {status}"
    return run


@pytest.mark.both_backends
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_rules_changed_between_a_runs_check_and_its_commit_are_put_back(lab, tmp_path, attack):
    """Another program changes vz1's rules while a run for vz2 is between its check of the
    kernel and its commit: the commit starts from the changed table (iptables) or leaves
    vz1's chains alone (nftables), so the view recorded after it must not vouch for them.
    The run itself rebuilds them and says so; vz1 is filtered again when it ends."""
    link, other = lab.add_link(), lab.add_link()
    lab.listen()
    env = keyfile_env(tmp_path)
    assert hook(lab, link.name, "up", **env).returncode == 0
    lab.nm_zones("apply", other.name, "home")
    assert probe_8080(lab, link) == ["rejected", "rejected"]
    run = stopped_before_commit(lab, "apply", other.name, "public")
    try:
        lab.shell((NFT_ATTACKS if lab.backend == "nftables" else ATTACKS)[attack])
    finally:
        os.kill(run.pid, signal.SIGCONT)
    stdout, stderr = run.communicate(timeout=60)
    assert run.returncode in (0, 1) and "Traceback" not in stderr, (stdout, stderr)
    if run.returncode == 1:  # the run found the change after its commit, and rebuilt
        assert "changed by another program" in stderr, stderr
    assert probe_8080(lab, link) == ["rejected", "rejected"]
    for family in ("ipv4", "ipv6"):
        assert chain(lab, link.name, family) == planned(link.name, "home", family, lab.backend)
        assert chain(lab, other.name, family) == planned(other.name, "public", family, lab.backend)
    assert status(lab).returncode == 0, status(lab).stdout
    result = hook(lab, link.name, "up", **env)  # the quick path trusts what was recorded
    assert result.returncode == 0 and result.stderr == "", result
    assert probe_8080(lab, link) == ["rejected", "rejected"]


def test_other_programs_changes_do_not_trigger_a_rebuild(lab, tmp_path):
    """Only nm-zones' own rules count: docker-like chains and rules beside them do not."""
    link = lab.add_link()
    env = keyfile_env(tmp_path)
    assert hook(lab, link.name, "up", **env).returncode == 0
    lab.shell(
        "iptables-legacy -N DOCKER-USER; iptables-legacy -I FORWARD -j DOCKER-USER; "
        "iptables-legacy -A INPUT -s 192.0.2.1 -j DROP; ip6tables-legacy -N mine; "
        "iptables-legacy -t nat -N DOCKER"
    )
    assert status(lab).returncode == 0
    result = hook(lab, link.name, "reapply", **env)
    assert result.returncode == 0 and result.stderr == "", result


FOREIGN_AHEAD = {
    "an ACCEPT": ("{t} -I INPUT -i vz1 -j ACCEPT", "-A INPUT -i vz1 -j ACCEPT"),
    "a RETURN": ("{t} -I INPUT -i vz1 -j RETURN", "-A INPUT -i vz1 -j RETURN"),
    "a jump to a chain that accepts": (
        "{t} -N opened; {t} -A opened -j ACCEPT; {t} -I INPUT -i vz1 -p tcp -j opened",
        "-A INPUT -i vz1 -p tcp -j opened",
    ),
    "nm-zones' jump moved below an ACCEPT": (
        "{t} -D INPUT -j nmz-input; {t} -A INPUT -i vz1 -j ACCEPT; {t} -A INPUT -j nmz-input",
        "-A INPUT -i vz1 -j ACCEPT",
    ),
}


@pytest.mark.parametrize("ahead", sorted(FOREIGN_AHEAD))
def test_a_foreign_rule_ahead_of_its_jump_is_named_and_put_behind(lab, ahead):
    """Another program's rule before `-j nmz-input` that accepts opens the interface: status
    names it and exits 1; the next run puts nm-zones' jump back on top (the other program's
    rule stays, after it) and the interface is filtered again."""
    link = lab.add_link()
    lab.listen()
    lab.nm_zones("apply", link.name, "home")
    command, named = FOREIGN_AHEAD[ahead]
    for tool in ("iptables-legacy", "ip6tables-legacy"):
        lab.shell(command.format(t=tool))
    assert probe_8080(lab, link) == ["accepted", "accepted"]  # really open
    result = status(lab)
    assert result.returncode == 1, result.stdout
    for family in ("ipv4", "ipv6"):
        assert f"{family} filter INPUT rule 1 `{named}`" in result.stdout, result.stdout
    result = lab.nm_zones("reload", check=False)
    assert result.returncode == 1 and "changed by another program" in no_traceback(result)
    assert probe_8080(lab, link) == ["rejected", "rejected"]
    for family in ("ipv4", "ipv6"):
        rules = [line for line in lab.save(family, "filter").splitlines() if " INPUT " in line]
        assert rules[0] == "-A INPUT -j nmz-input" and named in rules[1:], rules
    result = status(lab)
    assert result.returncode == 0 and "rule 1" not in result.stdout, result.stdout


COMMIT_THEN_NAME = """
import subprocess, sys
from nm_zones.doors.cli import main
from nm_zones.backends import rules_ahead
assert main(["apply", sys.argv[1], "home"]) == 0  # its commits free libiptc's tables
subprocess.run(["iptables-legacy", "-I", "INPUT", "-i", sys.argv[1], "-j", "ACCEPT"], check=True)
print("\\n".join(rules_ahead(("ipv4", "filter"))))
"""


def test_a_rule_ahead_is_named_by_a_process_that_committed_before(lab):
    """A process that commits and then names the rules ahead of its jump (python-iptables'
    easy module commits each table it reads) first reads again the tables it freed after
    its commits: handed a freed table, libiptc dereferences NULL and the process dies."""
    link = lab.add_link()
    result = lab.run(lab.zoned, [PYTHON, "-c", COMMIT_THEN_NAME, link.name], check=False)
    assert result.returncode == 0, result.stderr
    assert f"INPUT rule 1 `-A INPUT -i {link.name} -j ACCEPT`" in result.stdout, result.stdout


# -- 3. every transition is journaled: a kill after any commit is finished later -----------

RUNS = {
    "apply (switch)": ["-m", "nm_zones", "apply", "vz1", "external"],
    "remove": ["-m", "nm_zones", "remove", "vz1"],
    "hook down": [HOOK, "vz1", "down"],
    "hook pre-down": [HOOK, "vz1", "pre-down"],
    "disable": ["-m", "nm_zones", "disable"],
    "reload (zone changed)": ["-m", "nm_zones", "reload"],
    # both interfaces in the changed zone: one zone-wide transaction (engine/together.py)
    "reload (zone of both changed)": ["-m", "nm_zones", "reload"],
}
NEXT_RUNS = {
    "hook up of another interface": [HOOK, "vz2", "up"],
    "reload": ["-m", "nm_zones", "reload"],
    "gc": ["-m", "nm_zones", "gc"],
}


def planned_here(lab, interface: str, zone: str, family: str) -> list[str]:
    """planned(), with the lab's own zones (written by the test) over the shipped ones."""
    config = load(Paths(config=lab.config_dir)).config
    return planned(interface, zone, family, lab.backend, config)


def _kernel_as_state_says(lab) -> None:
    """Every binding the state lists is in the kernel as its zone says; nothing else is."""
    st = state(lab)
    disabled = os.path.exists(os.path.join(lab.config_dir, "disabled"))
    saved = lab.held_text()
    if disabled:
        assert "nmz" not in saved
        assert all(b["status"] == "disabled" for b in st["interfaces"].values())
        assert status(lab).returncode == 3
        return
    for name, binding in st["interfaces"].items():
        assert binding["status"] == "applied", binding
        for family in ("ipv4", "ipv6"):
            assert chain(lab, name, family) == planned_here(lab, name, binding["zone"], family)
    if "vz1" not in st["interfaces"]:
        assert "nmz-if-vz1-" not in saved
    assert status(lab).returncode == 0, status(lab).stdout


def killed_after(lab, argv: list[str], after: int) -> bool:
    """Run Python with `argv` in the zoned host, SIGKILLed right after its `after`th commit;
    whether it was (False: it made fewer commits, which the first cut must not find)."""
    result = lab.run(
        lab.zoned, [PYTHON, *argv], check=False, NM_ZONES_FAULTS=f"kill-after-commit={after}"
    )
    if result.returncode == -9:
        return True
    assert after > 1, "the run made no commit at all"
    return False


@pytest.mark.both_backends
@pytest.mark.parametrize("run", sorted(RUNS))
def test_a_kill_after_each_commit_is_finished_by_the_next_run(lab, run):
    lab.add_link(), lab.add_link()
    next_runs = list(NEXT_RUNS.values())
    for after in range(1, 20):
        lab.flush_netfilter()
        for name in ("state", "quick"):
            path = os.path.join(lab.state_dir, name)
            if os.path.exists(path):
                os.unlink(path)
        flag = os.path.join(lab.config_dir, "disabled")
        if os.path.exists(flag):
            os.unlink(flag)
        write_zone(lab, "lab", "services: [ssh]\n")
        lab.nm_zones("apply", "vz1", "lab")
        lab.nm_zones("apply", "vz2", "lab" if "both" in run else "home")
        if run.startswith("reload"):
            write_zone(lab, "lab", "services: [ssh, mdns]\nmasquerade: true\n")
        if not killed_after(lab, RUNS[run], after):
            break  # the run made fewer commits than `after`: every cut has been tried
        follow = next_runs[after % len(next_runs)]
        lab.run(lab.zoned, [PYTHON, *follow], check=False)
        _kernel_as_state_says(lab)
    else:
        pytest.fail("the run never finished")


# -- 4. a full disk never corrupts the state -------------------------------------------------


@pytest.fixture
def small_disk(lab):
    """The state directory on a tmpfs of 512 KiB (mounted under the test's own temporary
    folder, unmounted afterwards)."""
    os.makedirs(lab.state_dir, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k,mode=0755", "tmpfs", lab.state_dir], check=True
    )
    try:
        yield lab.state_dir
    finally:
        subprocess.run(["umount", "-l", lab.state_dir], check=False)


def test_a_full_disk_keeps_the_old_state_and_every_rule(lab, small_disk):
    links = [lab.add_link() for _ in range(6)]
    for link in links:
        lab.nm_zones("apply", link.name, "home")
    before = state(lab)
    filler = os.path.join(small_disk, "filler")
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=4k"], capture_output=True)
    for args in (("apply", "vz1", "block"), ("apply", "vz2", "public")):
        result = lab.nm_zones(*args, check=False)
        assert result.returncode == 1, (args, result)
        assert "No space left on device" in no_traceback(result), args
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for args in (("reload",), ("gc",)):  # nothing to write: they may succeed, never crash
        result = lab.nm_zones(*args, check=False)
        assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result
    hook_result = hook(lab, "vz3", "up", CONNECTION_ID="x")
    assert hook_result.returncode == 1 and "No space left" in no_traceback(hook_result)
    assert [n for n in os.listdir(small_disk) if n.endswith(".tmp")] == []
    after = state(lab)
    assert after["interfaces"].keys() == before["interfaces"].keys()
    for link in links:  # every interface still filtered as its zone says
        for family in ("ipv4", "ipv6"):
            found = chain(lab, link.name, family)
            assert found in (
                planned(link.name, "home", family),
                planned(link.name, "block", family),
            )
    os.unlink(filler)
    lab.nm_zones("gc", check=False)
    assert status(lab).returncode == 0, status(lab).stdout
    assert state(lab)["interfaces"].keys() == before["interfaces"].keys()


def test_write_atomically_never_leaves_a_partial_file(small_disk):
    from nm_zones.files import write_atomically

    target = os.path.join(small_disk, "state")
    write_atomically(target, b"old" * 100)
    with pytest.raises(OSError):
        write_atomically(target, b"x" * (1 << 20))  # larger than the disk
    with open(target, "rb") as stream:
        assert stream.read() == b"old" * 100
    assert sorted(os.listdir(small_disk)) == ["state"]
    elsewhere = os.path.join(small_disk, "elsewhere")
    write_atomically(elsewhere, b"keep")
    os.unlink(target)
    os.symlink(elsewhere, target)  # a symlink planted where the state goes is replaced
    write_atomically(target, b"new")
    assert not os.path.islink(target)
    with open(elsewhere, "rb") as stream:
        assert stream.read() == b"keep"


# -- 5. the disabled flag counts only in a folder nobody else can write ----------------------


def test_disabled_flag_in_a_world_writable_folder_is_ignored(lab):
    link = lab.add_link()
    lab.listen()
    os.chmod(lab.config_dir, 0o777)
    open(os.path.join(lab.config_dir, "disabled"), "w").close()
    assert hook(lab, link.name, "up", CONNECTION_ID="x").returncode == 0
    assert state(lab)["interfaces"][link.name]["zone"] == "public"
    assert probe_8080(lab, link) == ["rejected", "rejected"]
    assert status(lab).returncode == 0
    refused = lab.nm_zones("disable", check=False)
    assert refused.returncode == 2 and "can be written by others" in refused.stderr
    assert probe_8080(lab, link) == ["rejected", "rejected"]


def test_status_says_when_a_state_folder_others_can_write_refuses_every_change(lab):
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "public")
    assert status(lab).returncode == 0
    os.chmod(lab.state_dir, 0o777)
    refused = lab.nm_zones("apply", link.name, "home", check=False)
    assert refused.returncode == 1 and "can be written by others" in refused.stderr
    said = status(lab)
    assert said.returncode == 1, said.stdout
    lines = [line for line in said.stdout.splitlines() if "can be written by others" in line]
    assert lines == [
        f"{lab.state_dir} can be written by others: refusing to keep the state there "
        f"(chown root {lab.state_dir}; chmod go-w {lab.state_dir})"
    ]


# -- 6. a FIFO never hangs anything ----------------------------------------------------------


@pytest.mark.parametrize("where", ["zones.d/x.yaml", "state", "quick", "compiled", "entries"])
def test_a_fifo_where_a_file_should_be_hangs_nothing(lab, tmp_path, where):
    link = lab.add_link()
    lab.listen()
    env = keyfile_env(tmp_path)
    assert hook(lab, link.name, "up", **env).returncode == 0
    base = lab.config_dir if where.startswith("zones.d") else lab.state_dir
    path = os.path.join(base, where)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        os.unlink(path)
    os.mkfifo(path)
    lab.shell("iptables-legacy -F INPUT")  # so that the next runs must do real work
    for args in (("check",), ("apply", link.name, "home"), ("status",)):
        result = lab.run(lab.zoned, [PYTHON, "-m", "nm_zones", *args], check=False, timeout=20)
        assert "Traceback" not in result.stderr, (args, result.stderr)
    result = lab.run(lab.zoned, [PYTHON, HOOK, link.name, "up"], check=False, timeout=20, **env)
    assert "Traceback" not in result.stderr
    assert probe_8080(lab, link) == ["rejected", "rejected"]
    if where.startswith("zones.d"):
        check = lab.nm_zones("check", check=False)
        assert check.returncode == 2 and f"{path}:1: not a regular file" in check.stderr


# -- 7. errors are one line, and one broken interface does not block the others -------------


@pytest.mark.parametrize("where", ["state", "lock", "quick"])
def test_a_directory_where_a_file_should_be_is_one_line(lab, where):
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "home")
    path = os.path.join(lab.state_dir, where)
    os.unlink(path)
    os.mkdir(path)
    for args in (("apply", link.name, "block"), ("reload",)):
        result = lab.nm_zones(*args, check=False)
        assert result.returncode == 1, (args, result)
        no_traceback(result)
    result = hook(lab, link.name, "up", CONNECTION_ID="x")
    assert result.returncode == 1
    no_traceback(result)


def test_a_hook_run_by_a_user_says_so_in_one_line(lab):
    link = lab.add_link()
    result = lab.run(
        lab.zoned,
        [*AS_NOBODY, "/usr/bin/python3", HOOK, link.name, "up"],
        check=False,
    )
    assert result.returncode == 1
    no_traceback(result)


def test_one_interface_that_cannot_be_committed_does_not_block_the_others(lab):
    bad, good, later = lab.add_link(), lab.add_link(), lab.add_link()
    lab.listen()
    lab.nm_zones("apply", bad.name, "home")
    lab.nm_zones("apply", good.name, "home")
    refuse = {"NM_ZONES_FAULTS": f"refuse-chain=nmz-if-{bad.name}-in"}
    # the switch of `bad` fails in the kernel: it stays journaled as applying
    failed = lab.nm_zones("apply", bad.name, "trusted", check=False, **refuse)
    assert failed.returncode == 1
    no_traceback(failed)
    # every later run tries to repair it, fails again, and still does its own work
    result = lab.nm_zones("apply", good.name, "block", check=False, **refuse)
    assert result.returncode == 1 and f"{bad.name}:" in result.stderr
    assert chain(lab, good.name) == planned(good.name, "block")
    result = hook(lab, later.name, "up", CONNECTION_ID="x", **refuse)
    assert result.returncode == 1
    assert chain(lab, later.name) == planned(later.name, "public")
    lab.delete_link(good.name)
    result = lab.nm_zones("gc", check=False, **refuse)
    assert f"nmz-if-{good.name}" not in lab.save("ipv4")
    st = state(lab)["interfaces"]
    assert st[bad.name]["status"] == "applying" and st[bad.name]["degraded"]
    assert status(lab).returncode == 1
    # once the kernel takes it, the next run repairs it
    lab.nm_zones("gc", check=False)
    assert chain(lab, bad.name) == planned(bad.name, "trusted")
    assert status(lab).returncode == 0


# -- 9. status cannot be forged, and says when anything is not enforced --------------------


def test_status_escapes_control_characters(lab):
    link = lab.add_link()
    evil = "Cafe\nvz9             trusted    since 2026-01-01 00:00:00  kernel: in place\x1b[2J"
    assert hook(lab, link.name, "up", CONNECTION_ID=evil).returncode == 0
    out = status(lab).stdout
    assert len(out.splitlines()) == 3, out  # the catch-all, the backend, the interface
    assert "\x1b" not in out and "Cafe\\nvz9" in out


def test_status_exits_1_while_applying_and_without_catchall(lab):
    link = lab.add_link()
    killed = lab.nm_zones(
        "apply", link.name, "home", check=False, NM_ZONES_FAULTS="kill-after-commit=1"
    )
    assert killed.returncode == -9
    result = status(lab)
    assert result.returncode == 1
    assert "catch-all not installed" in result.stdout or "APPLYING" in result.stdout
    lab.nm_zones("gc", check=False)
    assert status(lab).returncode == 0


def test_a_forged_quick_file_is_not_believed(lab, tmp_path):
    link = lab.add_link()
    lab.listen()
    env = keyfile_env(tmp_path)
    assert hook(lab, link.name, "up", **env).returncode == 0
    lab.shell("iptables-legacy -F INPUT; ip6tables-legacy -F INPUT")
    # someone who can write the quick file makes it describe the kernel as it is now
    forge = (
        "import marshal, os, sys\n"
        "from nm_zones.backends.iptables.held import read_view, view_digest\n"
        "path = os.path.join(sys.argv[1], 'quick')\n"
        "bound, views, *rest = marshal.loads(open(path, 'rb').read())\n"
        "views = {k: view_digest(read_view(*k)) for k in views}\n"
        "open(path, 'wb').write(marshal.dumps((bound, views, *rest)))\n"
        "os.chmod(path, 0o666)\n"
    )
    lab.run(lab.zoned, [PYTHON, "-c", forge, lab.state_dir])
    assert probe_8080(lab, link) == ["accepted", "accepted"]
    assert hook(lab, link.name, "up", **env).returncode == 1
    assert probe_8080(lab, link) == ["rejected", "rejected"]


def test_a_held_xtables_lock_on_the_first_event_is_retried(lab, tmp_path):
    link, other = lab.add_link(), lab.add_link()
    lab.listen()
    lock = tmp_path / "xtables.lock"
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        result = hook(lab, link.name, "up", CONNECTION_ID="x", XTABLES_LOCKFILE=str(lock))
    assert result.returncode == 1
    no_traceback(result)
    assert "nmz" not in lab.save("ipv4")
    assert state(lab)["interfaces"][link.name]["status"] == "applying"  # journaled first
    # the next event of any interface installs the catch-all and repairs the first one
    assert hook(lab, other.name, "down", XTABLES_LOCKFILE=str(lock)).returncode == 0
    assert state(lab)["catchall"]["zone"] == "public"
    assert state(lab)["interfaces"][link.name]["status"] == "applied"
    assert probe_8080(lab, link) == ["rejected", "rejected"]
    assert status(lab).returncode == 0, status(lab).stdout
