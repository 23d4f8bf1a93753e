"""Progress goes to stderr on a terminal, and nowhere otherwise."""

from __future__ import annotations

import os
import pty
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
