"""Other programs' rules that come before nm-zones' jump in a built-in chain and can accept a
packet before nm-zones sees it (held.py finds them; this names them for `status`).

nm-zones never deletes another program's rule: the next run puts its own jump back at the
top, ahead of it, which is what makes the interface filtered again; until then `status`
names the rule, so the admin knows which program put it there.
"""

from __future__ import annotations

from .held import BYPASS, read_view


def bypassing_rules(family: str, table: str) -> list[str]:
    """One line per rule found ahead of nm-zones' jump: where it is and what it says."""
    view = read_view(family, table)
    lines = []
    for key, numbers in sorted(view.items()):
        if not key.endswith(BYPASS):
            continue
        chain = key[: -len(BYPASS)]
        for number in numbers:
            text = _rule_text(family, table, chain, number)
            lines.append(
                f"{family} {table} {chain} rule {number} `{text}` (another program's) comes "
                "before nm-zones' jump and can accept packets nm-zones would refuse "
                "(nm-zones reload puts its jump first)"
            )
    return lines


def _rule_text(family: str, table: str, chain: str, number: int) -> str:
    """The rule in iptables' own words, as far as python-iptables decodes it."""
    from .entries import open_released_tables
    from .iptc_env import import_iptc

    try:
        iptc = import_iptc()
        open_released_tables(iptc, family)  # entries.py closes them after building
        rules = iptc.easy.dump_chain(table, chain, ipv6=family == "ipv6")
        return _words(chain, rules[number - 1])
    except Exception as error:  # naming the rule must never hide the warning itself
        return f"-A {chain} ... ({type(error).__name__})"


def _words(chain: str, rule: dict) -> str:
    """`-A CHAIN -i eth0 -p tcp -m tcp --dport 22 -j ACCEPT` from python-iptables' dict."""
    words = [f"-A {chain}"]
    simple = {"src": "-s", "dst": "-d", "in-interface": "-i", "out-interface": "-o"}
    simple["protocol"] = "-p"
    for key, flag in simple.items():
        if key in rule:
            words.append(f"{flag} {rule[key]}")
    target = rule.get("target", "")
    for name, parameters in rule.items():
        if name in simple or name in ("target", "counters", "fragment"):
            continue
        for each in parameters if isinstance(parameters, list) else [parameters]:
            words.append(f"-m {name}" + "".join(_options(each)))
    if isinstance(target, dict) and "goto" in target:
        words.append(f"-g {target['goto']}")
    elif isinstance(target, dict):
        name, parameters = next(iter(target.items()))
        words.append(f"-j {name.replace('_', '-')}" + "".join(_options(parameters)))
    elif target:
        words.append(f"-j {target}")
    return " ".join(words)


def _options(parameters) -> list[str]:
    if not isinstance(parameters, dict):
        return []
    found = []
    for option, value in parameters.items():
        values = value if isinstance(value, list) else [value]
        found.append(f" --{option}" + "".join(f" {v}" for v in values if v != ""))
    return found
