"""The real firewall-cmd (Debian's firewalld 1.3.3 client) against `nm-zones serve` and
against firewalld itself, in the same NetworkManager sandbox one after the other: the same
command must print the same and exit the same.

SAME lists the commands nm-zones answers as firewalld does today, NOT_YET those it does not
answer so yet; the second list shrinks into the first as the service gains firewalld's API.
"""

from __future__ import annotations

import pytest

from tests.harness.firewalld import FirewallD, firewalld_root, name_owner_command
from tests.test_service import (
    nm,  # noqa: F401 - the sandbox fixture
    reload_bus_config,
)

# Run in this order against each daemon, once ethz0's connection is up in zone home. SAME: the
# answers must match firewalld's. NOT_YET: they still differ; the test fails when one of them
# starts to match, so that it moves to SAME and stays there.
SAME = (
    ("--get-default-zone",),
    ("--get-zone-of-interface=ethz0",),
    ("--get-zone-of-interface=nosuch0",),
    ("--set-default-zone=work",),
    ("--get-default-zone",),
    ("--set-default-zone=public",),
    ("--reload",),
    ("--state",),  # the Properties interface (doors/firewalld_props.py)
    ("--query-panic",),
    ("--panic-on",),
    ("--query-panic",),
    ("--panic-on",),  # a warning, ALREADY_ENABLED
    ("--panic-off",),
    ("--panic-off",),  # a warning, NOT_ENABLED
    ("--query-panic",),
)
NOT_YET = (
    ("--get-active-zones",),  # nm-zones also lists the default zone with no interface
    ("--get-zones",),  # nm-zones also lists nm-shared
    ("--get-services",),  # the catalogs differ
    ("--list-all",),
    ("--zone=home", "--list-services"),
    ("--zone=home", "--query-service=ssh"),
    ("--zone=home", "--add-port=8080/tcp"),
)
COMMANDS = SAME + NOT_YET


@pytest.fixture(scope="module")
def root():
    found = firewalld_root()
    if found is None:
        pytest.skip("firewalld's packages cannot be downloaded here")
    return found


def answers(daemon: FirewallD) -> list[tuple[int, str, str]]:
    results = []
    for command in COMMANDS:
        result = daemon.cmd(*command)
        results.append((result.returncode, result.stdout.strip(), result.stderr.strip()))
    return results


def test_firewall_cmd_answers_as_against_firewalld(nm, root):  # noqa: F811
    link = nm.add_veth()
    nm.add_connection(link, "lan", "connection.zone", "home")

    firewalld = FirewallD(nm, root)
    with firewalld:
        nm.nmcli("connection", "up", "lan")
        assert "firewalld" in name_owner_command(nm)
        expected = answers(firewalld)
        nm.nmcli("connection", "down", "lan")
    reload_bus_config(nm)

    serve = nm.serve()
    nm.nmcli("connection", "up", "lan")
    nm.wait_zone(link.name, "home")
    assert "nm_zones" in name_owner_command(nm)
    got = answers(firewalld)
    serve.terminate()
    serve.wait()

    by_command = list(zip(COMMANDS, expected, got, strict=True))
    for command, want, have in by_command[: len(SAME)]:
        assert have == want, f"firewall-cmd {' '.join(command)}: serve {have}, firewalld {want}"
    for command, want, have in by_command[len(SAME) :]:
        assert have != want, f"firewall-cmd {' '.join(command)} now answers as firewalld: SAME"


# Sources (doors/firewalld_sources.py), run in this order against each daemon.
SOURCES_SAME = (
    ("--zone=trusted", "--add-source=10.78.1.3"),
    ("--get-zone-of-source=10.78.1.3",),
    ("--zone=trusted", "--add-source=10.78.1.3"),
    ("--zone=home", "--add-source=10.78.1.3"),
    ("--zone=trusted", "--query-source=10.78.1.3"),
    ("--zone=home", "--query-source=10.78.1.3"),
    ("--zone=trusted", "--add-source=fd78:1::3/128"),
    ("--zone=trusted", "--list-sources"),
    ("--get-active-zones",),
    ("--zone=drop", "--change-source=fd78:1::3/128"),
    ("--get-zone-of-source=fd78:1::3/128",),
    ("--zone=home", "--remove-source=10.78.1.3"),
    ("--zone=trusted", "--remove-source=10.78.1.3"),
    ("--remove-source=fd78:1::3/128",),
    ("--get-zone-of-source=10.78.1.3",),
    ("--zone=trusted", "--add-source=no-address"),
    ("--zone=nosuch", "--add-source=10.78.1.3"),
    ("--remove-source=10.9.9.9",),
)


def test_firewall_cmd_sources_answer_as_against_firewalld(nm, root):  # noqa: F811
    def run(daemon) -> list[tuple[int, str, str]]:
        results = []
        for command in SOURCES_SAME:
            result = daemon.cmd(*command)
            results.append((result.returncode, result.stdout.strip(), result.stderr.strip()))
        return results

    firewalld = FirewallD(nm, root)
    with firewalld:
        assert "firewalld" in name_owner_command(nm)
        expected = run(firewalld)
    reload_bus_config(nm)

    serve = nm.serve()
    assert "nm_zones" in name_owner_command(nm)
    got = run(firewalld)
    serve.terminate()
    serve.wait()
    for command, want, have in zip(SOURCES_SAME, expected, got, strict=True):
        assert have == want, f"firewall-cmd {' '.join(command)}: serve {have}, firewalld {want}"
