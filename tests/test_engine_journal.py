"""The engine's journal and recovery paths, in process, on an in-memory backend.

Every test is a short story of runs (each run a fresh Engine, as each event or command is a
fresh process) against tests/harness/fake_backend.py: a commit refused after its journal
entry, a table flushed behind nm-zones' back, a backend that moves, a state file lost. The
engine is used only through its public methods and the Backend protocol. No root, no
namespaces: the interfaces the engine sees are FakeLinks, and flows are not ended (the
setting is off), so nothing here can reach this machine's network.
"""

from __future__ import annotations

import marshal
import os

import pytest

from nm_zones.backends import panic_recorded
from nm_zones.engine import Engine
from nm_zones.errors import KernelError
from nm_zones.paths import Paths
from nm_zones.quick import QUICK_FILE
from nm_zones.resolve import Connection
from nm_zones.ruleset.allowances import boottime
from nm_zones.state import StateDir
from tests.harness.fake_backend import (
    NFT_KEY,
    FakeBackend,
    FakeLinks,
    owner_chain,
    patch_open_backend,
)

pytestmark = pytest.mark.pure

V4, V6 = ("ipv4", "filter"), ("ipv6", "filter")
HOW = "command line"  # the reason `nm-zones assign` gives: nothing is read from NetworkManager


class World:
    """A config dir, a state dir, the interfaces eth8 and eth9, and both fake backends."""

    def __init__(self, tmp_path, monkeypatch):
        os.chmod(tmp_path, 0o755)
        self.paths = Paths(
            config=str(tmp_path / "etc"), state=str(tmp_path / "run"), data=str(tmp_path / "lib")
        )
        os.makedirs(self.paths.config, mode=0o755)
        self.settings(backend="iptables")
        self.links = FakeLinks("eth8", "eth9")
        self.links.install(monkeypatch)
        self.ipt, self.nft = FakeBackend("iptables"), FakeBackend("nftables")
        patch_open_backend(monkeypatch, {"iptables": self.ipt, "nftables": self.nft})
        self.fake = self.ipt  # the backend the settings name

    def use(self, name: str) -> FakeBackend:
        """The settings name this backend, and runs use it."""
        self.settings(backend=name)
        self.fake = self.ipt if name == "iptables" else self.nft
        return self.fake

    def settings(self, backend: str) -> None:
        self.write("nm-zones.yaml", f"backend: {backend}\nend-forbidden-flows: false\n")

    def write(self, name: str, text: str) -> None:
        path = os.path.join(self.paths.config, name)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        with open(path, "w") as stream:
            stream.write(text)
        os.chmod(path, 0o644)

    def run(self, action=None, backend: FakeBackend | None = None) -> Engine:
        """One run as a door makes it: under the lock, begin(), then `action(engine, state)`."""
        engine = Engine(self.paths, backend=backend or self.fake)
        with engine.state_dir.locked():
            state = engine.state_dir.load()
            if engine.begin(state) and action is not None:
                action(engine, state)
        return engine

    def assign(self, interface: str, zone: str, backend=None) -> Engine:
        return self.run(lambda e, s: e.apply_interface(interface, zone, HOW, state=s), backend)

    def state(self):
        return StateDir(self.paths.state).load()

    def state_file(self) -> str:
        return StateDir(self.paths.state).file("state")


@pytest.fixture
def world(tmp_path, monkeypatch) -> World:
    return World(tmp_path, monkeypatch)


def recorded_matches_kernel(world: World, backend: FakeBackend) -> bool:
    """The state's views are what the kernel holds: the next run rebuilds nothing."""
    kernel = world.state().kernel
    return bool(kernel) and all(backend.read_view(k) == view for k, view in kernel.items())


# -- the ordinary path ---------------------------------------------------------------------


def test_first_run_puts_the_catchall_in_place(world):
    engine = world.run()
    assert world.ipt.holds_interface(None)
    assert [c.interface for c in engine.changes] == ["*"]
    assert world.state().catchall_zone == "public"
    assert recorded_matches_kernel(world, world.ipt)


def test_an_interface_gets_its_zone_and_a_second_run_commits_nothing(world):
    world.assign("eth9", "home")
    binding = world.state().interfaces["eth9"]
    assert (binding.zone, binding.status, binding.ifindex) == ("home", "applied", 101)
    assert world.ipt.holds_interface("eth9")
    assert recorded_matches_kernel(world, world.ipt)
    before = len(world.ipt.commits)
    engine = world.assign("eth9", "home")
    assert len(world.ipt.commits) == before
    assert engine.changes == [] and not engine.degraded


def test_a_switch_to_the_zone_it_has_writes_nothing_unless_its_record_changes(world):
    """A D-Bus call names no connection: the one recorded stays, and the state is not
    rewritten; a connection renamed since is recorded."""
    profile = Connection(uuid="u-1", id="Office", type="802-3-ethernet")
    world.run(lambda e, s: e.apply_interface("eth9", "home", "dbus", profile, s))
    before = os.stat(world.state_file())
    world.run(lambda e, s: e.apply_interface("eth9", "home", "dbus", None, s))
    after = os.stat(world.state_file())
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert world.state().interfaces["eth9"].connection_id == "Office"
    renamed = Connection(uuid="u-1", id="Office 2", type="802-3-ethernet")
    world.run(lambda e, s: e.apply_interface("eth9", "home", "dbus", renamed, s))
    assert os.stat(world.state_file()).st_ino != before.st_ino
    binding = world.state().interfaces["eth9"]
    assert (binding.connection_uuid, binding.connection_id) == ("u-1", "Office 2")


def test_a_switch_changes_the_interface_rules(world):
    world.assign("eth9", "home")
    home = world.ipt.content_of("eth9")
    world.assign("eth9", "drop")
    assert world.ipt.content_of("eth9") != home
    assert world.state().interfaces["eth9"].zone == "drop"


# -- interrupted apply and remove ----------------------------------------------------------


@pytest.mark.parametrize("which", ["iptables", "nftables"])
def test_an_apply_refused_after_its_journal_entry_is_repaired_by_the_next_run(world, which):
    fake = world.use(which)
    world.run()  # the catch-all first: the refusal must hit the interface's commit
    fake.refuse_next("apply")
    with pytest.raises(KernelError):
        world.assign("eth9", "work")
    journaled = world.state()
    assert journaled.interfaces["eth9"].status == "applying"
    key = NFT_KEY if which == "nftables" else V4
    assert journaled.kernel[key] is None  # being committed: unknown, not another's change
    assert not fake.holds_interface("eth9")
    engine = world.run()
    assert world.state().interfaces["eth9"].status == "applied"
    assert fake.holds_interface("eth9")
    assert "repairing an interrupted apply" in " ".join(c.reason for c in engine.changes)
    assert not any("another program" in w for w in engine.warnings)  # its own, said quietly
    assert recorded_matches_kernel(world, fake)


def quick_bound(world: World) -> dict:
    """The interfaces the quick file (quick.py) lets an event trust: name -> (inputs, index)."""
    with open(os.path.join(world.paths.state, QUICK_FILE), "rb") as stream:
        return marshal.loads(stream.read())[0]


@pytest.mark.parametrize("which", ["iptables", "nftables"])
def test_no_interface_is_trusted_by_the_quick_path_while_a_commit_is_under_way(world, which):
    """The journal entry of a commit leaves the quick file without interfaces (an event then
    runs in full); the run that finishes the commit lets them be trusted again."""
    fake = world.use(which)
    world.run(lambda e, s: e.apply_interface("eth8", "home", HOW, None, s, "inputs-8"))
    eth8 = world.state().interfaces["eth8"].ifindex
    assert quick_bound(world) == {"eth8": ("inputs-8", eth8)}
    fake.refuse_next("apply")
    with pytest.raises(KernelError):
        world.run(lambda e, s: e.apply_interface("eth9", "work", HOW, None, s, "inputs-9"))
    assert world.state().interfaces["eth9"].status == "applying"
    assert quick_bound(world) == {}
    world.run()
    assert quick_bound(world)["eth8"] == ("inputs-8", eth8)


def test_an_apply_cut_between_its_tables_is_rebuilt_and_finished(world):
    world.run()
    world.ipt.refuse_after(1)  # IPv4's filter table committed, IPv6's refused
    with pytest.raises(KernelError):
        world.assign("eth9", "work")
    assert world.ipt.content_of("eth9") and V6 not in dict(world.ipt.content_of("eth9"))
    world.ipt.refuse_after(10**6)
    engine = world.run()
    assert not any("another program" in w for w in engine.warnings)  # its own half commit
    assert {key for key, _ in world.ipt.content_of("eth9")} >= {V4, V6}
    assert world.state().interfaces["eth9"].status == "applied"
    assert recorded_matches_kernel(world, world.ipt)


def test_a_remove_refused_after_its_journal_entry_is_finished_by_the_next_run(world):
    world.assign("eth9", "home")
    world.ipt.refuse_next("remove")
    with pytest.raises(KernelError):
        world.run(lambda e, s: e.remove_interface("eth9", "down", s))
    assert world.state().interfaces["eth9"].status == "removing"
    assert world.ipt.holds_interface("eth9")
    engine = world.run()
    assert "eth9" not in world.state().interfaces
    assert not world.ipt.holds_interface("eth9")
    assert [c.reason for c in engine.changes] == ["finishing an interrupted removal"]


def test_a_refused_commit_stays_with_its_interface(world):
    """One interface's error marks it degraded; the run goes on with the others."""
    world.assign("eth8", "home")
    world.assign("eth9", "home")
    world.write("zones.d/home.yaml", "services: [ssh]\n")  # both must be committed again
    world.ipt.refuse_interface("eth8")  # the zone-wide commit, then eth8's own, refused
    engine = world.run(lambda e, s: e.reload(s))
    state = world.state()
    assert "refused by the test" in state.interfaces["eth8"].degraded
    assert state.interfaces["eth9"].status == "applied" and not state.interfaces["eth9"].degraded
    assert engine.degraded
    assert [c.interface for c in engine.changes] == ["eth9"]  # no change claimed for eth8
    world.ipt.refused_interfaces.clear()
    world.run(lambda e, s: e.reload(s))
    assert world.state().interfaces["eth8"].status == "applied"


@pytest.mark.parametrize("which", ["iptables", "nftables"])
def test_a_zone_wide_reload_commits_each_table_once(world, which):
    """Both interfaces of the edited zone in one commit per table and family (nftables:
    one transaction), not one per interface."""
    fake = world.use(which)
    world.assign("eth8", "home")
    world.assign("eth9", "home")
    world.write("zones.d/home.yaml", "services: [ssh]\n")
    before = len(fake.commits)
    engine = world.run(lambda e, s: e.reload(s))
    commits = fake.commits[before:]
    assert sorted(c.interface for c in engine.changes) == ["eth8", "eth9"]
    keys = [key for _, key in commits]
    assert len(keys) == len(set(keys))  # each table once, for both interfaces
    assert len(keys) == 1 if which == "nftables" else {V4, V6} <= set(keys)
    assert fake.content_of("eth8") and fake.content_of("eth9")
    assert recorded_matches_kernel(world, fake)


def test_a_zone_wide_change_goes_to_syslog_once_it_is_in_the_kernel(world, monkeypatch):
    """Each interface's line in syslog is written after the joint commit, and none for an
    interface whose commit was refused."""
    said = []
    monkeypatch.setattr(
        "nm_zones.engine.journal.record",
        lambda change: said.append((change.interface, len(world.ipt.commits))),
    )
    world.assign("eth8", "home")
    world.assign("eth9", "home")
    world.write("zones.d/home.yaml", "services: [ssh]\n")
    world.ipt.refuse_interface("eth8")
    before = len(world.ipt.commits)
    said.clear()
    world.run(lambda e, s: e.reload(s))
    assert [interface for interface, _ in said] == ["eth9"]
    assert all(commits > before for _, commits in said)


@pytest.mark.parametrize("which", ["iptables", "nftables"])
def test_a_zone_wide_commit_cut_short_is_finished_by_the_next_run(world, which):
    """Every interface of the zone is journaled `applying` before the one commit: a run
    whose commits are refused from there on (as a kill would end it) leaves them all for
    the next run to finish."""
    fake = world.use(which)
    world.assign("eth8", "home")
    world.assign("eth9", "home")
    old = (fake.content_of("eth8"), fake.content_of("eth9"))
    world.write("zones.d/home.yaml", "services: [ssh]\n")
    fake.refuse_after(0)
    world.run(lambda e, s: e.reload(s))
    journaled = world.state()
    assert {journaled.interfaces[n].status for n in ("eth8", "eth9")} == {"applying"}
    assert (fake.content_of("eth8"), fake.content_of("eth9")) == old  # nothing committed
    fake.refuse_after(10**6)
    world.run()
    state = world.state()
    assert {state.interfaces[n].status for n in ("eth8", "eth9")} == {"applied"}
    assert fake.content_of("eth8") != old[0] and fake.content_of("eth9") != old[1]
    assert recorded_matches_kernel(world, fake)


def test_a_gone_interface_loses_its_rules(world):
    world.assign("eth9", "home")
    world.links.gone("eth9")
    engine = world.run()
    assert not world.ipt.holds_interface("eth9")
    assert [c.reason for c in engine.changes] == ["interface gone"]


def test_an_interface_lookup_that_fails_removes_nothing_and_the_run_goes_on(world, monkeypatch):
    """The kernel not telling which interfaces exist (ENOMEM, not ENODEV) is no reason to
    take an interface's rules away: every binding keeps them, the run's own change is made,
    and the run says why it is degraded."""
    import nm_zones.ifname

    world.assign("eth9", "home")
    world.links.gone("eth9")

    def failing(names):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(nm_zones.ifname, "interface_indexes", failing)
    engine = world.assign("eth8", "work")
    assert world.ipt.holds_interface("eth9") and world.ipt.holds_interface("eth8")
    assert [c.reason for c in engine.changes] == [HOW]
    assert engine.degraded
    assert engine.warnings == ["cannot tell which interfaces are gone: Cannot allocate memory"]


# -- the kernel is the truth ---------------------------------------------------------------


@pytest.mark.parametrize("which", ["iptables", "nftables"])
def test_a_table_flushed_behind_its_back_is_rebuilt_and_said(world, which):
    fake = world.use(which)
    key = NFT_KEY if which == "nftables" else V4
    world.assign("eth9", "home")
    fake.flush_behind_its_back(key)
    commits = len(fake.commits)
    engine = world.run()
    assert fake.commits[commits:] == [("rebuild", key)]  # that table only, once
    assert fake.holds_interface("eth9") and fake.holds_interface(None)
    assert engine.degraded
    assert any("changed by another program" in w for w in engine.warnings)
    assert recorded_matches_kernel(world, fake)


@pytest.mark.parametrize("which", ["iptables", "nftables"])
def test_a_chain_changed_between_the_check_and_the_commit_is_rebuilt_in_that_run(world, which):
    """The run's commit for eth8 goes through on top of another program's change to eth9's
    chain made after the run checked the kernel: the run rebuilds that table at once, says
    so, and records the rebuilt view (a run killed before the rebuild finds it unknown)."""
    fake = world.use(which)
    key = NFT_KEY if which == "nftables" else V4
    world.assign("eth9", "home")
    fake.change_before_next_commit(key, owner_chain("eth9"))
    held = fake.content_of("eth9")
    engine = world.assign("eth8", "work")
    assert fake.commits[-1] == ("rebuild", key)  # at once, in the same run
    assert fake.content_of("eth9") == held and fake.holds_interface("eth8")
    assert engine.degraded
    assert any("changed by another program" in w for w in engine.warnings)
    assert recorded_matches_kernel(world, fake)
    commits = len(fake.commits)
    assert not world.run().degraded and len(fake.commits) == commits  # nothing left to do


def test_a_table_changed_meanwhile_that_cannot_be_rebuilt_stays_unknown(world):
    """The rebuild of a table changed between the check and the commit is refused: said,
    and the table stays unknown in the state (no later commit of the run vouches for it),
    so the next run rebuilds it."""
    fake = world.use("iptables")
    world.assign("eth9", "home")
    fake.change_before_next_commit(V4, owner_chain("eth9"))
    fake.refuse_next("rebuild")

    def two_commits(engine, state):
        engine.apply_interface("eth8", "work", HOW, state=state)
        engine.apply_interface("eth8", "home", HOW, state=state)  # commits V4 again

    engine = world.run(two_commits)
    assert engine.degraded and world.state().kernel[V4] is None
    engine = world.run()
    assert ("rebuild", V4) in fake.commits[-3:] and recorded_matches_kernel(world, fake)


def test_a_table_changed_meanwhile_in_a_run_whose_commit_fails_is_rebuilt_by_the_next(world):
    """The first table's commit finds another program's change, the second table's commit
    is refused: the run fails with the changed table unknown, and the next run (the same
    backend, as in the D-Bus service) rebuilds it and says another program changed it."""
    fake = world.use("iptables")
    world.assign("eth9", "home")
    held = fake.content_of("eth9")
    fake.change_before_next_commit(V4, owner_chain("eth9"))
    fake.refuse_after(1)
    with pytest.raises(KernelError):
        world.assign("eth8", "work")
    assert world.state().kernel[V4] is None and fake.content_of("eth9") != held
    fake.refuse_after(100)
    commits = len(fake.commits)
    engine = world.run()
    assert ("rebuild", V4) in fake.commits[commits:] and fake.content_of("eth9") == held
    assert any("changed by another program" in w for w in engine.warnings)
    assert recorded_matches_kernel(world, fake)


def test_a_chain_added_by_another_program_is_rebuilt_away(world):
    world.assign("eth9", "home")
    world.ipt.tamper(V6)
    world.run()
    assert "nmz-intruder" not in world.ipt.chains(V6)
    assert world.ipt.holds_interface("eth9")


def test_a_failed_rebuild_is_said_and_tried_again(world):
    world.assign("eth9", "home")
    world.ipt.flush_behind_its_back(V4)
    world.ipt.refuse_next("rebuild")
    engine = world.run()
    assert engine.degraded and any("refused by the test" in w for w in engine.warnings)
    world.run()
    assert world.ipt.holds_interface("eth9")
    assert recorded_matches_kernel(world, world.ipt)


@pytest.mark.parametrize("damage", ["garbage", "untrusted", "other version"])
def test_a_lost_state_file_leaves_the_kernel_as_it_is(world, damage):
    world.assign("eth9", "home")
    path = world.state_file()
    if damage == "garbage":
        with open(path, "wb") as stream:
            stream.write(b"\x00not marshal")
    elif damage == "untrusted":
        os.chmod(path, 0o666)
    else:
        import marshal

        with open(path, "wb") as stream:
            stream.write(marshal.dumps((99, (), ("", ""), {}, {}, (), {})))
    engine = world.run()
    assert engine.degraded and any("starting afresh" in w for w in engine.warnings)
    assert world.ipt.holds_interface("eth9")  # nothing removed on the strength of a lost state
    assert world.ipt.holds_interface(None)


def test_orphans_of_a_lost_state_go_only_for_interfaces_that_are_gone(world):
    world.assign("eth8", "home")
    world.assign("eth9", "home")
    os.unlink(world.state_file())
    world.links.gone("eth8")
    engine = world.run(lambda e, s: e.collect_orphans(s))
    assert not world.ipt.holds_interface("eth8")
    assert world.ipt.holds_interface("eth9")  # up: kept until something binds it again
    assert [c.reason for c in engine.changes if c.interface != "*"] == ["orphaned chains removed"]


# -- the catch-all -------------------------------------------------------------------------


def test_the_catchall_is_ensured_once_and_rebuilt_when_flushed(world):
    world.run()
    commits = len(world.ipt.commits)
    world.run()
    assert len(world.ipt.commits) == commits
    world.ipt.flush_behind_its_back()
    world.run()
    assert world.ipt.holds_interface(None)
    assert recorded_matches_kernel(world, world.ipt)


def test_a_refused_catchall_is_journaled_and_put_in_place_by_the_next_run(world):
    world.ipt.refuse_next("apply")
    engine = world.run()
    assert engine.degraded and not world.ipt.holds_interface(None)
    world.run()
    assert world.ipt.holds_interface(None)
    assert world.state().catchall_zone == "public"


# -- backend move --------------------------------------------------------------------------


def test_a_move_puts_everything_in_the_new_backend_then_empties_the_old(world):
    world.assign("eth9", "home")
    world.settings(backend="nftables")
    engine = world.run(backend=world.nft)
    assert world.nft.holds_interface("eth9") and world.nft.holds_interface(None)
    assert world.ipt.kernel == {}
    assert set(world.state().kernel) == {NFT_KEY}
    assert "rules moved to another backend" in [c.reason for c in engine.changes]
    assert recorded_matches_kernel(world, world.nft)


def test_a_move_cut_before_the_old_backend_is_emptied_is_finished_next_run(world):
    world.assign("eth9", "home")
    world.settings(backend="nftables")
    world.ipt.refuse_next("remove_everything")
    with pytest.raises(KernelError):
        world.run(backend=world.nft)
    assert world.nft.holds_interface("eth9")  # the new one first: never less filtered
    assert world.ipt.holds_interface("eth9")
    world.run(backend=world.nft)
    assert world.ipt.kernel == {} and set(world.state().kernel) == {NFT_KEY}


def test_a_config_changed_while_waiting_is_read_again_with_its_backend(world):
    """A resident service read the config before the lock; `reload` changed the backend
    meanwhile: the run follows the new settings instead of moving the rules back."""
    world.assign("eth9", "home")
    engine = Engine(world.paths, backend=world.ipt)
    assert engine.compiled.settings["backend"] == "iptables"  # read before the lock
    world.settings(backend="nftables")
    with engine.state_dir.locked():
        engine.begin(engine.state_dir.load())
    assert engine.backend is world.nft
    assert world.nft.holds_interface("eth9") and world.ipt.kernel == {}


# -- allowances ----------------------------------------------------------------------------


def allow(world, interface: str, what: str, seconds: float) -> None:
    """What `nm-zones allow` does: the allowance into the state, the interface again."""

    def action(engine, state):
        deadline = int(boottime() + seconds) if seconds else 0
        state.allowances.append((interface, "public", what, deadline, 0))
        engine.reapply(interface, state, f"{what} allowed")

    world.run(action)


@pytest.mark.parametrize("what", ["without:ssh", "masquerade"])
def test_the_zone_editor_revokes_a_runtime_feature_of_the_zone(world, what):
    """The zone editor's revoke button on a runtime removal (firewall-cmd's
    --remove-service) or masquerade: the allowance ends, the interface is committed again."""
    from nm_zones.config.load import load
    from nm_zones.doors.zone_editor import revoke_allowance

    world.assign("eth9", "public")
    allow(world, "eth9", what, 0)
    assert [a[2] for a in world.state().allowances] == [what]
    with_it = world.fake.content_of("eth9")
    loaded = load(world.paths)
    world.run(lambda e, s: revoke_allowance(e, loaded, "public", "eth9", what, s))
    assert world.state().allowances == []
    assert world.fake.content_of("eth9") != with_it
    assert recorded_matches_kernel(world, world.fake)


def test_an_expired_allowance_leaves_the_kernel_at_the_next_run(world):
    world.assign("eth9", "public")
    plain = world.ipt.content_of("eth9")
    allow(world, "eth9", "8080/tcp", seconds=-1)  # committed; past its deadline at once
    assert world.ipt.content_of("eth9") != plain
    deadline = world.state().allowances[0][3]
    engine = world.run()
    assert world.ipt.content_of("eth9") == plain
    assert world.state().allowances == []
    assert deadline in world.ipt.forgotten
    assert "8080/tcp expired" in [c.reason for c in engine.changes]


def test_an_allowance_without_deadline_stays(world):
    world.assign("eth9", "public")
    plain = world.ipt.content_of("eth9")
    allow(world, "eth9", "8080/tcp", seconds=0)
    opened = world.ipt.content_of("eth9")
    world.run()
    assert world.ipt.content_of("eth9") == opened != plain
    assert len(world.state().allowances) == 1


# -- panic mode ----------------------------------------------------------------------------


def panic(world, on: bool) -> Engine:
    return world.run(lambda e, s: e.set_panic(s, on, HOW))


@pytest.mark.parametrize("which", ["iptables", "nftables"])
def test_panic_on_and_off(world, which):
    fake = world.use(which)
    world.assign("eth9", "home")
    panic(world, True)
    assert os.path.exists(world.paths.panic_flag) and fake.holds_panic()
    assert panic_recorded(world.state().kernel)  # the views recorded hold it
    assert fake.holds_interface("eth9")  # nothing else changes
    panic(world, False)
    assert not os.path.exists(world.paths.panic_flag) and not fake.holds_panic()
    assert recorded_matches_kernel(world, fake)


def test_a_refused_panic_on_ends_in_panic_mode_at_the_next_run(world):
    world.assign("eth9", "home")
    world.ipt.refuse_next("panic")
    with pytest.raises(KernelError):
        panic(world, True)
    assert os.path.exists(world.paths.panic_flag)  # the flag, written before the commit
    assert world.state().kernel[V4] is None  # journaled
    world.run()
    assert world.ipt.holds_panic()
    assert world.ipt.holds_interface("eth9")


def test_a_refused_panic_off_stays_in_panic_mode(world):
    world.assign("eth9", "home")
    panic(world, True)
    world.ipt.refuse_next("panic")
    with pytest.raises(KernelError):
        panic(world, False)
    world.run()
    assert os.path.exists(world.paths.panic_flag) and world.ipt.holds_panic()


def test_a_panic_flag_removed_by_hand_lifts_panic_mode(world):
    panic(world, True)
    os.unlink(world.paths.panic_flag)
    engine = world.run()
    assert not world.ipt.holds_panic()
    assert "panic flag gone" in [c.reason for c in engine.changes]


def test_a_table_rebuilt_in_panic_mode_keeps_panic_rules(world):
    panic(world, True)
    world.ipt.flush_behind_its_back(V6)
    commits = len(world.ipt.commits)
    world.run()
    assert world.ipt.holds_panic()
    assert world.ipt.commits[commits:] == [("rebuild", V6)]  # with panic's rules, in one


# -- zones that cannot be loaded -----------------------------------------------------------


def test_a_broken_zone_gets_its_shipped_definition_and_says_so(world):
    world.assign("eth9", "work")
    shipped = world.ipt.content_of("eth9")
    world.run(lambda e, s: e.remove_interface("eth9", "down", s))
    world.write("zones.d/work.yaml", "services: [no-such-service]\n")
    engine = world.assign("eth9", "work")
    assert world.ipt.content_of("eth9") == shipped
    binding = world.state().interfaces["eth9"]
    assert binding.degraded and "eth9" in engine.unfulfilled
    assert engine.degraded


def test_a_broken_zone_without_shipped_definition_gets_block(world):
    world.write("zones.d/kitchen.yaml", "services: [no-such-service]\n")
    world.assign("eth8", "block")
    engine = world.assign("eth9", "kitchen")
    assert world.state().interfaces["eth9"].zone == "block"
    assert "eth9" in engine.unfulfilled


def test_an_interface_already_in_a_zone_that_breaks_keeps_its_rules(world):
    world.assign("eth9", "home")
    held = world.ipt.content_of("eth9")
    commits = len(world.ipt.commits)
    world.write("zones.d/home.yaml", "services: [no-such-service]\n")
    engine = world.run(lambda e, s: e.reload(s))
    assert world.ipt.content_of("eth9") == held
    assert len(world.ipt.commits) == commits  # nothing committed for it
    assert "keeping its rules of zone 'home'" in world.state().interfaces["eth9"].degraded
    assert engine.degraded


# -- disable -------------------------------------------------------------------------------


@pytest.mark.parametrize("lookup", ["answers", "fails"])
def test_enable_forgets_only_the_bindings_of_interfaces_the_kernel_says_are_gone(
    world, monkeypatch, lookup
):
    """`enable` gives the interfaces NetworkManager does not know back the zone they had,
    and forgets the bindings of those that are gone: only on the kernel's "no such device".
    A lookup that fails otherwise (ENOMEM) fails the command and forgets nothing."""
    import nm_zones.ifname
    from nm_zones.doors.nm import enable

    monkeypatch.setenv("PATH", "/nonexistent")  # no nmcli: no active connection is known
    world.assign("eth8", "home")
    world.assign("eth9", "work")
    world.write("disabled", "")
    world.run()
    world.links.gone("eth9")
    os.unlink(os.path.join(world.paths.config, "disabled"))
    if lookup == "fails":

        def failing(names):
            raise OSError(12, "Cannot allocate memory")

        monkeypatch.setattr(nm_zones.ifname, "interface_indexes", failing)
        with pytest.raises(KernelError, match=r"which disabled interfaces still exist: .*again"):
            world.run(enable)
        assert {n: b.status for n, b in world.state().interfaces.items()} == {
            "eth8": "disabled",
            "eth9": "disabled",
        }
        return
    world.run(enable)
    assert {n: b.status for n, b in world.state().interfaces.items()} == {"eth8": "applied"}
    assert world.ipt.holds_interface("eth8") and not world.ipt.holds_interface("eth9")


def test_an_interrupted_disable_is_finished_by_the_next_run(world):
    world.assign("eth9", "home")
    world.write("disabled", "")
    world.ipt.refuse_next("remove_everything")
    with pytest.raises(KernelError):
        world.run(lambda e, s: e.disable_all(s))  # begin() already finishes it: refused
    assert world.ipt.holds_interface("eth9")
    world.run()
    assert world.ipt.kernel == {}
    assert world.state().interfaces["eth9"].status == "disabled"
