"""The views, by key alone: the one path from a view key to its backend's reader, taken by
the engine (through each backend's read_view and differs), the event's quick path and
`status`, without loading a backend (each reader imports only what it reads with)."""

from __future__ import annotations

NFT_FAMILY = "inet"  # the view key of the nftables backend is ("inet", "nm-zones")


def read_view(key) -> dict:
    """What the kernel holds of nm-zones under `key` ({} when nothing)."""
    if key[0] == NFT_FAMILY:
        from .nftables.view import read_view as read_table

        return read_table(key)
    from .iptables.held import read_view as read_held

    return read_held(*key)


def view_digest(key, view: dict) -> str:
    """One fingerprint of a view (nftables' generation id left out)."""
    if key[0] == NFT_FAMILY:
        from .nftables.view import view_digest as table_digest

        return table_digest(view)
    from .iptables.held import view_digest as held_digest

    return held_digest(view)


def quick_token(key, view: dict):
    """What the quick path keeps of a view to check it on the next event: a digest of an
    iptables table's view; nftables' generation id, which answers at once, and a digest."""
    if key[0] == NFT_FAMILY:
        return {"generation": view.get("generation"), "digest": view_digest(key, view)}
    return view_digest(key, view)


def unchanged(key, token) -> bool:
    """Whether the kernel still holds what quick_token recorded (the quick path's check: one
    getsockopt for an iptables table, one netlink message for nftables' generation id)."""
    if key[0] == NFT_FAMILY:
        from .nftables.view import generation

        if token.get("generation") == generation():
            return True
        return view_digest(key, read_view(key)) == token["digest"]
    return view_digest(key, read_view(key)) == token


def differs(key, recorded) -> bool:
    """Whether the view under `key` no longer is `recorded` (None: unknown, so it differs)."""
    if key[0] == NFT_FAMILY:
        from .nftables.view import view_differs

        return view_differs(recorded)
    return recorded is None or read_view(key) != recorded
