"""A step that exits crashed; Ctrl-C is an interrupt wherever it lands, and deletes nothing.

The interrupts are real SIGINTs to this process, sent from inside a step (by a
timer, so that one lands while DuckDB is executing a query): DuckDB 2.0.1 reports
those as a failed query, which the runner must not mistake for a crash.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# A query that takes a good fraction of a second, so a timer can land inside it.
SLOW = "SELECT sum(hash(i) % 7) AS n FROM range(200000000) r(i)"

INTERRUPT_IN_QUERY = f"""
import os, signal, threading


def inputs(ctx):
    ctx.write("t", "SELECT range AS v FROM range(10)")


def slow(ctx):
    ctx.read("t")
    if {{condition}}:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        for _ in range(20):
            ctx.sql("{SLOW}").fetchall()
    ctx.write("n", "SELECT count(*) AS n FROM t")
"""


def whole_and_judgeable(twicerun, run_dir: Path, earlier: str) -> None:
    """No file under a final name is half-written, and the earlier run still judges."""
    import pyarrow.parquet as pq

    for path in run_dir.rglob("*"):
        if path.is_file() and ".tmp-" not in path.name:
            if path.suffix == ".parquet":
                pq.read_metadata(path)
            elif path.suffix == ".json":
                json.loads(path.read_text())
    assert twicerun("judge", run_dir / earlier).code == 0


def invocations(run_dir: Path) -> dict[str, str]:
    return {
        p.name: json.loads((p / "invocation.json").read_text())["outcome"]
        for p in sorted(run_dir.iterdir())
        if (p / "invocation.json").exists()
    }


@pytest.mark.parametrize("how", ["sys.exit(0)", "sys.exit('bye')", "raise SystemExit(1)"])
def test_a_step_that_exits_is_a_step_that_crashed(write_pipeline, twicerun, run_dir, how):
    path = write_pipeline(
        f"import sys\n\n\ndef a(ctx):\n    ctx.write('x', 'SELECT 1 AS v')\n\n\n"
        f"def b(ctx):\n    {how}\n"
    )
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 3
    assert "step 1 b" in outcome.err and "SystemExit" in outcome.err
    assert list(invocations(run_dir).values()) == ["failed"]


def test_a_step_that_exits_fails_the_baseline_and_the_gate_too(
    write_pipeline, twicerun, tmp_path, monkeypatch
):
    # The baseline commands keep their failed invocations in ./.twicerun: here, not
    # in whatever directory the suite was started from.
    monkeypatch.chdir(tmp_path)
    path = write_pipeline("import sys\n\n\ndef b(ctx):\n    sys.exit(0)\n")
    out = tmp_path / "baseline.json"
    outcome = twicerun("baseline", "update", path, "--trials", "3", "--output", out)
    assert outcome.code == 3 and not out.exists()
    outcome = twicerun("baseline", "compare", "--pipelines", str(path), "--baseline", out)
    assert outcome.code == 3
    kept = [p for p in (tmp_path / ".twicerun").iterdir() if p.is_dir()]
    assert len(kept) == 2  # kept, as a failure is


def test_ctrl_c_during_a_query_in_the_loop_is_an_interrupt_and_deletes_nothing(
    write_pipeline, twicerun, run_dir, monkeypatch
):
    path = write_pipeline(INTERRUPT_IN_QUERY.replace("{condition}", "os.environ.get('STOP')"))
    assert twicerun("run", path, "--runs", "2").code == 0
    (earlier,) = invocations(run_dir)
    monkeypatch.setenv("STOP", "1")
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 130, outcome.err
    assert "interrupted" in outcome.err and "raised" not in outcome.err
    states = invocations(run_dir)
    assert states[earlier] == "completed"
    assert sorted(states.values()) == ["completed", "interrupted"]
    whole_and_judgeable(twicerun, run_dir, earlier)


def test_ctrl_c_under_an_amplifier_is_an_interrupt_not_an_amplifier_failure(
    write_pipeline, twicerun, run_dir, monkeypatch
):
    # The step interrupts only at a thread count other than the run's: under the
    # thread-count amplifier, after the loop has finished.
    path = write_pipeline(
        INTERRUPT_IN_QUERY.replace("{condition}", "os.environ.get('STOP') and ctx.threads != 2")
    )
    assert twicerun("run", path, "--runs", "2", "--threads", "2", "--amplify").code == 0
    (earlier,) = invocations(run_dir)
    monkeypatch.setenv("STOP", "1")
    outcome = twicerun("run", path, "--runs", "2", "--threads", "2", "--amplify")
    assert outcome.code == 130, outcome.err + outcome.out
    states = invocations(run_dir)
    # Nothing ended "completed", so retention deleted nothing.
    assert states[earlier] == "completed"
    assert sorted(states.values()) == ["completed", "interrupted"]
    whole_and_judgeable(twicerun, run_dir, earlier)


TERMINATED_IN_QUERY = f"""
import os, pathlib


def inputs(ctx):
    ctx.write("t", "SELECT range AS v FROM range(10)")


def slow(ctx):
    ctx.read("t")
    pathlib.Path(os.environ["STARTED"]).touch()
    for _ in range(40):
        ctx.sql("{SLOW}").fetchall()
    ctx.write("n", "SELECT count(*) AS n FROM t")
"""


def signalled_in_a_step(path: Path, tmp_path: Path, verb: str, sent: str, settle: float):
    """Run `verb` on `path` in a process of its own, send it `sent` `settle` seconds after
    the step wrote the STARTED marker, and return its exit code, its stderr, the seconds
    it took to exit after the signal, and its run directory."""
    import os
    import signal
    import subprocess
    import sys
    import time

    started, run_dir = tmp_path / "started", tmp_path / "runs"
    # Its own temporary directory, for a test to see what a signal left in it.
    (tmp_path / "tmp").mkdir(exist_ok=True)
    flags = ["--runs", "2", "--no-amplify", "--run-dir", str(run_dir)] if verb == "run" else []
    process = subprocess.Popen(
        [sys.executable, "-m", "twicerun", verb, str(path), *flags],
        env={**os.environ, "STARTED": str(started), "TMPDIR": str(tmp_path / "tmp")},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
            time.sleep(0.05)
        time.sleep(settle)  # inside the query
        process.send_signal(getattr(signal, sent))
        signalled = time.monotonic()
        _, err = process.communicate(timeout=120)
        took = time.monotonic() - signalled
    finally:
        process.kill()
    return process.returncode, err, took, run_dir


def test_sigterm_is_an_interrupt_that_exits_143_and_keeps_the_invocation(write_pipeline, tmp_path):
    # `timeout`, `docker stop` and Kubernetes send SIGTERM. It ended the process where it
    # stood (the shell's 143, no word), leaving the invocation `running` until a later
    # one reaped it as killed.
    path = write_pipeline(TERMINATED_IN_QUERY)
    code, err, _, run_dir = signalled_in_a_step(path, tmp_path, "run", "SIGTERM", 0.3)
    assert code == 143, err
    (directory,) = invocations(run_dir)
    assert err.strip().splitlines()[-1] == (
        f"twicerun: terminated (SIGTERM); the invocation directory is kept: {run_dir / directory}"
    )
    assert invocations(run_dir) == {directory: "interrupted"}


STARTS_A_POOL = """
import multiprocessing


def _double(v):
    return v * 2


def inputs(ctx):
    ctx.write("t", "SELECT range AS v FROM range(10)")


def doubled(ctx):
    values = [v for (v,) in ctx.read("t").order("v").fetchall()]
    # Leaving the block terminates the workers, with SIGTERM.
    with multiprocessing.get_context("{method}").Pool(2) as pool:
        doubled = pool.map(_double, values)
    ctx.write("d", f"SELECT unnest({{doubled}}) AS d")
"""


@pytest.mark.parametrize(
    "verb, method",
    [
        ("run", "fork"),
        ("run", "spawn"),
        ("run", "forkserver"),
        ("audit", "spawn"),
        ("audit", "fork"),
    ],
)
def test_a_step_with_a_pool_of_worker_processes_runs_as_it_would_on_its_own(
    write_pipeline, tmp_path, verb, method
):
    # Forked workers inherited twicerun's SIGTERM handler and the pipe its waker reads:
    # the SIGTERM a pool sends its workers on leaving `with` reached twicerun as its own,
    # and `run` ended a correct step's invocation as terminated (exit 143, a traceback
    # per worker). Spawned workers (macOS's default; forkserver is Linux's from Python
    # 3.14) could not import the pipeline by the name twicerun gave it, so each died and
    # the pool waited for ever. A forked worker the pool terminated as it started lived
    # on (test_a_signal_sent_to_a_forked_child_before_it_is_set_up_is_the_child_s_own),
    # and `audit` with fork hung in about one run in a hundred.
    import subprocess
    import sys

    path = write_pipeline(STARTS_A_POOL.format(method=method))
    flags = ["--runs", "2", "--run-dir", str(tmp_path / "runs")] if verb == "run" else []
    done = subprocess.run(
        [sys.executable, "-m", "twicerun", verb, str(path), *flags],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert ("0 of 2 steps diverged" if verb == "run" else ": deterministic (2 steps") in done.stdout


FORKS_A_CHILD = """
import multiprocessing, time


def inputs(ctx):
    ctx.write("t", "SELECT 1 AS v")


def forks(ctx):
    ctx.read("t")
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(3,))
    child.start()
    child.join(15)
    ctx.write("code", f"SELECT {child.exitcode} AS code")
"""

# A hook that runs in a forked child before twicerun's own (hooks run in the order they
# were registered, and Python imports this one before twicerun, in both of an audit's
# processes), sending the child SIGTERM: as a pool does to a worker that is still
# starting when its map is over.
SIGNALLED_WHILE_FORKING = """
import os, signal
os.register_at_fork(after_in_child=lambda: os.kill(os.getpid(), signal.SIGTERM))
"""


@pytest.mark.parametrize("verb", ["run", "audit"])
def test_a_signal_sent_to_a_forked_child_before_it_is_set_up_is_the_child_s_own(
    write_pipeline, tmp_path, verb
):
    # The child started with twicerun's handler, which a hook of twicerun's then took
    # off. A SIGTERM in between reached that handler: it wrote the signal into the pipe
    # twicerun's waker reads (twicerun ended as terminated, exit 143), and the handler was
    # gone when Python came to run it, so the child lived on. A pool's worker left alive
    # so waited for ever, and `audit` with a forked pool hung in about one run in a
    # hundred. The child must die of the signal, as it would outside twicerun.
    import os
    import subprocess
    import sys

    import duckdb

    path = write_pipeline(FORKS_A_CHILD)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SIGNALLED_WHILE_FORKING)
    flags = ["--runs", "2", "--no-amplify", "--run-dir", str(tmp_path / "runs"), "--keep-copies"]
    if verb == "audit":
        flags = ["--json", str(tmp_path / "audit.json")]
    done = subprocess.run(
        [sys.executable, "-m", "twicerun", verb, str(path), *flags],
        capture_output=True, text=True, timeout=90, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(hooks)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    if verb == "run":
        (code,) = (tmp_path / "runs").glob("2*/loop/1/01-forks/code.parquet")
        assert duckdb.sql(f"SELECT code FROM '{code}'").fetchall() == [(-15,)]
    else:
        audited = json.loads((tmp_path / "audit.json").read_text())
        assert audited["verdict"] == "deterministic", audited


# One query that runs for many minutes, executed as a step executes SQL: no Python code
# runs until it returns, so a signal's handler cannot run either.
LONG_QUERY = """
import os, pathlib


def slow(ctx):
    pathlib.Path(os.environ["STARTED"]).touch()
    ctx.sql("CREATE TABLE t AS SELECT sum(range) AS s FROM range(1000000000000)")
    ctx.write("n", "SELECT * FROM t")
"""


@pytest.mark.parametrize(
    ("verb", "sent", "code"),
    [("run", "SIGINT", 130), ("run", "SIGTERM", 143), ("audit", "SIGINT", 130)],
)
def test_a_signal_stops_a_long_query_at_once_not_when_it_ends(
    write_pipeline, tmp_path, verb, sent, code
):
    """Ctrl-C or SIGTERM while a step's query ran could wait for the query to end (whether
    a signal reaches a running query at all is shown below), past a container's grace
    period on a long one, which then kills the process without a word. The query is
    stopped through its connection as the signal arrives."""
    path = write_pipeline(LONG_QUERY)
    got, err, took, run_dir = signalled_in_a_step(path, tmp_path, verb, sent, 0.5)
    assert got == code, err
    assert took < 10, took
    # Nothing left behind in the temporary directory: the audit's second process, killed
    # by the first, left the module it had made for spawned workers in /tmp.
    assert list((tmp_path / "tmp").iterdir()) == []
    if verb == "run":
        (directory,) = invocations(run_dir)
        assert invocations(run_dir) == {directory: "interrupted"}


def test_a_signal_stops_the_query_registered_as_interruptible():
    """Run through `execute`, this query does not look at Python's signals: it ran its
    whole course, 27.7 s, with SIGALRM sent one second in (bench/interrupt.py), and so
    would it with Ctrl-C. Registered as interruptible, its connection is stopped as the
    signal arrives, from the thread that reads the wakeup fd."""
    import os
    import signal
    import threading
    import time

    import duckdb

    from twicerun.runner import interrupts

    con = duckdb.connect()
    con.execute("SET threads = 2")
    kill = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    with (
        pytest.raises((duckdb.Error, RuntimeError, KeyboardInterrupt)),
        interrupts.watching(),
        interrupts.interruptible(con.interrupt),
    ):
        kill.start()
        con.execute("CREATE TABLE t AS SELECT sum(range) AS s FROM range(30000000000)")
    kill.join()
    assert time.monotonic() - started < 2.5
    assert interrupts.requested()


# A query that runs tens of seconds and does not look at Python's signals (the test above).
IGNORES_SIGNALS = "CREATE TEMP TABLE slow AS SELECT sum(range) AS s FROM range(30000000000)"


def sigint_from_another_thread(after: float) -> None:
    """SIGINT in `after` seconds, taken by a thread other than the main one: a process's
    signal goes to whichever thread the kernel picks, and that is the case that waited."""
    import signal
    import threading

    def to_this_thread() -> None:
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    threading.Timer(after, to_this_thread).start()


@pytest.mark.parametrize("where", ["digests", "oracle"])
def test_a_signal_stops_twicerun_s_own_query_too(write_pipeline, tmp_path, monkeypatch, where):
    """Not only a step's query: the digests of an artifact and the oracle's comparison run
    on twicerun's own connection, and on a large artifact one query there can take
    minutes. Ctrl-C (or a container's SIGTERM) used to wait for it to end. The slow query
    is put in front of the real work, so the test needs no large artifact."""
    import time

    from twicerun.runner import execute, loop
    from twicerun.runner.loop import LoopOptions, run_pipeline

    # Each is called with twicerun's connection as argument `at`.
    module, name, at = (execute, "digests", 0) if where == "digests" else (loop, "compare_step", 1)
    real = getattr(module, name)

    def slow_first(*args, **kwargs):
        sigint_from_another_thread(0.5)
        args[at].execute(IGNORES_SIGNALS)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, slow_first)
    path = write_pipeline("def a(ctx):\n    ctx.write('x', 'SELECT random() AS v')\n")
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(path, LoopOptions(run_dir=tmp_path / "runs", runs=2, amplify=False))
    assert time.monotonic() - started < 5
    (directory,) = invocations(tmp_path / "runs")
    assert invocations(tmp_path / "runs") == {directory: "interrupted"}


@pytest.mark.parametrize("verb", ["diff", "localize", "reproduce"])
def test_a_signal_stops_the_query_of_a_verb_over_recorded_runs(
    write_pipeline, twicerun, run_dir, monkeypatch, verb
):
    """The verbs that read recorded runs compute digests on a connection of their own,
    and Ctrl-C waited for its query to end too; and where the stopped query's error was
    not turned into an interrupt, it was printed as an internal error (exit 3)."""
    import time

    from twicerun.verdicts.recorded import RecordedRun

    path = write_pipeline("def a(ctx):\n    ctx.write('x', 'SELECT random() AS v')\n")
    assert twicerun("run", path, "--runs", "2").code == 1
    (name,) = invocations(run_dir)
    directory = run_dir / name
    real = RecordedRun.steps

    def slow_first(self, con):
        sigint_from_another_thread(0.5)
        con.execute(IGNORES_SIGNALS)
        return real(self, con)

    monkeypatch.setattr(RecordedRun, "steps", slow_first)
    args = {
        "diff": ("diff", directory, f"{directory}#2"),
        "localize": ("localize", directory),
        "reproduce": ("reproduce", directory),
    }[verb]
    started = time.monotonic()
    got = twicerun(*args)
    assert time.monotonic() - started < 5
    assert got.code == 130, got.err
    assert "internal error" not in got.err
