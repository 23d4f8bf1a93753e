"""A step re-executed on its own, as a series of runs compared with its own first run.

The bisect and every amplifier are series. A series' run 1 starts from the same
state the loop's run 1 did (the `initial` rows of any ctx.state), and every later
run is compared with run 1 exactly as the loop compares, digests first and the
oracle only where they disagree. Inputs come from the caller, which is how an
amplifier substitutes a stressed artifact.

What a later run reads as state depends on what the series asks. An amplifier
asks whether its inputs alone move the step, so each of its runs starts from the
state its run 1 started from: a step that keeps what its state holds (a merge, a
first-seen table) answered a stressed run from run 1's copy with run 1's answer,
and reordering its input showed nothing. The bisect re-executes another series'
difference at one thread, so it reads state as that series did: run 1's copy for
the contained loop, whose later runs read it, and the initial rows for the
thread-count amplifier.

A series may start as a probe of a few runs and continue, not restart, up to the
full count as soon as a comparison fires.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import duckdb

from twicerun.compare.oracle import ReferenceCache
from twicerun.display import some
from twicerun.errors import BadInput, StepCrashed, StepTimedOut
from twicerun.judge.policy import Policy, judge_step
from twicerun.pipeline import Step
from twicerun.result import ArtifactOutcome, Comparison, Series, only_run_1_apart
from twicerun.runner.engines import Engine
from twicerun.runner.execute import execute_step
from twicerun.runner.own_workers import describe
from twicerun.runner.past_ctx import uncontained, uncontained_moved
from twicerun.runner.progress import Progress, ProgressEvent
from twicerun.runner.records import Records
from twicerun.runner.settle_step import KEEP_PREFIX, WorstComparisons, compare_step
from twicerun.storage.context import ArtifactRef
from twicerun.storage.janitor import Janitor
from twicerun.storage.layout import LOOP, Invocation, RunAddress
from twicerun.vocabulary.loop import Presence, SettledBy


@dataclass
class Workbench:
    """What every series needs from the invocation it belongs to."""

    invocation: Invocation
    records: Records
    connections: Engine
    con: duckdb.DuckDBPyConnection
    keys: Mapping[str, Sequence[str]]
    policy: Policy
    progress: Progress
    steps: int
    janitor: Janitor
    # --step-timeout: an execution still running after this many seconds is stopped.
    timeout: float | None = None


def run_series(
    bench: Workbench,
    step: Step,
    *,
    kind: str,
    label: str,
    threads: int,
    runs: int,
    inputs_for: Callable[[int], Mapping[str, ArtifactRef]],
    probe: int | None = None,
    detail: str | None = None,
    same_inputs_as_loop: bool = False,
    source_order_for: Callable[[int], Callable[[str, int], list[int]] | None] | None = None,
    raise_is_answer: bool = False,
    stop: Callable[[list[Comparison]], str | None] | None = None,
    threads_for: Callable[[int], int] | None = None,
    attribute: bool = False,
    holds_threads: bool = False,
    state_from_run_1: bool = False,
    loop: Sequence[Comparison] = (),
    expect: int | None = None,
) -> Series:
    """`source_order_for(run)` gives the order each ctx.source list is read in on that run.
    With `raise_is_answer`, a later run that raises where run 1 did not is a comparison
    that fired (rows became an error) rather than a failed series. With `attribute`, the
    comparison that left the most rows unmatched is attributed as the loop's are: an
    amplifier's series can be the only evidence a step has. With `holds_threads`, the
    series is only evidence at its own thread count, so a step that sets another one
    itself ends it with that as its error. With `state_from_run_1`, later runs read run 1's
    copy as their ctx.state, as the contained loop's do; without, every run starts from
    the `initial` rows, as run 1 did. `loop` is the loop's comparisons for a series that
    explains them (the bisect), which say how the later runs' answers went alongside what
    each found past ctx. `expect` is how many executions a series that `stop` may end early
    makes at most when it is not (the connections opened ahead for it)."""
    records = bench.records
    reference = RunAddress(label, 1)
    loop_reference = RunAddress(LOOP, 1)
    comparisons: list[Comparison] = []
    cache = ReferenceCache(bench.con)
    worst = (
        WorstComparisons(
            bench.con,
            prefix=f"{KEEP_PREFIX}{label}_",
            address_of=lambda run: RunAddress(label, run),
        )
        if attribute
        else None
    )
    target = min(probe, runs) if probe else runs
    if threads_for is None:
        bench.connections.expect(threads, min(expect, target) if expect else target)
    started = time.perf_counter()
    executed = 0
    rows_read = 0
    # (the count a step set itself, the count it was given), from its first execution that did
    pinned: tuple[int, int] | None = None
    # The threads and processes the step started itself, from its first execution that did
    workers: dict[str, int] | None = None
    # What the step read past ctx, per execution (`uncontained`).
    reached: list[dict[str, str]] = []
    try:
        k = 1
        while k <= target:
            bench.progress(ProgressEvent(kind, k, target, step.index, bench.steps, step.name))
            address = RunAddress(label, k)

            def state_source(name: str, _k=k):
                if _k == 1 or not state_from_run_1:
                    return None
                return records.ref(reference, step.index, name)

            try:
                receipt = execute_step(
                    invocation=bench.invocation,
                    step=step,
                    address=address,
                    threads=threads_for(k) if threads_for else threads,
                    visible=inputs_for(k),
                    state_source=state_source,
                    owners=records.owners(loop_reference),
                    # Run 1 has no run of its own to compare bytes with; the loop's run 1
                    # lets a copy with the same bytes inherit its canonical digest.
                    reference=records.get(reference if k > 1 else loop_reference, step.index),
                    digest_connection=bench.con,
                    connections=bench.connections,
                    source_order=source_order_for(k) if source_order_for else None,
                    # Compared (or deduplicated) and pruned at once below.
                    defer_receipt=True,
                    timeout=bench.timeout,
                )
            except StepCrashed as exc:
                # A run that took longer gave no other answer: never counted as one.
                if not (raise_is_answer and k > 1) or isinstance(exc.error, StepTimedOut):
                    raise
                executed += 1
                comparisons.append(_raised(records.get(reference, step.index), k, exc))
                if k == target < runs:  # rows became an error: that fired
                    target = _escalate(bench, threads, threads_for, target, runs)
                k += 1
                continue
            executed += 1
            records.add(address, receipt, saved=False)
            try:
                if k == 1:
                    rows_read = receipt.rows_read
                    # A first run that wrote what the loop's run 1 wrote need not keep a second
                    # copy: it is read from the loop's instead. The same bytes always qualify;
                    # the same rows in another order qualify when nothing will read this copy
                    # as state (only the oracle reads it then, and it ignores row order).
                    # Only a series on the loop's own inputs can be expected to match it, so
                    # only there is a canonical digest worth computing for this.
                    if (
                        same_inputs_as_loop
                        and not any(r.via == "state" for r in receipt.reads)
                        and _worth_deduplicating(bench, receipt)
                    ):
                        differing = records.bytes_differ(loop_reference, address, step.index)
                        records.ensure_canonical(bench.con, address, step.index, differing)
                        records.ensure_canonical(bench.con, loop_reference, step.index, differing)
                    records.prune_identical(address, step.index, against=loop_reference)
                else:
                    comparison = compare_step(
                        records,
                        bench.con,
                        reference,
                        address,
                        step.index,
                        bench.keys,
                        cache,
                        keep_prefix=worst.keep_prefix(k) if worst else None,
                    )
                    comparisons.append(comparison)
                    if worst:
                        worst.consider(step.index, comparison)
                    records.prune_identical(address, step.index, against=reference)
            finally:
                records.flush(address, step.index)
            if receipt.threads_set_by_step is not None and pinned is None:
                pinned = (receipt.threads_set_by_step, receipt.threads)
                if holds_threads:
                    break
            if receipt.workers_started and workers is None:
                workers = receipt.workers_started
            reached.append(uncontained(receipt))
            if k == target < runs and _fires(comparisons, rows_read, bench.policy):
                target = _escalate(bench, threads, threads_for, target, runs)
            if stop is not None and k > 1 and k < target:
                stopped = stop(comparisons)
                if stopped:
                    detail = f"{detail}; {stopped}" if detail else stopped
                    break
            k += 1
        if worst:
            # Before the series' receipts go: attribution reads what each run read.
            comparisons = worst.attribute(records, step.index, comparisons)
    except (StepCrashed, BadInput) as exc:
        error = str(exc)  # a crash under stress is a finding of the series, not of the run
    else:
        error = None
    finally:
        if worst:
            worst.drop()
        cache.clear()
        _discard_artifacts(bench, label)
    if pinned is not None:
        # Only the count left at the end is known: what ran before the SET had the given one.
        own = (
            f"the step set threads={pinned[0]} itself, so threads={pinned[1]} held at most "
            "until it did"
        )
        if holds_threads:
            error = error or own
        elif detail:
            # Or an amplifier's raised count reads as varied when the step pinned it (to the
            # loop's count, where the loop had no note).
            detail = f"{detail}; but {own}"
    if holds_threads and not error and not any(c.differs for c in comparisons):
        held = _held_here_not_there(records, step.index, runs, reached, loop)
        alone = (
            _only_run_1_found(records, step.index, runs, reached)
            if only_run_1_apart(list(loop))
            else []
        )
        if held:
            # Quiet with what it read past ctx held still says nothing of one thread.
            error = (
                f"{some(held)}, which it reads, changed between the loop's runs "
                f"and held still here, as the last execution before left "
                f"{'it' if len(held) == 1 else 'them'}, so going quiet here says nothing of "
                f"{_one(bench)}"
            )
        elif alone:
            # Only the loop's run 1 differed, and only it found this as it did: a step whose
            # first execution differs. No re-execution stood where run 1 stood.
            error = (
                f"no execution here found {some(alone)}, which it reads, as the loop's run 1 "
                f"did, and run 1 alone wrote other rows, so going quiet here says nothing of "
                f"{_one(bench)}"
            )
    if workers is not None:
        # Its own workers ran in parallel, in whatever order they finished, at any count.
        theirs = (
            f"the step started {describe(workers)} itself, which the thread count does not reach"
        )
        if holds_threads:
            # Quiet at one thread still says DuckDB's or pyarrow's threads mattered, since
            # the step's own workers ran as in the loop; a difference may be theirs.
            if any(c.differs for c in comparisons):
                error = (
                    error or f"{theirs}, so its difference there may be theirs, not one thread's"
                )
        elif detail and (
            threads_for is not None
            or threads != getattr(records.get(loop_reference, step.index), "threads", threads)
        ):
            # Only where the series varies the thread count: the others' claims stand.
            detail = f"{detail}; but {theirs}"
    return Series(
        kind=kind,
        threads=threads,
        runs=executed,
        comparisons=comparisons,
        rows_read=rows_read,
        error=error,
        detail=detail,
        seconds=round(time.perf_counter() - started, 3),
    )


DEDUPLICATE_ABOVE = 1 << 20


def _escalate(bench: Workbench, threads: int, threads_for, target: int, runs: int) -> int:
    """A probe that fired continues to the full count; the connections for the added
    runs are expected from here on."""
    if threads_for is None:
        bench.connections.expect(threads, runs - target)
    return runs


def _one(bench: Workbench) -> str:
    """The bisect's unit of parallelism, as the report words it: on Spark, one task."""
    return "one task" if getattr(bench.connections, "name", "") == "spark" else "one thread"


def _held_here_not_there(
    records: Records,
    index: int,
    runs: int,
    here: list[dict[str, str]],
    loop: Sequence[Comparison] = (),
) -> list[str]:
    """Of what moved between the loop's runs, what every execution here found alike;
    nothing, when later loop runs that found all of it as it was here still gave other
    answers among themselves, since then the step changed with it held still, and one
    thread's quiet with it held still means what it always does."""
    held = [
        name
        for name in uncontained_moved(records, index, runs)
        if len({h.get(name) for h in here}) == 1
    ]
    if not held or not here:
        return held
    answers = {c.run: c.error or c.answer for c in loop}
    alike = set()
    for k in range(2, runs + 1):
        receipt = records.get(RunAddress(LOOP, k), index)
        if receipt is None or k not in answers:
            continue
        found = uncontained(receipt)
        if all(found.get(name) == here[0].get(name) for name in held):
            alike.add(answers[k])
    return [] if len(alike) > 1 else held


def _only_run_1_found(
    records: Records, index: int, runs: int, here: list[dict[str, str]]
) -> list[str]:
    """Of what moved between the loop's runs, what the loop's run 1 found as no later run
    and no execution here did."""
    run_1 = records.get(RunAddress(LOOP, 1), index)
    if run_1 is None:
        return []
    first = uncontained(run_1)
    later = [records.get(RunAddress(LOOP, k), index) for k in range(2, runs + 1)]
    others = [uncontained(r) for r in later if r is not None] + here
    return [
        name
        for name in uncontained_moved(records, index, runs)
        if all(o.get(name) != first.get(name) for o in others)
    ]


def _raised(reference, run: int, exc: StepCrashed) -> Comparison:
    """A later run that raised: every artifact run 1 wrote is missing, and the error says why."""
    artifacts = [
        ArtifactOutcome(
            name=a.name,
            presence=Presence.REFERENCE_ONLY,
            settled_by=SettledBy.PRESENCE,
            differs=True,
            reference_rows=a.rows,
            later_rows=None,
        )
        for a in (reference.artifacts if reference else [])
    ]
    error = " ".join(exc.said.split())
    return Comparison(run=run, fired=True, artifacts=artifacts, error=error[:400])


def _worth_deduplicating(bench: Workbench, receipt) -> bool:
    """Computing a canonical digest to drop a second copy pays only for a copy of some size."""
    size = 0
    for record in receipt.artifacts:
        path = bench.invocation.absolute(record.file)
        if path.exists():
            size += path.stat().st_size
    return size > DEDUPLICATE_ABOVE


def _fires(comparisons: list[Comparison], rows_read: int, policy: Policy) -> bool:
    return judge_step([c.artifacts for c in comparisons], rows_read, policy).fired > 0


def _discard_artifacts(bench: Workbench, label: str) -> None:
    """A series' findings are recorded; its Parquet files are not needed past them."""
    root = bench.invocation.root / label
    if not root.is_dir():
        return
    for path in root.rglob("*.parquet"):
        bench.janitor.remove(path)


def discard_directory(bench: Workbench, name: str) -> None:
    bench.janitor.remove_tree(bench.invocation.root / name)
