"""nm-zones' nftables table read straight from the kernel: a few netlink dumps, no libnftables.

The view of the table (what the engine compares before every run, and the event's quick path
on every event) must stay cheap however many interfaces are bound: libnftables would fetch
its cache and print every rule as text. Here the kernel's own messages for the table's chains,
rules and map elements are hashed (handles included, so a rule deleted and put
back is a change; nm-zones' rules and chains keep no counters), and the ruleset's generation
id, one short message, says whether anything at all changed in nftables since: when it did
not, nothing needs reading.

Only the socket module's C core and struct are imported (the quick path of every event uses
this), and OpenSSL's SHA-256 for a whole read of a large table (digest.bulk_sha256): pyroute2's
nfnetlink classes would cost a third of a second to import, and it names nf_tables'
attributes only as strings; the names here are those of linux/netfilter/nf_tables.h.

The requests go over the process's one NETLINK_NETFILTER socket (netlink.kept), the one
conntrack's requests use too, kept until the process ends: the kernel's release of such a
socket waits until the objects of nf_tables' last transaction are freed, an RCU grace period
after the commit (5-15 ms on a busy 2-core machine). Closed at exit, it waits at most once,
and not at all when the process outlives the grace period.
"""

from __future__ import annotations

import struct

from ...digest import bulk_sha256, sha256
from ...netlink import (
    NETLINK_NETFILTER,
    NFGENMSG,
    NLA_TYPE_MASK,
    NLATTR,
    NLM_F_DUMP,
    Channel,
    DumpInterrupted,
    align,
    attribute,
    attribute_list,
    kept,
)

# linux/netfilter/nfnetlink.h and linux/netfilter.h
NFNL_SUBSYS_NFTABLES = 10
NFPROTO_INET = 1
NFNETLINK_V0 = 0
# linux/netfilter/nf_tables.h: enum nf_tables_msg_types
NFT_MSG_GETTABLE = 1
NFT_MSG_GETCHAIN = 4
NFT_MSG_GETRULE = 7
NFT_MSG_GETSET = 10
NFT_MSG_GETSETELEM = 13
NFT_MSG_GETGEN = 16
# enum nft_table_attributes, nft_chain_attributes, nft_rule_attributes,
# nft_set_elem_list_attributes, nft_gen_attributes
NFTA_TABLE_NAME = 1
NFTA_CHAIN_TABLE, NFTA_CHAIN_NAME, NFTA_CHAIN_HOOK, NFTA_CHAIN_POLICY = 1, 3, 4, 5
NFTA_CHAIN_TYPE, NFTA_CHAIN_FLAGS = 7, 10
NFTA_RULE_TABLE, NFTA_RULE_CHAIN = 1, 2
NFTA_SET_ELEM_LIST_TABLE, NFTA_SET_ELEM_LIST_SET = 1, 2
NFTA_SET_TABLE, NFTA_SET_NAME = 1, 2
OBJECT_TABLE = 1  # NFTA_CHAIN_TABLE and NFTA_SET_TABLE: an object's table, the same number
NFTA_GEN_ID = 1
# what decides a base chain: its hook (hook number, priority, device), policy, type and
# flags; a chain without a hook is a plain chain (its use count and counters change by
# themselves and are left out)
BASE_CHAIN_ATTRIBUTES = (NFTA_CHAIN_HOOK, NFTA_CHAIN_POLICY, NFTA_CHAIN_TYPE, NFTA_CHAIN_FLAGS)
ENOENT = 2
ATTEMPTS = 5  # reads of the whole view while the ruleset changes under them

GENERATION = struct.Struct(">I")  # NFTA_GEN_ID: a big-endian u32


def _string(name: str) -> bytes:
    """A name as the kernel takes and hands out names (NLA_STRING): NUL-terminated. The
    inverse of _text: a name the kernel handed out that is not UTF-8 (it does not check)
    comes back byte for byte."""
    return name.encode("utf-8", "surrogateescape") + b"\0"


def _name(kind: int, name: str) -> bytes:
    """A string attribute."""
    return attribute(kind, _string(name))


class Reader:
    """nf_tables' messages over a netlink.Channel (the process's kept one: reader())."""

    def __init__(self, channel: Channel):
        self.channel = channel

    def _request(self, message: int, flags: int, attributes: bytes = b"") -> list[bytes]:
        """Send one request; the attributes (after nfgenmsg) of every reply message. The
        channel skips replies to an earlier request (the rest of a dump given up on) by
        their number, and reads again a dump the ruleset changed under (DumpInterrupted
        when it kept changing)."""
        body = NFGENMSG.pack(NFPROTO_INET, NFNETLINK_V0, 0) + attributes
        kind = (NFNL_SUBSYS_NFTABLES << 8) | message
        return [reply[NFGENMSG.size :] for reply in self.channel.ask(kind, flags, body)]

    def table_exists(self, table: str) -> bool:
        try:
            self._request(NFT_MSG_GETTABLE, 0, _name(NFTA_TABLE_NAME, table))
        except OSError as error:
            if error.errno == ENOENT:
                return False
            raise
        return True

    def generation(self) -> int:
        """The nftables ruleset's generation id: it changes with every transaction."""
        for payload in self._request(NFT_MSG_GETGEN, 0):
            for kind, value in attribute_list(payload):
                if kind == NFTA_GEN_ID:
                    return GENERATION.unpack(value)[0]
        raise OSError("netlink: no generation id")

    def chains(self, table: str) -> dict[str, dict[int, bytes]]:
        """chain -> its attributes, for every chain of the table: one dump, no rules."""
        dump = self._objects(NFT_MSG_GETCHAIN, table)
        return {_text(attributes.get(NFTA_CHAIN_NAME, b"")): attributes for attributes in dump}

    def set_names(self, table: str) -> list[str]:
        """The names of the table's sets and maps (one dump), as _text spells them."""
        dump = self._objects(NFT_MSG_GETSET, table)
        return [_text(attributes.get(NFTA_SET_NAME, b"")) for attributes in dump]

    def _objects(self, message: int, table: str) -> list[dict[int, bytes]]:
        """The attributes of each object one dump (`message`: chains, sets) gives of the
        table, whose name is the first attribute of each (NFTA_CHAIN_TABLE, NFTA_SET_TABLE)."""
        wanted = _string(table)
        found = []
        for payload in self._request(message, NLM_F_DUMP, _name(OBJECT_TABLE, table)):
            attributes = dict(attribute_list(payload))
            if attributes.get(OBJECT_TABLE) == wanted:  # older kernels do not filter
                found.append(attributes)
        return found

    def chain_digests(self, table: str, chains=None) -> dict[str, str]:
        """chain -> a fingerprint of its rules as the kernel hands them out (handles
        included), for every chain of the table, or only for `chains` (those absent left
        out): the kernel filters the dump by table and chain. A base chain's hook, priority,
        type and policy count too: `policy drop` on `input` decides every packet as much as
        a rule does."""
        name = _name(NFTA_CHAIN_TABLE, table)  # NFTA_RULE_TABLE too: the same number
        found: dict[str, list[bytes]] = {}  # chain -> what its fingerprint is made of
        if chains is None:
            requests = [name]
            for chain, attributes in self.chains(table).items():
                found[chain] = [_chain_head(attributes)]
        else:
            requests = []
            for chain in chains:
                request = name + _name(NFTA_CHAIN_NAME, chain)
                try:
                    replies = self._request(NFT_MSG_GETCHAIN, 0, request)
                except OSError as error:
                    if isinstance(error, DumpInterrupted) or error.errno != ENOENT:
                        raise
                    continue
                found[chain] = [_chain_head(dict(attribute_list(replies[0])) if replies else {})]
                requests.append(name + _name(NFTA_RULE_CHAIN, chain))
        # each rule's chain as the kernel spells it in the rule (NUL-terminated)
        by_spelling = {_string(chain): parts for chain, parts in found.items()}
        for request in requests:
            replies = self._request(NFT_MSG_GETRULE, NLM_F_DUMP, request)
            _add_rules(by_spelling, _string(table), replies)
        whole = {chain: b"".join(parts) for chain, parts in found.items()}
        digest = bulk_sha256(sum(map(len, whole.values())))
        return {chain: digest(data).hexdigest()[:32] for chain, data in whole.items()}

    def elements_digest(self, table: str, maps) -> str:
        """A fingerprint of the elements of `maps` (a missing map counts as such; any other
        failure is raised: a view made of it would be recorded as the table's)."""
        name = _name(NFTA_SET_ELEM_LIST_TABLE, table)
        digest = sha256()
        for map_name in maps:
            request = name + _name(NFTA_SET_ELEM_LIST_SET, map_name)
            try:
                replies = self._request(NFT_MSG_GETSETELEM, NLM_F_DUMP, request)
            except OSError as error:
                if isinstance(error, DumpInterrupted) or error.errno != ENOENT:
                    raise
                replies = [f"{map_name}: {error.errno}".encode()]
            for payload in replies:
                digest.update(payload)
        return digest.hexdigest()[:32]


def _add_rules(by_spelling: dict, table: bytes, replies: list[bytes]) -> None:
    """Add each rule to the parts of its chain, the whole message as the kernel sent it.
    A rule's first two attributes are its table and its chain (nf_tables_fill_rule_info);
    read in place, not through attribute_list: with 200 interfaces bound a dump holds
    some 4 000 rules, and the generator took a third of the table's read. Another table's
    rules (older kernels do not filter dumps) and chains not asked for are left out."""
    unpack = NLATTR.unpack_from
    for payload in replies:
        if len(payload) < 2 * NLATTR.size:
            continue
        length, kind = unpack(payload, 0)
        if kind & NLA_TYPE_MASK != NFTA_RULE_TABLE or payload[NLATTR.size : length] != table:
            continue
        at = align(length)
        if at + NLATTR.size > len(payload):
            continue
        length = unpack(payload, at)[0]
        parts = by_spelling.get(payload[at + NLATTR.size : at + length])
        if parts is not None:
            parts.append(payload)


def _chain_head(attributes: dict) -> bytes:
    """What a chain's fingerprint starts with: what decides a base chain (nothing for a
    plain chain, whose fingerprint stays that of its rules alone)."""
    if NFTA_CHAIN_HOOK not in attributes:
        return b""
    return b"".join(attribute(kind, attributes.get(kind, b"")) for kind in BASE_CHAIN_ATTRIBUTES)


def _text(value: bytes) -> str:
    return value.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def reader() -> Reader:
    """Over this process's (and thread's) NETLINK_NETFILTER socket, opened on first use and
    kept until the process ends (see the module's docstring): the quick path, the engine's
    checks, the read-back after a commit and conntrack's requests share it; one left with a
    request cut short is replaced."""
    return Reader(kept(NETLINK_NETFILTER))


def chain_names(table: str) -> list[str]:
    """The names of the table's chains, as the kernel spells them ([] without the table):
    one dump of the chains alone, cheaper than any listing of their rules."""
    return _names(lambda: list(reader().chains(table)))  # the process's kept socket


def set_names(table: str) -> list[str]:
    """The names of the table's sets and maps ([] without the table)."""
    return _names(lambda: reader().set_names(table))


def _names(dump) -> list[str]:
    for _ in range(ATTEMPTS):
        try:
            return dump()
        except DumpInterrupted:
            pass
        except OSError as error:
            if error.errno != ENOENT:
                raise
            return []
    raise OSError("nftables kept changing while nm-zones read its names")


def read(table: str, maps, chains=(), base: dict | None = None) -> dict:
    """The view of `table`: {} when there is no such table, else its generation id, a
    fingerprint per chain and one of the maps' elements, read in one consistent moment.
    With `base` (a view known to be right before this process's last transaction) only
    `chains` are read again (the ones that transaction touched), when the generation id
    proves that transaction the only one since `base`: the cost of a change then does not
    grow with the rest of the table. Otherwise the whole table is read, and the caller
    compares the chains it did not touch with `base`. chains=() reads the generation id
    alone."""
    for _ in range(ATTEMPTS):
        try:
            view = _read_once(reader(), table, maps, chains, base)
        except DumpInterrupted:
            continue
        if view is not None:
            return view
    raise OSError("nftables kept changing while nm-zones read its table")


def following(generation: int | None) -> int | None:
    """The generation id one transaction after `generation` (the kernel counts in 32 bits
    and skips 0)."""
    if generation is None:
        return None
    return (generation + 1) & 0xFFFFFFFF or 1


def one_transaction_since(base: dict | None, generation: int | None) -> bool:
    """Whether `generation` is the id right after `base`'s: exactly one transaction in any
    table (this process's own last one) since `base` was read, so what it left alone is
    still as `base` holds it. The one proof both the partial read and the caller's
    decision to skip comparing the untouched chains rest on."""
    return bool(base) and generation is not None and generation == following(base.get("generation"))


def _read_once(reader: Reader, table: str, maps, chains, base) -> dict | None:
    """read() once; None when the generation id moved while reading."""
    before = reader.generation()
    if chains == ():
        return {"generation": before}
    if not reader.table_exists(table):
        view: dict = {}
    elif chains is not None and one_transaction_since(base, before):
        digests = dict(base["chains"])
        for chain in chains:
            digests.pop(chain, None)
        digests.update(reader.chain_digests(table, chains))
        view = {"chains": digests, "elements": reader.elements_digest(table, maps)}
    else:
        view = {
            "chains": reader.chain_digests(table),
            "elements": reader.elements_digest(table, maps),
        }
    if reader.generation() != before:
        return None
    return {**view, "generation": before} if view else {}
