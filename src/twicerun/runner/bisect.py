"""The single-threaded bisect: re-execute a step that fired, at threads=1, from run 1's inputs.

It runs as many times as the loop did, so its rate has the same denominator
and the two can be read side by side. Inputs always come from the loop's run 1,
even without containment: one step cannot be re-executed alone without
something fixed to read.
"""

from __future__ import annotations

from twicerun.pipeline import Step
from twicerun.result import Series
from twicerun.runner.series import Workbench, run_series
from twicerun.storage.layout import LOOP, RunAddress
from twicerun.vocabulary.loop import BISECT

BISECT_THREADS = 1


def bisect(bench: Workbench, step: Step, runs: int) -> Series:
    inputs = bench.records.visible(RunAddress(LOOP, 1), step.index)
    return run_series(
        bench,
        step,
        kind=BISECT,
        label=f"bisect-{step.index:02d}",
        threads=BISECT_THREADS,
        runs=runs,
        inputs_for=lambda _run: inputs,
    )
