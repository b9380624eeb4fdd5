"""Pure logic of what callers can make `nm-zones serve` write (doors/limits.py) and how text
from outside is shown (text.py): no root, no bus."""

from __future__ import annotations

from nm_zones.doors.limits import MAX_BODY, REPLY_LIMIT, RefusalLog, bounded_reply, too_large
from nm_zones.text import printable, shorten, shown_arguments


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_printable_escapes_control_format_and_bidi_characters():
    assert printable("Cafe Wi-Fi") == "Cafe Wi-Fi"
    assert printable("<b>x</b> & y") == "<b>x</b> & y"  # markup is the front end's business
    assert printable("a\nb\tc") == "a\\nb\\tc"
    assert printable("evil\u202etxt.exe") == "evil\\u202etxt.exe"
    assert printable("\u2066x\u2069\x1b[31m") == "\\u2066x\\u2069\\x1b[31m"
    assert printable("Café ☕") == "Café ☕"


def test_shorten_keeps_64_characters_and_says_how_long_it_was():
    assert shorten("eth0") == "eth0"
    assert shorten("x" * 64) == "x" * 64
    assert shorten("x" * 1_048_576) == "x" * 64 + "…(1048576 characters)"
    assert shorten("abcdef", 3) == "abc…(6 characters)"


def test_log_lines_show_every_argument_quoted_and_shortened():
    shown = shown_arguments(("block", "y" * 100_000, True, ["a"] * 10_000))
    assert shown.startswith("('block', '" + "y" * 64 + "'…(100000 characters), True, ['a', ")
    assert len(shown) < 300, len(shown)
    assert shown_arguments(("a\nb",)) == "('a\\nb')"  # a newline cannot start a forged line


def test_a_large_body_is_refused_with_its_size():
    assert too_large(MAX_BODY) is None
    assert too_large(MAX_BODY + 1) == (
        f"the call's arguments take {MAX_BODY + 1} bytes; at most {MAX_BODY} are accepted"
    )


def test_error_replies_shorten_what_they_echo():
    zone = "z" * 3000
    assert bounded_reply(f"INVALID_ZONE: {zone}", ("z" * 3000, "eth0")) == (
        "INVALID_ZONE: " + "z" * 64 + "…(3000 characters)"
    )
    quoted = "q'\n" * 500  # echoed as {value!r} by a handler
    reply = bounded_reply(f"INVALID_VALUE: {quoted!r}: unknown", (quoted,))
    assert len(reply) < 200 and reply.endswith('characters)": unknown'), reply
    assert "\n" not in reply
    # whatever a handler writes, the reply stays bounded
    assert len(bounded_reply("COMMAND_FAILED: " + "w" * 100_000, ())) <= REPLY_LIMIT + 30
    assert bounded_reply("ZONE_CONFLICT: 'eth0' already bound to 'home'", ("home", "eth0")) == (
        "ZONE_CONFLICT: 'eth0' already bound to 'home'"
    )


def test_refusal_lines_are_rate_limited_per_caller_and_summed_up():
    clock = Clock()
    limiter = RefusalLog(burst=5, per_second=1.0, clock=clock)
    admitted = [limiter.admit(":1.42") for _ in range(100)]
    assert admitted == [True] * 5 + [False] * 95
    assert limiter.admit(":1.43")  # another caller has its own share
    assert limiter.holding()
    assert limiter.summaries() == ["95 more refusals from :1.42 suppressed"]
    assert not limiter.holding() and limiter.summaries() == []
    clock.now += 2.5  # two lines' worth again
    assert [limiter.admit(":1.42") for _ in range(3)] == [True, True, False]
    assert limiter.summaries() == ["1 more refusals from :1.42 suppressed"]


def test_many_callers_share_one_bound():
    """A user may open a new connection (a new bus name) for every call."""
    clock = Clock()
    limiter = RefusalLog(burst=5, shared_burst=20, shared_per_second=5.0, clock=clock, summaries=3)
    admitted = sum(limiter.admit(f":1.{n}") for n in range(1000))
    assert admitted == 20
    lines = limiter.summaries()
    assert len(lines) == 4 and lines[-1] == "977 more refusals from 977 other callers suppressed"
    clock.now += 1.0
    assert sum(limiter.admit(f":2.{n}") for n in range(100)) == 5


def test_the_limiter_forgets_callers_but_not_their_count():
    clock = Clock()
    limiter = RefusalLog(burst=1, shared_burst=10_000, clock=clock, callers=10)
    for n in range(50):
        limiter.admit(f":1.{n}")
        limiter.admit(f":1.{n}")  # held back
        clock.now += 0.01
    assert len(limiter.buckets) <= 10
    lines = limiter.summaries()
    held = sum(int(line.split()[0]) for line in lines)
    assert held == 50, lines


# -- the service's memory given back (doors/memory.py) --------------------------------------


def test_a_burst_of_calls_gives_memory_back_once_it_is_over():
    import asyncio

    from nm_zones.doors.memory import QUIET_SECONDS, GiveBack

    trims = []

    async def burst():
        memory = GiveBack()
        memory.trim = trims.append  # the pure logic: when it trims, not glibc
        for _ in range(5):
            memory.after_work()
        assert trims == []  # never before the burst is over (the replies went first)
        await asyncio.sleep(QUIET_SECONDS * 3)
        assert trims == [0] and memory.handle is None
        memory.after_work()
        await asyncio.sleep(QUIET_SECONDS * 3)
        assert trims == [0, 0]

    asyncio.run(burst())


GIVE_BACK = """
import asyncio
from nm_zones.doors.memory import QUIET_SECONDS, GiveBack, share_one_arena
def rss():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0])
share_one_arena()
kept = [bytes(2048) for _ in range(40000)][::50]  # 80 MB built, one block in 50 kept
before = rss()
async def quiet():
    memory = GiveBack()
    memory.after_work()
    await asyncio.sleep(QUIET_SECONDS * 3)
asyncio.run(quiet())
print(before, rss())
"""


def test_the_memory_a_burst_freed_goes_back_to_the_kernel():
    """Real glibc: the gaps between the blocks still in use are returned (malloc_trim)."""
    import subprocess
    import sys

    from tests.harness.lab import REPO, base_env

    result = subprocess.run(
        [sys.executable, "-c", GIVE_BACK],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=base_env(),
        check=True,
    )
    before, after = map(int, result.stdout.split())
    assert before - after > 40_000, (before, after)  # KiB: most of the 80 MB freed
