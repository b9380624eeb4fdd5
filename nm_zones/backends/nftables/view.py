"""The view of nm-zones' table, what the engine and the event's quick path compare: read
straight from the kernel by nfnetlink.py, without libnftables and without the backend (the
quick path of every event reads it; backends/views.py dispatches to it by the view key)."""

from __future__ import annotations

from ...digest import fingerprint
from ...ruleset.layout import FORWARD_OUT
from .libnft import FAMILY, TABLE
from .nfnetlink import read

KEY = (FAMILY, TABLE)  # the one view this backend records
# dispatch chain (as the plan names it) -> (its map, the base chain or chain holding the
# vmap, that chain's declaration, iifname/oifname)
HOOK_CHAINS = {
    "nmz-input": ("input", "type filter hook input priority filter; policy accept;"),
    "nmz-forward": ("forward", "type filter hook forward priority filter; policy accept;"),
    FORWARD_OUT: (FORWARD_OUT, ""),
    "nmz-pre": ("nat-prerouting", "type nat hook prerouting priority dstnat; policy accept;"),
    "nmz-post": ("nat-postrouting", "type nat hook postrouting priority srcnat; policy accept;"),
    "nmz-raw": ("helpers", "type filter hook prerouting priority filter; policy accept;"),
}


def read_view(key=KEY, chains=None, base: dict | None = None) -> dict:
    """The view of nm-zones' table ({} when absent): a fingerprint of each chain's rules and
    one of the maps' elements, and the ruleset's generation id when it was read
    (backends/nftables/nfnetlink.py); with `base`, only `chains` are read again."""
    return read(TABLE, HOOK_CHAINS, chains, base)


def view_digest(view: dict) -> str:
    """One fingerprint of a view's chains and elements (its generation id left out)."""
    return fingerprint(repr((sorted(view.get("chains", {}).items()), view.get("elements"))))


def generation() -> int:
    """The nftables ruleset's generation id (one short netlink message)."""
    return read(TABLE, HOOK_CHAINS, ())["generation"]


def view_differs(recorded) -> bool:
    """Whether the table is no longer as `recorded` (None: a commit was under way, so it is
    unknown)."""
    return checked_view(recorded) is None


def checked_view(recorded) -> dict | None:
    """The table's view when it still holds what `recorded` says, None when it does not (or
    `recorded` is None: unknown). Nothing in nftables changed since when the generation id
    is the same (`recorded` is the answer); else the table itself is read, so other
    programs' changes to their own tables do not count, and the view read, with the
    generation id it was read at, is the answer."""
    if recorded is None:
        return None
    if recorded and recorded.get("generation") == generation():
        return recorded
    current = read_view()
    return current if same_rules(current, recorded) else None


def same_rules(view: dict, other: dict) -> bool:
    """Whether two views hold the same chains and map elements (generation ids aside)."""
    return (view.get("chains"), view.get("elements")) == (
        other.get("chains"),
        other.get("elements"),
    )
