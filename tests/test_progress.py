"""Progress goes to stderr: on a terminal as one line, elsewhere as a heartbeat on long work."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

PIPELINE = "def only(ctx):\n    ctx.write('x', 'SELECT 1 AS v')\n"


def test_progress_is_shown_on_a_terminal_and_cleared(write_pipeline, run_dir):
    path = write_pipeline(PIPELINE)
    master, slave = pty.openpty()
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "twicerun",
                "run",
                str(path),
                "--runs",
                "2",
                "--run-dir",
                str(run_dir),
            ],
            stdout=subprocess.PIPE,
            stderr=slave,
            check=False,
        )
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    assert done.returncode == 0
    text = seen.decode()
    assert "loop run 1/2, step 1/1 only" in text
    assert "loop run 2/2, step 1/1 only" in text
    assert text.endswith("\r\x1b[K")  # the line is wiped before the report prints
    assert b"loop run" not in done.stdout


def test_progress_is_silent_when_stderr_is_not_a_terminal(write_pipeline, twicerun):
    outcome = twicerun("run", write_pipeline(PIPELINE), "--runs", "2")
    assert outcome.code == 0
    assert outcome.err == ""


def test_long_work_off_a_terminal_leaves_a_heartbeat_in_the_log(
    write_pipeline, twicerun, monkeypatch
):
    # Off a terminal (a CI job's log) a run of any length printed nothing until its report.
    from twicerun.cli.app import Progress

    monkeypatch.setattr(Progress, "HEARTBEAT", 0.0)
    outcome = twicerun("run", write_pipeline(PIPELINE), "--runs", "2", "--no-amplify")
    assert outcome.code == 0
    lines = outcome.err.splitlines()
    assert [re.sub(r"\(\d+m\d\ds so far\)", "(T)", line) for line in lines[:2]] == [
        "[twicerun] at loop run 1/2, step 1/1 only (T)",
        "[twicerun] at loop run 2/2, step 1/1 only (T)",
    ]
    assert "[twicerun]" not in outcome.out


def test_the_heartbeat_waits_its_interval_and_counts_minutes(monkeypatch):
    import click

    from twicerun.cli.app import Progress
    from twicerun.runner.progress import ProgressEvent

    printed = []
    monkeypatch.setattr(click, "echo", lambda text, **_: printed.append(text))
    now = [100.0]
    progress = Progress(enabled=False, clock=lambda: now[0])
    for now[0] in (129.0, 130.0, 159.0, 225.0):
        progress(ProgressEvent("loop", 1, 5, 0, 3, "a"))
    assert printed == [
        "[twicerun] at loop run 1/5, step 1/3 a (0m30s so far)",
        "[twicerun] at loop run 1/5, step 1/3 a (2m05s so far)",
    ]
