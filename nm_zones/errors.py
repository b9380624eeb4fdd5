"""Errors that reach the user: each one says where, what, and what would be valid."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong in one file, printed as `FILE:LINE: KEY: message`."""

    file: str
    line: int
    key: str
    message: str

    def __str__(self) -> str:
        key = f" {self.key}:" if self.key else ""
        return f"{self.file}:{self.line}:{key} {self.message}"


def problem_order(problem: Problem) -> tuple:
    return (problem.file, problem.line, problem.key, problem.message)


class ConfigError(Exception):
    """The configuration cannot be used; `problems` lists every reason found in one pass."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(set(problems), key=problem_order)
        super().__init__("\n".join(str(p) for p in self.problems))


class UsageError(Exception):
    """Bad input on the command line (exit status 2)."""


def unknown_zone(name: str) -> UsageError:
    return UsageError(f"unknown zone {name!r} (see: nm-zones zones)")


class KernelError(Exception):
    """Netfilter refused a change, or the lock could not be had (exit status 1)."""
