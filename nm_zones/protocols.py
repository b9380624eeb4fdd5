"""The address families and IP protocols nm-zones speaks of: plain constants at the bottom
of the house, so that the configuration (which checks a zone's `protocols`) and the ruleset
(which puts them in rules) share them without the configuration importing the ruleset.
"""

from __future__ import annotations

FAMILIES = ("ipv4", "ipv6")
# IP protocols a zone or service may open as a whole, by the names iptables prints.
IP_PROTOCOLS = {
    "icmp": 1,
    "igmp": 2,
    "ipencap": 4,
    "tcp": 6,
    "udp": 17,
    "ipv6": 41,
    "gre": 47,
    "esp": 50,
    "ah": 51,
    "ipv6-icmp": 58,
    "eigrp": 88,
    "ospf": 89,
    "etherip": 97,
    "encap": 98,
    "pim": 103,
    "ipcomp": 108,
    "vrrp": 112,
    "l2tp": 115,
    "sctp": 132,
    "udplite": 136,
    "mpls-in-ip": 137,
    "dccp": 33,
}
