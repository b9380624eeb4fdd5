"""The command line parsed without the whole argparse tree: a plain command line (cli.py's
PLAIN_COMMANDS) parses without argparse, any other with a parser that holds only the command
given, and both give what the whole tree gives; anything else still goes to the whole tree."""

from __future__ import annotations

import subprocess

import pytest

from nm_zones.doors.cli import PLAIN_COMMANDS, build_parser, parse, plain_args
from tests.harness.lab import PYTHON, REPO, base_env

PLAIN_LINES = [
    ["apply", "eth0", "home"],
    ["apply", "wlan0", ""],
    ["apply", "x y", "home=1"],
    ["remove", "eth0"],
    ["reload"],
    ["gc"],
    ["enable"],
    ["disable"],
]
NOT_PLAIN = [
    ["apply", "-h"],
    ["apply", "eth0"],
    ["apply", "eth0", "home", "more"],
    ["apply", "--", "eth0", "home"],
    ["apply", "-x", "home"],
    ["remove", "--help"],
    ["reload", "now"],
    ["status"],
    ["--version"],
    [],
]


def whole_tree(argv: list[str]) -> dict:
    return vars(build_parser().parse_args(argv))


def test_every_plain_command_is_one_the_parser_takes_positionals_only():
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    for name, (func, names) in PLAIN_COMMANDS.items():
        sub = commands[name]
        positionals = [a.dest for a in sub._actions if not a.option_strings]
        options = [o for a in sub._actions for o in a.option_strings]
        assert positionals == list(names) and options == ["-h", "--help"], name
        assert sub.get_default("func") is func, name


@pytest.mark.parametrize("argv", PLAIN_LINES, ids=" ".join)
def test_a_plain_command_line_parses_as_the_whole_tree_parses_it(argv):
    args = plain_args(argv)
    assert args is not None
    assert vars(args) == {k: v for k, v in whole_tree(argv).items() if k != "version"}


@pytest.mark.parametrize("argv", NOT_PLAIN, ids=lambda argv: " ".join(argv) or "nothing")
def test_anything_else_is_left_to_argparse(argv):
    assert plain_args(argv) is None


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--json"],
        ["status", "wlan0"],
        ["allow", "8000/tcp", "--for", "2h"],
        ["networks", "zone", "3f2a", "home"],
        ["default-zone", "--wired", "public"],
        ["panic", "on"],
        ["install", "--root", "/tmp/x"],
    ],
    ids=" ".join,
)
def test_the_parser_of_one_command_parses_as_the_whole_tree(argv):
    assert vars(parse(argv)) == whole_tree(argv)


def test_each_command_built_alone_says_what_the_whole_tree_says():
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    for name, sub in commands.items():
        alone = next(a for a in build_parser(name)._actions if a.dest == "command").choices
        assert list(alone) == [name]
        assert alone[name].format_help() == sub.format_help(), name
        assert alone[name].format_usage() == sub.format_usage(), name


def test_a_plain_command_imports_no_argparse():
    script = (
        "import sys; from nm_zones.doors.cli import parse; parse(['apply', 'eth0', 'home']);"
        " print('argparse' in sys.modules, 'json' in sys.modules)"
    )
    result = subprocess.run(
        [PYTHON, "-S", "-c", script], capture_output=True, text=True, env=base_env(), cwd=REPO
    )
    assert result.stdout.split() == ["False", "False"], result.stdout + result.stderr
