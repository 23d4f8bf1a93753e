"""`twicerun baseline update`, `twicerun baseline compare`, and `twicerun gate`: the committed
baseline, and the one verb the GitHub Action runs."""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import click
import duckdb
from click.core import ParameterSource

from twicerun import __version__
from twicerun.cli.app import (
    THREADS,
    Progress,
    amplify_option,
    check_directory_target,
    check_json_target,
    check_without,
    cli,
    epilog,
    finite,
    run_dir_option,
    runs_option,
    step_timeout_option,
    without_option,
    write_target,
)
from twicerun.errors import (
    ContractError,
    InvalidStep,
    NoSteps,
    PipelineError,
    StepCrashed,
    TwicerunError,
    UnsupportedColumn,
    UsageError,
)
from twicerun.github import baseline as baseline_module
from twicerun.github.baseline import BaselineError, pipeline_key
from twicerun.github.commands import neutralize, stop_commands
from twicerun.github.comment import find_pull_request, post_sticky
from twicerun.github.decision import (
    DEFAULT_ALPHA,
    DEFAULT_CONFIRM,
    DEFAULT_SCREEN,
    POWER_TARGET,
    default_trials,
    needed_trials,
    shortfall,
    trials_for_power,
)
from twicerun.github.deliver import deliver
from twicerun.github.gate import (
    DidNotFinish,
    Gate,
    GateOptions,
    PipelineFailure,
    comment_body,
    evaluate,
    headline,
    summary,
)
from twicerun.github.source import choose
from twicerun.github.workflow import Workflow, take_token
from twicerun.judge.policy import POLICIES, STRICT, Policy
from twicerun.pipeline.loader import check_pipeline_path, load_pipeline
from twicerun.pipeline.outline import shows_steps
from twicerun.render.evidence import plural
from twicerun.render.plaintext import markdown_to_text
from twicerun.result import Result
from twicerun.runner.loop import LoopOptions, run_pipeline
from twicerun.runner.step_output import imports_print_to_stderr
from twicerun.storage.atomic import write_bytes_atomic
from twicerun.vocabulary.exits import BaselineExit, GateExit, PostExit
from twicerun.vocabulary.gate import DEFAULT_FAIL_ON, FAIL_ON
from twicerun.vocabulary.loop import Amplifier, Status

DEFAULT_BASELINE = Path(".github/twicerun-baseline.json")
DEFAULT_PIPELINES = "pipelines/*.py"

# The gate's own exit codes (vocabulary/exits.py): a failed check is not "diverged",
# and a missing baseline is bad input, never a pass.
GATE_EXIT_CODES = epilog(GateExit)

# What may be overwritten by --output and --json: a file of the same kind, any version.
BASELINE_SCHEMA_FAMILY = "twicerun.baseline/"
GATE_SCHEMA_FAMILY = "twicerun.gate/"


def _refuse_space(path: str) -> None:
    raise UsageError(
        f"{path!r} is one file, but pipelines are separated by spaces; match a path "
        f"with a space in it by a glob, such as {path.replace(' ', '?')!r}"
    )


def _expand(patterns: Sequence[str]) -> list[str]:
    found: list[str] = []
    modules: list[str] = []
    for pattern in patterns:
        parts = pattern.split()
        if len(parts) > 1 and Path(pattern).is_file():
            _refuse_space(pattern)
        for part in parts:
            # A file that exists under the name given is that file, though `[`, `*` or `?`
            # in its name would make a glob of it (one that matches it, or nothing, or others).
            literal = not glob.has_magic(part) or Path(part).is_file()
            matches = [part] if literal else sorted(glob.glob(part))
            for match in matches:
                if match in found or match in modules:
                    continue
                # pipelines/*.py also finds the modules the pipelines import (helpers.py)
                # and a package's __init__.py: a file a glob found that defines no steps is
                # one of those, not a pipeline. Named on its own, it is refused as before.
                if not literal and _defines_no_steps(match):
                    modules.append(match)
                    click.echo(
                        f"[twicerun] {match}: defines no steps, so it is taken for a module "
                        f"the pipelines import and not run",
                        err=True,
                    )
                    continue
                found.append(match)
    if not found:
        among = f" ({', '.join(modules)} define{'s' if len(modules) == 1 else ''} no steps)"
        raise UsageError(
            f"no pipeline matches {' '.join(patterns)!r}{among if modules else ''}; give a "
            f"file or a glob such as pipelines/*.py"
        )
    return found


def _defines_no_steps(path: str) -> bool:
    """Whether the file defines no steps. Anything else wrong with it is reported when it
    runs, as for any pipeline. Its source answers without importing it (a pipeline is then
    imported once, by its run); only a file whose source shows no step is imported, to
    look for steps made some other way."""
    if shows_steps(path) is not False:
        return False
    try:
        with imports_print_to_stderr():
            load_pipeline(path)
    except NoSteps:
        return True
    except Exception:
        return False
    return False


def _keyed(
    paths: Sequence[str], failures: dict[str, PipelineFailure] | None = None
) -> dict[str, str]:
    """Pipeline key (repository-relative POSIX path) -> the path as given. With `failures`,
    a file that does not compile is recorded there (it is the pull request's content, to
    report like a step that raised) rather than refused (a path that is wrong)."""
    keyed: dict[str, str] = {}
    for path in paths:
        # Every file is checked before the first runs, not when its turn comes.
        try:
            check_pipeline_path(path)
        except PipelineError as exc:
            syntax = exc.__cause__
            if failures is None or not isinstance(syntax, SyntaxError):
                raise
            key = pipeline_key(path)
            failures[key] = _failure(key, exc)
            continue
        keyed.setdefault(pipeline_key(path), path)
    return keyed


def _fail_on(text: str) -> tuple[str, ...]:
    words = [w.strip() for w in text.replace(",", " ").split() if w.strip()]
    if not words:
        raise UsageError("--fail-on is empty; name what fails the check, or write none")
    unknown = [w for w in words if w not in FAIL_ON and w != "none"]
    if unknown:
        raise UsageError(
            f"--fail-on {text!r}: {', '.join(unknown)} is not one of {', '.join([*FAIL_ON, 'none'])}"
        )
    if "none" in words and len(set(words)) > 1:
        others = ", ".join(dict.fromkeys(w for w in words if w != "none"))
        raise UsageError(
            f"--fail-on {text!r}: none means nothing fails the check, which contradicts "
            f"{others}; write none alone, or leave it out"
        )
    return tuple(w for w in words if w != "none")


def _create_command(pipelines: Sequence[str], output: Path) -> str:
    return f"twicerun baseline update {' '.join(pipelines)} --output {output}"


# What a pipeline on a pull request can do to stop its own check: a step raises, or its
# file or its use of ctx is refused. The check still reports it (gate.PipelineFailure).
PIPELINE_FAULTS = (StepCrashed, PipelineError, InvalidStep, ContractError, UnsupportedColumn)


def _failure(key: str, exc: Exception) -> PipelineFailure:
    if isinstance(exc, StepCrashed):
        _, _, line = exc.where.rpartition(":")
        message = f"{exc}\n{exc.hint}" if exc.hint else str(exc)
        return PipelineFailure(
            key,
            message,
            crashed=True,
            step=exc.name,
            index=exc.index,
            line=int(line) if line.isdigit() else None,
        )
    # A file that does not compile is refused with the SyntaxError as its cause.
    line = getattr(exc.__cause__, "lineno", None) if isinstance(exc, PipelineError) else None
    return PipelineFailure(key, str(exc), crashed=False, line=line)


def _shape_now(path: str) -> baseline_module.PipelineShape:
    """What a baseline records of a pipeline's code, from the file as it is now."""
    with imports_print_to_stderr():
        pipeline = load_pipeline(path)
    return baseline_module.PipelineShape(
        digest=pipeline.digest,
        steps=tuple(baseline_module.StepShape(s.name, s.index, s.line) for s in pipeline.steps),
    )


def _run_all(
    keyed: dict[str, str],
    options: LoopOptions,
    log: bool = False,
    why: str = "",
    failures: dict[str, PipelineFailure] | None = None,
) -> dict[str, Result]:
    """Every pipeline once. With `log`, and stderr not a terminal (a CI job's log, where
    the live progress line stays off), a line as each starts and ends, so minutes of
    pipelines never pass in silence. With `failures`, a pipeline that does not finish is
    recorded there and the others still run; without, its error propagates."""
    progress = Progress(enabled=os.isatty(2))
    say = _say if log and not os.isatty(2) else (lambda _message: None)
    results = {}
    try:
        for key, path in keyed.items():
            say(f"{key}: {why or 'running'}, {options.runs} runs")
            started = time.monotonic()
            try:
                results[key] = run_pipeline(path, options, progress)
            except PIPELINE_FAULTS as exc:
                if failures is None:
                    raise
                failures[key] = _failure(key, exc)
                progress.clear()
                _say(f"{key}: did not finish: {exc}")
                kept = getattr(exc, "directory", None)
                if kept:
                    _say(f"{key}: the invocation directory is kept: {kept}")
                continue
            steps = results[key].steps
            diverged = sum(1 for s in steps if s.status == Status.DIVERGENT)
            # As the run's own last line says it: a confirmation trial whose step moved only
            # under an amplifier is not "0 of 3 steps diverged" and nothing else.
            stable = sum(1 for s in steps if s.status == Status.STABLE_ON_THIS_INPUT)
            say(
                f"{key}: {diverged} of {len(steps)} step{'s' if len(steps) != 1 else ''} diverged"
                + (f", {stable} more only under an amplifier" if stable else "")
                + f", in {time.monotonic() - started:.1f}s"
            )
        return results
    finally:
        progress.clear()


@contextlib.contextmanager
def _commands_stopped() -> Iterator[None]:
    """On a runner, no workflow command is read from what the pipelines print meanwhile
    (github/commands.py says why)."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        yield
        return
    stop, resume = stop_commands()
    click.echo(stop)
    try:
        yield
    finally:
        click.echo(resume)


def _say(message: str) -> None:
    # Not "twicerun: ", which starts the one sentence an error gets. Paths come from the
    # pull request: nothing printed may read as a workflow command.
    click.echo(neutralize(f"[twicerun] {message}"), err=True)


@cli.group()
def baseline() -> None:
    """The committed baseline that pull requests are compared with."""


@baseline.command(
    "update",
    epilog=epilog(BaselineExit),
)
@click.argument("pipelines", nargs=-1)
@click.option(
    "--trials",
    type=click.IntRange(min=1),
    default=None,
    help="Invocations of every pipeline to measure (with --add: to add). Default: what "
    f"--alpha and the power target need ({default_trials()} for one pipeline at the "
    "defaults, more for several); see docs/action.md.",
)
@click.option(
    "--add",
    is_flag=True,
    help="Add the trials to the existing baseline at --output instead of replacing it; "
    "refused if the pipelines or the settings changed.",
)
@runs_option("Runs per trial; the gate must then measure with the same number.")
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_BASELINE,
    show_default=True,
    help="The baseline file to write (atomically), committed for the gate to read.",
)
@amplify_option("Stress quiet steps in every trial; the gate must then do the same.")
@without_option(
    "Leave this amplifier out of every trial (repeatable); the gate must then do the same. "
    "With --add, the baseline's own choice unless given."
)
@click.option(
    "--threads",
    type=THREADS,
    default=None,
    help="DuckDB threads; the gate measures at the baseline's count unless told otherwise.",
)
@click.option(
    "--policy",
    type=click.Choice(POLICIES),
    default=STRICT,
    show_default=True,
    help="What counts as a difference; the gate must then judge alike.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    callback=finite,
    default=DEFAULT_ALPHA,
    show_default=True,
    help="The gate's significance level, to size the baseline for it.",
)
@click.option(
    "--confirm",
    type=click.IntRange(min=1),
    default=DEFAULT_CONFIRM,
    show_default=True,
    help="The gate's confirmation trials, to size the baseline for them.",
)
@run_dir_option("Where the trials' invocation directories go.")
@step_timeout_option()
def baseline_update(
    pipelines: tuple[str, ...],
    trials: int | None,
    add: bool,
    runs: int,
    output: Path,
    amplify: bool,
    without: frozenset[Amplifier],
    threads: int | None,
    policy: str,
    alpha: float,
    confirm: int,
    run_dir: Path,
    step_timeout: float | None,
) -> int:
    """Run PIPELINES (default pipelines/*.py) TRIALS times and write the baseline to commit.

    A file a glob finds that defines no steps (a helpers.py the pipelines import)
    is skipped, with a note.

    A trial runs every pipeline once; each trial is kept whole, dated and stamped
    with its environment. With --add, the new trials join an existing baseline, so
    a workflow on pushes to main can make it stronger over time.
    """
    check_without(amplify, without)
    keyed = _keyed(_expand(pipelines or (DEFAULT_PIPELINES,)))
    check_directory_target(run_dir, "--run-dir")
    check_json_target(
        output,
        protected=[*(Path(p) for p in keyed), run_dir],
        schemas=(BASELINE_SCHEMA_FAMILY,),
        flag="--output",
        dash=f"the baseline is a file to commit, not a stream; name its path ({DEFAULT_BASELINE})",
    )
    existing = None
    if add:
        create = _create_command(list(keyed), output)
        try:
            existing = baseline_module.load(output, create)
        except BaselineError as exc:
            raise UsageError(f"--add: {exc}") from exc
        if existing.settings.runs != runs or existing.settings.amplify != amplify:
            raise UsageError(
                f"--add: the baseline at {output} was measured with "
                f"{baseline_module.describe_settings(existing.settings)}; add trials with the same --runs and --amplify"
            )
        kept = frozenset(Amplifier(a) for a in existing.settings.without)
        if without and without != kept:
            raise UsageError(
                f"--add: the baseline at {output} was measured with "
                f"{baseline_module.describe_settings(existing.settings)}; add trials with the "
                f"same --without, or leave it out to keep the baseline's"
            )
        without = without or kept
        threads = threads or existing.settings.threads
        policy = existing.settings.policy
        try:
            baseline_module.check_addable(
                existing,
                {key: _shape_now(path) for key, path in keyed.items()},
                {"twicerun": __version__, "duckdb": duckdb.__version__},
            )
        except BaselineError as exc:
            raise UsageError(f"--add: {exc}") from exc
    have = len(existing.trials) if existing else 0
    needed = needed_trials(alpha, confirm, len(keyed))
    default = default_trials(alpha, runs, confirm, pipelines=len(keyed))
    wanted = trials if trials is not None else max(0, default - have)
    if have + wanted < needed:
        powered = trials_for_power(alpha, runs, confirm, len(keyed)) is not None
        raise UsageError(
            f"{have + wanted} trials are too few for the gate ever to find a step worse at alpha "
            f"{alpha} with {plural(confirm, 'confirmation trial')} over {len(keyed)} pipeline"
            f"{'s' if len(keyed) != 1 else ''}; it needs at least {needed} (the default, "
            f"{default}{', also meets the power target' if powered else ''})"
        )
    if wanted == 0:
        click.echo(f"{output} already has {have} trials, the default; nothing to add")
        return BaselineExit.WRITTEN
    options = LoopOptions(
        runs=runs,
        threads=threads,
        run_dir=run_dir,
        amplify=amplify,
        without=without,
        policy=Policy(policy),
        step_timeout=step_timeout,
    )
    measured: list[dict[str, Result]] = []
    started = time.monotonic()
    # In a workflow that refreshes the baseline, the pipelines' output is no more a
    # source of commands than in the check.
    with _commands_stopped():
        for trial in range(1, wanted + 1):
            click.echo(
                f"trial {trial} of {wanted} ({time.monotonic() - started:.0f}s so far)", err=True
            )
            try:
                measured.append(_run_all(keyed, options))
            except TwicerunError:
                # Said before the error itself, which main prints: the file is whole either
                # way, since it is only ever written once every trial is in.
                state = "is as it was" if output.exists() else "was not created"
                click.echo(
                    f"twicerun: trial {trial} of {wanted} stopped, so no baseline was written: "
                    f"{output} {state}",
                    err=True,
                )
                raise
    shown = " ".join(pipelines or (DEFAULT_PIPELINES,))
    command = f"twicerun baseline update {shown} --runs {runs} --output {output}"
    try:
        document = (
            baseline_module.add(existing, measured)
            if existing
            else baseline_module.build(measured, command)
        )
    except BaselineError as exc:
        raise UsageError(str(exc)) from exc
    write_target(
        output,
        document.to_json().encode("utf-8"),
        "--output",
        f"{plural(len(document.trials), 'trial')} were measured",
    )
    click.echo(
        f"wrote {output}: {len(keyed)} pipeline{'s' if len(keyed) != 1 else ''}, "
        f"{len(document.trials)} trials of {runs} runs" + (f" ({wanted} added)" if existing else "")
    )
    _say_power(len(document.trials), alpha, runs, confirm, len(keyed))
    return BaselineExit.WRITTEN


def _say_power(trials: int, alpha: float, runs: int, confirm: int, pipelines: int) -> None:
    """Say so when a baseline passes the floor (the gate can fail a pull request at all)
    but misses the power target: a check that rarely goes red looks the same as one
    whose pull requests are all fine."""
    short = shortfall(trials, alpha, runs, confirm, pipelines)
    if short is None:
        return
    power, enough = short.power, short.enough
    reach = (
        f"{enough - trials} more (`twicerun baseline update --add --trials {enough - trials}`, "
        f"same pipelines and settings) reach the {POWER_TARGET * 100:.0f} percent the default aims for"
        if enough is not None
        else f"no number of trials reaches the {POWER_TARGET * 100:.0f} percent the default aims for "
        f"with {runs} runs a trial; more runs do"
    )
    click.echo(
        f"[twicerun] note: with {plural(trials, 'trial')}, a step that never differed and now "
        f"gives one of two answers at random on each run fails the check {power * 100:.0f} percent of "
        f"the time (alpha {alpha}, {plural(confirm, 'confirmation trial')}, "
        f"{plural(pipelines, 'pipeline')}); {reach}",
        err=True,
    )


def _gate_options(fn):
    for decorator in reversed(
        [
            click.option(
                "--pipelines",
                envvar="TWICERUN_PIPELINES",
                default=DEFAULT_PIPELINES,
                show_default=True,
                help=(
                    "Pipeline files or globs, separated by spaces. A file a glob finds that "
                    "defines no steps (a helpers.py the pipelines import) is skipped."
                ),
            ),
            click.option(
                "--baseline",
                "baseline_path",
                envvar="TWICERUN_BASELINE",
                type=click.Path(path_type=Path),
                default=DEFAULT_BASELINE,
                show_default=True,
                help="The committed baseline (written by `twicerun baseline update`).",
            ),
            click.option(
                "--baseline-source",
                envvar="TWICERUN_BASELINE_SOURCE",
                type=click.Choice(["base", "pull-request"]),
                default="base",
                show_default=True,
                help="base: the baseline as it is on the base branch (--baseline-ref), so a "
                "pull request cannot edit what it is judged against; pull-request: this "
                "checkout's copy. Either way an edit to it is reported at the top.",
            ),
            click.option(
                "--baseline-ref",
                envvar="TWICERUN_BASELINE_REF",
                default=None,
                help="The git ref of the base branch. Default: origin/$GITHUB_BASE_REF on a "
                "pull request, the commit a merge queue's group is built on (its event's "
                "merge_group.base_sha), otherwise this checkout's copy.",
            ),
            runs_option(
                "Runs per trial; a baseline measured with another number is not comparable.",
                envvar="TWICERUN_RUNS",
            ),
            click.option(
                "--threads",
                envvar="TWICERUN_THREADS",
                type=THREADS,
                default=None,
                help="DuckDB threads. Default: the baseline's, so both measure alike; "
                "another count makes every step not comparable.",
            ),
            click.option(
                "--policy",
                envvar="TWICERUN_POLICY",
                type=click.Choice(POLICIES),
                default=STRICT,
                show_default=True,
                help="What counts as a difference; a baseline judged otherwise is not comparable.",
            ),
            click.option(
                "--fail-on",
                "fail_on",
                envvar="TWICERUN_FAIL_ON",
                default=",".join(DEFAULT_FAIL_ON),
                show_default=True,
                help="Which changes fail the check: new (a step that never differed on the "
                "baseline now does, or now loses rows where it only drifted, differs at one "
                "thread where only parallel order moved it, or drifts past the reassociation "
                "bound where it stayed inside), rate-up (it differs, loses rows, differs at one "
                "thread, or drifts past the bound, significantly more), stable (newly "
                f"{Status.STABLE_ON_THIS_INPUT}), not-comparable (a pipeline or step the baseline does not "
                "cover, a baseline measured otherwise, or a step that now writes nothing to "
                "compare or whose amplifiers now fail), or none.",
            ),
            click.option(
                "--alpha",
                envvar="TWICERUN_ALPHA",
                type=click.FloatRange(0, 1, min_open=True, max_open=True),
                callback=finite,
                default=DEFAULT_ALPHA,
                show_default=True,
                help="The most often the check may fail an unchanged pull request, over every "
                "step and pipeline together.",
            ),
            click.option(
                "--confirm",
                envvar="TWICERUN_CONFIRM",
                type=click.IntRange(min=1),
                default=DEFAULT_CONFIRM,
                show_default=True,
                help="Fresh trials of a pipeline with a suspect step; only they can fail it.",
            ),
            click.option(
                "--screen",
                envvar="TWICERUN_SCREEN",
                type=click.FloatRange(0, 1, min_open=True),
                callback=finite,
                default=DEFAULT_SCREEN,
                show_default=True,
                help="How unusual a step's first trial must look to be re-run (a cost knob: it "
                "cannot make the check fail more often than --alpha).",
            ),
            run_dir_option("Where the invocation directories go.", envvar="TWICERUN_RUN_DIR"),
            step_timeout_option(envvar="TWICERUN_STEP_TIMEOUT"),
            click.option(
                "--json",
                "json_path",
                envvar="TWICERUN_RESULT",
                type=click.Path(dir_okay=False, path_type=Path),
                default=None,
                help="Write the gate document (decisions and every Result) here ('-' for "
                "stdout with `baseline compare`, which replaces the decision).",
            ),
        ]
    ):
        fn = decorator(fn)
    return fn


def _compare(
    *,
    pipelines: str,
    baseline_path: Path,
    baseline_source: str,
    baseline_ref: str | None,
    runs: int,
    threads: int | None,
    policy: str,
    fail_on: str,
    alpha: float,
    confirm: int,
    screen: float,
    run_dir: Path,
    step_timeout: float | None = None,
    amplify: bool = True,
    without: frozenset[Amplifier] = frozenset(),
    workflow: Workflow,
) -> Gate:
    failures: dict[str, PipelineFailure] = {}
    keyed = _keyed(_expand([pipelines]), failures)
    check_directory_target(run_dir, "--run-dir")
    options = GateOptions(alpha=alpha, confirm=confirm, screen=screen, fail_on=_fail_on(fail_on))
    ref = baseline_ref or workflow.baseline_ref
    chosen = choose(
        baseline_path,
        source=baseline_source,
        ref=ref,
        create_command=_create_command(list(keyed), baseline_path),
    )
    if threads is None and chosen.baseline is not None:
        threads = chosen.baseline.settings.threads
    loop = LoopOptions(
        runs=runs,
        threads=threads,
        run_dir=run_dir,
        policy=Policy(policy),
        amplify=amplify,
        without=without,
        # A check that will exit 2 for its baseline still reports, but prunes nothing.
        keep=0 if chosen.baseline is None else 1,
        step_timeout=step_timeout,
    )
    results = _run_all(keyed, loop, log=True, failures=failures)
    if chosen.baseline is not None:
        # alpha is shared among the pipelines the check can compare, so each needs this many.
        shared = len(set(keyed) & set(chosen.baseline.pipelines)) or 1
        too_few = needed_trials(alpha, confirm, shared)
        if len(chosen.baseline.trials) < too_few:
            chosen = type(chosen)(
                None,
                chosen.source,
                f"the baseline has {len(chosen.baseline.trials)} trials, too few for the check "
                f"ever to find a step worse at alpha {alpha} with {plural(confirm, 'confirmation trial')}; "
                f"it needs at least {too_few}: add them with `twicerun baseline update --add "
                f"--trials {too_few - len(chosen.baseline.trials)}`",
                chosen.moved,
            )

    reruns: dict[str, int] = {}

    def rerun(key: str) -> Result:
        reruns[key] = reruns.get(key, 0) + 1
        why = f"a step looks worse; confirmation trial {reruns[key]} of {confirm}"
        failed: dict[str, PipelineFailure] = {}
        again = _run_all({key: keyed[key]}, loop, log=True, why=why, failures=failed)
        if key in failed:
            trial = f"confirmation trial {reruns[key]} of {confirm}"
            raise DidNotFinish(dataclasses.replace(failed[key], during=trial))
        return again[key]

    return evaluate(
        results,
        chosen.baseline,
        rerun=rerun,
        options=options,
        baseline_error=chosen.error,
        baseline_source=chosen.source,
        baseline_moved=chosen.moved,
        pull_request=workflow.pull_request,
        failures=list(failures.values()),
        changed_by=workflow.changed_by,
    )


def _gate_exit(gate: Gate) -> GateExit:
    # As `twicerun run` would exit for the same pipeline: a step that raised is 3, a
    # pipeline refused is 2; the check reported both before exiting.
    if any(f.crashed for f in gate.failures):
        return GateExit.CRASHED
    if gate.baseline_error or gate.failures:
        return GateExit.BAD_INPUT
    return GateExit.FAILED if gate.regressions else GateExit.PASSED


def _write_document(gate: Gate, path: Path) -> None:
    write_target(path, gate.json().encode("utf-8"), "--json", "the decision above is complete")


def _check_document_target(json_path: Path | None, options: dict, dash: str | None) -> None:
    """A --json that would overwrite a pipeline, the baseline or anything but a gate
    document, or that cannot be written, is refused before the trials run."""
    if json_path is None:
        return
    check_json_target(
        json_path,
        protected=[
            # Every file the patterns name, by glob alone: _expand would read each one again
            # (and say again which define no steps) before _compare expands them for real.
            *(Path(m) for part in options["pipelines"].split() for m in glob.glob(part) or [part]),
            Path(options["baseline_path"]),
            Path(options["run_dir"]),
        ],
        schemas=(GATE_SCHEMA_FAMILY,),
        dash=dash,
    )


@baseline.command("compare", epilog=GATE_EXIT_CODES)
@click.argument("arguments", metavar="[PIPELINES]...", nargs=-1)
@_gate_options
# Read from the environment as the gate reads them, so that the action's settings, set as
# variables, reproduce its decision locally (the other options already were).
@amplify_option(
    "Stress the steps the loop found quiet, as the baseline did.", envvar="TWICERUN_AMPLIFY"
)
@without_option(
    "Leave this amplifier out (repeatable, or names separated by spaces in "
    "TWICERUN_WITHOUT), as the baseline did.",
    envvar="TWICERUN_WITHOUT",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["markdown", "text"]),
    default=None,
    help="How to print the decision: the job summary's Markdown, or the same read back as "
    "text. Default: text on a terminal, Markdown otherwise.",
)
def baseline_compare(arguments, json_path, amplify, without, output_format, **options) -> int:
    """Run PIPELINES once (or --pipelines; default pipelines/*.py) and decide, per step,
    how they compare with the baseline.

    The same decision `twicerun gate` makes in a workflow, with the job summary's
    content: a step that looks worse is re-run --confirm times, and only those fresh
    trials can fail it (docs/action.md explains the test).
    """
    if arguments:
        # As `baseline update PIPELINES` takes them; --pipelines is the gate's spelling.
        given = click.get_current_context().get_parameter_source("pipelines")
        if given is ParameterSource.COMMANDLINE:
            raise UsageError(
                "pipelines given both as arguments and with --pipelines; give them one way"
            )
        # Joined, as --pipelines is spelled, the arguments lose their boundaries: a path
        # with a space must be refused as the one argument it was.
        for argument in arguments:
            if len(argument.split()) > 1:
                _refuse_space(argument)
        options["pipelines"] = " ".join(arguments)
    pipelines = options["pipelines"]
    check_without(amplify, without)
    _check_document_target(json_path, options, dash=None)
    gate = _compare(
        amplify=amplify, without=without, workflow=Workflow.from_environ(os.environ), **options
    )
    to_stdout = str(json_path) == "-"
    if to_stdout:
        click.echo(gate.json(), nl=False)
    else:
        document = summary(gate, pipelines)
        if (output_format or ("text" if sys.stdout.isatty() else "markdown")) == "text":
            document = markdown_to_text(document)
        click.echo(neutralize(document), nl=False)
    if gate.baseline_error:
        click.echo(neutralize(f"twicerun: {gate.baseline_error}"), err=True)
    if json_path and not to_stdout:  # after the decision: a path that fails loses nothing
        _write_document(gate, json_path)
    return _gate_exit(gate)


@cli.command(epilog=GATE_EXIT_CODES)
@_gate_options
@click.option(
    "--comment/--no-comment",
    envvar="TWICERUN_COMMENT",
    default=True,
    show_default=True,
    help="Post (or update) the sticky pull-request comment.",
)
@amplify_option("Stress the steps the loop found quiet.", envvar="TWICERUN_AMPLIFY")
@without_option(
    "Leave this amplifier out (repeatable, or names separated by spaces in "
    "TWICERUN_WITHOUT), as the baseline did.",
    envvar="TWICERUN_WITHOUT",
)
@click.option(
    "--token-file",
    envvar="TWICERUN_TOKEN_FILE",
    type=click.Path(dir_okay=False),
    default=None,
    help="Read the token for the comment from this file and delete it before any pipeline "
    "runs (the action's way); otherwise GITHUB_TOKEN, removed from the environment first.",
)
@click.option(
    "--comment-id",
    envvar="TWICERUN_COMMENT_ID",
    default=None,
    help="What the sticky comment is found again by. Default: the pipelines that ran, "
    "sorted; give one per job when several jobs check the same pipelines (a matrix).",
)
@click.option(
    "--sarif",
    "sarif_path",
    envvar="TWICERUN_SARIF",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the steps that got worse or diverged as SARIF, for code scanning.",
)
def gate(
    json_path, comment, amplify, without, token_file, comment_id, sarif_path, **options
) -> int:
    """The GitHub Action's one step: compare with the baseline, then comment, annotate,
    summarise and set outputs, from the environment a workflow runner provides."""
    check_without(amplify, without)
    _check_document_target(
        json_path,
        options,
        dash="the gate's standard output carries workflow commands; name a file, or leave "
        "--json out for the `result` output's file",
    )
    workflow = Workflow.from_environ(os.environ)
    if not os.environ.get("RUNNER_TEMP"):
        # Not on a runner: the document (and a comment that could not be posted) go beside
        # the invocations, not into the working tree of the repository being checked.
        options["run_dir"].mkdir(parents=True, exist_ok=True)
        workflow = dataclasses.replace(workflow, runner_temp=options["run_dir"])
    workflow.refuse_fork_code_with_secrets()
    # Pipelines are code from the pull request: they run without the token, which
    # only the posting code gets back.
    token = take_token(os.environ, token_file)
    started = time.time()
    with _commands_stopped():
        result = _compare(amplify=amplify, without=without, workflow=workflow, **options)
    code = _gate_exit(result)
    delivered = deliver(
        result,
        workflow,
        pipelines=options["pipelines"],
        token=token,
        comment=comment,
        comment_id=comment_id,
        document=json_path,
        sarif_path=sarif_path,
        save=write_bytes_atomic,
        exit_code=int(code),
    )
    for line in delivered.lines:
        click.echo(line)
    click.echo(closing_line(result, code, time.time() - started))
    return code


def closing_line(gate: Gate, code: GateExit, seconds: float) -> str:
    """The log's last line: whether the check passed, in the summary's words, then the
    action's two counting outputs by name. It used to count regressions alone, and read
    "0 regressions" above a check that failed for want of a baseline; then "1 regression"
    after "1 step could not be compared", which is not a step that got worse."""
    verdict = "check passed" if code == GateExit.PASSED else f"check failed (exit {int(code)})"
    counts = f"outputs regressions={len(gate.regressions)}, diverged={gate.diverged}"
    return f"twicerun: {verdict}: {headline(gate)} ({counts}), in {seconds:.1f}s"


@cli.command("comment", epilog=epilog(PostExit))
@click.argument("body_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--number", type=click.IntRange(min=1), required=True, help="The pull request.")
@click.option("--repository", envvar="GITHUB_REPOSITORY", required=True, help="OWNER/REPO.")
def comment_command(body_file: Path, number: int, repository: str) -> int:
    """Post a comment body that `twicerun gate` wrote to a file, as the sticky comment.

    For a pull request from a fork, whose token cannot write: a `workflow_run`
    workflow with a token that can downloads the file and runs this, from the
    default branch's checkout, never the pull request's code (docs/action.md).
    """
    body = body_file.read_text(encoding="utf-8")
    if not body.startswith("<!-- twicerun:comment:"):
        raise UsageError(
            f"{body_file} is not a comment twicerun gate wrote (no marker on its first line)"
        )
    workflow = Workflow.from_environ(os.environ)
    posted = post_sticky(
        api_url=workflow.api_url,
        token=os.environ.get("GITHUB_TOKEN", ""),
        repository=repository,
        number=number,
        body=body,
        fallback=body_file.with_name(body_file.name + ".unposted"),
        save=write_bytes_atomic,
    )
    if posted.action == "written-to-file":
        click.echo(f"twicerun: GitHub refused the comment ({posted.reason})", err=True)
        return PostExit.FAILED
    click.echo(f"twicerun: comment {posted.action}: {posted.url}")
    return PostExit.DONE


@cli.command("post", epilog=epilog(PostExit))
@click.argument("document", type=click.Path(exists=True, path_type=Path))
@click.option("--repository", envvar="GITHUB_REPOSITORY", required=True, help="OWNER/REPO.")
@click.option(
    "--comment-id",
    envvar="TWICERUN_COMMENT_ID",
    default=None,
    help="The sticky comment's identity, as the gate that wrote the document used it.",
)
def post(document: Path, repository: str, comment_id: str | None) -> int:
    """Post the comment of a gate DOCUMENT that a pull request's run left as an artifact
    (the file, or the directory the artifact was downloaded into).

    For pull requests from forks, whose own run has a read-only token: a
    `workflow_run` workflow (the action's `mode: post`) downloads the document and
    runs this. The pull request is looked up from the workflow run's head, never
    taken from the artifact; a document naming another pull request or another head
    is refused; the body is rendered here from the document's data. Nothing from
    the pull request is checked out or run.
    """
    if document.is_dir():
        found = sorted(document.glob("twicerun-*-result.json"))
        if len(found) != 1:
            raise UsageError(
                f"{document} holds {len(found)} gate documents (twicerun-*-result.json); "
                f"name the one to post"
            )
        document = found[0]
    workflow = Workflow.from_environ(os.environ)
    run = workflow.workflow_run
    try:
        gate = Gate.from_document(json.loads(document.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise UsageError(
            f"{document} is not a twicerun gate document ({exc}); posting nothing"
        ) from exc
    claimed = gate.pull_request or {}
    api_url = workflow.api_url
    token = os.environ.get("GITHUB_TOKEN", "")
    head_repository = (run.get("head_repository") or {}).get("full_name") or repository
    number = find_pull_request(
        api_url=api_url,
        token=token,
        repository=repository,
        head_repository=head_repository,
        head_branch=str(run.get("head_branch") or ""),
        head_sha=str(run["head_sha"]),
    )
    if number is None:
        raise UsageError(
            f"no open pull request into {repository} has the head {run['head_sha']}; posting nothing"
        )
    if claimed.get("number") != number or claimed.get("head_sha") != run["head_sha"]:
        raise UsageError(
            f"the document names pull request #{claimed.get('number')} at "
            f"{claimed.get('head_sha')}, but the run that made it was for #{number} at "
            f"{run['head_sha']}; posting nothing"
        )
    run_url = run.get("html_url")
    posted = post_sticky(
        api_url=api_url,
        token=token,
        repository=repository,
        number=number,
        body=comment_body(gate, "", run_url, comment_id=comment_id),
        fallback=document.with_name(document.name + ".unposted.md"),
        save=write_bytes_atomic,
    )
    if posted.action in ("written-to-file", "failed"):
        click.echo(f"twicerun: GitHub refused the comment ({posted.reason})", err=True)
        return PostExit.FAILED
    click.echo(f"twicerun: comment {posted.action}: {posted.url}")
    return PostExit.DONE
