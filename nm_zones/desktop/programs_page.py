"""The settings window's "Programs" group: the answers given when a program was refused
(the agent's question, desktop/listener_question.py), one row each: the program by the name
people know it by (appnames.py), the network or zone, the answer, and an Undo button
(ForgetListenerAnswer through `nm-zones serve`; polkit's org.nm-zones.configure decides).
Kept apart from settings.py, which adds the group to its page and refreshes it."""

from __future__ import annotations

from collections.abc import Callable

from gi.repository import Adw, GLib, Gtk

from ..appnames import program_name
from ..text import printable
from .common import Service, ServiceError, _


def answer_text(row: dict) -> str:
    where = row.get("label") or row.get("key", "")
    zone = row.get("zone", "")
    place = _("network {network} (zone {zone})").format(network=where, zone=zone)
    if row.get("key", "").startswith("zone:"):
        place = _("zone {zone}").format(zone=zone or row["key"][5:])
    answer = {
        "allow": _("allowed on {place}"),
        "hour": _("allowed for an hour on {place}"),
        "block": _("kept blocked on {place}"),
    }.get(row.get("answer", ""), "{place}")
    return answer.format(place=place)


def program_title(row: dict) -> str:
    name, _icon = program_name(row.get("app", ""))
    if name == row.get("app"):
        name = row.get("name") or name
    return name


class ProgramAnswers:
    """The group (`widget`); `show` writes the window's result line, `done(lines, error)`
    is the window's answer to a change."""

    def __init__(self, service: Service, show: Callable[[str], None], done):
        self.service, self.show, self.done = service, show, done
        self.widget = Adw.PreferencesGroup(
            title=_("Programs"),
            description=_(
                "What you answered when a program listened on a port its network's zone "
                "refuses. Undo to be asked again."
            ),
        )
        self.empty = Adw.ActionRow(title=_("No answers yet"))
        self.widget.add(self.empty)
        self.rows: dict[tuple[str, str], Adw.ActionRow] = {}

    def refresh(self) -> None:
        try:
            answers = self.service.read("GetListenerAnswers", "aa{ss}")
        except ServiceError as error:
            self.show(str(error))
            return
        seen = set()
        for answer in answers:
            key = (answer.get("app", ""), answer.get("key", ""))
            seen.add(key)
            if key not in self.rows:
                self.rows[key] = self._row(*key)
            row = self.rows[key]
            title = printable(program_title(answer))
            row.set_title(GLib.markup_escape_text(title))
            text = printable(answer_text(answer))
            row.set_subtitle(GLib.markup_escape_text(text))
            row.update_property([Gtk.AccessibleProperty.DESCRIPTION], [f"{title}: {text}"])
            row.undo.update_property(
                [Gtk.AccessibleProperty.LABEL],
                [_("Undo: {program} {answer}").format(program=title, answer=text)],
            )
        for key in list(self.rows):
            if key not in seen:
                self.widget.remove(self.rows.pop(key))
        self.empty.set_visible(not self.rows)

    def _row(self, app: str, key: str) -> Adw.ActionRow:
        row = Adw.ActionRow()
        undo = Gtk.Button(label=_("Undo"), valign=Gtk.Align.CENTER)
        undo.connect("clicked", lambda _button: self.undo(app, key))
        row.add_suffix(undo)
        row.undo = undo
        self.widget.add(row)
        return row

    def undo(self, app: str, key: str) -> None:
        self.show(_("Undoing the answer…"))
        self.service.change("ForgetListenerAnswer", GLib.Variant("(ss)", (app, key)), self.done)
