"""Errors that reach the user: each one says where, what, and what would be valid.

Every error of nm-zones derives from NmZonesError, which carries what a door needs to answer
with it: the exit status of the command line and the hook, and the code and D-Bus error name
of the service (firewalld's: `CODE: detail` under org.fedoraproject.FirewallD1.Exception).
Each backend turns its library's errors into these at its own edge (libiptc's and
python-iptables' in backends/iptables/backend.py, netlink's and libnftables' in
backends/nftables/backend.py), so a door needs one handler and never the names of a library's
errors.

No dataclasses here: every event imports this module, and building a dataclass costs more
than the rest of an event's Python code (docs/performance.md).
"""

from __future__ import annotations

EXIT_FAILURE = 1  # a failure: not root, a degraded result, the kernel or the disk refused
EXIT_USAGE = 2  # bad usage or bad config (an unknown zone, a name that cannot be handled)
FIREWALLD_EXCEPTION = "org.fedoraproject.FirewallD1.Exception"


class NmZonesError(Exception):
    """The base of every nm-zones error. `exit_status`: the command's and the hook's;
    `bus_code`: firewalld's error code, `bus_name`: the D-Bus error name (the service's
    answer); `topic`: what the command line says before the message ("kernel")."""

    exit_status = EXIT_FAILURE
    bus_code = "COMMAND_FAILED"
    bus_name = FIREWALLD_EXCEPTION
    topic = ""

    def lines(self) -> list[str]:
        """What the user reads: one line (ConfigError: one per problem)."""
        return [describe(self)]

    def bus_message(self) -> str:
        """The text of the service's error reply: `CODE: detail`, as firewalld says it."""
        return f"{self.bus_code}: {'; '.join(self.lines())}"


class ConfigError(NmZonesError):
    """The configuration cannot be used; `problems` lists every reason found in one pass
    (model.Problem values, each printed as `FILE:LINE: KEY: message`)."""

    exit_status = EXIT_USAGE
    bus_code = "INVALID_ZONE"

    def __init__(self, problems: list):
        self.problems = sorted(set(problems), key=lambda p: (p.file, p.line, p.key, p.message))
        super().__init__("\n".join(str(p) for p in self.problems))

    def lines(self) -> list[str]:
        return [str(problem) for problem in self.problems]


class UsageError(NmZonesError):
    """Bad input on the command line (exit status 2)."""

    exit_status = EXIT_USAGE
    bus_code = "INVALID_VALUE"


def unknown_zone(name: str) -> UsageError:
    return UsageError(f"unknown zone {name!r} (see: nm-zones zones)")


class KernelError(NmZonesError):
    """Netfilter refused a change, the lock could not be had, or the kernel could not be
    asked what a change depends on (exit status 1)."""

    topic = "kernel"


class SystemFailure(NmZonesError, OSError):
    """The kernel or the disk failed a call below netfilter's rules (a netlink socket, a
    library that cannot be loaded): an OSError still, so whatever catches OSError (the
    engine keeps such an error with its interface) does as before."""


def describe(error: BaseException) -> str:
    """One line for any error a run can meet: python-iptables', the kernel's, the disk's."""
    if isinstance(error, OSError) and error.strerror and error.filename:
        return f"{error.filename}: {error.strerror}"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return " ".join(str(error).split()) or type(error).__name__


def system_failure(error: OSError) -> SystemFailure | None:
    """A plain OSError (a library's, the kernel's) as nm-zones' own, with the same errno,
    text and file name, so it is said and caught exactly as before; None for its subclasses
    (PermissionError, FileNotFoundError ...), which callers may tell apart."""
    if type(error) is not OSError:
        return None
    if error.errno is None:
        return SystemFailure(str(error))
    if error.filename is None:
        return SystemFailure(error.errno, error.strerror)
    return SystemFailure(error.errno, error.strerror, error.filename)


def converting_errors(library_errors, convert):
    """A class decorator for a backend, its edge: every public method turns the errors
    `library_errors(backend)` names (a library's own) into nm-zones' by `convert` (None:
    the error stays as it is), so that no door needs to know a library's errors."""

    def wrapped(method):
        def call(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except Exception as error:
                if isinstance(error, NmZonesError) or not isinstance(error, library_errors(self)):
                    raise
                converted = convert(error)
                if converted is None:
                    raise
                raise converted from error

        call.__name__, call.__qualname__, call.__doc__ = (
            method.__name__,
            method.__qualname__,
            method.__doc__,
        )
        return call

    def decorate(cls):
        for name, member in list(vars(cls).items()):
            if callable(member) and not name.startswith("_") and not isinstance(member, type):
                setattr(cls, name, wrapped(member))
        return cls

    return decorate
