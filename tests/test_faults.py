"""Faults: a killed or interrupted invocation loses nothing, leaves nothing half-written
under a final name, and is cleaned up and reported by the next one.

The kills are real: the CLI runs in its own process and gets SIGKILL while a step
is executing or writing. The interrupt in the bisect is a real SIGINT, sent by
the step to its own (in-test) process when it runs at one thread.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

PIPELINE = """
import os


def inputs(ctx):
    ctx.write("t", "SELECT range AS v FROM range(1000)")


def slow(ctx):
    ctx.read("t")
    if os.environ.get("SLOW"):
        # Long enough to be killed in the middle of: many queries, then a big write.
        for _ in range(40):
            ctx.sql("SELECT sum(hash(i) % 7) FROM range(20000000) r(i)").fetchall()
    ctx.write("n", "SELECT count(*) AS n FROM t")


def big(ctx):
    ctx.read("n")
    rows = 30000000 if os.environ.get("SLOW_WRITE") else 10
    ctx.write("big", f"SELECT range AS k, hash(range) AS h FROM range({rows})")
"""


def outcomes(run_dir: Path) -> dict[str, str]:
    return {
        p.name: json.loads((p / "invocation.json").read_text())["outcome"]
        for p in sorted(run_dir.iterdir())
        if (p / "invocation.json").exists()
    }


def start(path: Path, run_dir: Path, **env: str) -> subprocess.Popen:
    # A process killed with SIGKILL cleans nothing up: what it made in the temporary
    # directory (the module spawned workers import, pipeline/spawned.py) stays in the
    # test's own directory rather than in the machine's /tmp.
    scratch = run_dir.parent / "scratch"
    scratch.mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "twicerun", "run", str(path), "--runs", "3", "--no-amplify",
         "--run-dir", str(run_dir)],
        env={**os.environ, "TMPDIR": str(scratch), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip


def wait_for(predicate, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "the invocation never got there"
        time.sleep(0.05)


def every_final_file_is_whole(root: Path) -> None:
    for path in root.rglob("*"):
        if not path.is_file() or ".tmp-" in path.name:
            continue
        if path.suffix == ".parquet":
            pq.read_metadata(path)  # raises on a truncated file
        elif path.suffix == ".json":
            json.loads(path.read_text())


@pytest.mark.parametrize("where", ["step", "write"])
def test_a_killed_invocation_is_whole_where_it_stopped_and_reaped_by_the_next(
    write_pipeline, twicerun, run_dir, where
):
    path = write_pipeline(PIPELINE)
    assert twicerun("run", path, "--runs", "2").code == 0
    (earlier,) = outcomes(run_dir)

    # Only the part to be killed in is slow: a slow step before a slow write would spend
    # seconds getting to the write.
    process = start(path, run_dir, **({"SLOW": "1"} if where == "step" else {"SLOW_WRITE": "1"}))
    if where == "step":
        # run 1 of `slow` has started: its step directory exists, nothing written yet. The
        # earlier invocation has one too, so only a directory of another invocation counts:
        # matching the earlier one killed the new process before it had written anything.
        wait_for(
            lambda: any(p.parents[2].name != earlier for p in run_dir.glob("*/loop/1/01-slow"))
        )
        time.sleep(0.5)
    else:
        # `big` is writing: its temporary file exists under the step directory.
        wait_for(lambda: any(run_dir.glob("*/loop/1/02-big/.big.parquet.tmp-*")), 120)
    process.send_signal(signal.SIGKILL)
    process.wait()
    (killed,) = [name for name in outcomes(run_dir) if name != earlier]
    assert outcomes(run_dir)[killed] == "running"  # nobody said otherwise, yet
    every_final_file_is_whole(run_dir / killed)

    # The earlier completed invocation is untouched and still judgeable.
    assert twicerun("judge", run_dir / earlier).code == 0

    outcome = twicerun("run", path, "--runs", "2", "--keep", "0")
    assert outcome.code == 0
    states = outcomes(run_dir)
    assert states[killed] == "killed"
    assert not list((run_dir / killed).rglob("*.tmp-*"))
    assert (
        "1 directory from a failed, interrupted or killed invocation is kept beside this one, "
        f"{run_dir.resolve() / killed}; remove it once read."
    ) in outcome.out.splitlines()

    # The module the killed process made for spawned workers stayed in its temporary
    # directory, one per kill; the next twicerun to use that directory removes it.
    scratch = run_dir.parent / "scratch"
    (left,) = scratch.iterdir()
    assert left.name.startswith(f"twicerun-spawned-{process.pid}-")
    if where == "step":
        again = start(path, run_dir)
        assert again.wait() == 0, again.stderr.read()
        assert list(scratch.iterdir()) == []


def test_a_live_invocation_is_left_alone(write_pipeline, twicerun, run_dir):
    path = write_pipeline(PIPELINE)
    process = start(path, run_dir, SLOW="1")
    try:
        wait_for(lambda: any(run_dir.glob("*/loop/1/01-slow")))
        assert twicerun("run", path, "--runs", "2", "--keep", "0").code == 0
        assert "running" in outcomes(run_dir).values()
    finally:
        process.kill()
        process.wait()


def test_ctrl_c_in_the_bisect_is_an_interrupt_and_deletes_nothing(
    write_pipeline, twicerun, run_dir, monkeypatch
):
    # The step diverges (random), so the bisect re-runs it at one thread; there it
    # interrupts itself in the middle of a query.
    path = write_pipeline(
        "import os, signal, threading\n\n\n"
        "def a(ctx):\n"
        "    if os.environ.get('STOP') and ctx.threads == 1:\n"
        "        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "        for _ in range(20):\n"
        "            ctx.sql('SELECT sum(hash(i) % 7) FROM range(200000000) r(i)').fetchall()\n"
        "    ctx.write('x', 'SELECT random() AS v')\n"
    )
    assert twicerun("run", path, "--runs", "2", "--threads", "2").code == 1
    (earlier,) = outcomes(run_dir)
    monkeypatch.setenv("STOP", "1")
    outcome = twicerun("run", path, "--runs", "2", "--threads", "2")
    assert outcome.code == 130, outcome.err
    states = outcomes(run_dir)
    assert states[earlier] == "completed"
    assert sorted(states.values()) == ["completed", "interrupted"]
