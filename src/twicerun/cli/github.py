"""`twicerun baseline update`, `twicerun baseline compare`, and `twicerun gate`: the committed
baseline, and the one verb the GitHub Action runs."""

from __future__ import annotations

import glob
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import click

from twicerun.cli.app import EXIT_BAD_INPUT, EXIT_CLEAN, EXIT_DIVERGED, _Progress, cli
from twicerun.errors import UsageError
from twicerun.github import baseline as baseline_module
from twicerun.github.baseline import DEFAULT_ALPHA, DEFAULT_FAIL_ON, FAIL_ON, BaselineError
from twicerun.github.commands import Annotation, append_summary, commands, write_outputs
from twicerun.github.comment import post_sticky
from twicerun.github.gate import comment_body, evaluate, summary, write_document
from twicerun.judge.policy import POLICIES, STRICT, Policy
from twicerun.result import Result
from twicerun.runner.loop import DEFAULT_RUN_DIR, DEFAULT_RUNS, LoopOptions, run_pipeline
from twicerun.storage.atomic import write_bytes_atomic

DEFAULT_BASELINE = Path(".github/twicerun-baseline.json")
DEFAULT_PIPELINES = "pipelines/*.py"

GATE_EXIT_CODES = """\b
Exit codes:
  0  no step got worse (per --fail-on) than the baseline
  1  a step got worse: a regression, which fails the required check
  2  bad input, including a missing or unreadable baseline
  3  a pipeline crashed, or twicerun failed
"""


def _expand(patterns: Sequence[str]) -> list[str]:
    found: list[str] = []
    for pattern in patterns:
        for part in pattern.split():
            matches = sorted(glob.glob(part)) if glob.has_magic(part) else [part]
            found.extend(m for m in matches if m not in found)
    if not found:
        raise UsageError(
            f"no pipeline matches {' '.join(patterns)!r}; give a file or a glob such as pipelines/*.py"
        )
    return found


def _fail_on(text: str) -> list[str]:
    words = [w.strip() for w in text.replace(",", " ").split() if w.strip()]
    unknown = [w for w in words if w not in FAIL_ON and w != "none"]
    if unknown:
        raise UsageError(
            f"--fail-on {text!r}: {', '.join(unknown)} is not one of {', '.join([*FAIL_ON, 'none'])}"
        )
    return [w for w in words if w != "none"]


def _create_command(pipelines: Sequence[str], output: Path) -> str:
    return f"twicerun baseline update {' '.join(pipelines)} --output {output}"


def _run_all(pipelines: Sequence[str], options: LoopOptions) -> dict[str, Result]:
    progress = _Progress(enabled=os.isatty(2))
    try:
        return {path: run_pipeline(path, options, progress) for path in pipelines}
    finally:
        progress.clear()


@cli.group()
def baseline() -> None:
    """The committed baseline that pull requests are compared with."""


@baseline.command("update", epilog="Exit codes: 0 written; 2 bad input; 3 a pipeline crashed.")
@click.argument("pipelines", nargs=-1)
@click.option(
    "--trials",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Invocations per pipeline; every trial's fire counts are kept.",
)
@click.option("--runs", type=click.IntRange(min=2), default=DEFAULT_RUNS, show_default=True)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEFAULT_BASELINE,
    show_default=True,
)
@click.option("--amplify/--no-amplify", default=True, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=None)
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_RUN_DIR,
    show_default=True,
)
def baseline_update(
    pipelines: tuple[str, ...],
    trials: int,
    runs: int,
    output: Path,
    amplify: bool,
    threads: int | None,
    run_dir: Path,
) -> int:
    """Run PIPELINES (default pipelines/*.py) TRIALS times and write the baseline to commit."""
    paths = _expand(pipelines or (DEFAULT_PIPELINES,))
    options = LoopOptions(runs=runs, threads=threads, run_dir=run_dir, amplify=amplify)
    per_pipeline: dict[str, list[Result]] = {p: [] for p in paths}
    for trial in range(1, trials + 1):
        click.echo(f"trial {trial} of {trials}", err=True)
        for path, result in _run_all(paths, options).items():
            per_pipeline[path].append(result)
    command = f"twicerun baseline update {' '.join(pipelines or (DEFAULT_PIPELINES,))} --trials {trials} --runs {runs} --output {output}"
    document = baseline_module.build(per_pipeline, command)
    write_bytes_atomic(output, (json.dumps(document, indent=2) + "\n").encode("utf-8"))
    click.echo(
        f"wrote {output}: {len(paths)} pipeline{'s' if len(paths) != 1 else ''}, {trials} trials of {runs} runs"
    )
    return EXIT_CLEAN


def _gate_options(fn):
    for decorator in reversed(
        [
            click.option(
                "--pipelines",
                envvar="TWICERUN_PIPELINES",
                default=DEFAULT_PIPELINES,
                show_default=True,
                help="Pipeline files or globs, separated by spaces.",
            ),
            click.option(
                "--baseline",
                "baseline_path",
                envvar="TWICERUN_BASELINE",
                type=click.Path(path_type=Path),
                default=DEFAULT_BASELINE,
                show_default=True,
            ),
            click.option(
                "--runs",
                envvar="TWICERUN_RUNS",
                type=click.IntRange(min=2),
                default=DEFAULT_RUNS,
                show_default=True,
            ),
            click.option(
                "--policy",
                envvar="TWICERUN_POLICY",
                type=click.Choice(POLICIES),
                default=STRICT,
                show_default=True,
            ),
            click.option(
                "--fail-on",
                "fail_on",
                envvar="TWICERUN_FAIL_ON",
                default=",".join(DEFAULT_FAIL_ON),
                show_default=True,
                help="Which changes fail the check: new (a step that never fired now fires), rate-up "
                "(it fires significantly more often), stable (newly STABLE_ON_THIS_INPUT), "
                "not-comparable (a step added, removed or renamed), or none.",
            ),
            click.option(
                "--alpha",
                envvar="TWICERUN_ALPHA",
                type=click.FloatRange(0, 1, min_open=True),
                default=DEFAULT_ALPHA,
                show_default=True,
                help="Significance level of the exact test on fire counts.",
            ),
            click.option(
                "--run-dir",
                envvar="TWICERUN_RUN_DIR",
                type=click.Path(file_okay=False, path_type=Path),
                default=DEFAULT_RUN_DIR,
                show_default=True,
            ),
            click.option(
                "--json",
                "json_path",
                envvar="TWICERUN_RESULT",
                type=click.Path(dir_okay=False, path_type=Path),
                default=None,
                help="Write the gate document (decisions and every Result) here.",
            ),
        ]
    ):
        fn = decorator(fn)
    return fn


def _compare(
    pipelines: str,
    baseline_path: Path,
    runs: int,
    policy: str,
    fail_on: str,
    alpha: float,
    run_dir: Path,
    amplify: bool = True,
):
    paths = _expand([pipelines])
    words = _fail_on(fail_on)
    create = _create_command(paths, baseline_path)
    try:
        recorded, error = baseline_module.load(baseline_path, create), None
    except BaselineError as exc:
        recorded, error = None, str(exc)
    results = _run_all(
        paths, LoopOptions(runs=runs, run_dir=run_dir, policy=Policy(policy), amplify=amplify)
    )
    return evaluate(results, recorded, fail_on=words, alpha=alpha, baseline_error=error)


def _gate_exit(gate) -> int:
    if gate.baseline_error:
        return EXIT_BAD_INPUT
    return EXIT_DIVERGED if gate.regressions else EXIT_CLEAN


@baseline.command("compare", epilog=GATE_EXIT_CODES)
@_gate_options
def baseline_compare(
    pipelines, baseline_path, runs, policy, fail_on, alpha, run_dir, json_path
) -> int:
    """Run the pipelines once and decide, per step, how they compare with the baseline."""
    gate = _compare(pipelines, baseline_path, runs, policy, fail_on, alpha, run_dir)
    if json_path:
        write_document(gate, json_path)
    click.echo(summary(gate, pipelines), nl=False)
    if gate.baseline_error:
        click.echo(f"twicerun: {gate.baseline_error}", err=True)
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
@click.option(
    "--amplify/--no-amplify",
    envvar="TWICERUN_AMPLIFY",
    default=True,
    show_default=True,
    help="Stress the steps the loop found quiet.",
)
def gate(
    pipelines, baseline_path, runs, policy, fail_on, alpha, run_dir, json_path, comment, amplify
) -> int:
    """The GitHub Action's one step: compare with the baseline, then comment, annotate,
    summarise and set outputs, from the environment a workflow runner provides."""
    env = os.environ
    started = time.time()
    result = _compare(pipelines, baseline_path, runs, policy, fail_on, alpha, run_dir, amplify)
    document = json_path or Path(env.get("RUNNER_TEMP", ".")) / "twicerun-result.json"
    write_document(result, document)
    for line in commands(result.annotations):
        click.echo(line)
    if result.baseline_error:
        click.echo(Annotation("error", result.baseline_error, "twicerun: no baseline").command())
    server = env.get("GITHUB_SERVER_URL", "https://github.com")
    repository = env.get("GITHUB_REPOSITORY", "")
    run_url = (
        f"{server}/{repository}/actions/runs/{env['GITHUB_RUN_ID']}"
        if env.get("GITHUB_RUN_ID")
        else None
    )
    comment_url = ""
    number = _pull_request_number(env.get("GITHUB_EVENT_PATH"))
    if comment and number is not None and repository:
        fallback = Path(env.get("RUNNER_TEMP", ".")) / "twicerun-comment.md"
        posted = post_sticky(
            api_url=env.get("GITHUB_API_URL", "https://api.github.com"),
            token=env.get("GITHUB_TOKEN", ""),
            repository=repository,
            number=number,
            body=comment_body(result, pipelines, run_url),
            fallback=fallback,
        )
        comment_url = posted.url or ""
        if posted.action == "written-to-file":
            fallback.with_suffix(".json").write_text(
                json.dumps({"number": number, "repository": repository}) + "\n", encoding="utf-8"
            )
            message = (
                f"This token cannot write to the pull request ({posted.reason}), as on a pull "
                f"request from a fork. The comment is in {posted.path}; upload it as an artifact "
                f"and post it from a workflow_run workflow (docs/action.md, fork pull requests)."
            )
            click.echo(Annotation("warning", message, "twicerun: comment not posted").command())
        else:
            click.echo(f"twicerun: comment {posted.action}: {posted.url}")
    elif comment and number is None:
        click.echo("twicerun: not a pull request event, so no comment")
    if env.get("GITHUB_STEP_SUMMARY"):
        append_summary(Path(env["GITHUB_STEP_SUMMARY"]), summary(result, pipelines))
    if env.get("GITHUB_OUTPUT"):
        write_outputs(
            Path(env["GITHUB_OUTPUT"]),
            {
                "result": str(document),
                "diverged": str(result.diverged),
                "regressions": str(len(result.regressions)),
                "comment-url": comment_url,
            },
        )
    click.echo(
        f"twicerun: {len(result.regressions)} regression{'s' if len(result.regressions) != 1 else ''}, "
        f"{result.diverged} divergent step{'s' if result.diverged != 1 else ''}, in {time.time() - started:.1f}s"
    )
    return _gate_exit(result)


def _pull_request_number(event_path: str | None) -> int | None:
    if not event_path or not Path(event_path).is_file():
        return None
    try:
        event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    except ValueError:
        return None
    pull = event.get("pull_request") or {}
    number = pull.get("number") or (event.get("issue") or {}).get("number") or event.get("number")
    return int(number) if number else None


@cli.command(
    "comment", epilog="Exit codes: 0 posted, edited or unchanged; 2 bad input; 3 GitHub refused."
)
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
    env = os.environ
    posted = post_sticky(
        api_url=env.get("GITHUB_API_URL", "https://api.github.com"),
        token=env.get("GITHUB_TOKEN", ""),
        repository=repository,
        number=number,
        body=body,
        fallback=body_file.with_name(body_file.name + ".unposted"),
    )
    if posted.action == "written-to-file":
        click.echo(f"twicerun: GitHub refused the comment ({posted.reason})", err=True)
        return 3
    click.echo(f"twicerun: comment {posted.action}: {posted.url}")
    return EXIT_CLEAN
