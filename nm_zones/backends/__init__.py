"""Backends: how nm-zones' plans reach the kernel (base.py says what each offers).

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


def read_view(key) -> dict:
    """The view under `key`, read by the backend the key belongs to (the quick path's cheap
    check: one getsockopt for an iptables table, one netlink dump of nm-zones' table)."""
    if key[0] == NFT_FAMILY:
        from .nftables import read_view as read_nft

        return read_nft(key)
    from ..held import read_view as read_iptables

    return read_iptables(*key)


def choose(setting: str) -> list[str]:
    """The backends to try, in order, for the settings' `backend` word."""
    if setting == "nftables":
        return ["nftables", "iptables"]
    if setting == "iptables":
        return ["iptables", "nftables"]
    from .iptables import legacy_available

    return ["iptables", "nftables"] if legacy_available() else ["nftables", "iptables"]


def open_backend(name: str, state_dir: str | None):
    import os

    if f"missing-backend={name}" in os.environ.get("NM_ZONES_FAULTS", ""):  # tests only
        from ..errors import KernelError

        raise KernelError(f"{name} is missing (NM_ZONES_FAULTS)")
    if name == "nftables":
        from .nftables import NftablesBackend

        return NftablesBackend(state_dir)
    from .iptables import IptablesBackend

    return IptablesBackend(state_dir)
