"""Allowances by application (nftables only): accept new connections and datagrams whose
receiving socket belongs to a program, known by its cgroup alone.

An application (APP) is a systemd unit or scope name (`minidlna.service`, wildcards allowed:
`app-org.kde.kdeconnect-*.scope`), matched against the names of the directories under the
cgroup v2 root, or a cgroup path relative to that root (`system.slice/minidlna.service`).
nft resolves a cgroup path to its id when a rule is loaded, and a restarted unit gets a new
cgroup: so the rule matches a set (`type cgroupsv2`, one per APP, named by set_name) that
backends/nftables/appsets.py fills with the cgroups that match APP now, and keeps current.
The rule asks each level of the socket's cgroup (`socket cgroupv2 level N`), so a set entry
matches the sockets of that cgroup and of everything below it, at any depth.

In a rule spec (plan.Spec) an application is the match ("cgroupv2", (("app", APP),
("level", N))); the iptables backend has no such match and leaves such rules out.
"""

from __future__ import annotations

import fnmatch
import os

from ..digest import sha256
from .plan import MATCHES, Spec, make_spec

PREFIX = "app:"  # an allowance's `what` for an application (ruleset/allowances.py)
MATCH = "cgroupv2"
ROOT = "/sys/fs/cgroup"
# The deepest cgroup level asked: a user's scope is at level 5
# (user.slice/user-1000.slice/user@1000.service/app.slice/app-x.scope), a container adds some.
MAX_LEVEL = 8
APPS_NO_EFFECT = (
    "its applications have no effect on the iptables backend (it cannot match a socket's "
    "cgroup; set `backend: nftables`)"
)


def set_name(app: str) -> str:
    """The nftables set of an application: a short name nft accepts, whatever APP holds
    (the set's comment keeps APP itself)."""
    return "nmz-app-" + sha256(app.encode()).hexdigest()[:12]  # hashlib would load OpenSSL


def is_app(what: str) -> bool:
    return what.startswith(PREFIX)


def app_of(what: str) -> str:
    return what[len(PREFIX) :]


def specs(app: str) -> tuple:
    """The ACCEPT rule specs that open everything `app` listens on: new flows only (the
    zone's head already accepts established ones), one rule per cgroup level."""
    new = ("conntrack", (("ctstate", "NEW"),))
    return tuple(
        make_spec("ACCEPT", matches=(new, (MATCH, (("app", app), ("level", str(level))))))
        for level in range(1, MAX_LEVEL + 1)
    )


def apps_of_spec(spec: Spec) -> str:
    """The application a rule spec matches, or ""."""
    for name, options in spec[MATCHES]:
        if name == MATCH:
            return dict(options)["app"]
    return ""


def matching(app: str, root: str = ROOT) -> list[str]:
    """The cgroups (paths relative to `root`) that `app` names now: a path with `/` names
    that cgroup (wildcards allowed in each part), a name any cgroup of that name at any
    depth. A cgroup inside another match is left out (the outer one covers it)."""
    found = []
    for folder, children, _ in os.walk(root):
        relative = os.path.relpath(folder, root)
        if relative == ".":
            continue
        target = relative if "/" in app else os.path.basename(relative)
        if fnmatch.fnmatchcase(target, app):
            found.append(relative)
            children.clear()  # what lies below is matched through this one
    return sorted(found)
