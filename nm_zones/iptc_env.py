"""Import python-iptables fast: every NetworkManager event pays for this import.

A plain `import iptc` costs 250-450 ms: it runs `ldconfig -v` to find the xtables extension
folder, asks `ctypes.util.find_library` (which spawns ldconfig or gcc) for each library, runs
`modprobe` twice, imports setuptools' distutils shim, and pulls in re, subprocess, socket and
shlex, which the rules nm-zones commits never use. Here:

- the libraries are located with a few stat calls, and iptc's `find_library`, `find_libc` and
  `load_kernel` are swapped for versions that use them (modprobe runs only for a module the
  kernel has not loaded yet), before iptc's modules bind those names;
- while iptc imports, `re`, `shlex` and `subprocess` are stand-ins that import the real module
  the first time an attribute is used (rule parsing and printing, never an event), `socket` is
  its C core `_socket` (the constants and address functions iptc uses), `ctypes.util` answers
  from the located paths, and `distutils.sysconfig` is absent (iptc has a fallback).

An iptc that does not have the functions swapped here is imported the slower, plain way.
"""

from __future__ import annotations

import os
import sys

from .lazy import LazyModule, StandIns

_LIBRARIES = ("ip4tc", "ip6tc", "xtables")
_LAZY = ("re", "shlex", "subprocess")


def _library_dirs() -> list[str]:
    multiarch = getattr(sys.implementation, "_multiarch", "")
    dirs = [f"/usr/lib/{multiarch}", f"/lib/{multiarch}"] if multiarch else []
    return [*dirs, "/usr/lib64", "/lib64", "/usr/lib", "/lib"]


def locate_libraries() -> dict[str, str]:
    """Short library name -> path, for libip4tc, libip6tc, libxtables, libc and libxtwrapper."""
    found: dict[str, str] = {}
    prefixes = tuple(f"lib{short}.so" for short in _LIBRARIES)
    for directory in _library_dirs():
        try:  # one pass over what can be thousands of names
            names = [n for n in os.listdir(directory) if n.startswith(prefixes)]
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


def major_version(path: str) -> int:
    """`libxtables.so.12` -> 12, as iptc reads it (it selects libxtables' struct layout)."""
    _, _, after = path.rpartition(".so.")
    digits = ""
    for char in after if ".so." in path else "":
        if not char.isdigit():
            break
        digits += char
    return int(digits) if digits else 0


def module_loaded(name: str) -> bool:
    """True when the kernel has `name` (loaded or built in): modprobe would do nothing."""
    if os.path.isdir(f"/sys/module/{name}"):
        return True
    try:
        with open("/proc/modules") as modules:
            return any(line.split(" ", 1)[0] == name for line in modules)
    except OSError:
        return False


def _stand_ins(known: dict[str, str]) -> dict:
    """Module name -> what stands in for it while iptc imports."""
    lazy_re = LazyModule("re")
    # iptc compiles one pattern at class creation and only ever passes it to re.findall,
    # which takes the pattern text as well (and caches its compilation).
    lazy_re.compile = lambda pattern, flags=0: pattern
    lazy_subprocess = LazyModule("subprocess")  # iptc binds Popen and PIPE when imported
    lazy_subprocess.PIPE = -1
    lazy_subprocess.Popen = lambda *args, **kwargs: lazy_subprocess.real().Popen(*args, **kwargs)
    ctypes_util = LazyModule("ctypes.util")
    ctypes_util.find_library = lambda name: known.get(name) or ctypes_util.real().find_library(name)
    return {
        "re": lazy_re,
        "shlex": LazyModule("shlex"),
        "subprocess": lazy_subprocess,
        "socket": __import__("_socket"),
        "ctypes.util": ctypes_util,
        "distutils": None,  # iptc falls back to sysconfig
        "distutils.sysconfig": None,
    }


def _preload_util():
    """Execute iptc/util.py as `iptc.util` without running iptc/__init__.py first."""
    from importlib.machinery import PathFinder

    package = PathFinder.find_spec("iptc")
    if package is None or not package.submodule_search_locations:
        return None
    spec = PathFinder.find_spec("iptc.util", package.submodule_search_locations)
    if spec is None or spec.loader is None:
        return None
    module = type(sys)("iptc.util")
    module.__spec__, module.__file__, module.__package__ = spec, spec.origin, "iptc"
    module.__loader__ = spec.loader
    sys.modules["iptc.util"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop("iptc.util", None)
        raise
    return module


def _swap_util_functions(util, known: dict[str, str]) -> bool:
    """Give iptc.util library lookups that use the located paths; False if iptc differs."""
    import ctypes

    if not all(hasattr(util, f) for f in ("find_library", "find_libc", "load_kernel")):
        return False
    original_find_library, original_load_kernel = util.find_library, util.load_kernel

    def find_library(*names):
        for name in names:
            if name in known:
                library = ctypes.CDLL(known[name], mode=ctypes.RTLD_GLOBAL)
                return library, major_version(known[name])
        return original_find_library(*names)

    def find_libc():
        return ctypes.CDLL(known["c"], mode=ctypes.RTLD_GLOBAL)

    def load_kernel(name, exc_if_failed=False):
        if not module_loaded(name):
            original_load_kernel(name, exc_if_failed)

    util.find_library, util.find_libc, util.load_kernel = find_library, find_libc, load_kernel
    return True


def import_iptc():
    """Return the iptc module, imported as described above."""
    if "iptc" in sys.modules:
        return sys.modules["iptc"]
    import ctypes

    known = locate_libraries()
    if "xtables-dir" in known:
        os.environ.setdefault("XTABLES_LIBDIR", known["xtables-dir"])
    os.environ.setdefault("SETUPTOOLS_USE_DISTUTILS", "stdlib")
    # setuptools' distutils shim (a .pth file installs it) would answer a distutils import
    # by importing all of setuptools: 0.3 s.
    shims = [f for f in sys.meta_path if type(f).__module__ == "_distutils_hack"]
    for shim in shims:
        sys.meta_path.remove(shim)
    replacements = StandIns(_stand_ins(known))
    try:
        with replacements as stand_ins:
            if "ctypes.util" in stand_ins:
                ctypes.util = stand_ins["ctypes.util"]
            util = _preload_util()
            if util is None or not _swap_util_functions(util, known):
                sys.modules.pop("iptc.util", None)
                for name in _LAZY:  # a plain import, with the real modules
                    if name in stand_ins:
                        del sys.modules[name]
            import iptc
    finally:
        sys.meta_path[0:0] = shims
        if getattr(ctypes, "util", None) is replacements.modules.get("ctypes.util", False):
            del ctypes.util
    return iptc
