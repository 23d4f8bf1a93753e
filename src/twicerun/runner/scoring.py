"""Turning measured comparisons into a step's verdict under a policy.

The same functions score a step right after `run` measured it and again when
`twicerun judge` re-scores a saved invocation, so the two cannot drift apart:
only the policy differs, never the findings. The loop, the single-threaded
bisect and every amplifier are scored alike; the cause comes from the bisect's
rate and the status from the loop's and the amplifiers'.
"""

from __future__ import annotations

from dataclasses import replace

from twicerun.display import listed
from twicerun.judge.cause import cause, upper_bound
from twicerun.judge.policy import FIRES, Policy, differing_pairs, judge_step
from twicerun.judge.status import final_status
from twicerun.result import Comparison, Environment, Result, Series, StepResult
from twicerun.vocabulary.loop import BISECT, Amplifier, Cause, Hint

# What no run of twicerun varies, whatever a step's status says. The DuckDB version is
# listed only where DuckDB ran the steps: on Spark it only digests and compares what they
# wrote, which is no part of their answer (engine_not_varied names Spark's instead).
DUCKDB_VERSION = "DuckDB version"
ALWAYS_NOT_VARIED = (
    "memory limit and spilling",
    "input distribution beyond what the amplifiers changed",
    "wall clock",
    "filesystem",
)
# Every run shares one interpreter, whose string hash seed is fixed at start-up: a step
# that writes a set of strings in iteration order agrees with itself here and differs in
# the next process (docs/pipelines.md; `twicerun diff` shows it). On DuckDB the audit runs
# each step again in another process (verdicts.md); on Spark it does not.
PROCESS = "the Python process (its string hash seed, so the order of a set of strings{})"
AUDIT_VARIES_IT = "; `twicerun audit` varies it"


def _judged(
    comparisons: list[Comparison], rows_read: int, policy: Policy, reassociation: bool = True
):
    judgement = judge_step([c.artifacts for c in comparisons], rows_read, policy, reassociation)
    scored = [
        replace(c, verdict=v, fired=v == FIRES)
        for c, v in zip(comparisons, judgement.verdicts, strict=True)
    ]
    return judgement, scored


def score_series(series: Series, policy: Policy) -> Series:
    # The bisect runs one thread on the loop's own inputs, in the same order every time:
    # there is no other order of adding for its drift to come from.
    judgement, comparisons = _judged(
        series.comparisons, series.rows_read, policy, reassociation=series.kind != BISECT
    )
    compared = sum(1 for c in comparisons if c.artifacts)
    return replace(
        series,
        comparisons=comparisons,
        fired=judgement.fired,
        tolerated=judgement.tolerated,
        compared=compared,
        zero_bound=upper_bound(0, compared) if compared and not judgement.fired else None,
        classes=judgement.classes,
        outside_bound=series.kind != BISECT and any(not b.clears_loose for b in judgement.bounds),
    )


def _hints(step: StepResult, why: Cause | None) -> list[str]:
    """What the values that moved suggest: values that read as when each run was made
    (compare/clock.py) are a clock read, and a UUID column that moved is most often uuid()
    or gen_random_uuid() handing out new ids every run. Neither is suggested where one
    thread stopped the step differing: a clock and new ids move at one thread too, and a
    timestamp or an id the step picked among tied rows (`first(ts)`) is order."""
    if why is Cause.PARALLEL_ORDER:
        return []
    for comparison in step.comparisons:
        for artifact in comparison.artifacts:
            f = artifact.findings
            if not comparison.fired or f is None:
                continue
            if any(d.clock for d in f.drift):
                return [Hint.WALL_CLOCK]
            if f.attribution is None:
                continue
            if f.attribution.clock or (
                # Recorded before the values were read (0.7.16 and earlier): the type.
                f.attribution.clock is None and f.attribution.column in f.timestamps
            ):
                return [Hint.WALL_CLOCK]
            if f.attribution.column in f.uuids:
                return [Hint.RANDOM_UUID]
    return []


def gone_at_one_thread(step: StepResult) -> bool:
    """Whether the loop's drift can be the order threads added in: one thread, re-executed
    on the same inputs, showed no difference at all (measured, before any policy). A step
    the bisect did not run on (a loop at one thread) has no such evidence."""
    bisect = step.bisect
    return (
        bisect is not None
        and bisect.ran
        and bool(bisect.comparisons)
        and not any(c.error or differing_pairs(c.artifacts) for c in bisect.comparisons)
    )


def thread_count_fired(step: StepResult) -> Series | None:
    """The thread-count series of a step the loop found quiet, when it fired: a difference
    measured at more threads (on Spark, other partition counts), which the bisect can
    then explain as it explains the loop's."""
    for series in step.amplifiers:
        # A joint probe's difference needs its other members' stressed inputs too, which
        # the bisect (on the loop's inputs) does not have: it cannot explain that one.
        if (
            series.kind == Amplifier.THREAD_COUNT
            and not series.probed_with
            and series.ran
            and series.fired
        ):
            return series
    return None


def score_step(step: StepResult, policy: Policy) -> StepResult:
    """The step with its fire counts, classes, bounds, cause and status set."""
    judgement, comparisons = _judged(
        step.comparisons, step.rows_read, policy, reassociation=gone_at_one_thread(step)
    )
    compared = sum(1 for c in comparisons if c.artifacts)
    bisect = score_series(step.bisect, policy) if step.bisect else None
    amplifiers = [score_series(a, policy) for a in step.amplifiers]
    fired = judgement.fired
    step = replace(
        step,
        comparisons=comparisons,
        fired=fired,
        tolerated=judgement.tolerated,
        compared=compared,
        classes=judgement.classes,
        bounds=judgement.bounds,
        bisect=bisect,
        amplifiers=amplifiers,
    )
    why = (
        cause(bisect.fired, bisect.compared)
        if (fired or thread_count_fired(step)) and bisect and bisect.ran
        else None
    )
    return replace(
        step,
        cause=why,
        status=final_status(
            fired,
            compared,
            sum(a.fired for a in amplifiers if a.ran),
            any(a.error for a in amplifiers),
        ),
        zero_bound=upper_bound(0, compared) if compared and not fired else None,
        hints=_hints(step, why) if fired else [],
    )


def engine_not_varied(engine: str, master: str | None) -> list[str]:
    """What a run on this engine holds fixed, beyond what every run does."""
    if engine != "spark":
        return []
    axes = ["Spark version and settings"]
    if master and not master.startswith("local"):
        axes.append(
            f"the cluster at {master}: its executors, their number and memory, and where "
            f"tasks ran (only shuffle partitions and input partitioning were varied)"
        )
    return axes


def not_varied(
    steps: list[StepResult],
    amplified: bool,
    environment: Environment | None = None,
    off: list[str] | tuple[str, ...] = (),
) -> list[str]:
    """The axes this invocation did not touch, for the end of every report."""
    spark = environment is not None and environment.engine == "spark"
    axes = [
        *([] if spark else [DUCKDB_VERSION]),
        *ALWAYS_NOT_VARIED,
        PROCESS.format("" if spark else AUDIT_VARIES_IT),
    ]
    if environment is not None:
        axes += engine_not_varied(environment.engine, environment.spark_master)
    threads_off = not amplified or str(Amplifier.THREAD_COUNT) in off
    if environment is not None and environment.threads == 1 and threads_off:
        # One thread orders a run's work the same way every time, and nothing else here
        # changes how many share it.
        axes.append(
            f"the thread count: every run was at {'partitions' if spark else 'threads'}=1, "
            f"where no step can show a difference that comes from the order of parallel work "
            f"(--threads 2 or more varies it, and so does the thread-count amplifier)"
        )
    if not amplified:
        axes.append("every amplifier (--no-amplify)")
    elif off:
        axes.append(f"{listed(list(off))} on any step (--without)")
    declined = sorted({a.kind for s in steps for a in s.amplifiers if a.declined})
    if declined:
        axes.append(f"and, on the steps where it declined, {listed(declined)}")
    return axes


def score(result: Result, policy: Policy) -> Result:
    """Re-score every step of a Result under `policy`; measurements are untouched."""
    steps = [score_step(s, policy) for s in result.steps]
    return replace(
        result,
        policy=policy.name,
        tolerance_rel=policy.tolerance_rel,
        tolerance_ulps=policy.tolerance_ulps,
        steps=steps,
        not_varied=not_varied(steps, result.amplified, result.environment, result.amplifiers_off),
    )
