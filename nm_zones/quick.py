"""The quick answer to an event that changes nothing, without loading nm-zones proper.

NetworkManager sends `up` right after `pre-up`, and `reapply` or `dhcp4-change` often change
nothing. An interface's binding is remembered with the inputs that decided it: the connection's
UUID and name, the identity of its keyfile (size, mtime, inode), and the identity of every
config file. When none of these changed, the interface still has its index, no other bound
interface is gone, no runtime allowance reached its deadline, and the kernel still holds
nm-zones' rules as nm-zones last committed them (the view of each table, read with one
getsockopt, backends/iptables/held.py, or for nftables one netlink dump of nm-zones' table),
the rules are already right: the event ends here, having imported only what Python starts
with and ctypes.
"""

from __future__ import annotations

import marshal
import os
import time

from .digest import fingerprint
from .files import read_trusted
from .ifname import interface_index
from .networks.identity import network_inputs
from .paths import Paths, config_fingerprint

QUICK_FILE = "quick"


def inputs_key(paths: Paths, env: dict) -> str:
    """event_inputs as stored with a binding; empty when there is no quick answer.
    (repr, not marshal: marshal's bytes depend on reference counts, repr of plain values
    does not.)"""
    inputs = event_inputs(paths, env)
    return fingerprint(repr(inputs)) if inputs is not None else ""


def event_inputs(paths: Paths, env: dict) -> tuple | None:
    """What decided the zone for this event; None when it cannot be pinned down cheaply
    (a profile that is not a keyfile is read with nmcli)."""
    filename = env.get("CONNECTION_FILENAME", "")
    if not filename.endswith(".nmconnection"):
        return None
    try:
        info = os.stat(filename)
    except OSError:
        return None
    if info.st_uid != 0 or info.st_mode & 0o022:
        return None  # not believed (resolve.read_keyfile): nmcli decides, every time
    profile = (
        env.get("CONNECTION_UUID", ""),
        env.get("CONNECTION_ID", ""),
        filename,
        info.st_size,
        info.st_mtime_ns,
        info.st_ino,
    )
    return (profile, config_fingerprint(paths), network_inputs(paths, env))


def nothing_changed(paths: Paths, interface: str, key: str) -> bool:
    """True when `interface` is bound by inputs equal to `key` (inputs_key of this event)."""
    if not key:
        return False
    try:
        data = read_trusted(os.path.join(paths.state, QUICK_FILE))
        bound, views, *rest = marshal.loads(data) if data else ({}, {})
        if interface not in bound or bound[interface][0] != key:
            return False
        if rest and rest[0] and time.clock_gettime(time.CLOCK_BOOTTIME) >= rest[0]:
            return False  # an allowance's deadline passed: the full run takes it out
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        return False
    # a gone interface needs the full run (gc)
    if not all(interface_index(name) == ifindex for name, (_, ifindex) in bound.items()):
        return False
    return kernel_unchanged(views)


def kernel_unchanged(views: dict) -> bool:
    """True when every table still holds nm-zones' rules as recorded after its last commit."""
    from .backends.views import unchanged

    try:
        return bool(views) and all(unchanged(key, token) for key, token in views.items())
    except OSError:
        return False


def quick_index(state) -> bytes:
    """Written with every state: interface -> (its inputs, its index), for the interfaces
    whose rules are applied as decided (not degraded, not interrupted), and the digest of
    each table's recorded view."""
    from .backends.views import quick_token
    from .ruleset.allowances import next_deadline

    views = state.kernel
    if not state.catchall_digest or None in views.values():
        bound = {}  # no catch-all yet, or a commit under way (the journal): events run in full
    else:
        bound = {
            name: (binding.inputs, binding.ifindex)
            for name, binding in state.interfaces.items()
            if binding.as_decided()
        }
    tokens = {key: quick_token(key, view) for key, view in views.items() if view is not None}
    return marshal.dumps((bound, tokens, next_deadline(state.allowances)))
