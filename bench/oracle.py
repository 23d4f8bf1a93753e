"""The oracle against what people reach for instead, side by side in one run.

    python -m bench.oracle [--rows 500000] [--repeat 5] [--threads N] [--json PATH]

Two six-column Parquet artifacts of --rows rows differ in a handful of rows: a
few floats moved by one ulp, a few exact values changed, a row duplicated, a
row deleted. Each contender compares them --repeat times; the median wall
time is printed with its ratio to DuckDB's EXCEPT ALL run both ways, the
cheapest thing that can say "these differ" at all:

- twicerun's oracle (classes, counts, ulp and relative figures, attribution);
- EXCEPT ALL both ways in DuckDB (which rows differ, nothing about how);
- datacompy and polars, if installed (`pip install -e '.[bench]'`): datacompy's
  Compare on the id column, and polars anti-joins both ways on every column.

Also timed: settling two artifacts that hold the same rows in another order,
which costs one canonical digest (the reference's was computed when it was
written), against one full oracle comparison.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from bench.common import environment, parse_measuring, write_artifact
from twicerun.render.tables import Artifact, Table, carry, stamp


def make_artifacts(directory: Path, rows: int) -> tuple[Path, Path, Path]:
    con = duckdb.connect()
    base = f"""
        SELECT i AS id,
               hash(i) % 5000 AS customer,
               DATE '2026-01-01' + (i % 365)::INTEGER AS day,
               'item-' || (hash(i * 3) % 20000) AS name,
               (hash(i * 7) % 1000000) / 100.0 AS amount,
               (hash(i * 11) % 50)::INTEGER AS quantity
        FROM range({rows}) r(i)
    """
    reference = directory / "reference.parquet"
    later = directory / "later.parquet"
    shuffled = directory / "shuffled.parquet"
    con.execute(f"COPY ({base}) TO '{reference}' (FORMAT parquet)")
    # A few rows differ: three floats one ulp up, three names changed, one row
    # duplicated, one row deleted.
    con.execute(
        f"""
        COPY (
            SELECT id, customer, day,
                   CASE WHEN id IN (11, 22, 33) THEN name || '-changed' ELSE name END AS name,
                   CASE WHEN id IN (44, 55, 66) THEN nextafter(amount, 1e300) ELSE amount END AS amount,
                   quantity
            FROM read_parquet('{reference}') WHERE id <> 77
            UNION ALL SELECT * FROM read_parquet('{reference}') WHERE id = 88
        ) TO '{later}' (FORMAT parquet)
        """
    )
    con.execute(
        f"COPY (SELECT * FROM read_parquet('{reference}') ORDER BY hash(id)) TO '{shuffled}' "
        f"(FORMAT parquet)"
    )
    return reference, later, shuffled


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm the page cache and DuckDB's catalogue before timing
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    args = parse_measuring(parser, argv, tables)
    if args is None:
        return 0

    from twicerun.compare.digest import canonical_digest
    from twicerun.compare.oracle import compare_artifacts

    with tempfile.TemporaryDirectory(prefix="twicerun-bench-oracle-") as d:
        reference, later, shuffled = make_artifacts(Path(d), args.rows)
        config = {"threads": args.threads} if args.threads else {}
        con = duckdb.connect(config=config)
        threads = con.execute("SELECT current_setting('threads')").fetchone()[0]

        findings = compare_artifacts(con, "bench", reference, later)
        same = compare_artifacts(con, "bench", reference, shuffled)
        assert findings.classes == ["ROW_MISSING", "ROW_EXTRA", "MULTIPLICITY", "VALUE_DRIFT"], (
            findings
        )
        assert same.classes == [], same

        def except_all():
            a = con.execute(
                f"SELECT count(*) FROM (SELECT * FROM read_parquet('{reference}') EXCEPT ALL "
                f"SELECT * FROM read_parquet('{later}'))"
            ).fetchone()
            b = con.execute(
                f"SELECT count(*) FROM (SELECT * FROM read_parquet('{later}') EXCEPT ALL "
                f"SELECT * FROM read_parquet('{reference}'))"
            ).fetchone()
            return a, b

        results: dict[str, float] = {
            "EXCEPT ALL both ways": median_seconds(except_all, args.repeat),
            "twicerun oracle": median_seconds(
                lambda: compare_artifacts(con, "bench", reference, later), args.repeat
            ),
        }
        results.update(_optional(reference, later, args.repeat))
        identical_digest = median_seconds(lambda: canonical_digest(con, shuffled), args.repeat)
        identical_oracle = median_seconds(
            lambda: compare_artifacts(con, "bench", reference, shuffled), args.repeat
        )

    base = results["EXCEPT ALL both ways"]
    print(
        f"{args.rows:,} rows x 6 columns, a few rows differing; DuckDB {duckdb.__version__} "
        f"at threads={threads}; median of {args.repeat}"
    )
    for name, seconds in results.items():
        print(f"  {name:<22} {seconds:7.3f}s  {seconds / base:5.2f}x EXCEPT ALL")
    print(
        f"\nsame rows in another order: one canonical digest {identical_digest:.3f}s, "
        f"one oracle comparison {identical_oracle:.3f}s "
        f"({identical_digest / identical_oracle:.2f} of it)"
    )
    print(
        f"oracle findings: {', '.join(findings.classes)}; "
        f"{findings.missing} missing, {findings.extra} extra, "
        f"{findings.multiplicity_extra} duplicated, "
        f"{sum(x.moved for x in findings.drift)} values moved"
    )
    if args.json_path:
        write_artifact(
            args.json_path,
            {
                "schema": "twicerun.bench-oracle/1",
                "written": time.strftime("%Y-%m-%d"),
                "command": "python -m bench.oracle "
                + " ".join(argv if argv is not None else sys.argv[1:]),
                "environment": environment(int(threads)),
                "rows": args.rows,
                "threads": int(threads),
                "duckdb": duckdb.__version__,
                "repeat": args.repeat,
                "seconds": results,
                "identical_digest_seconds": identical_digest,
                "identical_oracle_seconds": identical_oracle,
            },
            tables,
        )
    return 0


def _optional(reference: Path, later: Path, repeat: int) -> dict[str, float]:
    found: dict[str, float] = {}
    try:
        import polars as pl
    except ImportError:
        print("polars not installed: skipped (pip install -e '.[bench]')")
    else:

        def polars_anti():
            a = pl.read_parquet(reference)
            b = pl.read_parquet(later)
            columns = a.columns
            return (
                a.join(b, on=columns, how="anti", nulls_equal=True).height,
                b.join(a, on=columns, how="anti", nulls_equal=True).height,
            )

        found["polars anti-joins"] = median_seconds(polars_anti, repeat)
    try:
        import datacompy
        import pandas as pd
    except ImportError:
        print("datacompy not installed: skipped (pip install -e '.[bench]')")
    else:

        def datacompy_compare():
            a = pd.read_parquet(reference)
            b = pd.read_parquet(later)
            return datacompy.PandasCompare(a, b, join_columns=["id"]).report()

        found["datacompy"] = median_seconds(datacompy_compare, repeat)
    return found


# The artifact's tables, as data ------------------------------------------------------


def bench_oracle(a: Artifact) -> Table:
    d = a.document
    base = d["seconds"]["EXCEPT ALL both ways"]
    rows = [[name, f"{s:.3f}s", f"{s / base:.2f}x"] for name, s in d["seconds"].items()]
    rows.append(
        [
            "canonical digest, same rows reordered",
            f"{d['identical_digest_seconds']:.3f}s",
            f"{d['identical_digest_seconds'] / base:.2f}x",
        ]
    )
    what = f"Two {d['rows']:,}-row, six-column artifacts differing in a few rows; median of {d['repeat']}."
    return Table(
        "bench-oracle",
        stamp(a, what),
        ["comparison", "median", "against EXCEPT ALL"],
        rows,
        ["left", "right", "right"],
    )


def tables(path: str, document: dict) -> list[dict]:
    return carry([bench_oracle(Artifact(path, document))])


if __name__ == "__main__":
    raise SystemExit(main())
