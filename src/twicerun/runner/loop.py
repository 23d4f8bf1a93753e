"""The main loop: N runs of every step, run 1 the reference, each later run compared to it.

Containment (on by default) makes every step of runs 2..N read run 1's
upstream artifacts, so a divergence at one step cannot reach the next and be
charged to it. `ctx.state` resolves to the reference run's copy when
contained (each later run is one rerun on top of run 1) and to the previous
run's copy when not (the reruns pile up, as they would in production).

Each later run's step is compared with run 1 as soon as it has run: equal
bytes or equal canonical digests settle a pair, and only a pair the digests
cannot settle goes to the oracle. The policy scores the findings afterwards.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb

from twicerun.compare.oracle import ReferenceCache, compare_artifacts
from twicerun.compare.pair import Side, settle
from twicerun.errors import TwicerunError, UsageError
from twicerun.judge.policy import Policy
from twicerun.pipeline import Pipeline, load_pipeline
from twicerun.result import ArtifactOutcome, Comparison, Result, StepResult
from twicerun.runner.environment import default_threads, stamp
from twicerun.runner.execute import execute_step
from twicerun.runner.keys import KeyChecker
from twicerun.runner.progress import Progress, ProgressEvent, silent
from twicerun.runner.records import Records
from twicerun.runner.scoring import score_step
from twicerun.storage.atomic import write_bytes_atomic
from twicerun.storage.context import Connections, open_connection
from twicerun.storage.layout import (
    COMPLETED,
    FAILED,
    INTERRUPTED,
    LOOP,
    Invocation,
    RunAddress,
)
from twicerun.storage.retention import kept_failures, prune

DEFAULT_RUNS = 5
DEFAULT_RUN_DIR = Path(".twicerun")


@dataclass(frozen=True)
class LoopOptions:
    runs: int = DEFAULT_RUNS
    threads: int | None = None
    containment: bool = True
    run_dir: Path = DEFAULT_RUN_DIR
    keep: int = 1
    seeds: Mapping[str, int] = field(default_factory=dict)
    policy: Policy = field(default_factory=Policy)
    keys: Mapping[str, Sequence[str]] = field(default_factory=dict)


def run_pipeline(path: str | Path, options: LoopOptions, progress: Progress = silent) -> Result:
    """Load the pipeline, run the loop, compare, and return the Result (also saved)."""
    if options.runs < 2:
        raise UsageError(
            f"--runs {options.runs}: at least 2 runs are needed, since run 1 is the reference "
            f"and every later run is compared against it"
        )
    pipeline = load_pipeline(path, options.seeds)
    keys = KeyChecker(pipeline, options.keys, options.run_dir)
    keys.check_before_running()
    threads = options.threads or default_threads()
    environment = stamp(threads)
    invocation = Invocation.create(
        options.run_dir,
        {
            "pipeline": str(path),
            "pipeline_resolved": str(Path(path).resolve()),
            "pipeline_digest": pipeline.digest,
            "runs": options.runs,
            "containment": options.containment,
            "threads": threads,
            "duckdb": environment.duckdb,
            "platform": environment.platform,
            "python": environment.python,
            "twicerun": environment.twicerun,
            "seeds": pipeline.seeds,
            "keys": {k: list(v) for k, v in options.keys.items()},
        },
    )
    started = time.time()
    try:
        result = _loop(pipeline, options, threads, invocation, progress, started, keys)
    except TwicerunError as exc:
        exc.directory = str(invocation.root)
        invocation.finish(FAILED, error=str(exc))
        raise
    except KeyboardInterrupt as exc:
        exc.directory = str(invocation.root)  # type: ignore[attr-defined]
        with contextlib.suppress(Exception):
            invocation.finish(INTERRUPTED)
        raise
    except BaseException as exc:
        with contextlib.suppress(Exception):
            invocation.finish(FAILED, error=f"{type(exc).__name__}: {exc}")
        raise
    return result


def _loop(
    pipeline: Pipeline,
    options: LoopOptions,
    threads: int,
    invocation: Invocation,
    progress: Progress,
    started: float,
    keys: KeyChecker,
) -> Result:
    reference = RunAddress(LOOP, 1)
    records = Records(invocation, reference)
    steps = pipeline.steps
    comparisons: dict[int, list[Comparison]] = {s.index: [] for s in steps}
    digest_connection = open_connection(threads, invocation.spill_dir)
    connections = Connections(invocation.spill_dir)
    try:
        for run in range(1, options.runs + 1):
            address = RunAddress(LOOP, run)
            source = reference if (options.containment and run > 1) else address
            state_from = (
                None
                if run == 1
                else (reference if options.containment else RunAddress(LOOP, run - 1))
            )
            for step in steps:
                progress(
                    ProgressEvent("loop", run, options.runs, step.index, len(steps), step.name)
                )

                def state_source(name: str, _step=step, _from=state_from):
                    return None if _from is None else records.ref(_from, _step.index, name)

                receipt = execute_step(
                    invocation=invocation,
                    step=step,
                    address=address,
                    threads=threads,
                    visible=records.visible(source, step.index),
                    state_source=state_source,
                    owners=records.owners(reference, address),
                    reference=records.get(reference, step.index),
                    digest_connection=digest_connection,
                    connections=connections,
                )
                records.add(address, receipt)
                if run == 1:
                    keys.check_written(receipt.artifacts)
                elif options.containment:
                    records.prune_identical(address, step.index)
            if run == 1:
                keys.check_all_written()
            if not options.containment and run > 2:
                # Run run-1 is no longer read by anyone: its state went into this run.
                for step in steps:
                    records.prune_identical(RunAddress(LOOP, run - 1), step.index)
        if not options.containment:
            for step in steps:
                records.prune_identical(RunAddress(LOOP, options.runs), step.index)
        # Compared step by step once every run is done, so the reference side of
        # each artifact is grouped once for all the runs compared with it.
        cache = ReferenceCache(digest_connection)
        for step in steps:
            for run in range(2, options.runs + 1):
                progress(
                    ProgressEvent("compare", run, options.runs, step.index, len(steps), step.name)
                )
                comparisons[step.index].append(
                    compare_step(
                        records,
                        digest_connection,
                        reference,
                        RunAddress(LOOP, run),
                        step.index,
                        options.keys,
                        cache,
                    )
                )
            comparisons[step.index] = attribute_worst(
                records,
                digest_connection,
                reference,
                step.index,
                comparisons[step.index],
                options.keys,
                cache,
            )
            cache.clear()
    finally:
        connections.shutdown()
        digest_connection.close()

    step_results = []
    for step in steps:
        run1 = records.get(reference, step.index)
        seconds = [
            r.seconds
            for r in (
                records.get(RunAddress(LOOP, k), step.index) for k in range(1, options.runs + 1)
            )
            if r is not None
        ]
        notes = []
        if run1 is not None and run1.sql_outside_ctx:
            notes.append(
                "reads rows through ctx.sql that ctx.read does not see, so they are not counted "
                "or contained: " + run1.sql_outside_ctx[0]
            )
        measured = StepResult(
            index=step.index,
            name=step.name,
            line=step.line,
            fired=0,
            compared=0,
            status=None,
            file=_display_path(step.file),
            stochastic=step.declaration.stochastic,
            seed=step.seed_value,
            wrote=[a.name for a in run1.artifacts] if run1 else [],
            rows_read=run1.rows_read if run1 else 0,
            seconds=seconds,
            comparisons=comparisons[step.index],
            notes=notes,
            inputs=sorted({r.name for r in run1.reads}) if run1 else [],
        )
        step_results.append(score_step(measured, options.policy))

    result = Result(
        pipeline=str(pipeline.path),
        pipeline_digest=pipeline.digest,
        runs=options.runs,
        contained=options.containment,
        policy=options.policy.name,
        tolerance_rel=options.policy.tolerance_rel,
        tolerance_ulps=options.policy.tolerance_ulps,
        keys={k: list(v) for k, v in options.keys.items()},
        environment=stamp(threads),
        seconds=round(time.time() - started, 3),
        steps=step_results,
        artifacts=str(invocation.root),
        started=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        step_seconds=round(sum(sum(s.seconds) for s in step_results), 3),
        disk_bytes=invocation.disk_bytes(),
        kept_failures=kept_failures(options.run_dir),
    )
    # The Result is on disk before the invocation is marked completed, so a
    # completed invocation always has one; pruning comes last of all.
    save_result(invocation, result)
    invocation.finish(COMPLETED)
    removed = prune(options.run_dir, options.keep, invocation)
    if removed:
        result = replace(result, pruned=removed)
        save_result(invocation, result)
    return result


def save_result(invocation: Invocation, result: Result) -> None:
    write_bytes_atomic(invocation.result_path, result.to_json().encode("utf-8"))


def compare_step(
    records: Records,
    con: duckdb.DuckDBPyConnection,
    reference: RunAddress,
    later: RunAddress,
    index: int,
    keys: Mapping[str, Sequence[str]],
    cache: ReferenceCache | None = None,
    attribute: bool = False,
) -> Comparison:
    """Compare one step's artifacts in `later` with the reference run's.

    Attribution is left out here: it explains rather than measures, and
    `attribute_worst` computes it once, for the comparison that left the most
    rows unmatched.
    """
    ref_sides = records.sides(reference, index)
    later_sides = records.sides(later, index)
    inputs = records.input_columns(later, index)

    def oracle(ref: Side | None, lat: Side | None) -> dict:
        name = (ref or lat).name  # type: ignore[union-attr]
        # Two later runs that wrote the same rows get the same findings: measure once.
        slot = (
            name,
            ref.canonical_digest if ref else None,
            lat.canonical_digest if lat else None,
            attribute,
        )
        if cache is not None and slot in cache.memo:
            return cache.memo[slot]
        findings = compare_artifacts(
            con,
            name,
            ref.path if ref else None,
            lat.path if lat else None,
            key=keys.get(name),
            input_columns=inputs,
            cache=cache,
            attribute=attribute,
        ).to_dict()
        if cache is not None:
            cache.memo[slot] = findings
        return findings

    outcomes = []
    for name in list(ref_sides) + [n for n in later_sides if n not in ref_sides]:
        o = settle(ref_sides.get(name), later_sides.get(name), oracle)
        outcomes.append(
            ArtifactOutcome(
                name=o.name,
                presence=o.presence,
                settled_by=o.settled_by,
                differs=o.differs,
                reference_rows=o.reference_rows,
                later_rows=o.later_rows,
                findings=o.findings,
            )
        )
    return Comparison(run=later.run, fired=any(o.differs for o in outcomes), artifacts=outcomes)


def attribute_worst(
    records: Records,
    con: duckdb.DuckDBPyConnection,
    reference: RunAddress,
    index: int,
    comparisons: list[Comparison],
    keys: Mapping[str, Sequence[str]],
    cache: ReferenceCache | None,
) -> list[Comparison]:
    """Add leave-one-out attribution to the comparison with the most unmatched rows."""

    def unmatched(c: Comparison) -> int:
        total = 0
        for a in c.artifacts:
            f = a.findings or {}
            total += sum(
                f.get(k, 0)
                for k in ("missing", "extra", "multiplicity_missing", "multiplicity_extra")
            )
        return total

    candidates = [
        c
        for c in comparisons
        if unmatched(c) and all(a.presence == "both" for a in c.artifacts if a.differs)
    ]
    if not candidates:
        return comparisons
    worst = max(candidates, key=unmatched)
    again = compare_step(
        records, con, reference, RunAddress(LOOP, worst.run), index, keys, cache, attribute=True
    )
    return [again if c is worst else c for c in comparisons]


def _display_path(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path
