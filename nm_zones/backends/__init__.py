"""Backends: how nm-zones' plans reach the kernel (backends/base.py says what each offers).

`iptables` (python-iptables on legacy x_tables) and `nftables` (libnftables, one table
`inet nm-zones`). The settings key `backend` chooses; `auto` takes iptables where the kernel
has legacy x_tables, else nftables, and a backend that cannot be opened gives way to the
other, so no interface is ever left unfiltered for want of one.
"""

from __future__ import annotations

NAMES = ("iptables", "nftables")
NFT_FAMILY = "inet"  # the view key of the nftables backend is ("inet", "nm-zones")


def backend_of_key(key) -> str:
    return "nftables" if key[0] == NFT_FAMILY else "iptables"


def quick_token(key, view: dict):
    """What the quick path keeps of a view to check it on the next event: a digest of an
    iptables table's view; nftables' generation id, which answers at once, and a digest."""
    if key[0] == NFT_FAMILY:
        from .nftables.backend import view_digest as nft_digest

        return {"generation": view.get("generation"), "digest": nft_digest(view)}
    from .iptables.held import view_digest

    return view_digest(view)


def unchanged(key, token) -> bool:
    """Whether the kernel still holds what quick_token recorded (the quick path's check: one
    getsockopt for an iptables table, one netlink message for nftables' generation id)."""
    if key[0] == NFT_FAMILY:
        from .nftables.backend import TABLE
        from .nftables.backend import read_view as read_nft
        from .nftables.backend import view_digest as nft_digest
        from .nftables.nfnetlink import read

        if token.get("generation") == read(TABLE, ())["generation"]:
            return True
        return nft_digest(read_nft(key)) == token["digest"]
    from .iptables.held import read_view, view_digest

    return view_digest(read_view(*key)) == token


def differs(key, recorded) -> bool:
    """Whether the view under `key` no longer is `recorded`, by the backend the key names."""
    if key[0] == NFT_FAMILY:
        from .nftables.backend import view_differs

        return view_differs(recorded)
    from .iptables.held import read_view

    return recorded is None or read_view(*key) != recorded


def rules_ahead(key) -> list[str]:
    """Other programs' rules that come before nm-zones' jumps in the table `key` names and
    can accept a packet nm-zones would refuse, one line each (iptables: a rule in a built-in
    chain; in nftables an accept in another base chain still meets nm-zones' own)."""
    if key[0] == NFT_FAMILY:
        return []
    from .iptables.ahead import bypassing_rules

    return bypassing_rules(*key)


def panic_recorded(views: dict) -> bool:
    """Whether the views recorded after nm-zones' last commits (the state's) hold panic
    mode: both families' filter tables, or nftables' table (no backend is loaded)."""
    from ..ruleset.layout import FAMILIES, NFT_PANIC_CHAINS, PANIC_CHAINS, PANIC_TABLE

    nft = (views.get((NFT_FAMILY, "nm-zones")) or {}).get("chains", {})
    if nft:
        return all(chain in nft for chain, _, _ in NFT_PANIC_CHAINS)
    return all(
        chain in (views.get((family, PANIC_TABLE)) or {})
        for family in FAMILIES
        for _, chain, _ in PANIC_CHAINS
    )


def choose(setting: str) -> list[str]:
    """The backends to try, in order, for the settings' `backend` word."""
    if setting == "nftables":
        return ["nftables", "iptables"]
    if setting == "iptables":
        return ["iptables", "nftables"]
    from .iptables.backend import legacy_available

    return ["iptables", "nftables"] if legacy_available() else ["nftables", "iptables"]


def open_backend(name: str, state_dir: str | None):
    import os

    if f"missing-backend={name}" in os.environ.get("NM_ZONES_FAULTS", ""):  # tests only
        from ..errors import KernelError

        raise KernelError(f"{name} is missing (NM_ZONES_FAULTS)")
    if name == "nftables":
        from .nftables.backend import NftablesBackend

        return NftablesBackend(state_dir)
    from .iptables.backend import IptablesBackend

    return IptablesBackend(state_dir)
