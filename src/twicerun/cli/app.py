"""The command group, the exit codes, and the helpers every verb shares.

Nothing below the cli package prints or exits. Every room raises or returns; the
modules here decide what the user sees and which integer the shell gets.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from enum import IntEnum
from pathlib import Path
from typing import ClassVar

import click

from twicerun._version import __version__
from twicerun.cli.other_verbs import Verb, Verbs
from twicerun.errors import UsageError
from twicerun.github.commands import neutralize
from twicerun.judge.policy import POLICIES, STRICT
from twicerun.render.terminal import render_run
from twicerun.result import Result
from twicerun.runner.progress import ProgressEvent
from twicerun.storage.atomic import write_bytes_atomic
from twicerun.storage.space import disk_full
from twicerun.vocabulary.exits import MEANINGS, RunExit
from twicerun.vocabulary.loop import Amplifier, Status

# Bounds on flags a typo can make absurd. Runs: each keeps a copy of every artifact
# until compared, and a study needs tens, not thousands. Threads: DuckDB starts one
# OS thread each, and past a few thousand the process cannot.
MAX_RUNS = 1000
MAX_THREADS = 4096
THREADS = click.IntRange(min=1, max=MAX_THREADS)


def run_dir_option(help: str, **extra):
    """--run-dir, alike on every verb that runs pipelines."""
    from twicerun.runner.loop import DEFAULT_RUN_DIR

    return click.option(
        "--run-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=DEFAULT_RUN_DIR,
        show_default=True,
        help=help,
        **extra,
    )


def runs_option(help: str, **extra):
    """--runs for a trial of the gate or the baseline: two or more, as a study needs."""
    from twicerun.runner.loop import DEFAULT_RUNS

    return click.option(
        "--runs",
        type=click.IntRange(min=2, max=MAX_RUNS),
        default=DEFAULT_RUNS,
        show_default=True,
        help=help,
        **extra,
    )


def amplify_option(help: str, **extra):
    return click.option(
        "--amplify/--no-amplify", default=True, show_default=True, help=help, **extra
    )


class Seconds(click.FloatRange):
    """A positive number of seconds; named so, where click would say 'float range'."""

    name = "number of seconds"

    def __init__(self):
        super().__init__(min=0, min_open=True)


LOOP_TIMEOUT_HELP = (
    "Stop any one execution of a step that runs longer than this, rather than wait on it: "
    "in the loop the step crashed (exit 3), in the bisect its cause is left unsettled, under "
    "an amplifier that amplifier failed (exit 5). A slower run is never counted as a "
    "different answer. Default: no limit."
)


def step_timeout_option(help: str = LOOP_TIMEOUT_HELP, **extra):
    """--step-timeout, alike on every verb that executes steps."""
    return click.option(
        "--step-timeout",
        type=Seconds(),
        default=None,
        metavar="SECONDS",
        callback=finite,
        help=help,
        **extra,
    )


# The names --without takes: each amplifier as reports name it, with hyphens for spaces.
WITHOUT_NAMES = {a.value.replace(" ", "-"): a for a in Amplifier}


def without_option(help: str, **extra):
    """--without, repeatable: amplifiers to turn off while the others run."""

    def to_amplifiers(_ctx, _param, values) -> frozenset[Amplifier]:
        return frozenset(WITHOUT_NAMES[v] for v in values)

    return click.option(
        "--without",
        multiple=True,
        type=click.Choice(list(WITHOUT_NAMES)),
        callback=to_amplifiers,
        help=help,
        **extra,
    )


def check_without(amplify: bool, without: frozenset[Amplifier]) -> None:
    """--without names amplifiers to leave out of a run that amplifies; with --no-amplify
    there is nothing to leave out, and the user meant one or the other."""
    if without and not amplify:
        names = ", ".join(n for n, a in WITHOUT_NAMES.items() if a in without)
        raise UsageError(
            f"--without {names} turns amplifiers off, and --no-amplify already runs none; "
            f"drop one of the two"
        )


# --seed for a verb that executes a pipeline: run and audit hold a seed alike.
seed_option = click.option(
    "--seed",
    "seeds",
    multiple=True,
    metavar="STEP=INTEGER",
    help="Hold a seeded step's seed at this value instead of its default (repeatable).",
)


ENGINE_HELP = (
    "Run the steps on this engine instead of the one the pipeline declares "
    "(ENGINE = ...; DuckDB when it declares none). Spark needs pip install 'twicerun[spark]' "
    "and Java 17+."
)
SPARK_MASTER_HELP = (
    "For a Spark pipeline: the cluster to run on (spark://..., yarn, k8s://..., or "
    "sc://... for Spark Connect), with the run directory on a path both sides read. "
    "Default: local[THREADS], started and stopped by twicerun."
)


def engine_option(help: str = ENGINE_HELP):
    """--engine for a verb that executes a pipeline's steps."""
    return click.option("--engine", type=click.Choice(["duckdb", "spark"]), default=None, help=help)


def spark_master_option(help: str = SPARK_MASTER_HELP):
    """--spark-master for a verb that executes a Spark pipeline's steps."""
    return click.option("--spark-master", metavar="URL", default=None, help=help)


def result_json_option(help: str):
    """--json for a verb that writes a Result: a file, or '-' for stdout."""
    return click.option(
        "--json",
        "json_path",
        type=click.Path(dir_okay=False, allow_dash=True),
        default=None,
        help=help,
    )


def epilog(kind: type[IntEnum]) -> str:
    """The `--help` section listing a verb's exit codes, from the vocabulary's own sentences."""
    width = max(len(str(int(code))) for code in kind)
    lines = ["\b", "Exit codes:"]
    for code in kind:
        wrapped = textwrap.wrap(MEANINGS[kind][code], 62)
        lines.append(f"  {int(code):<{width}}  {wrapped[0]}")
        lines += [f"  {'':<{width}}  {more}" for more in wrapped[1:]]
    return "\n".join(lines) + "\n"


RUN_EXIT_CODES = epilog(RunExit)


def exit_code(result: Result) -> RunExit:
    """The exit code a finished `run` or `judge` returns. The only place it is decided.

    Divergence on the user's own input outranks divergence on an input twicerun
    made up, which outranks a check that could not run: each integer carries one
    claim, and the most serious one present wins.
    """
    statuses = {s.status for s in result.steps}
    if Status.DIVERGENT in statuses:
        return RunExit.DIVERGED
    if Status.STABLE_ON_THIS_INPUT in statuses:
        return RunExit.ONLY_AMPLIFIED
    if Status.AMPLIFICATION_FAILED in statuses:
        return RunExit.AMPLIFIER_FAILED
    return RunExit.CLEAN


# The environment variables action.yml sets from its inputs, by the input's name, so an
# error in a value can name the input the workflow wrote (tests/test_action.py keeps
# this in step with action.yml).
ACTION_INPUTS = {
    "TWICERUN_PIPELINES": "pipelines",
    "TWICERUN_RUNS": "runs",
    "TWICERUN_POLICY": "policy",
    "TWICERUN_BASELINE": "baseline",
    "TWICERUN_BASELINE_SOURCE": "baseline-source",
    "TWICERUN_CONFIRM": "confirm",
    "TWICERUN_THREADS": "threads",
    "TWICERUN_COMMENT": "comment",
    "TWICERUN_FAIL_ON": "fail-on",
    "TWICERUN_ALPHA": "alpha",
    "TWICERUN_AMPLIFY": "amplify",
    "TWICERUN_WITHOUT": "without",
    "TWICERUN_STEP_TIMEOUT": "step-timeout",
    "TWICERUN_WORKING_DIRECTORY": "working-directory",
    "TWICERUN_COMMENT_ID": "comment-id",
}


class Progress:
    """Where long work is. On a terminal, one line on stderr rewritten in place. Elsewhere
    (a CI log, a file), a plain line at a step boundary once `HEARTBEAT` seconds have
    passed since the last one, so a long run is not silent in a log and a short one
    prints nothing there."""

    HEARTBEAT = 30.0

    def __init__(self, enabled: bool, clock: Callable[[], float] = time.monotonic):
        self.enabled = enabled
        self.shown = False
        self.clock = clock
        self.started = self.last = clock()

    def __call__(self, event: ProgressEvent) -> None:
        text = (
            f"{event.phase} run {event.run}/{event.runs}, "
            f"step {event.step_index + 1}/{event.steps} {event.step_name}"
        )
        if not self.enabled:
            now = self.clock()
            if now - self.last >= self.HEARTBEAT:
                self.last = now
                took = int(now - self.started)
                click.echo(f"[twicerun] at {text} ({took // 60}m{took % 60:02d}s so far)", err=True)
            return
        click.echo(f"\r\033[K{text}", nl=False, err=True)
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            click.echo("\r\033[K", nl=False, err=True)
            self.shown = False


def policy_options(fn):
    """--policy, --tolerance-rel and --tolerance-ulps, shared by run and judge."""
    fn = click.option(
        "--tolerance-ulps",
        type=click.IntRange(min=0),
        default=None,
        help="Also tolerate float drift of at most this many units in the last place.",
    )(fn)
    fn = click.option(
        "--tolerance-rel",
        type=click.FloatRange(min=0),
        default=None,
        callback=finite,
        help="Also tolerate float drift of at most this relative difference.",
    )(fn)
    fn = click.option(
        "--policy",
        type=click.Choice(POLICIES),
        default=STRICT,
        show_default=True,
        help="strict: any difference fires. reduction-order: a comparison whose only "
        "differences are float drift inside the derived reassociation bound is tolerated, "
        "unless one thread on the same inputs still differed (then the order of adding is "
        "not the cause).",
    )(fn)
    return fn


def check_json_target(
    json_path: str | Path | None,
    *,
    protected: Sequence[Path] = (),
    schemas: Sequence[str] = ("twicerun.result/",),
    flag: str = "--json",
    dash: str | None = None,
) -> None:
    """Refuse, before anything runs, a --json path that would destroy something.

    Only what this verb writes (or nothing) may stand at the path; not a pipeline, not
    a file inside a directory twicerun manages (a saved result.json among them), and
    not a place that cannot be written. `dash`, where `-` cannot mean standard output
    for this verb, says why, and `-` is refused rather than written as a file of that name.
    """
    if json_path is None:
        return
    if str(json_path) == "-":
        if dash:
            raise UsageError(f"{flag} -: {dash}")
        return
    target = Path(json_path)
    resolved = target.resolve()
    for place in protected:
        place = place.resolve()
        if resolved == place or (place.is_dir() and resolved.is_relative_to(place)):
            raise UsageError(
                f"{flag} {json_path}: that is "
                + ("inside " if resolved != place else "")
                + f"{place}, which twicerun must not overwrite; name a file of its own"
            )
    if target.is_dir():
        raise UsageError(f"{flag} {json_path} is a directory; name a file")
    if target.exists():
        try:
            schema = json.loads(target.read_text(encoding="utf-8")).get("schema", "")
        except (OSError, ValueError, AttributeError):
            schema = ""
        if not str(schema).startswith(tuple(schemas)):
            what = (
                "a twicerun Result" if schemas == ("twicerun.result/",) else "what this verb writes"
            )
            raise UsageError(
                f"{flag} {json_path} exists and is not {what}, so it is not "
                f"overwritten; name a new file or remove that one"
            )
    ancestor = resolved.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not _can_create_in(ancestor):
        raise UsageError(f"{flag} {json_path}: {ancestor} cannot be written to; name another path")


def _can_create_in(directory: Path) -> bool:
    """Whether a file can be made in `directory`, found by making one: permission bits do
    not say it for root, a read-only file system or /proc, and the measuring that comes
    first can take minutes. The file has no name (or loses it at once), so none is left."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            return True
    except OSError:
        return False


def write_target(path: str | Path, data: bytes, flag: str, kept: str) -> None:
    """Write what a verb produced to the path its flag named, atomically; a failure at
    that last moment (the file system filled, or turned read-only) is one sentence that
    says what was kept, not a traceback."""
    try:
        write_bytes_atomic(Path(path), data)
    except OSError as exc:
        if disk_full(exc):
            raise  # reported as a full disk, with what to free
        raise UsageError(
            f"{kept}, but {flag} {path} could not be written ({exc.strerror or exc})"
        ) from exc


def check_directory_target(path: Path, flag: str) -> None:
    """Refuse, before anything runs, a directory twicerun could not create or write in."""
    ancestor = Path(path).absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{flag} {path}: {ancestor} is a file, not a directory; name another path")
    # Made and removed rather than read from the permission bits, which do not say it for
    # root (/proc, a file system that refuses), so that every user gets this sentence.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".twicerun-probe-", dir=ancestor))
    except OSError as exc:
        raise UsageError(
            f"{flag} {path}: {ancestor} cannot be written to; name another path"
        ) from exc


def emit(result: Result, json_path: str | None, *, retention: bool = True) -> None:
    """The report first, then the file: a path that fails at the last moment loses nothing."""
    if json_path == "-":
        click.echo(result.to_json(), nl=False)
        return
    click.echo(neutralize(render_run(result, retention=retention)), nl=False)
    if json_path:
        write_target(
            json_path, result.to_json().encode("utf-8"), "--json", "the report above is complete"
        )


def finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A float option's callback: click's ranges let nan through, since it compares false."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number", param=param)
    return value


def parse_seeds(values: Sequence[str]) -> dict[str, int]:
    seeds = {}
    for value in values:
        step, sep, number = value.partition("=")
        if step in seeds:
            raise click.BadParameter(
                f"{step} is given twice; hold each seeded step at one value",
                param_hint="--seed",
            )
        try:
            seeds[step] = int(number)
        except ValueError:
            sep = ""
        if not sep or not step:
            raise click.BadParameter(
                f"{value!r}: write STEP=INTEGER, as in --seed sample_customers=7",
                param_hint="--seed",
            )
    return seeds


class _LazyGroup(Verbs):
    """A group whose commands' modules are imported when a command is asked for.

    `twicerun report --check` (the pre-commit hook) compares Markdown; it has no
    use for DuckDB or pyarrow, which the commands that run pipelines import.
    """

    # An unknown option's refusal names the verbs that take it (other_verbs.py).
    command_class = Verb
    group_class = Verbs

    # command name -> the module that defines it (with @cli.command)
    MODULES: ClassVar[dict[str, str]] = {
        "run": "twicerun.cli.run",
        "judge": "twicerun.cli.run",
        "report": "twicerun.cli.report",
        "baseline": "twicerun.cli.baseline",
        "gate": "twicerun.cli.gate",
        "comment": "twicerun.cli.post",
        "post": "twicerun.cli.post",
        "diff": "twicerun.cli.verdicts",
        "localize": "twicerun.cli.verdicts",
        "reproduce": "twicerun.cli.verdicts",
        "audit": "twicerun.cli.verdicts",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.MODULES})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.MODULES:
            importlib.import_module(self.MODULES[name])
        return super().get_command(ctx, name)


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="twicerun")
def cli() -> None:
    """Execute a DuckDB batch pipeline repeatedly on identical input and measure,
    step by step, how often its answer changed, what kind of change it was, and why.

    Start with:  twicerun run pipelines/reference.py
    """
