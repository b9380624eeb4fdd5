"""What a caller of `nm-zones serve` can make the service write, bounded: any local user may
call it, so neither its log nor its replies may grow with what a caller sends.

- A call whose arguments take more than MAX_BODY bytes is refused before anything else
  (no polkit round trip): no legitimate argument comes near it (interface names have 15
  bytes, zone names a few dozen, connection names rarely a hundred).
- Arguments are shortened (text.SHORT characters each, with the original length) in every
  log line and every error reply, and an error reply never exceeds REPLY_LIMIT characters.
- Log lines about callers (refusals) are rate-limited per caller and for all callers
  together (RefusalLog); what is held back is counted and summed up in a few lines.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..text import SHORT, shorten

MAX_BODY = 4096  # bytes of a call's arguments, as the message header counts them
REPLY_LIMIT = 512  # characters of an error reply's message


def too_large(size: int) -> str | None:
    """Why a call with `size` bytes of arguments is refused, or None."""
    if size <= MAX_BODY:
        return None
    return f"the call's arguments take {size} bytes; at most {MAX_BODY} are accepted"


def bounded_reply(message: str, arguments: tuple) -> str:
    """An error reply's message with each long string argument it echoes shortened, and at
    most REPLY_LIMIT characters in all."""
    for value in arguments:
        if isinstance(value, str) and len(value) > SHORT:
            for form in (value, repr(value)[1:-1]):  # as given, or as {value!r} wrote it
                message = message.replace(form, shorten(form))
    return shorten(message, REPLY_LIMIT)


@dataclass
class _Bucket:
    tokens: float
    stamp: float
    held: int = 0  # lines held back since the last summary


class RefusalLog:
    """A token bucket per caller (its unique bus name: BURST lines at once, then PER_SECOND)
    and one for all callers together (a user may open many connections, each with its own
    name). `admit(caller)` says whether to write the line; the lines held back are counted
    per caller and summed up by `summaries()`, in at most SUMMARIES lines."""

    def __init__(
        self,
        burst: int = 5,
        per_second: float = 1.0,
        shared_burst: int = 20,
        shared_per_second: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        callers: int = 1024,
        summaries: int = 5,
    ):
        self.burst, self.per_second = burst, per_second
        self.clock, self.callers, self.summary_lines = clock, callers, summaries
        self.shared_burst, self.shared_per_second = shared_burst, shared_per_second
        self.shared = _Bucket(float(shared_burst), clock())
        self.buckets: dict[str, _Bucket] = {}
        self.evicted = [0, 0]  # lines held back, callers: of buckets dropped to make room

    def admit(self, caller: str) -> bool:
        """True: write this caller's line now. False: it is counted, for `summaries`."""
        now = self.clock()
        bucket = self.buckets.get(caller)
        if bucket is None:
            self._make_room(now)
            bucket = self.buckets[caller] = _Bucket(float(self.burst), now)
        _refill(bucket, now, self.burst, self.per_second)
        _refill(self.shared, now, self.shared_burst, self.shared_per_second)
        if bucket.tokens >= 1 and self.shared.tokens >= 1:
            bucket.tokens -= 1
            self.shared.tokens -= 1
            return True
        bucket.held += 1
        return False

    def holding(self) -> bool:
        """Lines are held back that no summary has counted yet."""
        return bool(self.evicted[0]) or any(b.held for b in self.buckets.values())

    def summaries(self) -> list[str]:
        """`N more refusals from :1.42 suppressed` for the callers held back most (and one
        line for all others); the counts start again."""
        held = sorted(
            ((b.held, caller) for caller, b in self.buckets.items() if b.held), reverse=True
        )
        for bucket in self.buckets.values():
            bucket.held = 0
        shown, rest = held[: self.summary_lines], held[self.summary_lines :]
        lines = [f"{count} more refusals from {caller} suppressed" for count, caller in shown]
        count = sum(count for count, _ in rest) + self.evicted[0]
        if count:
            callers = len(rest) + self.evicted[1]
            lines.append(f"{count} more refusals from {callers} other callers suppressed")
        self.evicted = [0, 0]
        return lines

    def _make_room(self, now: float) -> None:
        """At most CALLERS buckets: first those full again with nothing held, then the
        longest unused."""
        if len(self.buckets) < self.callers:
            return
        for caller, bucket in list(self.buckets.items()):
            _refill(bucket, now, self.burst, self.per_second)
            if bucket.tokens >= self.burst and not bucket.held:
                del self.buckets[caller]
        while len(self.buckets) >= self.callers:
            oldest = min(self.buckets, key=lambda caller: self.buckets[caller].stamp)
            if self.buckets[oldest].held:
                self.evicted[0] += self.buckets[oldest].held
                self.evicted[1] += 1
            del self.buckets[oldest]


def _refill(bucket: _Bucket, now: float, burst: int, per_second: float) -> None:
    bucket.tokens = min(float(burst), bucket.tokens + (now - bucket.stamp) * per_second)
    bucket.stamp = now
