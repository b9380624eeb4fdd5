"""The agent's question when a program is refused (the service's ListenerRefused signal,
doors/listeners_bus.py): "Music is listening on 3689/tcp. The network Home LAN (zone home)
refuses it." [Allow on this network] [Allow for an hour] [Keep blocked]. The answer goes to
the service (AnswerListener), which remembers it per application and network. Asked once
per application and network in a session; only about this user's programs (and, when the
admin has the service ask about them, system services)."""

from __future__ import annotations

import os

from gi.repository import GLib

from ..appnames import program_name
from .common import ServiceError, _, notifications_enabled

ACTIONS = ("allow", "hour", "block")
URGENCY_NORMAL, URGENCY_LOW = 1, 0


def action_labels() -> list[str]:
    return [
        "allow", _("Allow on this network"),
        "hour", _("Allow for an hour"),
        "block", _("Keep blocked"),
    ]  # fmt: skip


def question_words(question: dict) -> tuple[str, str, str, str]:
    """(the program's name, summary, body, icon) in the user's words: the program named
    from the session's own desktop files (else as the service named it)."""
    name, icon = program_name(question.get("cgroup") or question.get("app", ""))
    if name == question.get("app") or not name:
        name, icon = question.get("name") or name, question.get("icon") or icon
    ports = ", ".join(question.get("ports", "").split())
    summary = _("{program} is listening on {ports}").format(program=name, ports=ports)
    body = _("The network {network} (zone {zone}) refuses it.").format(
        network=question.get("label", ""), zone=question.get("zone", "")
    )
    return name, summary, body, icon


class ListenerQuestions:
    """Owned by the agent (desktop/notify.py), which routes the signal and the actions."""

    def __init__(self, agent, say):
        self.agent, self.say = agent, say
        self.asked: set[tuple[str, str]] = set()

    def refused(self, question: dict) -> None:
        uid = question.get("uid", "")
        if uid and uid != str(os.getuid()):
            return  # another user's program: their agent asks
        app, key = question.get("app", ""), question.get("key", "")
        if (app, key) in self.asked:
            return
        if not notifications_enabled():
            self.say(f"not asking about {app}: notifications are off")
            return
        self.asked.add((app, key))
        name, summary, body, icon = question_words(question)
        self.say(f"asking about {app} on {key}")
        asked = {**question, "name": name, "listener": "1", "shown": name}
        self.agent.ask(asked, summary, body, icon, action_labels())

    def answer(self, question: dict, key: str) -> None:
        if key not in ACTIONS:
            return
        sent = {k: v for k, v in question.items() if k not in ("listener", "shown")}

        def done(lines, error: ServiceError | None) -> None:
            if error is not None:
                self.asked.discard((question.get("app", ""), question.get("key", "")))
                self.agent.notifier.notify(
                    _("Could not answer for {program}").format(program=question["shown"]),
                    str(error), "dialog-warning", [], URGENCY_NORMAL,
                )  # fmt: skip
                return
            self.say(f"answered {key} for {question.get('app')} on {question.get('key')}")

        self.agent.service.change("AnswerListener", GLib.Variant("(a{ss}s)", (sent, key)), done)
