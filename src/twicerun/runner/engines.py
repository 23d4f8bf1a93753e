"""Which engine runs a pipeline's steps: DuckDB, embedded, unless the pipeline says Spark.

An engine hands each step execution a fresh `ctx` and takes it back; everything
after the step reads the Parquet it wrote and never asks which engine that was.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Protocol

from twicerun.errors import UsageError
from twicerun.storage.connections import Connections, default_time_zone


class Engine(Protocol):
    name: str

    def context(self, threads: int, **bound: Any) -> Any: ...

    def expect(self, threads: int, count: int) -> None: ...

    def warm(self, threads: int) -> None: ...

    def release(self, ctx: Any) -> None: ...

    def shutdown(self) -> None: ...


def check_platform() -> None:
    """Refuse to execute steps on Windows. Telling a live invocation from a dead one sends
    signal 0, which on Windows is no probe: os.kill ends the process it names. A step
    timeout is a SIGALRM, which Windows has not either, and none of it was ever run there."""
    if sys.platform == "win32":
        raise UsageError(
            "twicerun executes pipelines on Linux and macOS, and this is Windows, whose "
            "processes and signals it cannot check safely; run it under WSL, or on a Linux "
            "runner in CI"
        )


def check_engine(name: str, master: str | None) -> None:
    """Refuse before anything runs when the engine cannot start here."""
    check_platform()
    if name == "spark":
        from twicerun.storage.spark_context import check_spark

        check_spark(master)
    elif master is not None:
        raise UsageError(
            f"--spark-master {master}: this pipeline runs on DuckDB, which has no master; "
            f"declare ENGINE = 'spark' in it, or pass --engine spark"
        )


def session_time_zone(name: str) -> str:
    """The time zone a step's session starts in on this engine, here and now."""
    if name == "spark":
        from twicerun.storage.spark_context import SESSION_SETTINGS

        return SESSION_SETTINGS["spark.sql.session.timeZone"]
    return default_time_zone()


def open_engine(
    name: str, threads: int, spill_dir: Path | None, master: str | None = None
) -> Engine:
    if name == "spark":
        from twicerun.storage.spark_context import SparkEngine

        check_platform()  # check_engine, below, asks it for DuckDB
        return SparkEngine(threads, master)
    check_engine(name, master)
    return Connections(spill_dir)
