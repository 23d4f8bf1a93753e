"""The premise on Apache Spark: which common patterns change their answer between runs.

    pip install -e '.[spark]'        # pyspark; Spark needs Java 17 or newer
    python scripts/measure_spark.py [--runs 5] [--rows 200000] [--json results/spark-premise-DATE.json]

Spark in local mode, started here, at 2 and at 4 partitions (`local[N]`, and N
shuffle partitions). A table of --rows rows is shuffled by a hash repartition, so
the order rows arrive in at each task depends on which map task finished first;
then each pattern runs --runs times, each time in a fresh session over one shared
context, as twicerun would give each step. A run's answer is its rows as a
multiset (sorted, then hashed), so an answer that differs only in row order counts
as the same, the way twicerun's canonical digest does. Every pattern has a
control beside it, written the way that does not depend on order, which must give
one answer. Exits 1 when a control gave two.

This is the measurement issue 17 asks for before the loop is driven on Spark; it
is not a test and runs nowhere in CI.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))


from bench.common import parse_measuring, write_artifact  # noqa: E402
from twicerun.render.markdown import code  # noqa: E402
from twicerun.render.tables import Artifact, Table, carry, stamp  # noqa: E402

SCHEMA = "twicerun.spark-premise/1"

# (pattern, its query, the control's query) over the view `t(id, g, tie, x)`.
PATTERNS = [
    (
        "row_number() over ties after a shuffle",
        "SELECT g, id FROM (SELECT g, id, row_number() OVER (PARTITION BY g ORDER BY tie) AS rn FROM t) WHERE rn = 1",
        "SELECT g, id FROM (SELECT g, id, row_number() OVER (PARTITION BY g ORDER BY tie, id) AS rn FROM t) WHERE rn = 1",
    ),
    (
        "first() after groupBy",
        "SELECT g, first(id) AS id FROM t GROUP BY g",
        "SELECT g, min(id) AS id FROM t GROUP BY g",
    ),
    (
        "monotonically_increasing_id()",
        "SELECT id, monotonically_increasing_id() AS mid FROM t",
        "SELECT id, row_number() OVER (ORDER BY id) AS mid FROM t",
    ),
    (
        "collect_list order",
        "SELECT g, collect_list(id) AS ids FROM t GROUP BY g",
        "SELECT g, array_sort(collect_list(id)) AS ids FROM t GROUP BY g",
    ),
    (
        "a float sum across partitions",
        "SELECT g, sum(x) AS s FROM t GROUP BY g",
        "SELECT g, sum(CAST(x AS DECIMAL(38, 18))) AS s FROM t GROUP BY g",
    ),
    (
        "limit without an order",
        "SELECT id FROM t LIMIT 10",
        "SELECT id FROM t ORDER BY id LIMIT 10",
    ),
    (
        "sample without a seed",
        "SELECT id FROM t TABLESAMPLE (10 PERCENT)",
        "SELECT id FROM t WHERE pmod(hash(id), 10) = 0",
    ),
]


def answer(rows) -> str:
    """A run's answer as a multiset of rows: sorted, then hashed."""
    normal = sorted(repr(tuple(r)) for r in rows)
    return hashlib.sha256("\n".join(normal).encode("utf-8")).hexdigest()[:16]


def measure(partitions: int, runs: int, rows: int) -> dict:
    from pyspark.sql import SparkSession

    # Spark's default warehouse is ./spark-warehouse, which would land in the checkout.
    warehouse = tempfile.mkdtemp(prefix="twicerun-premise-warehouse-")
    spark = (
        SparkSession.builder.master(f"local[{partitions}]")
        .appName("twicerun-premise")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    found = {}
    try:
        for name, query, control in PATTERNS:
            answers, controls = [], []
            for _ in range(runs):
                session = spark.newSession()
                table = (
                    session.range(0, rows, numPartitions=partitions)
                    .selectExpr(
                        "id",
                        "pmod(hash(id, 1), 500) AS g",
                        "pmod(hash(id, 2), 3) AS tie",
                        "1.0 / (id + 1) * 1e6 + pmod(hash(id, 3), 1000) / 7.0 AS x",
                    )
                    .repartition(partitions, "g")
                )
                table.createOrReplaceTempView("t")
                answers.append(answer(session.sql(query).collect()))
                controls.append(answer(session.sql(control).collect()))
            found[name] = {
                "answers": len(set(answers)),
                "control_answers": len(set(controls)),
                "runs": runs,
                "seen": sorted(set(answers)),
                "control_seen": sorted(set(controls)),
            }
            print(
                f"local[{partitions}] {name}: {len(set(answers))} answers in {runs} runs; "
                f"control {len(set(controls))}",
                file=sys.stderr,
            )
        version = spark.version
    finally:
        spark.stop()
        shutil.rmtree(warehouse, ignore_errors=True)
    return {"partitions": partitions, "spark": version, "patterns": found}


def _local(level: dict) -> str:
    return code(f"local[{level['partitions']}]")


def tables(path: str, d: dict) -> list[dict]:
    a = Artifact(path, d)
    levels = d["levels"]
    rows = []
    for name, _, _ in PATTERNS:
        cells = []
        for level in levels:
            p = level["patterns"][name]
            cells.append(
                f"{p['answers']} of {p['runs']} runs distinct; control {p['control_answers']}"
            )
        across = {h for lv in levels for h in lv["patterns"][name]["seen"]}
        control = {h for lv in levels for h in lv["patterns"][name]["control_seen"]}
        cells.append(f"{len(across)} distinct; control {len(control)}")
        rows.append([name, *cells])
    what = (
        f"Apache Spark {levels[0]['spark']} in local mode on {d['java']}, {d['rows']:,} rows "
        f"shuffled by a hash repartition, each pattern run {d['runs']} times in a fresh "
        f"session; an answer is the multiset of rows. {d['seconds']:.0f}s in all."
    )
    return carry(
        [
            Table(
                "spark-premise",
                stamp(a, what),
                [
                    "pattern",
                    *(f"within {_local(lv)}" for lv in levels),
                    "across those partition counts",
                ],
                rows,
            )
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, nargs="+", default=[2, 4])
    args = parse_measuring(parser, argv, tables)
    if args is None:
        return 0
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("measure_spark: pyspark is not installed; pip install -e '.[spark]'", file=sys.stderr)
        return 2
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    started = time.time()
    levels = [measure(p, args.runs, args.rows) for p in args.partitions]
    document = {
        "schema": SCHEMA,
        "written": time.strftime("%Y-%m-%d"),
        "command": "python scripts/measure_spark.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "java": (java.stderr.splitlines() or ["java unknown"])[0].strip(),
        "rows": args.rows,
        "runs": args.runs,
        "seconds": round(time.time() - started, 1),
        "levels": levels,
    }
    broken = [
        f"local[{lv['partitions']}] {name}"
        for lv in levels
        for name, p in lv["patterns"].items()
        if p["control_answers"] != 1
    ]
    if args.json_path:
        write_artifact(args.json_path, document, tables)
    for b in broken:
        print(f"measure_spark: a control gave more than one answer: {b}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
