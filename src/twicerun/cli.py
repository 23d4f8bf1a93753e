"""The command line: argument parsing, and the one map from a failure to an exit code.

Nothing below this module prints or exits. Every room raises or returns; this
module decides what the user sees and which integer the shell gets.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from twicerun._version import __version__
from twicerun.errors import BadInput, StepCrashed, TwicerunError, UsageError
from twicerun.judge.policy import POLICIES, STRICT, Policy
from twicerun.judge.status import AMPLIFICATION_FAILED, DIVERGENT, STABLE_ON_THIS_INPUT
from twicerun.render.markers import MarkerError, find_blocks, stale, update
from twicerun.render.tables import BUILDERS, Artifact, render_tables
from twicerun.render.terminal import render_run
from twicerun.result import Result
from twicerun.runner.keys import parse_keys
from twicerun.runner.loop import DEFAULT_RUN_DIR, DEFAULT_RUNS, LoopOptions, run_pipeline
from twicerun.runner.progress import ProgressEvent
from twicerun.runner.rescore import rejudge, resolve_invocation
from twicerun.storage.atomic import write_bytes_atomic

EXIT_CLEAN = 0
EXIT_DIVERGED = 1
EXIT_BAD_INPUT = 2
EXIT_CRASHED = 3
EXIT_ONLY_AMPLIFIED = 4
EXIT_AMPLIFIER_FAILED = 5
EXIT_INTERRUPTED = 130

RUN_EXIT_CODES = """\b
Exit codes:
  0    every step agreed with itself wherever it was tested
  1    a step gave a different answer on the pipeline's own input
  2    bad input: the pipeline, a flag or an artifact name is wrong,
       or a column type twicerun does not compare
  3    a step raised in the loop, or twicerun itself failed; the
       invocation directory is kept
  4    a step gave a different answer only on an input an amplifier built
  5    an amplifier failed, so a quiet step went without its stress test
  130  interrupted (Ctrl-C); the invocation directory is kept
"""


def exit_code(result: Result) -> int:
    """The exit code a finished `run` or `judge` returns. The only place it is decided.

    Divergence on the user's own input outranks divergence on an input twicerun
    made up, which outranks a check that could not run: each integer carries one
    claim, and the most serious one present wins.
    """
    statuses = {s.status for s in result.steps}
    if DIVERGENT in statuses:
        return EXIT_DIVERGED
    if STABLE_ON_THIS_INPUT in statuses:
        return EXIT_ONLY_AMPLIFIED
    if AMPLIFICATION_FAILED in statuses:
        return EXIT_AMPLIFIER_FAILED
    return EXIT_CLEAN


class _Progress:
    """One line on stderr, rewritten in place; silent when stderr is not a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.shown = False

    def __call__(self, event: ProgressEvent) -> None:
        if not self.enabled:
            return
        text = (
            f"{event.phase} run {event.run}/{event.runs}, "
            f"step {event.step_index + 1}/{event.steps} {event.step_name}"
        )
        click.echo(f"\r\033[K{text}", nl=False, err=True)
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            click.echo("\r\033[K", nl=False, err=True)
            self.shown = False


def _policy_options(fn):
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
        help="Also tolerate float drift of at most this relative difference.",
    )(fn)
    fn = click.option(
        "--policy",
        type=click.Choice(POLICIES),
        default=STRICT,
        show_default=True,
        help="strict: any difference fires. reduction-order: a comparison whose only "
        "differences are float drift inside the derived reassociation bound is tolerated.",
    )(fn)
    return fn


def _emit(result: Result, json_path: str | None) -> None:
    if json_path == "-":
        click.echo(result.to_json(), nl=False)
        return
    if json_path:
        write_bytes_atomic(Path(json_path), result.to_json().encode("utf-8"))
    click.echo(render_run(result), nl=False)


def _parse_seeds(values: Sequence[str]) -> dict[str, int]:
    seeds = {}
    for value in values:
        step, sep, number = value.partition("=")
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


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="twicerun")
def cli() -> None:
    """Execute a DuckDB batch pipeline repeatedly on identical input and measure,
    step by step, how often its answer changed, what kind of change it was, and why.

    Start with:  twicerun run pipelines/reference.py
    """


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
    type=click.IntRange(min=1),
    default=None,
    help="DuckDB threads for every step. Default: what DuckDB picks on this machine.",
)
@click.option(
    "--containment/--no-containment",
    default=True,
    show_default=True,
    help="Contained, runs 2..N read run 1's upstream artifacts, so a difference at one step "
    "cannot be charged again to the steps after it.",
)
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_RUN_DIR,
    show_default=True,
    help="Where invocation directories go.",
)
@click.option(
    "--keep",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="Completed invocation directories to keep after a successful invocation (0 keeps "
    "all). Failed, interrupted and live ones are never removed.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    help="Also write the Result document here ('-' for stdout, which replaces the report).",
)
@click.option(
    "--seed",
    "seeds",
    multiple=True,
    metavar="STEP=INTEGER",
    help="Hold a seeded step's seed at this value instead of its default (repeatable).",
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="ARTIFACT=COL[,COL...]",
    help="Match this artifact's rows on these exact columns only; its other exact columns "
    "are left out of the comparison (say, a surrogate key that is not part of the answer). "
    "Repeatable.",
)
@click.option(
    "--amplify/--no-amplify",
    default=True,
    show_default=True,
    help="Stress the steps the loop found quiet (tie collapse, more threads, more rows, "
    "another arrival order). --no-amplify skips this, and the report says so.",
)
@_policy_options
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
    policy: str,
    tolerance_rel: float | None,
    tolerance_ulps: int | None,
) -> int:
    """Run PIPELINE several times and report, per step, how often it fired.

    A step fires in a comparison when an artifact it wrote differs from run 1's
    (or was written by one run only) and the policy does not tolerate it. Its rate
    is printed as `k of m`. Each step that fired is re-executed at threads=1 to
    tell a parallel-order cause from one that persists; each step that stayed quiet
    is handed stressed inputs, since a clean loop only speaks for the input it got.
    """
    options = LoopOptions(
        runs=runs,
        threads=threads,
        containment=containment,
        run_dir=run_dir,
        keep=keep,
        seeds=_parse_seeds(seeds),
        keys=parse_keys(keys),
        policy=Policy(policy, tolerance_rel, tolerance_ulps),
        amplify=amplify,
    )
    progress = _Progress(enabled=sys.stderr.isatty())
    try:
        result = run_pipeline(pipeline, options, progress)
    finally:
        progress.clear()
    _emit(result, json_path)
    return exit_code(result)


@cli.command(epilog=RUN_EXIT_CODES)
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@_policy_options
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    help="Also write the re-scored Result here ('-' for stdout, which replaces the report).",
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
    result = rejudge(invocation, Policy(policy, tolerance_rel, tolerance_ulps))
    _emit(result, json_path)
    return exit_code(result)


REPORT_EXIT_CODES = """\b
Exit codes:
  0  rendered; with --check, every block matches; with --update, done
  1  --check: a block is stale (it is named, with a diff)
  2  bad input: an artifact unreadable, markers that do not pair, or
     the marker blocks in the file and the tables the artifacts render
     differ (both sides are named)
"""


def _read_text(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def _load_artifacts(paths: Sequence[str], results: Path) -> list[Artifact]:
    if not paths:
        newest: dict[str, tuple[str, str, Artifact]] = {}
        for candidate in sorted(results.glob("*.json")):
            try:
                document = json.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            schema = document.get("schema") if isinstance(document, dict) else None
            if schema in BUILDERS:
                # One of each kind, and for Results one per pipeline: the newest.
                kind = f"{schema} {document.get('pipeline', '')}"
                key = (str(document.get("written", document.get("started", ""))), candidate.name)
                if kind not in newest or key > newest[kind][:2]:
                    newest[kind] = (*key, Artifact(str(candidate), document))
        return [a for _, _, a in newest.values()]
    artifacts = []
    for path in paths:
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except ValueError as exc:
            raise UsageError(
                f"{path} is not JSON ({exc}); give the artifact a script wrote"
            ) from exc
        schema = document.get("schema") if isinstance(document, dict) else None
        if schema not in BUILDERS:
            known = ", ".join(sorted(BUILDERS))
            raise UsageError(
                f"{path} has schema {schema!r}, which no table renders; known: {known}"
            )
        artifacts.append(Artifact(str(path), document))
    return artifacts


@cli.command(epilog=REPORT_EXIT_CODES)
@click.argument("artifacts", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["md", "text", "json"]),
    default="md",
    show_default=True,
    help="How to print the tables (ignored with --check and --update, which write Markdown).",
)
@click.option("--table", "names", multiple=True, help="Print only this table (repeatable).")
@click.option(
    "--update",
    "update_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Rewrite the blocks of this Markdown file whose content changed.",
)
@click.option(
    "--check",
    "check_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Change nothing; fail if a block of this Markdown file is stale.",
)
@click.option(
    "--results",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results"),
    show_default=True,
    help="Where to find artifacts when none are named: the newest of each kind is used.",
)
def report(
    artifacts: tuple[str, ...],
    fmt: str,
    names: tuple[str, ...],
    update_path: Path | None,
    check_path: Path | None,
    results: Path,
) -> int:
    """Render named tables from Result documents and eval artifacts.

    In a Markdown file, a table NAME lives between `<!-- twicerun:NAME -->` and
    `<!-- /twicerun:NAME -->`, each on its own line. --update fills those blocks;
    --check fails when one no longer matches what the artifacts render, so a
    figure edited by hand, or left behind by a newer artifact, fails the build.
    """
    if update_path and check_path:
        raise UsageError("--update and --check: give one; --check never writes")
    loaded = _load_artifacts(artifacts, results)
    if not loaded:
        raise UsageError(f"no artifacts: name them, or put the JSON a script wrote in {results}/")
    tables = render_tables(loaded)
    target = update_path or check_path
    if target is None:
        chosen = [tables[n] for n in names] if names else list(tables.values())
        unknown = [n for n in names if n not in tables]
        if unknown:
            raise UsageError(
                f"no table called {', '.join(unknown)}; these render: {', '.join(tables)}"
            )
        if fmt == "json":
            click.echo(json.dumps([t.json() for t in chosen], indent=2))
        else:
            click.echo(
                "\n".join(t.markdown() if fmt == "md" else t.text() for t in chosen), nl=False
            )
        return EXIT_CLEAN
    text = _read_text(target)
    try:
        blocks = find_blocks(text, str(target))
    except MarkerError as exc:
        raise UsageError(str(exc)) from exc
    in_file = {b.name for b in blocks}
    lost = sorted(set(tables) - in_file)
    orphaned = sorted(in_file - set(tables))
    if lost or orphaned:
        lines = []
        if orphaned:
            lines.append(
                f"{target}: no artifact renders {', '.join(orphaned)}; remove those marker pairs or name the artifact that renders them"
            )
        if lost:
            lines.append(
                f"{target}: the artifacts render {', '.join(lost)}, which the file has no marker pair for; add <!-- twicerun:NAME --> and <!-- /twicerun:NAME --> for each"
            )
        raise UsageError("\n".join(lines))
    rendered = {name: t.markdown() for name, t in tables.items()}
    if check_path:
        old = stale(text, rendered, str(target))
        for name, diff in old.items():
            click.echo(
                f"{target}: twicerun:{name} is stale; run `twicerun report --update {target}`",
                err=True,
            )
            click.echo(diff, err=True, nl=False)
        return EXIT_DIVERGED if old else EXIT_CLEAN
    new_text, changed = update(text, rendered, str(target))
    if changed:
        write_bytes_atomic(target, new_text.encode("utf-8"))
        click.echo(f"{target}: rewrote {', '.join(changed)}")
    return EXIT_CLEAN


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run the CLI and return its exit code."""
    try:
        value = cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="twicerun",
            standalone_mode=False,
        )
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort as exc:
        directory = getattr(exc.__cause__, "directory", None)
        kept = f"; the invocation directory is kept: {directory}" if directory else ""
        click.echo(f"twicerun: interrupted{kept}", err=True)
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return EXIT_BAD_INPUT
    except BadInput as exc:
        click.echo(f"twicerun: {exc}", err=True)
        if exc.directory:
            click.echo(f"twicerun: the invocation directory is kept: {exc.directory}", err=True)
        return EXIT_BAD_INPUT
    except StepCrashed as exc:
        click.echo(f"twicerun: {exc}", err=True)
        if exc.directory:
            click.echo(f"twicerun: the invocation directory is kept: {exc.directory}", err=True)
        return EXIT_CRASHED
    except TwicerunError as exc:
        click.echo(f"twicerun: {exc}", err=True)
        return EXIT_CRASHED
    except Exception as exc:  # a bug in twicerun: still "crashed", never "diverged"
        import traceback

        traceback.print_exc(file=sys.stderr)
        click.echo(f"twicerun: internal error: {type(exc).__name__}: {exc}", err=True)
        return EXIT_CRASHED
    return value if isinstance(value, int) else EXIT_CLEAN


if __name__ == "__main__":
    raise SystemExit(main())
