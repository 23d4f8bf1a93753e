"""action.yml end to end: its steps run the way a runner runs them, against a fake GitHub."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from actionrunner import base_env, run_action
from conftest import REPO
from fakegithub import BOT, WORKFLOW_TOKEN, FakeGitHub

from twicerun.cli import main
from twicerun.github.comment import marker

BEFORE = """
def inputs(ctx):
    ctx.write("rows", "SELECT range AS id, range % 3 AS g FROM range(30)")


def drifts(ctx):
    ctx.read("rows")
    ctx.write("counts", "SELECT g, count(*) AS n FROM rows GROUP BY g")
"""

# The pull request: `drifts` now depends on a counter, so it fires on every comparison.
AFTER = """
import itertools

_calls = itertools.count()


def inputs(ctx):
    ctx.write("rows", "SELECT range AS id, range % 3 AS g FROM range(30)")


def drifts(ctx):
    ctx.read("rows")
    ctx.write("counts", f"SELECT g, count(*) + {next(_calls)} AS n FROM rows GROUP BY g")
"""


def warm_runner(tmp_path: Path, name: str = "runner") -> Path:
    """A RUNNER_TEMP whose cached venv is this test run's own (a warm cache)."""
    runner_temp = tmp_path / name
    runner_temp.mkdir()
    (runner_temp / "twicerun-venv").symlink_to(REPO / ".venv")
    return runner_temp


def pull_request_env(tmp_path: Path, github: FakeGitHub, number: int = 12) -> tuple[dict, Path]:
    """A runner's environment for a workflow on pull request `number`, against the fake
    GitHub, and the job summary file it names."""
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": number}}))
    summary = tmp_path / "summary.md"
    env = {
        **base_env(),
        "GITHUB_API_URL": github.url,
        "GITHUB_REPOSITORY": "octo/pipes",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_RUN_ID": "99",
        "GITHUB_SERVER_URL": "https://github.test",
        "GITHUB_TOKEN": WORKFLOW_TOKEN,
    }
    return env, summary


# The baseline every workspace starts from, measured once per test process: it is the
# input of these tests, not their subject, and each `baseline update` costs seconds.
_BASELINE: list[bytes] = []


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    ws = tmp_path / "workspace"
    (ws / "pipelines").mkdir(parents=True)
    pipeline = ws / "pipelines" / "orders.py"
    pipeline.write_text(textwrap.dedent(BEFORE).lstrip())
    monkeypatch.chdir(ws)
    baseline = Path(".github/twicerun-baseline.json")
    if not _BASELINE:
        code = main(
            [
                "baseline",
                "update",
                "pipelines/orders.py",
                "--trials",
                "3",
                "--runs",
                "5",
                "--no-amplify",
                "--run-dir",
                str(tmp_path / "baseline-runs"),
            ]
        )
        assert code == 0
        _BASELINE.append(baseline.read_bytes())
    baseline.parent.mkdir(parents=True, exist_ok=True)
    baseline.write_bytes(_BASELINE[0])
    pipeline.write_text(textwrap.dedent(AFTER).lstrip())
    return ws


def test_the_action_gates_a_regression_comments_annotates_and_summarises(workspace, tmp_path):
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    # A warm cache: the venv the action would have installed is this test's own.
    (runner_temp / "twicerun-venv").symlink_to(REPO / ".venv")
    with FakeGitHub() as github:
        env, summary = pull_request_env(tmp_path, github)
        run = run_action(
            REPO / "action.yml",
            inputs={"pipelines": "pipelines/*.py", "runs": "5", "amplify": "false"},
            workspace=workspace,
            runner_temp=runner_temp,
            env=env,
        )
        steps = {s.name: s for s in run.steps}
        assert steps["Set up Python for twicerun"].skipped and steps["Cache twicerun"].skipped
        assert steps["Fingerprint this twicerun"].outputs["value"]
        gate = steps["Run twicerun"]
        assert gate.code == 1, gate.stdout + gate.stderr  # a regression fails the required check

        assert run.outputs["regressions"] == "1"
        assert run.outputs["diverged"] == "1"
        document = json.loads(Path(run.outputs["result"]).read_text())
        assert document["schema"] == "twicerun.gate/2"
        assert [d["verdict"] for d in document["decisions"]] == ["unchanged", "new divergence"]

        (comment,) = github.ours(12)
        assert (
            run.outputs["comment-url"]
            == f"https://github.test/octo/pipes/pull/12#issuecomment-{comment['id']}"
        )
        body = comment["body"]
        assert body.startswith("<!-- twicerun:comment:")
        assert "### twicerun: 1 step got worse" in body
        assert (
            "- `drifts` in `pipelines/orders.py`: new divergence, differed in 0 of 3 trials on the "
            "baseline, 4 of 4 now, then 4, 4, 4 on re-runs, p = 0.05"
        ) in body

        # The runner reads commands from the pipelines' output too: none while they ran.
        lines = gate.stdout.splitlines()
        assert lines[0].startswith("::stop-commands::")
        resume = lines.index(f"::{lines[0].removeprefix('::stop-commands::')}::")
        assert all(i > resume for i, line in enumerate(lines) if line.startswith("::error "))
        error_lines = [line for line in gate.stdout.splitlines() if line.startswith("::error ")]
        assert error_lines == [
            "::error file=pipelines/orders.py,line=10,title=twicerun%3A drifts new divergence::"
            "new divergence: 4 of 4 now, differed in 0 of 3 baseline trials; then 4 of 4, 4 of 4, "
            "4 of 4 on re-runs; p = 0.05; ROW_MISSING ROW_EXTRA; cause PERSISTS_SINGLE_THREADED"
        ]

        assert re.fullmatch(
            r"twicerun: check failed \(exit 1\): 1 step got worse "
            r"\(outputs regressions=1, diverged=1\), in \d+\.\ds",
            lines[-1],
        )

        text = summary.read_text()
        assert text.startswith("### twicerun: 1 step got worse")
        assert "<!-- twicerun:comment:" not in text
        assert "| `pipelines/orders.py` | `drifts` | new divergence |" in text

        # The same run again edits nothing: the comment is unchanged.
        writes = len(github.writes())
        again = run_action(
            REPO / "action.yml",
            inputs={"runs": "5", "amplify": "false"},
            workspace=workspace,
            runner_temp=runner_temp,
            env=env,
        )
        assert {s.name: s for s in again.steps}["Run twicerun"].code == 1
        assert len(github.writes()) == writes
        assert len(github.ours(12)) == 1


def test_a_push_whose_pipeline_raises_replaces_the_earlier_comment_and_fails(workspace, tmp_path):
    """The sticky comment of the push before said what that push measured; a push whose
    pipeline raised used to exit 3 without a word to the pull request, leaving it."""
    runner_temp = warm_runner(tmp_path)
    with FakeGitHub() as github:
        env, summary = pull_request_env(tmp_path, github)
        # What the push before left: a comment saying all was well.
        before_body = f"{marker('pipelines/orders.py')}\n\n### twicerun: no step got worse\n"
        before_id = github.add_comment(12, before_body, BOT)["id"]

        inputs = {"runs": "5", "amplify": "false"}
        pipeline = workspace / "pipelines" / "orders.py"
        pipeline.write_text(pipeline.read_text().replace("FROM rows GROUP", "FROM gone GROUP"))
        summary.write_text("")
        run = run_action(REPO / "action.yml", inputs=inputs, workspace=workspace,
                         runner_temp=runner_temp, env=env)  # fmt: skip
        gate = {s.name: s for s in run.steps}["Run twicerun"]
        assert gate.code == 3, gate.stdout + gate.stderr
        (after,) = github.ours(12)
        assert after["id"] == before_id and after["body"] != before_body
        assert after["body"].split("\n")[2] == "### twicerun: 1 pipeline did not finish"
        assert (
            "- `drifts` in `pipelines/orders.py`: did not finish (step 1 drifts raised"
            in (after["body"])
        )
        assert summary.read_text().startswith("### twicerun: 1 pipeline did not finish")
        errors = [line for line in gate.stdout.splitlines() if line.startswith("::error ")]
        assert errors[0].startswith(
            "::error file=pipelines/orders.py,line=12,title=twicerun%3A drifts did not finish::"
            "did not finish; step 1 drifts raised in run 1 (at pipelines/orders.py:12): "
            "CatalogException"
        )
        assert run.outputs["regressions"] == "1"


def _gate_on(workspace, tmp_path, source: str):
    """The action's steps by name, with `source` as the pull request's pipeline."""
    (workspace / "pipelines" / "orders.py").write_text(source)
    with FakeGitHub() as github:
        env, _ = pull_request_env(tmp_path, github)
        run = run_action(REPO / "action.yml", inputs={"runs": "5", "amplify": "false"},
                         workspace=workspace, runner_temp=warm_runner(tmp_path), env=env)  # fmt: skip
    return run, {s.name: s for s in run.steps}


GUARD = "Refuse a gate that did not end as it decided"


@pytest.mark.parametrize(
    ("ending", "decided"),
    [
        # At once: the process ends before any decision, with no output set.
        ("os._exit(0)", "nothing"),
        # From an atexit hook: the gate decided the regression (exit 1), then the hook
        # ended the process with 0 instead.
        ("atexit.register(os._exit, 0)", "1"),
        # Having written the very output the guard reads, where the runner's files were in
        # the pipelines' environment: the guard read exit-code=0 and let a check with no
        # decision pass. Those files are now out of the environment while pipelines run.
        (
            "if 'GITHUB_OUTPUT' in os.environ:\n"
            "    with open(os.environ['GITHUB_OUTPUT'], 'a') as out:\n"
            "        out.write('exit-code=0\\n')\n"
            "os._exit(0)",
            "nothing",
        ),
    ],
)
def test_a_gate_whose_process_does_not_end_as_it_decided_fails_the_check(
    workspace, tmp_path, ending, decided
):
    """os._exit(0) in a pipeline ends the process with 0, and nothing inside the process
    can stop it: the check was green, on no decision or on a failing one. The action now
    fails a gate step that exited 0 unless the gate decided 0."""
    source = "import atexit\nimport os\n\n" + textwrap.dedent(AFTER).lstrip() + f"\n\n{ending}\n"
    _, steps = _gate_on(workspace, tmp_path, source)
    assert steps["Run twicerun"].code == 0
    guard = steps[GUARD]
    assert guard.code == 1
    assert guard.stdout.startswith(
        f"::error title=twicerun::twicerun gate's process ended with exit 0, but the gate "
        f"decided {decided} (its exit-code output);"
    )


def test_a_gate_that_decided_passes_the_guard_untouched(workspace, tmp_path):
    run, steps = _gate_on(workspace, tmp_path, textwrap.dedent(BEFORE).lstrip())
    assert steps["Run twicerun"].code == 0
    assert steps["Run twicerun"].outputs["exit-code"] == "0"
    assert run.outputs["result"]
    assert steps[GUARD].skipped


def test_a_missing_baseline_names_the_command_and_still_reports(workspace, tmp_path):
    Path(".github/twicerun-baseline.json").unlink()
    runner_temp = warm_runner(tmp_path)
    summary = tmp_path / "summary.md"
    run = run_action(
        REPO / "action.yml",
        inputs={"runs": "3", "amplify": "false", "comment": "false"},
        workspace=workspace,
        runner_temp=runner_temp,
        env={**base_env(), "GITHUB_STEP_SUMMARY": str(summary)},
    )
    gate = {s.name: s for s in run.steps}["Run twicerun"]
    assert gate.code == 2
    assert (
        "::error title=twicerun%3A no baseline::no baseline at .github/twicerun-baseline.json; create "
        "one with `twicerun baseline update pipelines/orders.py --output .github/twicerun-baseline.json` "
        "and commit it"
    ) in gate.stdout
    assert "| `pipelines/orders.py` | `drifts` | no baseline |" in summary.read_text()
    # The command to run is a code span in the summary and the comment; escaped with the
    # rest of the sentence, it showed as words between two literal backticks.
    assert (
        "; create one with `twicerun baseline update pipelines/orders.py --output "
        ".github/twicerun-baseline.json` and commit it\n"
    ) in summary.read_text()
    # The log's last line used to read "0 regressions" above a check that failed.
    assert re.fullmatch(
        r"twicerun: check failed \(exit 2\): no baseline to compare with "
        r"\(outputs regressions=0, diverged=1\), in \d+\.\ds",
        gate.stdout.splitlines()[-1],
    )


def test_a_token_that_cannot_write_leaves_the_comment_in_a_file_and_the_exit_code_alone(
    workspace, tmp_path
):
    from fakegithub import READ_ONLY_TOKEN

    runner_temp = warm_runner(tmp_path)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 5}}))
    with FakeGitHub() as github:
        env = {
            **base_env(),
            "GITHUB_API_URL": github.url,
            "GITHUB_REPOSITORY": "octo/pipes",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_TOKEN": READ_ONLY_TOKEN,
        }
        run = run_action(
            REPO / "action.yml",
            inputs={"runs": "5", "amplify": "false"},
            workspace=workspace,
            runner_temp=runner_temp,
            env=env,
        )
        gate = {s.name: s for s in run.steps}["Run twicerun"]
        assert gate.code == 1  # the same exit code as when the comment is posted
        assert github.ours(5) == [] and github.writes() == [
            ("POST", "/repos/octo/pipes/issues/5/comments")
        ]
    assert run.outputs["comment-url"] == ""
    (left,) = runner_temp.glob("twicerun-*-comment.md")
    body = left.read_text()
    assert body.startswith("<!-- twicerun:comment:") and "new divergence" in body
    assert json.loads(left.with_suffix(".json").read_text()) == {
        "number": 5,
        "repository": "octo/pipes",
    }
    warning = next(
        line
        for line in gate.stdout.splitlines()
        if line.startswith("::warning title=twicerun%3A comment not posted::")
    )
    assert "403: Resource not accessible by integration" in warning
    assert "workflow_run" in warning


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def worse_with_its_own_baseline(workspace: Path, tmp_path: Path, branch: str) -> tuple[Path, str]:
    """An origin whose main commits BEFORE and its baseline, and the workspace on `branch`,
    which makes `drifts` worse and rewrites the baseline to match; the origin and main's
    commit."""
    origin = tmp_path / "origin.git"
    git("init", "-q", "--bare", str(origin), cwd=tmp_path)
    after = Path("pipelines/orders.py").read_text()
    Path("pipelines/orders.py").write_text(textwrap.dedent(BEFORE).lstrip())
    for args in (
        ("init", "-q", "-b", "main"),
        ("config", "user.email", "t@example.com"),
        ("config", "user.name", "t"),
        ("add", "-A"),
        ("commit", "-qm", "base"),
        ("remote", "add", "origin", str(origin)),
        ("push", "-q", "origin", "main"),
    ):
        git(*args, cwd=workspace)
    base_sha = git("rev-parse", "HEAD", cwd=workspace)
    git("checkout", "-qb", branch, cwd=workspace)
    Path("pipelines/orders.py").write_text(after)
    assert main(["baseline", "update", "pipelines/orders.py", "--trials", "3", "--no-amplify",
                 "--run-dir", str(tmp_path / "pr-runs")]) == 0  # fmt: skip
    git("commit", "-qam", "a worse step, and a baseline that says so", cwd=workspace)
    return origin, base_sha


def run_without_a_comment(workspace: Path, tmp_path: Path, **env: str):
    """The action on a warm runner, amplifiers and comment off; the run and its summary."""
    summary = tmp_path / "summary.md"
    run = run_action(
        REPO / "action.yml",
        inputs={"amplify": "false", "comment": "false"},
        workspace=workspace,
        runner_temp=warm_runner(tmp_path),
        env={**base_env(), "GITHUB_STEP_SUMMARY": str(summary), **env},
    )
    return run, summary


def judged_by_the_base_branchs_baseline(run) -> object:
    """The check fetched the base's baseline and failed the worse step by it, naming the
    edit; the gate step, for what else a test asserts."""
    steps = {s.name: s for s in run.steps}
    fetch = steps["Fetch the base branch's baseline"]
    assert not fetch.skipped and fetch.code == 0, fetch.stderr
    gate = steps["Run twicerun"]
    assert gate.code == 1, gate.stdout + gate.stderr
    document = json.loads(Path(run.outputs["result"]).read_text())
    assert document["baseline_source"] == "base branch"
    assert [d["verdict"] for d in document["decisions"]] == ["unchanged", "new divergence"]
    assert document["baseline_moved"] == [
        "pipelines/orders.py drifts: differed in 0 of 3 trials on the base branch, 3 of 3 here"
    ]
    return gate


def test_a_pull_request_that_rewrites_its_baseline_is_still_judged_by_the_base_branchs(
    workspace, tmp_path
):
    """The action fetches the base branch and reads the baseline from there: a pull
    request that makes a step worse and regenerates the baseline to match still fails,
    and the summary says, first, that it edited the file."""
    worse_with_its_own_baseline(workspace, tmp_path, "pr")
    # As a fresh checkout of the pull request leaves it: no base branch.
    git("update-ref", "-d", "refs/remotes/origin/main", cwd=workspace)

    run, summary = run_without_a_comment(workspace, tmp_path, GITHUB_BASE_REF="main")
    gate = judged_by_the_base_branchs_baseline(run)
    warnings = [line for line in gate.stdout.splitlines() if line.startswith("::warning")]
    assert warnings[0].startswith(  # first of its severity, so the cap of ten cannot drop it
        "::warning title=twicerun%3A baseline edited::This pull request changes the baseline"
    )
    assert summary.read_text().startswith("> [!WARNING]\n> **This pull request edits the baseline")


def test_a_merge_group_is_judged_by_the_baseline_at_its_base_commit(workspace, tmp_path):
    """In a merge queue GitHub sets no base branch (GITHUB_BASE_REF is empty on
    merge_group); the event names the commit the group is built on. The check reads the
    baseline there, so the merge group's own copy, which a queued pull request may have
    rewritten, cannot pass it."""
    origin, base_sha = worse_with_its_own_baseline(
        workspace, tmp_path, "gh-readonly-queue/main/pr-7"
    )
    git("push", "-q", "origin", "gh-readonly-queue/main/pr-7", cwd=workspace)
    head_sha = git("rev-parse", "HEAD", cwd=workspace)
    # As actions/checkout leaves a merge group: its commit at depth 1, nothing of the base.
    shutil.rmtree(workspace / ".git")
    clone = tmp_path / "clone"
    git(
        "clone",
        "-q",
        "--depth=1",
        "-b",
        "gh-readonly-queue/main/pr-7",
        origin.as_uri(),
        str(clone),
        cwd=tmp_path,
    )
    (clone / ".git").rename(workspace / ".git")
    with pytest.raises(subprocess.CalledProcessError):
        git("cat-file", "-e", f"{base_sha}^{{commit}}", cwd=workspace)

    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "merge_group": {
                    "base_sha": base_sha,
                    "base_ref": "refs/heads/main",
                    "head_sha": head_sha,
                }
            }
        )
    )
    run, summary = run_without_a_comment(
        workspace, tmp_path, GITHUB_EVENT_NAME="merge_group", GITHUB_EVENT_PATH=str(event)
    )
    gate = judged_by_the_base_branchs_baseline(run)
    # A merge group is not a pull request, and is no longer called one.
    assert summary.read_text().startswith("> [!WARNING]\n> **This merge group edits the baseline")
    assert "::warning title=twicerun%3A baseline edited::This merge group changes" in gate.stdout


def test_github_failing_all_day_keeps_the_checks_exit_code_summary_and_outputs(workspace, tmp_path):
    runner_temp = warm_runner(tmp_path)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 12}}))
    summary = tmp_path / "summary.md"
    with FakeGitHub() as github:
        github.always = 500
        run = run_action(
            REPO / "action.yml",
            inputs={"amplify": "false", "github-token": WORKFLOW_TOKEN},
            workspace=workspace,
            runner_temp=runner_temp,
            env={
                **base_env(),
                "GITHUB_API_URL": github.url,
                "GITHUB_REPOSITORY": "octo/pipes",
                "GITHUB_EVENT_PATH": str(event),
                "GITHUB_STEP_SUMMARY": str(summary),
            },
        )
    gate = {s.name: s for s in run.steps}["Run twicerun"]
    assert gate.code == 1, gate.stdout + gate.stderr  # the regression, not GitHub's trouble
    assert summary.read_text().startswith("### twicerun: 1 step got worse")
    assert run.outputs["regressions"] == "1" and run.outputs["comment-url"] == ""
    assert Path(run.outputs["result"]).is_file()
    assert any(
        line.startswith("::warning title=twicerun%3A comment not posted::The comment could not")
        for line in gate.stdout.splitlines()
    )
    assert any(line.startswith("::notice title=twicerun::") for line in gate.stdout.splitlines())


SNOOP = """
import os
from pathlib import Path

TOKEN = {token!r}


def snoop(ctx):
    seen = [k for k, v in os.environ.items() if TOKEN in v]
    if TOKEN.encode() in Path("/proc/self/environ").read_bytes():
        seen.append("/proc/self/environ")
    Path({report!r}).write_text(",".join(seen))
    ctx.write("x", "SELECT 1 AS v")
"""


def test_a_pipeline_step_cannot_find_the_token(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    (ws / "pipelines").mkdir(parents=True)
    report = tmp_path / "seen.txt"
    (ws / "pipelines" / "snoop.py").write_text(
        SNOOP.format(token=WORKFLOW_TOKEN, report=str(report))
    )
    monkeypatch.chdir(ws)
    assert main(["baseline", "update", "pipelines/snoop.py", "--trials", "3", "--no-amplify",
                 "--run-dir", str(tmp_path / "b")]) == 0  # fmt: skip
    runner_temp = warm_runner(tmp_path)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 5}}))
    with FakeGitHub() as github:
        run = run_action(
            REPO / "action.yml",
            inputs={"amplify": "false", "github-token": WORKFLOW_TOKEN},
            workspace=ws,
            runner_temp=runner_temp,
            env={
                **base_env(),
                "GITHUB_API_URL": github.url,
                "GITHUB_REPOSITORY": "octo/pipes",
                "GITHUB_EVENT_PATH": str(event),
            },
        )
        posted = github.ours(5)
    gate = {s.name: s for s in run.steps}["Run twicerun"]
    assert gate.code == 0, gate.stdout + gate.stderr
    assert report.read_text() == ""  # neither in os.environ nor in /proc/self/environ
    assert len(posted) == 1  # and yet the posting code had it
    assert not (runner_temp / "twicerun-token").exists()


def test_annotation_paths_are_the_repositorys_when_the_pipelines_live_below_it(workspace, tmp_path):
    import shutil

    sub = workspace / "analytics"
    sub.mkdir()
    for name in ("pipelines", ".github"):
        shutil.move(str(workspace / name), str(sub / name))
    runner_temp = warm_runner(tmp_path)
    run = run_action(
        REPO / "action.yml",
        inputs={"amplify": "false", "comment": "false", "working-directory": "analytics"},
        workspace=workspace,
        runner_temp=runner_temp,
        env=base_env(),
    )
    gate = {s.name: s for s in run.steps}["Run twicerun"]
    assert gate.code == 1, gate.stdout + gate.stderr
    (error,) = [line for line in gate.stdout.splitlines() if line.startswith("::error ")]
    assert error.startswith("::error file=analytics/pipelines/orders.py,line=10,")


def test_the_action_refuses_windows_in_one_sentence_and_runs_nothing(workspace, tmp_path):
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    run = run_action(
        REPO / "action.yml",
        inputs={},
        workspace=workspace,
        runner_temp=runner_temp,
        env=base_env(),
        runner_os="Windows",
    )
    (refused,) = [s for s in run.steps if not s.skipped]
    assert refused.name == "Refuse Windows" and refused.code == 1
    assert "runs on Linux and macOS runners" in refused.stdout


def test_the_fingerprint_is_computed_in_python_and_follows_the_source(workspace, tmp_path):
    runner_temp = warm_runner(tmp_path)
    run = run_action(
        REPO / "action.yml",
        inputs={"amplify": "false", "comment": "false"},
        workspace=workspace,
        runner_temp=runner_temp,
        env=base_env(),
    )
    steps = {s.name: s for s in run.steps}
    value = steps["Fingerprint this twicerun"].outputs["value"]
    assert re.fullmatch(r"[0-9a-f]{16}", value)
    assert steps["Refuse Windows"].skipped and steps["Set up Python for twicerun"].skipped


def lint_actions_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "lint_actions", REPO / "scripts" / "lint_actions.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_action_we_run_or_show_is_at_a_major_github_retired():
    """action.yml ran setup-python@v5 and cache@v4 on Node.js 20, which GitHub took off its
    runners, and uploaded SARIF through the CodeQL Action's deprecated v3; the workflows
    and the docs' examples, which users copy, did the same."""
    module = lint_actions_module()
    assert module.stale_actions(module.repository_texts()) == []
    sample = (
        "steps:\n"
        "  - uses: actions/setup-python@v5\n"
        "  - uses: 'github/codeql-action/upload-sarif@v3'\n"
        "  - uses: actions/cache@v5\n"
        "  - uses: someone/else@v1\n"
    )
    found = module.stale_actions([("x.yml", sample)])
    assert [(f["line"], f["column"], f["message"]) for f in found] == [
        (
            2,
            11,
            "actions/setup-python@v5 runs on Node.js 20, which GitHub took off its hosted "
            "runners in September 2026; use @v6 or later",
        ),
        (
            3,
            12,
            "github/codeql-action@v3 is the major GitHub deprecates in December 2026; "
            "use @v4 or later",
        ),
    ]


def test_every_workflow_example_in_the_docs_is_handed_to_the_linter():
    module = lint_actions_module()
    found = module.doc_workflows()
    names = [name for name, _ in found]
    assert all(name.startswith(("docs/", "README.md")) for name in names)
    texts = "\n".join(text for name, text in found if not name.endswith("(steps)"))
    doc = (REPO / "docs" / "action.md").read_text()
    # Every ```yaml block in docs/action.md that is a workflow is among them.
    assert doc.count("\njobs:\n") == texts.count("\njobs:\n") >= 4
    assert "uses: twicerun/action@v1" in texts and "merge_group:" in texts


def test_the_fork_flow_posts_on_the_right_pull_request_and_refuses_a_hostile_artifact(
    workspace, tmp_path
):
    from fakegithub import READ_ONLY_TOKEN

    def temp(name: str) -> Path:
        path = tmp_path / name
        path.mkdir()
        (path / "twicerun-venv").symlink_to(REPO / ".venv")
        return path

    pull_event = tmp_path / "pull.json"
    pull_event.write_text(json.dumps({"pull_request": {"number": 12, "head": {"sha": "abc123"}}}))
    run_event = tmp_path / "run.json"
    run_event.write_text(
        json.dumps(
            {
                "workflow_run": {
                    "head_sha": "abc123",
                    "head_branch": "feature",
                    "head_repository": {"full_name": "forker/pipes"},
                    "html_url": "https://github.test/octo/pipes/actions/runs/7",
                }
            }
        )
    )
    with FakeGitHub() as github:
        github.pulls = [
            {"number": 12, "head_sha": "abc123", "head_owner": "forker", "head_branch": "feature"},
            {"number": 13, "head_sha": "fff999", "head_owner": "other", "head_branch": "main"},
        ]
        common = {**base_env(), "GITHUB_API_URL": github.url, "GITHUB_REPOSITORY": "octo/pipes"}
        # 1. The fork's pull_request run: its token cannot write, so it leaves its document.
        fork = run_action(
            REPO / "action.yml",
            inputs={"amplify": "false", "github-token": READ_ONLY_TOKEN},
            workspace=workspace,
            runner_temp=temp("fork-runner"),
            env={**common, "GITHUB_EVENT_PATH": str(pull_event)},
        )
        assert {s.name: s for s in fork.steps}["Run twicerun"].code == 1
        assert github.comments == []
        left = Path(fork.outputs["result"])
        assert re.fullmatch(r"twicerun-[0-9a-f]{12}-result\.json", left.name)
        artifact = tmp_path / "artifact" / left.name
        artifact.parent.mkdir()
        artifact.write_bytes(left.read_bytes())

        # 2. The workflow_run side, on the base repository, with a token that can write.
        empty = tmp_path / "base-checkout"
        empty.mkdir()

        def post(document: Path):
            return run_action(
                REPO / "action.yml",
                inputs={"mode": "post", "document": str(document), "github-token": WORKFLOW_TOKEN},
                workspace=empty,
                runner_temp=temp(f"post-runner-{document.stem}"),
                env={**common, "GITHUB_EVENT_PATH": str(run_event)},
            )

        steps = {s.name: s for s in post(artifact.parent).steps}  # the downloaded directory
        assert steps["Run twicerun"].skipped  # no pipeline runs on this side
        posting = steps["Post the comment a pull request's run left"]
        assert posting.code == 0, posting.stdout + posting.stderr
        (comment,) = github.ours(12)
        assert comment["body"].startswith("<!-- twicerun:comment:")
        assert "### twicerun: 1 step got worse" in comment["body"]

        # 3. A hostile artifact names another pull request: nothing is posted anywhere.
        hostile = tmp_path / "hostile.json"
        document = json.loads(artifact.read_text())
        document["pull_request"]["number"] = 13
        hostile.write_text(json.dumps(document))
        refused = {s.name: s for s in post(hostile).steps}[
            "Post the comment a pull request's run left"
        ]
        assert refused.code == 2
        assert "names pull request #13" in refused.stderr and "posting nothing" in refused.stderr
        assert github.ours(13) == [] and len(github.ours(12)) == 1


def test_the_gate_writes_sarif_for_code_scanning(workspace, tmp_path, monkeypatch):
    for name in ("GITHUB_EVENT_PATH", "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TWICERUN_WORKING_DIRECTORY", "analytics")
    out = tmp_path / "twicerun.sarif"
    code = main(["gate", "--pipelines", "pipelines/orders.py", "--no-amplify", "--no-comment",
                 "--runs", "5", "--json", str(tmp_path / "gate.json"), "--sarif", str(out),
                 "--run-dir", str(tmp_path / "runs")])  # fmt: skip
    assert code == 1
    log = json.loads(out.read_text())
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    (run,) = log["runs"]
    rules = {r["id"] for r in run["tool"]["driver"]["rules"]}
    (found,) = run["results"]
    assert found["ruleId"] in rules
    assert found["ruleId"].startswith("twicerun/") and "PERSISTS_SINGLE_THREADED" in found["ruleId"]
    assert found["level"] == "error"
    location = found["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "analytics/pipelines/orders.py"
    assert location["region"]["startLine"] == 10
    assert found["partialFingerprints"]["twicerun/v1"]


def test_comment_not_posted_leads_the_warnings_even_past_ten_of_them(tmp_path, monkeypatch):
    # Twelve steps that diverge as they always did: twelve warnings, and the comment
    # cannot be posted. The warning about the comment must survive the cap of ten.
    steps = "\n\n".join(
        f"def s{i}(ctx):\n    ctx.write('x{i}', 'SELECT random() AS v')" for i in range(12)
    )
    (tmp_path / "p.py").write_text(steps + "\n")
    monkeypatch.chdir(tmp_path)
    # The retries still happen; only their sleeps go (tests/test_github_comment.py
    # keeps the real backoff).
    from twicerun.github import comment

    monkeypatch.setattr(comment, "BACKOFF", 0)
    # At one thread nothing is bisected: the warnings are the subject, not their causes.
    assert main(["baseline", "update", "p.py", "--trials", "3", "--no-amplify", "--runs", "2",
                 "--threads", "1", "--output", "b.json", "--run-dir", "b-runs"]) == 0  # fmt: skip
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 4, "head": {"sha": "x"}}}))
    with FakeGitHub() as github:
        github.always = 500
        for name, value in {
            "GITHUB_API_URL": github.url,
            "GITHUB_REPOSITORY": "octo/pipes",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_TOKEN": WORKFLOW_TOKEN,
        }.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
        monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
        import contextlib
        import io

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["gate", "--pipelines", "p.py", "--baseline", "b.json", "--no-amplify",
                         "--runs", "2", "--run-dir", "runs", "--json", "gate.json"])  # fmt: skip
    assert code == 0
    warnings = [line for line in out.getvalue().splitlines() if line.startswith("::warning")]
    assert len(warnings) == 10
    assert warnings[0].startswith("::warning title=twicerun%3A comment not posted::")
    assert "more warnings not shown" in warnings[-1]
    assert re.fullmatch(
        r"twicerun: check passed: no step got worse \(outputs regressions=0, diverged=12\), "
        r"in \d+\.\ds",
        out.getvalue().splitlines()[-1],
    )


def test_a_cached_venv_whose_interpreter_is_gone_is_rebuilt_and_runs_the_check(workspace, tmp_path):
    wheelhouse = REPO / ".venv" / "wheelhouse"
    if not any(wheelhouse.glob("duckdb-*.whl")):
        pytest.fail(f"{wheelhouse} has no wheels: run the README's test line, which builds it")
    runner_temp = tmp_path / "runner"
    venv = runner_temp / "twicerun-venv"
    (venv / "bin").mkdir(parents=True)
    # What a restored cache holds after the runner's Python moved on a patch release.
    (venv / "bin" / "python").symlink_to(tmp_path / "python3.11.0-that-is-gone")
    # The pipeline imports a package of the repository's own, which the requirements
    # input installs into the rebuilt venv (from the working-directory, as ./shopday).
    package = workspace / "shopday"
    (package / "shopday").mkdir(parents=True)
    (package / "shopday" / "__init__.py").write_text('"""Shop constants."""\n\nGROUPS = 3\n')
    (package / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["flit_core"]\nbuild-backend = "flit_core.buildapi"\n\n'
        '[project]\nname = "shopday"\nversion = "1.0"\ndynamic = ["description"]\n'
    )
    (workspace / "requirements.txt").write_text("./shopday\n")
    pipeline = workspace / "pipelines" / "orders.py"
    pipeline.write_text("import shopday  # noqa: F401\n" + pipeline.read_text())
    # `python -m venv` from the repository's root imported this in place of the standard
    # module (the warm path's test above has the story).
    (workspace / "types.py").write_text("raise SystemExit('imported from the repository')\n")
    run = run_action(
        REPO / "action.yml",
        inputs={"amplify": "false", "comment": "false", "requirements": "requirements.txt"},
        workspace=workspace,
        runner_temp=runner_temp,
        env={
            **base_env(),
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(wheelhouse),
            "PIP_NO_COMPILE": "1",
        },
    )
    steps = {s.name: s for s in run.steps}
    install = steps["Install twicerun from the action's checkout"]
    assert install.code == 0, install.stdout + install.stderr
    assert (venv / "bin" / "python").resolve().exists()
    gate = steps["Run twicerun"]
    assert gate.code == 1, gate.stdout + gate.stderr  # the rebuilt twicerun measured the regression
    assert "new divergence" in gate.stdout


def test_a_repository_with_a_types_py_at_its_root_is_still_gated(workspace, tmp_path):
    """The action's own Python ran from the repository's root as `python -` and `-c`,
    which put that directory first on the path: a repository holding a `types.py` or
    `random.py` there had it imported in place of the standard module, the fingerprint
    died, and the check never ran. Every interpreter the action starts now leaves the
    working directory off its path (-P)."""
    for name in ("types.py", "random.py", "enum.py"):
        (workspace / name).write_text("raise SystemExit('imported from the repository')\n")
    steps = run_warm(workspace, tmp_path, amplify="false")
    for name in ("Fingerprint this twicerun", "Install twicerun from the action's checkout"):
        assert steps[name].code == 0, steps[name].stdout + steps[name].stderr
    gate = steps["Run twicerun"]
    assert gate.code == 1, gate.stdout + gate.stderr
    assert "new divergence" in gate.stdout


def run_warm(workspace: Path, tmp_path: Path, **inputs: str) -> dict:
    """The action's steps by name, run on a warm cache with no GitHub to talk to."""
    run = run_action(
        REPO / "action.yml",
        inputs={"comment": "false", **inputs},
        workspace=workspace,
        runner_temp=warm_runner(tmp_path),
        env=base_env(),
    )
    return {s.name: s for s in run.steps}


def test_a_requirements_file_that_is_not_there_stops_the_action_saying_so(workspace, tmp_path):
    steps = run_warm(workspace, tmp_path, requirements="reqs.txt")
    fingerprint = steps["Fingerprint this twicerun"]
    assert fingerprint.code == 1
    assert fingerprint.stdout == (
        "::error title=twicerun::the requirements input names reqs.txt, which is not a file in "
        "the working-directory; give its path from there\n"
    )
    assert "Run twicerun" not in steps  # the runner stops at the first failing step


def test_a_module_the_pipeline_lacks_is_told_to_go_in_the_requirements_input(workspace, tmp_path):
    # Off the action, the advice is a pip command for twicerun's own Python; in the action,
    # nobody can run one between its steps, so the advice names the input.
    pipeline = workspace / "pipelines" / "orders.py"
    pipeline.write_text("import shopday_missing  # noqa: F401\n" + pipeline.read_text())
    gate = run_warm(workspace, tmp_path, amplify="false")["Run twicerun"]
    assert gate.code == 2, gate.stdout + gate.stderr
    assert (
        "the action runs the pipelines in an environment of its own; list shopday_missing in "
        "a requirements file and name that file in the action's `requirements` input"
    ) in gate.stdout + gate.stderr


def test_every_input_the_action_passes_as_a_variable_is_known_by_its_input_name():
    # An error in a value names the input the workflow wrote, from this table.
    import yaml

    from twicerun.cli.app import ACTION_INPUTS

    steps = yaml.safe_load((REPO / "action.yml").read_text())["runs"]["steps"]
    (gate,) = [s for s in steps if s.get("id") == "gate"]
    passed = {
        name: m.group(1)
        for name, value in gate["env"].items()
        if (m := re.fullmatch(r"\$\{\{ inputs\.([a-z-]+) \}\}", value))
    }
    assert passed == ACTION_INPUTS


def test_baseline_compare_reads_the_actions_amplifier_settings_as_the_gate_does(
    twicerun, write_pipeline, tmp_path, monkeypatch
):
    """`baseline compare` is the gate's decision made locally, and read every other
    setting the action passes as a variable; TWICERUN_AMPLIFY and TWICERUN_WITHOUT it
    ignored, so a local run measured otherwise than the job it was meant to repeat."""
    path = write_pipeline("def a(ctx):\n    ctx.write('t', 'SELECT 1 AS v')\n")
    document = tmp_path / "gate.json"

    def measured() -> dict:
        twicerun(
            "baseline", "compare", path, "--baseline", tmp_path / "none.json",
            "--run-dir", tmp_path / "runs", "--runs", "2", "--json", document,
        )  # fmt: skip
        (result,) = json.loads(document.read_text())["results"].values()
        return result

    monkeypatch.setenv("TWICERUN_WITHOUT", "file-order thread-count")
    assert measured()["amplifiers_off"] == ["thread count", "file order"]
    monkeypatch.setenv("TWICERUN_AMPLIFY", "false")
    monkeypatch.delenv("TWICERUN_WITHOUT")
    assert measured()["amplified"] is False


def test_a_bad_input_value_names_the_action_input_it_came_from(twicerun, monkeypatch):
    # "Invalid value for '--amplify'" sent a workflow's author looking for a flag they
    # never typed.
    monkeypatch.setenv("TWICERUN_AMPLIFY", "maybe")
    outcome = twicerun("gate", "--no-comment")
    assert outcome.code == 2
    assert (
        "Error: Invalid value for '--amplify' (from the environment variable TWICERUN_AMPLIFY, "
        "which the action sets from its 'amplify' input): 'maybe' is not a valid boolean"
    ) in outcome.err
    monkeypatch.delenv("TWICERUN_AMPLIFY")
    assert "Invalid value for '--runs': 'x'" in twicerun("gate", "--runs", "x").err
    # Names separated by spaces, as the input's description says; one that is no
    # amplifier is named with the input it came from.
    monkeypatch.setenv("TWICERUN_WITHOUT", "file-order ties")
    outcome = twicerun("gate", "--no-comment")
    assert outcome.code == 2
    assert (
        "Error: Invalid value for '--without' (from the environment variable TWICERUN_WITHOUT, "
        "which the action sets from its 'without' input): 'ties' is not one of"
    ) in outcome.err
    monkeypatch.setenv("TWICERUN_WITHOUT", "file-order arrival-order")
    monkeypatch.setenv("TWICERUN_AMPLIFY", "false")
    outcome = twicerun("gate", "--no-comment")
    assert outcome.code == 2
    assert "--without arrival-order, file-order turns amplifiers off" in outcome.err
