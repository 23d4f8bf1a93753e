"""The stamp every Result carries: which DuckDB, how many threads, which machine."""

from __future__ import annotations

import platform
from typing import Any

import duckdb

from twicerun._version import __version__
from twicerun.result import Environment
from twicerun.storage.connections import fresh_defaults


def default_threads() -> int:
    """The thread count DuckDB picks on this machine when nobody sets one."""
    return fresh_defaults()[0]


def platform_stamp() -> str:
    # System and machine only: the kernel build changes under a hosted runner
    # every few weeks without changing what a step computes.
    return f"{platform.system()}-{platform.machine()}"


def stamp(threads: int, engine: Any = None) -> Environment:
    """`engine`, when it is Spark, adds its version and master (DuckDB still digests and
    compares every artifact, so its version is always part of the instrument)."""
    spark = engine is not None and getattr(engine, "name", "") == "spark"
    return Environment(
        duckdb=duckdb.__version__,
        threads=threads,
        platform=platform_stamp(),
        python=platform.python_version(),
        twicerun=__version__,
        engine="spark" if spark else "duckdb",
        spark=engine.version if spark else None,
        spark_master=engine.master if spark else None,
    )
