"""What a step that reads files through `ctx.source` pays for twicerun's own binds.

    python -m bench.source_binds [--files 6] [--rows 2000] [--repeat 9] [--json PATH]

DuckDB binds a statement before it runs it, and binding a query over `read_csv` sniffs
every file of the list again (its dialect and its types), where binding one over
`read_parquet` reads footers. A step that reads files and writes one query's rows does,
on bare DuckDB, two statements: the view over the files, and the COPY of the query. Through
ctx it does those two and two binds more: ctx.source builds the relation it returns (a
bind of the view), and ctx.write binds the query to learn its column types, for the
128-bit integers it stores exactly (storage/exact_integers.py), before the COPY binds it
again. ctx.source also counts the rows, once per process for the same files read the same
way, so the first execution here is left out of the medians, as it is the loop's run 1.

Each repetition times, on a fresh connection each and the two ways alternating: the bare
statements, and ctx.source with ctx.write on a context of twicerun's own (as the plain
execution of `bench.loop` makes one), for the same generated files as CSV and as Parquet;
and one bind of a query over the view alone. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from bench.common import bare_context, environment, write_document
from twicerun import sql

QUERY = "SELECT day, count(*) AS trips, sum(fare) AS fares FROM trips GROUP BY day"


def make_files(directory: Path, files: int, rows: int) -> dict[str, list[str]]:
    con = duckdb.connect()
    made: dict[str, list[str]] = {"csv": [], "parquet": []}
    for i in range(files):
        rows_sql = (
            f"SELECT (r * 7 + {i}) % 50 AS rider, DATE '2024-01-01' + {i} AS day, "
            f"(r * 13 + {i}) % 97 * 1.25 AS fare FROM range({rows}) t(r)"
        )
        for kind, options in (("csv", "HEADER"), ("parquet", "FORMAT parquet")):
            path = directory / f"part{i:03d}.{kind}"
            con.execute(f"COPY ({rows_sql}) TO {sql.string(path)} ({options})")
            made[kind].append(str(path))
    con.close()
    return made


def reader(kind: str, files: list[str]) -> str:
    listed = ", ".join(sql.string(f) for f in files)
    return f"read_{kind}([{listed}])"


def bare(kind: str, files: list[str], out: Path, threads: int) -> float:
    con = duckdb.connect(":memory:", config={"threads": threads})
    started = time.perf_counter()
    con.execute(f"CREATE OR REPLACE VIEW trips AS SELECT * FROM {reader(kind, files)}")
    con.execute(f"COPY ({QUERY}) TO {sql.string(out)} (FORMAT parquet)")
    seconds = time.perf_counter() - started
    con.close()
    return seconds


def through_ctx(files: list[str], out_dir: Path, threads: int, engine) -> float:
    ctx = bare_context(engine, threads, 0, "totals", out_dir, {})
    started = time.perf_counter()
    ctx.source("trips", files)
    ctx.write("totals", QUERY)
    seconds = time.perf_counter() - started
    engine.release(ctx)
    return seconds


def one_bind(kind: str, files: list[str], threads: int) -> float:
    con = duckdb.connect(":memory:", config={"threads": threads})
    con.execute(f"CREATE OR REPLACE VIEW trips AS SELECT * FROM {reader(kind, files)}")
    started = time.perf_counter()
    _ = con.sql(QUERY).types
    seconds = time.perf_counter() - started
    con.close()
    return seconds


def main(argv: list[str] | None = None) -> int:
    from twicerun.runner.engines import open_engine

    parser = argparse.ArgumentParser(prog="python -m bench.source_binds")
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--rows", type=int, default=2000, help="rows per file")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)
    times: dict[str, dict[str, list[float]]] = {
        kind: {"bare": [], "ctx": [], "bind": []} for kind in ("csv", "parquet")
    }
    engine = open_engine("duckdb", args.threads, None)
    try:
        with tempfile.TemporaryDirectory(prefix="twicerun-source-binds-") as scratch:
            root = Path(scratch)
            made = make_files(root, args.files, args.rows)
            for rep in range(args.repeat + 1):
                for kind in ("csv", "parquet"):
                    out = root / f"out-{kind}-{rep}"
                    out.mkdir()
                    ways = ["bare", "ctx", "bind"]
                    if rep % 2:
                        ways.reverse()
                    for way in ways:
                        if way == "bare":
                            seconds = bare(kind, made[kind], out / "bare.parquet", args.threads)
                        elif way == "ctx":
                            seconds = through_ctx(made[kind], out, args.threads, engine)
                        else:
                            seconds = one_bind(kind, made[kind], args.threads)
                        if rep > 0:  # the first counts the source's rows: the loop's run 1
                            times[kind][way].append(seconds)
                print(f"repetition {rep} of {args.repeat} done", file=sys.stderr, flush=True)
    finally:
        engine.shutdown()
    summary = {}
    for kind, ways in times.items():
        medians = {way: statistics.median(values) for way, values in ways.items()}
        summary[kind] = {
            "bare_median_s": round(medians["bare"], 4),
            "ctx_median_s": round(medians["ctx"], 4),
            "one_bind_median_s": round(medians["bind"], 4),
            "ctx_over_bare": round(medians["ctx"] / medians["bare"], 2),
            "extra_binds_explained": round((medians["ctx"] - medians["bare"]) / medians["bind"], 1),
        }
        print(
            f"{kind:>8}: bare {medians['bare'] * 1000:7.1f} ms, through ctx "
            f"{medians['ctx'] * 1000:7.1f} ms ({medians['ctx'] / medians['bare']:.2f}x); "
            f"one bind {medians['bind'] * 1000:6.1f} ms"
        )
    if args.json_path:
        write_document(
            args.json_path,
            {
                "schema": "twicerun.bench-source-binds/1",
                "written": time.strftime("%Y-%m-%d"),
                "command": " ".join(["python -m bench.source_binds", *(argv or sys.argv[1:])]),
                "environment": environment(args.threads),
                "files": args.files,
                "rows_per_file": args.rows,
                "query": QUERY,
                "summary": summary,
                "seconds": times,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
