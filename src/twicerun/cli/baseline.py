"""`twicerun baseline update` and `twicerun baseline compare`: the committed baseline,
and the gate's decision made against it off a runner."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

import click
import duckdb
from click.core import ParameterSource

from twicerun import __version__
from twicerun.cli.app import (
    THREADS,
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
from twicerun.cli.gate import (
    check_document_target,
    gate_exit,
    gate_options,
    run_check,
    write_document,
)
from twicerun.cli.trials import (
    BASELINE_SCHEMA_FAMILY,
    DEFAULT_BASELINE,
    DEFAULT_PIPELINES,
    GATE_EXIT_CODES,
    commands_stopped,
    create_command,
    expand_pipelines,
    keyed_pipelines,
    refuse_space,
    run_all,
    shape_now,
)
from twicerun.errors import (
    TwicerunError,
    UsageError,
)
from twicerun.github import baseline as baseline_module
from twicerun.github.baseline import BaselineError
from twicerun.github.commands import neutralize
from twicerun.github.decision import (
    DEFAULT_ALPHA,
    DEFAULT_CONFIRM,
    POWER_TARGET,
    default_trials,
    needed_trials,
    shortfall,
    trials_for_power,
)
from twicerun.github.summary import summary
from twicerun.github.workflow import Workflow
from twicerun.judge.policy import POLICIES, STRICT, Policy
from twicerun.render.evidence import plural
from twicerun.render.plaintext import markdown_to_text
from twicerun.result import Result
from twicerun.runner.loop import LoopOptions
from twicerun.vocabulary.exits import BaselineExit
from twicerun.vocabulary.loop import Amplifier


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
    help="DuckDB threads; the gate measures at the baseline's count unless told otherwise. "
    "With --add, the baseline's count unless given, and refused if given otherwise.",
)
@click.option(
    "--policy",
    type=click.Choice(POLICIES),
    default=STRICT,
    show_default=True,
    help="What counts as a difference; the gate must then judge alike. With --add, the "
    "baseline's policy unless given, and refused if given otherwise.",
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

    A directory stands for the *.py files in it. A file a glob or a directory finds
    that defines no steps (a helpers.py the pipelines import) is skipped, with a note.

    A trial runs every pipeline once; each trial is kept whole, dated and stamped
    with its environment. With --add, the new trials join an existing baseline, so
    a workflow on pushes to main can make it stronger over time.
    """
    check_without(amplify, without)
    keyed = keyed_pipelines(expand_pipelines(pipelines or (DEFAULT_PIPELINES,)))
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
        create = create_command(list(keyed), output)
        try:
            existing = baseline_module.load(output, create)
        except BaselineError as exc:
            raise UsageError(f"--add: {exc}") from exc
        # Threads and policy left out are the baseline's; given otherwise, every trial
        # used to be measured before the mismatch was refused (threads), or the policy
        # given was dropped for the baseline's without a word.
        given = click.get_current_context().get_parameter_source("policy")
        asked = dataclasses.replace(
            existing.settings,
            runs=runs,
            amplify=amplify,
            threads=threads or existing.settings.threads,
            policy=policy if given is ParameterSource.COMMANDLINE else existing.settings.policy,
        )
        if asked != existing.settings:
            alike = baseline_module.measure_alike(
                existing.settings,
                asked,
                action=False,
                otherwise="measure a new baseline without --add",
            )
            raise UsageError(
                f"--add: the baseline at {output} was measured with "
                f"{baseline_module.describe_settings(existing.settings)}; {alike}"
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
                {key: shape_now(path) for key, path in keyed.items()},
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
    with commands_stopped():
        for trial in range(1, wanted + 1):
            click.echo(
                f"trial {trial} of {wanted} ({time.monotonic() - started:.0f}s so far)", err=True
            )
            try:
                measured.append(run_all(keyed, options))
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


@baseline.command("compare", epilog=GATE_EXIT_CODES)
@click.argument("arguments", metavar="[PIPELINES]...", nargs=-1)
@gate_options
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
                refuse_space(argument)
        options["pipelines"] = " ".join(arguments)
    pipelines = options["pipelines"]
    check_without(amplify, without)
    check_document_target(json_path, options, dash=None)
    gate = run_check(
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
        write_document(gate, json_path)
    return gate_exit(gate)
