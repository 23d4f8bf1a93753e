"""Shared fixtures: write a pipeline from source text, and run the real CLI on it."""

from __future__ import annotations

import json
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from twicerun.cli import main

REPO = Path(__file__).resolve().parent.parent

# The files whose tests take longest together, started first and longest first. xdist
# hands a worker one file at a time (--dist loadfile, so a file's fixtures are built once),
# by default the files with the most tests first; the Spark tests are few but take a
# minute and a half on one worker, and started last they ran alone while the other worker
# sat idle, which put the suite within seconds of its five-minute budget. pyproject turns
# xdist's own order off (--no-loadscope-reorder) so that this one holds. Longest first
# keeps a long file from being the last one handed out: with only three named,
# test_verdicts.py (44 s) came up near the end of the alphabet, and a simulation of the
# two workers over `pytest --durations=0`'s per-file sums (503 s of tests on 2 cores,
# 2026-12-05) had one worker finish 29 s after the other, against 3 s in this order.
# A third worker on two cores, to fill the time tests spend waiting on JVMs and child
# processes, was measured against two, the counts alternating (`python -m bench.suite`,
# results/experiments/bench-suite-2026-12-07.json): the suite took longer with three in
# every pair, so `-n auto` stays at one worker per core.
STARTED_FIRST = (
    "test_spark.py",
    "test_gate_cli.py",
    "test_action.py",
    "test_verdicts.py",
    "test_cause_and_status.py",
    "test_reference_pipeline.py",
    "test_oracle.py",
    "test_loop.py",
    "test_pre_commit_hook.py",
    "test_step_timeout.py",
)


# What a GitHub runner sets for every step, the suite's own job in ci.yml included: on a
# pull request, its event, its base branch, and the files a step's summary and outputs
# go to. A gate under test read those instead of the ones its test gave it, failed where
# the test expected it to pass, and wrote into the job's real summary. Every test starts
# without them, and sets what it needs (tests/test_setup.py runs a gate test inside such
# an environment).
WORKFLOW_VARIABLES = ("GITHUB_", "RUNNER_", "ACTIONS_", "TWICERUN_")


def pytest_configure(config):
    for name in [n for n in os.environ if n.startswith(WORKFLOW_VARIABLES)]:
        del os.environ[name]


def pytest_collection_modifyitems(items):
    def rank(item):
        name = item.path.name
        return STARTED_FIRST.index(name) if name in STARTED_FIRST else len(STARTED_FIRST)

    items.sort(key=rank)  # stable: each file keeps its tests' order, the rest theirs


# Writes rows from a module dict an earlier step fills with random numbers.
FILLS_A_DICT = """
import random

import pyarrow as pa

SHARED = {}


def build(ctx):
    SHARED["vals"] = [random.random() for _ in range(20)]
    ctx.write("marker", "SELECT 1 AS one")


def use(ctx):
    big = [v > 0.5 for v in SHARED["vals"]]
    ctx.write("out", pa.table({"i": list(range(20)), "big": big}))
"""

# One thread, the first event per customer and no tiebreak: the same answer on every
# rerun, another one as soon as the rows arrive in another order. The smallest pipeline
# that is STABLE_ON_THIS_INPUT every time, whatever the machine.
FIRST_PER_CUSTOMER = """
def events(ctx):
    ctx.write("events", "SELECT range AS event_id, range % 50 AS customer FROM range(2000)")


def first_event(ctx):
    ctx.read("events")
    ctx.sql("SET threads = 1")
    ctx.write("firsts", "SELECT customer, first(event_id) AS event_id FROM events GROUP BY customer")
"""


@pytest.fixture(autouse=True)
def _no_pauses_for_a_local_github(monkeypatch):
    """PyGithub's pauses between requests keep a real check clear of github.com's
    secondary rate limits; against the fake server on 127.0.0.1 they only cost time
    (a quarter of a second a request, a second a write). The retries' backoff stays."""
    from twicerun.github import comment

    monkeypatch.setattr(comment, "BETWEEN_REQUESTS", 0)
    monkeypatch.setattr(comment, "BETWEEN_WRITES", 0)


@dataclass
class CliRun:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def write_pipeline(tmp_path):
    """Write dedented source to a pipeline file in a temporary directory and return its path."""

    def write(source: str, name: str = "pipeline.py") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
        return path

    return write


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return tmp_path / ".twicerun"


@pytest.fixture
def twicerun(capsys, run_dir):
    """Call the CLI's main() in-process, as a user would run it, and capture what it printed."""

    def call(*args: str, with_run_dir: bool = True) -> CliRun:
        argv = [str(a) for a in args]
        if with_run_dir and argv and argv[0] == "run" and "--run-dir" not in argv:
            argv += ["--run-dir", str(run_dir)]
        # Amplifiers multiply a test's runtime; tests about them ask with --amplify.
        if argv and argv[0] == "run" and "--amplify" not in argv and "--help" not in argv:
            argv.append("--no-amplify")
        capsys.readouterr()
        code = main(argv)
        captured = capsys.readouterr()
        return CliRun(code, captured.out, captured.err)

    return call


@pytest.fixture
def opened_connections(monkeypatch) -> list[int]:
    """The thread count of every step connection opened from here on (the helpers
    open them ahead), for a test about how many an invocation opens."""
    from twicerun.storage import connections as connections_module

    opened: list[int] = []
    real = connections_module.open_connection

    def counting(threads, spill_dir=None):
        opened.append(threads)
        return real(threads, spill_dir)

    monkeypatch.setattr(connections_module, "open_connection", counting)
    return opened
