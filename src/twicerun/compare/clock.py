"""Whether the values that moved between two runs read as the time each run was made.

A step that stamps its rows with `now()`, `datetime.now()` or `time.time()` writes a
value that is new on every run, and what differs is when the run happened. The values
themselves say so, whatever their type: each is an instant from the last few days and
not from the future, and every later run's is after every value of run 1's, since the
later run executed after run 1 (for two recorded runs named in either order, one side's
are all after the other's). A timestamp from the data that a parallel step picked
differently (`first(ts)` over ties) is neither: it comes from wherever the data does, and
the later run's pick is as likely earlier as later.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from datetime import UTC, datetime

# A clock read by an earlier run of the same invocation: long backfills run for hours, and
# nothing a clock gives reads as a week old.
RECENT_SECONDS = 7 * 24 * 3600
# Slack against a clock that is not quite the one twicerun reads (another machine's, on Spark).
FUTURE_SECONDS = 60
# A time without a zone is local to some machine: it can be this far from UTC either way.
ZONE_SECONDS = 14 * 3600
# Epoch counts, by how many units make a second: time.time(), milliseconds, micro, nano.
EPOCH_SCALES = (1, 1_000, 1_000_000, 1_000_000_000)

_FRACTION = re.compile(r"(\.\d{6})\d+")

# Whether the two sides may have run in either order: `diff A B` takes two recorded runs
# in the order the user named them, which need not be the order they ran in.
_EITHER_ORDER: ContextVar[bool] = ContextVar("either_order", default=False)


@contextlib.contextmanager
def sides_in_either_order() -> Iterator[None]:
    """Inside, one side's instants all after the other's read as a clock, whichever side."""
    token = _EITHER_ORDER.set(True)
    try:
        yield
    finally:
        _EITHER_ORDER.reset(token)


def _instant(value: object, now: float) -> tuple[float, bool] | None:
    """The value as seconds since the epoch, with whether it named no zone; None for a value
    that is not an instant near `now`."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, datetime):
        return _of_datetime(value)
    if isinstance(value, int | float):
        if not math.isfinite(value):
            return None
        for scale in EPOCH_SCALES:
            seconds = value / scale
            if now - RECENT_SECONDS <= seconds <= now + FUTURE_SECONDS:
                return seconds, False
        return None
    if isinstance(value, str):
        text = value.strip()
        # A time of day is needed: a date alone is midnight, which no clock read gives.
        if ":" not in text or len(text) < 16:
            return None
        try:
            parsed = datetime.fromisoformat(_FRACTION.sub(r"\1", text))
        except ValueError:
            return None
        return _of_datetime(parsed)
    return None


def _of_datetime(value: datetime) -> tuple[float, bool]:
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC).timestamp(), True
    return value.timestamp(), False


def read_as_clock(reference: Iterable[object], later: Iterable[object], now: float) -> bool:
    """Whether every value on both sides is an instant of the recent past and every later
    value is after every reference value (each side as given: the values that moved)."""
    sides = []
    for values in (reference, later):
        instants = []
        for value in values:
            found = _instant(value, now)
            if found is None:
                return False
            seconds, naive = found
            slack = ZONE_SECONDS if naive else 0
            if not now - RECENT_SECONDS - slack <= seconds <= now + FUTURE_SECONDS + slack:
                return False
            instants.append(seconds)
        if not instants:
            return False
        sides.append(instants)
    if _EITHER_ORDER.get() and min(sides[0]) > max(sides[1]):
        return True
    return min(sides[1]) > max(sides[0])
