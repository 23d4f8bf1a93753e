"""The loop on Spark Connect (`--spark-master sc://...`), against a Connect server started
here, on loopback.

Spark Connect's client needs pyspark's connect extra (grpcio, pandas and more), which
neither the `spark` extra nor the README's test line installs, so without it this file
is skipped and says why. With it (`pip install 'pyspark[connect]'`), one local server is
started for the file; twicerun runs in processes of its own, as a user runs it, so a
process that does not end fails the test rather than the session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("pyspark", "grpc", "pandas")),
    reason="Spark Connect's client needs pip install 'pyspark[connect]'",
)

QUICK = """
ENGINE = "spark"


def numbers(ctx):
    ctx.write("numbers", "SELECT id, id % 3 AS k FROM range(1000)")


def counted(ctx):
    ctx.read("numbers")
    ctx.write("counted", "SELECT k, count(*) AS n FROM numbers GROUP BY k")
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import pyspark

    home = Path(pyspark.__file__).parent
    logs = tmp_path_factory.mktemp("connect-server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_NO_DAEMONIZE": "1",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(logs),
        "SPARK_PID_DIR": str(logs),
    }
    log = (logs / "server.log").open("w")
    process = subprocess.Popen(
        [
            str(home / "sbin" / "start-connect-server.sh"),
            "--master",
            "local[2]",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        if process.poll() is not None or time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"the Connect server did not start:\n{(logs / 'server.log').read_text()}")
        time.sleep(0.5)
    yield f"sc://127.0.0.1:{port}"
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    log.close()


def twicerun(tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """The CLI in a process of its own, which has to end by itself."""
    return subprocess.run(
        [sys.executable, "-m", "twicerun", *args, "--run-dir", str(tmp_path / ".twicerun")],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
    )


def test_a_run_on_spark_connect_reports_and_its_process_ends(server, tmp_path):
    """Every step's remote session was left to the garbage collector, which closed their
    channels as the process exited, and closing one waited forever: the report was
    printed, the invocation completed, and `twicerun` never returned. And every session
    warned on stderr that the server's own context settings could not be changed."""
    path = tmp_path / "quick.py"
    path.write_text(textwrap.dedent(QUICK).lstrip())
    done = twicerun(
        tmp_path, "run", str(path), "--spark-master", server, "--runs", "2", "--no-amplify"
    )
    assert done.returncode == 0, done.stderr
    assert f"on {server} at partitions=" in done.stdout
    assert "Cannot modify the value of the Spark config" not in done.stderr


def test_a_step_timeout_on_spark_connect_cancels_the_job_on_the_server(server, tmp_path):
    """The one path of --step-timeout on Spark that had not run: Spark Connect has no
    SparkContext in the client, so the session interrupts its own operations."""
    path = tmp_path / "hangs.py"
    path.write_text(
        'ENGINE = "spark"\n\n\ndef hangs(ctx):\n'
        '    ctx.write("n", "SELECT sum(id * 7 % 13) AS s FROM range(100000000000000)")\n'
    )
    done = twicerun(
        tmp_path, "run", str(path), "--spark-master", server, "--runs", "2", "--step-timeout", "3"
    )
    assert done.returncode == 3, done.stderr
    assert "it ran longer than --step-timeout 3s" in done.stderr
    # Back as soon as the server cancelled it, not once the signal after the 10 s grace
    # interrupted the client's wait and left the job running there.
    (receipt,) = (tmp_path / ".twicerun").glob("*/loop/1/00-hangs/receipt.json")
    assert json.loads(receipt.read_text())["seconds"] < 3 + 5
    # And the server goes on working for the next invocation.
    quick = tmp_path / "quick.py"
    quick.write_text(textwrap.dedent(QUICK).lstrip())
    again = twicerun(
        tmp_path, "run", str(quick), "--spark-master", server, "--runs", "2", "--no-amplify"
    )
    assert again.returncode == 0, again.stderr
