"""C functions of a shared library as Python callables, through _ctypes, ctypes' C core.

Every process that commits loads one such library (libnftables, libiptc), and every iptables
event calls libc's getsockopt to read a table (iptables/held.py): the ctypes package on top
of _ctypes would cost each of them 1-3 ms more to import, and the few calls nm-zones makes
need only the types below.
"""

from __future__ import annotations

# ctypes' _type_ codes used in a signature: P void * (a handle, a buffer, or bytes passed as
# they are), z char * (bytes in, bytes or None out), I unsigned int, i int, ? bool; None: void;
# c char, for buffers
TYPE_CODES = "PzIi?c"


class Functions:
    """One attribute per C function named in `calls` (Python name -> (result, arguments)
    as TYPE_CODES strings), found in the library `handle` (from _ctypes.dlopen) as
    `prefix + name`; `use_errno` keeps each call's errno for `errno()`."""

    def __init__(self, handle: int, calls: dict, prefix: str = "", use_errno: bool = False):
        import _ctypes

        self._ctypes = _ctypes
        types = _types(_ctypes)
        self.c_uint, self._char = types["I"], types["c"]
        flags = _ctypes.FUNCFLAG_CDECL | (_ctypes.FUNCFLAG_USE_ERRNO if use_errno else 0)
        # one class for all: each function's types are set on it (a class each would cost
        # a library of 18 calls 0.4 ms more to load)
        function_type = type("Function", (_ctypes.CFuncPtr,), {"_flags_": flags})

        class Library:
            _handle = handle

        for name, (result, arguments) in calls.items():
            function = function_type((prefix + name, Library))
            function.restype = types[result]
            function.argtypes = tuple(types[code] for code in arguments)
            setattr(self, name, function)

    def errno(self) -> int:
        """The errno the last call of this thread left (with use_errno)."""
        return self._ctypes.get_errno()

    def pointer_to(self, value):
        """`&value`, for an argument of type P."""
        return self._ctypes.byref(value)

    def buffer(self, size: int):
        """`char[size]`, zeroed, for an argument of type P that the function writes into."""
        kind = type("Buffer", (self._ctypes.Array,), {"_type_": self._char, "_length_": size})
        return kind()


def _types(_ctypes) -> dict:
    """TYPE_CODES -> ctypes' simple types, made from _ctypes alone; None: void."""
    types: dict = {None: None}
    for code in TYPE_CODES:
        types[code] = type(f"c_{code}", (_ctypes._SimpleCData,), {"_type_": code})
    return types
