"""Recording the environment variables a step reads holds for a whole long invocation."""

from __future__ import annotations

import os

from twicerun.runner.environ_read import reading_environment

ENVIRON = type(os.environ)


def _step_reading(root, name: str):
    """A function whose code lives in `root`, as a pipeline's step does, reading `name`."""
    namespace = {"os": os}
    source = f"def step():\n    return os.environ.get({name!r})\n"
    exec(compile(source, str(root / "pipeline.py"), "exec"), namespace)
    return namespace["step"]


def test_a_read_is_recorded_after_many_executions_in_one_process(tmp_path, monkeypatch):
    """Each execution replaced os.environ's __getitem__ on entry and put it back on exit.
    On CPython 3.13.0, past 500 executions in one process `os.environ.get` went on calling
    the original, and nothing a step read was recorded (the suite's own run on 3.13.0
    failed on it). The class is now changed once, whatever the count, and the 700th
    execution records its read."""
    monkeypatch.setenv("TWICERUN_TEST_DAY", "2026-03-01")
    step = _step_reading(tmp_path, "TWICERUN_TEST_DAY")
    with reading_environment((tmp_path,)):
        pass
    installed = ENVIRON.__dict__["__getitem__"]
    for _ in range(700):
        for _ in range(20):
            os.environ.get("HOME")  # what the process reads between steps
        with reading_environment((tmp_path,)) as reads:
            assert ENVIRON.__dict__["__getitem__"] is installed
            assert step() == "2026-03-01"
        assert list(reads.read) == ["TWICERUN_TEST_DAY"]
    assert ENVIRON.__dict__["__getitem__"] is installed


def test_reads_outside_an_execution_are_not_recorded_and_return_what_they_would(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("TWICERUN_TEST_DAY", "2026-03-02")
    step = _step_reading(tmp_path, "TWICERUN_TEST_DAY")
    with reading_environment((tmp_path,)) as reads:
        pass
    assert step() == "2026-03-02" and os.environ["TWICERUN_TEST_DAY"] == "2026-03-02"
    assert reads.read == {}
