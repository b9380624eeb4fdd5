"""Does the kernel still hold what was applied? Compared through iptables-save text.

The Ruleset renders the canonical text iptables-legacy-save prints, so the check is a plain
comparison of each owned chain's rules, plus the dispatch and hook rules leading to them.
"""

from __future__ import annotations

import subprocess

from ...ruleset.layout import HOOKS
from ...ruleset.rules import Ruleset

SAVE_COMMANDS = {"ipv4": "iptables-legacy-save", "ipv6": "ip6tables-legacy-save"}


def saved_rules(family: str, table: str) -> dict[str, list[str]] | None:
    """chain -> its `-A` lines as the kernel holds them; None if the save tool is missing."""
    try:
        result = subprocess.run(  # names are bytes to x_tables: another program's may not
            [SAVE_COMMANDS[family], "-t", table],  # be UTF-8 (kernel.py, _name_of)
            capture_output=True,
            encoding="utf-8",
            errors="surrogateescape",
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    chains: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        if line.startswith(":"):
            chains.setdefault(line[1:].split()[0], [])
        elif line.startswith("-A "):
            chain, _, rest = line[3:].partition(" ")
            chains.setdefault(chain, []).append(rest)
    return chains


def kernel_holds(ruleset: Ruleset) -> bool | None:
    """True when every chain, dispatch rule and hook of the ruleset is in the kernel."""
    for family, table_plans in ruleset.table_plans.items():
        for table, plan in table_plans.items():
            chains = saved_rules(family, table)
            if chains is None:
                return None
            for chain, rules in plan.chains:
                if chains.get(chain) != [rule.save_args() for rule in rules]:
                    return False
            for dispatch in plan.dispatch:
                if dispatch.rule.save_args() not in chains.get(dispatch.chain, []):
                    return False
            for builtin, chain in HOOKS[table]:
                wanted = any(d.chain == chain for d in plan.dispatch)
                if wanted and f"-j {chain}" not in chains.get(builtin, []):
                    return False
    return True
