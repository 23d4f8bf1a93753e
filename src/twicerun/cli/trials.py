"""What the gate and the baseline share: which files a list of pipelines and globs
names, running each of them once (a pipeline that does not finish is recorded for the
caller to report while the others still run), and the lines a CI job's log shows meanwhile."""

from __future__ import annotations

import contextlib
import glob
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import click

from twicerun.cli.app import (
    Progress,
    epilog,
)
from twicerun.errors import (
    ContractError,
    InvalidStep,
    NoSteps,
    PipelineError,
    StepCrashed,
    UnsupportedColumn,
    UsageError,
)
from twicerun.github import baseline as baseline_module
from twicerun.github.baseline import pipeline_key
from twicerun.github.commands import neutralize, stop_commands
from twicerun.github.gate import (
    PipelineFailure,
)
from twicerun.pipeline.loader import check_pipeline_path, load_pipeline
from twicerun.pipeline.outline import shows_steps
from twicerun.result import Result
from twicerun.runner.loop import LoopOptions, run_pipeline
from twicerun.runner.step_output import imports_print_to_stderr
from twicerun.vocabulary.exits import GateExit
from twicerun.vocabulary.gate import FAIL_ON
from twicerun.vocabulary.loop import Status

DEFAULT_BASELINE = Path(".github/twicerun-baseline.json")
DEFAULT_PIPELINES = "pipelines/*.py"

# The gate's own exit codes (vocabulary/exits.py): a failed check is not "diverged",
# and a missing baseline is bad input, never a pass.
GATE_EXIT_CODES = epilog(GateExit)

# What may be overwritten by --output and --json: a file of the same kind, any version.
BASELINE_SCHEMA_FAMILY = "twicerun.baseline/"
GATE_SCHEMA_FAMILY = "twicerun.gate/"


def refuse_space(path: str) -> None:
    raise UsageError(
        f"{path!r} is one file, but pipelines are separated by spaces; match a path "
        f"with a space in it by a glob, such as {path.replace(' ', '?')!r}"
    )


def pattern_matches(part: str) -> tuple[bool, list[str]]:
    """What one space-separated pattern names, and whether it named a file as it is."""
    # A file that exists under the name given is that file, though `[`, `*` or `?` in its
    # name would make a glob of it (one that matches it, or nothing, or others).
    if Path(part).is_file():
        return True, [part]
    # A directory can hold pipelines but not be one: `pipelines/` was refused as "a
    # directory; pass the pipeline's Python file" where the default glob reads it.
    if Path(part).is_dir():
        return False, sorted(glob.glob(os.path.join(glob.escape(part), "*.py")))
    if not glob.has_magic(part):
        return True, [part]
    return False, sorted(glob.glob(part))


def expand_pipelines(patterns: Sequence[str]) -> list[str]:
    found: list[str] = []
    modules: list[str] = []
    for pattern in patterns:
        parts = pattern.split()
        if len(parts) > 1 and Path(pattern).is_file():
            refuse_space(pattern)
        for part in parts:
            literal, matches = pattern_matches(part)
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


def keyed_pipelines(
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
            failures[key] = failure_of(key, exc)
            continue
        keyed.setdefault(pipeline_key(path), path)
    return keyed


def fail_on_words(text: str) -> tuple[str, ...]:
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


def create_command(pipelines: Sequence[str], output: Path) -> str:
    return f"twicerun baseline update {' '.join(pipelines)} --output {output}"


# What a pipeline on a pull request can do to stop its own check: a step raises, or its
# file or its use of ctx is refused. The check still reports it (gate.PipelineFailure).
PIPELINE_FAULTS = (StepCrashed, PipelineError, InvalidStep, ContractError, UnsupportedColumn)


def failure_of(key: str, exc: Exception) -> PipelineFailure:
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


def shape_now(path: str) -> baseline_module.PipelineShape:
    """What a baseline records of a pipeline's code, from the file as it is now."""
    with imports_print_to_stderr():
        pipeline = load_pipeline(path)
    return baseline_module.PipelineShape(
        digest=pipeline.digest,
        steps=tuple(baseline_module.StepShape(s.name, s.index, s.line) for s in pipeline.steps),
    )


def run_all(
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
    say = log_line if log and not os.isatty(2) else (lambda _message: None)
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
                failures[key] = failure_of(key, exc)
                progress.clear()
                log_line(f"{key}: did not finish: {exc}")
                kept = getattr(exc, "directory", None)
                if kept:
                    log_line(f"{key}: the invocation directory is kept: {kept}")
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
def commands_stopped() -> Iterator[None]:
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


def log_line(message: str) -> None:
    # Not "twicerun: ", which starts the one sentence an error gets. Paths come from the
    # pull request: nothing printed may read as a workflow command.
    click.echo(neutralize(f"[twicerun] {message}"), err=True)
