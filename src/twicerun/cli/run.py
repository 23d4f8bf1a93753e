"""`twicerun run` and `twicerun judge`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from twicerun.cli.app import (
    MAX_RUNS,
    RUN_EXIT_CODES,
    THREADS,
    Progress,
    amplify_option,
    check_directory_target,
    check_json_target,
    check_without,
    cli,
    emit,
    engine_option,
    exit_code,
    parse_seeds,
    policy_options,
    result_json_option,
    run_dir_option,
    seed_option,
    spark_master_option,
    step_timeout_option,
    without_option,
)
from twicerun.judge.policy import Policy
from twicerun.runner.keys import parse_keys
from twicerun.runner.loop import DEFAULT_RUNS, LoopOptions, run_pipeline
from twicerun.runner.rescore import rejudge, resolve_invocation
from twicerun.vocabulary.loop import Amplifier


@cli.command(epilog=RUN_EXIT_CODES)
@click.argument("pipeline", type=click.Path(dir_okay=True, path_type=Path))
@click.option(
    "--runs",
    type=int,
    default=DEFAULT_RUNS,
    show_default=True,
    help="How many times to run every step. Run 1 is the reference; each later run is "
    "compared with it, so each step gets RUNS-1 comparisons.",
)
@click.option(
    "--threads",
    type=THREADS,
    default=None,
    help="DuckDB threads for every step (on Spark: shuffle partitions and the partitions "
    "each artifact is read into). Default: what DuckDB picks on this machine.",
)
@engine_option()
@spark_master_option()
@click.option(
    "--containment/--no-containment",
    default=True,
    show_default=True,
    help="Contained, runs 2..N read run 1's upstream artifacts, so a difference at one step "
    "cannot be charged again to the steps after it.",
)
@run_dir_option("Where invocation directories go.")
@click.option(
    "--keep",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="Completed invocation directories of this pipeline to keep after a successful "
    "invocation (0 keeps all). Other pipelines' invocations in the run directory, and "
    "failed, interrupted and live ones, are never removed.",
)
@result_json_option(
    "Also write the Result document here ('-' for stdout, which replaces the report). "
    "A run that stops before its report (exit 2, 3, 130 or 143) writes none and leaves "
    "FILE as it was; why it stopped is on stderr."
)
@seed_option
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="ARTIFACT=COL[,COL...]",
    help="Match this artifact's rows on these exact columns only; its other exact columns "
    "are left out of the comparison (say, a surrogate key that is not part of the answer). "
    'A name holding a comma goes in double quotes, as the report shows it: a="amount, usd". '
    "Repeatable.",
)
@amplify_option(
    "Stress the steps the loop found quiet (tie collapse, more threads, more rows, "
    "another arrival order). --no-amplify skips this, and the report says so."
)
@without_option(
    "Leave this amplifier out while the others run (repeatable); the report lists it as "
    "not varied. docs/amplification.md says what each one varies."
)
@click.option(
    "--keep-copies",
    is_flag=True,
    help="Keep, for each step, the latest later run's copy of any artifact that differed from "
    "run 1 (by default only run 1's artifacts stay: the findings are in the Result).",
)
@step_timeout_option()
@policy_options
def run(
    pipeline: Path,
    runs: int,
    threads: int | None,
    containment: bool,
    run_dir: Path,
    keep: int,
    json_path: str | None,
    seeds: tuple[str, ...],
    keys: tuple[str, ...],
    amplify: bool,
    without: frozenset[Amplifier],
    keep_copies: bool,
    policy: str,
    tolerance_rel: float | None,
    tolerance_ulps: int | None,
    engine: str | None,
    spark_master: str | None,
    step_timeout: float | None,
) -> int:
    """Run PIPELINE several times and report, per step, how often it fired.

    A step fires in a comparison when an artifact it wrote differs from run 1's
    (or was written by one run only) and the policy does not tolerate it. Its rate
    is printed as `k of m`. Each step that fired is re-executed at threads=1 to
    tell a parallel-order cause from one that persists; each step that stayed quiet
    is handed stressed inputs, since a clean loop only speaks for the input it got.
    """
    if runs > MAX_RUNS:
        raise click.BadParameter(
            f"{runs} is more than {MAX_RUNS}; each run keeps a copy of every artifact until it "
            f"is compared, and a fire rate needs tens of runs, not thousands",
            param_hint="--runs",
        )
    check_without(amplify, without)
    check_directory_target(run_dir, "--run-dir")
    check_json_target(json_path, protected=[pipeline, run_dir])
    options = LoopOptions(
        runs=runs,
        threads=threads,
        containment=containment,
        run_dir=run_dir,
        keep=keep,
        seeds=parse_seeds(seeds),
        keys=parse_keys(keys),
        policy=Policy(policy, tolerance_rel, tolerance_ulps),
        amplify=amplify,
        without=without,
        keep_copies=keep_copies,
        engine=engine,
        spark_master=spark_master,
        step_timeout=step_timeout,
    )
    progress = Progress(enabled=sys.stderr.isatty())
    try:
        result = run_pipeline(pipeline, options, progress)
    finally:
        progress.clear()
    emit(result, json_path)
    return exit_code(result)


@cli.command(epilog=RUN_EXIT_CODES)
# Neither exists=True nor file_okay=False: a directory --keep removed is told apart from a
# typo, and a file (result.json, the pipeline) from a directory, by resolve_invocation.
@click.argument("run_dir", type=click.Path(path_type=Path))
@policy_options
@result_json_option(
    "Also write the re-scored Result here ('-' for stdout, which replaces the report)."
)
def judge(
    run_dir: Path,
    policy: str,
    tolerance_rel: float | None,
    tolerance_ulps: int | None,
    json_path: str | None,
) -> int:
    """Re-score a saved invocation under another policy, executing nothing.

    RUN_DIR is an invocation directory, or a run directory (such as .twicerun), in
    which case the newest completed invocation is judged. The measurements are the
    ones recorded; only the verdicts change. The saved result.json is not modified.
    """
    invocation = resolve_invocation(run_dir)
    check_json_target(json_path, protected=[invocation.root])
    result = rejudge(invocation, Policy(policy, tolerance_rel, tolerance_ulps))
    # What the run's retention removed and kept was true when it ran; judge removes nothing.
    emit(result, json_path, retention=False)
    return exit_code(result)
