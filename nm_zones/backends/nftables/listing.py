"""nm-zones' table as libnftables lists it in JSON (`nft -j list table inet nm-zones`), for
the readers that compare the kernel's rules with a plan: `status` (is the interface's zone in
place, is panic mode), and the removal of chains no interface owns.

The listing is made in a child process: libnftables' JSON printer ends the whole process
(an assertion, SIGABRT) on a name that is not UTF-8, and any program that talks to the kernel
through libnftnl, not through nft's parser, can put such a chain or set in nm-zones' table.
A child that dies so leaves a table that holds nothing nm-zones can vouch for (UNLISTABLE),
and `status` a line that says so, instead of nm-zones dead without a word.

libnftables hands out the table as objects (chains, maps with their elements, rules as lists
of statements), so nothing here splits text into lines and braces. A rule's statements are
then written the way nft itself prints them in a listing (`backend.canonical` says how a
plan's rule reads that way), because a plan's rules are nft text: the rules compare as nft
would show them to an administrator, and the tests read them the same way. What this writer
does not know comes out as its JSON, which no plan's rule equals: an unknown rule is `DIFFERS`,
never `in place`.

Not on the event's path: json is imported here only (the event's quick path and a switch read
the table's fingerprints through nfnetlink.py and never list it).
"""

from __future__ import annotations

import json
import os
import sys

from .libnft import OUTPUT_JSON, OUTPUT_STATELESS, chain_of

# a table's chains ({chain: [rule, ...]}) and maps ({map: {interface: verdict}})
Listing = tuple[dict[str, list[str]], dict[str, dict[str, str]]]
UNLISTABLE: Listing = ({}, {})  # a table libnftables cannot list: nothing status vouches for
UNLISTABLE_REASON = (
    "nftables: nm-zones' table holds a name libnftables cannot list (not UTF-8: another "
    "program's), so status cannot show its rules; the view's fingerprints still cover its "
    "chains (remove the object: nft -a list table inet nm-zones shows its handle)"
)

FLAGS = OUTPUT_JSON | OUTPUT_STATELESS
PACKAGE_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
NO_TABLE = 3  # the child's exit status for a table that is not there
LISTER = f"""
import errno, os, resource, sys
sys.path.insert(0, {PACKAGE_ROOT!r})
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # its abort (below) leaves no core behind
from nm_zones.backends.nftables.libnft import FAMILY, TABLE, Nft, NftError
try:
    nft = Nft({FLAGS})
except NftError as error:
    sys.exit(str(error))
try:
    text = nft.run(f"list table {{FAMILY}} {{TABLE}}")
except NftError as error:
    sys.stderr.write(str(error))
    sys.exit({NO_TABLE} if os.strerror(errno.ENOENT) in str(error) else 1)
sys.stdout.buffer.write(text.encode("utf-8", "replace"))
sys.stderr.write(nft.said)
"""
JSON_FAILED = "json_pack failure"  # what libnftables says where it left an object out
LIST_SECONDS = 30  # the kernel always answers; never hang a command if it did not
# meta keys nft prints without `meta` (meta.c: meta_key_is_unqualified)
UNQUALIFIED = {"iif", "oif", "iifname", "oifname", "iifgroup", "oifgroup"}
# left-hand sides whose values are strings nft prints in quotes
QUOTED = ({"meta": {"key": "iifname"}}, {"meta": {"key": "oifname"}})
VERDICTS = ("accept", "drop", "return", "continue", "masquerade")
BITWISE = ("&", "|", "^")
# libnftables before 1.0.7 leaves a socket expression's level out of its JSON (Debian 12's
# 1.0.6 does): such a rule reads `socket cgroupv2 level ?`, and same_rule() takes it for
# any level
UNKNOWN = "?"


def read_listing(names: list[str]) -> Listing | None:
    """The table's chains and maps as the kernel holds them; None when there is no table,
    UNLISTABLE when libnftables cannot list it whole: one of `names` (the table's chains'
    and sets', read as bytes over netlink) is not UTF-8, libnftables died of its assertion
    (SIGABRT), or left an object out and said so. A child started as this process was
    (`python -I -S`, the package's folder put on its path): an exec, which a process with
    threads (the service) may do, where a bare fork may not."""
    import signal
    import subprocess

    from ...errors import KernelError

    if not all(_utf8(name) for name in names):
        return UNLISTABLE
    environment = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
    if "LD_LIBRARY_PATH" in os.environ:  # where libnftables was found, if not the system's
        environment["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
    try:
        result = subprocess.run(
            [sys.executable or "python3", "-I", "-S", "-c", LISTER],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=environment,
            timeout=LIST_SECONDS,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise KernelError(f"nftables: cannot list nm-zones' table: {error}") from None
    said = " ".join(result.stderr.decode("utf-8", "replace").split())
    if result.returncode == -signal.SIGABRT or JSON_FAILED in said:
        return UNLISTABLE
    if result.returncode == NO_TABLE:
        return None
    if result.returncode != 0 or not result.stdout:
        if result.returncode < 0:
            said = f"ended by {signal.Signals(-result.returncode).name}"
        reason = said or f"the lister ended with {result.returncode} and printed nothing"
        raise KernelError(f"nftables: cannot list nm-zones' table: {reason}")
    try:
        return parse_listing(result.stdout.decode("utf-8", "replace"))
    except (ValueError, KeyError, TypeError) as error:  # not what libnftables prints
        raise KernelError(f"nftables: libnftables' listing does not read: {error!r}") from None


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # a byte that is not UTF-8, kept as a surrogate by _text
        return False
    return True


def parse_listing(text: str) -> Listing | None:
    """(chains, maps) from the JSON of `list table` (None for "": no table). A chain's
    rules are in the kernel's order; a base chain's hook and policy are not among them."""
    if not text:
        return None
    chains: dict[str, list[str]] = {}
    maps: dict[str, dict[str, str]] = {}
    for item in json.loads(text)["nftables"]:
        if "chain" in item:
            chains.setdefault(chain_of(item["chain"]["name"]), [])
        elif "map" in item:
            elements = item["map"].get("elem", [])
            maps[item["map"]["name"]] = {_value(key): statement(v) for key, v in elements}
        elif "rule" in item:
            rule = item["rule"]
            words = [statement(part) for part in rule["expr"]]
            if "comment" in rule:  # nm-zones writes none: another program's
                words.append(f'comment "{rule["comment"]}"')
            chains.setdefault(chain_of(rule["chain"]), []).append(" ".join(words))
    return chains, maps


def same_rule(listed: str, planned: str) -> bool:
    """Whether a rule as listed is the planned one (backend.canonical's form), a level
    the listing could not say standing for any level."""
    if listed == planned:
        return True
    marker = f" level {UNKNOWN} "
    if marker not in listed:
        return False
    words, wanted = listed.split(" "), planned.split(" ")
    return len(words) == len(wanted) and all(
        word == other or (word == UNKNOWN and before == "level" and other.isdigit())
        for before, word, other in zip(["", *words[:-1]], words, wanted, strict=True)
    )


def same_rules(listed: list[str] | None, planned: list[str]) -> bool:
    """Whether a chain as listed holds the planned rules, in order."""
    return (
        listed is not None and len(listed) == len(planned) and all(map(same_rule, listed, planned))
    )


def statement(part: dict) -> str:
    """One statement of a rule (or a map element's verdict) as nft prints it."""
    ((kind, value),) = part.items()
    if kind == "match":
        return match(value)
    if kind in VERDICTS and value is None:
        return kind
    if kind in ("jump", "goto"):
        return f"{kind} {value['target']}"
    writer = STATEMENTS.get(kind)
    return writer(value) if writer else json.dumps(part)


def match(value: dict) -> str:
    left, right, op = value["left"], value["right"], value["op"]
    words = [expression(left)]
    if op not in ("==", "in"):  # nft prints neither: equality, and a flag among flags
        words.append(op)
    words.append(_value(right, quoted=left in QUOTED))
    return " ".join(words)


def expression(value) -> str:
    """The left-hand side of a match, or a value."""
    if not isinstance(value, dict):
        return _value(value)
    ((kind, body),) = value.items()
    if kind == "meta":
        key = body["key"]
        return key if key in UNQUALIFIED else f"meta {key}"
    if kind == "payload" and "protocol" in body:
        return f"{body['protocol']} {body['field']}"
    if kind == "ct":
        words = ["ct", body.get("dir"), body.get("family"), body["key"]]
        return " ".join(word for word in words if word)
    if kind == "socket" and body["key"] == "cgroupv2":
        return f"socket cgroupv2 level {body.get('level', UNKNOWN)}"
    if kind == "socket":
        return f"socket {body['key']}"
    return _value(value)


def _value(value, quoted: bool = False) -> str:
    """A value on the right of a match: a name, a number, an address, a set's reference
    (`@name`), a prefix, a range, flags (`established,related`), an anonymous set."""
    if isinstance(value, str):
        return f'"{value}"' if quoted and not value.startswith("@") else value
    if isinstance(value, bool) or not isinstance(value, (int, list, dict)):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return ",".join(_value(item, quoted) for item in value)
    ((kind, body),) = value.items()
    if kind == "prefix":
        return f"{body['addr']}/{body['len']}"
    if kind == "range":
        return "-".join(_value(item, quoted) for item in body)
    if kind == "set":
        items = body if isinstance(body, list) else [body]
        return "{ " + ", ".join(_value(item, quoted) for item in items) + " }"
    return json.dumps(value)


def _reject(value) -> str:
    if not value:
        return "reject"
    return " ".join(["reject with", value["type"], *([value["expr"]] if "expr" in value else [])])


def _log(value) -> str:
    words = ["log"]
    for key in ("prefix", "level", "group"):
        if key in value:
            words += [key, f'"{value[key]}"' if key == "prefix" else str(value[key])]
    return " ".join(words)


def _to(value) -> str:
    """The destination of a dnat or redirect: address, port, or both (an IPv6 address
    with a port in brackets)."""
    address = value.get("addr", "")
    if "port" not in value:
        return str(address)
    if ":" in str(address):
        address = f"[{address}]"
    return f"{address}:{value['port']}"


def _dnat(value) -> str:
    family = f" {value['family']}" if "family" in value else ""
    return f"dnat{family} to {_to(value)}"


def _limit(value) -> str:
    if value.get("rate_unit", "packets") != "packets":
        return json.dumps({"limit": value})
    over = "over " if value.get("inv") else ""
    text = f"limit rate {over}{value['rate']}/{value['per']}"
    if value.get("burst", 5) != 5:  # as nft prints it: the default burst left out
        text += f" burst {value['burst']} packets"
    return text


def _mangle(value) -> str:
    return f"{expression(value['key'])} set {_set_value(value['value'])}"


def _set_value(value) -> str:
    """What a statement sets: a value, or a bitwise expression (the flow mark rule's
    `ct mark & 0x27ffffff | 0x27000000`: ruleset/layout.py FLOW_MARK_*)."""
    if isinstance(value, dict) and len(value) == 1:
        ((kind, body),) = value.items()
        if kind in BITWISE and isinstance(body, list) and len(body) == 2:
            return f" {kind} ".join(_bitwise_part(part) for part in body)
    return _value(value)


def _bitwise_part(part) -> str:
    """One side of a bitwise expression: a number in hex, as nft prints a mark."""
    if isinstance(part, int) and not isinstance(part, bool):
        return f"{part:#010x}"
    if isinstance(part, dict) and len(part) == 1 and next(iter(part)) in BITWISE:
        return _set_value(part)
    return expression(part)


STATEMENTS = {
    "reject": _reject,
    "log": _log,
    "dnat": _dnat,
    "redirect": lambda value: f"redirect to {_to(value)}" if value else "redirect",
    "ct helper": lambda value: f'ct helper set "{value}"',
    "mangle": _mangle,
    "limit": _limit,
    "vmap": lambda value: f"{expression(value['key'])} vmap {_value(value['data'])}",
}
