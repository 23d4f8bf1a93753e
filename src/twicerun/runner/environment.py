"""The stamp every Result carries: which DuckDB, how many threads, which machine."""

from __future__ import annotations

import platform

import duckdb

from twicerun._version import __version__
from twicerun.result import Environment


def default_threads() -> int:
    """The thread count DuckDB picks on this machine when nobody sets one."""
    con = duckdb.connect(":memory:")
    try:
        return int(con.execute("SELECT current_setting('threads')").fetchone()[0])
    finally:
        con.close()


def platform_stamp() -> str:
    # System and machine only: the kernel build changes under a hosted runner
    # every few weeks without changing what a step computes.
    return f"{platform.system()}-{platform.machine()}"


def stamp(threads: int) -> Environment:
    return Environment(
        duckdb=duckdb.__version__,
        threads=threads,
        platform=platform_stamp(),
        python=platform.python_version(),
        twicerun=__version__,
    )
