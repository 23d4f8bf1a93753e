"""The gate through the real CLI, on real pipelines: what a team switching the check on meets.

The pipelines flip DuckDB `random()` coins per run. Tests must not be flaky, so the
coins here are certain ones (a step that never changes, one that gives a new answer
on every run); the statistical behaviour at in-between rates is measured by
scripts/gate_calibration.py and scripts/gate_coins.py and committed as artifacts.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import FIRST_PER_CUSTOMER

from twicerun._version import __version__

STEADY = 'def steady(ctx):\n    ctx.write("steady", "SELECT 1 AS v")\n'
NOISY = 'def noisy(ctx):\n    ctx.write("noisy", "SELECT random() AS v")\n'
STEADY_NOW_NOISY = 'def steady(ctx):\n    ctx.write("steady", "SELECT random() AS v")\n'
OTHER = 'def other(ctx):\n    ctx.write("other", "SELECT 2 AS v")\n'

# Few trials keep the suite fast: 5 is the fewest with which a check of two
# pipelines can reject at all (1 / C(5 + 3, 3) <= alpha / 2), which `baseline
# update` checks. And 3 runs a trial rather than 5: the coins here are certain ones, so
# a trial's score is all or nothing at any count, and each execution opens a DuckDB
# database (about 18 ms of CPU here), most of what a test of this file costs.
RUNS = ["--runs", "3"]
FAST = ["--trials", "5", "--no-amplify", *RUNS]


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "pipelines").mkdir(parents=True)
    (root / "pipelines" / "coins.py").write_text(STEADY + "\n\n" + NOISY)
    monkeypatch.chdir(root)
    for name in ("GITHUB_BASE_REF", "GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH",
                 "TWICERUN_BASELINE_REF", "TWICERUN_PIPELINES"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return root


# Baselines measured in this session, by the command's arguments and the pipelines'
# sources: most tests start from the same one, and each `update` costs a few seconds.
# Each test's subject, the check against the baseline, still runs in full.
_MEASURED: dict[tuple, bytes] = {}


def update(twicerun, *args: str):
    sources = tuple(
        (a, Path(a).read_bytes()) for a in args if a.endswith(".py") and Path(a).is_file()
    )
    key = (args, sources)
    if key not in _MEASURED:
        outcome = twicerun("baseline", "update", *args, "--output", "baseline.json", *FAST)
        assert outcome.code == 0, outcome.err
        _MEASURED[key] = Path("baseline.json").read_bytes()
    Path("baseline.json").write_bytes(_MEASURED[key])
    return json.loads(_MEASURED[key])


def invocations() -> list[Path]:
    return sorted(Path(".twicerun").iterdir()) if Path(".twicerun").exists() else []


def compare(twicerun, *args: str, pipelines: str = "pipelines/coins.py"):
    outcome = twicerun(
        "baseline",
        "compare",
        "--pipelines",
        pipelines,
        "--baseline",
        "baseline.json",
        "--no-amplify",
        "--json",
        "gate.json",
        *([] if "--runs" in args else RUNS),
        *args,
    )
    document = json.loads(Path("gate.json").read_text()) if Path("gate.json").exists() else None
    return outcome, document


def verdicts(document) -> dict[tuple[str, str], str]:
    return {(d["pipeline"], d["name"]): d["verdict"] for d in document["decisions"]}


def test_an_unchanged_pipeline_passes_and_a_steady_step_gone_random_fails(repo, twicerun):
    update(twicerun, "pipelines/coins.py")
    outcome, document = compare(twicerun)
    assert outcome.code == 0, outcome.out
    assert verdicts(document) == {
        ("pipelines/coins.py", "steady"): "unchanged",
        ("pipelines/coins.py", "noisy"): "unchanged",
    }
    assert document["confirmations"] == []

    Path("pipelines/coins.py").write_text(STEADY_NOW_NOISY + "\n\n" + NOISY)
    outcome, document = compare(twicerun)
    assert outcome.code == 1
    assert verdicts(document)[("pipelines/coins.py", "steady")] == "new divergence"
    (confirmation,) = document["confirmations"]
    assert confirmation["trials"] == 3 and confirmation["suspects"] == ["steady"]
    assert "`steady` in `pipelines/coins.py`: new divergence" in outcome.out
    # A CI log is not a terminal: each pipeline and each confirmation trial gets a line,
    # so minutes of runs never pass in silence.
    said = [re.sub(r"in \d+\.\ds$", "in Ns", line) for line in outcome.err.splitlines()]
    assert said == [
        "[twicerun] pipelines/coins.py: running, 3 runs",
        "[twicerun] pipelines/coins.py: 2 of 2 steps diverged, in Ns",
        *[
            line
            for k in (1, 2, 3)
            for line in (
                f"[twicerun] pipelines/coins.py: a step looks worse; confirmation trial {k} of 3, "
                "3 runs",
                "[twicerun] pipelines/coins.py: 2 of 2 steps diverged, in Ns",
            )
        ],
    ]


def test_a_step_gone_random_in_python_says_so_beside_its_verdict(repo, twicerun):
    """The loop knows a step drew from Python's random module unseeded; the check's verdict,
    its annotation and its summary said only that it diverged."""
    update(twicerun, "pipelines/coins.py")
    Path("pipelines/coins.py").write_text(
        "import random\n\n\n"
        'def steady(ctx):\n    ctx.write("steady", f"SELECT {random.random()} AS v")\n\n\n' + NOISY
    )
    outcome, document = compare(twicerun)
    assert outcome.code == 1
    decision = next(d for d in document["decisions"] if d["name"] == "steady")
    assert decision["verdict"] == "new divergence"
    said = (
        "it drew from Python's random module with no seed fixed in the step, which moves its "
        "numbers at any thread count"
    )
    assert said in decision["evidence"]
    noisy = next(d for d in document["decisions"] if d["name"] == "noisy")
    assert not any("drew from" in e for e in noisy["evidence"])  # DuckDB's random(): not seen


def test_the_log_line_of_a_pipeline_counts_a_step_moved_only_under_an_amplifier(repo, twicerun):
    # It said "0 of 2 steps diverged" of a trial whose step the amplifiers had moved,
    # beside a check deciding on exactly that.
    Path("pipelines/first.py").write_text(FIRST_PER_CUSTOMER)
    outcome = twicerun(
        "baseline", "update", "pipelines/first.py", "--runs", "2", "--output", "baseline.json",
        "--trials", "3",
    )  # fmt: skip
    assert outcome.code == 0, outcome.err
    outcome = twicerun(
        "baseline", "compare", "--pipelines", "pipelines/first.py", "--runs", "2",
        "--baseline", "baseline.json",
    )  # fmt: skip
    assert outcome.code == 0, outcome.out
    said = [re.sub(r"in \d+\.\ds$", "in Ns", line) for line in outcome.err.splitlines()]
    assert said[:2] == [
        "[twicerun] pipelines/first.py: running, 2 runs",
        "[twicerun] pipelines/first.py: 0 of 2 steps diverged, 1 more only under an amplifier, "
        "in Ns",
    ]


def test_a_baseline_measured_on_a_runner_reads_no_command_from_the_pipelines(
    repo, twicerun, monkeypatch
):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    outcome = twicerun(
        "baseline", "update", "pipelines/coins.py", "--output", "b.json", "--trials", "3",
        "--no-amplify", "--runs", "2",
    )  # fmt: skip
    assert outcome.code == 0, outcome.err
    stop, resume, wrote = outcome.out.splitlines()
    assert resume == f"::{stop.removeprefix('::stop-commands::')}::" != "::::"
    assert wrote.startswith("wrote b.json")


def test_a_path_written_differently_is_the_same_pipeline(repo, twicerun):
    update(twicerun, "./pipelines/coins.py")
    outcome, document = compare(twicerun, pipelines=str(repo / "pipelines" / "coins.py"))
    assert outcome.code == 0, outcome.out
    assert {p for p, _ in verdicts(document)} == {"pipelines/coins.py"}


def test_compare_takes_its_pipelines_as_arguments_the_way_update_does(repo, twicerun):
    """`baseline update pipelines/coins.py` and then `baseline compare pipelines/coins.py`
    was "Got unexpected extra argument": compare knew only --pipelines."""
    update(twicerun, "pipelines/coins.py")
    outcome = twicerun(
        "baseline", "compare", "pipelines/coins.py", "--baseline", "baseline.json",
        "--no-amplify", "--json", "gate.json", *RUNS,
    )  # fmt: skip
    assert outcome.code == 0, outcome.err
    document = json.loads(Path("gate.json").read_text())
    assert {p for p, _ in verdicts(document)} == {"pipelines/coins.py"}


def test_a_pipeline_file_named_like_a_glob_is_that_file(repo, twicerun):
    """`pipelines/p[1].py` was expanded as a glob, which matched nothing (or p1.py where that
    existed), and both commands refused a file that was there."""
    Path("pipelines/p[1].py").write_text(OTHER)
    Path("pipelines/p1.py").write_text(STEADY)
    baseline = update(twicerun, "pipelines/p[1].py")
    assert list(baseline["pipelines"]) == ["pipelines/p[1].py"]
    outcome, document = compare(twicerun, pipelines="pipelines/p[1].py")
    assert outcome.code == 0, outcome.err
    assert set(verdicts(document)) == {("pipelines/p[1].py", "other")}


def test_a_module_the_pipelines_import_is_not_taken_for_a_pipeline(repo, twicerun):
    """pipelines/*.py, the default, also finds the helpers.py the pipelines import, and both
    commands stopped on it ("defines no steps") until the user listed every pipeline."""
    Path("pipelines/helpers.py").write_text('QUERY = "SELECT 2 AS v"\n')
    Path("pipelines/uses.py").write_text(
        "from helpers import QUERY\n\n\ndef other(ctx):\n    ctx.write('other', QUERY)\n"
    )
    baseline = update(twicerun, "pipelines/*.py")
    assert sorted(baseline["pipelines"]) == ["pipelines/coins.py", "pipelines/uses.py"]
    outcome, document = compare(twicerun, pipelines="pipelines/*.py")
    assert outcome.code == 0, outcome.err
    assert (
        "[twicerun] pipelines/helpers.py: defines no steps, so it is taken for a module the "
        "pipelines import and not run\n"
    ) in outcome.err
    assert {p for p, _ in verdicts(document)} == {"pipelines/coins.py", "pipelines/uses.py"}
    # Named on its own it is refused, as is a glob that finds nothing else.
    for named in ("pipelines/helpers.py", "pipelines/h*.py"):
        outcome, _ = compare(twicerun, pipelines=named)
        assert outcome.code == 2
        assert "helpers.py defines no steps" in outcome.err


def test_the_gate_run_off_a_runner_leaves_nothing_in_the_working_tree(repo, twicerun, monkeypatch):
    """Without RUNNER_TEMP the gate wrote its document into the directory it ran from,
    the repository being checked."""
    monkeypatch.delenv("RUNNER_TEMP", raising=False)
    Path("pipelines/steady.py").write_text(STEADY)
    update(twicerun, "pipelines/steady.py")
    before = sorted(p.name for p in Path(".").iterdir() if p.name != ".twicerun")
    outcome = twicerun(
        "gate", "--pipelines", "pipelines/steady.py", "--baseline", "baseline.json",
        "--baseline-source", "pull-request", "--no-amplify", "--no-comment", *RUNS,
    )  # fmt: skip
    assert outcome.code == 0, outcome.err
    assert sorted(p.name for p in Path(".").iterdir() if p.name != ".twicerun") == before
    (document,) = Path(".twicerun").glob("twicerun-*-result.json")
    assert json.loads(document.read_text())["decisions"]


def test_a_pipeline_the_baseline_lacks_fails_unless_told_otherwise(repo, twicerun):
    update(twicerun, "pipelines/coins.py")
    Path("pipelines/new.py").write_text(OTHER)
    outcome, document = compare(twicerun, pipelines="pipelines/coins.py pipelines/new.py")
    assert outcome.code == 1
    assert verdicts(document)[("pipelines/new.py", "other")] == (
        "not comparable: pipeline not in the baseline"
    )
    outcome, _ = compare(
        twicerun, "--fail-on", "new,rate-up", pipelines="pipelines/coins.py pipelines/new.py"
    )
    assert outcome.code == 0


def test_a_pipeline_in_the_baseline_that_the_check_did_not_run_fails(repo, twicerun):
    Path("pipelines/new.py").write_text(OTHER)
    update(twicerun, "pipelines/coins.py", "pipelines/new.py")
    outcome, document = compare(twicerun, pipelines="pipelines/coins.py")
    assert outcome.code == 1
    assert verdicts(document)[("pipelines/new.py", "other")] == "not comparable: pipeline not run"
    (decision,) = [d for d in document["decisions"] if d["pipeline"] == "pipelines/new.py"]
    assert decision["evidence"] == [
        "pipelines/new.py is in the baseline but the check did not run it"
    ]


RAISES = 'def steady(ctx):\n    ctx.write("steady", "SELECT 1 AS v FROM nowhere")\n'
# Fine in the check's own run, where it goes random and so becomes a suspect; raises in
# every confirmation trial after it (a file beside the pipeline counts the invocations).
RAISES_ON_RERUN = """
from pathlib import Path

_COUNT = Path(__file__).with_name("invocations")
# twicerun imports a pipeline once per invocation.
_SEEN = int(_COUNT.read_text()) if _COUNT.exists() else 0
_COUNT.write_text(str(_SEEN + 1))


def steady(ctx):
    if _SEEN >= 1:
        raise RuntimeError("the warehouse connection dropped")
    ctx.write("steady", "SELECT random() AS v")
"""


def test_a_pipeline_that_raises_is_reported_with_the_others_and_exits_3(repo, twicerun):
    # The check used to stop at the raising step with exit 3 and nothing delivered: no
    # summary, no annotation, and the sticky comment an earlier push left (perhaps "no
    # step got worse") stood beside the red check.
    Path("pipelines/new.py").write_text(OTHER)
    update(twicerun, "pipelines/coins.py", "pipelines/new.py")
    Path("pipelines/coins.py").write_text(RAISES + "\n\n" + NOISY)
    outcome, document = compare(twicerun, pipelines="pipelines/coins.py pipelines/new.py")
    assert outcome.code == 3
    assert verdicts(document) == {
        ("pipelines/new.py", "other"): "unchanged",
        ("pipelines/coins.py", "steady"): "did not finish",
    }
    (failure,) = document["failures"]
    assert (failure["pipeline"], failure["step"], failure["index"], failure["line"]) == (
        "pipelines/coins.py",
        "steady",
        0,
        2,
    )
    assert failure["crashed"] and failure["during"] == ""
    assert failure["message"].startswith("step 0 steady raised in run 1 (at pipelines/coins.py:2)")
    assert outcome.out.startswith(
        "### twicerun: 1 pipeline did not finish\n\n- `steady` in `pipelines/coins.py`: did not "
        "finish (step 0 steady raised in run 1 \\(at pipelines\\/coins\\.py\\:2\\)\\: "
        "CatalogException"
    )
    # The fork flow renders from the document: the same body, and the same comment found
    # again (the pipeline that did not finish still names it).
    from twicerun.github.gate import Gate
    from twicerun.github.summary import comment_identity, summary

    again = Gate.from_document(document)
    assert summary(again, "") == outcome.out
    assert comment_identity(again) == "pipelines/coins.py pipelines/new.py"
    from twicerun.github.sarif import sarif

    (alert,) = sarif(again)["runs"][0]["results"]
    assert alert["message"]["text"].startswith(
        "steady in pipelines/coins.py: did not finish: step 0 steady raised in run 1"
    )
    assert alert["locations"][0]["physicalLocation"]["region"] == {"startLine": 2}
    assert "[twicerun] pipelines/coins.py: did not finish: step 0 steady raised" in outcome.err
    assert "[twicerun] pipelines/coins.py: the invocation directory is kept: " in outcome.err
    # fail-on none passes nothing that did not finish.
    outcome, _ = compare(
        twicerun, "--fail-on", "none", pipelines="pipelines/coins.py pipelines/new.py"
    )
    assert outcome.code == 3


def test_a_pipeline_refused_on_the_pull_request_is_reported_and_exits_2(repo, twicerun):
    update(twicerun, "pipelines/coins.py")
    Path("pipelines/coins.py").write_text(
        'def steady(ctx):\n    ctx.read("nothing_wrote_this")\n\n\n' + NOISY
    )
    outcome, document = compare(twicerun)
    assert outcome.code == 2
    assert verdicts(document) == {("pipelines/coins.py", "(the pipeline)"): "did not finish"}
    (failure,) = document["failures"]
    assert not failure["crashed"]
    assert failure["message"].startswith("ctx.read('nothing_wrote_this') in step 0 steady")
    # Not also "pipeline not run": it ran, and did not finish.
    assert "not comparable" not in outcome.out


def test_a_pipeline_that_exits_as_it_is_imported_fails_the_check_never_passes_it(repo, twicerun):
    """sys.exit(0) at the top of a pipeline the pull request changed ended the check with
    exit 0 and printed nothing past its first log line: a green required check, no step
    run."""
    update(twicerun, "pipelines/coins.py")
    source = Path("pipelines/coins.py").read_text()
    Path("pipelines/coins.py").write_text("import sys\n\n" + source + "\n\nsys.exit(0)\n")
    outcome, document = compare(twicerun)
    assert outcome.code == 2
    assert verdicts(document) == {("pipelines/coins.py", "(the pipeline)"): "did not finish"}
    (failure,) = document["failures"]
    assert "it called sys.exit(0) while being imported" in failure["message"]


def test_a_pipeline_that_raises_in_a_confirmation_trial_did_not_finish(repo, twicerun):
    update(twicerun, "pipelines/coins.py")
    Path("pipelines/coins.py").write_text(RAISES_ON_RERUN + "\n\n" + NOISY)
    outcome, document = compare(twicerun)
    assert outcome.code == 3, outcome.out
    assert verdicts(document) == {("pipelines/coins.py", "steady"): "did not finish"}
    (failure,) = document["failures"]
    assert "the warehouse connection dropped" in failure["message"]
    assert failure["during"] == "confirmation trial 1 of 3"
    assert "did not finish (in confirmation trial 1 of 3\\, step 0 steady raised" in outcome.out


def test_a_baseline_measured_with_other_runs_policy_amplifiers_or_threads_is_not_comparable(
    repo, twicerun
):
    # Another --threads was only named beside the verdicts: at one thread a step that
    # differs by parallel order goes quiet, and the check passed it as `better`.
    threads = update(twicerun, "pipelines/coins.py")["settings"]["threads"]
    other = ["--threads", str(threads + 1)]
    # Each refusal names the one setting that differs, as the option that puts it back
    # and the action input that sets it: both settings in full left the reader to diff six.
    for flags, alike in (
        (["--runs", "4"], "give --runs 3, in the action runs: 3"),
        (["--policy", "reduction-order"], "give --policy strict, in the action policy: strict"),
        (["--amplify"], "give --no-amplify, in the action amplify: false"),
        (other, "give no --threads, in the action threads left empty"),
    ):
        outcome, document = compare(twicerun, *flags)
        assert outcome.code == 1, flags
        assert set(verdicts(document).values()) == {"not comparable: measured otherwise"}
        (evidence,) = {e for d in document["decisions"] for e in d["evidence"]}
        assert evidence.endswith(
            f"; to measure as the baseline did, {alike}; or update the baseline"
        )
    assert f"threads={threads}, this check with runs=3, policy strict" in outcome.out
    # Put back as the refusal said, the check compares again.
    outcome, document = compare(twicerun)
    assert "not comparable" not in outcome.out


def test_a_check_that_compared_nothing_says_so_even_when_fail_on_lets_it_pass(repo, twicerun):
    # Its headline was "no step got worse", over two steps of which neither was compared,
    # and each repeated the pipeline's reason on a line of its own.
    update(twicerun, "pipelines/coins.py")
    outcome, _ = compare(twicerun, "--runs", "4", "--fail-on", "new,rate-up", "--format", "text")
    assert outcome.code == 0
    lines = outcome.out.splitlines()
    assert lines[0] == (
        "twicerun: no step could be compared with the baseline, which this check's fail-on "
        "lets pass"
    )
    (listed,) = [li for li in lines if li.startswith("  - ")]
    assert listed.startswith(
        "  - pipelines/coins.py, 2 steps (steady, noisy): not comparable: measured otherwise "
        "(the baseline was measured with runs=3,"
    )
    Path("pipelines/coins.py").write_text(STEADY + "\n\n" + NOISY + "\n\n" + OTHER)
    outcome, _ = compare(twicerun, "--fail-on", "new,rate-up", "--format", "text")
    assert outcome.code == 0
    assert outcome.out.splitlines()[0] == (
        "twicerun: no step got worse; 1 step could not be compared with the baseline, which "
        "this check's fail-on lets pass"
    )


def test_a_step_that_got_worse_is_in_the_headline_even_when_fail_on_lets_it_pass(repo, twicerun):
    # The headline said "no step got worse" above the step that had.
    update(twicerun, "pipelines/coins.py")
    Path("pipelines/coins.py").write_text(STEADY_NOW_NOISY + "\n\n" + NOISY)
    outcome, document = compare(twicerun, "--fail-on", "none", "--format", "text")
    assert outcome.code == 0
    assert verdicts(document)[("pipelines/coins.py", "steady")] == "new divergence"
    assert outcome.out.splitlines()[0] == (
        "twicerun: 1 step got worse, which this check's fail-on lets pass"
    )


DRIFTS = 'def drifts(ctx):\n    ctx.write("drifts", "SELECT 1.0 + random() * 1e-9 AS v")\n'
DRIFTS_AND_LOSES = (
    "def drifts(ctx):\n"
    '    ctx.write("drifts", "SELECT 1.0 + random() * 1e-9 AS v, (random() * 1e9)::BIGINT AS k")\n'
)


# At more than one thread only, as a float sum over parallel threads drifts: the bisect at
# threads=1 sees it steady, so its cause is PARALLEL_ORDER.
DRIFTS_BY_THREADS = (
    "def drifts(ctx):\n"
    '    noise = "random() * 1e-9" if ctx.threads > 1 else "0"\n'
    '    ctx.write("drifts", f"SELECT 1.0 + {noise} AS v")\n'
)


# Reading 200 rows and drifting each by a few ulps of 1.0, so every run is an answer of its
# own: inside what adding 200 terms in another order can move a sum. The pull request picks a value where the step summed one, and its
# floats move by their whole size: same spread, same class, same cause.
WITHIN_BOUND = (
    'def rows(ctx):\n    ctx.write("rows", "SELECT range AS i FROM range(200)")\n\n\n'
    "def drifts(ctx):\n"
    '    ctx.read("rows")\n'
    '    ctx.write("drifts", "SELECT i, 1.0 + random() * 1e-15 AS v FROM rows")\n'
)
PAST_BOUND = WITHIN_BOUND.replace("1.0 + random() * 1e-15", "random()")


@pytest.mark.parametrize(
    ("before", "after", "verdict", "evidence"),
    [
        # A new answer on every run, in floats alone, on every baseline trial: its score is
        # at its ceiling, so an exact column that now changes too passed as `unchanged`.
        (
            DRIFTS,
            DRIFTS_AND_LOSES,
            "new kind of difference",
            "its runs lost, added or repeated rows, or changed columns, in 0 of 5 trials on "
            "the baseline, and in 4 of 4 now",
        ),
        # The same, gone at one thread on the baseline; the pull request makes it draw
        # random() at any thread count. Same spread, same class: only the cause moved.
        (
            DRIFTS_BY_THREADS,
            DRIFTS,
            "differs at one thread now",
            "it still differed when re-executed at one thread, in 0 of 5 trials on the "
            "baseline, and in 4 of 4 now",
        ),
        # Drift a float sum's order explains on the baseline; a picked value now. Its
        # answers spread no further, it loses no rows, and one thread steadies both.
        (
            WITHIN_BOUND,
            PAST_BOUND,
            "drifts past the bound now",
            "its floats moved further than adding in another order explains, in 0 of 5 "
            "trials on the baseline, and in 4 of 4 now",
        ),
    ],
    ids=["rows", "one-thread", "outside-bound"],
)
def test_a_step_drifting_on_every_run_that_changes_kind_fails_and_passes_once_reverted(
    repo, twicerun, before, after, verdict, evidence
):
    Path("pipelines/drift.py").write_text(before)
    update(twicerun, "pipelines/drift.py")
    Path("pipelines/drift.py").write_text(after)
    outcome, document = compare(twicerun, pipelines="pipelines/drift.py")
    assert outcome.code == 1, outcome.out + outcome.err
    (decision,) = [d for d in document["decisions"] if d["name"] == "drifts"]
    assert (decision["verdict"], decision["evidence"][0]) == (verdict, evidence)
    Path("pipelines/drift.py").write_text(before)
    outcome, document = compare(twicerun, pipelines="pipelines/drift.py")
    assert outcome.code == 0, outcome.out + outcome.err
    assert verdicts(document)[("pipelines/drift.py", "drifts")] == "unchanged"


def test_a_step_added_to_a_pipeline_fails_by_default(repo, twicerun):
    update(twicerun, "pipelines/coins.py")
    Path("pipelines/coins.py").write_text(STEADY + "\n\n" + NOISY + "\n\n" + OTHER)
    outcome, document = compare(twicerun)
    assert outcome.code == 1
    assert verdicts(document)[("pipelines/coins.py", "other")] == "not comparable: step added"


def test_the_check_measures_at_the_baselines_thread_count_unless_told(repo, twicerun):
    update(twicerun, "pipelines/coins.py", "--threads", "1")
    _, document = compare(twicerun)
    assert {r["environment"]["threads"] for r in document["results"].values()} == {1}
    assert document["environment_changes"] == []
    _, document = compare(twicerun, "--threads", "2")
    assert {r["environment"]["threads"] for r in document["results"].values()} == {2}
    assert document["environment_changes"] == ["threads: 1 in the baseline, 2 now"]


def test_a_baseline_too_small_to_ever_decide_is_refused_with_the_number_it_needs(repo, twicerun):
    outcome = twicerun(
        "baseline", "update", "pipelines/coins.py", "--trials", "2", "--output", "baseline.json"
    )
    assert outcome.code == 2
    assert "2 trials are too few" in outcome.err and "needs at least 3" in outcome.err
    assert not Path("baseline.json").exists()


def test_one_confirmation_trial_is_counted_in_the_singular(repo, twicerun):
    # "with 1 confirmation trials" in the refusal and in the stamp under every decision.
    outcome = twicerun(
        "baseline", "update", "pipelines/coins.py", "--trials", "2", "--confirm", "1",
        "--output", "baseline.json",
    )  # fmt: skip
    assert outcome.code == 2
    assert "at alpha 0.05 with 1 confirmation trial over 1 pipeline;" in outcome.err
    update(twicerun, "pipelines/coins.py")
    outcome, _ = compare(twicerun, "--confirm", "1", "--format", "text")
    assert outcome.code == 2
    assert "with 1 confirmation trial;" in outcome.err
    assert "1 confirmation trial for a suspect pipeline." in outcome.out


def test_trials_can_be_added_to_a_baseline_but_only_measured_alike(repo, twicerun):
    # At the default runs, which the note below speaks of (RUNS would change its figures).
    made = twicerun(
        "baseline", "update", "pipelines/coins.py", "--output", "baseline.json",
        "--trials", "5", "--no-amplify",
    )  # fmt: skip
    assert made.code == 0, made.err
    outcome = twicerun(
        "baseline", "update", "pipelines/coins.py", "--add", "--trials", "2",
        "--output", "baseline.json", "--no-amplify",
    )  # fmt: skip
    assert outcome.code == 0, outcome.err
    # Seven trials let the gate fail a pull request, not as often as the default's.
    assert outcome.err.splitlines()[-1] == (
        "[twicerun] note: with 7 trials, a step that never differed and now gives one of two "
        "answers at random on each run fails the check 77 percent of the time (alpha 0.05, "
        "3 confirmation trials, 1 pipeline); 2 more (`twicerun baseline update --add --trials "
        "2`, same pipelines and settings) reach the 90 percent the default aims for"
    )
    document = json.loads(Path("baseline.json").read_text())
    assert len(document["trials"]) == 7
    assert all(t["written"] and t["environment"]["duckdb"] for t in document["trials"])
    before = Path("baseline.json").read_bytes()
    outcome = twicerun(
        "baseline", "update", "pipelines/coins.py", "--add", "--trials", "2", "--runs", "4",
        "--output", "baseline.json", "--no-amplify",
    )  # fmt: skip
    assert outcome.code == 2
    assert outcome.err.rstrip().endswith(
        "; to measure as the baseline did, give --runs 5; or measure a new baseline without --add"
    )
    # Another thread count was measured trial by trial and refused only then, and another
    # policy was dropped for the baseline's without a word; both are refused before any
    # trial runs now, and a count or policy left out is still the baseline's.
    threads = document["settings"]["threads"]
    for flags, alike in (
        (["--threads", str(threads + 1)], "give no --threads"),
        (["--policy", "reduction-order"], "give --policy strict"),
    ):
        outcome = twicerun(
            "baseline", "update", "pipelines/coins.py", "--add", "--trials", "1",
            "--output", "baseline.json", "--no-amplify", *flags,
        )  # fmt: skip
        assert outcome.code == 2, flags
        assert f"; to measure as the baseline did, {alike}; or measure" in outcome.err
        assert "trial 1 of 1" not in outcome.err
    assert Path("baseline.json").read_bytes() == before
    Path("pipelines/coins.py").write_text(STEADY)
    outcome = twicerun(
        "baseline", "update", "pipelines/coins.py", "--add", "--trials", "1",
        "--output", "baseline.json", "--no-amplify",
    )  # fmt: skip
    assert outcome.code == 2 and "changed since the baseline" in outcome.err
    # Refused before any trial ran: it used to measure every trial asked for first.
    assert "trial 1 of 1" not in outcome.err
    assert Path("baseline.json").read_bytes() == before
    Path("pipelines/other.py").write_text(OTHER)
    outcome = twicerun(
        "baseline", "update", "pipelines/other.py", "--add", "--trials", "1",
        "--output", "baseline.json", "--no-amplify",
    )  # fmt: skip
    assert outcome.code == 2 and "trial 1 of 1" not in outcome.err
    assert "pipelines/other.py is not in the baseline" in outcome.err


def test_trials_of_another_twicerun_are_not_added_to_a_baseline(repo, twicerun):
    """What a run measures changes between versions (0.3.0 began stressing sources), and
    --add pooled trials of 0.2.0 and 0.3.0 into one baseline without a word; the gate then
    compared a pull request with a mixture of two instruments."""
    document = update(twicerun, "pipelines/coins.py")
    for trial in document["trials"]:
        trial["environment"]["twicerun"] = "0.2.0"
    Path("baseline.json").write_text(json.dumps(document))
    before = Path("baseline.json").read_bytes()
    outcome = twicerun(
        "baseline", "update", "pipelines/coins.py", "--add", "--trials", "1",
        "--output", "baseline.json", "--no-amplify", *RUNS,
    )  # fmt: skip
    assert outcome.code == 2
    assert (
        "trials measured now would come from another instrument than the baseline's "
        f"(twicerun 0.2.0 in the baseline, {__version__} now)"
    ) in outcome.err
    # Known before anything runs, so refused then, not after every trial.
    assert "trial 1 of 1" not in outcome.err
    assert Path("baseline.json").read_bytes() == before


def test_an_old_baseline_is_refused_with_the_command_that_recreates_it(repo, twicerun):
    Path("baseline.json").write_text(json.dumps({"schema": "twicerun.baseline/1"}))
    outcome, _ = compare(twicerun)
    assert outcome.code == 2
    assert "older format (twicerun.baseline/1)" in outcome.err
    assert "twicerun baseline update pipelines/coins.py --output baseline.json" in outcome.err


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda d: d["settings"].update(runs="5"), 'settings.runs should be a whole number of at least 2, not "5"'),
        (lambda d: d["settings"].update(amplify="false"), 'settings.amplify should be true or false, not "false"'),
        (lambda d: d["settings"].update(threads=True), "settings.threads should be a whole number of at least 1, not true"),
        (lambda d: d["settings"].update(without="file order"), 'settings.without should be a list, not "file order"'),
        (lambda d: d["settings"].update(without=["ties"]), 'settings.without should be a list of amplifiers (tie collapse, thread count, row multiplication, arrival order, file order), not "ties"'),
        (lambda d: d["trials"][1]["pipelines"]["pipelines/coins.py"]["noisy"].update(answers="01234"), 'trials[1].pipelines["pipelines/coins.py"].noisy.answers should be a list, not "01234"'),
        (lambda d: d["trials"][0]["pipelines"]["pipelines/coins.py"]["noisy"].update(answers=[0, 1.5, 2, 3, 4]), 'trials[0].pipelines["pipelines/coins.py"].noisy.answers[1] should be a whole number of at least 0, not 1.5'),
        (lambda d: d["trials"][0]["pipelines"]["pipelines/coins.py"]["steady"].update(fired=9), 'trials[0].pipelines["pipelines/coins.py"].steady fired in 9 of 2 comparisons'),
    ],
    ids=["runs-a-string", "amplify-a-string", "threads-a-boolean", "without-a-string", "without-unknown", "answers-a-string", "answer-a-fraction", "fired-past-compared"],
)  # fmt: skip
def test_a_hand_edited_baseline_is_refused_naming_the_value_not_judged_or_crashed_on(
    repo, twicerun, edit, named
):
    # A value of the wrong type used to be taken as it came: a runs of "5" made every
    # step "measured otherwise" (exit 1), threads of true crashed DuckDB (exit 3), and
    # answers of "01234" were read digit by digit and judged (exit 0).
    document = update(twicerun, "pipelines/coins.py")
    edit(document)
    Path("baseline.json").write_text(json.dumps(document))
    outcome, gate = compare(twicerun)
    assert outcome.code == 2, outcome.err
    assert f"the baseline baseline.json is malformed: {named}" in outcome.err
    assert "recreate it with `twicerun baseline update pipelines/coins.py" in outcome.err
    assert gate["baseline_error"].startswith("the baseline baseline.json is malformed")


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


@pytest.fixture
def branches(repo, twicerun):
    """A base branch with a committed baseline, and a pull request branch checked out."""
    git("init", "-q", "-b", "main")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    update(twicerun, "pipelines/coins.py")
    git("add", "-A")
    git("commit", "-qm", "base")
    git("checkout", "-qb", "pr")
    return repo


def test_the_pull_request_is_judged_against_the_base_branchs_baseline(branches, twicerun):
    # The pull request makes `steady` random and "updates" the baseline to match.
    Path("pipelines/coins.py").write_text(STEADY_NOW_NOISY + "\n\n" + NOISY)
    update(twicerun, "pipelines/coins.py")
    outcome, document = compare(twicerun, "--baseline-ref", "main")
    assert outcome.code == 1
    assert verdicts(document)[("pipelines/coins.py", "steady")] == "new divergence"
    assert document["baseline_source"] == "base branch"
    assert document["baseline_moved"] == [
        "pipelines/coins.py steady: differed in 0 of 5 trials on the base branch, 5 of 5 here"
    ]
    first, second = outcome.out.splitlines()[:2]
    assert first == "> [!WARNING]"
    assert "edits the baseline it is judged against" in second
    assert "The check used the base branch's copy" in second


def test_the_pull_requests_own_copy_is_used_only_when_asked(branches, twicerun, monkeypatch):
    Path("pipelines/coins.py").write_text(STEADY_NOW_NOISY + "\n\n" + NOISY)
    update(twicerun, "pipelines/coins.py")
    git("update-ref", "refs/remotes/origin/main", "main")  # as the action's fetch leaves it
    monkeypatch.setenv("GITHUB_BASE_REF", "main")  # a pull request's run
    outcome, document = compare(twicerun, "--baseline-source", "pull-request")
    assert outcome.code == 0, outcome.out
    assert document["baseline_source"] == "pull request"
    assert document["baseline_moved"]  # still reported at the top
    assert "The check used this pull request's own copy" in outcome.out.splitlines()[1]
    assert document["changed_by"] == "pull request"


def test_a_checkout_compared_with_a_ref_is_not_called_a_pull_request(branches, twicerun):
    # With no pull request in sight (a local run naming --baseline-ref), the warning
    # said "This pull request edits the baseline" all the same.
    Path("pipelines/coins.py").write_text(STEADY_NOW_NOISY + "\n\n" + NOISY)
    update(twicerun, "pipelines/coins.py")
    outcome, document = compare(twicerun, "--baseline-ref", "main")
    assert document["changed_by"] == "checkout"
    assert "**This checkout edits the baseline it is judged against.**" in outcome.out
    assert "pull request" not in outcome.out.splitlines()[1]


def test_the_base_branch_ref_comes_from_the_pull_request_event(branches, twicerun, monkeypatch):
    git("update-ref", "refs/remotes/origin/main", "main")  # as the action's fetch leaves it
    monkeypatch.setenv("GITHUB_BASE_REF", "main")
    outcome, document = compare(twicerun)
    assert outcome.code == 0, outcome.err
    assert document["baseline_source"] == "base branch"
    assert document["baseline_moved"] == []


def test_json_dash_prints_the_gate_document_instead_of_the_decision(repo, twicerun):
    # It wrote a file named "-" and printed the decision, unlike every other verb's --json -.
    update(twicerun, "pipelines/coins.py")
    outcome = twicerun(
        "baseline", "compare", "--pipelines", "pipelines/coins.py", "--baseline",
        "baseline.json", "--no-amplify", "--json", "-", *RUNS,
    )  # fmt: skip
    assert outcome.code == 0, outcome.err
    assert json.loads(outcome.out)["schema"].startswith("twicerun.gate/")
    assert not Path("-").exists()


def test_a_merge_group_is_judged_by_the_baseline_at_the_commit_it_is_built_on(
    branches, twicerun, monkeypatch, tmp_path
):
    """GitHub sets no GITHUB_BASE_REF on merge_group; the group's own copy of the
    baseline, rewritten by a queued pull request, must not be what judges it."""
    base_sha = subprocess.run(
        ["git", "rev-parse", "main"], capture_output=True, text=True, check=True
    ).stdout.strip()
    Path("pipelines/coins.py").write_text(STEADY_NOW_NOISY + "\n\n" + NOISY)
    update(twicerun, "pipelines/coins.py")
    event = tmp_path / "merge_group.json"
    event.write_text(json.dumps({"merge_group": {"base_sha": base_sha}}))
    monkeypatch.setenv("GITHUB_EVENT_NAME", "merge_group")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    outcome, document = compare(twicerun)
    assert outcome.code == 1, outcome.err
    assert verdicts(document)[("pipelines/coins.py", "steady")] == "new divergence"
    assert document["baseline_source"] == "base branch"

    event.write_text(json.dumps({"merge_group": {"head_sha": base_sha}}))
    outcome, _ = compare(twicerun)
    assert outcome.code == 2
    assert "merge_group event without a merge_group.base_sha" in outcome.err
    assert "pass --baseline-ref" in outcome.err

    monkeypatch.delenv("GITHUB_EVENT_PATH")
    outcome, _ = compare(twicerun)
    assert outcome.code == 2
    assert "GITHUB_EVENT_NAME is merge_group, but GITHUB_EVENT_PATH names no event" in outcome.err


def test_a_base_branch_without_a_baseline_is_bad_input_naming_the_way_out(branches, twicerun):
    tree = (
        subprocess.run(["git", "mktree"], input=b"", capture_output=True, check=True)
        .stdout.decode()
        .strip()
    )
    commit = (
        subprocess.run(["git", "commit-tree", tree, "-m", "empty"], capture_output=True, check=True)
        .stdout.decode()
        .strip()
    )
    git("update-ref", "refs/heads/empty", commit)
    outcome, document = compare(twicerun, "--baseline-ref", "empty")
    assert outcome.code == 2
    assert "the base branch (empty) has no baseline at baseline.json" in outcome.err
    assert document["baseline_moved"] == ["the pull request adds the baseline file"]


def test_an_unfetched_base_branch_is_bad_input_saying_what_to_fetch(branches, twicerun):
    outcome, _ = compare(twicerun, "--baseline-ref", "origin/nowhere")
    assert outcome.code == 2
    assert "git fetch origin nowhere" in outcome.err


def test_a_step_removed_or_renamed_fails_by_default(repo, twicerun):
    update(twicerun, "pipelines/coins.py")
    Path("pipelines/coins.py").write_text(STEADY)
    outcome, document = compare(twicerun)
    assert outcome.code == 1
    assert verdicts(document)[("pipelines/coins.py", "noisy")] == "not comparable: step removed"
    renamed = NOISY.replace("def noisy", "def noisier")
    Path("pipelines/coins.py").write_text(STEADY + "\n\n" + renamed)
    outcome, document = compare(twicerun)
    assert outcome.code == 1
    (decision,) = [d for d in document["decisions"] if d["name"] == "noisier"]
    assert (decision["verdict"], decision["renamed_from"]) == (
        "not comparable: step renamed",
        "noisy",
    )


def test_a_missing_pipeline_is_refused_before_any_pipeline_runs(repo, twicerun):
    """A typo in the second path used to surface only after the first pipeline's trial
    had run (and `baseline update` had printed "trial 1 of 5")."""
    outcome = twicerun(
        "baseline", "update", "pipelines/coins.py", "pipelines/typo.py",
        "--output", "baseline.json", *FAST,
    )  # fmt: skip
    assert outcome.code == 2
    assert outcome.err.splitlines() == [
        "twicerun: pipeline file pipelines/typo.py does not exist "
        "(Python files in pipelines: coins.py)"
    ]
    assert not Path(".twicerun").exists()

    update(twicerun, "pipelines/coins.py")
    runs_before = invocations()
    outcome, _ = compare(twicerun, pipelines="pipelines/coins.py pipelines/typo.py")
    assert outcome.code == 2
    assert "pipelines/typo.py does not exist" in outcome.err
    assert invocations() == runs_before

    # A file that does not compile is the pull request's content, not a wrong path: the
    # check reports it as a pipeline that did not finish, beside the others, and exits 2.
    Path("pipelines/typo.py").write_text("def broken(ctx)\n    pass\n")
    outcome, document = compare(twicerun, pipelines="pipelines/coins.py pipelines/typo.py")
    assert outcome.code == 2
    (failure,) = document["failures"]
    assert (failure["pipeline"], failure["line"], failure["crashed"]) == (
        "pipelines/typo.py",
        1,
        False,
    )
    assert failure["message"] == (
        "could not import pipelines/typo.py: SyntaxError at line 1: expected ':'"
    )
    assert verdicts(document)[("pipelines/coins.py", "steady")] == "unchanged"


def test_a_step_emptied_by_the_pull_request_fails_the_check(repo, twicerun):
    update(twicerun, "pipelines/coins.py")
    Path("pipelines/coins.py").write_text("def steady(ctx):\n    pass\n\n\n" + NOISY)
    outcome, document = compare(twicerun)
    assert outcome.code == 1
    assert verdicts(document)[("pipelines/coins.py", "steady")] == (
        "not comparable: nothing compared now"
    )


def test_a_step_that_breaks_under_the_amplifiers_fails_the_check(repo, twicerun):
    """Quiet in the loop both times, but now raising on the amplifiers' doubled rows: the
    baseline's stress went unapplied, which is not `unchanged`."""
    inputs = 'def inputs(ctx):\n    ctx.write("t", "SELECT range AS id FROM range(100)")\n'
    counted = (
        "def counted(ctx):\n"
        "    rows = ctx.read('t').count('*').fetchall()[0][0]\n"
        "{guard}"
        "    ctx.write('n', 'SELECT count(*) AS n FROM t')\n"
    )
    Path("pipelines/coins.py").write_text(inputs + "\n\n" + counted.format(guard=""))
    outcome = twicerun(
        "baseline", "update", "pipelines/coins.py", "--output", "baseline.json",
        "--trials", "5", "--runs", "2",
    )  # fmt: skip
    assert outcome.code == 0, outcome.err
    guard = "    if rows > 100:\n        raise ValueError('more rows than expected')\n"
    Path("pipelines/coins.py").write_text(inputs + "\n\n" + counted.format(guard=guard))
    outcome = twicerun(
        "baseline", "compare", "--pipelines", "pipelines/coins.py", "--baseline",
        "baseline.json", "--runs", "2", "--json", "gate.json",
    )  # fmt: skip
    assert outcome.code == 1, outcome.out + outcome.err
    document = json.loads(Path("gate.json").read_text())
    assert verdicts(document)[("pipelines/coins.py", "counted")] == (
        "not comparable: an amplifier failed now"
    )


def test_a_pipeline_path_with_a_space_is_matched_by_the_glob_the_error_suggests(repo, twicerun):
    Path("my pipelines").mkdir()
    Path("my pipelines/p.py").write_text(STEADY)
    outcome = twicerun("baseline", "update", "my pipelines/p.py", "--output", "b.json", *FAST)
    assert outcome.code == 2
    assert outcome.err.splitlines() == [
        "twicerun: 'my pipelines/p.py' is one file, but pipelines are separated by spaces; "
        "match a path with a space in it by a glob, such as 'my?pipelines/p.py'"
    ]
    outcome = twicerun("baseline", "update", "my?pipelines/p.py", "--output", "b.json", *FAST)
    assert outcome.code == 0, outcome.err
    assert list(json.loads(Path("b.json").read_text())["pipelines"]) == ["my pipelines/p.py"]


def test_a_directory_of_pipelines_names_what_its_glob_would(tmp_path, monkeypatch):
    """`baseline update pipelines/` was refused as "a directory; pass the pipeline's Python
    file", for the directory the default glob reads. It names the same pipelines as
    pipelines/*.py, under the same keys, its modules skipped; nothing below it is read."""
    from twicerun.cli.trials import expand_pipelines
    from twicerun.errors import UsageError

    monkeypatch.chdir(tmp_path)
    Path("pipelines/deeper").mkdir(parents=True)
    Path("pipelines/b.py").write_text(STEADY)
    Path("pipelines/a.py").write_text(STEADY)
    Path("pipelines/helpers.py").write_text("RATE = 2\n")
    Path("pipelines/deeper/c.py").write_text(STEADY)
    globbed = expand_pipelines(["pipelines/*.py"])
    assert globbed == ["pipelines/a.py", "pipelines/b.py"]
    assert expand_pipelines(["pipelines/"]) == expand_pipelines(["pipelines"]) == globbed
    Path("empty").mkdir()
    with pytest.raises(UsageError, match="no pipeline matches 'empty'"):
        expand_pipelines(["empty"])


def test_compare_prints_text_when_asked_and_markdown_by_default_off_a_terminal(repo, twicerun):
    update(twicerun, "pipelines/coins.py")
    markdown, _ = compare(twicerun)
    assert markdown.out.startswith("### twicerun: no step got worse\n")
    text, _ = compare(twicerun, "--format", "text")
    lines = text.out.splitlines()
    assert lines[0] == "twicerun: no step got worse"
    assert lines[lines.index("Every step (2)") + 2].split() == [
        "pipeline", "step", "verdict", "baseline", "now", "p", "status", "classes", "cause",
    ]  # fmt: skip
    assert not any(line.startswith("|") or "\\" in line for line in lines)


def test_a_trial_that_stops_says_no_baseline_was_written_and_leaves_the_file_as_it_was(
    repo, twicerun
):
    """The step's error was all `baseline update` said; whether the committed file had
    been touched was left to guess."""
    update(twicerun, "pipelines/coins.py")
    before = Path("baseline.json").read_bytes()
    # The step raises from its sixth call on: trial 1's five runs pass, trial 2 stops.
    Path("pipelines/coins.py").write_text(
        "from pathlib import Path\n\n\n"
        "def steady(ctx):\n"
        "    calls = Path('calls')\n"
        "    calls.write_text(str(int(calls.read_text() if calls.exists() else 0) + 1))\n"
        "    if int(calls.read_text()) > 5:\n"
        "        raise RuntimeError('the landing bucket timed out')\n"
        '    ctx.write("steady", "SELECT 1 AS v")\n'
    )
    outcome = twicerun(
        "baseline", "update", "pipelines/coins.py", "--output", "baseline.json", *FAST
    )
    assert outcome.code == 3, outcome.err
    said = [line for line in outcome.err.splitlines() if line.startswith("twicerun:")]
    assert said[0] == (
        "twicerun: trial 2 of 5 stopped, so no baseline was written: baseline.json is as it was"
    )
    assert "RuntimeError: the landing bucket timed out" in said[1]
    assert Path("baseline.json").read_bytes() == before


def test_a_pipeline_a_glob_finds_is_imported_as_often_as_one_named(repo, twicerun):
    """Telling a pipeline from a module the pipelines import imported every file a glob
    found, so a pipeline's top-level code ran once more than when it was named: twice per
    invocation, where the contract says once."""
    log = repo / "imports.log"
    Path("pipelines/counted.py").write_text(
        f"with open({str(log)!r}, 'a') as f:\n    f.write('imported\\n')\n\n\n" + STEADY
    )
    counts = {}
    for given in ("pipelines/counted.py", "pipelines/count*.py"):
        log.unlink(missing_ok=True)
        outcome = twicerun(
            "baseline", "update", given, "--output", "counted.json", *FAST
        )  # fmt: skip
        assert outcome.code == 0, outcome.err
        counts[given] = log.read_text().count("imported")
    assert counts["pipelines/count*.py"] == counts["pipelines/counted.py"] > 0


def test_a_baseline_measured_without_an_amplifier_is_checked_without_it(repo, twicerun):
    """--without is a setting like --runs: the baseline records it (only when used, so a
    baseline measured with every amplifier is written as before), a check measured
    otherwise is not comparable, and --add keeps it."""
    assert "without" not in update(twicerun, "pipelines/coins.py")["settings"]
    made = twicerun(
        "baseline", "update", "pipelines/coins.py", "--output", "baseline.json",
        "--trials", "5", "--amplify", "--without", "file-order", *RUNS,
    )  # fmt: skip
    assert made.code == 0, made.err
    assert json.loads(Path("baseline.json").read_text())["settings"]["without"] == ["file order"]

    outcome, document = compare(twicerun, "--amplify")
    assert outcome.code == 1
    assert set(verdicts(document).values()) == {"not comparable: measured otherwise"}
    assert "without file order, this check with runs=3" in outcome.out
    assert "give --without file-order, in the action without: file-order; or" in outcome.out
    outcome, document = compare(twicerun, "--amplify", "--without", "file-order")
    assert outcome.code == 0, outcome.out
    assert "not comparable" not in outcome.out

    refused = twicerun(
        "baseline", "update", "pipelines/coins.py", "--output", "baseline.json", "--add",
        "--trials", "1", "--amplify", "--without", "arrival-order", *RUNS,
    )  # fmt: skip
    assert refused.code == 2
    assert "add trials with the same --without, or leave it out" in refused.err
    added = twicerun(
        "baseline", "update", "pipelines/coins.py", "--output", "baseline.json", "--add",
        "--trials", "1", "--amplify", *RUNS,
    )  # fmt: skip
    assert added.code == 0, added.err
    baseline = json.loads(Path("baseline.json").read_text())
    assert (len(baseline["trials"]), baseline["settings"]["without"]) == (6, ["file order"])
