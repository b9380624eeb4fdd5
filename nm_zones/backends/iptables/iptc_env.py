"""Import python-iptables fast, and never at the firewall's cost.

A plain `import iptc` costs 100-450 ms: it runs `ldconfig -v` to find the xtables extension
folder, asks `ctypes.util.find_library` (which spawns ldconfig or gcc) for each library, runs
`modprobe` twice, imports distutils (setuptools' shim, when installed), and pulls in re,
subprocess, socket and shlex, which the rules nm-zones commits never use. The tuned import:

- locates the libraries with a few directory listings, by their versioned names
  (`libxtables.so.12`: iptc reads the major version from the name to pick libxtables' struct
  layout; the unversioned `libxtables.so` of libxtables-dev says nothing), and swaps iptc's
  `find_library`, `find_libc` and `load_kernel` for versions that use them (modprobe runs
  only for a module the kernel has not loaded yet), before iptc's modules bind those names;
- while iptc imports, `re`, `shlex`, `subprocess`, `socket`, `ctypes.util`, `sysconfig` and
  `distutils.sysconfig` are stand-ins that hand every use on to the real module, imported
  then (rule parsing and printing, never an event); only what is the same either way is
  answered without it (socket's constants and address functions from its C core `_socket`,
  `subprocess.PIPE`).

Whatever goes wrong there, iptc and the stand-ins leave sys.modules, the environment is put
back, and iptc is imported the plain way; when that fails too, the error (KernelError) names
the library and its version.
"""

from __future__ import annotations

import os
import sys

from ...lazy import LazyModule, StandIns

_LIBRARIES = ("ip4tc", "ip6tc", "xtables")
_ENVIRONMENT = ("XTABLES_LIBDIR", "SETUPTOOLS_USE_DISTUTILS")
# What socket.py takes from _socket unchanged (its AF_* constants become enum members there,
# equal to these ints); any other name is the real socket module's.
_SOCKET_FUNCTIONS = ("inet_pton", "inet_ntop", "inet_aton", "inet_ntoa", "error")
_SOCKET_FUNCTIONS += ("htonl", "htons", "ntohl", "ntohs")


def _library_dirs() -> list[str]:
    multiarch = getattr(sys.implementation, "_multiarch", "")
    dirs = [f"/usr/lib/{multiarch}", f"/lib/{multiarch}"] if multiarch else []
    return [*dirs, "/usr/lib64", "/lib64", "/usr/lib", "/lib"]


def versioned_library(names: list[str], short: str) -> str | None:
    """Among file names, the library `lib<short>.so.MAJOR` to load: the soname form
    (`libxtables.so.12`) of the highest major, else the shortest name with a major
    (`libxtables.so.12.7.0`); never the unversioned development link `libxtables.so`."""
    prefix = f"lib{short}.so."
    best: tuple | None = None
    for name in names:
        if not name.startswith(prefix):
            continue
        version = name[len(prefix) :].split(".")
        if not version[0].isdigit():
            continue
        rank = (int(version[0]), -len(version), -len(name))
        if best is None or rank > best[0]:
            best = (rank, name)
    return best[1] if best else None


def locate_libraries() -> dict[str, str]:
    """Short library name -> path, for libip4tc, libip6tc, libxtables, libc and libxtwrapper,
    and "xtables-dir" -> the extension folder next to libxtables."""
    found: dict[str, str] = {}
    prefixes = tuple(f"lib{short}.so." for short in _LIBRARIES)
    for directory in _library_dirs():
        try:  # one pass over what can be thousands of names
            names = [n for n in os.listdir(directory) if n.startswith(prefixes)]
        except OSError:
            continue
        for short in _LIBRARIES:
            library = None if short in found else versioned_library(names, short)
            if library:
                found[short] = os.path.join(directory, library)
                if short == "xtables" and os.path.isdir(os.path.join(directory, "xtables")):
                    found["xtables-dir"] = os.path.join(directory, "xtables")
        if all(short in found for short in _LIBRARIES):
            break
    found["c"] = "libc.so.6"
    from _imp import extension_suffixes  # importlib.machinery's EXTENSION_SUFFIXES: 1 ms more

    for entry in sys.path:
        for suffix in extension_suffixes():
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


class LazyPattern:
    """What the `re` stand-in's compile returns: the pattern, compiled on first use."""

    __slots__ = ("_compiled", "_pattern", "_re")

    def __init__(self, lazy_re: LazyModule, pattern, flags: int):
        self._re, self._pattern, self._compiled = lazy_re, (pattern, flags), None

    def real(self):
        if self._compiled is None:
            self._compiled = self._re.real().compile(*self._pattern)
        return self._compiled

    def __getattr__(self, attribute: str):
        return getattr(self.real(), attribute)


class LazyRe(LazyModule):
    """`re` until first use; its functions also take a LazyPattern where re takes a pattern."""

    def compile(self, pattern, flags: int = 0) -> LazyPattern:
        return LazyPattern(self, pattern, flags)

    def __getattr__(self, attribute: str):
        value = super().__getattr__(attribute)
        if type(value) is not type(_real_pattern):  # classes (re.error), constants: as they are
            return value
        # re's functions (findall, sub, ...): with the LazyPattern compiled first

        def call(*args, **kwargs):
            args = tuple(_real_pattern(a) for a in args)
            return value(*args, **{k: _real_pattern(a) for k, a in kwargs.items()})

        return call


def _real_pattern(value):
    return value.real() if isinstance(value, LazyPattern) else value


def _stand_ins() -> dict:
    """Module name -> what stands in for it while iptc imports."""
    subprocess = LazyModule("subprocess")  # iptc binds Popen and PIPE when imported

    def popen(*args, **kwargs):
        return subprocess.real().Popen(*args, **kwargs)

    subprocess.PIPE, subprocess.Popen = -1, popen
    import _socket

    socket = LazyModule("socket")
    for name, value in vars(_socket).items():
        if name in _SOCKET_FUNCTIONS or (type(value) is int and name.isupper()):
            setattr(socket, name, value)
    distutils_sysconfig = LazyModule("distutils.sysconfig")  # 12-20 ms; iptc 1.0.1 needs it

    def get_python_lib(*args, **kwargs):
        try:
            return distutils_sysconfig.real().get_python_lib(*args, **kwargs)
        except ImportError:  # no distutils (Python 3.12): what python-iptables 1.2 does then
            import sysconfig as paths

            return paths.get_path("purelib")

    distutils_sysconfig.get_python_lib = get_python_lib
    sysconfig = LazyModule("sysconfig")  # iptc.util binds get_config_var: for a library
    sysconfig.get_config_var = lambda name: sysconfig.real().get_config_var(name)  # not found
    return {
        "sysconfig": sysconfig,
        "re": LazyRe("re"),
        "shlex": LazyModule("shlex"),
        "subprocess": subprocess,
        "socket": socket,
        "ctypes.util": LazyModule("ctypes.util"),
        "distutils.sysconfig": distutils_sysconfig,
    }


def _preload_util():
    """Execute iptc/util.py as `iptc.util` without running iptc/__init__.py first."""
    PathFinder = _path_finder()

    package = PathFinder.find_spec("iptc")
    if package is None or not package.submodule_search_locations:
        raise ImportError("no module named 'iptc'")
    spec = PathFinder.find_spec("iptc.util", package.submodule_search_locations)
    if spec is None or spec.loader is None:
        raise ImportError("python-iptables without iptc.util")
    module = type(sys)("iptc.util")
    module.__spec__, module.__file__, module.__package__ = spec, spec.origin, "iptc"
    module.__loader__ = spec.loader
    sys.modules["iptc.util"] = module
    spec.loader.exec_module(module)
    return module


def _path_finder():
    """importlib.machinery.PathFinder, without importing importlib (and warnings) on every
    event: the import system's own, which it keeps in sys.meta_path."""
    for finder in sys.meta_path:
        if getattr(finder, "__name__", "") == "PathFinder" and hasattr(finder, "find_spec"):
            return finder
    from importlib.machinery import PathFinder

    return PathFinder


def _swap_util_functions(util, known: dict[str, str]) -> None:
    """Give iptc.util library lookups that use the located paths."""
    import ctypes

    missing = {"find_library", "find_libc", "load_kernel"} - set(dir(util))
    if missing:
        raise ImportError(f"python-iptables without {', '.join(sorted(missing))} in iptc.util")
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


def _tuned_import():
    import ctypes

    known = locate_libraries()
    missing = [f"lib{short}.so.N" for short in _LIBRARIES if short not in known]
    if missing:
        raise ImportError(f"not found: {', '.join(missing)}")
    if "xtables-dir" in known:
        os.environ.setdefault("XTABLES_LIBDIR", known["xtables-dir"])
    os.environ.setdefault("SETUPTOOLS_USE_DISTUTILS", "stdlib")
    with StandIns(_stand_ins()) as stand_ins:
        if "ctypes.util" in stand_ins:  # `import ctypes.util` binds ctypes, then uses .util
            ctypes.util = stand_ins["ctypes.util"]  # stays until the real one is imported
        _swap_util_functions(_preload_util(), known)
        import iptc
    return iptc


def _forget_iptc() -> None:
    """Take what an import of iptc left behind out of sys.modules: a partly imported iptc,
    the stand-ins (ctypes.util included), so that the next import starts clean."""
    for name in [n for n in sys.modules if n == "iptc" or n.startswith("iptc.")]:
        del sys.modules[name]
    import ctypes

    if isinstance(getattr(ctypes, "util", None), LazyModule):
        del ctypes.util


def version_of_iptc() -> str:
    """`python-iptables 1.0.1` as its iptc/version.py says, read without importing iptc."""
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("iptc")
    folders = (spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        try:
            with open(os.path.join(folder, "version.py"), encoding="utf-8") as stream:
                for line in stream:
                    name, _, value = line.partition("=")
                    if name.strip() == "__version__":
                        return f"python-iptables {value.strip().strip(chr(34) + chr(39))}"
        except OSError:
            pass
    return "python-iptables"


def import_iptc():
    """Return the iptc module: the tuned import described above, else the plain one."""
    if "iptc" in sys.modules:
        return sys.modules["iptc"]
    environment = {name: os.environ.get(name) for name in _ENVIRONMENT}
    # setuptools' distutils shim (a .pth file installs it) would answer a distutils import
    # by importing all of setuptools: 0.3 s.
    shims = [f for f in sys.meta_path if type(f).__module__ == "_distutils_hack"]
    for shim in shims:
        sys.meta_path.remove(shim)
    try:
        return _tuned_import()
    except Exception:  # any failure here ends in the plain import
        _forget_iptc()
        for name, value in environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    finally:
        sys.meta_path[0:0] = shims
    try:
        import iptc
    except Exception as error:  # whatever it is: one clear line
        from ...errors import KernelError

        _forget_iptc()
        reason = " ".join(str(error).split()) or "no reason given"
        raise KernelError(
            f"{version_of_iptc()} cannot be imported: {type(error).__name__}: {reason}"
        ) from None
    return iptc
