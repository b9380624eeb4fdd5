"""nm-zones' nftables table read straight from the kernel: a few netlink dumps, no libnftables.

The view of the table (what the engine compares before every run, and the event's quick path
on every event) must stay cheap however many interfaces are bound: libnftables would fetch
its cache and print every rule as text. Here the kernel's own messages for the table's chains,
rules and map elements are hashed as they come (handles included, so a rule deleted and put
back is a change; nm-zones' rules and chains keep no counters), and the ruleset's generation
id, one short message, says whether anything at all changed in nftables since: when it did
not, nothing needs reading.

Only the socket module's C core is imported (the quick path of every event uses this).
"""

from __future__ import annotations

import os

from ...errors import NmZonesError

NETLINK_NETFILTER = 12
NFNL_SUBSYS_NFTABLES = 10
NFT_MSG_GETTABLE = 1
NFT_MSG_GETCHAIN, NFT_MSG_GETRULE, NFT_MSG_GETSETELEM, NFT_MSG_GETGEN = 4, 7, 13, 16
NFPROTO_INET = 1
NLM_F_REQUEST, NLM_F_DUMP, NLM_F_DUMP_INTR = 0x1, 0x300, 0x10
NLMSG_ERROR, NLMSG_DONE = 2, 3
# NFTA_*_TABLE is 1 for chains, rules and element lists; NFTA_CHAIN_NAME and NFTA_RULE_CHAIN
# are 3 and 2 (a rule message starts with its table and its chain); NFTA_SET_ELEM_LIST_SET 2
ATTR_TABLE, ATTR_SET, ATTR_RULE_CHAIN, ATTR_NAME = 1, 2, 2, 3
# what decides a base chain: NFTA_CHAIN_HOOK (hook number, priority, device), _POLICY, _TYPE
# and _FLAGS; a chain without a hook is a plain chain (its use count and counters change by
# themselves and are left out)
BASE_CHAIN_ATTRIBUTES = (4, 5, 7, 10)
NFTA_CHAIN_HOOK = 4
ENOENT = 2
NFTA_GEN_ID = 1
ATTEMPTS = 5


class DumpChanged(NmZonesError):
    """The ruleset changed during a dump (NLM_F_DUMP_INTR): read again."""


def _attributes(data: bytes, offset: int):
    """(type, payload) of each netlink attribute from `offset` on."""
    while offset + 4 <= len(data):
        length = int.from_bytes(data[offset : offset + 2], "little")
        kind = int.from_bytes(data[offset + 2 : offset + 4], "little") & 0x3FFF
        if length < 4:
            return
        yield kind, data[offset + 4 : offset + length]
        offset += (length + 3) & ~3


def _attribute(kind: int, payload: bytes) -> bytes:
    header = (4 + len(payload)).to_bytes(2, "little") + kind.to_bytes(2, "little")
    return (header + payload).ljust((4 + len(payload) + 3) & ~3, b"\0")


class Reader:
    """One netlink socket to nf_tables, in the namespace of this process."""

    def __init__(self):
        from _socket import AF_NETLINK, SOCK_RAW, socket

        self.sock = socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER)
        self.seq = 0

    def close(self) -> None:
        self.sock.close()

    def _request(self, message: int, flags: int, attributes: bytes = b"") -> list[bytes]:
        """Send one request; the payloads (after nfgenmsg) of every reply message."""
        self.seq += 1
        body = bytes((NFPROTO_INET, 0, 0, 0)) + attributes
        header = (16 + len(body)).to_bytes(4, "little")
        header += ((NFNL_SUBSYS_NFTABLES << 8) | message).to_bytes(2, "little")
        header += (NLM_F_REQUEST | flags).to_bytes(2, "little")
        header += self.seq.to_bytes(4, "little") + (0).to_bytes(4, "little")
        self.sock.send(header + body)
        replies = []
        while True:
            data = self.sock.recv(1 << 20)
            offset = 0
            while offset + 16 <= len(data):
                length = int.from_bytes(data[offset : offset + 4], "little")
                kind = int.from_bytes(data[offset + 4 : offset + 6], "little")
                message_flags = int.from_bytes(data[offset + 6 : offset + 8], "little")
                if length < 16:
                    raise OSError("netlink: a malformed reply")
                if message_flags & NLM_F_DUMP_INTR:
                    raise DumpChanged()
                if kind == NLMSG_ERROR:
                    code = -int.from_bytes(data[offset + 16 : offset + 20], "little", signed=True)
                    if code:
                        raise OSError(code, os.strerror(code))
                    return replies  # an acknowledgement
                if kind == NLMSG_DONE:
                    return replies
                replies.append(data[offset + 20 : offset + length])
                offset += (length + 3) & ~3
            if not flags & NLM_F_DUMP:
                return replies

    def table_exists(self, table: str) -> bool:
        try:
            self._request(NFT_MSG_GETTABLE, 0, _attribute(ATTR_TABLE, table.encode() + b"\0"))
        except OSError as error:
            if error.errno == ENOENT:
                return False
            raise
        return True

    def generation(self) -> int:
        """The nftables ruleset's generation id: it changes with every transaction."""
        for payload in self._request(NFT_MSG_GETGEN, 0):
            for kind, value in _attributes(payload, 0):
                if kind == NFTA_GEN_ID:
                    return int.from_bytes(value, "big")
        raise OSError("netlink: no generation id")

    def chain_digests(self, table: str, chains=None) -> dict[str, str]:
        """chain -> a fingerprint of its rules as the kernel hands them out (handles
        included), for every chain of the table, or only for `chains` (those absent left
        out): the kernel filters the dump by table and chain. A base chain's hook, priority,
        type and policy count too: `policy drop` on `input` decides every packet as much as
        a rule does."""

        wanted = table.encode() + b"\0"
        name = _attribute(ATTR_TABLE, wanted)
        found: dict[str, object] = {}
        if chains is None:
            requests = [name]
            for payload in self._request(NFT_MSG_GETCHAIN, NLM_F_DUMP, name):
                attributes = dict(_attributes(payload, 0))
                if attributes.get(ATTR_TABLE) == wanted:
                    found[_text(attributes.get(ATTR_NAME, b""))] = _chain_digest(attributes)
        else:
            requests = []
            for chain in chains:
                request = name + _attribute(ATTR_NAME, chain.encode() + b"\0")
                try:
                    replies = self._request(NFT_MSG_GETCHAIN, 0, request)
                except OSError as error:
                    if isinstance(error, DumpChanged) or error.errno != ENOENT:
                        raise
                    continue
                found[chain] = _chain_digest(dict(_attributes(replies[0], 0)) if replies else {})
                requests.append(name + _attribute(ATTR_RULE_CHAIN, chain.encode() + b"\0"))
        for request in requests:
            for payload in self._request(NFT_MSG_GETRULE, NLM_F_DUMP, request):
                attributes = _attributes(payload, 0)
                table_attribute, chain_attribute = next(attributes, None), next(attributes, None)
                if table_attribute != (ATTR_TABLE, wanted) or not chain_attribute:
                    continue  # another table's (older kernels do not filter dumps)
                digest = found.get(_text(chain_attribute[1]))
                if digest is not None:
                    digest.update(payload)
        return {chain: digest.hexdigest()[:32] for chain, digest in found.items()}

    def elements_digest(self, table: str, maps) -> str:
        """A fingerprint of the elements of `maps` (a missing map counts as such)."""
        from ...digest import sha256

        name = _attribute(ATTR_TABLE, table.encode() + b"\0")
        digest = sha256()
        for map_name in maps:
            request = name + _attribute(ATTR_SET, map_name.encode() + b"\0")
            try:
                replies = self._request(NFT_MSG_GETSETELEM, NLM_F_DUMP, request)
            except DumpChanged:
                raise
            except OSError as error:
                replies = [f"{map_name}: {error.errno}".encode()]
            for payload in replies:
                digest.update(payload)
        return digest.hexdigest()[:32]


def _chain_digest(attributes: dict):
    """A digest started with what decides a base chain (nothing for a plain chain, whose
    fingerprint stays that of its rules alone)."""
    from ...digest import sha256

    digest = sha256()
    if NFTA_CHAIN_HOOK in attributes:
        for kind in BASE_CHAIN_ATTRIBUTES:
            digest.update(_attribute(kind, attributes.get(kind, b"")))
    return digest


def _text(value: bytes) -> str:
    return value.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def read(table: str, maps, chains=(), base: dict | None = None) -> dict:
    """The view of `table`: {} when there is no such table, else its generation id, a
    fingerprint per chain and one of the maps' elements, read in one consistent moment.
    With `base` (a view known to be right before this process's last transaction) only
    `chains` are read again (the ones that transaction touched): the cost of a change then
    does not grow with the rest of the table. chains=() reads the generation id alone."""
    for _ in range(ATTEMPTS):
        reader = Reader()
        try:
            before = reader.generation()
            if chains == ():
                return {"generation": before}
            if not reader.table_exists(table):
                view: dict = {}
            elif base and chains is not None:
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
            if reader.generation() == before:
                return {**view, "generation": before} if view else {}
        except DumpChanged:
            pass
        finally:
            reader.close()
    raise OSError("nftables kept changing while nm-zones read its table")
