"""The single-threaded bisect: re-execute a step that fired, at threads=1, from run 1's inputs.

It runs at most as many times as the loop did, and stops as soon as its verdict
cannot change: at the first difference (one thread already shows it, so the
thread count is not the explanation), or once enough quiet comparisons have
come up that they would have been improbable had one thread differed as often
as the loop's threads did (`judge.cause.quiet_chance`). A step the loop saw
differ every time is settled in two comparisons, not four; a rare one still
gets the full count. Inputs always come from the loop's run 1, even without
containment: one step cannot be re-executed alone without something fixed to
read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from twicerun.judge.cause import CONFIDENCE, quiet_chance
from twicerun.pipeline import Step
from twicerun.result import Comparison, Series
from twicerun.runner.series import Workbench, run_series
from twicerun.storage.layout import LOOP, RunAddress
from twicerun.vocabulary.loop import BISECT

BISECT_THREADS = 1


def bisect(
    bench: Workbench,
    step: Step,
    runs: int,
    differed: int,
    compared: int,
    *,
    state_from_run_1: bool = True,
    loop: Sequence[Comparison] = (),
) -> Series:
    """`differed` of `compared` is what the series it explains measured for this step: the
    loop, whose later runs read run 1's copy as state, or the thread-count amplifier,
    whose runs all start from the initial rows (`state_from_run_1=False`). The bisect
    reads state as that series did, or it would re-execute another question.
    `loop` is the loop's comparisons, when the bisect explains the loop."""
    inputs = bench.records.visible(RunAddress(LOOP, 1), step.index)
    return run_series(
        bench,
        step,
        kind=BISECT,
        label=f"bisect-{step.index:02d}",
        threads=BISECT_THREADS,
        runs=runs,
        inputs_for=lambda _run: inputs,
        stop=enough(differed, compared),
        # Told how many executions it makes when nothing differs, the helpers open none
        # past them: expecting the full count left one bisect's unused connections open
        # at the end of most invocations whose steps fired.
        expect=most_executions(differed, compared, runs),
        # A step that sets its own thread count never ran at one: no cause either way.
        holds_threads=True,
        state_from_run_1=state_from_run_1,
        loop=loop,
    )


def most_executions(differed: int, compared: int, runs: int) -> int:
    """How many executions the bisect makes when none of its comparisons differs: `enough`
    stops it after this many, or the loop's count does."""
    for quiet in range(1, runs):
        if quiet_chance(differed, compared, quiet) < 1 - CONFIDENCE:
            return quiet + 1
    return runs


def enough(differed: int, compared: int) -> Callable[[list[Comparison]], str | None]:
    """The bisect's stopping rule, given the loop's count: a reason to stop, or None."""

    def stop(comparisons: list[Comparison]) -> str | None:
        if any(c.differs or c.error for c in comparisons):
            return "stopped at the first difference, which settles the cause"
        quiet = len(comparisons)
        chance = quiet_chance(differed, compared, quiet)
        if chance < 1 - CONFIDENCE:
            return (
                f"stopped after {quiet} quiet comparisons: had one thread differed as often "
                f"as the loop's {differed} of {compared}, that would have come up "
                f"{chance:.0%} of the time"
            )
        return None

    return stop
