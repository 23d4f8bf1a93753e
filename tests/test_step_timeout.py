"""--step-timeout: a step that hangs is stopped and reported as crashed, never waited on,
and a slower run is never counted as a different answer.

Each pipeline here hangs for far longer than the test is allowed to take, so a timeout
that did not stop it would show as a test that never ends, not one that passes.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

# Sleeps in Python, and swallows the Exception a careless step would: the stop must get
# through anyway.
PYTHON_HANG = """
import time


def inputs(ctx):
    ctx.write("t", "SELECT range AS v FROM range(10)")


def hangs(ctx):
    ctx.read("t")
    {condition}
        try:
            time.sleep(120)
        except Exception:
            pass
    ctx.write("n", "SELECT count(*) AS n FROM t")
"""

# A query DuckDB runs for minutes without once looking at Python's signals.
QUERY_HANG = """
def hangs(ctx):
    ctx.sql("CREATE TABLE x AS SELECT sum(range) AS s FROM range(1000000000000)")
    ctx.write("n", "SELECT * FROM x")
"""


def outcome_of(run_dir) -> str:
    (invocation,) = [p for p in run_dir.iterdir() if (p / "invocation.json").exists()]
    return json.loads((invocation / "invocation.json").read_text())["outcome"]


@pytest.mark.parametrize(
    ("source", "line"),
    [
        (PYTHON_HANG.replace("{condition}", "if True:"), 12),
        (QUERY_HANG, 2),
    ],
    ids=["python", "duckdb-query"],
)
def test_a_step_that_hangs_is_stopped_and_counted_as_crashed(
    write_pipeline, twicerun, run_dir, source, line
):
    path = write_pipeline(source)
    started = time.monotonic()
    outcome = twicerun("run", path, "--runs", "2", "--step-timeout", "0.5")
    assert time.monotonic() - started < 30
    assert outcome.code == 3, outcome.err
    assert outcome.err.startswith(
        f"twicerun: step {source.count('def ') - 1} hangs was stopped in run 1 (at {path}:{line}): "
        f"it ran longer than --step-timeout 0.5s\n"
    )
    assert outcome_of(run_dir) == "failed"  # and its directory kept, as any crash's
    # Nothing of the timeout is left behind in the process that ran it.
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL


def test_a_step_within_its_timeout_is_untouched(write_pipeline, twicerun):
    path = write_pipeline(PYTHON_HANG.replace("{condition}", "if False:"))
    outcome = twicerun("run", path, "--runs", "3", "--step-timeout", "30", "--json", "-")
    assert outcome.code == 0, outcome.err
    assert [s["fired"] for s in outcome.json()["steps"]] == [0, 0]


def test_a_step_that_hangs_only_under_an_amplifier_fails_that_amplifier(write_pipeline, twicerun):
    """Stopped under the raised thread count: the step went without that stress test
    (exit 5), and the loop's measurements stand."""
    path = write_pipeline(PYTHON_HANG.replace("{condition}", "if ctx.threads != 2:"))
    outcome = twicerun(
        "run", path, "--runs", "2", "--threads", "2", "--amplify", "--step-timeout", "0.5",
        "--json", "-",
    )  # fmt: skip
    assert outcome.code == 5, outcome.err
    step = outcome.json()["steps"][1]
    assert step["fired"] == 0
    errors = [s["error"] for s in step["amplifiers"] if s.get("error")]
    assert errors and all(
        "was stopped in run 1" in e and "--step-timeout 0.5s" in e for e in errors
    ), errors


def test_a_later_run_that_times_out_under_file_order_is_no_answer(write_pipeline, twicerun):
    """Under file order, a later run that raises where run 1 did not is an answer: its rows
    became an error. A run stopped for time is not one; it was counted as the step firing,
    STABLE_ON_THIS_INPUT and exit 4, when all it showed was a slower run."""
    (write_pipeline("a,b\n1,2\n", "one.csv"), write_pipeline("a,b\n3,4\n", "two.csv"))
    path = write_pipeline(
        """
        import time

        calls = []


        def load(ctx):
            ctx.source("parts", [__file__.replace("pipeline.py", n) for n in ["one.csv", "two.csv"]])
            calls.append(ctx.threads)
            # The loop's two runs, then file order's (the only amplifier left): its
            # second, the list reversed, is slow.
            if calls.count(2) == 4:
                time.sleep(120)
            ctx.write("n", "SELECT sum(a) AS a FROM parts")
        """
    )
    outcome = twicerun(
        "run", path, "--runs", "2", "--threads", "2", "--amplify", "--step-timeout", "0.5",
        "--without", "thread-count", "--without", "row-multiplication", "--without",
        "arrival-order", "--without", "tie-collapse", "--json", "-",
    )  # fmt: skip
    assert outcome.code == 5, outcome.err
    (series,) = [s for s in outcome.json()["steps"][0]["amplifiers"] if s["kind"] == "file order"]
    assert series["runs"] == 1
    assert "was stopped in run 2" in series["error"]


def test_a_timeout_must_be_positive(write_pipeline, twicerun):
    path = write_pipeline(QUERY_HANG)
    # nan was taken, and never stopped anything; inf is no limit, which leaving it out says.
    for value in ["0", "-1", "nan", "inf"]:
        outcome = twicerun("run", path, "--step-timeout", value)
        assert outcome.code == 2
        assert "--step-timeout" in outcome.err


def test_the_gate_takes_the_timeout_from_the_action_and_fails_a_hang(
    write_pipeline, twicerun, run_dir, monkeypatch
):
    """The action's step-timeout input arrives as TWICERUN_STEP_TIMEOUT: a hanging step is
    a pipeline that did not finish, which fails the check; never a silent pass."""
    path = write_pipeline(PYTHON_HANG.replace("{condition}", "if True:"))
    monkeypatch.setenv("TWICERUN_STEP_TIMEOUT", "0.5")
    outcome = twicerun(
        "baseline", "compare", path, "--baseline", path.with_name("none.json"), "--runs", "2",
        "--no-amplify", "--run-dir", run_dir, "--format", "text",
    )  # fmt: skip
    assert outcome.code == 3, outcome.err
    assert "hangs was stopped in run 1" in outcome.err
    assert "did not finish" in outcome.out


# Counts its executions in a file beside it, across processes; slow on the one named.
SLOW_ON = """
import os, pathlib, time

COUNT = pathlib.Path(__file__).with_name("count")


def a(ctx):
    ctx.write("t", "SELECT 1 AS v")


def b(ctx):
    ctx.read("t")
    n = int(COUNT.read_text()) + 1 if COUNT.exists() else 1
    COUNT.write_text(str(n))
    if n == int(os.environ.get("SLOW_ON", "0")):
        time.sleep(120)
    ctx.write("u", "SELECT v FROM t")
"""


@pytest.mark.parametrize(("execution", "where"), [(2, "this process"), (3, "the second process")])
def test_audit_stops_a_step_that_hangs_in_either_process(
    write_pipeline, twicerun, monkeypatch, execution, where
):
    """b runs once in the ordinary run, once in the audit's first run and once in the
    second process; the audit verdict of a is printed before the error."""
    path = write_pipeline(SLOW_ON)
    monkeypatch.setenv("SLOW_ON", str(execution))
    # Execution 1 is the ordinary run's; the audit's are 2 (here) and 3 (the other process).
    outcome = twicerun("audit", path, "--step-timeout", "0.5")
    assert outcome.code == 3, (where, outcome.err)
    assert outcome.out.startswith("deterministic")
    # "before step 1 b raised and stopped the audit" said it raised.
    assert (
        f"{path}: deterministic for the steps above, audited before step 1 b stopped the audit ("
        in outcome.out
    )
    assert "step 1 b was stopped in run" in outcome.err
    assert "it ran longer than --step-timeout 0.5s" in outcome.err


# The same, counting in a file away from the pipeline, named by a variable that holds
# the same value when the run is recorded and when it is reproduced: a file beside the
# pipeline that the step reads, or a variable that changed, would be named by reproduce
# as what changed (docs/verdicts.md), and the step would not be re-executed at all.
SLOW_ON_ELSEWHERE = SLOW_ON.replace(
    'pathlib.Path(__file__).with_name("count")', 'pathlib.Path(os.environ["COUNT_FILE"])'
)


def test_reproduce_stops_a_step_that_hangs(
    write_pipeline, twicerun, run_dir, monkeypatch, tmp_path_factory
):
    path = write_pipeline(SLOW_ON_ELSEWHERE)
    count = tmp_path_factory.mktemp("elsewhere") / "count"
    monkeypatch.setenv("COUNT_FILE", str(count))
    monkeypatch.setenv("SLOW_ON", "1")
    count.write_text("100")  # the recorded run's executions are the 101st and 102nd
    assert twicerun("run", path, "--runs", "2").code == 0
    (invocation,) = [p for p in run_dir.iterdir() if p.is_dir()]
    count.write_text("0")
    outcome = twicerun("reproduce", invocation, "--step-timeout", "0.5", "--json", "-")
    assert outcome.code == 4, outcome.err
    a, b = outcome.json()["steps"]
    assert a["verdict"] == "REPRODUCED"
    assert b["verdict"] == "COULD NOT CHECK"
    assert b["detail"] == (
        f"it ran longer than --step-timeout 0.5s (at {path}:15), so nothing was compared"
    )
