"""Backends: how nm-zones' plans reach the kernel (backends/base.py says what each offers).

`iptables` (libiptc on legacy x_tables, rules built by python-iptables) and `nftables`
(libnftables, one table `inet nm-zones`). The settings key `backend` chooses; `auto` takes
iptables where the kernel has legacy x_tables, else nftables, and a backend that cannot be
opened gives way to the other, so no interface is ever left unfiltered for want of one.
"""

from __future__ import annotations

from .views import NFT_FAMILY

NAMES = ("iptables", "nftables")


def backend_of_key(key) -> str:
    return "nftables" if key[0] == NFT_FAMILY else "iptables"


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
