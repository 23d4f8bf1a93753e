"""What a fresh state per step execution costs, and what a cheaper one hides.

    python -m bench.isolation [--trials 100] [--json PATH]

Two ways to give a step nothing of the previous step's, side by side in one
process, interleaved trial by trial so both see the same machine:

- fresh: a new in-memory DuckDB per execution (what twicerun does);
- pooled: a new cursor on one long-lived DuckDB, with a new in-memory catalog
  attached and in use, detached afterwards (the cheaper way that was tried).

For each it times the set-up and tear-down alone, and then runs a query whose
answer depends on parallel order, `row_number()` over a sort key with ties, on
two generated inputs (dense ties: 500 rows per key; sparse ties: 2 rows per
key). The executions are grouped as the loop groups them, runs of five, each
later run compared with its group's first, and the comparisons that differ are
counted. Each mechanism runs twice over: with nothing beside the query, and with
one new DuckDB opened on another thread as the query starts, which is what
twicerun's helpers do for every connection a step takes. The query stands for
every step that numbers rows without a full tiebreak; it is not a step of any
pipeline here.

Nothing here is a test; the figures go into the artifact and docs/runs.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb

from bench.common import environment, parse_measuring, print_tables, write_artifact
from twicerun.render.tables import Artifact, Table, carry, stamp

THREADS = 2
ROWS = 500_000
INPUTS = {"dense": ROWS // 500, "sparse": ROWS // 2}  # distinct keys: 500 and 2 rows per key
QUERY = "SELECT id, key, row_number() OVER (ORDER BY key) AS n FROM input"
MECHANISMS = {
    "fresh": "a new in-memory DuckDB per execution",
    "pooled": "a new cursor and attached catalog on one live DuckDB",
}
BESIDE = {
    "nothing": "nothing beside",
    "opening": "one DuckDB opened beside",
}
GROUP = 5  # the loop's default runs: run 1 and four comparisons with it


def _inputs(scratch: Path) -> dict[str, Path]:
    con = duckdb.connect()
    paths = {}
    for name, keys in INPUTS.items():
        paths[name] = scratch / f"{name}.parquet"
        con.execute(
            f"COPY (SELECT i AS id, hash(i * 7 + 1) % {keys} AS key FROM range({ROWS}) r(i)) "
            f"TO '{paths[name]}' (FORMAT parquet)"
        )
    con.close()
    return paths


class Pooled:
    def __init__(self) -> None:
        self.db = duckdb.connect(":memory:", config={"threads": THREADS})
        self.k = 0

    def open(self) -> duckdb.DuckDBPyConnection:
        self.k += 1
        cursor = self.db.cursor()
        cursor.execute(f"ATTACH ':memory:' AS step_{self.k}")
        cursor.execute(f"USE step_{self.k}")
        return cursor

    def close(self, cursor: duckdb.DuckDBPyConnection) -> None:
        cursor.execute("USE memory")
        cursor.execute(f"DETACH step_{self.k}")
        cursor.close()


class Fresh:
    def open(self) -> duckdb.DuckDBPyConnection:
        return duckdb.connect(":memory:", config={"threads": THREADS})

    def close(self, connection: duckdb.DuckDBPyConnection) -> None:
        connection.close()


def _answer(con: duckdb.DuckDBPyConnection, source: Path, out: Path) -> int:
    con.execute(f"CREATE OR REPLACE VIEW input AS SELECT * FROM read_parquet('{source}')")
    con.execute(f"COPY ({QUERY}) TO '{out}' (FORMAT parquet)")
    (digest,) = con.execute(f"SELECT sum(hash(id, n)) FROM read_parquet('{out}')").fetchone()
    return int(digest)


class OpeningBeside:
    """One new in-memory DuckDB opened and closed on another thread while the query runs,
    started as it starts: the work a helper does to replace the connection a step took."""

    def __enter__(self) -> OpeningBeside:
        self._thread = threading.Thread(target=lambda: duckdb.connect(":memory:").close())
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._thread.join()


class NothingBeside:
    def __enter__(self) -> NothingBeside:
        return self

    def __exit__(self, *_exc) -> None:
        return None


def measure(trials: int, setups: int) -> dict:
    scratch = Path(tempfile.mkdtemp(prefix="twicerun-bench-isolation-"))
    inputs = _inputs(scratch)
    ways = {"fresh": Fresh(), "pooled": Pooled()}
    setup = {name: {"open": [], "close": []} for name in ways}
    for _ in range(setups):
        for name, way in ways.items():  # interleaved
            started = time.perf_counter()
            con = way.open()
            opened = time.perf_counter()
            way.close(con)
            setup[name]["open"].append(opened - started)
            setup[name]["close"].append(time.perf_counter() - opened)
    settings = [(name, beside) for name in ways for beside in BESIDE]
    first: dict[tuple[str, str, str], int] = {}
    differing = {f"{n}/{b}": dict.fromkeys(inputs, 0) for n, b in settings}
    compared = 0
    for trial in range(trials):
        if trial % GROUP:
            compared += 1
        for data, source in inputs.items():
            for name, beside in settings:  # interleaved
                way = ways[name]
                con = way.open()
                with OpeningBeside() if beside == "opening" else NothingBeside():
                    answer = _answer(con, source, scratch / "out.parquet")
                way.close(con)
                if trial % GROUP == 0:
                    first[name, beside, data] = answer
                elif answer != first[name, beside, data]:
                    differing[f"{name}/{beside}"][data] += 1
    return {
        "setup_ms": {
            name: {k: round(statistics.median(v) * 1000, 2) for k, v in times.items()}
            for name, times in setup.items()
        },
        "group": GROUP,
        "compared": compared,
        "differing": differing,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--trials", type=int, default=100, help="executions per setting and input (default 100)"
    )
    parser.add_argument("--setups", type=int, default=100)
    args = parse_measuring(parser, argv, tables)
    if args is None:
        return 0
    figures = measure(args.trials, args.setups)
    document = {
        "schema": "twicerun.bench-isolation/2",
        "written": time.strftime("%Y-%m-%d"),
        "command": "python -m bench.isolation "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "environment": environment(THREADS),
        "trials": args.trials,
        "setups": args.setups,
        "rows": ROWS,
        **figures,
    }
    print_tables(tables, document)
    if args.json_path:
        write_artifact(args.json_path, document, tables)
    return 0


# The artifact's tables, as data ------------------------------------------------------


def _row(what: str, ms: dict, counts: dict, compared: int) -> list[str]:
    return [
        what,
        f"{ms['open']:.2f} ms",
        f"{ms['close']:.2f} ms",
        f"{counts['dense']} of {compared}",
        f"{counts['sparse']} of {compared}",
    ]


def _table(a: Artifact, what: str, rows: list[list[str]], counted: str) -> Table:
    return Table(
        "bench-isolation",
        stamp(a, what),
        [
            "fresh state per execution",
            "set-up",
            "tear-down",
            f"{counted}, 500 rows per key",
            f"{counted}, 2 rows per key",
        ],
        rows,
        ["left", "right", "right", "right", "right"],
    )


def bench_isolation(a: Artifact) -> Table:
    d = a.document
    if "compared" not in d:
        return _bench_isolation_v1(a)
    rows = [
        _row(
            f"{what}, {told}",
            d["setup_ms"][name],
            d["differing"][f"{name}/{beside}"],
            d["compared"],
        )
        for name, what in MECHANISMS.items()
        for beside, told in BESIDE.items()
    ]
    what = (
        f"Median set-up and tear-down over {d['setups']} of each; then {d['trials']} "
        f"executions per row of `row_number()` over a sort key with ties on {d['rows']:,} "
        f"generated rows, the four settings interleaved, in groups of {d['group']} as the "
        f"loop runs them: each later execution compared with its group's first. \"One "
        f'DuckDB opened beside": a new in-memory DuckDB opened on another thread as the '
        f"query starts, which is what twicerun's helpers do for each connection a step takes."
    )
    return _table(a, what, rows, "comparisons that differ")


def _bench_isolation_v1(a: Artifact) -> Table:
    """Artifacts of schema /1: two mechanisms, each execution against the mechanism's first."""
    d = a.document
    rows = [
        _row(what, d["setup_ms"][name], d["differing"][name], d["trials"] - 1)
        for name, what in MECHANISMS.items()
    ]
    what = (
        f"Median set-up and tear-down over {d['setups']} of each; then {d['trials']} executions "
        f"of `row_number()` over a sort key with ties on {d['rows']:,} generated rows, the two "
        f"mechanisms interleaved, counting answers that differ from the mechanism's first."
    )
    return _table(a, what, rows, "differing answers")


def tables(path: str, document: dict) -> list[dict]:
    return carry([bench_isolation(Artifact(path, document))])


if __name__ == "__main__":
    raise SystemExit(main())
