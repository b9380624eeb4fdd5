"""nm-zones' table read back as JSON (backends/nftables/listing.py): each statement nm-zones
writes, as libnftables 1.0.6 hands it out, reads as `nft list` prints it (the pairs are taken
from one real table holding every shipped zone, a zone using everything the compiler knows,
sources, applications, allowances and panic mode); what the reader does not know never reads
as a rule of a plan. The same table in the kernel is compared with the plans in
test_nftables.py (`status` says `in place` for every zone)."""

from __future__ import annotations

import json

import pytest

from nm_zones.backends.nftables.listing import parse_listing, same_rule, same_rules, statement

pytestmark = pytest.mark.pure


def _match(left: dict, right, op: str = "==") -> dict:
    return {"match": {"op": op, "left": left, "right": right}}


def _payload(protocol: str, field: str) -> dict:
    return {"payload": {"protocol": protocol, "field": field}}


META_NFPROTO = {"meta": {"key": "nfproto"}}
CT_STATE = {"ct": {"key": "state"}}

STATEMENTS = [
    (_match(META_NFPROTO, "ipv4"), "meta nfproto ipv4"),
    (_match({"meta": {"key": "l4proto"}}, "ipv6-icmp"), "meta l4proto ipv6-icmp"),
    (_match({"meta": {"key": "iifname"}}, "lo"), 'iifname "lo"'),
    (_match({"meta": {"key": "oifname"}}, "veth*"), 'oifname "veth*"'),
    (_match({"meta": {"key": "iifname"}}, "@nmz-until-14718"), "iifname @nmz-until-14718"),
    (_match(_payload("ip", "saddr"), "10.9.8.7"), "ip saddr 10.9.8.7"),
    (_match(_payload("ip6", "daddr"), {"prefix": {"addr": "fe80::", "len": 64}}),
     "ip6 daddr fe80::/64"),
    (_match(_payload("tcp", "dport"), 22), "tcp dport 22"),
    (_match(_payload("udp", "dport"), {"range": [60000, 61000]}), "udp dport 60000-61000"),
    (_match(_payload("icmpv6", "type"), "nd-router-advert"), "icmpv6 type nd-router-advert"),
    (_match(CT_STATE, ["established", "related"], "in"), "ct state established,related"),
    (_match(CT_STATE, "invalid", "in"), "ct state invalid"),
    (_match({"ct": {"key": "status"}}, "dnat", "in"), "ct status dnat"),
    (_match({"ct": {"key": "proto-dst", "dir": "original"}}, 443),
     "ct original proto-dst 443"),
    (_match({"ct": {"key": "label"}}, 127, "in"), "ct label 127"),
    (_match({"socket": {"key": "cgroupv2", "level": 2}}, "@nmz-app-1"),
     "socket cgroupv2 level 2 @nmz-app-1"),
    (_match({"socket": {"key": "cgroupv2"}}, "@nmz-app-1"), "socket cgroupv2 level ? @nmz-app-1"),
    ({"mangle": {"key": {"ct": {"key": "label"}}, "value": 127}}, "ct label set 127"),
    ({"accept": None}, "accept"),
    ({"masquerade": None}, "masquerade"),
    ({"jump": {"target": "nmz-s-srcz-in"}}, "jump nmz-s-srcz-in"),
    ({"goto": {"target": "nmz-default-fwd"}}, "goto nmz-default-fwd"),
    ({"reject": {"type": "icmpv6", "expr": "admin-prohibited"}},
     "reject with icmpv6 admin-prohibited"),
    ({"limit": {"rate": 5, "burst": 5, "per": "minute"}}, "limit rate 5/minute"),
    ({"log": {"prefix": "nmz custom eth1: "}}, 'log prefix "nmz custom eth1: "'),
    ({"ct helper": "nmz-ftp"}, 'ct helper set "nmz-ftp"'),
    ({"redirect": {"port": 8080}}, "redirect to :8080"),
    ({"dnat": {"family": "ip", "addr": "10.1.2.3", "port": 8443}}, "dnat ip to 10.1.2.3:8443"),
    ({"dnat": {"family": "ip6", "addr": "fd00::3"}}, "dnat ip6 to fd00::3"),
    ({"vmap": {"key": {"meta": {"key": "oifname"}}, "data": "@nmz-post"}},
     "oifname vmap @nmz-post"),
]  # fmt: skip


@pytest.mark.parametrize(("part", "text"), STATEMENTS, ids=[t for _, t in STATEMENTS])
def test_each_statement_reads_as_nft_prints_it(part, text):
    assert statement(part) == text


def test_a_statement_it_does_not_know_reads_as_its_json_and_matches_no_plan():
    part = {"queue": {"num": 3}}
    assert statement(part) == json.dumps(part)
    assert not same_rule(statement(part), "queue num 3")


LISTING = {
    "nftables": [
        {"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
        {"table": {"family": "inet", "name": "nm-zones", "handle": 1}},
        {"set": {"family": "inet", "name": "nmz-until-9", "table": "nm-zones", "type": "ifname"}},
        {"map": {"family": "inet", "name": "nmz-input", "table": "nm-zones", "type": "ifname",
                 "map": "verdict", "elem": [["eth0", {"jump": {"target": "nmz-if-eth0-in"}}]]}},
        {"map": {"family": "inet", "name": "nmz-pre", "table": "nm-zones", "type": "ifname",
                 "map": "verdict"}},
        {"chain": {"family": "inet", "table": "nm-zones", "name": "input", "handle": 7,
                   "type": "filter", "hook": "input", "prio": 0, "policy": "accept"}},
        {"chain": {"family": "inet", "table": "nm-zones", "name": "nmz-if-ab/12-in"}},
        {"chain": {"family": "inet", "table": "nm-zones", "name": "nmz-if-eth0-in"}},
        {"rule": {"family": "inet", "table": "nm-zones", "chain": "input", "handle": 20,
                  "expr": [{"vmap": {"key": {"meta": {"key": "iifname"}},
                                     "data": "@nmz-input"}}]}},
        {"rule": {"family": "inet", "table": "nm-zones", "chain": "nmz-if-eth0-in",
                  "handle": 21, "expr": [_match(CT_STATE, "invalid", "in"), {"drop": None}]}},
        {"rule": {"family": "inet", "table": "nm-zones", "chain": "nmz-if-eth0-in",
                  "handle": 22, "expr": [{"reject": {"type": "icmp",
                                                     "expr": "host-prohibited"}}]}},
        {"rule": {"family": "inet", "table": "nm-zones", "chain": "nmz-if-eth0-in",
                  "handle": 23, "expr": [{"accept": None}], "comment": "another's"}},
    ]
}  # fmt: skip


def test_a_listing_gives_chains_with_their_rules_and_maps_with_their_elements():
    chains, maps = parse_listing(json.dumps(LISTING))
    assert chains == {
        "input": ["iifname vmap @nmz-input"],  # the hook is not a rule
        "nmz-if-ab~12-in": [],  # a hashed name as the plans spell it
        "nmz-if-eth0-in": [
            "ct state invalid drop",
            "reject with icmp host-prohibited",
            'accept comment "another\'s"',  # a comment nm-zones never writes
        ],
    }
    assert maps == {"nmz-input": {"eth0": "jump nmz-if-eth0-in"}, "nmz-pre": {}}
    assert parse_listing("") is None


def test_a_level_the_listing_cannot_say_stands_for_any_level_and_nothing_else():
    listed = "ct state new socket cgroupv2 level ? @nmz-app-1 accept"
    assert same_rule(listed, "ct state new socket cgroupv2 level 3 @nmz-app-1 accept")
    assert not same_rule(listed, "ct state new socket cgroupv2 level 3 @nmz-app-2 accept")
    assert not same_rule(listed, "ct state new socket cgroupv2 level 3 @nmz-app-1 drop")
    assert not same_rule("tcp dport ? accept", "tcp dport 22 accept")
    assert same_rules([listed], ["ct state new socket cgroupv2 level 1 @nmz-app-1 accept"])
    assert not same_rules(None, [])
    assert not same_rules([listed], [])


def test_a_read_is_partial_only_one_transaction_after_its_base():
    """The partial read-back and the skipped comparison of untouched chains both rest on
    one proof: the generation id exactly one past the base's, counted as the kernel does
    (32 bits, 0 skipped)."""
    from nm_zones.backends.nftables.nfnetlink import one_transaction_since

    assert one_transaction_since({"generation": 7}, 8)
    assert not one_transaction_since({"generation": 7}, 7)  # none: not this process's own
    assert not one_transaction_since({"generation": 7}, 9)  # another program's between
    assert one_transaction_since({"generation": 0xFFFFFFFF}, 1)
    assert not one_transaction_since({"generation": 0xFFFFFFFF}, 0)
    assert not one_transaction_since({}, 1)  # no base: read whole
    assert not one_transaction_since(None, 1)
    assert not one_transaction_since({"generation": 7}, None)
    assert not one_transaction_since({"chains": {}}, 1)  # a base without its id


def test_rules_are_added_to_their_own_chain_only_from_the_table_asked_for():
    """A rule message's first two attributes are its table and chain: the rule counts in
    that chain's fingerprint, whole, in the kernel's order; another table's rules (older
    kernels do not filter dumps), chains not asked for and cut messages count nowhere."""
    from nm_zones.backends.nftables.nfnetlink import (
        NFTA_RULE_CHAIN,
        NFTA_RULE_TABLE,
        _add_rules,
        _name,
    )
    from nm_zones.netlink import attribute

    def rule(table: str, chain: str, body: bytes) -> bytes:
        return _name(NFTA_RULE_TABLE, table) + _name(NFTA_RULE_CHAIN, chain) + body

    ours = [rule("nm-zones", "nmz-if-a-in", b"\x08\x00\x03\x00one!"),
            rule("nm-zones", "nmz-if-a-in", b"\x08\x00\x03\x00two!")]
    replies = [ours[0], rule("other", "nmz-if-a-in", b"x" * 8), rule("nm-zones", "nmz-x", b""),
               ours[1], attribute(NFTA_RULE_TABLE, b"nm-zones\0"), b"\x02\x00", b""]
    found: dict[str, list[bytes]] = {"nmz-if-a-in": [b"head"], "nmz-if-a-out": []}
    _add_rules({name.encode() + b"\0": parts for name, parts in found.items()},
               b"nm-zones\0", replies)
    assert found == {"nmz-if-a-in": [b"head", *ours], "nmz-if-a-out": []}


class _CannedChannel:
    """The kernel's answers to a Reader's requests, given (pure logic: no socket)."""

    def __init__(self, answers):
        self.answers = answers

    def ask(self, kind, flags, body):
        from nm_zones.backends.nftables.nfnetlink import NFGENMSG

        message = kind & 0xFF
        for wanted, payloads in self.answers:
            if message == wanted[0] and all(part in body for part in wanted[1:]):
                return [NFGENMSG.pack(1, 0, 0) + payload for payload in payloads]
        raise OSError(2, "No such file or directory")


def test_a_chains_fingerprint_is_its_head_then_its_rules_as_the_kernel_sent_them():
    """What a view's chain fingerprint is made of, whatever the code that makes it: the
    attributes that decide a base chain (none for a plain one), then each of its rule
    messages in the kernel's order, SHA-256, 32 hex digits. So fingerprints recorded by an
    earlier nm-zones stay valid. A chain whose name is not UTF-8 (the kernel does not care)
    is fingerprinted too, not a crash: a view that differs is what makes it rebuilt."""
    from hashlib import sha256

    from nm_zones.backends.nftables import nfnetlink as nf
    from nm_zones.netlink import attribute

    table = nf._name(nf.NFTA_CHAIN_TABLE, "nm-zones")
    odd = b"nmz-\xff\0"  # as the kernel hands it out: not UTF-8

    def chain(name: bytes, *extra: bytes) -> bytes:
        return table + attribute(nf.NFTA_CHAIN_NAME, name) + b"".join(extra)

    base = {nf.NFTA_CHAIN_HOOK: b"\x08\x00\x01\x00\x00\x00\x00\x01",
            nf.NFTA_CHAIN_POLICY: b"\x00\x00\x00\x00", nf.NFTA_CHAIN_TYPE: b"filter\0"}
    attributes = [attribute(kind, value) for kind, value in base.items()]
    chains = [chain(b"input\0", *attributes), chain(b"nmz-if-a-in\0"), chain(odd)]

    def rule(name: bytes, body: bytes) -> bytes:
        return table + attribute(nf.NFTA_RULE_CHAIN, name) + body

    rules = [rule(b"nmz-if-a-in\0", b"\x08\x00\x03\x00one!"),
             rule(b"input\0", b"\x08\x00\x03\x00jump"),
             rule(odd, b"\x08\x00\x03\x00odd!"),
             rule(b"nmz-if-a-in\0", b"\x08\x00\x03\x00two!")]
    channel = _CannedChannel([((nf.NFT_MSG_GETCHAIN,), chains), ((nf.NFT_MSG_GETRULE,), rules)])
    found = nf.Reader(channel).chain_digests("nm-zones")

    head = b"".join(attribute(kind, base.get(kind, b"")) for kind in (
        nf.NFTA_CHAIN_HOOK, nf.NFTA_CHAIN_POLICY, nf.NFTA_CHAIN_TYPE, nf.NFTA_CHAIN_FLAGS))

    def expected(*parts: bytes) -> str:
        return sha256(b"".join(parts)).hexdigest()[:32]

    assert found == {
        "input": expected(head, rules[1]),
        "nmz-if-a-in": expected(rules[0], rules[3]),
        "nmz-\udcff": expected(rules[2]),
    }


LISTED = b'{"nftables": [{"chain": {"name": "input"}}]}'


@pytest.mark.parametrize(
    "returncode, stdout, stderr, expected",
    [
        (-6, b"", b"json.c:252: chain_print_json: Assertion `__out' failed.", "unlistable"),
        (0, LISTED, b"", ({"input": []}, {})),
        (0, LISTED, b"warning: something libnftables says of a listing", ({"input": []}, {})),
        (0, b'{"nftables": []}', b"json_pack failure", "unlistable"),  # an object left out
        (0, b'{"nftables": [{"rule": {"chain": "input"}}]}', b"", "error"),  # not its JSON
        (0, b"{not json", b"", "error"),
        (0, b"", b"", "error"),
        (3, b"", b"Error: No such file or directory list table inet nm-zones", None),
        (1, b"", b"Error: Operation not permitted", "error"),
        (1, b"", b"libnftables.so.1 cannot be loaded (No such file or directory)", "error"),
        (-15, b"", b"", "error"),  # stopped from outside: not the listing's fault
        (-9, b"", b"", "error"),
    ],
)
def test_a_listing_libnftables_cannot_make_whole_is_unlistable_and_any_other_failure_an_error(
    monkeypatch, returncode, stdout, stderr, expected
):
    """The child that lists the table: its death by libnftables' assertion, or an object
    it says it left out, is UNLISTABLE (nothing vouched for); a table that is not there (the
    child's own status for it, never a message matched) is None; any other failure is
    said, never taken for either."""
    import subprocess

    from nm_zones.backends.nftables import listing
    from nm_zones.errors import KernelError

    def run(argv, **options):
        assert argv[1:4] == ["-I", "-S", "-c"] and listing.PACKAGE_ROOT in argv[4]
        return subprocess.CompletedProcess(argv, returncode, stdout, stderr)

    monkeypatch.setattr(subprocess, "run", run)
    names = ["input", "nmz-if-eth0-in", "nmz-input"]
    if expected == "error":
        with pytest.raises(KernelError):
            listing.read_listing(names)
    elif expected == "unlistable":
        assert listing.read_listing(names) is listing.UNLISTABLE
    else:
        assert listing.read_listing(names) == expected


def test_a_name_that_is_not_utf8_makes_the_table_unlistable_without_asking_libnftables(
    monkeypatch,
):
    import subprocess

    from nm_zones.backends.nftables import listing

    def run(argv, **options):
        raise AssertionError("libnftables asked for a table it would die listing")

    monkeypatch.setattr(subprocess, "run", run)
    assert listing.read_listing(["input", "nmz-\udcff"]) is listing.UNLISTABLE


def test_only_names_nm_zones_could_have_made_are_written_into_a_script(monkeypatch):
    """Another program's chain in nm-zones' table named like its own but with `;`, a space,
    a newline or bytes that are not UTF-8 never reaches a script (`gc`, the catch-all)."""
    from nm_zones.backends.nftables import backend

    names = ["input", "nmz-if-eth0-in", "nmz-if-/0123456789ab-fwd", "nmz-s-home-in",
             "nmz-if-x;flush ruleset;-in", "nmz-if-a b-in", "nmz-if-a\n-in", "nmz-if-\udcff-in",
             ""]
    monkeypatch.setattr(backend, "chain_names", lambda table: names)
    assert backend.own_chain_names() == names[:4]


def test_the_lister_finds_the_package_it_is_part_of():
    import os

    from nm_zones.backends.nftables import listing

    assert os.path.isfile(os.path.join(listing.PACKAGE_ROOT, "nm_zones", "backends", "nftables",
                                       "libnft.py"))
