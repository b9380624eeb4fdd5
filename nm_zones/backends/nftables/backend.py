"""The nftables backend: nm-zones' rules in one table, `inet nm-zones`, through libnftables.

Layout (IPv4 and IPv6 share the table; a rule of one family only starts `meta nfproto`):

  chain input        filter input, priority filter    iifname vmap @nmz-input, catch-all
  chain forward      filter forward, priority filter  iifname vmap @nmz-forward, catch-all
  chain nmz-forward-out                               oifname vmap @nmz-forward-out
  chain nat-prerouting   nat prerouting, dstnat       iifname vmap @nmz-pre
  chain nat-postrouting  nat postrouting, srcnat      oifname vmap @nmz-post
  chain helpers      filter prerouting, priority filter  iifname vmap @nmz-raw
                     (`ct helper set` needs the conntrack entry, made at priority -200)

Each bound interface has its own chains (`nmz-if-eth0-in`, ...; the same names and rules as
in iptables) and one element per map leading to them. An element's verdict depends only on
the interface's name, so a switch of zones flushes and refills the interface's chains and
leaves the maps alone; nothing of any other interface is in the transaction, and the kernel
changes only what the transaction names (nftables keeps rules as lists, not as one blob that
legacy x_tables copies whole), so a switch costs the same with 200 interfaces bound as with
none. Per-zone chains with per-interface elements would hold fewer rules, but log prefixes
name the interface and the fingerprint of an interface's rules would then span zones: the
cost target is met without them.

Every change is one script run as one transaction: both families, every hook, so a switch is
atomic as a whole. A switch's script is written so that libnftables need not fetch every
chain of every table first (what version 1.0.6 does for any `add rule`, `add element`, `insert`
or `delete`: with 200 interfaces bound, most of what the commit costs more than with one): an
interface's rules as one chain block (`add chain T C { rule; rule; }`, which libnftables
expands into the same rules), a map's elements in its declaration, nothing deleted that the
run found absent, and the generation id moved by a chain's rule taken out and put back
(MOVES_GENERATION). When another program's transaction came between the run's check and its
commit, what was left alone as absent is deleted in a transaction of its own.
Other tables (docker's, iptables-nft's `ip filter`, the admin's) are never named, and nothing
of theirs is read: the view reads nm-zones' table alone (nfnetlink.py), and `status` reads it
back as libnftables lists it in JSON (listing.py).
"""

from __future__ import annotations

from ...errors import KernelError, NmZonesError, converting_errors, system_failure
from ...ifname import TOKEN_CHARACTERS
from ...ruleset.allowances import boottime, ceil, deadline_of, set_name
from ...ruleset.layout import (
    CATCHALL_CHAINS,
    CHAIN_KINDS,
    DISPATCH,
    FAMILIES,
    FORWARD_OUT,
    GOTO_CHAINS,
    IP_PROTOCOLS,
    LOOPBACK,
    NFT_PANIC_CHAINS,
    SECTION_CATCHALL,
    SECTION_SOURCE,
    TABLE_ORDER,
    is_source_chain,
)
from ...ruleset.plan import (
    DESTINATION,
    MATCHES,
    NO_TABLE,
    PROTOCOL,
    SOURCE,
    TARGET,
    TARGET_OPTIONS,
    Spec,
)
from ..common import CommitRefused, check_netns_allowed, enable_forwarding, faults_from_environment
from .libnft import FAMILY, TABLE, Nft, NftError, chain_of, chain_ref
from .nfnetlink import chain_names, one_transaction_since
from .view import HOOK_CHAINS, KEY, checked_view, read_view, same_rules

# Panic mode (`nm-zones panic on`): base chains of their own, before the zones' (a drop in
# any base chain is final), dropping everything but loopback: chain -> (hook, what is spared)
PANIC_CHAINS = {
    chain: (hook, f'{direction[0]}ifname "{LOOPBACK}" accept' if direction else "")
    for chain, hook, direction in NFT_PANIC_CHAINS
}
DIRECTION = {kind: DISPATCH[kind][1] for kind in CHAIN_KINDS}
NFPROTO = {"ipv4": "ipv4", "ipv6": "ipv6"}
ADDRESS = {"ipv4": "ip", "ipv6": "ip6"}
# ICMP types by number, as nft names them (`icmp type echo-request`)
ICMP_NAMES = {
    "ipv4": {
        0: "echo-reply", 3: "destination-unreachable", 4: "source-quench", 5: "redirect",
        8: "echo-request", 9: "router-advertisement", 10: "router-solicitation",
        11: "time-exceeded", 12: "parameter-problem", 13: "timestamp-request",
        14: "timestamp-reply", 15: "info-request", 16: "info-reply",
        17: "address-mask-request", 18: "address-mask-reply",
    },
    "ipv6": {
        1: "destination-unreachable", 2: "packet-too-big", 3: "time-exceeded",
        4: "parameter-problem", 128: "echo-request", 129: "echo-reply",
        133: "nd-router-solicit", 134: "nd-router-advert", 135: "nd-neighbor-solicit",
        136: "nd-neighbor-advert", 137: "nd-redirect",
    },
}  # fmt: skip
REJECT = {
    "icmp-host-prohibited": "reject with icmp host-prohibited",
    "icmp6-adm-prohibited": "reject with icmpv6 admin-prohibited",
}
PROTOCOL_NAMES = {number: name for name, number in IP_PROTOCOLS.items()}
PROTOCOL_NAMES[58] = "ipv6-icmp"
RATE_UNITS = {"s": "second", "sec": "second", "min": "minute", "hour": "hour", "day": "day"}


class Untranslatable(NmZonesError, ValueError):
    """A rule spec with something this backend has no nft form for (a bug: say so loudly)."""


def quote(name: str) -> str:
    """A chain name or a text as an nft string (names are checked printable ASCII without
    quotes or backslashes: ifname.check_interface)."""
    return f'"{name}"'


def quote_interface(name: str) -> str:
    """An interface's name as an nft string that matches that name alone: nft reads a
    trailing `*` as "any name with this prefix" unless it is escaped."""
    return quote(name[:-1] + "\\*" if name.endswith("*") else name)


def _ports(value: str) -> str:
    return value.replace(":", "-")


def _states(value: str) -> str:
    order = ("invalid", "established", "related", "new", "untracked")
    states = {state.lower() for state in value.split(",")}
    return ",".join(s for s in order if s in states)


def _match(family: str, name: str, options: tuple, protocol: str | None) -> list[str]:
    parts = []
    settings = dict(options)
    if name == "conntrack":
        states = [s for s in settings.get("ctstate", "").split(",") if s]
        if "DNAT" in states:
            parts.append("ct status dnat")
            states.remove("DNAT")
        if states:
            parts.append(f"ct state {_states(','.join(states))}")
        if "ctorigdstport" in settings:
            parts.append(f"ct original proto-dst {_ports(settings['ctorigdstport'])}")
    elif name in ("tcp", "udp", "sctp", "dccp"):
        for option in ("sport", "dport"):
            if option in settings:
                parts.append(f"{name} {option} {_ports(settings[option])}")
    elif name in ("icmp", "icmp6"):
        number = int(settings.get("icmp-type") or settings.get("icmpv6-type"))
        word = "icmp" if name == "icmp" else "icmpv6"
        parts.append(f"{word} type {ICMP_NAMES[family].get(number, number)}")
    elif name == "time":
        pass  # the wall clock: a timed allowance matches its deadline's set instead
    elif name == "comment" and deadline_of(settings["comment"]) is not None:
        parts.append(f"iifname @{settings['comment']}")  # its element times out in the kernel
    elif name == "cgroupv2":  # an application's set (ruleset/applications.py)
        from ...ruleset.applications import set_name as app_set_name

        parts.append(f"socket cgroupv2 level {settings['level']} @{app_set_name(settings['app'])}")
    elif name == "limit":
        count, _, unit = settings["limit"].partition("/")
        parts.append(f"limit rate {count}/{RATE_UNITS.get(unit, unit)}")
    elif name == "connlabel":
        # Setting the label it has changes nothing; a rule that sets a label is what makes
        # the kernel give new conntrack entries room for labels (on older kernels a match
        # alone does not), so that flows.py can label them later.
        label = settings["label"]
        parts.append(f"ct label {label} ct label set {label}")
    else:
        raise Untranslatable(f"match {name!r}")
    return parts


def _verdict(family: str, target: str, options: tuple) -> str:
    settings = dict(options)
    simple = {"ACCEPT": "accept", "DROP": "drop", "RETURN": "return", "MASQUERADE": "masquerade"}
    if target in simple:
        return simple[target]
    if target == "REJECT":
        return REJECT[settings["reject-with"]]
    if target == "LOG":
        return f"log prefix {quote(settings['log-prefix'])}"
    if target == "NFLOG":
        return f"log prefix {quote(settings['nflog-prefix'])} group {settings['nflog-group']}"
    if target == "REDIRECT":
        return f"redirect to :{settings['to-ports']}"
    if target == "DNAT":
        return f"dnat {ADDRESS[family]} to {settings['to-destination']}"
    if target == "CT":
        return f"ct helper set {quote(helper_object(settings['helper']))}"
    if target == "CONNMARK":
        return _set_mark(settings["set-xmark"])
    if target.startswith("nmz-"):
        return f"jump {chain_ref(target)}"
    raise Untranslatable(f"target {target!r}")


def _set_mark(xmark: str) -> str:
    """CONNMARK --set-xmark VALUE/MASK (ruleset/layout.py FLOW_MARK_*: VALUE within MASK) as
    nft prints it back: the kept bits folded into the AND (which nft leaves out when it
    keeps every bit)."""
    value_text, _, mask_text = xmark.partition("/")
    value, mask = int(value_text, 16), int(mask_text, 16)
    keep = (~mask & 0xFFFFFFFF) | value
    if keep == 0xFFFFFFFF:
        return f"ct mark set ct mark | {value:#010x}"
    return f"ct mark set ct mark & {keep:#010x} | {value:#010x}"


def helper_object(helper: str) -> str:
    return f"nmz-{helper}"


def rule_text(family: str, spec: Spec) -> str:
    """One plan rule (plan.Spec) as nft prints it back."""
    source, destination = spec[SOURCE], spec[DESTINATION]
    protocol, matches = spec[PROTOCOL], spec[MATCHES]
    parts = []
    if source:
        parts.append(f"{ADDRESS[family]} saddr {source}")
    if destination:
        parts.append(f"{ADDRESS[family]} daddr {destination}")
    named = {name for name, _ in matches}
    if (
        protocol
        and protocol not in named
        and not (protocol in ("icmp", "ipv6-icmp") and named & {"icmp", "icmp6"})
    ):
        parts.append(f"meta l4proto {protocol}")
    for name, options in matches:
        parts += _match(family, name, options, protocol)
    parts.append(_verdict(family, spec[TARGET], spec[TARGET_OPTIONS]))
    return " ".join(parts)


# what makes nft leave out a rule's `meta nfproto` when it lists it (the family is implied)
IMPLIED = {
    "ipv4": ("ip ", "icmp ", "meta l4proto icmp ", "reject with icmp "),
    "ipv6": ("ip6 ", "icmpv6 ", "meta l4proto ipv6-icmp ", "reject with icmpv6 "),
}


def canonical(rule: str) -> str:
    """A rule of ours as `nft list` prints it back: without a `meta nfproto` the rest
    implies, host addresses without their /32 or /128."""
    for family, implied in IMPLIED.items():
        prefix = f"meta nfproto {family} "
        if rule.startswith(prefix) and rule[len(prefix) :].startswith(implied):
            rule = rule[len(prefix) :]
    words = [w[: -len("/32")] if w.endswith("/32") and "." in w else w for w in rule.split(" ")]
    words = [w[: -len("/128")] if w.endswith("/128") and ":" in w else w for w in words]
    return " ".join(words)


def chain_rules(per_family: dict[str, tuple]) -> list[str]:
    """One inet chain from each family's rules: the rules both families share at the start
    once, the rest of each family behind `meta nfproto` (a rule of one family is then never
    seen by the other's packets, so the chain means exactly the two chains it replaces)."""
    texts = {
        family: [rule_text(family, spec) for spec in specs] for family, specs in per_family.items()
    }
    if len(texts) == 1:
        ((family, rules),) = texts.items()
        return [f"meta nfproto {NFPROTO[family]} {rule}" for rule in rules]
    common = 0
    first, second = texts["ipv4"], texts["ipv6"]
    while common < min(len(first), len(second)) and first[common] == second[common]:
        common += 1
    lines = first[:common]
    for family in FAMILIES:
        lines += [f"meta nfproto {NFPROTO[family]} {rule}" for rule in texts[family][common:]]
    return lines


class Script:
    """The pieces of an nftables plan, per chain and map, family-merged."""

    def __init__(self, plan):
        self.interface = plan.interface
        self.chains: dict[str, dict[str, tuple]] = {}  # chain -> family -> specs
        self.elements: dict[str, dict[str, str]] = {}  # map -> interface -> verdict
        self.catchall: dict[str, dict[str, list]] = {}  # base chain -> family -> rules
        # base chain -> the source zones' rules at its head (before the vmap), both families
        self.sources: dict[str, list[str]] = {}
        # conntrack helper -> (its protocol, the families whose rules use it)
        self.helpers: dict[str, tuple[str, set[str]]] = {}
        self.apps: set[str] = set()  # applications whose sets the rules use (appsets.py)
        self.deadlines: set[int] = set()  # of timed allowances (ruleset/allowances.py)
        for family in FAMILIES:
            for table in TABLE_ORDER:
                chains, dispatch = plan.chains_by_table.get((family, table), NO_TABLE)
                for chain, specs in chains:
                    self.chains.setdefault(chain, {})[family] = specs
                    for spec in specs:
                        matches = spec[MATCHES]
                        self.apps.update(dict(o)["app"] for n, o in matches if n == "cgroupv2")
                        if spec[TARGET] == "CT":
                            helper = dict(spec[TARGET_OPTIONS])["helper"]
                            self.helpers.setdefault(helper, (spec[PROTOCOL], set()))[1].add(family)
                        for match, options in matches:
                            if match == "comment":
                                deadline = deadline_of(dict(options)["comment"])
                                if deadline is not None:
                                    self.deadlines.add(deadline)
                for dispatch_chain, section, _direction, interface, target in dispatch:
                    verb = "goto" if dispatch_chain in GOTO_CHAINS else "jump"
                    if section == SECTION_SOURCE:
                        base = HOOK_CHAINS[dispatch_chain][0]
                        rule = f"{ADDRESS[family]} saddr {interface} {verb} {chain_ref(target)}"
                        self.sources.setdefault(base, []).append(canonical(rule))
                    elif section == SECTION_CATCHALL:
                        base = HOOK_CHAINS[dispatch_chain][0]
                        self.catchall.setdefault(base, {}).setdefault(family, []).append(
                            (_direction, interface, target, verb)
                        )
                    else:
                        verdict = f"{verb} {chain_ref(target)}"
                        self.elements.setdefault(dispatch_chain, {})[interface] = verdict

    def chain_lines(self) -> dict[str, list[str]]:
        return {chain: chain_rules(families) for chain, families in self.chains.items()}

    def base_lines(self) -> dict[str, list[str]]:
        """The whole of `input` and `forward` as the catch-all's plan has them: the source
        zones' rules, the vmap, then the catch-all's rules."""
        catchall = self.catchall_lines()
        return {
            base: [
                *self.sources.get(base, []),
                vmap_rule(dispatch_of(base)),
                *catchall.get(base, []),
            ]
            for base in sorted(set(catchall) | set(self.sources))
        }

    def catchall_lines(self) -> dict[str, list[str]]:
        """The rules after the vmap in `input` and `forward` (exempt names return, the rest
        goes to the default zone's chains): both families alike."""
        result = {}
        for base, families in self.catchall.items():
            rules = families.get("ipv4") or families.get("ipv6") or []
            lines = []
            for _direction, pattern, target, verb in rules:
                match = f"iifname {_pattern(pattern)} " if pattern else ""
                verdict = "return" if target == "RETURN" else f"{verb} {chain_ref(target)}"
                lines.append(match + verdict)
            result[base] = lines
        return result


def _pattern(pattern: str) -> str:
    """An exempt name as nft matches it: iptables' trailing `+` (any name with this prefix)
    is nft's `*`; any other name is matched whole."""
    if pattern.endswith("+"):
        return quote(pattern[:-1] + "*")
    return quote_interface(pattern)


def _helper_decl(helper: str, protocol: str, families: set[str]) -> str:
    """A `ct helper` object's body: the protocol its traffic starts on, and l3proto inet
    when both families use it, else the one that does."""
    l3 = "inet" if len(families) > 1 else ADDRESS[next(iter(families))]
    return f'type "{helper}" protocol {protocol}; l3proto {l3};'


def skeleton() -> list[str]:
    """The table, its maps and its hook chains, each with its vmap rule (idempotent `add`s:
    run before every change, they create what is missing and leave the rest alone)."""
    lines = [f"add table {FAMILY} {TABLE}"]
    for dispatch_chain in HOOK_CHAINS:
        lines.append(f"add map {FAMILY} {TABLE} {dispatch_chain} {{ type ifname : verdict; }}")
    for chain, declaration in HOOK_CHAINS.values():
        body = f" {{ {declaration} }}" if declaration else ""
        lines.append(f"add chain {FAMILY} {TABLE} {chain}{body}")
    return lines


def vmap_rule(dispatch_chain: str) -> str:
    direction = "oifname" if dispatch_chain in (FORWARD_OUT, "nmz-post") else "iifname"
    return f"{direction} vmap @{dispatch_chain}"


def table_script() -> list[str]:
    """A fresh table: the skeleton, and each hook chain's vmap rule."""
    lines = skeleton()
    for dispatch_chain, (chain, _) in HOOK_CHAINS.items():
        lines.append(f"add rule {FAMILY} {TABLE} {chain} {vmap_rule(dispatch_chain)}")
    return lines


def dispatch_of(base: str) -> str:
    """The dispatch chain (map) whose vmap rule heads a hook chain."""
    return next(d for d, (chain, _) in HOOK_CHAINS.items() if chain == base)


def element_map(kind: str) -> str:
    return DISPATCH[kind][0]


def interface_script(
    plan, replace: bool = True, stale: tuple[str, ...] = (), present: set[str] | None = None
) -> list[str]:
    """Commands that make the table hold `plan` for its interface (the catch-all for None):
    its chains flushed and refilled, chains of kinds it no longer uses deleted with their
    elements, its elements added (an element's verdict depends only on the name). `stale`:
    source zones' chains the catch-all no longer has, deleted once nothing leads to them.
    `present`: the chains the table held when the run checked it (chain_ref's spelling),
    None when unknown; a chain the plan drops that was not there is not deleted (the
    module's docstring says why)."""
    return _script_lines(Script(plan), plan.interface, replace, stale, present)


def _script_lines(
    script: Script,
    interface: str | None,
    replace: bool,
    stale: tuple[str, ...],
    present: set[str] | None,
) -> list[str]:
    lines = []
    t = f"{FAMILY} {TABLE}"
    for helper, (protocol, families) in sorted(script.helpers.items()):
        body = _helper_decl(helper, protocol, families)
        lines.append(f"add ct helper {t} {helper_object(helper)} {{ {body} }}")
    if script.apps:
        from .appsets import declare

        lines += declare(script.apps)
    lines += deadline_sets(script.deadlines, interface)
    bodies = script.chain_lines()
    for chain, rules in bodies.items():
        lines.append(f"add chain {t} {chain_ref(chain)}")
        if not replace:
            lines += [f"add rule {t} {chain_ref(chain)} {rule}" for rule in rules]
            continue
        lines.append(f"flush chain {t} {chain_ref(chain)}")
        if rules:  # the rules `add rule` lines would make, in one block (module docstring)
            lines.append(f"add chain {t} {chain_ref(chain)} {{ {'; '.join(rules)}; }}")
    if interface is None:
        owned = list(CATCHALL_CHAINS.values())
        for base, rules in script.base_lines().items():
            lines.append(f"flush chain {t} {base}")
            lines += [f"add rule {t} {base} {rule}" for rule in rules]
        lines += _drop_chains(None, [c for c in stale if c not in bodies])
    else:
        owned = own_chains(interface)
        for base, rules in script.sources.items():  # only `plan` shows a zone's sources here
            lines += [f"insert rule {t} {base} {rule}" for rule in reversed(rules)]
    lines += _element_lines(script, replace)
    if interface is not None and replace:
        dropped = [c for c in owned if c not in bodies]
        if present is not None:
            dropped = [c for c in dropped if chain_ref(c) in present]
        lines += _drop_chains(interface, dropped)
    return lines


def _element_lines(script: Script, replace: bool) -> list[str]:
    """The plan's map elements: each map's in its declaration (module docstring), or for a
    script to read (`replace` False: plan, rebuild) one `add element` each."""
    t = f"{FAMILY} {TABLE}"
    lines = []
    for dispatch_chain, elements in script.elements.items():
        pairs = [f"{quote_interface(name)} : {verdict}" for name, verdict in elements.items()]
        if replace:
            declaration = f"type ifname : verdict; elements = {{ {', '.join(pairs)} }};"
            lines.append(f"add map {t} {dispatch_chain} {{ {declaration} }}")
        else:
            lines += [f"add element {t} {dispatch_chain} {{ {pair} }}" for pair in pairs]
    return lines


def own_chains(interface: str) -> list[str]:
    """The chains an interface may have, one per kind."""
    from ...ifname import chain_name

    return [chain_name(interface, kind) for kind in CHAIN_KINDS]


def deadline_sets(deadlines, interface: str | None) -> list[str]:
    """The set of each timed allowance's deadline, with the interface in it for as long as
    is left until the deadline (CLOCK_BOOTTIME): the kernel counts the element down on its
    own clock, so the allowance's rule matches nothing after it whatever the wall clock
    says. A deadline already passed leaves the set empty."""
    t = f"{FAMILY} {TABLE}"
    lines = []
    now = boottime()
    for deadline in sorted(deadlines):
        name = set_name(deadline)
        left = ceil((deadline - now) * 1000)
        element = ""  # in the set's declaration, not an `add element` (module docstring)
        if interface is not None and left > 0:
            element = f" elements = {{ {quote_interface(interface)} timeout {left}ms }};"
        lines.append(f"add set {t} {name} {{ type ifname; flags timeout;{element} }}")
    return lines


def _drop_chains(interface: str | None, chains: list[str]) -> list[str]:
    """Delete chains (and the elements leading to them) whether or not they exist: each is
    added first (a no-op when present), so the transaction never fails on a missing one."""
    t = f"{FAMILY} {TABLE}"
    lines = []
    name = quote_interface(interface) if interface is not None else ""
    for chain in chains:
        kind = chain.rsplit("-", 1)[1]
        lines += [f"add chain {t} {chain_ref(chain)}", f"flush chain {t} {chain_ref(chain)}"]
        if interface is not None:
            dispatch_chain = element_map(kind)
            verb = "goto" if dispatch_chain in GOTO_CHAINS else "jump"
            element = f"{{ {name} : {verb} {chain_ref(chain)} }}"
            lines.append(f"add element {t} {dispatch_chain} {element}")
            lines.append(f"delete element {t} {dispatch_chain} {{ {name} }}")
        lines.append(f"delete chain {t} {chain_ref(chain)}")
    return lines


def panic_script(on: bool) -> list[str]:
    """Panic mode's chains filled afresh (on), or deleted; each is added first, so neither
    fails on a chain that is or is not there."""
    t = f"{FAMILY} {TABLE}"
    lines = []
    for chain, (hook, spared) in PANIC_CHAINS.items():
        declaration = f"type filter hook {hook} priority filter - 1; policy accept;"
        lines += [f"add chain {t} {chain} {{ {declaration} }}", f"flush chain {t} {chain}"]
        if not on:
            lines.append(f"delete chain {t} {chain}")
            continue
        if spared:
            lines.append(f"add rule {t} {chain} {spared}")
        lines.append(f"add rule {t} {chain} drop")
    return lines


def plan_script(plan) -> str:
    """What `plan` prints: a script `nft -c -f -` accepts, that puts in place exactly what
    `apply` does for the interface (the table, its maps and hook chains included)."""
    return "\n".join(table_script() + interface_script(plan, replace=False)) + "\n"


# the end of every transaction whose touched chains may be read back alone: the rule of a
# chain of its own, `nmz-commit` (nothing jumps to it), taken out and put back (not a chain
# made and deleted: a `delete` makes libnftables fetch every chain first; a chain, not a set:
# the view fingerprints every chain, so one that another program changed is seen and the
# table rebuilt before a transaction could fail on it). The kernel moves the generation id
# only for a transaction that changed something (re-adding what exists changes nothing), and
# the proof that this transaction was the only one since the view it starts from
# (nfnetlink.read) is that the id moved by exactly one: without a change of its own, another
# program's one transaction would pass for it.
COMMIT_CHAIN = "nmz-commit"
MOVES_GENERATION = (
    f"add chain {FAMILY} {TABLE} {COMMIT_CHAIN}",
    f"flush chain {FAMILY} {TABLE} {COMMIT_CHAIN}",
    f"add chain {FAMILY} {TABLE} {COMMIT_CHAIN} {{ return; }}",
)


@converting_errors(lambda backend: OSError, system_failure)
class NftablesBackend:
    """nm-zones' rules as one nftables table; see the module's docstring."""

    name = "nftables"

    def __init__(self, state_dir: str | None = None):
        check_netns_allowed()
        self.nft = Nft()
        self._listed: tuple | None = None  # (generation id, the listing made at it)
        self.trusted: dict = {}
        self.checked: dict | None = None  # the view the last check found (differs)
        self.views: dict[tuple[str, str], dict | None] = {}
        self.changed: set[tuple[str, str]] = set()  # see changed_meanwhile
        self.raced = False  # another transaction came between the last commit and its check
        self.faults = faults_from_environment()

    def listing(self):
        """The table's chains and maps as the kernel holds them (listing.py; None without
        the table): status and the removal of orphaned chains compare them with plans.
        Listed again only when the ruleset's generation id moved: `status` asks once per
        interface, and each listing is a child process."""
        from .listing import UNLISTABLE, read_listing
        from .nfnetlink import set_names
        from .view import generation

        before = generation()
        if self._listed is not None and self._listed[0] == before:
            return self._listed[1]
        names = chain_names(TABLE)
        listed = read_listing(names + set_names(TABLE))
        if generation() != before:
            self._listed = None
            return listed
        if listed not in (None, UNLISTABLE) and set(listed[0]) != set(map(chain_of, names)):
            listed = UNLISTABLE  # libnftables left a chain out without a word
        self._listed = (before, listed)
        return listed

    def unlistable(self) -> str:
        """Why status cannot show the table's rules ("" when it can): listing.py."""
        from .listing import UNLISTABLE, UNLISTABLE_REASON

        return UNLISTABLE_REASON if self.listing() is UNLISTABLE else ""

    # -- the Backend interface ----------------------------------------------------------

    def view_keys(self, tables=None) -> set[tuple[str, str]]:
        return {KEY}

    def read_view(self, key: tuple[str, str]) -> dict:
        return read_view(key)

    def differs(self, key: tuple[str, str], recorded) -> bool:
        self.checked = checked_view(recorded)
        return self.checked is None

    def changed_meanwhile(self) -> set[tuple[str, str]]:
        keys, self.changed = self.changed, set()
        return keys

    def apply(self, plan, previous_tables=None) -> None:
        if plan.interface is not None:
            return self.apply_many([(plan, previous_tables)])
        owned = frozenset(CATCHALL_CHAINS.values())
        self.faults.check(owned)
        # the source zones' chains are the catch-all's
        stale = tuple(c for c in map(chain_of, own_chain_names()) if is_source_chain(c))
        touched = set(owned) | {"input", "forward"} | set(stale)
        touched |= {c for c in Script(plan).chains if is_source_chain(c)}
        self._change(interface_script(plan, stale=stale), touched)
        self._fill_sets([plan])
        if plan.forwarding:
            enable_forwarding(plan.forwarding)
        return None

    def apply_many(self, items: list) -> None:
        """Several interfaces' plans (no catch-all) in one transaction. The chains the run
        found in the table spare deleting those a plan drops that are not there; after the
        commit, none of them may be there (see _commit), and when another transaction came
        in between, what was left alone is deleted then (_drop_after_race)."""
        checked = self.trusted.get(KEY)
        present = set(checked["chains"]) if checked and "chains" in checked else None
        lines, touched, dropped, unseen = self._switch(items, present)
        self._change(lines, touched, dropped)
        if self.raced and KEY not in self.changed and any(unseen.values()):
            self._drop_after_race(unseen, dropped)
        plans = [plan for plan, _ in items]
        self._fill_sets(plans)
        forwarding = sorted({f for plan in plans for f in plan.forwarding or ()})
        if forwarding:
            enable_forwarding(forwarding)

    def _switch(self, items: list, present: set[str] | None) -> tuple:
        """The script of `items`' plans given the chains `present`; the chains it touches,
        those the plans drop, and per interface those it leaves alone as absent."""
        lines: list[str] = []
        touched: set[str] = set()
        dropped: set[str] = set()
        unseen: dict[str, list[str]] = {}
        for plan, _previous in items:
            owned = frozenset(own_chains(plan.interface))
            self.faults.check(owned)
            script = Script(plan)
            touched |= owned
            gone = owned - set(script.chains)
            dropped |= gone
            if present is not None:
                unseen[plan.interface] = sorted(c for c in gone if chain_ref(c) not in present)
            lines += _script_lines(script, plan.interface, True, (), present)
        return lines, touched, dropped, unseen

    def _drop_after_race(self, unseen: dict[str, list[str]], dropped: set[str]) -> None:
        """Another program's transaction came between the run's check and its commit: the
        chains and map elements the commit left alone because the check found them absent
        are deleted now, whatever that program made of them. When one of its elements
        stands under one of these interfaces' names with another verdict, the deletion is
        refused: another program's change, and the table is rebuilt at once."""
        lines = [line for name, chains in unseen.items() for line in _drop_chains(name, chains)]
        try:
            self._change(lines, {chain for chains in unseen.values() for chain in chains}, dropped)
        except CommitRefused:
            self.changed.add(KEY)
            self.views[KEY] = None
            self.trusted.pop(KEY, None)

    def remove(self, interface: str | None, previous_tables=None) -> None:
        if interface is None:
            return self.remove_chains(frozenset(CATCHALL_CHAINS.values()))
        chains = own_chains(interface)
        self.faults.check(frozenset(chains))
        self._change(_drop_chains(interface, chains), chains)

    def remove_chains(self, owned: frozenset[str], previous_tables=None) -> None:
        """Chains found in the kernel for no known interface, with the elements leading to
        them (read from the table: the interface's name may be hashed in the chain's)."""
        elements = self._elements_to(owned)
        lines = []
        t = f"{FAMILY} {TABLE}"
        for dispatch_chain, interface in elements:
            lines.append(f"delete element {t} {dispatch_chain} {{ {quote_interface(interface)} }}")
        for chain in sorted(owned):
            if chain in CATCHALL_CHAINS.values():
                continue
            lines += [f"add chain {t} {chain_ref(chain)}", f"flush chain {t} {chain_ref(chain)}"]
            lines.append(f"delete chain {t} {chain_ref(chain)}")
        if lines:
            self._change(lines, owned)

    def rebuild(self, key, plans: list, panic: bool = False) -> None:
        """The whole table rebuilt from `plans` (catch-all first), and panic mode when it is
        on, in one transaction: from whatever another program left straight to the
        intended table."""
        lines = [f"add table {FAMILY} {TABLE}", f"delete table {FAMILY} {TABLE}"]
        lines += table_script()
        for plan in plans:
            lines += interface_script(plan, replace=False)
        if panic:
            lines += panic_script(True)
        self._commit(lines)
        self._fill_sets(plans)

    def panic(self, on: bool) -> None:
        """Panic mode in or out: one transaction, every hook, both families."""
        self._change(panic_script(on), set(PANIC_CHAINS))

    def holds_panic(self) -> bool | None:
        listed = self.listing()
        if listed is None:
            return False
        from .listing import UNLISTABLE

        if listed is UNLISTABLE:
            return None
        for chain, (_, spared) in PANIC_CHAINS.items():
            if listed[0].get(chain) != [*([spared] if spared else []), "drop"]:
                return False
        return True

    def panic_keys(self) -> set[tuple[str, str]]:
        return {KEY}

    def interface_tokens(self) -> set[str]:
        chains = [chain_of(name) for name in own_chain_names()]
        return {c[len("nmz-if-") :].rsplit("-", 1)[0] for c in chains if c.startswith("nmz-if-")}

    def remove_everything(self) -> None:
        self._commit([f"add table {FAMILY} {TABLE}", f"delete table {FAMILY} {TABLE}"])

    def holds(self, plan) -> bool | None:
        """Whether the kernel holds the plan's chains and the elements leading to them."""
        from .listing import same_rules

        listed = self.listing()
        if listed is None:
            return False
        from .listing import UNLISTABLE

        if listed is UNLISTABLE:
            return None  # status says why (unlistable)
        chains, maps = listed
        script = Script(plan)
        for chain, rules in script.chain_lines().items():
            if not same_rules(chains.get(chain), [canonical(rule) for rule in rules]):
                return False
        for dispatch_chain, elements in script.elements.items():
            for interface, verdict in elements.items():
                if maps.get(dispatch_chain, {}).get(interface) != verdict:
                    return False
        bases = script.base_lines().items()
        return all(same_rules(chains.get(base), rules) for base, rules in bases)

    def keep_entries(self, keep) -> None:
        """Nothing kept between runs: nft parses a script faster than entries can be read."""

    def forget_deadlines(self, deadlines) -> None:
        """The sets of deadlines no allowance has any more, each in its own transaction: one
        that a rule still uses (an interface that could not be committed) stays, and is
        tried again at the next deadline that passes."""
        t = f"{FAMILY} {TABLE}"
        for deadline in sorted(deadlines):
            name = set_name(deadline)
            declaration = f"add set {t} {name} {{ type ifname; flags timeout; }}"
            try:  # noqa: SIM105 - contextlib would cost every event 3 ms of imports
                self._commit([declaration, f"delete set {t} {name}"], touched=())
            except KernelError:
                pass

    # -- inside --------------------------------------------------------------------------

    def trust(self, views: dict) -> None:
        """Views the engine has just found the kernel to hold (engine.reconcile): the view
        after this process's next transaction is that one with only the chains it touched
        read again. When the check read the table because another program's transaction
        had moved the generation id, the same rules as read then, with that id: the next
        transaction is then provably the only one since, and its chains are read back
        alone (not the whole table again)."""
        view, checked, self.checked = views.get(KEY), self.checked, None
        if view and checked and same_rules(view, checked):
            view = checked
        self.trusted = {KEY: view} if view else {}

    def _change(self, lines: list[str], touched, dropped: set[str] | tuple = ()) -> None:
        """One transaction: the skeleton first (when the table is new, its vmap rules too;
        a table whose hook chains another program changed is rebuilt whole before, by
        engine.reconcile), then `lines`, which change the `touched` chains and maps only,
        and leave none of the `dropped` chains."""
        from .nfnetlink import reader

        self.faults.before_commit()
        # a table gone since the run checked it is found by _commit's comparison: the
        # chains it held are missing from the new one, and its deletion moved the id on
        script = skeleton() if reader().table_exists(TABLE) else table_script()
        self._commit(script + lines, touched, started=True, dropped=dropped)

    def _commit(
        self,
        lines: list[str],
        touched=None,
        started: bool = False,
        dropped: set[str] | tuple = (),
    ) -> None:
        if not started:  # _change asks before it looks for the table
            self.faults.before_commit()
        self.raced = False
        if touched is not None:  # its chains may be read back alone: see MOVES_GENERATION
            lines = [*lines, *MOVES_GENERATION]
            touched = {*touched, COMMIT_CHAIN}
        try:
            self.nft.run("\n".join(lines) + "\n")
        except NftError as error:
            raise CommitRefused(f"nftables: {error}") from None
        self.faults.after_commit()
        base = self.views.get(KEY) or self.trusted.get(KEY)
        if touched is None or not base:
            view = read_view(KEY)
        else:
            touched = sorted({chain_ref(chain) for chain in touched})  # as the kernel names them
            view = read_view(KEY, touched, base)
            whole = self.raced = not _read_partly(view, base)
            if whole and _untouched(view, touched) != _untouched(base, touched):
                # another program changed chains this transaction left alone, after the
                # run checked them: recorded as unknown, rebuilt by the engine right away
                self.changed.add(KEY)
                view = None
            elif view and any(chain_ref(c) in view.get("chains", ()) for c in dropped):
                # a chain the plan drops, made by another program after the run found it
                # absent (so this transaction did not delete it): the same
                self.changed.add(KEY)
                view = None
        self.views[KEY] = view
        # the engine hands self.views to the state and empties it; the next transaction of
        # this process starts from this view, not from the one checked before the run
        self.trusted[KEY] = view

    def _fill_sets(self, plans) -> None:
        """The application sets the plans' rules use, filled with the cgroups that match
        now (appsets.py); one that cannot be filled stays as it is (at worst empty: the
        application is refused), and `nm-zones serve` tries again."""
        apps = set()
        for plan in plans:
            apps |= Script(plan).apps
        if not apps:
            return
        from .appsets import fill

        for app in sorted(apps):
            try:  # noqa: SIM105 - as above
                fill(self.nft, app)
            except NftError:
                pass

    def _elements_to(self, owned) -> list[tuple[str, str]]:
        from .listing import UNLISTABLE, UNLISTABLE_REASON

        listed = self.listing()
        if listed is UNLISTABLE:
            raise KernelError(UNLISTABLE_REASON)
        found = []
        if listed:
            for dispatch_chain, elements in listed[1].items():
                for interface, verdict in elements.items():
                    if chain_of(verdict.split()[-1]) in owned:
                        found.append((dispatch_chain, interface))
        return found


# every character of a chain name nm-zones makes, as the kernel spells it (ifname.py's
# tokens and zone names, `/` for a hashed token's `~`): nothing else is written into a script
CHAIN_CHARACTERS = TOKEN_CHARACTERS | {"/"}


def own_chain_names() -> list[str]:
    """The names of the table's chains nm-zones could have made. Another program's name of
    other characters (`;`, a newline, bytes that are not UTF-8) is never written into a
    script, where it could say more than a name; the view's check sees any chain of
    another program's in the table, and the table is rebuilt."""
    return [name for name in chain_names(TABLE) if name and set(name) <= CHAIN_CHARACTERS]


def _read_partly(view: dict, base: dict) -> bool:
    """The view is `base` with only the touched chains read again (nfnetlink.read: the
    generation id proved this transaction the only one since), so the rest is base's."""
    return bool(view) and one_transaction_since(base, view.get("generation"))


def _untouched(view: dict, touched) -> dict:
    """The fingerprints of the chains a transaction did not touch."""
    chains = view.get("chains", {})
    return {chain: digest for chain, digest in chains.items() if chain not in touched}
