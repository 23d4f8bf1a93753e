"""What finding the columns that decide others costs tie collapse, beside its own write.

    python -m bench.dependences [--repeat 3] [--json PATH]

Before folding, tie collapse asks which columns each column it folds decides, alone or
with one or two columns of few values (runner/amplify/tie_collapse.py, dependent_units). This
times that question against the two things tie collapse did already for the same
input: counting each column's values (column_facts) and writing the folded copy. The
inputs are the reference pipeline's, as its first step writes them, and three made to
be hard: 100 columns to fold whose counts differ, 100 that share one count (the worst
case for the bound on how many are asked), and 50 to fold beside 50 of few values (the
worst case for the pairs and triples); and five where there is something to find, by two
columns together, by three, by two that are both folded, and by two or three that are not;
and two for the check on nearly unique columns that repeat (counting values holds it): the
worst case, and a repeated event id the file of each copy tells apart; and a change time
per entity and version that rises with the version (counting values holds that check too).
Each figure is the median of --repeat timings, in this process, at two threads.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import environment, print_tables, retable, retable_option, write_artifact

REPO = Path(__file__).resolve().parent.parent
THREADS = 2
ROWS = 200_000

MADE = {
    "100 to fold, counts 1,000 to 1,099": ", ".join(
        f"hash(range * {i + 3}) % {1000 + i} AS c{i}" for i in range(100)
    ),
    "100 to fold, one count": ", ".join(
        f"hash(range * {i + 3}) % 1000 AS c{i}" for i in range(100)
    ),
    "50 to fold, 50 of 20 values": ", ".join(
        [f"hash(range * {i + 3}) % 1000 AS c{i}" for i in range(50)]
        + [f"hash(range * {i + 103}) % 20 AS d{i}" for i in range(50)]
    ),
    # One the search finds something in: a user's name, and a price per product and region.
    "a name per user, a price per product and region": (
        "hash(range) % 6000 AS user_id, 'u' || (hash(range) % 6000) AS user_name, "
        "hash(range * 5) % 3000 AS product_id, hash(range * 7) % 5 AS region, "
        "hash((hash(range * 5) % 3000) * 10 + hash(range * 7) % 5) % 90000 AS unit_price"
    ),
    # And one only three columns together find: a price per product, region and tier.
    "a price per product, region and tier": (
        "hash(range * 5) % 3000 AS product_id, hash(range * 7) % 5 AS region, "
        "hash(range * 11) % 4 AS tier, "
        "hash(hash(range * 5) % 3000, hash(range * 7) % 5, hash(range * 11) % 4) % 90000 AS price"
    ),
    # And one where two folded columns decide a third: a negotiated price per customer and
    # product.
    "a price per customer and product": (
        "hash(range) % 3000 AS customer_id, hash(range * 7) % 2000 AS product_id, "
        "hash(hash(range) % 3000, hash(range * 7) % 2000) % 90000 AS price"
    ),
    # And one where three columns not folded decide the one folded: a rate per region, tier
    # and day.
    "a rate per region, tier and day": (
        "hash(range * 5) % 5 AS region, hash(range * 7) % 4 AS tier, hash(range * 11) % 60 AS day, "
        "hash(hash(range * 5) % 5, hash(range * 7) % 4, hash(range * 11) % 60) % 1000 AS rate"
    ),
    # The worst case for the check on nearly unique columns (base._repeats_told_apart): two
    # of them repeating values, beside 14 columns of few values to check them against.
    "2 nearly unique with repeats, 14 of few values": ", ".join(
        ["range % 150000 AS near", "hash(range) % 300000 AS near2"]
        + [f"hash(range * {j + 3}) % {j + 2} AS f{j}" for j in range(14)]
        + ["hash(range * 99) % 5000 AS amount"]
    ),
    # And one it finds something in: an event id a feed repeats, and the file of each copy.
    "an event id repeated in the next file": (
        "CASE WHEN range % 50 = 0 THEN range - 1 ELSE range END AS event_id, "
        "range % 4 AS file, hash(range * 99) % 5000 AS amount"
    ),
    # The check for a column ordered within a key's groups (base._ordered_within): a change
    # time per entity and version, repeating across entities, rising with the version.
    "a change time rising with the version": (
        "range // 10 AS entity_id, range % 10 AS version, "
        "(range // 10) % 15000 * 37 + range % 10 * 1000 AS changed_at, "
        "hash(range * 99) % 5000 AS amount"
    ),
    # And one where two columns not folded decide the one folded: a price per product and day.
    "a price per product and day": (
        "hash(range * 5) % 200 AS product_id, hash(range * 7) % 300 AS day, "
        "hash(hash(range * 5) % 200, hash(range * 7) % 300) % 90000 AS price"
    ),
}


def inputs(directory: Path) -> list[tuple[str, Path]]:
    import duckdb

    con = duckdb.connect()
    made = []
    for n, (label, columns) in enumerate(MADE.items()):
        path = directory / f"made{n}.parquet"
        con.execute(
            f"COPY (SELECT range AS id, {columns} FROM range({ROWS})) TO '{path}' (FORMAT parquet)"
        )
        made.append((label, path))
    run_dir = directory / "reference"
    subprocess.run(
        [sys.executable, "-m", "twicerun", "run", str(REPO / "pipelines" / "reference.py"),
         "--runs", "2", "--no-amplify", "--run-dir", str(run_dir)],
        check=False, capture_output=True,
    )  # fmt: skip
    for path in sorted(run_dir.glob("*/loop/1/00-make_inputs/*.parquet")):
        made.append((f"reference.py's {path.stem}", path))
    return made


def measure(path: Path, repeat: int) -> dict | None:
    import duckdb

    from twicerun.runner.amplify.base import column_facts
    from twicerun.runner.amplify.tie_collapse import (
        Collapse,
        collapse_ties,
        dependent_units,
        plan_collapse,
    )

    con = duckdb.connect()
    con.execute(f"SET threads = {THREADS}")
    facts_s, ask_s, write_s = [], [], []
    plan = units = None
    for _ in range(repeat):
        start = time.perf_counter()
        facts = column_facts(con, path)
        facts_s.append(time.perf_counter() - start)
        plan = plan_collapse(facts, artifact=path.stem)
        if not isinstance(plan, Collapse):
            return None
        start = time.perf_counter()
        units = dependent_units(con, path, plan, facts, artifact=path.stem)
        ask_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        collapse_ties(con, path, path.with_suffix(".folded"), artifact=path.stem, plan=units)
        write_s.append(time.perf_counter() - start)
    return {
        "rows": facts[0],
        "columns": len(facts[1]),
        "folded": len(plan.chosen),
        "moved_with_another": sum(len(u.moved) for u in units.units),
        "facts_seconds": statistics.median(facts_s),
        "dependences_seconds": statistics.median(ask_s),
        "write_seconds": statistics.median(write_s),
    }


def tables(path: str, document: dict) -> list[dict]:
    stamp = (
        f"Rendered from `{path}`, written {document['written']}, by `{document['command']}`. "
        f"DuckDB {document['environment']['duckdb']} at threads={THREADS}; median of "
        f"{document['repeat']} timings each."
    )
    rows = [
        [
            case["input"],
            f"{case['rows']:,} rows, {case['columns']}",
            str(case["folded"]),
            str(case["moved_with_another"]),
            f"{case['facts_seconds']:.2f}s",
            f"{case['dependences_seconds']:.2f}s",
            f"{case['write_seconds']:.2f}s",
        ]
        for case in document["cases"]
    ]
    return [
        {
            "name": "bench-dependences",
            "stamp": stamp,
            "headers": [
                "input",
                "size",
                "columns folded",
                "moved with another",
                "counting values",
                "finding dependences",
                "writing the folded copy",
            ],
            "rows": rows,
            "align": [],
        }
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", metavar="PATH", default=None)
    retable_option(parser)
    args = parser.parse_args(argv)
    if args.retable:
        retable(args.retable, tables)
        return 0
    cases = []
    with tempfile.TemporaryDirectory(prefix="twicerun-bench-dependences-") as tmp:
        for label, path in inputs(Path(tmp)):
            figures = measure(path, args.repeat)
            if figures is not None:
                cases.append({"input": label, **figures})
                print(f"{label}: {figures}", flush=True)
    document = {
        "schema": "twicerun.bench-dependences/1",
        "written": time.strftime("%Y-%m-%d"),
        "command": "python -m bench.dependences "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "environment": environment(THREADS),
        "repeat": args.repeat,
        "cases": cases,
    }
    print_tables(tables, document)
    if args.json:
        write_artifact(args.json, document, tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
