"""One hook event imports only its budget: NetworkManager runs hooks one at a time for every
device, so each module an event imports is paid on every boot and every switch. The event
runs as installed (`python -S`) under `-X importtime`; a module outside the budget below (a
new dependency, a module-level import that used to wait in a function, one backend reaching
into the other) fails the test, which names it. Real rules in a namespace."""

from __future__ import annotations

import pytest

from tests.harness.lab import PYTHON
from tests.test_failsafe import HOOK

# The interpreter's own start (-S) and the standard library an event uses.
STANDARD = [
    "__future__",
    "_abc",
    "_codecs",
    "_collections",
    "_collections_abc",
    "_ctypes",
    "_datetime",
    "_frozen_importlib_external",
    "_functools",
    "_io",
    "_operator",
    "_sha2",
    "_sha256",
    "_signal",
    "_socket",
    "_sre",
    "_stat",
    "_struct",
    "_weakrefset",
    "abc",
    "base64",
    "binascii",
    "codecs",
    "collections",
    "collections.abc",
    "copy",
    "copyreg",
    "datetime",
    "encodings",
    "encodings.aliases",
    "encodings.utf_8",
    "enum",
    "fcntl",
    "functools",
    "genericpath",
    "importlib",
    "io",
    "ipaddress",
    "itertools",
    "keyword",
    "marshal",
    "math",
    "org",
    "org.python",
    "operator",
    "org.python.core",
    "os",
    "posix",
    "posixpath",
    "re",
    "re._casefix",
    "re._compiler",
    "re._constants",
    "re._parser",
    "reprlib",
    "signal",
    "stat",
    "struct",
    "time",
    "types",
    "warnings",
    "weakref",
    "zipimport",
]
# nm-zones' own modules an event needs, whichever backend holds the rules (`.*`: a package
# and everything in it; the engine is a package of its parts).
NM_ZONES = [
    "nm_zones",
    "nm_zones.addresses",
    "nm_zones.backends",
    "nm_zones.backends.common",
    "nm_zones.backends.views",
    "nm_zones.config",
    "nm_zones.config.appname",
    "nm_zones.config.load",
    "nm_zones.config.model",
    "nm_zones.config.yamlsource",
    "nm_zones.digest",
    "nm_zones.doors",
    "nm_zones.doors.event",
    "nm_zones.engine",
    "nm_zones.engine.*",
    "nm_zones.errors",
    "nm_zones.files",
    "nm_zones.flows",
    "nm_zones.ifname",
    "nm_zones.lazy",
    "nm_zones.locks",
    "nm_zones.log",
    "nm_zones.networks",
    "nm_zones.networks.identity",
    "nm_zones.networks.zone",
    "nm_zones.paths",
    "nm_zones.protocols",
    "nm_zones.quick",
    "nm_zones.resolve",
    "nm_zones.ruleset",
    "nm_zones.ruleset.allowances",
    "nm_zones.ruleset.build",
    "nm_zones.ruleset.cache",
    "nm_zones.ruleset.layout",
    "nm_zones.ruleset.plan",
    "nm_zones.ruleset.rules",
    "nm_zones.ruleset.sources",
    "nm_zones.state",
    "nm_zones.text",
    "yaml",
    "yaml.*",
]
# Each backend's own: nothing of the other's.
BACKEND = {
    "iptables": [
        "_bisect",  # held.py's walk
        "bisect",
        "errno",
        "zlib",  # held.py's checksums of chain names
        "nm_zones.backends.iptables",
        "nm_zones.backends.iptables.backend",
        "nm_zones.backends.iptables.entries",
        "nm_zones.backends.iptables.held",
        "nm_zones.backends.iptables.iptc_env",
        "nm_zones.backends.iptables.kernel",
        "nm_zones.backends.iptables.libiptc",
        "nm_zones.backends.clib",
    ],
    "nftables": [
        "nm_zones.backends.clib",
        "nm_zones.backends.nftables",
        "nm_zones.backends.nftables.backend",
        "nm_zones.backends.nftables.libnft",
        "nm_zones.backends.nftables.nfnetlink",
        "nm_zones.backends.nftables.view",
        "nm_zones.netlink",  # the views' requests (nfnetlink.py) go over its Channel
    ],
}


def within(module: str, budget: list[str]) -> bool:
    return module in budget or any(
        entry.endswith(".*") and module.startswith(entry[:-1]) for entry in budget
    )


def imported_by_one_event(lab, interface: str) -> list[str]:
    """The modules one `up` event of a new interface imports, as the hook is installed."""
    from nm_zones.doors.install import package_paths

    argv = [PYTHON, "-S", "-X", "importtime", HOOK, interface, "up"]
    result = lab.run(lab.zoned, argv, PYTHONPATH=":".join(package_paths()), CONNECTION_ID="x")
    lines = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    return [line.rsplit("|", 1)[1].strip() for line in lines[1:]]  # [0]: the header


@pytest.mark.both_backends
def test_one_hook_event_imports_only_its_budget(lab, backend):
    lab.nm_zones("reload")  # the hooks and the catch-all: the event binds its interface only
    link = lab.add_link()
    imported = imported_by_one_event(lab, link.name)
    assert "nm_zones.engine" in imported  # the event did the full run, not the quick path
    budget = STANDARD + NM_ZONES + BACKEND[backend]
    outside = sorted({module for module in imported if not within(module, budget)})
    assert not outside, f"one {backend} hook event imports modules outside its budget: {outside}"
    assert f"nmz-if-{link.name}-in" in (
        lab.nft_table() if backend == "nftables" else lab.save("ipv4", "filter")
    )
