"""Read and drive a running program through the accessibility tree (AT-SPI), as a screen
reader does. Run as the program's user, with its session bus:

    atspi_tool.py dump APP             # JSON: every object's path, role, name, text, states
    atspi_tool.py focus APP PATH       # give the object keyboard focus
    atspi_tool.py action APP PATH NAME # run one of its actions (click, activate, ...)

PATH is the list of child indexes from the application, as `dump` prints it ("0.1.3").
"""

from __future__ import annotations

import json
import sys

import gi

gi.require_version("Atspi", "2.0")
from gi.repository import Atspi  # noqa: E402


def application(name: str):
    desktop = Atspi.get_desktop(0)
    for index in range(desktop.get_child_count()):
        app = desktop.get_child_at_index(index)
        if app is not None and app.get_name() == name:
            return app
    raise SystemExit(f"no application {name!r} on the accessibility bus")


def describe(node, path: str) -> dict:
    entry = {"path": path, "role": node.get_role_name(), "name": node.get_name() or ""}
    entry["description"] = node.get_description() or ""
    text = node.get_text_iface()
    if text is not None:
        entry["text"] = text.get_text(0, text.get_character_count())
    states = node.get_state_set()
    entry["states"] = [
        state.value_nick
        for state in (
            Atspi.StateType.FOCUSED,
            Atspi.StateType.CHECKED,
            Atspi.StateType.SELECTED,
            Atspi.StateType.SHOWING,
            Atspi.StateType.FOCUSABLE,
            Atspi.StateType.SENSITIVE,
        )
        if states.contains(state)
    ]
    action = node.get_action_iface()
    if action is not None:
        entry["actions"] = [action.get_action_name(i) for i in range(action.get_n_actions())]
    return entry


def walk(node, path: str, out: list, depth: int = 0) -> None:
    out.append(describe(node, path))
    if depth > 40:
        return
    for index in range(node.get_child_count()):
        child = node.get_child_at_index(index)
        if child is not None:
            walk(child, f"{path}.{index}" if path else str(index), out, depth + 1)


def find(app, path: str):
    node = app
    for index in path.split(".") if path else []:
        node = node.get_child_at_index(int(index))
    return node


def main() -> int:
    command, name = sys.argv[1], sys.argv[2]
    app = application(name)
    if command == "dump":
        out: list = []
        walk(app, "", out)
        json.dump(out, sys.stdout)
    elif command == "focus":
        component = find(app, sys.argv[3]).get_component_iface()
        print(bool(component and component.grab_focus()))
    elif command == "action":
        node = find(app, sys.argv[3])
        action = node.get_action_iface()
        names = [action.get_action_name(i) for i in range(action.get_n_actions())]
        print(action.do_action(names.index(sys.argv[4])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
