"""The command line parsed without the whole argparse tree: a plain command line (cli.py's
PLAIN_COMMANDS) parses without argparse, any other with a parser that holds only the command
given, and both give what the whole tree gives; anything else still goes to the whole tree."""

from __future__ import annotations

import subprocess

import pytest

from nm_zones.doors.cli import (
    ALLOW_OPTIONS,
    PLAIN_COMMANDS,
    SCOPE_OPTIONS,
    _dash_port,
    build_parser,
    parse,
    plain_args,
)
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
    ["allow", "8080/tcp", "--zone", "work", "--for", "30s"],
    ["allow", "--for", "2h", "8000/tcp"],
    ["allow", "--zone", "work", "https", "--permanent"],
    ["allow", "--app", "minidlna.service", "--interface", "eth0"],
    ["allow", "8200/tcp", "--network", "3f2a9c1b07"],
    ["allow", "", "--interface", "x y"],
    ["allow"],
    ["revoke", "8000/tcp"],
    ["revoke", "--permanent", "https", "--zone", "work"],
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
    ["allow", "-h"],
    ["allow", "8080/tcp", "--for=2h"],
    ["allow", "8080/tcp", "--zo", "work"],
    ["allow", "8080/tcp", "--zone", "work", "--interface", "eth0"],
    ["allow", "8080/tcp", "--zone", "work", "--zone", "home"],
    ["allow", "8080/tcp", "--permanent", "--permanent"],
    ["allow", "8080/tcp", "9090/tcp"],
    ["allow", "", "9090/tcp"],
    ["allow", "8080/tcp", "--for"],
    ["allow", "8080/tcp", "--for", "-2h"],
    ["allow", "--", "8080/tcp"],
    ["revoke", "8080/tcp", "--for", "2h"],
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


def test_allow_and_revoke_take_the_options_their_plain_parsing_knows():
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    for verb in ("allow", "revoke"):
        sub = commands[verb]
        taken = {o: a.dest for a in sub._actions for o in a.option_strings}
        expected = {o: d for o, d in ALLOW_OPTIONS.items() if verb == "allow" or o != "--for"}
        assert taken == {**expected, "--permanent": "permanent", "-h": "help", "--help": "help"}
        positionals = [a.dest for a in sub._actions if not a.option_strings]
        assert positionals == ["what"] and sub.get_default("func") is parse(["allow"]).func
        group = {o for g in sub._mutually_exclusive_groups for a in g._group_actions
                 for o in a.option_strings}
        assert group == SCOPE_OPTIONS


@pytest.mark.parametrize("argv", PLAIN_LINES, ids=" ".join)
def test_a_plain_command_line_parses_as_the_whole_tree_parses_it(argv):
    args = plain_args(argv)
    assert args is not None
    assert vars(args) == {k: v for k, v in whole_tree(argv).items() if k != "version"}


@pytest.mark.parametrize("argv", NOT_PLAIN, ids=lambda argv: " ".join(argv) or "nothing")
def test_anything_else_is_left_to_argparse(argv):
    assert plain_args(argv) is None


@pytest.mark.parametrize(
    "argv, says",
    [
        (["allow", "-1/tcp", "--zone", "public"], "'-1/tcp' is not a port: ports are 1-65535"),
        (["revoke", "--zone", "public", "-1"], "'-1' is not a port: ports are 1-65535"),
        (["allow", "8000/tcp", "--zone", "-5"], ""),  # a zone's name: argparse's to judge
        (["allow", "--for", "-1/tcp", "8000/tcp"], ""),
        (["allow", "-h", "-1/tcp"], ""),  # help, as argparse prints it
        (["revoke", "-1/tcp", "--help"], ""),
        (["allow", "--", "-1/tcp"], ""),
    ],
)
def test_a_what_of_a_dash_and_a_digit_is_no_port_in_one_line(argv, says):
    """Said before argparse, which would take it for an option and print its usage; an
    option's value and a line asking for help are left to argparse."""
    said = _dash_port(argv)
    assert said.startswith(says) if says else said == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--json"],
        ["status", "wlan0"],
        ["allow", "8000/tcp", "--for=2h"],
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
        " parse(['allow', '8080/tcp', '--zone', 'work', '--for', '30s']);"
        " print('argparse' in sys.modules, 'json' in sys.modules)"
    )
    result = subprocess.run(
        [PYTHON, "-S", "-c", script], capture_output=True, text=True, env=base_env(), cwd=REPO
    )
    assert result.stdout.split() == ["False", "False"], result.stdout + result.stderr
