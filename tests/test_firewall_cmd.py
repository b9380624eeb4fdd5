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
)
TRY = (
    ("--get-active-zones",),
    ("--get-zones",),
    ("--get-services",),
    ("--list-all",),
    ("--list-all-zones",),
    ("--zone=home", "--list-all"),
    ("--zone=home", "--list-services"),
    ("--zone=home", "--list-ports"),
    ("--zone=home", "--query-service=ssh"),
    ("--zone=home", "--add-port=8080/tcp"),
    ("--zone=home", "--add-port=8080/tcp"),
    ("--zone=home", "--query-port=8080/tcp"),
    ("--zone=home", "--list-ports"),
    ("--zone=home", "--remove-port=8080/tcp"),
    ("--zone=home", "--remove-port=8080/tcp"),
    ("--zone=home", "--query-port=8080/tcp"),
    ("--zone=home", "--add-port=8080"),
    ("--zone=home", "--add-port=99999/tcp"),
    ("--zone=nosuch", "--add-port=8080/tcp"),
    ("--zone=home", "--add-service=http"),
    ("--zone=home", "--add-service=http"),
    ("--zone=home", "--query-service=http"),
    ("--zone=home", "--list-services"),
    ("--zone=home", "--remove-service=http"),
    ("--zone=home", "--remove-service=http"),
    ("--zone=home", "--query-service=http"),
    ("--zone=home", "--add-service=nosuchservice"),
    ("--zone=home", "--add-port=9090/tcp", "--timeout=30s"),
    ("--zone=home", "--query-port=9090/tcp"),
    ("--zone=home", "--query-masquerade"),
    ("--zone=home", "--add-masquerade"),
    ("--zone=home", "--remove-masquerade"),
    ("--zone=home", "--add-forward-port=port=2222:proto=tcp:toport=22"),
    ("--zone=home", "--remove-forward-port=port=2222:proto=tcp:toport=22"),
    ("--zone=home", "--list-forward-ports"),
    ("--zone=work", "--change-interface=ethz0"),
    ("--get-zone-of-interface=ethz0",),
    ("--get-active-zones",),
    ("--set-default-zone=work",),
    ("--set-default-zone=public",),
    ("--get-zone-of-interface=ethz0",),
    ("--zone=home", "--change-interface=ethz0"),
    ("--zone=work", "--add-interface=ethz0"),
    ("--zone=home", "--add-interface=ethz0"),
    ("--zone=work", "--remove-interface=ethz0"),
    ("--zone=work", "--add-interface=nosuch1"),
    ("--get-zone-of-interface=nosuch1",),
    ("--zone=work", "--remove-interface=nosuch1"),
    ("--permanent", "--zone=home", "--add-port=8081/tcp"),
    ("--permanent", "--zone=home", "--add-port=8081/tcp"),
    ("--permanent", "--zone=home", "--query-port=8081/tcp"),
    ("--permanent", "--zone=home", "--list-ports"),
    ("--permanent", "--zone=home", "--remove-port=8081/tcp"),
    ("--permanent", "--zone=home", "--remove-port=8081/tcp"),
    ("--permanent", "--zone=home", "--add-service=http"),
    ("--permanent", "--zone=home", "--query-service=http"),
    ("--permanent", "--zone=home", "--remove-service=http"),
    ("--permanent", "--zone=home", "--add-masquerade"),
    ("--permanent", "--zone=home", "--query-masquerade"),
    ("--permanent", "--zone=home", "--remove-masquerade"),
    ("--permanent", "--zone=home", "--add-forward-port=port=2222:proto=tcp:toport=22"),
    ("--permanent", "--zone=home", "--list-forward-ports"),
    ("--permanent", "--zone=home", "--remove-forward-port=port=2222:proto=tcp:toport=22"),
    ("--zone=home", "--add-port=7070/tcp"),
    ("--runtime-to-permanent",),
    ("--reload",),
    ("--zone=home", "--list-ports"),
    ("--permanent", "--zone=home", "--remove-port=7070/tcp"),
    ("--zone=home", "--add-port=7071/tcp"),
    ("--complete-reload",),
    ("--zone=home", "--list-ports"),
    ("--get-zone-of-interface=ethz0",),
    ("--zone=home", "--add-rich-rule=rule family=ipv4 source address=192.0.2.1 accept"),
    ("--query-panic",),
)
NOT_YET = ()
COMMANDS = SAME + TRY + NOT_YET


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
    import json
    with open("/tmp/fwcmd_answers.json", "w") as stream:
        json.dump([[c, w, h] for c, w, h in by_command], stream, indent=1)
    for command, want, have in by_command[: len(SAME)]:
        assert have == want, f"firewall-cmd {' '.join(command)}: serve {have}, firewalld {want}"
    for command, want, have in by_command[len(SAME) :]:
        assert have != want, f"firewall-cmd {' '.join(command)} now answers as firewalld: SAME"
