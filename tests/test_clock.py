"""Which moved values read as when each run was made (compare/clock.py): the evidence
behind the WALL_CLOCK hint, on values of every form a clock read takes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from twicerun.compare.clock import read_as_clock

NOW = datetime(2026, 12, 7, 8, 30, tzinfo=UTC).timestamp()
RUN_1 = datetime(2026, 12, 7, 8, 29, 1, 250000, tzinfo=UTC)
RUN_2 = RUN_1 + timedelta(seconds=2)


@pytest.mark.parametrize(
    ("reference", "later"),
    [
        pytest.param([RUN_1], [RUN_2], id="tz-aware datetime"),
        pytest.param([RUN_1.replace(tzinfo=None)], [RUN_2.replace(tzinfo=None)], id="naive"),
        pytest.param([RUN_1.isoformat()], [RUN_2.isoformat()], id="ISO text with offset"),
        pytest.param(["2026-12-07 09:29:01.25+01"], ["2026-12-07 08:29:03+00"], id="DuckDB text"),
        pytest.param(["2026-12-07T08:29:01Z"], ["2026-12-07T08:29:03Z"], id="Z"),
        pytest.param(["2026-12-07 08:29:01.123456789"], ["2026-12-07 08:29:03.1"], id="ns text"),
        # Local time twelve hours ahead of UTC, naive: still the time of the run somewhere.
        pytest.param(["2026-12-07 20:29:01"], ["2026-12-07 20:29:03"], id="naive, local"),
        pytest.param([RUN_1.timestamp()], [RUN_2.timestamp()], id="epoch seconds"),
        pytest.param([RUN_1.timestamp() * 1e3], [RUN_2.timestamp() * 1e3], id="milliseconds"),
        pytest.param([int(RUN_1.timestamp() * 1e9)], [int(RUN_2.timestamp() * 1e9)], id="ns"),
        pytest.param(
            [RUN_1, RUN_1 + timedelta(seconds=1)],
            [RUN_2, RUN_2 + timedelta(seconds=1)],
            id="several",
        ),
    ],
)
def test_instants_of_the_recent_past_each_later_than_run_1s_read_as_a_clock(reference, later):
    assert read_as_clock(reference, later, NOW)


@pytest.mark.parametrize(
    ("reference", "later"),
    [
        # A timestamp from the data, picked differently (first(ts) over ties).
        pytest.param([datetime(2024, 3, 1, 9)], [datetime(2024, 3, 1, 7)], id="from the data"),
        # Recent, but the later run's is not after run 1's: order, not the clock.
        pytest.param([RUN_2], [RUN_1], id="later run earlier"),
        pytest.param([RUN_1, RUN_2], [RUN_2], id="overlapping"),
        pytest.param([RUN_1 + timedelta(hours=1)], [RUN_2 + timedelta(hours=1)], id="future"),
        pytest.param([RUN_1 - timedelta(days=30)], [RUN_2 - timedelta(days=30)], id="a month"),
        pytest.param(["2026-12-06"], ["2026-12-07"], id="dates alone"),
        pytest.param(["08:29:01"], ["08:29:03"], id="times of day"),
        pytest.param([RUN_1.isoformat()], [RUN_2.isoformat(), "n/a"], id="one not an instant"),
        pytest.param([1, 2], [3, 4], id="small numbers"),
        pytest.param([True], [True], id="booleans"),
        pytest.param([float("nan")], [RUN_2.timestamp()], id="NaN"),
        pytest.param([None], [RUN_2], id="NULL"),
        pytest.param([], [RUN_2], id="nothing on one side"),
    ],
)
def test_anything_else_does_not(reference, later):
    assert not read_as_clock(reference, later, NOW)
