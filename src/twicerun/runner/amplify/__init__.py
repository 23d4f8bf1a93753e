"""Amplifiers: inputs built to make a quiet step's non-determinism show itself.

Each transform is a pure function from one Parquet file to another (same input,
same output, nothing else read or written), so its properties can be tested on
their own. Each either applies, saying what it changed, or declines, saying why
there was nothing to change; a declined amplifier is never a clean zero.
"""

from twicerun.runner.amplify.base import Applied, Declined, Outcome

__all__ = [
    "Applied",
    "Declined",
    "Outcome",
]
