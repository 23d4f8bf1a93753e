"""`twicerun diff`, `localize`, `reproduce` and `audit`: verdicts over recorded runs.

Each verb has its own words (vocabulary/ladder.py, vocabulary/audit.py) and its
own exit codes (vocabulary/exits.py). For `diff`, `localize` and `reproduce` a
refusal is exit 3, not 2, because 2 already means "not comparable"; `main` reads
`refused_exit` off the command for errors click raises before the command runs.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import replace
from pathlib import Path

import click
import duckdb

from twicerun import __version__
from twicerun.cli.app import (
    Progress,
    check_json_target,
    cli,
    engine_option,
    epilog,
    parse_seeds,
    seed_option,
    spark_master_option,
    step_timeout_option,
    write_target,
)
from twicerun.display import differ_too
from twicerun.errors import BadInput, EngineUnavailable, StepCrashed, StepTimedOut, UsageError
from twicerun.github.commands import neutralize
from twicerun.pipeline import Pipeline, Step, load_pipeline
from twicerun.render.evidence import step_evidence
from twicerun.render.instrument import engine as engine_named
from twicerun.render.instrument import is_spark
from twicerun.result import Environment, ResultFormatError, load_result
from twicerun.runner import default_connection, interrupts
from twicerun.runner.engines import check_engine, session_time_zone
from twicerun.runner.environment import default_threads
from twicerun.runner.generators import drew_unseeded
from twicerun.runner.progress import ProgressEvent
from twicerun.runner.replay import RecordedInputs, Scratch, audit_runs, recorded_inputs
from twicerun.runner.step_output import imports_print_to_stderr
from twicerun.storage.layout import LOOP, RunAddress
from twicerun.storage.receipts import Receipt
from twicerun.verdicts.audit import AuditReport, audit_step
from twicerun.verdicts.ladder import Located, localize_one
from twicerun.verdicts.ladder import diff as diff_runs
from twicerun.verdicts.recorded import RecordedRun, RecordedStep, two_runs
from twicerun.verdicts.reproduce import (
    Replayed,
    ReproduceReport,
    cannot_check,
    compare_fresh,
    twicerun_change,
)
from twicerun.vocabulary.audit import Repeatability
from twicerun.vocabulary.exits import AuditExit, DiffExit, LocalizeExit, ReproduceExit
from twicerun.vocabulary.ladder import Comparing, Locating, Replay

COMPARING_EXIT = {
    Comparing.IDENTICAL: DiffExit.IDENTICAL,
    Comparing.DIVERGED: DiffExit.DIVERGED,
    Comparing.NOT_COMPARABLE: DiffExit.NOT_COMPARABLE,
    Comparing.REFUSED: DiffExit.REFUSED,
    Comparing.COULD_NOT_CHECK: DiffExit.COULD_NOT_CHECK,
}
LOCATING_EXIT = {
    Locating.CLEAN: LocalizeExit.CLEAN,
    Locating.LOCATED: LocalizeExit.LOCATED,
    Locating.REFUSED: LocalizeExit.REFUSED,
    Locating.COULD_NOT_CHECK: LocalizeExit.COULD_NOT_CHECK,
}
REPLAY_EXIT = {
    Replay.REPRODUCED: ReproduceExit.REPRODUCED,
    Replay.DIVERGED: ReproduceExit.DIVERGED,
    Replay.COULD_NOT_CHECK: ReproduceExit.COULD_NOT_CHECK,
}

JSON_HELP = "Also write the verdicts as JSON here ('-' for stdout, which replaces the text)."


def refusing(code: int) -> Callable:
    """A verb whose bad input is `code`: its own errors print one sentence and return it."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except BadInput as exc:
                click.echo(neutralize(f"twicerun: refused: {exc}"), err=True)
                return code

        return inner

    return wrap


def _json_option(fn):
    return click.option(
        "--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True), help=JSON_HELP
    )(fn)


def _emit(document: dict, lines: list[str], json_path: str | None) -> None:
    if json_path == "-":
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
        return
    for line in lines:
        click.echo(neutralize(line))
    if json_path:
        write_target(
            json_path,
            (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode(),
            "--json",
            "the verdicts above are complete",
        )


def _check_json(json_path: str | None, schema: str) -> None:
    check_json_target(json_path, schemas=(schema,))


@cli.command(epilog=epilog(DiffExit))
@click.argument("a")
@click.argument("b")
@_json_option
@refusing(DiffExit.REFUSED)
def diff(a: str, b: str, json_path: str | None) -> int:
    """Compare two recorded runs A and B step by step: each step is `same`,
    `FIRST DIFFERENCE` (at most one), `downstream`, `reconverged` or `COULD NOT CHECK`.

    A run is an invocation directory (its run 1), DIR#k (or DIR/loop/k, as it is
    on disk) for its run k, or a run directory (its newest completed invocation):
    yesterday's and today's, main's and a branch's. Outputs are compared by canonical digest, so rows in another
    order are the same answer. A change in how a step's output was produced (its
    code, DuckDB, threads, seed, platform) is printed beside its verdict and never
    changes it.
    """
    _check_json(json_path, "twicerun.diff/")
    left, right = two_runs(a, b)
    with _reading() as con:
        ladder = diff_runs(left, right, con)
    _emit(ladder.to_dict(), ladder.lines(), json_path)
    return COMPARING_EXIT[ladder.result]


@cli.command(epilog=epilog(LocalizeExit))
@click.argument("a")
@click.argument("b", required=False)
@_json_option
@refusing(LocalizeExit.REFUSED)
def localize(a: str, b: str | None, json_path: str | None) -> int:
    """Find where a pipeline's answer first changed.

    With one invocation A: the first step, in chain order, whose later runs
    disagreed with run 1 (`located`), or `clean`. With two recorded runs A and B:
    `diff`, stopping at the first difference, with what changed before it (an
    input, the code, the instrument) shown beside each step. Runs are named as
    for `diff`.
    """
    with _reading() as con:
        if b is not None:
            _check_json(json_path, "twicerun.localize/")
            ladder = diff_runs(
                *two_runs(a, b),
                con,
                stop_at_first=True,
                schema="twicerun.localize/1",
            )
            _emit(ladder.to_dict(), ladder.lines(), json_path)
            return LocalizeExit(int(COMPARING_EXIT[ladder.result]))
        _check_json(json_path, "twicerun.localize/")
        first = RecordedRun.parse(a)
        runs = [first, *_later_runs(first)]
        located = _how(localize_one(a, runs, con), first)
    _emit(located.to_dict(), located.lines(), json_path)
    return LOCATING_EXIT[located.result]


@contextlib.contextmanager
def _reading() -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to compare recorded runs on, whose query Ctrl-C stops at once: a query
    run through `execute` may not look at Python's signals until it ends."""
    con = duckdb.connect()
    try:
        with interrupts.watching(), interrupts.interruptible(con.interrupt):
            yield con
    finally:
        con.close()


def _how(located: Located, run: RecordedRun) -> Located:
    """Where the later runs' differing copies were deleted once compared (the default),
    the oracle's account is in the invocation's own Result: say how from there."""
    if located.result is not Locating.LOCATED or not run.invocation.result_path.is_file():
        return located
    if located.explanation and "not on disk" not in located.explanation:
        return located
    try:
        result = load_result(run.invocation.result_path)
    except (OSError, ResultFormatError):
        return located
    step = next((s for s in result.steps if s.index == located.index), None)
    if step is None or not step.fired:
        return located
    evidence = "; ".join(step_evidence(step)[:2])
    # The two lines describe one artifact (the first with findings, as the report orders
    # them); the others that differed are named after it.
    pairs = [(a.name, a.findings) for c in step.comparisons for a in c.artifacts if a.differs]
    described = next((name for name, findings in pairs if findings), None)
    others = [name for name in dict.fromkeys(name for name, _ in pairs) if name != described]
    if evidence and others:
        evidence += f"; {differ_too(others)}"
    how = (
        f"{', '.join(step.classes)}, in {step.fired} of {step.compared} comparisons with run 1"
        + (f" ({evidence})" if evidence else "")
        + ", as the invocation's Result recorded it"
    )
    return replace(located, explanation=how)


def _later_runs(first: RecordedRun) -> list[RecordedRun]:
    series = first.invocation.root / LOOP
    numbers = sorted(int(p.name) for p in series.iterdir() if p.name.isdigit() and p.name != "1")
    return [
        RecordedRun(first.invocation, RunAddress(LOOP, n), f"{first.invocation.root}#{n}")
        for n in numbers
    ]


def _reproduce_master(run: str, engine: str, recorded: str | None, given: str | None) -> str | None:
    """Where a recorded run's steps are re-executed: `given`, or else the cluster the run
    ran on. A run in local mode is re-executed in local mode (None), at its threads."""
    if given is not None:
        if engine != "spark":
            raise UsageError(
                f"--spark-master {given}: {run} ran on DuckDB, which has no master, and "
                f"reproduce re-executes a run on the engine it ran on"
            )
        return given
    # local-cluster[...] is executors in processes of their own, so it is gone back to.
    in_process = recorded is None or recorded == "local" or recorded.startswith("local[")
    return recorded if engine == "spark" and not in_process else None


@cli.command(epilog=epilog(ReproduceExit))
@click.argument("run")
@click.option(
    "--pipeline",
    "pipeline_path",
    type=click.Path(path_type=Path),
    metavar="FILE",
    default=None,
    help="The pipeline file to re-execute. Default: the one the run recorded.",
)
@click.option("--step", "only", multiple=True, help="Only this step (repeatable).")
@step_timeout_option(
    "Stop any one re-execution of a step that runs longer than this, rather than wait on it; "
    f"that step is {Replay.COULD_NOT_CHECK}, and the steps after it are still re-executed. "
    "Default: no limit."
)
@spark_master_option(
    "For a run recorded on Spark: the cluster to re-execute on (spark://..., yarn, "
    "k8s://..., or sc://... for Spark Connect). Default: the cluster the run recorded, or "
    "local mode where it ran in local mode; local[N] re-executes a cluster's run here."
)
@_json_option
@refusing(ReproduceExit.REFUSED)
def reproduce(
    run: str,
    pipeline_path: Path | None,
    only: tuple[str, ...],
    step_timeout: float | None,
    spark_master: str | None,
    json_path,
) -> int:
    """Re-execute each step of a recorded RUN from the inputs its receipt names, and
    compare what it writes now with what the receipt says it wrote: `REPRODUCED`,
    `DIVERGED` (with the oracle's detail, or the error of a step that raises now) or
    `COULD NOT CHECK` (its code or DuckDB changed since, or an input is gone).

    RUN is named as for `diff`: an invocation directory (its run 1), DIR#k or
    DIR/loop/k. Executions go into a scratch directory that is removed afterwards;
    nothing is written into the recorded run.
    """
    _check_json(json_path, "twicerun.reproduce/")
    recorded = RecordedRun.parse(run)
    manifest = recorded.manifest()
    source = pipeline_path or Path(
        manifest.get("pipeline_resolved") or manifest.get("pipeline", "")
    )
    if pipeline_path is None and str(source) not in ("", ".") and not source.exists():
        # The file moved or was renamed since the run: the loader's "does not exist"
        # alone did not say that this was the run's record, or how to name the new place.
        raise BadInput(
            f"the pipeline {run} recorded, {source}, is no longer there; give the file to "
            f"re-execute with --pipeline FILE"
        )
    # The engine the recorded run used (older manifests did not say: the pipeline's own).
    with imports_print_to_stderr():
        pipeline = load_pipeline(
            source, manifest.get("seeds") or {}, manifest.get("engine"), recorded_seeds=True
        )
    # In the pipeline's order, as audit lists them: a set listed them in its hash order.
    names = [s.name for s in pipeline.steps]
    unknown = [n for n in only if n not in names]
    if unknown:
        raise BadInput(
            f"--step {unknown[0]}: {source} has no such step; its steps are {', '.join(names)}"
        )
    threads = int(manifest.get("threads") or default_threads())
    master = _reproduce_master(run, pipeline.engine, manifest.get("spark_master"), spark_master)
    progress = Progress(enabled=sys.stderr.isatty())
    report_steps: list[Replayed] = []
    with _reading() as con:
        recorded_steps = {s.index: s for s in recorded.steps(con)}
        try:
            scratch_space = Scratch(
                threads, "reproduce", pipeline.engine, timeout=step_timeout, master=master
            )
        except EngineUnavailable as exc:
            failed = getattr(exc, "failed", None)
            if spark_master is None and master is not None and failed:
                raise EngineUnavailable(
                    f"{failed}, the cluster {run} ran on; check that it is running and "
                    f"reachable from this machine, or pass --spark-master local[{threads}] to "
                    f"re-execute its steps here"
                ) from exc
            raise
        with scratch_space as scratch:
            plan = _reproduce_plan(pipeline, recorded, recorded_steps, only)
            # What can be checked is known before anything executes, so the helpers are told
            # how many executions come at which thread count and open none that none uses.
            for at, count in Counter(r.threads for _, _, r, why, _ in plan if not why).items():
                scratch.connections.expect(at, count)
            for step, record, receipt, why, inputs in plan:
                progress(
                    ProgressEvent("reproduce", 1, 1, step.index, len(pipeline.steps), step.name)
                )
                if why:
                    report_steps.append(
                        Replayed(step.index, step.name, Replay.COULD_NOT_CHECK, why)
                    )
                    continue
                try:
                    fresh = scratch.execute(
                        step,
                        recorded.address,
                        receipt.threads,
                        inputs.visible,
                        state_source=lambda name, _s=inputs.state: _s.get(name),
                    )
                except StepCrashed as exc:
                    # The receipt says what the step wrote; raising now is not that. But a
                    # run stopped for time has no answer to compare either way.
                    report_steps.append(_unfinished(step, exc))
                    continue
                outputs = {
                    a.name: (a.canonical_digest, scratch.path(a.file)) for a in fresh.artifacts
                }
                verdict, detail = compare_fresh(con, record.outputs, outputs)
                report_steps.append(
                    Replayed(
                        step.index,
                        step.name,
                        verdict,
                        detail,
                        round(fresh.seconds, 3),
                        draws=fresh.sql_draws[0] if fresh.sql_draws else "",
                    )
                )
                scratch.forget(recorded.address, step)
        progress.clear()
    if not only:
        report_steps = _with_steps_gone(report_steps, recorded_steps, pipeline)
    report = ReproduceReport(
        run,
        report_steps,
        instrument=twicerun_change(str(manifest.get("twicerun") or ""), __version__),
    )
    _emit(report.to_dict(), report.lines(), json_path)
    return REPLAY_EXIT[report.worst]


def _with_steps_gone(
    replayed: list[Replayed], recorded: dict[int, RecordedStep], pipeline: Pipeline
) -> list[Replayed]:
    """Every recorded step the pipeline file does not have now (at its index, by its
    name) as COULD NOT CHECK, in chain order: leaving it out read as "every step
    reproduced" for a run whose file lost a step since, or had one renamed."""
    now = {(s.index, s.name) for s in pipeline.steps}
    where_now = {s.name: s.index for s in reversed(pipeline.steps)}

    def why(r: RecordedStep) -> str:
        if r.name in where_now:
            # A step added or removed before it moved it; "has no step agg now" said it was gone.
            return (
                f"{pipeline.path.name} has it as step {where_now[r.name]} now: the steps "
                f"before it changed, so it was not re-executed"
            )
        return f"{pipeline.path.name} has no step {r.name} now, so it was not re-executed"

    gone = [
        Replayed(r.index, r.name, Replay.COULD_NOT_CHECK, why(r))
        for r in recorded.values()
        if (r.index, r.name) not in now
    ]
    return sorted([*replayed, *gone], key=lambda s: s.index)


def _reproduce_plan(
    pipeline: Pipeline,
    recorded: RecordedRun,
    recorded_steps: dict[int, RecordedStep],
    only: Collection[str],
) -> list[tuple[Step, RecordedStep | None, Receipt | None, str, RecordedInputs | None]]:
    """Each step to look at, with its record, its receipt, why it cannot be checked ("" when
    it can) and the recorded inputs it would read."""
    plan: list[tuple[Step, RecordedStep | None, Receipt | None, str, RecordedInputs | None]] = []
    for step in pipeline.steps:
        if only and step.name not in only:
            continue
        record = recorded_steps.get(step.index)
        receipt = record.receipt if record and record.name == step.name else None
        if record is None:
            why = (
                "the recorded run stopped before this step"
                if recorded.stopped()
                else f"the recorded run has no step {step.index}: the file has more steps now"
            )
        elif record.name != step.name:
            why = f"the recorded run's step {step.index} is {record.name}"
            moved = [i for i, r in recorded_steps.items() if r.name == step.name]
            if moved:
                why += f"; it has this step as step {moved[0]}: the steps before it changed"
        elif receipt is None and record.why:
            why = record.why  # why there is none: unreadable, say, naming the value
        else:
            why = cannot_check(
                receipt,
                step.code_digest,
                duckdb.__version__,
                directory=pipeline.path.resolve().parent,
                modules_now=step.own.digests() if step.own is not None else None,
                time_zone_now=session_time_zone(pipeline.engine),
                uses_now=step.uses,
            )
        inputs = recorded_inputs(recorded.invocation, receipt) if not why else None
        if inputs is not None and inputs.missing:
            why = "; ".join(inputs.missing)
        plan.append((step, record, receipt, why, inputs))
    return plan


def _unfinished(step, exc: StepCrashed) -> Replayed:
    """The verdict of a re-execution that did not finish."""
    at = f" (at {exc.where})" if exc.where else ""
    if isinstance(exc.error, StepTimedOut):
        return Replayed(
            step.index,
            step.name,
            Replay.COULD_NOT_CHECK,
            f"{exc.error}{at}, so nothing was compared",
        )
    return Replayed(
        step.index,
        step.name,
        Replay.DIVERGED,
        f"it raised{at}, where the recorded run wrote its artifacts: {exc.said}",
    )


@cli.command(epilog=epilog(AuditExit))
# No dir_okay=False: the loader's refusal of a directory says what to pass, click's did not.
@click.argument("pipeline", type=click.Path(path_type=Path))
@click.option("--step", "only", multiple=True, help="Only this step (repeatable).")
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="DuckDB threads (on Spark: shuffle partitions and the partitions each artifact is "
    "read into). Default: what DuckDB picks on this machine.",
)
@engine_option()
@spark_master_option()
@seed_option
@step_timeout_option(
    "Stop any one execution of a step that runs longer than this, in either process, rather "
    "than wait on it: the step crashed (exit 3), after the verdicts of the steps audited "
    "before it. Default: no limit."
)
@_json_option
def audit(
    pipeline: Path,
    only: tuple[str, ...],
    threads: int | None,
    engine: str | None,
    spark_master: str | None,
    seeds: tuple[str, ...],
    step_timeout: float | None,
    json_path,
) -> int:
    """Run PIPELINE once so every step has its inputs, then run each step twice more on
    those inputs and say whether it repeated itself: `deterministic` (the same bytes,
    no seed), `reproducible` (the same rows; or the same bytes because a seed was
    held) or `not reproducible` (other rows).

    Steps are audited one at a time, each with its two durations. On DuckDB the
    second run of each happens in another Python process, under a string hash seed
    of its own, so a step that iterates over a set of strings is seen to move. The
    audit runs go to scratch files that are deleted whatever happens and recorded
    nowhere. A step that declares a seed is never called deterministic, nor is one
    that drew from Python's random module (or numpy's global generator) without
    seeding it in the step.
    """
    _check_json(json_path, "twicerun.audit/")
    with imports_print_to_stderr():
        loaded = load_pipeline(pipeline, parse_seeds(seeds), engine)
    check_engine(loaded.engine, spark_master)
    names = [s.name for s in loaded.steps]
    unknown = [n for n in only if n not in names]
    if unknown:
        raise BadInput(
            f"--step {unknown[0]}: {pipeline} has no such step; its steps are {', '.join(names)}"
        )
    chosen = [s for s in loaded.steps if not only or s.name in only]
    # What the pipeline set up on DuckDB's default connection as it was imported, to tell
    # from what the steps leave there.
    names_duckdb = any(s.uses_duckdb_module for s in loaded.steps)
    at_import = default_connection.holds() if names_duckdb else frozenset()
    # And on the connections the pipeline keeps, which each step reaches by name.
    kept = {
        id(con): (where, con)
        for s in chosen
        for where, con in default_connection.outliving(s)
        if con is not None
    }
    kept_before = default_connection.holding(list(kept.values())) if kept else frozenset()
    progress = Progress(enabled=sys.stderr.isatty())
    started = time.monotonic()
    threads = threads or default_threads()
    stopped: StepCrashed | None = None
    ran_on: list[Environment] = []
    try:
        # Ctrl-C stops a step's query at once, as in `run`, rather than when it ends.
        with interrupts.watching():
            audited = audit_runs(
                loaded,
                threads,
                chosen,
                progress,
                instrument=ran_on.append,
                timeout=step_timeout,
                master=spark_master,
            )
    except StepCrashed as exc:
        # The verdicts found before the step raised are printed, then the error (exit 3).
        stopped, audited = exc, exc.audited
    progress.clear()
    made = tuple(default_connection.made_since(at_import)) if names_duckdb else ()
    kept_made = default_connection.holding(list(kept.values())) - kept_before if kept else set()
    report = AuditReport(
        str(pipeline),
        [
            audit_step(
                a.step.index,
                a.step.name,
                a.step.declaration.seed,
                a.step.seed_value,
                tuple((r.seconds, r.bytes, r.canonical) for r in a.runs),
                state=a.runs[0].state or a.runs[1].state,
                drew=drew_unseeded([r.generators for r in a.runs]),
                draws=a.runs[0].draws or a.runs[1].draws,
                raised=(a.runs[0].raised, a.runs[1].raised),
                default_connection=made if a.step.uses_duckdb_module else (),
                reached=(a.runs[0].reached, a.runs[1].reached),
                kept_connections=_made_on(kept_made, a.step),
                findings=a.findings,
            )
            for a in audited
        ],
        round(time.monotonic() - started, 2),
        threads=threads,
        duckdb=duckdb.__version__,
        stopped_at=f"step {stopped.index} {stopped.name}" if stopped else None,
        engine=engine_named(ran_on[0]) if ran_on and is_spark(ran_on[0]) else None,
        fresh_process=loaded.engine == "duckdb",
    )
    _emit(report.to_dict(), report.lines(), json_path)
    if stopped is not None:
        raise stopped
    return (
        AuditExit.NOT_REPRODUCIBLE
        if report.verdict is Repeatability.NOT_REPRODUCIBLE
        else AuditExit.REPEATS
    )


for _command in (diff, localize, reproduce):
    _command.refused_exit = 3  # type: ignore[attr-defined]


def _made_on(made, step) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Of what the audit's steps made on the connections the pipeline keeps, what is on
    those this step's code reaches, by place."""
    places = {where for where, con in default_connection.outliving(step) if con is not None}
    found: dict[str, list[str]] = {}
    for where, label, _ in sorted(made):
        if where in places:
            found.setdefault(where, []).append(label)
    return tuple((where, tuple(labels)) for where, labels in found.items())
