"""Refused listeners on org.nm_zones.Manager1 (doors/listeners.py has the logic): every
SCAN_SECONDS `nm-zones serve` reads who listens (sock_diag) and, for a program of a user's
session on a port the zone of an active connection refuses, emits ListenerRefused once (the
notification agent asks); AnswerListener carries an answer out and remembers it,
ForgetListenerAnswer undoes it (both polkit: org.nm-zones.configure, as `allow` is),
GetListenerAnswers lists them (open to all). The same scan grants the remembered
allowances again to an interface that comes back to an allowed network."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from ..backends import choose
from ..config.appname import check_app
from ..config.load import load
from ..engine import IN_KERNEL, allowed_for
from ..errors import UsageError
from ..networks.store import load_store
from ..ruleset.allowances import for_network
from ..sockdiag import listening_sockets
from .allow import Request, run
from .apps import check_app_support
from .busapi import ACTION_CONFIGURE, NMZ_INTERFACE, FirewallError
from .listeners import (
    ANSWERS,
    Answers,
    cgroup_paths,
    connection_key,
    describe,
    programs,
    question_text,
    refused_ports,
)
from .networks_bus import identification
from .service_log import log

SCAN_SECONDS = 2.0
QUESTION_KEYS = ("app", "key", "interface", "ports", "zone", "label", "name")


class ListenerWatch:
    """What the scans keep between them: the questions asked (once each per service run),
    the cgroup ids known, the checks of app support done."""

    def __init__(self, service):
        self.service = service
        self.asked: set[tuple[str, str]] = set()
        self.paths: dict[int, str] = {}
        self.apps_supported: bool | None = None
        self.failed: set[tuple[str, str]] = set()  # grants that failed: logged once

    def methods(self) -> dict:
        return {
            (NMZ_INTERFACE, "GetListenerAnswers"): ("", "aa{ss}", None, self.get_answers),
            (NMZ_INTERFACE, "AnswerListener"): ("a{ss}s", "as", ACTION_CONFIGURE, self.answer),
            (NMZ_INTERFACE, "ForgetListenerAnswer"): ("ss", "as", ACTION_CONFIGURE, self.forget),
        }

    # -- the calls -------------------------------------------------------------------------

    async def get_answers(self) -> tuple:
        answers = await asyncio.to_thread(Answers, self.service.paths.data)
        return ([dict(row) for row in answers.rows.values()],)

    async def answer(self, question: dict, answer: str) -> tuple:
        """Remember `answer` for the question's (app, key) and carry it out now (the
        caller holds the service's mutex)."""
        if answer not in ANSWERS:
            raise FirewallError("INVALID_VALUE", f"{answer!r}: one of {', '.join(ANSWERS)}")
        try:
            check_app(question.get("app", ""))
        except ValueError as error:
            raise FirewallError("INVALID_VALUE", str(error)) from None
        key = question.get("key", "")
        if not key.startswith(("network:", "zone:")):
            raise FirewallError("INVALID_VALUE", f"{key!r}: network:ID or zone:ZONE")
        question = {k: str(question.get(k, "")) for k in QUESTION_KEYS}

        def remember():
            return Answers(self.service.paths.data).remember(question, answer)

        await asyncio.to_thread(remember)
        said = [f"{question['name'] or question['app']} on {question['label'] or key}: {answer}"]
        said += await self.grant_remembered()
        await self.service.emit(NMZ_INTERFACE, "SettingsChanged")
        return (said,)

    async def forget(self, app: str, key: str) -> tuple:
        """Undo an answer: forgotten, and what it allowed revoked where it is in force."""
        row = await asyncio.to_thread(lambda: Answers(self.service.paths.data).forget(app, key))
        if row is None:
            raise FirewallError("INVALID_VALUE", f"no answer for {app} on {key}")
        self.asked.discard((app, key))
        said = [f"forgot the answer for {row.get('name') or app} on {row.get('label') or key}"]
        if row["answer"] != "block":
            said += await self.change_allowances(
                [(interface, what, 0) for interface, what in self.in_force(app, row)], "revoke"
            )
        await self.service.emit(NMZ_INTERFACE, "SettingsChanged")
        return (said,)

    # -- the scan --------------------------------------------------------------------------

    async def run(self) -> None:
        """Scan every SCAN_SECONDS until cancelled; a failed scan is logged, not fatal."""
        while True:
            try:
                questions = await asyncio.to_thread(self.scan)
                for question in questions:
                    await self.service.emit(NMZ_INTERFACE, "ListenerRefused", "a{ss}", (question,))
                if await asyncio.to_thread(self.missing_grants):
                    async with self.service.mutex:
                        await self.grant_remembered()
            except Exception as error:  # the service goes on without questions
                log(f"watching listeners: {type(error).__name__}: {error}", warning=True)
            await asyncio.sleep(SCAN_SECONDS)

    def connections(self):
        """(engine, state, config, [(interface, binding, key, label)]) of the bound
        interfaces whose network is known or was looked for."""
        engine = self.service.engine()
        state = engine.state_dir.load()
        config = load(self.service.paths).config
        store = load_store(self.service.paths)
        labels = {n.id: n.label for n in store.networks} if not store.broken else {}
        found = []
        for name, binding in sorted(state.interfaces.items()):
            if binding.status not in IN_KERNEL or not binding.zone:
                continue
            known = identification(engine, name, binding)
            if known["identification"] == "pending":
                continue  # asked once the hook has looked
            network = known["network"]
            label = labels.get(network) or network or binding.connection_id or name
            found.append((name, binding, connection_key(network, binding.zone), label))
        return engine, state, config, found

    def scan(self) -> list[dict]:
        _engine, state, config, found = self.connections()
        whom = config.settings.ask_about_listeners
        if whom == "none" or not found:
            return []
        sockets = listening_sockets()
        if any(s.cgroup not in self.paths for s in sockets):
            self.paths = cgroup_paths()
        answers = Answers(self.service.paths.data)
        questions = []
        for app, program in sorted(programs(sockets, self.paths, whom).items()):
            for name, binding, key, label in found:
                if (app, key) in self.asked or answers.current(app, key):
                    continue
                network = key[len("network:") :] if key.startswith("network:") else ""
                reach = allowed_for(state, name, binding.zone, network, self.service.paths)
                allowed = [w for w, *_ in reach]  # --network's (runtime and kept) included
                zone = config.zones.get(binding.zone)
                refused = refused_ports(
                    app, program["cgroup"], program["ports"], zone, config, allowed
                )
                if not refused:
                    continue
                self.asked.add((app, key))
                shown, icon = describe(app, program["cgroup"], program["uid"])
                summary, body = question_text(shown, refused, label, binding.zone)
                uid = program["uid"]
                questions.append(
                    {
                        "app": app,
                        "cgroup": program["cgroup"],
                        "name": shown,
                        "icon": icon,
                        "ports": " ".join(refused),
                        "interface": name,
                        "zone": binding.zone,
                        "key": key,
                        "label": label,
                        "uid": "" if uid is None or uid < 0 else str(uid),
                        "summary": summary,
                        "body": body,
                    }
                )
        return questions

    def wanted(self) -> list[tuple[str, str, int]]:
        """(interface, what, seconds; 0: no end) the remembered answers allow now."""
        _engine, _state, config, found = self.connections()
        backend = backend_name(config)
        answers = Answers(self.service.paths.data)
        now = time.time()
        wanted = []
        for name, _binding, key, _label in found:
            for (app, row_key), row in answers.rows.items():
                if row_key != key or row["answer"] == "block":
                    continue
                if not answers.current(app, key, now):
                    continue
                seconds = int(float(row["until"]) - now) if row["answer"] == "hour" else 0
                for what in _whats(app, row, backend):
                    wanted.append((name, what, seconds))
        return wanted

    def missing_grants(self) -> bool:
        state = self.service.engine().state_dir.load()
        held = {(a[0], a[2]) for a in state.allowances}
        return any((i, w) not in held for i, w, _ in self.wanted())

    async def grant_remembered(self) -> list[str]:
        """The remembered allowances granted to the interfaces that lack them."""
        wanted = await asyncio.to_thread(self.wanted)
        state = self.service.engine().state_dir.load()
        held = {(a[0], a[2]) for a in state.allowances}
        missing = [w for w in wanted if w[:2] not in held and w[:2] not in self.failed]
        return await self.change_allowances(missing, "allow")

    def in_force(self, app: str, row: dict) -> list[tuple[str, str]]:
        backend = backend_name(load(self.service.paths).config)
        whats = set(_whats(app, row, backend))
        state = self.service.engine().state_dir.load()
        mine = [a for a in state.allowances if a[0] and not for_network(a)]  # not --network's
        return sorted({(a[0], a[2]) for a in mine if a[2] in whats})

    async def change_allowances(self, changes, command: str) -> list[str]:
        """`allow|revoke WHAT --interface IF [--for Ns]` for each, as the command runs it."""
        said: list[str] = []
        for interface, what, seconds in changes:
            if what.startswith("app:") and command == "allow" and not self.app_support():
                self.failed.add((interface, what))
                continue
            args = SimpleNamespace(
                command=command,
                zone="",
                interface=interface,
                duration=f"{seconds}s" if seconds else None,
                permanent=False,
            )
            engine = self.service.engine()
            loaded = await asyncio.to_thread(load, self.service.paths)
            request = Request(args, what, loaded)
            try:
                await self.service.run_engine(
                    engine,
                    lambda e=engine, r=request: self.service.locked(e, lambda s: run(e, r, s)),
                    "INVALID_VALUE",
                )
            except FirewallError as error:
                self.failed.add((interface, what))
                said.append(f"{interface}: {what} not {command}ed: {error}")
                continue
            said += [str(change) for change in engine.changes]
        return said

    def app_support(self) -> bool:
        if self.apps_supported is None:
            try:
                check_app_support(backend_name(load(self.service.paths).config))
                self.apps_supported = True
            except UsageError as error:
                log(f"answers to refused listeners: {error}", warning=True)
                self.apps_supported = False
        return self.apps_supported


def backend_name(config) -> str:
    return choose(config.settings.backend)[0]


def _whats(app: str, row: dict, backend: str) -> list[str]:
    """What an "allow" answer opens: the application (nftables), else its ports."""
    if backend == "nftables":
        return [f"app:{app}"]
    return [p for p in row.get("ports", "").split() if p]
