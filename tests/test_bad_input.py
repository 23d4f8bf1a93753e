"""Bad input, one row per case: the documented exit code, one message, nothing lost.

Every row runs the real CLI in a copy of one sandbox (a good pipeline, a completed
invocation, a README with a generated block, a baseline) and checks three things:
the exit code; that the message is one line naming the problem, with no traceback;
and that nothing outside a new invocation directory changed (the pipeline, the
README's bytes and mode, the baseline, the earlier invocation).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from twicerun.cli import main

GOOD = """
def inputs(ctx):
    ctx.write("t", "SELECT range AS id, range % 3 AS g FROM range(20)")


def total(ctx):
    ctx.read("t")
    ctx.write("s", "SELECT g, count(*) AS n FROM t GROUP BY g")
"""


@dataclass(frozen=True)
class Case:
    id: str
    argv: list[str]
    code: int
    says: str
    files: dict[str, str | bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


def pipeline(name: str, source: str) -> dict[str, str]:
    return {name: source}


def step(body: str) -> str:
    return f"def a(ctx):\n    {body}\n"


RUN = ["run", "--no-amplify", "--runs", "2"]

CASES = [
    # Pipelines -----------------------------------------------------------------------
    Case("missing-pipeline", [*RUN, "nope.py"], 2, "nope.py"),
    Case("syntax-error", [*RUN, "p.py"], 2, "p.py", pipeline("p.py", "def a(ctx)\n    pass\n")),
    Case("raises-at-import", [*RUN, "p.py"], 2, "p.py", pipeline("p.py", "raise ValueError('x')\n")),
    Case(
        "another-engine",
        [*RUN, "p.py"],
        2,
        "declares ENGINE = 'flink'; twicerun runs pipelines on 'duckdb' or 'spark'",
        pipeline("p.py", "ENGINE = 'flink'\n\ndef a(ctx):\n    ctx.write('t', 'SELECT 1 AS x')\n"),
    ),
    Case("no-steps", [*RUN, "p.py"], 2, "no steps", pipeline("p.py", "X = 1\n")),
    Case("steps-not-a-list", [*RUN, "p.py"], 2, "STEPS", pipeline("p.py", "STEPS = 3\n")),
    Case(
        "steps-not-callable", [*RUN, "p.py"], 2, "STEPS", pipeline("p.py", "STEPS = ['a']\n")
    ),
    Case(
        "bad-artifact-name",
        [*RUN, "p.py"],
        2,
        "an artifact name is an identifier",
        pipeline("p.py", step("ctx.write('no good', 'SELECT 1 AS v')")),
    ),
    Case(
        "non-ascii-name",
        [*RUN, "p.py"],
        2,
        "such as 'caf'",
        pipeline("p.py", step("ctx.write('café', 'SELECT 1 AS v')")),
    ),
    Case(
        "artifact-name-too-long",
        [*RUN, "p.py"],
        2,
        "at most 128 characters, this one has 230",
        pipeline("p.py", step(f"ctx.write('{'n' * 230}', 'SELECT 1 AS v')")),
    ),
    Case(
        "written-twice",
        [*RUN, "p.py"],
        2,
        "write each artifact once",
        pipeline("p.py", step("ctx.write('x', 'SELECT 1 AS v'); ctx.write('x', 'SELECT 2 AS v')")),
    ),
    Case(
        "unknown-read",
        [*RUN, "p.py"],
        2,
        "no earlier step wrote any artifact",
        pipeline("p.py", step("ctx.read('nothing')")),
    ),
    Case(
        "two-owners",
        [*RUN, "p.py"],
        2,
        "is already written by step 0 a",
        pipeline(
            "p.py",
            step("ctx.write('x', 'SELECT 1 AS v')")
            + "\n\ndef b(ctx):\n    ctx.write('x', 'SELECT 2 AS v')\n",
        ),
    ),
    Case(
        "case-only-names",
        [*RUN, "p.py"],
        2,
        "does not tell names apart by case",
        pipeline(
            "p.py",
            step("ctx.write('T', 'SELECT 1 AS v')")
            + "\n\ndef b(ctx):\n    ctx.write('t', 'SELECT 2 AS v')\n",
        ),
    ),
    Case(
        "two-statements",
        [*RUN, "p.py"],
        2,
        "give exactly one query",
        pipeline("p.py", step("ctx.write('x', 'SELECT 1 AS v; SELECT 2 AS v')")),
    ),
    Case(
        "create-statement",
        [*RUN, "p.py"],
        2,
        "got a CREATE statement",
        pipeline("p.py", step("ctx.write('x', 'CREATE TABLE y AS SELECT 1')")),
    ),
    Case(
        "write-wrong-type",
        [*RUN, "p.py"],
        2,
        "data must be a SQL query string",
        pipeline("p.py", step("ctx.write('x', 42)")),
    ),
    Case(
        "state-initial-not-sql",
        [*RUN, "p.py"],
        2,
        "initial is a SQL query string",
        pipeline("p.py", step("ctx.state('x', 3)")),
    ),
    Case(
        "keyword-only-ctx",
        [*RUN, "p.py"],
        2,
        "keyword-only parameter",
        pipeline("p.py", "def a(*, ctx):\n    pass\n\n\nSTEPS = [a]\n"),
    ),
    Case(
        "step-raises",
        [*RUN, "p.py"],
        3,
        "step 0 a",
        pipeline("p.py", step("raise RuntimeError('boom')")),
    ),
    Case(
        "step-exits",
        [*RUN, "p.py"],
        3,
        "SystemExit",
        pipeline("p.py", "import sys\n\n\n" + step("sys.exit(0)")),
    ),
    Case("not-utf8-pipeline", [*RUN, "p.py"], 2, "p.py", {"p.py": b"def a(ctx):\n    x = '\xff'\n"}),
    # Flags ----------------------------------------------------------------------------
    Case("runs-1", ["run", "good.py", "--runs", "1"], 2, "at least 2 runs"),
    Case("runs-0", ["run", "good.py", "--runs", "0"], 2, "at least 2 runs"),
    Case("runs-absurd", ["run", "good.py", "--runs", "99999999999999999999"], 2, "--runs"),
    Case("threads-0", ["run", "good.py", "--threads", "0"], 2, "--threads"),
    Case("threads-absurd", ["run", "good.py", "--threads", "1000000000"], 2, "--threads"),
    Case("keep-negative", ["run", "good.py", "--keep", "-1"], 2, "--keep"),
    Case("seed-format", ["run", "good.py", "--seed", "nonsense"], 2, "STEP=INTEGER"),
    Case(
        "seed-twice",
        ["run", "seeded.py", "--seed", "a=1", "--seed", "a=2"],
        2,
        "a is given twice",
        pipeline(
            "seeded.py",
            "from twicerun import step\n\n\n@step(stochastic=True, seed='seed')\n"
            "def a(ctx, seed: int = 1):\n    ctx.write('x', f'SELECT {seed} AS v')\n",
        ),
    ),
    Case(
        "seed-positional-only",
        [*RUN, "seeded.py"],
        2,
        "positional-only",
        pipeline(
            "seeded.py",
            "from twicerun import step\n\n\n@step(stochastic=True, seed='seed')\n"
            "def a(ctx, seed: int = 1, /):\n    ctx.write('x', f'SELECT {seed} AS v')\n",
        ),
    ),
    Case("key-format", ["run", "good.py", "--key", "nonsense"], 2, "--key"),
    Case("key-spaces", ["run", "good.py", "--key", " s=g", "--key", "s=g"], 2, "--key"),
    Case("key-unknown-artifact", ["run", "good.py", "--key", "nothing=g"], 2, "nothing"),
    Case("tolerance-nan", ["run", "good.py", "--tolerance-rel", "nan"], 2, "--tolerance-rel"),
    Case("tolerance-negative", ["run", "good.py", "--tolerance-rel", "-1"], 2, "--tolerance-rel"),
    Case("ulps-negative", ["run", "good.py", "--tolerance-ulps", "-1"], 2, "--tolerance-ulps"),
    Case("policy-unknown", ["run", "good.py", "--policy", "lenient"], 2, "--policy"),
    Case("json-is-the-pipeline", [*RUN, "good.py", "--json", "good.py"], 2, "must not overwrite"),
    Case(
        "json-inside-run-dir",
        [*RUN, "good.py", "--json", ".twicerun/x.json"],
        2,
        "must not overwrite",
    ),
    Case("json-not-a-result", [*RUN, "good.py", "--json", "README.md"], 2, "not a twicerun Result"),
    Case("json-a-directory", [*RUN, "good.py", "--json", "sub"], 2, "is a directory"),
    Case("json-under-a-file", [*RUN, "good.py", "--json", "good.py/r.json"], 2, "cannot be written"),
    Case("run-dir-a-file", [*RUN, "good.py", "--run-dir", "README.md"], 2, "--run-dir"),
    Case("run-dir-under-a-file", [*RUN, "good.py", "--run-dir", "good.py/runs"], 2, "--run-dir"),
    # Where nothing can be created (as no permission or a read-only file system would be):
    # /proc refuses even root, so the row holds whoever runs the suite. Root used to be
    # told only once the invocation directory failed, in other words than everyone else:
    # the row expected root's, and failed for any other user (a GitHub runner's).
    Case("run-dir-cannot-be-created", [*RUN, "good.py", "--run-dir", "/proc/twicerun-runs"], 2, "--run-dir /proc/twicerun-runs: /proc cannot be written to; name another path"),
    # Saved runs -----------------------------------------------------------------------
    Case("judge-missing", ["judge", "nowhere"], 2, "nowhere"),
    Case("judge-empty-dir", ["judge", "sub"], 2, "sub"),
    Case("judge-bad-policy", ["judge", ".twicerun", "--policy", "lenient"], 2, "--policy"),
    Case("judge-json-onto-saved", ["judge", "{invocation}", "--json", "{invocation}/result.json"], 2, "must not overwrite"),
    # Reports --------------------------------------------------------------------------
    Case("report-missing-artifact", ["report", "nope.json"], 2, "nope.json"),
    Case("report-not-json", ["report", "good.py"], 2, "is not JSON"),
    Case("report-unknown-schema", ["report", "other.json"], 2, "carries no tables", {"other.json": '{"schema": "x/1"}'}),
    Case("report-unknown-table", ["report", "{result}", "--table", "nosuch"], 2, "no table called nosuch"),
    Case("report-results-unreadable", ["report", "--results", "res", "--check", "README.md"], 2, "not a readable JSON artifact", {"res/broken.json": "{"}),
    Case("report-results-unknown", ["report", "--results", "res", "--check", "README.md"], 2, "renders no table", {"res/other.json": '{"schema": "x/1"}'}),
    Case("report-result-wrong-shape", ["report", "shape.json"], 2, "shape.json", {"shape.json": '{"schema": "twicerun.result/1", "steps": 7}'}),
    Case("judge-result-not-json", ["judge", "{invocation}"], 2, "result.json", {"{invocation}/result.json": "{ broken"}),
    Case("judge-result-wrong-shape", ["judge", "{invocation}"], 2, "result.json", {"{invocation}/result.json": '{"schema": "twicerun.result/1", "steps": 7}'}),
    Case("report-update-and-check", ["report", "{result}", "--update", "README.md", "--check", "README.md"], 2, "give one"),
    Case("report-unpaired-marker", ["report", "{result}", "--check", "bad.md"], 2, "bad.md", {"bad.md": "<!-- twicerun:steps-good -->\n"}),
    Case("report-orphan-block", ["report", "{result}", "--check", "orphan.md"], 2, "no artifact renders", {"orphan.md": "<!-- twicerun:invented -->\n<!-- /twicerun:invented -->\n"}),
    Case("report-missing-block", ["report", "{result}", "--update", "empty.md"], 2, "no marker pair", {"empty.md": "nothing here\n"}),
    Case("report-not-utf8", ["report", "{result}", "--check", "latin.md"], 2, "latin.md", {"latin.md": b"caf\xe9\n"}),
    # Baselines ------------------------------------------------------------------------
    Case("baseline-too-small", ["baseline", "update", "good.py", "--trials", "2", "--output", "b.json"], 2, "too few"),
    Case("baseline-no-pipelines", ["baseline", "update", "nothing/*.py"], 2, "no pipeline matches"),
    Case("baseline-add-to-nothing", ["baseline", "update", "good.py", "--add", "--output", "none.json"], 2, "--add"),
    Case("compare-no-baseline", ["baseline", "compare", "--pipelines", "good.py", "--baseline", "none.json", "--no-amplify"], 2, "no baseline at none.json"),
    Case("compare-baseline-not-json", ["baseline", "compare", "--pipelines", "good.py", "--baseline", "README.md", "--no-amplify"], 2, "is not JSON"),
    Case("compare-old-baseline", ["baseline", "compare", "--pipelines", "good.py", "--baseline", "old.json", "--no-amplify"], 2, "older format", {"old.json": '{"schema": "twicerun.baseline/1"}'}),
    Case("compare-malformed-baseline", ["baseline", "compare", "--pipelines", "good.py", "--baseline", "bad.json", "--no-amplify"], 2, "malformed", {"bad.json": '{"schema": "twicerun.baseline/2", "trials": 3}'}),
    Case("compare-pipelines-both-ways", ["baseline", "compare", "good.py", "--pipelines", "good.py", "--no-amplify"], 2, "give them one way"),
    Case("compare-argument-with-a-space", ["baseline", "compare", "good.py", "my dir/p.py", "--no-amplify"], 2, "such as 'my?dir/p.py'", {"my dir/p.py": GOOD}),
    Case("compare-path-with-a-space", ["baseline", "compare", "--pipelines", "my dir/p.py", "--no-amplify"], 2, "such as 'my?dir/p.py'", {"my dir/p.py": GOOD}),
    # The files these verbs write are refused before the trials run, as `run --json` is:
    # nothing but a file of the same kind is overwritten, and a place that cannot be
    # written is found by trying (/proc refuses even root).
    Case("baseline-output-over-a-pipeline", ["baseline", "update", "good.py", "--output", "good.py"], 2, "--output good.py: that is"),
    Case("baseline-output-over-a-readme", ["baseline", "update", "good.py", "--output", "README.md"], 2, "--output README.md exists and is not what this verb writes"),
    Case("baseline-output-cannot-be-written", ["baseline", "update", "good.py", "--output", "/proc/twicerun-b.json"], 2, "--output /proc/twicerun-b.json: /proc cannot be written to"),
    Case("baseline-output-dash", ["baseline", "update", "good.py", "--output", "-"], 2, "--output -: the baseline is a file to commit, not a stream"),
    Case("gate-json-dash", ["gate", "--pipelines", "good.py", "--baseline", "b.json", "--no-amplify", "--no-comment", "--json", "-"], 2, "--json -: the gate's standard output carries workflow commands"),
    Case("compare-json-over-a-pipeline", ["baseline", "compare", "--pipelines", "good.py", "--baseline", "b.json", "--json", "good.py"], 2, "--json good.py: that is"),
    Case("compare-json-over-the-baseline", ["baseline", "compare", "--pipelines", "good.py", "--baseline", "b.json", "--json", "b.json"], 2, "--json b.json: that is"),
    Case("compare-json-cannot-be-written", ["baseline", "compare", "--pipelines", "good.py", "--baseline", "b.json", "--json", "/proc/twicerun-g.json"], 2, "/proc cannot be written to"),
    Case("audit-json-cannot-be-written", ["audit", "good.py", "--json", "/proc/twicerun-a.json"], 2, "/proc cannot be written to"),
    # A directory is never a pipeline; audit and reproduce said so in click's words ("File
    # 'sub' is a directory"), run in the loader's, which say what to pass.
    Case("run-a-directory", ["run", "sub"], 2, "sub is a directory; pass the pipeline's Python file"),
    Case("audit-a-directory", ["audit", "sub"], 2, "sub is a directory; pass the pipeline's Python file"),
    Case("reproduce-pipeline-a-directory", ["reproduce", "{invocation}", "--pipeline", "sub"], 3, "sub is a directory; pass the pipeline's Python file"),
    Case("run-json-cannot-be-written", [*RUN, "good.py", "--json", "/proc/twicerun-r.json"], 2, "/proc cannot be written to"),
    Case("compare-fail-on-unknown", ["baseline", "compare", "--pipelines", "good.py", "--fail-on", "everything"], 2, "everything"),
    Case("compare-fail-on-empty", ["baseline", "compare", "--pipelines", "good.py", "--fail-on", ""], 2, "--fail-on is empty"),
    # nan compares false with every bound, so click's ranges took it: the check then ran
    # with alpha nan, under which no p-value is ever small enough to fail it.
    Case("compare-alpha-nan", ["baseline", "compare", "--pipelines", "good.py", "--baseline", "b.json", "--alpha", "nan"], 2, "--alpha': nan is not a finite number"),
    Case("compare-screen-nan", ["baseline", "compare", "--pipelines", "good.py", "--baseline", "b.json", "--screen", "nan"], 2, "--screen': nan is not a finite number"),
    Case("baseline-alpha-nan", ["baseline", "update", "good.py", "--alpha", "nan"], 2, "--alpha': nan is not a finite number"),
    Case("step-timeout-nan", ["run", "good.py", "--step-timeout", "nan"], 2, "--step-timeout': nan is not a finite number"),
    Case("compare-fail-on-none-and-new", ["baseline", "compare", "--pipelines", "good.py", "--fail-on", "none,new"], 2, "none means nothing fails the check, which contradicts new"),
    Case("compare-alpha-zero", ["baseline", "compare", "--pipelines", "good.py", "--alpha", "0"], 2, "--alpha"),
    Case("compare-alpha-big", ["baseline", "compare", "--pipelines", "good.py", "--alpha", "1.5"], 2, "--alpha"),
    Case("compare-confirm-zero", ["baseline", "compare", "--pipelines", "good.py", "--confirm", "0"], 2, "--confirm"),
    # GitHub ---------------------------------------------------------------------------
    Case("comment-not-ours", ["comment", "README.md", "--number", "3", "--repository", "o/r"], 2, "not a comment twicerun gate wrote"),
    Case("comment-missing-file", ["comment", "nope.md", "--number", "3", "--repository", "o/r"], 2, "nope.md"),
    Case("comment-bad-number", ["comment", "README.md", "--number", "0", "--repository", "o/r"], 2, "--number"),
    Case(
        "gate-summary-a-directory",
        ["gate", "--pipelines", "good.py", "--baseline", "b.json", "--no-amplify", "--no-comment"],
        2,
        "GITHUB_STEP_SUMMARY",
        env={"GITHUB_STEP_SUMMARY": "sub"},
    ),
    Case(
        "gate-fork-under-pull-request-target",
        ["gate", "--pipelines", "good.py", "--baseline", "b.json", "--no-amplify"],
        2,
        "refusing to run pipelines from the fork evil/pipes under pull_request_target",
        {"event.json": json.dumps({"pull_request": {"number": 3, "head": {"repo": {"full_name": "evil/pipes"}}, "base": {"repo": {"full_name": "octo/pipes"}}}})},
        env={"GITHUB_EVENT_PATH": "event.json", "GITHUB_EVENT_NAME": "pull_request_target", "GITHUB_REPOSITORY": "octo/pipes"},
    ),
    Case(
        "gate-event-not-json",
        ["gate", "--pipelines", "good.py", "--baseline", "b.json", "--no-amplify"],
        2,
        "GITHUB_EVENT_PATH",
        {"event.json": "{not json"},
        env={"GITHUB_EVENT_PATH": "event.json", "GITHUB_REPOSITORY": "o/r"},
    ),
]  # fmt: skip


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """The sandbox every row starts from, made once."""
    root = tmp_path_factory.mktemp("sandbox")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        Path("good.py").write_text(GOOD.lstrip())
        (root / "sub").mkdir()
        assert main(["run", "good.py", "--no-amplify", "--runs", "2", "--json", "result.json"]) == 0
        Path("README.md").write_text(
            "# p\n\n<!-- twicerun:steps-good -->\n<!-- /twicerun:steps-good -->\n", encoding="utf-8"
        )
        assert main(["report", "result.json", "--update", "README.md"]) == 0
        os.chmod("README.md", 0o444)
        assert (
            main(["baseline", "update", "good.py", "--trials", "3", "--no-amplify",
                  "--output", "b.json", "--run-dir", str(root / "baseline-runs")])
            == 0
        )  # fmt: skip
    finally:
        os.chdir(cwd)
    return root


def snapshot(root: Path, run_dir: Path, earlier: set[str]) -> dict[str, tuple[str, int]]:
    """Every file's digest and mode, but for invocation directories a row may add."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_dir() or path.is_symlink():
            continue
        rel = path.relative_to(root)
        if path.is_relative_to(run_dir) and rel.parts[1] not in earlier:
            continue
        found[str(rel)] = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mode)
    return found


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, template, tmp_path, capsys, monkeypatch):
    root = tmp_path / "sandbox"
    shutil.copytree(template, root, symlinks=True)
    monkeypatch.chdir(root)
    for name in ("GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT", "GITHUB_EVENT_PATH", "GITHUB_BASE_REF",
                 "GITHUB_EVENT_NAME", "GITHUB_TOKEN"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    run_dir = root / ".twicerun"
    (invocation,) = [p for p in run_dir.iterdir() if (p / "invocation.json").exists()]
    for name, content in case.files.items():
        name = name.replace("{invocation}", str(invocation))
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            (root / name).write_bytes(content)
        else:
            (root / name).write_text(content, encoding="utf-8")
    earlier = {p.name for p in run_dir.iterdir()}
    result = root / "result.json"
    argv = [
        a.replace("{invocation}", str(invocation)).replace("{result}", str(result))
        for a in case.argv
    ]
    before = snapshot(root, run_dir, earlier)

    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err

    assert code == case.code, err
    assert "Traceback" not in err
    messages = [
        line
        for line in err.splitlines()
        if line.startswith(("twicerun: ", "Error: ")) and "directory is kept" not in line
    ]
    assert len(messages) == 1, err
    assert case.says in messages[0], err
    assert snapshot(root, run_dir, earlier) == before


def test_the_table_is_long_enough_to_mean_something():
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)


def test_the_readme_in_the_sandbox_is_read_only_so_a_rewrite_would_show(template):
    assert (template / "README.md").stat().st_mode & 0o777 == 0o444
    assert json.loads((template / "result.json").read_text())["schema"].startswith(
        "twicerun.result/"
    )
