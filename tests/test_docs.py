"""The man page, the bash completion, the README and the handbook (docs/) stay in step with
the command line parser; the README and the handbook's links resolve."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess

import pytest

from nm_zones.doors.cli import build_parser
from tests.harness.lab import REPO, base_env

MAN_PAGE = os.path.join(REPO, "doc", "nm-zones.8")
COMPLETION = os.path.join(REPO, "completion", "nm-zones.bash")


def parser_commands() -> dict[str, list[str]]:
    """Command -> its long options (--help aside), as `nm-zones --help` knows them."""
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    return {
        name: [
            option
            for action in sub._actions
            for option in action.option_strings
            if option.startswith("--") and option != "--help"
        ]
        for name, sub in commands.items()
    }


def top_level_options() -> list[str]:
    return [o for a in build_parser()._actions for o in a.option_strings if o.startswith("--")]


# -- the man page ---------------------------------------------------------------------------


def man_entries() -> dict[str, str]:
    """COMMANDS section: command name -> the text of its .TP entry, roff escapes undone."""
    with open(MAN_PAGE, encoding="utf-8") as stream:
        text = stream.read().replace("\\-", "-")
    section = text.split("\n.SH COMMANDS\n", 1)[1].split("\n.SH ", 1)[0]
    entries = {}
    for entry in section.split("\n.TP\n")[1:]:
        header = entry.split("\n", 1)[0].split()
        entries[header[1]] = entry
    return entries


def test_man_page_describes_every_command_and_option():
    entries = man_entries()
    for command, options in parser_commands().items():
        assert command in entries, f"doc/nm-zones.8 has no entry for `nm-zones {command}`"
        for option in options:
            assert option in entries[command], f"doc/nm-zones.8: {command} lacks {option}"
    assert set(entries) == set(parser_commands()), "doc/nm-zones.8 lists a command not parsed"
    with open(MAN_PAGE, encoding="utf-8") as stream:
        page = stream.read().replace("\\-", "-")
    for option in top_level_options():
        assert option in page, f"doc/nm-zones.8 lacks nm-zones {option}"
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "FILES", "ENVIRONMENT"):
        assert f"\n.SH {section}\n" in page
    for section in ("EXIT STATUS", "LOGS", "EXAMPLES"):
        assert f"\n.SH {section}\n" in page
    for name in ("NM_ZONES_CONFIG_DIR", "NM_ZONES_STATE_DIR", "journalctl -t nm-zones"):
        assert name in page


@pytest.mark.skipif(not shutil.which("groff"), reason="needs groff")
def test_man_page_renders_without_warnings():
    result = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", "-z", MAN_PAGE], capture_output=True, text=True
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    if shutil.which("mandoc"):
        result = subprocess.run(["mandoc", "-Tlint", MAN_PAGE], capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr


# -- bash completion ------------------------------------------------------------------------

COMPLETE = """
source "$1"; shift
if [ -n "$SHIPPED" ]; then _nm_zones_shipped_dirs=$SHIPPED; fi
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
_nm_zones
printf '%s\\n' "${COMPREPLY[@]}"
"""


@pytest.fixture
def shell(tmp_path):
    """Completes a command line in bash; `nm-zones` and `nmcli` on its PATH are this checkout's
    command and a stand-in that knows two connections."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nm-zones").write_text(
        f'#!/bin/sh\nexec {shutil.which("python3")} -m nm_zones "$@"\n'
    )
    (bin_dir / "nmcli").write_text("#!/bin/sh\nprintf 'Cafe Wi-Fi\\nHome\\n'\n")
    for program in bin_dir.iterdir():
        program.chmod(0o755)
    config = tmp_path / "etc-nm-zones"
    (config / "zones.d").mkdir(parents=True)
    (config / "zones.d" / "lab.yaml").write_text("description: the lab bench\n")
    env = base_env(NM_ZONES_CONFIG_DIR=str(config), SHIPPED="")
    env["PATH"] = f"{bin_dir}:{env['PATH']}"

    def complete(*words: str, shipped: str = "") -> list[str]:
        result = subprocess.run(
            ["bash", "--norc", "--noprofile", "-c", COMPLETE, "bash", COMPLETION, *words],
            capture_output=True,
            text=True,
            env={**env, "SHIPPED": shipped},
            timeout=60,
        )
        assert result.returncode == 0 and result.stderr == "", result.stderr
        return [line for line in result.stdout.splitlines() if line]

    complete.env = env
    return complete


def test_completion_is_registered_for_nm_zones():
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", f"source {COMPLETION}; complete -p nm-zones"],
        capture_output=True,
        text=True,
    )
    assert result.stdout.strip() == "complete -F _nm_zones nm-zones"


def test_completion_offers_every_command_and_its_options(shell):
    commands = parser_commands()
    assert sorted(shell("nm-zones", "")) == sorted(commands)
    assert shell("nm-zones", "de") == ["default-zone"]
    for option in top_level_options():
        assert option in shell("nm-zones", "-"), option
    for command, options in commands.items():
        offered = shell("nm-zones", command, "--")
        assert set(options) | {"--help"} == set(offered), command


def zones_known(env) -> list[str]:
    result = subprocess.run(
        ["nm-zones", "zones", "--json"], capture_output=True, text=True, env=env, check=True
    )
    return sorted(zone["name"] for zone in json.loads(result.stdout))


def test_completion_offers_zones_interfaces_and_connections(shell):
    zones = zones_known(shell.env)
    assert "lab" in zones and "home" in zones
    # without a distribution's shipped folder the command lists them; with one, the folders
    assert sorted(shell("nm-zones", "apply", "lo", "")) == zones
    shipped = os.path.join(REPO, "nm_zones")
    assert sorted(shell("nm-zones", "apply", "lo", "", shipped=shipped)) == zones
    assert shell("nm-zones", "apply", "lo", "ho", shipped=shipped) == ["home"]
    assert sorted(shell("nm-zones", "show", "")) == zones
    assert sorted(shell("nm-zones", "plan", "eth0", "")) == zones
    assert sorted(shell("nm-zones", "default-zone", "--wired", "")) == zones
    assert sorted(shell("nm-zones", "apply", "")) == sorted(os.listdir("/sys/class/net"))
    assert "lo" in shell("nm-zones", "remove", "l")
    assert shell("nm-zones", "apply", "lo", "home", "") == []  # nothing after the zone
    assert shell("nm-zones", "assign", "") == ["Cafe\\ Wi-Fi", "Home"]
    assert shell("nm-zones", "assign", "Home", "b") == ["block"]
    assert shell("nm-zones", "networks", "") == ["forget", "rename", "zone"]
    assert shell("nm-zones", "networks", "zone", "3f2a9c1b07", "ho", shipped=shipped) == ["home"]
    assert shell("nm-zones", "install", "--root", "/us") == ["/usr"]


# -- the README and the handbook under docs/ -----------------------------------------------

README = os.path.join(REPO, "README.md")
DOCS = os.path.join(REPO, "docs")
FRONT_PAGE_LINES = 250
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def pages() -> list[str]:
    """The README and every page of the handbook."""
    handbook = sorted(name for name in os.listdir(DOCS) if name.endswith(".md"))
    return [README, *(os.path.join(DOCS, name) for name in handbook)]


def read(path: str) -> str:
    with open(path, encoding="utf-8") as stream:
        return stream.read()


def prose_and_code(text: str) -> tuple[list[str], list[str]]:
    """The page's lines outside fenced blocks, and its shell command lines (```sh blocks)."""
    prose, commands, fence = [], [], None
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = None if fence is not None else line.strip()[3:]
        elif fence is None:
            prose.append(line)
        elif fence == "sh":
            commands.append(line)
    return prose, commands


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, links and code marks undone, punctuation
    dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: str) -> set[str]:
    """The anchors of a page's headings; a repeated heading gets -1, -2, ... as on GitHub."""
    found, counts = set(), {}
    for line in prose_and_code(read(path))[0]:
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            name = anchor(match[1].strip())
            found.add(name if name not in counts else f"{name}-{counts[name]}")
            counts[name] = counts.get(name, 0) + 1
    return found


def links(path: str) -> list[str]:
    prose = "\n".join(prose_and_code(read(path))[0])
    return LINK.findall(CODE_SPAN.sub("", prose))


def resolve(page: str, target: str) -> tuple[str, str]:
    """(file, anchor) a relative link points at; the file is the page itself for `#anchor`."""
    name, _, fragment = target.partition("#")
    path = os.path.normpath(os.path.join(os.path.dirname(page), name)) if name else page
    return path, fragment


def test_every_link_in_the_readme_and_the_handbook_resolves():
    broken = []
    for page in pages():
        for target in links(page):
            if re.match(r"[a-z]+:", target):
                continue  # a web address: not a file of the repository
            path, fragment = resolve(page, target)
            where = f"{os.path.relpath(page, REPO)}: ({target})"
            if os.path.isabs(target) or not path.startswith(REPO + os.sep):
                broken.append(f"{where} leaves the repository")
            elif not os.path.exists(path):
                broken.append(f"{where}: no such file")
            elif fragment and (not path.endswith(".md") or fragment not in anchors(path)):
                broken.append(f"{where}: no heading #{fragment}")
    assert not broken, "\n".join(broken)


def test_every_handbook_page_is_reachable_from_the_readme():
    reached, todo = set(), [README]
    while todo:
        page = todo.pop()
        if page in reached:
            continue
        reached.add(page)
        for target in links(page):
            path = resolve(page, target)[0]
            if path.endswith(".md") and os.path.exists(path):
                todo.append(path)
    assert set(pages()) - reached == set()


def test_the_readme_is_a_front_page():
    lines = read(README).count("\n")
    assert lines < FRONT_PAGE_LINES, f"README.md has {lines} lines; the handbook (docs/) the rest"


# -- every command and option the README and the handbook name exists ----------------------

FIREWALL_CMD_TESTS = os.path.join(REPO, "tests", "test_firewall_cmd.py")
DESKTOP_PROGRAMS = {
    "nm-zones-notify": "nm_zones/desktop/notify.py",
    "nm-zones-tray": "nm_zones/desktop/tray.py",
    "nm-zones-settings": "nm_zones/desktop/settings.py",
}
OPTION = re.compile(r"--[a-z][a-z0-9-]*")
Tree = dict[tuple[str, ...], tuple[set[str], set[str]]]


def parser_tree() -> Tree:
    """(command, subcommand, ...) -> (its subcommands, its long options), from the parser
    `nm-zones --help` prints; () is nm-zones itself."""
    tree: Tree = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        options = {o for a in parser._actions for o in a.option_strings if o.startswith("--")}
        choices = {}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                choices = action.choices
        tree[path] = (set(choices), options)
        for name, sub in choices.items():
            walk(sub, (*path, name))

    walk(build_parser(), ())
    return tree


def command_texts(path: str) -> list[str]:
    """What a page writes as code: its inline code spans (one paragraph may break a span
    across lines) and the lines of its ```sh blocks, comments left out."""
    prose, commands = prose_and_code(read(path))
    spans = [" ".join(span.split()) for _, span in CODE_SPAN.findall("\n".join(prose))]
    return spans + [line.split(" #", 1)[0] for line in commands]


def invocations(text: str) -> list[list[str]]:
    """The words of each command in a line of code: split at &&, || , | and ;, without sudo
    and VAR=value in front."""
    commands = []
    for part in re.split(r"&&|\|\||[|;]", text):
        words = part.replace("[", " ").replace("]", " ").split()
        while words and (words[0] == "sudo" or re.match(r"[A-Z_]+=", words[0])):
            words.pop(0)
        if words:
            commands.append(words)
    return commands


def nm_zones_call(words: list[str], tree: Tree) -> tuple[tuple[str, ...], list[str]] | None:
    """(the command path, the long options) when the words run nm-zones (`nm-zones networks
    zone ...`, or `remove IFACE` in a list of its commands), else None."""
    if words[0] == "nm-zones" or words[0].endswith("/bin/nm-zones"):
        words = words[1:]
    elif words[0] not in tree[()][0]:
        return None
    path: tuple[str, ...] = ()
    for word in words:
        if path not in tree or not tree[path][0] or not re.fullmatch(r"[a-z][a-z-]*", word):
            break
        path = (*path, word)
    return path, [o.split("=", 1)[0] for o in words if OPTION.fullmatch(o.split("=", 1)[0])]


def other_programs_wrong_options(words: list[str], bare_allowed: set[str]) -> list[str]:
    """The options a command that is not nm-zones names and its program lacks: the desktop
    programs' and bench/ scripts' are looked up in their sources, bare ones must be nm-zones'
    or firewall-cmd's (as tests/test_firewall_cmd.py runs it); others' are not judged."""
    program = words[0]
    options = [o.split("=", 1)[0] for o in words if OPTION.fullmatch(o.split("=", 1)[0])]
    if program.startswith("--"):
        return [o for o in options if o not in bare_allowed]
    if program in DESKTOP_PROGRAMS or program.endswith((".py", "python3")):
        scripts = [word for word in words if word.endswith(".py")]
        source = DESKTOP_PROGRAMS.get(program) or (scripts[0] if scripts else None)
        if source is None or not options:
            return []  # python3 -m venv, -m pytest, a file's name: nothing to judge
        if not os.path.isfile(os.path.join(REPO, source)):
            return [f"{source}: no such file"]
        text = read(os.path.join(REPO, source))
        return [f"{source} {o}" for o in options if f'"{o}"' not in text]
    return []


def named_commands_and_options() -> tuple[list[str], dict[tuple[str, ...], set[str]]]:
    """Every command or option the README and the handbook name that does not exist, and the
    nm-zones commands they show with the options named with each (() for bare options)."""
    tree = parser_tree()
    bare_allowed = set().union(*(options for _, options in tree.values()))
    bare_allowed |= set(OPTION.findall(read(FIREWALL_CMD_TESTS)))
    wrong, named = [], {}
    for page in pages():
        for text in command_texts(page):
            for words in invocations(text):
                where = f"{os.path.relpath(page, REPO)}: `{text}`"
                call = nm_zones_call(words, tree)
                if call is None:
                    found = other_programs_wrong_options(words, bare_allowed)
                    wrong += [f"{where}: {option}" for option in found]
                    if words[0].startswith("--"):
                        named.setdefault((), set()).update(OPTION.findall(text))
                    continue
                path, options = call
                if path not in tree:
                    wrong.append(f"{where}: no command nm-zones {' '.join(path)}")
                    continue
                known = set().union(*(tree[path[:i]][1] for i in range(len(path) + 1)))
                wrong += [f"{where}: nm-zones {' '.join(path)} has no {o}" for o in options
                          if o not in known]
                named.setdefault(path, set()).update(options)
    return wrong, named


def test_every_command_and_option_the_docs_name_exists():
    wrong = named_commands_and_options()[0]
    assert not wrong, "no such command or option:\n" + "\n".join(wrong)


def test_the_docs_name_every_command_and_option():
    """The reverse: nothing `nm-zones --help` offers is left out of the README and handbook."""
    named = named_commands_and_options()[1]
    for path, (_, options) in parser_tree().items():
        shown = [p for p in named if p[: len(path)] == path]
        assert shown, f"the docs never show `nm-zones {' '.join(path)}`"
        with_it = set().union(named.get((), set()), *(named[p] for p in shown))
        for option in options - {"--help"}:
            assert option in with_it, f"the docs never name `nm-zones {' '.join(path)} {option}`"


def test_every_picture_in_docs_is_shown():
    shown = {resolve(page, target)[0] for page in pages() for target in links(page)}
    pictures = {os.path.join(DOCS, name) for name in os.listdir(DOCS) if name.endswith(".png")}
    assert pictures <= shown, f"pictures no page shows: {sorted(pictures - shown)}"
