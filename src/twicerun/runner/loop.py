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
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from twicerun.compare.oracle import ReferenceCache
from twicerun.display import listed, some, unseeded_draw, unseeded_generator
from twicerun.errors import TwicerunError, UnknownArtifact, UsageError
from twicerun.judge.cause import CONFIDENCE
from twicerun.judge.policy import Policy
from twicerun.pipeline import Pipeline, Step, load_pipeline
from twicerun.pipeline.uses import step_text
from twicerun.pipeline.writes import literal_writes
from twicerun.result import Comparison, Result, Series, StepResult
from twicerun.result.document import SourceFileUsed, SourceUsed
from twicerun.runner import default_connection, interrupts
from twicerun.runner.bisect import bisect
from twicerun.runner.engines import check_engine, open_engine
from twicerun.runner.environment import default_threads, stamp
from twicerun.runner.execute import execute_step
from twicerun.runner.generators import drew_unseeded
from twicerun.runner.keys import KeyChecker
from twicerun.runner.opened import DATA_SUFFIXES
from twicerun.runner.own_workers import describe
from twicerun.runner.past_ctx import changed_by, uncontained_moved
from twicerun.runner.progress import Progress, ProgressEvent, silent
from twicerun.runner.records import Records
from twicerun.runner.scoring import not_varied, score_step, thread_count_fired
from twicerun.runner.series import Workbench, discard_directory
from twicerun.runner.settle_step import WorstComparisons, compare_step
from twicerun.runner.step_output import imports_print_to_stderr, steps_print_to_stderr
from twicerun.runner.stress import AMPLIFIED_DIR, PROBE_RUNS, Stressed, amplify
from twicerun.storage.atomic import write_bytes_atomic
from twicerun.storage.connections import open_connection
from twicerun.storage.janitor import Janitor
from twicerun.storage.layout import (
    COMPLETED,
    FAILED,
    INTERRUPTED,
    LOOP,
    Invocation,
    RunAddress,
)
from twicerun.storage.retention import kept_failures, prune, reap
from twicerun.vocabulary.loop import Amplifier, Cause, Status

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
    amplify: bool = True
    # Amplifiers the user turned off (--without); the rest run as usual.
    without: frozenset[Amplifier] = frozenset()
    keep_copies: bool = False
    engine: str | None = None  # None: what the pipeline declares
    spark_master: str | None = None
    # Seconds after which a step's execution is stopped (and the step crashed); None waits.
    step_timeout: float | None = None


def run_pipeline(path: str | Path, options: LoopOptions, progress: Progress = silent) -> Result:
    """Load the pipeline, run the loop, compare, and return the Result (also saved)."""
    if options.runs < 2:
        raise UsageError(
            f"--runs {options.runs}: at least 2 runs are needed, since run 1 is the reference "
            f"and every later run is compared against it"
        )
    # Absolute from here on: a step that calls os.chdir must not move the run directory.
    options = replace(options, run_dir=Path(options.run_dir).absolute())
    with imports_print_to_stderr():
        pipeline = load_pipeline(path, options.seeds, options.engine)
    keys = KeyChecker(pipeline, options.keys, options.run_dir)
    keys.check_before_running()
    # Before anything is created on disk: an engine that cannot start here is bad input.
    check_engine(pipeline.engine, options.spark_master)
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
            "engine": pipeline.engine,
            "seeds": pipeline.seeds,
            "keys": {k: list(v) for k, v in options.keys.items()},
        },
    )
    # A run that was killed (SIGKILL, a lost machine) never said so: say it for it.
    reap(options.run_dir, invocation)
    started = time.time()
    try:
        with interrupts.watching(), steps_print_to_stderr():
            result = _loop(pipeline, options, threads, invocation, progress, started, keys)
    except KeyboardInterrupt as exc:
        exc.directory = str(invocation.root)  # type: ignore[attr-defined]
        with contextlib.suppress(Exception):
            invocation.finish(INTERRUPTED)
        raise
    except BaseException as exc:
        if interrupts.requested():
            # DuckDB reported the Ctrl-C as a failed query somewhere the runner
            # does not classify steps (a comparison, an amplified input).
            interrupted = KeyboardInterrupt()
            interrupted.directory = str(invocation.root)  # type: ignore[attr-defined]
            with contextlib.suppress(Exception):
                invocation.finish(INTERRUPTED)
            raise interrupted from exc
        if isinstance(exc, TwicerunError):
            exc.directory = str(invocation.root)
            invocation.finish(FAILED, error=str(exc))
            raise
        with contextlib.suppress(Exception):
            invocation.finish(FAILED, error=f"{type(exc).__name__}: {exc}")
        # Where to look, for the CLI's sentence about it (a full disk, say).
        with contextlib.suppress(AttributeError):
            exc.directory = str(invocation.root)  # type: ignore[attr-defined]
        raise
    return result


def _retire(
    records: Records,
    kept: dict[int, RunAddress] | None,
    address: RunAddress,
    index: int,
) -> None:
    """A compared copy, its identical artifacts already pruned: what differed goes, unless
    `kept` (--keep-copies) is keeping each step's latest copy that differed; then the one
    kept before it goes instead. A run that agreed leaves the earlier one in place:
    deleting that whenever a later run came along kept nothing where the last run agreed."""
    if kept is None:
        records.discard(address, index)
        return
    receipt = records.get(address, index)
    if receipt is None or not any(r.kept for r in receipt.artifacts):
        return
    earlier = kept.get(index)
    if earlier is not None and earlier != address:
        records.discard(earlier, index)
    kept[index] = address


def _unknown_read_hints(pipeline: Pipeline, name: str, index: int) -> list[str]:
    """What the pipeline's source says about an artifact a step read before anything wrote it:
    a later step that writes it (the steps are out of order), or functions imported into the
    file, which are not steps."""
    hints = []
    by_index = {s.index: s for s in pipeline.steps}
    later = [i for i in literal_writes(pipeline).by_name.get(name, []) if i > index]
    if later:
        writer = by_index[later[0]]
        hints.append(
            f"step {writer.index} {writer.name} writes {name}, but runs after this one; put "
            f"{writer.name} before {by_index[index].name} (in STEPS, or in the file)"
        )
    if pipeline.imported:
        hints.append(_imported_hint(pipeline))
    return hints


def _imported_hint(pipeline: Pipeline) -> str:
    names = ", ".join(pipeline.imported)
    one = len(pipeline.imported) == 1
    return (
        f"{names} {'is' if one else 'are'} imported into {pipeline.path.name}, and only functions "
        f"defined in the file are steps; to run {'it' if one else 'them'}, list the steps in "
        f"order in STEPS"
    )


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
    janitor = Janitor()
    records = Records(invocation, reference, janitor)
    steps = pipeline.steps
    # What the pipeline set up on DuckDB's default connection as it was imported, so that
    # what the steps leave there later can be told from it.
    at_import = (
        default_connection.holds() if any(s.uses_duckdb_module for s in steps) else frozenset()
    )
    comparisons: dict[int, list[Comparison]] = {s.index: [] for s in steps}
    # What each step's first execution made on the connections its code reaches that
    # outlive it (the default one, one the pipeline keeps): every later execution, in the
    # same process, finds it already made.
    made_in_run_1: dict[int, tuple[list, frozenset[tuple[str, str, int]]]] = {}
    # Per step, by place, the queries its run 1 ran on a connection that outlives it.
    ran_on: dict[int, dict[str, list[str]]] = {}
    # The connections that outlive a step and that each step's code reaches, from run 1.
    reaches: dict[int, list] = {}
    digest_connection = open_connection(threads, invocation.spill_dir)
    connections = open_engine(pipeline.engine, threads, invocation.spill_dir, options.spark_master)
    if getattr(connections, "name", "") == "spark":
        # Known only once Spark is up; `diff` and `reproduce` name it from here.
        invocation.update_manifest(spark=connections.version, spark_master=connections.master)
    # One cache per step: the reference side of each artifact is grouped once, then
    # reused by every later run compared with it.
    caches = {s.index: ReferenceCache(digest_connection) for s in steps}
    worst = WorstComparisons(digest_connection)
    # --keep-copies: per step, the latest later run whose copy differed from run 1's.
    kept: dict[int, RunAddress] | None = {} if options.keep_copies else None
    connections.expect(threads, options.runs * len(steps))
    # Ctrl-C stops twicerun's own query too (a digest, the oracle, an amplified input),
    # which on a large artifact can run for minutes without looking at Python's signals.
    stack = contextlib.ExitStack()
    stack.enter_context(interrupts.interruptible(digest_connection.interrupt))
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

                # Compared and pruned at once below: its receipt is written once, then.
                deferred = run > 1 and options.containment
                places = default_connection.outliving(step) if run == 1 else []
                before = default_connection.holding(places) if places else frozenset()
                logged = (
                    default_connection.queries_on(places) if places else contextlib.nullcontext()
                )
                try:
                    with logged as queried:
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
                            canonical=run == 1,
                            defer_receipt=deferred,
                            timeout=options.step_timeout,
                        )
                except UnknownArtifact as exc:
                    hints = _unknown_read_hints(pipeline, exc.name, step.index)
                    if not hints:
                        raise
                    raise UnknownArtifact("; ".join([str(exc), *hints]), name=exc.name) from exc
                records.add(address, receipt, saved=not deferred)
                if run == 1:
                    if places:
                        reaches[step.index] = places
                        if queried:
                            ran_on[step.index] = queried
                        made = default_connection.holding(places) - before
                        if made:
                            made_in_run_1[step.index] = (places, made)
                    keys.check_written(receipt.artifacts)
                    continue
                try:
                    comparison = compare_step(
                        records,
                        digest_connection,
                        reference,
                        address,
                        step.index,
                        options.keys,
                        caches[step.index],
                        keep_prefix=worst.keep_prefix(run),
                    )
                    comparisons[step.index].append(comparison)
                    worst.consider(step.index, comparison)
                    if options.containment:
                        # Nothing reads a contained later run's copies again, and their
                        # findings are recorded: identical ones go at once, and so do
                        # differing ones, unless --keep-copies asked to keep the latest
                        # run's to open.
                        records.prune_identical(address, step.index)
                        _retire(records, kept, address, step.index)
                finally:
                    records.flush(address, step.index)
            if run == 1:
                keys.check_all_written()
            if not options.containment and run > 2:
                # Run run-1 is no longer read by anyone: its state went into this run.
                for step in steps:
                    records.prune_identical(RunAddress(LOOP, run - 1), step.index)
                    _retire(records, kept, RunAddress(LOOP, run - 1), step.index)
        if not options.containment:
            for step in steps:
                records.prune_identical(RunAddress(LOOP, options.runs), step.index)
                _retire(records, kept, RunAddress(LOOP, options.runs), step.index)
        for step in steps:
            caches[step.index].clear()
            comparisons[step.index] = worst.attribute(records, step.index, comparisons[step.index])

        # Made by a step's run 1 and, by the same catalog identity, still there: no later
        # run made it again (a CREATE OR REPLACE in every run would have a new one).
        step_results = [
            _made_by_run_1(
                score_step(
                    _measured(records, step, comparisons[step.index], options.runs),
                    options.policy,
                ),
                _still_as_made(*made_in_run_1[step.index]) if step.index in made_in_run_1 else {},
            )
            for step in steps
        ]
        bench = Workbench(
            invocation=invocation,
            records=records,
            connections=connections,
            con=digest_connection,
            keys=options.keys,
            policy=options.policy,
            progress=progress,
            steps=len(steps),
            janitor=janitor,
            timeout=options.step_timeout,
        )
        step_results = _cause_and_amplify(
            bench,
            pipeline,
            step_results,
            options,
            threads,
            at_import,
            past_containment=_read_past_containment(pipeline, reaches, made_in_run_1, ran_on),
        )
    finally:
        stack.close()
        connections.shutdown()
        digest_connection.close()
        janitor.shutdown()

    result = Result(
        pipeline=str(pipeline.path),
        pipeline_digest=pipeline.digest,
        runs=options.runs,
        contained=options.containment,
        policy=options.policy.name,
        tolerance_rel=options.policy.tolerance_rel,
        tolerance_ulps=options.policy.tolerance_ulps,
        keys={k: list(v) for k, v in options.keys.items()},
        environment=stamp(threads, connections),
        seconds=round(time.time() - started, 3),
        steps=step_results,
        artifacts=str(invocation.root),
        started=time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        step_seconds=round(records.step_seconds(), 3),
        disk_bytes=invocation.disk_bytes(),
        kept_failures=kept_failures(options.run_dir),
        amplified=options.amplify,
        amplifiers_off=_off(options),
        amplifier_probe=min(PROBE_RUNS, options.runs) if options.amplify else None,
        confidence=CONFIDENCE,
        not_varied=not_varied(
            step_results, options.amplify, stamp(threads, connections), _off(options)
        ),
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


def _measured(records: Records, step: Step, comparisons: list[Comparison], runs: int) -> StepResult:
    """A step's loop measurements, before any policy has judged them."""
    run1 = records.get(RunAddress(LOOP, 1), step.index)
    receipts = [records.get(RunAddress(LOOP, k), step.index) for k in range(1, runs + 1)]
    seconds = [r.seconds for r in receipts if r is not None]
    notes = []
    if run1 is not None:
        written = {a.name for a in run1.artifacts}
        for name in sorted({r.name for r in run1.reads if r.via == "state"} - written):
            # A typo, most often: ctx.state("log") beside ctx.write("logs"). Every run then
            # starts from the initial query, and the rerun the state exists to test never happens.
            notes.append(
                f"ctx.state({name!r}) reads this step's own earlier output of that name, but "
                f"the step writes no artifact called {name}, so every run started from the "
                f"initial query"
            )
    if run1 is not None and run1.threads_set_by_step is not None:
        # Every thread count this report names for the step (the loop's, an amplifier's
        # raised one) was set before the step, which then set its own.
        notes.append(
            f"sets its own thread count (threads={run1.threads_set_by_step} by the end of "
            f"the step), so the loop's threads={run1.threads} was not in force for the "
            f"queries after that SET, nor is any raised count an amplifier names below"
        )
    if run1 is not None and run1.returned is not None and not run1.artifacts:
        # A helper the steps call, taken for a step by its first parameter, looks like this.
        notes.append(
            f"returned a {run1.returned} and wrote no artifact; twicerun ignores what a step "
            f"returns, so whatever it computed went nowhere (a helper that takes ctx first is a "
            f"step too, unless STEPS lists the steps)"
        )
    own = next((r.workers_started for r in receipts if r is not None and r.workers_started), None)
    if own:
        notes.append(
            f"started {describe(own)} itself: the thread counts twicerun sets (the loop's, "
            f"the bisect's one, an amplifier's raised one) hold DuckDB and pyarrow, not "
            f"these, so how work is shared among them, and in what order it finishes, was "
            f"never varied or held still"
        )
    left = [r.generators for r in receipts if r is not None]
    unseeded = drew_unseeded(left)
    if unseeded:
        notes.append(
            f"{unseeded_generator(unseeded)}: its runs left it in states of their own, so "
            f"they drew other numbers, at any thread count (a seed set once, at import, only "
            f"fixes where run 1 starts, and seed() with no value takes a new one from the "
            f"system each time); seed it from a declared seed "
            f"(@step(stochastic=True, seed=...)), or derive values with hash()"
        )
    if run1 is not None and run1.sql_outside_ctx:
        notes.append(
            # Caught in ctx.sql and in the query handed to ctx.write alike.
            "reads rows in its SQL that ctx.read and ctx.source do not see, so they are not "
            "counted or contained: " + run1.sql_outside_ctx[0]
        )
    data = (
        sorted(f for f in (run1.opened or {}) if f.lower().endswith(DATA_SUFFIXES)) if run1 else []
    )
    if data:
        its, it = ("its", "it") if len(data) == 1 else ("their", "them")
        notes.append(
            f"opens {some(data)} itself, outside ctx.source, so {its} rows are not counted and "
            f"no amplifier varies {it}; read {it} through ctx.source(name, files) instead"
        )
    kept = sorted({n for r in receipts[1:] if r is not None for n in r.reused_objects})
    if kept:
        again = [str(k) for k, r in enumerate(receipts[1:], start=2) if r and r.reused_objects]
        notes.append(
            f"wrote {some(kept)} in run{'s' if len(again) > 1 else ''} {listed(again)} from "
            f"the very object an earlier execution of the step handed to ctx.write (a memo, "
            f"a cache or a constant of the module keeps it): those runs did not compute those "
            f"rows, so their agreeing, or any amplifier's, says nothing about its inputs"
        )
    if run1 is not None and run1.sql_writes_outside_ctx:
        notes.append(
            "writes a file in its SQL that ctx.write does not see, so it is not compared "
            "between runs: " + run1.sql_writes_outside_ctx[0]
        )
        later = [r for r in receipts[1:] if r is not None]
        if later and all(r.sql_outside_ctx and not r.sql_writes_outside_ctx for r in later):
            # A cache filled on first use (`if not exists: COPY ... TO`, then read it back):
            # the runs after the first agree because they read run 1's answer, not because
            # they computed it alike. Only a hedge: which file each read is not parsed.
            notes.append(
                "wrote that file in run 1 only, and every later run read rows past ctx: if "
                "it reads back what run 1 wrote (a cache filled on first use), the later "
                "runs did not compute its answer, so their agreeing, or any amplifier's, says "
                "nothing about its inputs"
            )
    return StepResult(
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
        comparisons=comparisons,
        notes=notes,
        drew_unseeded=unseeded,
        inputs=sorted({r.name for r in run1.reads}) if run1 else [],
        sources=[
            SourceUsed(
                name=s.name,
                reader=s.reader,
                rows=s.rows,
                files=[SourceFileUsed(f.path, f.size, f.digest) for f in s.files],
            )
            for s in (run1.sources if run1 else [])
        ],
    )


def _cause_and_amplify(
    bench: Workbench,
    pipeline: Pipeline,
    scored: list[StepResult],
    options: LoopOptions,
    threads: int,
    at_import: frozenset[str] = frozenset(),
    past_containment: dict[int, str] | None = None,
) -> list[StepResult]:
    """Bisect every step whose loop measured a difference; amplify every quiet one.
    `at_import` is what DuckDB's default connection held before the first step ran;
    `past_containment` says, per step, what earlier steps left for it on a connection
    that outlives them (`_read_past_containment`): such a step is not bisected."""
    past_containment = past_containment or {}
    by_index = {s.index: s for s in pipeline.steps}
    stressed = Stressed(bench, by_index)
    # Which quiet steps still to amplify read each artifact: once none does, its
    # stressed copies are deleted rather than kept to the end.
    readers = _quiet_readers(bench, scored) if options.amplify else {}
    final = []
    try:
        for result in scored:
            step = by_index[result.index]
            measured_difference = result.fired or result.tolerated
            moved = _sources_moved(bench, result.index, options.runs) if measured_difference else {}
            changed = (
                uncontained_moved(bench.records, result.index, options.runs)
                if measured_difference
                else []
            )
            if changed:
                result = replace(
                    result,
                    notes=[
                        *result.notes,
                        f"reads {some(changed)}, which a later run did not find as run 1 "
                        f"did: what another step, or an earlier run, changes there reaches "
                        f"this step past containment, so a difference here may come from "
                        f"there (hand the rows over with ctx.write and ctx.read)",
                        *changed_by(
                            bench.records,
                            changed,
                            result.index,
                            options.runs,
                            {i: s.name for i, s in by_index.items()},
                            str(step.own.directory) if step.own is not None else None,
                        ),
                    ],
                )
            if moved:
                # The bisect re-reads the files as they are now, after they stopped changing:
                # its quiet runs would call a changed input PARALLEL_ORDER.
                result = replace(
                    result,
                    notes=[
                        *result.notes,
                        f"not bisected: the files it read through ctx.source changed between "
                        f"runs ({_moved_runs(moved)}), so its runs did not all read the same "
                        f"input, and one thread reading them again now could not say why it "
                        f"differed",
                        *changed_by(
                            bench.records,
                            [f"file {path}" for path in moved],
                            result.index,
                            options.runs,
                            {i: s.name for i, s in by_index.items()},
                        ),
                    ],
                )
            elif measured_difference and threads > 1 and result.index in past_containment:
                result = _not_bisected_past_containment(result, past_containment[result.index])
            elif measured_difference and threads > 1:
                result = _bisected(bench, step, options.runs, result, result)
                rerun = _rerun_on_own_state(bench, result) if options.containment else None
                if rerun is not None:
                    result = replace(
                        result,
                        notes=[
                            *result.notes,
                            # The artifact is named in brackets, as audit names it: a bare
                            # name read as prose ("its own earlier runs", "run 1's runs").
                            f"reads its own earlier output ({rerun}) through ctx.state: run 1 "
                            f"started from the initial query and every later run from run 1's "
                            f"copy, and the later runs all wrote the same rows, which run 1 did not, "
                            f"as did the re-executions at one thread: rerunning the step on its "
                            f"own output changes its answer (an append, or a MERGE that is not "
                            f"idempotent)",
                        ],
                    )
            elif measured_difference:
                result = replace(
                    result,
                    notes=[
                        *result.notes,
                        "not bisected: the loop already ran at threads=1, so there is no second "
                        "thread count to tell the causes apart; --threads 2 or more gives one",
                    ],
                )
            if options.amplify and result.status == Status.NO_DIVERGENCE_OBSERVED:
                result = score_step(
                    replace(
                        result,
                        amplifiers=amplify(
                            bench, step, stressed, options.runs, threads, without=options.without
                        ),
                    ),
                    options.policy,
                )
                stressed_threads = thread_count_fired(result)
                if stressed_threads is not None and result.index in past_containment:
                    result = _not_bisected_past_containment(result, past_containment[result.index])
                elif stressed_threads is not None:
                    # Quiet in the loop, different at more threads: the same question the
                    # bisect answers for the loop, asked at the amplifier's rate.
                    result = _bisected(bench, step, options.runs, result, stressed_threads)
                for name in [n for n, steps in readers.items() if step.index in steps]:
                    readers[name].discard(step.index)
                    if not readers[name]:
                        stressed.forget(name)
                        del readers[name]
            result = score_step(result, options.policy)
            if result.cause is Cause.PERSISTS_SINGLE_THREADED or (threads == 1 and result.fired):
                result = _left_on_default_connection(step, result, at_import)
                result = _attached_for_writing(bench, result)
            elif not result.fired:
                result = _attached_for_writing(bench, result, quiet=True)
                if result.index in past_containment:
                    result = _quiet_past_containment(
                        result, step.name, past_containment[result.index]
                    )
            # A draw in the step's SQL is named wherever a difference was seen, and on a
            # seeded step however it came out. A draw that is all or nothing (a sample of a
            # few hundred rows) can agree with itself in a few runs by chance: the bisect's,
            # which then read PARALLEL_ORDER and no more, or the loop's, which left an
            # amplifier's difference to read as the stress's doing. And a seeded step's quiet
            # reads as the seed's doing, which it is not for a draw the seed does not reach
            # (setseed() and a USING SAMPLE).
            if (
                result.fired
                or result.status is Status.STABLE_ON_THIS_INPUT
                or result.seed is not None
            ):
                result = _draws_in_sql(bench, result, spark=pipeline.engine == "spark")
            final.append(result)
    finally:
        discard_directory(bench, AMPLIFIED_DIR)
    return final


def _read_past_containment(
    pipeline: Pipeline,
    reaches: dict[int, list],
    made_in_run_1: dict[int, tuple],
    ran_on: dict[int, dict[str, list[str]]] | None = None,
) -> dict[int, str]:
    """Per step, the objects an earlier step made in run 1 on a connection that outlives
    both and that this step's code reaches and names (a module-level `CON`, DuckDB's
    default connection), as the report says them. Containment hands a later run's step
    run 1's artifacts, not what the earlier step of its own run left there, so a
    difference in those objects reaches the step in every run; and the bisect, which
    re-executes this step alone, reads whatever the earlier step's last execution left.
    Where DuckDB's query log says what the step's run 1 ran on a place (`ran_on`), only
    those queries count: a step that reads an artifact `orders` through ctx and logs to a
    kept connection holding a table `orders` was taken for reading that table. Elsewhere
    the step's code is searched, and a step whose SQL is built from parts that never spell
    the name is not found."""
    ran_on = ran_on or {}
    by_index = {s.index: s for s in pipeline.steps}
    found: dict[int, str] = {}
    for index, places in reaches.items():
        mine = {_place_key(con): where for where, con in places}
        code = step_text(by_index[index].fn)
        logged = ran_on.get(index, {})
        named: dict[int, list[str]] = {}
        where_named: dict[int, str] = {}
        for earlier in sorted(i for i in made_in_run_1 if i < index):
            their_places, made = made_in_run_1[earlier]
            key_of = {where: _place_key(con) for where, con in their_places}
            for where, label, _ in sorted(made):
                key = key_of.get(where, ())
                name = label.split(" ", 1)[-1].lower()
                if key not in mine:
                    continue
                queries = logged.get(mine[key])
                text = "\n".join(queries).lower() if queries is not None else code
                if re.search(rf"(?<![a-z0-9_]){re.escape(name)}(?![a-z0-9_])", text):
                    named.setdefault(earlier, []).append(label)
                    where_named[earlier] = mine[key]
        if named:
            found[index] = "; ".join(
                f"its code names {some(labels)} on {where_named[earlier]}, which step "
                f"{earlier} {by_index[earlier].name} makes there"
                for earlier, labels in named.items()
            )
    return found


def _place_key(con: Any) -> int | None:
    """A connection's identity as a place: None for DuckDB's default connection."""
    return None if con is None else id(con)


def _not_bisected_past_containment(result: StepResult, named: str) -> StepResult:
    """`result` with no bisect and the note that says why."""
    return replace(
        result,
        notes=[
            *result.notes,
            f"{named}: that connection outlives each step, so what is made there reaches "
            f"this step in every run past containment, and a difference here may come from "
            f"there. Not bisected: re-executed alone at one thread, this step would read "
            f"whatever the last execution before it left there, so its runs could not say "
            f"why it differed (hand the rows over with ctx.write and ctx.read)",
        ],
    )


def _draws_in_sql(bench: Workbench, result: StepResult, spark: bool = False) -> StepResult:
    """`result` with a note naming the first query of its run 1 that drew at random with
    nothing in the step seeding it: where one thread did not stop the step differing, the
    report otherwise said only that it does not guess among what is left (the caller says
    where else it is given). How to seed a draw is said in the engine's own SQL."""
    run1 = bench.records.get(RunAddress(LOOP, 1), result.index)
    if run1 is None or not run1.sql_draws:
        return result
    if spark:
        how = (
            "rand(), randn(), uuid(), shuffle() and a TABLESAMPLE without REPEATABLE give "
            "other values in every execution, at any partition count (a draw meant to "
            "happen is declared with @step(stochastic=True, seed=...) and seeded from it, "
            "by rand(seed) or the sample's REPEATABLE (seed); an id meant to stay is derived "
            "from the row, md5(key) for one)"
        )
    else:
        how = (
            "random(), the uuid functions and a sample without a seed give other values in "
            "every execution, at any thread count (a draw meant to happen is declared with "
            "@step(stochastic=True, seed=...) and seeded from it, by setseed() or the "
            "sample's seed; the uuid functions take no seed, and an id meant to stay is "
            "derived from the row, md5(key)::UUID for one)"
        )
    if result.cause is Cause.PARALLEL_ORDER:
        how += (
            "; the bisect's runs agreeing does not clear it, since a draw that is all or "
            "nothing (a sample of a few hundred rows) agrees by chance in a few runs"
        )
    return replace(result, notes=[*result.notes, f"{unseeded_draw(run1.sql_draws[0])}; {how}"])


def _quiet_past_containment(result: StepResult, name: str, named: str) -> StepResult:
    """`result`, quiet in the loop, with the note that what it read from an earlier step
    past ctx was never put to the test, unless a note already says where it came from.

    A step that differs is told this beside its missing bisect; one that agreed with
    itself was told nothing, though every run read what the earlier step's last execution
    left, the amplifiers stress only what ctx hands over, and `reproduce --step` re-runs
    it in a process where the earlier step never ran."""
    if any(note.startswith(named) for note in result.notes):
        return result
    return replace(
        result,
        notes=[
            *result.notes,
            f"{named}: that connection outlives each step, so what is made there reaches this "
            f"step past the artifacts: containment does not cover it, no amplifier varies it, "
            f"and `twicerun reproduce --step {name}` re-executes this step without it, so its "
            f"agreeing with itself says nothing about what it reads there (hand the rows over "
            f"with ctx.write and ctx.read)",
        ],
    )


def _sources_moved(bench: Workbench, index: int, runs: int) -> dict[str, list[int]]:
    """The files a step read through ctx.source that a later loop run found with other
    bytes than run 1 did (or did not find, or found new), each with those runs."""
    first = bench.records.get(RunAddress(LOOP, 1), index)
    if first is None or not first.sources:
        return {}
    before = {(s.name, f.path): f.digest for s in first.sources for f in s.files}
    moved: dict[str, list[int]] = {}
    for run in range(2, runs + 1):
        receipt = bench.records.get(RunAddress(LOOP, run), index)
        if receipt is None:
            continue
        now = {(s.name, f.path): f.digest for s in receipt.sources for f in s.files}
        for key in sorted(before.keys() | now.keys()):
            if before.get(key) != now.get(key):
                moved.setdefault(key[1], []).append(run)
    return moved


def _moved_runs(moved: dict[str, list[int]]) -> str:
    return "; ".join(
        f"{path}: not as run 1 read it in run{'s' if len(r) > 1 else ''} {', '.join(map(str, r))}"
        for path, r in moved.items()
    )


def _quiet_readers(bench: Workbench, scored: list[StepResult]) -> dict[str, set[int]]:
    """Artifact name to the quiet steps (to be amplified) that read it through ctx.read."""
    readers: dict[str, set[int]] = {}
    for result in scored:
        if result.status != Status.NO_DIVERGENCE_OBSERVED:
            continue
        receipt = bench.records.get(RunAddress(LOOP, 1), result.index)
        for read in receipt.reads if receipt else []:
            if read.via == "read":
                readers.setdefault(read.name, set()).add(result.index)
    return readers


def _rerun_on_own_state(bench: Workbench, result: StepResult) -> str | None:
    """The artifact a step read as its own earlier state, when everything says the state is
    what changed its answer. Contained, run 1 started from the initial query and every later
    run from run 1's copy; those later runs (two or more) all wrote the same rows, which run
    1 did not; and the bisect, whose own run 1 also started from the initial query but was
    not the process's first execution of the step, saw the same rows again. Later runs that
    disagree among themselves, or a bisect that does, have more going on."""
    run1 = bench.records.get(RunAddress(LOOP, 1), result.index)
    loop, bisected = result.comparisons, result.bisect.comparisons if result.bisect else []
    if run1 is None or len(loop) < 2 or not bisected:
        return None
    written = {a.name for a in run1.artifacts}
    state = sorted({r.name for r in run1.reads if r.via == "state"} & written)
    both = [*loop, *bisected]
    if (
        not state
        or any(c.error or not c.differs for c in both)
        or len({c.answer for c in both}) > 1
    ):
        return None
    return state[0]


def _still_as_made(places: list, made: frozenset[tuple[str, str, int]]) -> dict[str, list[str]]:
    """Of what a step's run 1 made on connections that outlive it, what is there now under
    the same catalog identity, by place: nothing made it again since."""
    now = default_connection.holding(places) & made
    found: dict[str, list[str]] = {}
    for where, label, _ in sorted(now):
        found.setdefault(where, []).append(label)
    return found


def _made_by_run_1(result: StepResult, made: dict[str, list[str]]) -> StepResult:
    """`result` with a note when its first execution made objects on a connection that
    outlives it (DuckDB's default one, one the pipeline keeps) that no later execution
    made again (the same catalog identity at the end of the loop) and the loop saw no
    difference: a step that takes its answer from there (CREATE TABLE IF NOT EXISTS, a
    cache) agrees with itself without computing anything. A step that differed gets the
    note on what the default connection holds instead, where one thread did not stop it."""
    if not made or result.fired:
        return result
    count = sum(len(labels) for labels in made.values())
    where = "; ".join(f"{some(labels)} on {place}" for place, labels in made.items())
    return replace(
        result,
        notes=[
            *result.notes,
            f"made {where} in run 1; "
            f"{'that connection outlives' if len(made) == 1 else 'those connections outlive'}"
            f" the step, every run of twicerun is in one process, and no later execution "
            f"made {'it' if count == 1 else 'them'} again: if the step takes its answer from "
            f"there (CREATE TABLE IF NOT EXISTS, a cache), the later runs did not compute "
            f"it, so their agreeing, or any amplifier's, says nothing about its inputs; "
            f"ctx.sql runs on the step's own connection, which starts empty every time",
        ],
    )


def _left_on_default_connection(
    step: Step, result: StepResult, at_import: frozenset[str]
) -> StepResult:
    """`result` with a note naming what the steps made on DuckDB's default connection since
    the pipeline was imported, when this step's code runs SQL there and one thread did not
    stop it differing. A pipeline run once per process never finds those objects again;
    every run of twicerun does, and a step that inserts into a table of its own there
    changes its answer run by run."""
    if not step.uses_duckdb_module:
        return result
    made = default_connection.made_since(at_import)
    if not made:
        return result
    return replace(
        result,
        notes=[
            *result.notes,
            f"its code runs SQL on DuckDB's default connection (duckdb.sql() and the like), "
            f"which is the process's, and since the pipeline was imported the steps have "
            f"made {some(made)} there; every run of twicerun is in one process, so each "
            f"execution finds what the earlier ones left (a table a step inserts into grows "
            f"run by run), and ctx.sql runs on the step's own connection, which starts empty "
            f"every time",
        ],
    )


def _attached_for_writing(bench: Workbench, result: StepResult, quiet: bool = False) -> StepResult:
    """`result` with a note naming the database files the step attached without READ_ONLY
    in run 1: such a file outlives every run and every invocation. Where one thread did
    not stop the step differing, rows it inserts there pile up run by run (the report
    said only that the ATTACH read rows past ctx). Where the loop saw no difference
    (`quiet`), a table it makes there only when missing is a cache: computed once, and
    read back by every run after, an amplifier's included."""
    run1 = bench.records.get(RunAddress(LOOP, 1), result.index)
    if run1 is None or not run1.attached_for_writing:
        return result
    files = run1.attached_for_writing
    it = "it" if len(files) == 1 else "them"
    said = (
        "if the step takes its answer from a table there that it makes only when missing "
        "(a cache), no run after the one that made it computed it, so the runs' agreeing, "
        "or any amplifier's, says nothing about its inputs"
        if quiet
        else "what one run writes there, the later ones read (rows inserted there pile up "
        "run by run)"
    )
    return replace(
        result,
        notes=[
            *result.notes,
            f"attaches {some(files)} without READ_ONLY, and a database file outlives every "
            f"run and every invocation: {said}; give rows to ctx.write, keep a step's own "
            f"earlier output with ctx.state, or attach {it} READ_ONLY",
        ],
    )


def _bisected(
    bench: Workbench, step: Step, runs: int, result: StepResult, measured: StepResult | Series
) -> StepResult:
    """`result` with its bisect, stopping at the rate `measured` (the loop, or the
    thread-count amplifier) found: how many of its comparisons differed, of how many."""
    differed = sum(1 for c in measured.comparisons if c.differs)
    return replace(
        result,
        bisect=bisect(
            bench,
            step,
            runs,
            differed=differed,
            compared=measured.compared,
            # An amplifier's runs all start from the initial state; the loop's later ones
            # from run 1's copy.
            state_from_run_1=not isinstance(measured, Series),
            loop=() if isinstance(measured, Series) else measured.comparisons,
        ),
    )


def _off(options: LoopOptions) -> list[str]:
    """The amplifiers --without turned off, in the order reports list amplifiers."""
    return [str(a) for a in Amplifier if a in options.without] if options.amplify else []


def save_result(invocation: Invocation, result: Result) -> None:
    write_bytes_atomic(invocation.result_path, result.to_json().encode("utf-8"))


def _display_path(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path
