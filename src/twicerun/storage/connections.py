"""Fresh DuckDB connections for step executions: what a new one starts with on this
machine, opening one at the run's thread count, and the helpers that open them ahead
of the steps and close them behind.
"""

from __future__ import annotations

import contextlib
import functools
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import duckdb

from twicerun.storage.context import StepContext


@functools.cache
def fresh_defaults() -> tuple[int, str]:
    """What a fresh DuckDB connection starts with on this machine when nobody sets them: its
    thread count, and its TimeZone (the machine's, from TZ or the system setting), which
    decides what a TIMESTAMPTZ becomes when a step casts it to a date or text. Asked once per
    process: opening a database to ask costs about as much as a small step."""
    con = duckdb.connect(":memory:")
    try:
        threads, zone = con.execute(
            "SELECT current_setting('threads'), current_setting('TimeZone')"
        ).fetchone()
        return int(threads), str(zone)
    finally:
        con.close()


def default_time_zone() -> str:
    return fresh_defaults()[1]


@functools.cache
def same_time_zone(a: str, b: str) -> bool:
    """Whether DuckDB puts every hour from 1970 to 2060 at the same local time in zones `a`
    and `b`: true of two names for one zone (Etc/UTC and UTC, US/Eastern and
    America/New_York), which would otherwise read as a change. A name DuckDB does not know
    is a different zone."""
    if a == b:
        return True
    con = duckdb.connect(":memory:")
    try:
        (same,) = con.execute(
            "SELECT bool_and((t AT TIME ZONE ?) = (t AT TIME ZONE ?)) FROM range("
            "TIMESTAMPTZ '1970-01-01 00:00:00+00', TIMESTAMPTZ '2060-01-01 00:00:00+00', "
            "INTERVAL 1 HOUR) r(t)",
            [a, b],
        ).fetchone()
        return bool(same)
    except duckdb.Error:
        return False
    finally:
        con.close()


def open_connection(threads: int, spill_dir: Path | None = None) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB connection with the run's thread count."""
    config: dict[str, Any] = {"threads": threads}
    if spill_dir is not None:
        config["temp_directory"] = str(spill_dir)
    return duckdb.connect(":memory:", config=config)


class Connections:
    """Fresh connections for step executions, opened ahead and closed behind.

    Opening an in-memory DuckDB costs more CPU than a tiny step (nearly all of it
    spent filling the new catalog with the built-in functions), and closing one
    that held a step's tables costs more; helper threads do both while steps run.
    DuckDB lets go of the GIL while it opens, so three helpers open three at once.
    They share the cores with the step beside them, which is why
    `python -m bench.overlap` runs one helper and three alternately and counts the
    loop's fire rates on the reference pipeline's parallel-order bugs under each
    (docs/runs.md). Every connection handed out is still brand new.

    A cheaper way was measured and not kept: a new cursor and catalog on one of two
    pooled databases gave every guarantee (tests/test_isolation.py passes with it)
    at a third of the cost per execution, but the loop's fire rates on the
    reference pipeline's parallel-order bugs fell with it, so a step run on it is
    not run the way a fresh process runs it (docs/runs.md).
    """

    # One ahead per helper: a step shorter than one connection's opening (many are)
    # would otherwise wait for the next one to finish opening.
    AHEAD = 3
    HELPERS = 3

    def __init__(self, spill_dir: Path | None = None):
        self._spill_dir = spill_dir
        self._helper = ThreadPoolExecutor(
            max_workers=self.HELPERS, thread_name_prefix="twicerun-connections"
        )
        self._ready: dict[int, deque[Future[duckdb.DuckDBPyConnection]]] = {}
        self._expected: dict[int, int] = {}

    def expect(self, threads: int, count: int) -> None:
        """Say that `count` more executions at `threads` are coming. Opening ahead then
        stops at that many, rather than leaving connections opened that nothing uses
        (each costs as much CPU to open as a tiny step)."""
        self._expected[threads] = self._expected.get(threads, 0) + count

    def warm(self, threads: int) -> None:
        """Start opening the next connection at `threads` now, while twicerun prepares
        what the execution will read (an amplifier writing its inputs), rather than
        when the execution asks for it. The next `open` takes it, whatever `expect` says."""
        queue = self._ready.setdefault(threads, deque())
        if not queue:
            queue.append(self._helper.submit(open_connection, threads, self._spill_dir))

    def open(self, threads: int) -> duckdb.DuckDBPyConnection:
        queue = self._ready.setdefault(threads, deque())
        connection = (
            queue.popleft().result() if queue else open_connection(threads, self._spill_dir)
        )
        wanted = self.AHEAD
        if threads in self._expected:
            self._expected[threads] = max(0, self._expected[threads] - 1)
            wanted = min(wanted, self._expected[threads])
        while len(queue) < wanted:
            queue.append(self._helper.submit(open_connection, threads, self._spill_dir))
        return connection

    def close(self, connection: duckdb.DuckDBPyConnection) -> None:
        self._helper.submit(connection.close)

    # The engine interface the runner uses (storage/spark_context.py has the other one).
    name = "duckdb"

    def context(self, threads: int, **bound: Any) -> StepContext:
        """A `ctx` on a brand-new connection; `bound` is what StepContext takes besides."""
        return StepContext(connection=self.open(threads), threads=threads, **bound)

    def release(self, ctx: StepContext) -> None:
        if ctx._attached:
            # Closed now, not behind: closing is what lets go of an attached file, and the
            # next execution's ATTACH of it would otherwise race the helper's close and
            # raise "Unique file handle conflict" (in the bisect, it did).
            ctx._con.close()
            return
        self.close(ctx._con)

    def shutdown(self) -> None:
        for queue in self._ready.values():
            for ready in queue:
                with contextlib.suppress(Exception):
                    ready.result().close()
        self._ready.clear()
        self._helper.shutdown(wait=True)

    def __enter__(self) -> Connections:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
