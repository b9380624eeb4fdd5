"""Ended means ended: a flow a tightening switch ended never carries a packet again.

A peer that holds a download at zero receive window makes this host send the next packet
(window probes); a peer that keeps uploading makes it send window updates. Deleting the
conntrack entry was not enough: conntrack picked the flow up again as one this host opened,
and the peer's packets passed as its replies. Real transfers (tests/harness/bulk.py) across
a veth pair, IPv4 and IPv6 at once, both backends. The negative checks watch a bounded
window longer than the host's probe and retransmission backoff at that point.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest

from tests.harness.lab import HARNESS, PYTHON, wait_for

BULK = os.path.join(HARNESS, "bulk.py")
SIZE = 32 << 20  # far more than any buffer: finishing needs the peer's acknowledgements
WATCH_SECONDS = 15.0  # longer than the probe backoff the issue measured (12 s)
BUFFERED = 1 << 20  # what socket buffers may still hand over after the switch


class Transfer:
    """One bulk.py process; remembers the last count it printed and how it ended."""

    def __init__(self, lab, namespace: str, *args: str):
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", namespace, PYTHON, BULK, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=lab.env(),
        )
        lab.processes.append(self.process)
        assert self.process.stdout.readline().strip() in ("ready", "open")
        self.total, self.end = 0, ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            word, _, value = line.strip().partition(" ")
            if word in ("sent", "received", "done"):
                self.total = max(self.total, int(value))
            if word in ("done", "error"):
                self.end = line.strip()

    def go(self) -> None:
        """A fetching client starts reading (its window opens)."""
        self.process.stdin.write("go\n")
        self.process.stdin.flush()


def serve(lab, address: str, port: int, mode: str, namespace: str = "") -> Transfer:
    return Transfer(
        lab, namespace or lab.zoned, "serve", "--address", address, "--port", str(port),
        "--mode", mode, "--size", str(SIZE),
    )  # fmt: skip


def connect(lab, address: str, port: int, mode: str, namespace: str = "") -> Transfer:
    return Transfer(
        lab, namespace or lab.peer, "client", "--address", address, "--port", str(port),
        "--mode", mode, "--size", str(SIZE),
    )  # fmt: skip


def downloads(lab, addresses, port: int, servers_in: str = "") -> list[tuple]:
    """(server, client) per address: the server sends, the client holds the flow at zero
    window. Returns once every server has filled what the peer's window takes."""
    pairs = []
    for address in addresses:
        server = serve(lab, address, port, "send", servers_in)
        pairs.append((server, connect(lab, address, port, "fetch")))
    wait_for(lambda: all(server.total for server, _ in pairs), what="the servers to send")
    return pairs


def progress_after(transfers: list[Transfer], since: list[int]) -> list[str]:
    """Watch for WATCH_SECONDS; what each transfer did beyond `since` (its count at the
    switch) plus what buffers may still hold: "" when nothing, else what happened."""
    deadline = time.monotonic() + WATCH_SECONDS
    while time.monotonic() < deadline:
        found = [
            f"{t.total} (was {before}) {t.end}"
            if t.total > before + BUFFERED or t.end.startswith("done")
            else ""
            for t, before in zip(transfers, since, strict=True)
        ]
        if any(found):
            return found
        time.sleep(0.1)
    return [""] * len(transfers)


def end_and_watch(lab, interface: str, pairs: list[tuple]) -> list[int]:
    """trusted -> block on `interface` with the downloads `pairs` at zero window; then the
    peers read, and no server may get further than it was at the switch. Returns how far
    each server was."""
    out = lab.nm_zones("apply", interface, "block").stdout
    assert "ended 2 open flow(s)" in out
    lab.nm_zones("status")  # exit 0: the kernel holds the rules as planned, label rule too
    servers = [server for server, _ in pairs]
    at_switch = [server.total for server in servers]
    for _, client in pairs:
        client.go()
    assert progress_after(servers, at_switch) == ["", ""]
    assert not any(client.end.startswith("done") for _, client in pairs)
    return at_switch


@pytest.mark.both_backends
def test_a_peer_holding_a_download_at_zero_window_does_not_revive_it(lab):
    """trusted -> block while the peer reads nothing: this host's window probes used to
    make conntrack pick the flow up again as its own, and the peer's acknowledgements then
    passed as replies; the 32 MiB download finished seconds later."""
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "trusted")
    pairs = downloads(lab, (link.ipv4, link.ipv6), 8080)
    at_switch = end_and_watch(lab, link.name, pairs)
    assert all(client.total <= sent for (_, client), sent in zip(pairs, at_switch, strict=True))


@pytest.mark.both_backends
def test_a_peer_that_keeps_uploading_does_not_revive_the_flow(lab):
    """The peer keeps sending and the server keeps reading: its window updates used to be
    the packet that conntrack picked up as this host's own."""
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "trusted")
    servers = [serve(lab, address, 8080, "receive") for address in (link.ipv4, link.ipv6)]
    clients = [connect(lab, address, 8080, "upload") for address in (link.ipv4, link.ipv6)]
    wait_for(lambda: all(server.total for server in servers), what="the uploads to start")
    out = lab.nm_zones("apply", link.name, "block").stdout
    assert "ended 2 open flow(s)" in out
    at_switch = [server.total for server in servers]
    assert progress_after(servers, at_switch) == ["", ""]
    assert not any(client.end.startswith("done") for client in clients)


@pytest.mark.both_backends
def test_the_flow_the_new_zone_allows_lives_and_the_other_stays_ended(lab):
    """trusted -> public with two zero-window downloads per family: to 22/tcp (public
    allows ssh) it finishes once the peer reads; to 8080 it never does."""
    link = lab.add_link()
    lab.nm_zones("apply", link.name, "trusted")
    addresses = (link.ipv4, link.ipv6)
    allowed = downloads(lab, addresses, 22)
    refused = downloads(lab, addresses, 8080)
    out = lab.nm_zones("apply", link.name, "public").stdout
    assert "ended 2 open flow(s)" in out
    at_switch = [server.total for server, _ in refused]
    for _, client in allowed + refused:
        client.go()
    wait_for(
        lambda: all(client.end == f"done {SIZE}" for _, client in allowed),
        timeout=60,
        what="the ssh downloads to finish",
    )
    assert progress_after([server for server, _ in refused], at_switch) == ["", ""]


@pytest.mark.both_backends
def test_a_forwarded_flow_stays_ended_whichever_side_sends_next(lab):
    """A peer downloads from a host behind the zoned one (its link in trusted, so that
    host may open flows to the peer): trusted -> block on the peer's link. The inner host's
    probes are forwarded as a flow it opens, unless the ended flow's label drops them too."""
    link = lab.add_link()
    inner = lab.add_inner()
    lab.route_via(lab.peer, link)
    lab.enable_forwarding()
    lab.nm_zones("apply", link.name, "trusted")
    lab.nm_zones("apply", inner.name, "trusted")
    pairs = downloads(lab, (inner.peer_ipv4, inner.peer_ipv6), 8080, servers_in=lab.inner)
    end_and_watch(lab, link.name, pairs)


@pytest.mark.both_backends
def test_a_flow_older_than_the_label_rules_is_never_claimed_ended(lab):
    """A conntrack entry made before any rule used labels has no room for one. A TCP
    connection to this host is still ended (entry deleted, local socket aborted); a UDP
    flow can only be deleted, which this host's next datagram would undo: the switch says
    so and exits 1, and counts only the flows it ended."""
    from tests.test_flows import Server, send_all, sessions

    link = lab.add_link()
    for tool in ("iptables-legacy", "ip6tables-legacy"):  # conntrack on, no label rule yet
        lab.shell(f"{tool} -A OUTPUT -m conntrack --ctstate NEW")
    Server(lab, lab.zoned, tcp="8080", udp="631")
    tcp = sessions(lab, lab.peer, "tcp", 8080, link)
    udp = sessions(lab, lab.peer, "udp", 631, link)
    assert send_all(tcp + udp, "before") == ["ok"] * 4
    lab.nm_zones("apply", link.name, "trusted")
    assert send_all(tcp + udp, "trusted") == ["ok"] * 4
    result = lab.nm_zones("apply", link.name, "block", check=False)
    assert result.returncode == 1
    assert "ended 2 open flow(s)" in result.stdout
    assert "predates nm-zones' label rules and could only be deleted" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert send_all(tcp + udp, "after") == ["dead"] * 4
