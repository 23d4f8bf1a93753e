"""Amplifiers: inputs built to make a quiet step's non-determinism show itself.

Each transform is a pure function from one Parquet file to another (same input,
same output, nothing else read or written), so its properties can be tested on
their own. Each either applies, saying what it changed, or declines, saying why
there was nothing to change; a declined amplifier is never a clean zero.
"""

from twicerun.runner.amplify.base import Applied, Declined, Outcome

TIE_COLLAPSE = "tie collapse"
THREAD_COUNT = "thread count"
ROW_MULTIPLICATION = "row multiplication"
ARRIVAL_ORDER = "arrival order"
AMPLIFIERS = (TIE_COLLAPSE, THREAD_COUNT, ROW_MULTIPLICATION, ARRIVAL_ORDER)

__all__ = [
    "AMPLIFIERS",
    "ARRIVAL_ORDER",
    "ROW_MULTIPLICATION",
    "THREAD_COUNT",
    "TIE_COLLAPSE",
    "Applied",
    "Declined",
    "Outcome",
]
