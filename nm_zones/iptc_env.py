"""Import python-iptables fast: every NetworkManager event pays for this import.

A plain `import iptc` runs `ldconfig -v` to find the xtables extension folder and asks
`ctypes.util.find_library` (which spawns ldconfig or gcc) for each library; together that is
hundreds of milliseconds. Here the libraries are located with a few stat calls and handed over
while iptc imports, which keeps the import to a few tens of milliseconds.
"""

from __future__ import annotations

import os
import sys

_LIBRARIES = ("ip4tc", "ip6tc", "xtables")


def _library_dirs() -> list[str]:
    multiarch = getattr(sys.implementation, "_multiarch", "")
    dirs = [f"/usr/lib/{multiarch}", f"/lib/{multiarch}"] if multiarch else []
    return [*dirs, "/usr/lib64", "/lib64", "/usr/lib", "/lib"]


def locate_libraries() -> dict[str, str]:
    """Short library name -> path, for libip4tc, libip6tc, libxtables, libc and libxtwrapper."""
    found: dict[str, str] = {}
    for directory in _library_dirs():
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for short in _LIBRARIES:
            if short in found:
                continue
            prefix = f"lib{short}.so"
            versions = sorted(n for n in names if n.startswith(prefix + ".") or n == prefix)
            if versions:
                found[short] = os.path.join(directory, min(versions, key=len))
        if all(short in found for short in _LIBRARIES):
            found["xtables-dir"] = os.path.join(directory, "xtables")
            break
    found["c"] = "libc.so.6"
    from importlib.machinery import EXTENSION_SUFFIXES

    for entry in sys.path:
        for suffix in EXTENSION_SUFFIXES:
            candidate = os.path.join(entry or ".", "libxtwrapper" + suffix)
            if os.path.exists(candidate):
                found["xtwrapper"] = candidate
                return found
    return found


def import_iptc():
    """Return the iptc module, imported with the libraries located beforehand.

    While iptc imports, `ctypes.util` is a stand-in that answers find_library from the
    located paths (the real module pulls in shutil, tempfile and re, and spawns ldconfig or
    gcc for each library); any name it does not know goes to the real one.
    """
    if "iptc" in sys.modules:
        return sys.modules["iptc"]
    import ctypes

    known = locate_libraries()
    if "xtables-dir" in known:
        os.environ.setdefault("XTABLES_LIBDIR", known["xtables-dir"])
    os.environ.setdefault("SETUPTOOLS_USE_DISTUTILS", "stdlib")

    def find_library(name: str):
        if name in known:
            return known[name]
        sys.modules.pop("ctypes.util", None)
        import ctypes.util as real

        return real.find_library(name)

    # setuptools' distutils shim (a .pth file installs it) would answer iptc's
    # `from distutils.sysconfig import ...` by importing all of setuptools: 0.3 s. Without
    # it, the standard library's distutils (or, where there is none, iptc's own fallback).
    shims = [f for f in sys.meta_path if type(f).__module__ == "_distutils_hack"]
    for shim in shims:
        sys.meta_path.remove(shim)
    stand_in = type(sys)("ctypes.util")
    stand_in.find_library = find_library
    previous = sys.modules.get("ctypes.util")
    sys.modules["ctypes.util"] = stand_in
    ctypes.util = stand_in
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import iptc
    finally:
        sys.meta_path[0:0] = shims
        if previous is not None:
            sys.modules["ctypes.util"] = ctypes.util = previous
        else:
            sys.modules.pop("ctypes.util", None)
            del ctypes.util
    return iptc


NAT_TARGETS = frozenset({"DNAT", "SNAT", "MASQUERADE", "REDIRECT"})
