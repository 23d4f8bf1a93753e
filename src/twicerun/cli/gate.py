"""`twicerun gate`, the GitHub Action's one step, and the check it shares with
`twicerun baseline compare`: its options, running it, and its exit code."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import click

from twicerun.cli.app import (
    THREADS,
    amplify_option,
    check_directory_target,
    check_json_target,
    check_without,
    cli,
    finite,
    run_dir_option,
    runs_option,
    step_timeout_option,
    without_option,
    write_target,
)
from twicerun.cli.trials import (
    DEFAULT_BASELINE,
    DEFAULT_PIPELINES,
    GATE_EXIT_CODES,
    GATE_SCHEMA_FAMILY,
    commands_stopped,
    create_command,
    expand_pipelines,
    fail_on_words,
    keyed_pipelines,
    pattern_matches,
    run_all,
)
from twicerun.github.decision import (
    DEFAULT_ALPHA,
    DEFAULT_CONFIRM,
    DEFAULT_SCREEN,
    needed_trials,
)
from twicerun.github.deliver import deliver
from twicerun.github.gate import (
    DidNotFinish,
    Gate,
    GateOptions,
    PipelineFailure,
    evaluate,
)
from twicerun.github.source import choose
from twicerun.github.summary import headline
from twicerun.github.workflow import Workflow, runner_files_hidden, take_token
from twicerun.judge.policy import POLICIES, STRICT, Policy
from twicerun.render.evidence import plural
from twicerun.result import Result
from twicerun.runner.loop import LoopOptions
from twicerun.storage.atomic import write_bytes_atomic
from twicerun.vocabulary.exits import GateExit
from twicerun.vocabulary.gate import DEFAULT_FAIL_ON
from twicerun.vocabulary.loop import Amplifier, Status


def gate_options(fn):
    for decorator in reversed(
        [
            click.option(
                "--pipelines",
                envvar="TWICERUN_PIPELINES",
                default=DEFAULT_PIPELINES,
                show_default=True,
                help=(
                    "Pipeline files, globs or directories (a directory stands for its *.py "
                    "files), separated by spaces. A file a glob or a directory finds that "
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


def run_check(
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
    keyed = keyed_pipelines(expand_pipelines([pipelines]), failures)
    check_directory_target(run_dir, "--run-dir")
    options = GateOptions(
        alpha=alpha, confirm=confirm, screen=screen, fail_on=fail_on_words(fail_on)
    )
    ref = baseline_ref or workflow.baseline_ref
    chosen = choose(
        baseline_path,
        source=baseline_source,
        ref=ref,
        create_command=create_command(list(keyed), baseline_path),
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
    results = run_all(keyed, loop, log=True, failures=failures)
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
        again = run_all({key: keyed[key]}, loop, log=True, why=why, failures=failed)
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


def gate_exit(gate: Gate) -> GateExit:
    # As `twicerun run` would exit for the same pipeline: a step that raised is 3, a
    # pipeline refused is 2; the check reported both before exiting.
    if any(f.crashed for f in gate.failures):
        return GateExit.CRASHED
    if gate.baseline_error or gate.failures:
        return GateExit.BAD_INPUT
    return GateExit.FAILED if gate.regressions else GateExit.PASSED


def write_document(gate: Gate, path: Path) -> None:
    write_target(path, gate.json().encode("utf-8"), "--json", "the decision above is complete")


def check_document_target(json_path: Path | None, options: dict, dash: str | None) -> None:
    """A --json that would overwrite a pipeline, the baseline or anything but a gate
    document, or that cannot be written, is refused before the trials run."""
    if json_path is None:
        return
    check_json_target(
        json_path,
        protected=[
            # Every file the patterns name, by glob alone: expand_pipelines would read each one again
            # (and say again which define no steps) before run_check expands them for real.
            *(
                Path(m)
                for part in options["pipelines"].split()
                for m in pattern_matches(part)[1] or [part]
            ),
            Path(options["baseline_path"]),
            Path(options["run_dir"]),
        ],
        schemas=(GATE_SCHEMA_FAMILY,),
        dash=dash,
    )


@cli.command(epilog=GATE_EXIT_CODES)
@gate_options
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
    check_document_target(
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
    with commands_stopped(), runner_files_hidden(os.environ):
        result = run_check(amplify=amplify, without=without, workflow=workflow, **options)
    code = gate_exit(result)
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
