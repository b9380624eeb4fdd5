"""Block means block: after a switch to a stricter zone, the open flows it forbids end.

Every zone's first rule accepts established traffic, so a switch by itself changes only what
happens to new connections. After a switch commits, nm-zones therefore looks at the conntrack
table for flows that entered through the interface, and ends each one the new zone would
refuse if it were new: its protocol, destination port or ICMP type, and for forwarded flows
the zone's forward rules and port forwarding. Kept: flows the new zone allows, and flows this
host opened (outgoing, and their replies). `end-forbidden-flows: false` in nm-zones.yaml
keeps every flow, as firewalld does.

Ending a flow is not deleting its entry. The next packet of a deleted flow is new to the
kernel, and when this host sends it (a window probe to a peer that holds a download at zero
window, a window update while the peer uploads, data a server pushes), conntrack takes the
flow for one this host opened, and the peer's packets pass as its replies. So the entry
stays, labeled (conntrack label ENDED_LABEL, ruleset/layout.py), and the first rule of every
zone's input and forward chain drops the packets of labeled flows, whichever side sends them
and whichever bound interface they come in by. The entry lives as long as either side sends
(every packet, dropped or not, refreshes it), so a peer cannot outwait it. A TCP connection
to this host is aborted too (sock_diag SOCK_DESTROY, sockdiag.py; the peer gets a reset), so
nothing here sends on it once the entry has expired. A label rather than a connmark bit:
VPN clients and container runtimes set the whole ct mark of flows for themselves.

Cost. The look happens only when the switch tightens: when some packet the old zone accepted
as new is refused by the new one (`tightens`, on the compiled plans, microseconds). A switch
to a laxer or equal zone never reads the conntrack table; neither does a tightening switch in
a namespace whose conntrack table is empty, nor one of an interface the host has no route
through (before it has addresses).

Which flows are read. Reading the whole table cost seconds with 10 000 flows tracked (most
of it parsing each entry, and one route lookup per source). So each interface's
input and forward chains give a flow's first packet the interface's code in the top 8 bits
of the ct mark (ruleset/layout.py FLOW_MARK_*: 4 of the 8 bits, 70 codes, from the name;
the other 24 bits are left as they are), and a switch asks for one dump, both families, that
the kernel filters by mark: the flows whose bits are within the interface's code, that is
its own (and those of interfaces that share its code), and the unmarked ones. Unmarked are
flows older than the rules, this host's own, those that came in by the catch-all or a source
zone (whose chains mark nothing: such a flow may belong to any interface), an exempt
interface's, entries made through ctnetlink, and flows whose bits someone cleared; they are
read, whatever their number, and judged as before. Weighed and not taken: a kernel filter by
tuple (CTA_FILTER, Linux 5.8) matches exact addresses only, so it finds neither forwarded
flows nor flows to the host's other addresses; conntrack zones change how NAT and helpers
match; ct labels cannot filter a dump; a mark set on every packet would cost every packet.
What the filter cannot save: the kernel still walks its whole conntrack hash table (all
namespaces' entries, and every bucket: about 9 ms with 262 144 buckets on an idle 2-core
machine), so a tightening switch with one flow tracked costs that much more than one with
none, and 10 000 unrelated flows cost about the same as one. That dump is first only
counted (flowcount.py: the answers counted, none parsed): when no flow may have
entered through the interface, which is most of the time, nothing is parsed and no address
or route is looked up.

How the kernel is asked. Over netlink sockets of nm-zones' own (netlink.py, conntrack.py,
routing.py), with the standard library: pyroute2 would cost a process 200-600 ms of imports
and the resident service 20 MiB for good, for a handful of message types.

Which flows entered through the interface. Conntrack does not record the interface a flow
came in on, and the mark only narrows what is read (codes are shared, and unmarked flows
carry no interface). nm-zones asks the kernel's routing table: a flow whose original source
is not an address of this host entered through the interface the host routes that source to
(for a flow to one of the host's addresses, the route is looked up from that address, so
policy routing by source is followed). This is the reverse-path test of strict rp_filter, and
holds whenever routing is symmetric, which is what a NetworkManager host has. IPv6
link-local sources (fe80::/10) have a route on every link: such a flow counts as the
interface's when its destination is the interface's own address, or a multicast group on a
link that has a link-local address.

Where the zone's rules are read. The new zone's compiled plan (plan.ZonePlan, the very
rules committed) is evaluated for the flow's first packet: its nat PREROUTING rules (port
forwarding) and the interface's input chain (to this host) or forward chain (routed through
it). A match this module does not know is read the strict way: an ACCEPT rule with it does
not match, a REJECT or DROP rule with it does.

What is guaranteed, and what is not. No packet of a flow a switch ended is accepted by a
zone's chains again, either way, while its entry lives; a TCP connection to this host is gone
for good. Not covered: (1) on a kernel without CONFIG_INET_DIAG_DESTROY the socket stays; if
both sides then stay silent longer than conntrack keeps the entry (5 days established, a
minute half-closed), this host's next packet starts a flow conntrack counts as its own.
(2) A connectionless flow to this host (UDP) or a forwarded flow, once its entry expired or
was deleted by another program (`conntrack -F`), is new again: what this host (or a host
behind it whose zone lets it open flows) sends next is a flow it opens, as any outgoing one.
(3) What this host itself sends on an ended flow leaves (zones filter what comes in); and a
forwarded flow's packets coming back through an exempt interface (a container bridge) are
left to that interface's own rules. (4) A flow whose top 8 ct mark bits another program set
to anything but 0 or the interface's code is not read. (5) An entry made while no rule used
labels (flows older than nm-zones' first run after an upgrade, or opened while it was
disabled) has no room for a label: a TCP connection to this host is then deleted and its
socket aborted (ended), any other such flow only deleted; the switch says so, counts it as
not ended, and exits 1. (6) When the kernel fails a route lookup for another reason than
having no route (out of memory, say), where the flow entered is not known: it counts as
entered here when chains with the interface's mark code marked it (its own, or an
interface's that shares the code), and is then ended if the new zone refuses it; unmarked,
it is kept (it may be any interface's); the switch says so and exits 1.
"""

from __future__ import annotations

from .ruleset.layout import (
    ENDED_LABEL,
    FAMILIES,
    FLOW_MARK_MASK,
    FORWARD_OUT,
    IP_PROTOCOLS,
    flow_mark,
)
from .ruleset.plan import (
    DESTINATION,
    MATCHES,
    PROTOCOL,
    SOURCE,
    TARGET,
    TARGET_OPTIONS,
    Spec,
    chain_specs,
    conditions,
)

CONNTRACK_COUNT = "/proc/sys/net/netfilter/nf_conntrack_count"
SETTING = "end-forbidden-flows"
TERMINAL = frozenset({"ACCEPT", "REJECT", "DROP"})
PORT_PROTOCOLS = {6: "tcp", 17: "udp", 33: "dccp", 132: "sctp", 136: "udplite"}
ICMP_MATCHES = {"icmp": ("icmp-type", 1), "icmp6": ("icmpv6-type", 58)}
# include/uapi/linux/netfilter/nf_conntrack_common.h
IPS_EXPECTED, IPS_SRC_NAT, IPS_DST_NAT = 1 << 0, 1 << 4, 1 << 5
ENDED_BIT = 1 << int(ENDED_LABEL)  # label n is bit n of CTA_LABELS (conntrack.Entry)
# socket's values on Linux (this module is imported by every switch: no socket)
AF_UNSPEC, AF_INET, AF_INET6 = 0, 2, 10
# what the kernel answers a route lookup with when no route leads to the address: none at
# all, an unreachable, a prohibit or a blackhole route (errno's values on Linux)
NO_ROUTE = frozenset({101, 113, 13, 22, 100})  # ENETUNREACH EHOSTUNREACH EACCES EINVAL ENETDOWN


def after_switch(compiled, interface: str, before: str, after) -> tuple[int, str]:
    """Called by the engine once `interface` is committed to zone plan `after`, coming from
    zone `before` (its old zone, or the catch-all's). Returns (flows ended, error)."""
    if not compiled.settings.get(SETTING, True) or not before:
        return 0, ""
    old = compiled.zone(before)
    if old is None or not tightens(old, after):
        return 0, ""
    if not conntrack_has_entries() or not routed_through(interface):
        return 0, ""
    try:
        ended, problems = end_forbidden_flows(interface, old, after)
    except Exception as error:  # the rules are committed: report, never undo them
        return 0, f"could not end the open flows zone {after.name!r} forbids: {error}"
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return ended, f"not every open flow zone {after.name!r} forbids ended: {problems[0]}{more}"
    return ended, ""


def conntrack_has_entries() -> bool:
    """False when this namespace's conntrack table is empty (or conntrack is not loaded):
    then there is nothing to end, and no reason to ask the kernel for flows."""
    try:
        with open(CONNTRACK_COUNT) as stream:
            return stream.read().strip() != "0"
    except FileNotFoundError:  # no conntrack in this kernel or namespace: no flows
        return False
    except OSError:  # cannot tell: look
        return True


def routed_through(interface: str) -> bool:
    """False when the host has no route through the interface (say, at `pre-up`, before it
    has addresses), IPv4 or unicast IPv6: then no flow counts as having entered through it
    (see the module's docstring), and there is no reason to ask the kernel for flows."""
    try:
        with open("/proc/net/route") as stream:
            if any(line.split()[:1] == [interface] for line in stream):
                return True
    except OSError:
        return True  # cannot tell: look
    try:
        with open("/proc/net/ipv6_route") as stream:
            for line in stream:
                fields = line.split()
                if fields and fields[-1] == interface and not fields[0].startswith("ff"):
                    return True
    except FileNotFoundError:  # IPv6 is off
        pass
    except OSError:
        return True
    return False


# -- comparing two zones' plans ------------------------------------------------------------


def chain(plan, family: str, table: str, kind: str) -> tuple:
    """The specs of one of the plan's chains (empty when the zone has no such chain)."""
    return chain_specs(plan.chains_by_table, (family, table), kind)


def _unconditional(spec: Spec) -> bool:
    return (
        spec[SOURCE] is None
        and spec[DESTINATION] is None
        and spec[PROTOCOL] is None
        and not spec[MATCHES]
    )


def _summary(specs: tuple) -> tuple[set, set, bool]:
    """(conditions accepted, conditions refused before the tail, whether the tail accepts).
    A chain that ends without a verdict returns to the catch-all: counted as refusing."""
    accepts, refusals = set(), set()
    for spec in specs:
        if spec[TARGET] not in TERMINAL:
            continue
        if _unconditional(spec):
            return accepts, refusals, spec[TARGET] == "ACCEPT"
        (accepts if spec[TARGET] == "ACCEPT" else refusals).add(conditions(spec))
    return accepts, refusals, False


def _covers(general: Spec, special: Spec) -> bool:
    """True when every packet the conditions `special` match, `general` matches too: the
    same or no addresses and protocol, and fewer (or the same) matches."""
    return all(
        general[field] is None or general[field] == special[field]
        for field in (SOURCE, DESTINATION, PROTOCOL)
    ) and set(general[MATCHES]) <= set(special[MATCHES])


def _laxer_or_equal(old: tuple, new: tuple) -> bool:
    """True when the new chain accepts every packet the old one accepts. Sufficient, not
    necessary: both chains come from one compiler, which orders rules the same way, so a
    chain that covers every accept and adds no refusal refuses nothing more."""
    old_accepts, old_refusals, old_tail = _summary(old)
    new_accepts, new_refusals, new_tail = _summary(new)
    if not new_refusals <= old_refusals:
        return False
    if new_tail:
        return True
    return not old_tail and all(
        any(_covers(general, special) for general in new_accepts) for special in old_accepts
    )


def _forwards_kept(old: tuple, new: tuple) -> bool:
    """Every port forwarding of the old zone is in the new one, not shadowed by another."""
    for spec in old:
        if spec not in new:
            return False
        if any(
            other[PROTOCOL] == spec[PROTOCOL] and other[MATCHES] == spec[MATCHES]
            for other in new[: new.index(spec)]
        ):
            return False
    return True


def tightens(old, new) -> bool:
    """True when the new zone refuses some new connection the old zone accepted, in either
    family, to this host or through it. Equal plans never tighten."""
    if old.digest == new.digest:
        return False
    for family in FAMILIES:
        for kind in ("in", "fwd"):
            if not _laxer_or_equal(
                chain(old, family, "filter", kind), chain(new, family, "filter", kind)
            ):
                return True
        if not _forwards_kept(chain(old, family, "nat", "pre"), chain(new, family, "nat", "pre")):
            return True
    return False


# -- a flow's first packet against a zone's rules ------------------------------------------


class Packet:
    """The first packet of a flow as the zone's rules would see it."""

    __slots__ = ("daddr", "dport", "family", "icmp_type", "proto", "saddr", "sport", "states")

    def __init__(self, family, proto, saddr, daddr, sport=None, dport=None, icmp_type=None):
        self.family, self.proto = family, proto
        self.saddr, self.daddr = saddr, daddr
        self.sport, self.dport, self.icmp_type = sport, dport, icmp_type
        self.states = frozenset({"NEW"})


def _in_network(address, network: str) -> bool:
    import ipaddress

    try:
        return address in ipaddress.ip_network(network, strict=False)
    except ValueError:
        return False


def _port_in(port, value: str) -> bool | None:
    low, _, high = value.partition(":")
    try:
        return port is not None and int(low) <= port <= int(high or low)
    except ValueError:
        return None


def _matches(spec: Spec, packet: Packet) -> bool | None:
    """Whether the rule matches the packet; None when this module cannot tell."""
    source, destination = spec[SOURCE], spec[DESTINATION]
    protocol, matches = spec[PROTOCOL], spec[MATCHES]
    if protocol is not None:
        number = IP_PROTOCOLS.get(protocol)
        if number is None:
            return None
        if number != packet.proto:
            return False
    if source is not None and not _in_network(packet.saddr, source):
        return False
    if destination is not None and not _in_network(packet.daddr, destination):
        return False
    for name, options in matches:
        for option, value in options:
            if name == "conntrack" and option == "ctstate":
                found = not packet.states.isdisjoint(value.split(","))
            elif name in PORT_PROTOCOLS.values() and option in ("dport", "sport"):
                if PORT_PROTOCOLS.get(packet.proto) != name:
                    return False
                found = _port_in(packet.dport if option == "dport" else packet.sport, value)
            elif name in ICMP_MATCHES and option == ICMP_MATCHES[name][0]:
                if packet.proto != ICMP_MATCHES[name][1]:
                    return False
                found = value.isdigit() and packet.icmp_type == int(value)
            elif name == "limit":
                found = True  # only ever on LOG and NFLOG rules, which decide nothing
            elif name == "connlabel":
                found = False  # a flow's first packet carries no label yet
            else:
                return None
            if found is None or not found:
                return found
    return True


def accepts(specs: tuple, packet: Packet) -> bool:
    """The chain's verdict on the packet, read the strict way where a match is unknown.
    In a forward chain, RETURN hands someone else's DNAT back to FORWARD (nm-zones does not
    refuse it), and the jump to nmz-forward-out accepts what an egress zone masquerades
    (a flow conntrack has source-NATed)."""
    for spec in specs:
        target = spec[TARGET]
        if target == FORWARD_OUT:
            if "SNAT" in packet.states and _matches(spec, packet):
                return True
            continue
        if target not in TERMINAL and target != "RETURN":
            continue
        matched = _matches(spec, packet)
        if matched is None:
            matched = target not in ("ACCEPT", "RETURN")
        if matched:
            return target in ("ACCEPT", "RETURN")
    return False


def translation(specs: tuple, packet: Packet) -> tuple | None:
    """Where the zone's port forwarding sends the packet: (address or None for this host,
    port or None for unchanged), or None when no forwarding matches."""
    for spec in specs:
        target, options = spec[TARGET], dict(spec[TARGET_OPTIONS])
        if target not in ("DNAT", "REDIRECT") or _matches(spec, packet) is False:
            continue
        if target == "REDIRECT":
            return None, int(options["to-ports"])
        address, port = options["to-destination"], None
        if address.startswith("["):  # [v6]:port
            address, _, port = address[1:].partition("]:")
        elif address.count(":") == 1:  # v4:port
            address, _, port = address.partition(":")
        return address, int(port) if port else None
    return None


# -- the conntrack table -------------------------------------------------------------------


class Flow:
    """One conntrack entry (conntrack.Entry) with the questions this module asks of it."""

    __slots__ = ("entry", "family", "labels", "master", "orig", "proto", "reply", "status", "zone")

    def __init__(self, entry):
        self.entry = entry
        self.family, self.orig, self.reply = entry.family, entry.orig, entry.reply
        self.master, self.status, self.zone = entry.master, entry.status, entry.zone
        self.labels = entry.labels
        self.proto = self.orig.get("CTA_PROTO_NUM")

    def key(self) -> tuple:
        return tuple(sorted(self.orig.items()))

    def source(self) -> str:
        return self.orig.get("CTA_IP_V4_SRC") or self.orig["CTA_IP_V6_SRC"]

    def destination(self) -> str:
        return self.orig.get("CTA_IP_V4_DST") or self.orig["CTA_IP_V6_DST"]

    def reply_source(self) -> str:
        return self.reply.get("CTA_IP_V4_SRC") or self.reply["CTA_IP_V6_SRC"]


class Host:
    """This host's addresses and routes, from the kernel, looked up once per question."""

    def __init__(self, routing, ifindex: int, code: int):
        import ipaddress

        self.routing, self.ifindex = routing, ifindex
        self.code = code  # the ct mark bits the interface's chains give (layout.flow_mark)
        self.broadcast = ipaddress.ip_address("255.255.255.255")
        self.local: set = set()  # every address of this host, broadcasts included
        self.own: set = set()  # the addresses of the interface
        self.link_local_families: set = set()  # families with a link-local address here
        for index, text, broadcast in routing.addresses():
            address = ipaddress.ip_address(text)
            self.local.add(address)
            if index == ifindex:
                self.own.add(address)
                if address.is_link_local:
                    self.link_local_families.add(address.version)
            if broadcast:
                self.local.add(ipaddress.ip_address(broadcast))
        self._routes: dict = {}
        self.problems: list[str] = []  # lookups the kernel answered with no route nor a route

    def is_local(self, address) -> bool:
        """An address whose packets this host receives itself."""
        return address in self.local or address.is_multicast or address == self.broadcast

    def routed_here(self, source, via) -> bool | None:
        """True when the host routes `source` out of the interface (looked up from local
        address `via`, if any, so that rules selecting by source address apply); None when
        the lookup failed for a reason other than no route (the problem is kept)."""
        key = (source, via)
        if key not in self._routes:
            if via is None or via.is_multicast or via not in self.local:
                via = None
            try:
                self._routes[key] = self.routing.route_interface(source, via) == self.ifindex
            except OSError as error:
                # no route back: not answered through here. Any other failure tells nothing
                # about the flow (see marked_here), and the switch reports it
                self._routes[key] = False if error.errno in NO_ROUTE else None
                if self._routes[key] is None:
                    self.problems.append(
                        f"the route back to {source} could not be looked up"
                        f" ({error.strerror or error}): its flows ended only where chains with"
                        " this interface's mark code had marked them"
                    )
        return self._routes[key]

    def marked_here(self, flow) -> bool:
        """Whether chains with the interface's code marked the flow's first packet: what
        decides where the route cannot. Such a flow counts as entered here, so the zone's
        refusal still ends it (also one of an interface that shares the code: the strict
        side); an unmarked one (the catch-all's, a container bridge's) is kept rather than
        ended on a guess."""
        return bool(self.code) and flow.entry.mark & FLOW_MARK_MASK == self.code

    def came_in_here(self, flow, source, destination) -> bool:
        """Whether the flow entered through the interface: by the route back, or where the
        route cannot be looked up, by its mark."""
        entered = self.entered_here(source, destination)
        return self.marked_here(flow) if entered is None else entered

    def entered_here(self, source, destination) -> bool | None:
        """Whether a flow from `source` to `destination` came in through the interface
        (None: the route back could not be looked up)."""
        if source.version == 6 and source.is_link_local:
            if destination.is_multicast:
                return 6 in self.link_local_families
            return destination in self.own
        return self.routed_here(source, destination if self.is_local(destination) else None)


def end_forbidden_flows(interface: str, old, new) -> tuple[int, list[str]]:
    """Label the conntrack entries of flows that entered through `interface` and that zone
    plan `new` refuses as new (`old`: the zone before, whose port forwarding may explain a
    flow's address translation), and abort their local TCP sockets. Returns how many flows
    ended, and what kept others from ending for good."""
    from .flowcount import count_marked
    from .ifname import interface_index

    ifindex = interface_index(interface)
    if not ifindex or count_marked(0, _outside(interface)) == 0:
        return 0, []  # no flow may have entered through it: nothing parsed, no route looked up
    from .conntrack import Conntrack

    ended, problems = 0, []
    conntrack = Conntrack()
    flows = candidates(conntrack, interface)
    if not flows:
        return 0, []  # no route lookups, no addresses read
    from .routing import Routing

    with Routing() as routing:
        host = Host(routing, ifindex, flow_mark(interface))
        for family, address_family in (("ipv4", AF_INET), ("ipv6", AF_INET6)):
            mine = [flow for flow in flows if flow.family == address_family]
            for flow in forbidden(mine, family, host, old, new):
                done, problem = _end(conntrack, flow, host)
                ended += done
                if problem:
                    problems.append(problem)
    return ended, problems + host.problems


def candidates(conntrack, interface: str) -> list:
    """The flows, both families, that may have entered through `interface`, in one dump the
    kernel filters by ct mark (ruleset/layout.py FLOW_MARK_*): those whose mark bits are
    within the interface's code. That is the interface's flows (and those of interfaces
    that share its code), and the unmarked ones: flows that came in by the catch-all or a
    source zone's chains, older than nm-zones' rules, this host's own, an exempt
    interface's, made through ctnetlink, or whose bits another program cleared. Flows of
    any other code entered through another interface's chains: the kernel skips them.

    The dump still walks the kernel's whole conntrack hash table (all namespaces' entries
    and every bucket: about 9 ms with 262144 buckets on a 2-core machine), so a switch that
    looks costs that much more than one with an empty table, which does not look at all."""
    from .conntrack import Entry

    return [Flow(Entry(payload)) for payload in conntrack.marked(0, _outside(interface))]


def _outside(interface: str) -> int:
    """The mark bits a flow that entered through `interface` cannot have set."""
    return FLOW_MARK_MASK & ~flow_mark(interface)


def forbidden(flows: list, family: str, host: Host, old, new) -> list:
    """The flows among `flows` (one family) that entered through the host's interface and
    that the new zone refuses. An expected flow (an FTP data connection, say) shares the
    fate of the flow that expected it."""
    verdicts = {}
    for flow in flows:
        if not flow.status & IPS_EXPECTED or flow.master is None:
            verdicts[flow.key()] = refused(flow, family, host, old, new)
    doomed = []
    for flow in flows:
        verdict = verdicts.get(flow.key())
        if verdict is None:  # expected: its master decides, or itself when it is gone
            master = tuple(sorted(flow.master.items()))
            verdict = verdicts.get(master)
            if verdict is None:
                verdict = refused(flow, family, host, old, new)
        if verdict:
            doomed.append(flow)
    return doomed


def refused(flow: Flow, family: str, host: Host, old, new) -> bool:
    """True when the flow entered through the interface and the new zone would refuse it
    as a new connection."""
    import ipaddress

    source = ipaddress.ip_address(flow.source())
    destination = ipaddress.ip_address(flow.destination())
    if source in host.local:
        return False  # this host opened it
    if not host.came_in_here(flow, source, destination):
        return False  # it came in elsewhere
    reply_source = ipaddress.ip_address(flow.reply_source())
    inbound = host.is_local(reply_source)  # after any translation: to this host, or on
    first = _first_packet(flow, family, source, destination)
    forwarding = translation(chain(new, family, "nat", "pre"), first)
    if flow.status & IPS_DST_NAT:
        if _sent_elsewhere(flow, family, host, old, forwarding, first, reply_source):
            return True
        # the filter rules see the packet as translated, in conntrack state DNAT (address
        # translation by the new zone, or by someone else: docker's published ports)
        first.daddr = reply_source
        if flow.proto in PORT_PROTOCOLS:
            first.dport = flow.reply.get("CTA_PROTO_SRC_PORT")
        first.states = frozenset({"NEW", "DNAT"})
    elif forwarding is not None:
        return True  # the new zone would forward it; this flow went straight in
    if flow.status & IPS_SRC_NAT:
        first.states |= {"SNAT"}
    return not accepts(chain(new, family, "filter", "in" if inbound else "fwd"), first)


def _first_packet(flow: Flow, family: str, source, destination) -> Packet:
    """The flow's first packet, as the zone's rules would have seen it arrive."""
    ports = flow.proto in PORT_PROTOCOLS
    icmp_type = flow.orig.get("CTA_PROTO_ICMP_TYPE", flow.orig.get("CTA_PROTO_ICMPV6_TYPE"))
    return Packet(
        family,
        flow.proto,
        source,
        destination,
        flow.orig.get("CTA_PROTO_SRC_PORT") if ports else None,
        flow.orig.get("CTA_PROTO_DST_PORT") if ports else None,
        icmp_type,
    )


def _sent_elsewhere(flow: Flow, family: str, host: Host, old, forwarding, first, reply_source):
    """A flow whose destination was translated: True when the new zone would send its first
    packet elsewhere, or forwards nothing where the old zone did."""
    import ipaddress

    if forwarding is None:
        return translation(chain(old, family, "nat", "pre"), first) is not None
    to_address, to_port = forwarding
    same_place = (
        host.is_local(reply_source)
        if to_address is None
        else reply_source == ipaddress.ip_address(to_address)
    )
    return not same_place or flow.reply.get("CTA_PROTO_SRC_PORT") != (to_port or first.dport)


def _end(conntrack, flow: Flow, host: Host) -> tuple[int, str]:
    """End one flow: label its entry (the zones' chains drop its packets from now on, either
    way), and abort the local socket of a TCP connection to this host (nothing here sends
    on it again, even once the entry has expired). Returns (1 when the flow ended here,
    else 0; what went wrong, or "")."""
    if flow.labels & ENDED_BIT:
        return 0, ""  # ended by an earlier switch: still labeled
    labeled = _label(conntrack, flow)
    if labeled is None:
        return 0, ""  # it ended by itself
    why = _abort_socket(flow, host)
    if why == "" or labeled:
        return 1, ""
    return 0, (
        f"{flow.source()} -> {flow.destination()} predates nm-zones' label rules and could"
        f" only be deleted ({why})"
    )


def _label(conntrack, flow: Flow) -> bool | None:
    """Label the flow's entry ended: True; deleted, as an entry made while no rule used
    labels has no room for one: False; None when the entry is gone already."""
    import errno

    try:
        conntrack.set_labels(flow.entry, ENDED_BIT)
        return True
    except OSError as error:
        if error.errno == errno.ENOENT:
            return None
        if error.errno != errno.ENOSPC:
            raise
    # deleted instead, the peer's next packet meets the new zone as a new flow; this
    # host's would revive it, so only a TCP connection whose socket is aborted counts
    try:
        conntrack.delete(flow.entry)
    except OSError as deleting:
        if deleting.errno != errno.ENOENT:
            raise
    return False


def _abort_socket(flow: Flow, host: Host) -> str:
    """Abort the local socket of a TCP connection to this host: "" when it is aborted (or
    gone before: nothing here sends on it again), else why not."""
    import ipaddress

    if flow.proto != 6 or not host.is_local(ipaddress.ip_address(flow.reply_source())):
        return "not a TCP connection to this host"
    from .sockdiag import destroy_tcp

    reply = flow.reply
    try:
        destroy_tcp(
            flow.reply_source(),
            reply["CTA_PROTO_SRC_PORT"],
            reply.get("CTA_IP_V4_DST") or reply["CTA_IP_V6_DST"],
            reply["CTA_PROTO_DST_PORT"],
            host.ifindex,  # a link-local connection is bound to its link
        )
        return ""
    except OSError as error:  # EOPNOTSUPP: the label (if any) still holds while it lives
        return f"cannot abort its socket: {error.strerror or error}"
