"""The premise, re-derived in raw DuckDB in seconds: no twicerun involved.

    python scripts/measure_duckdb.py [--threads 8] [--json PATH]

Every number it prints is measured now, on this machine, and will differ on the
next run; what must hold is the shape, written as invariants:

- a parallel sum() over DOUBLE disagrees with itself on many of its groups;
- at threads=1 the same sum never disagrees;
- count() over the same groups never moves, at any thread count;
- a DECIMAL sum never moves;
- row_number() over a sort with ties moves between runs, and a tiebreak column
  stops it;
- MERGE from a source that repeats a key moves at several threads and not at one,
  and deduplicating the source stops it.

It exits 0 when every invariant holds and 1 naming each one that broke, so it
fails loudly instead of printing numbers that mean something else.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

ROWS = 2_000_000
GROUPS = 1_000
EVENTS = 500_000
TIES = 1_000
PRODUCTS = 500_000
REPEATS = 3
# Row groups are the unit DuckDB hands to scan threads: the default (122,880 rows) gives
# the events file five, and on a loaded two-core CI host one pass once numbered the ties
# alike in both later runs. Twenty-five groups and five runs leave no such gap.
EVENT_ROW_GROUP = 20_000


@dataclass
class Invariant:
    name: str
    holds: bool
    detail: str


def _connect(threads: int) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(config={"threads": threads})


def _runs(
    query: str, columns: str, threads: int, setup: str = "", repeats: int = REPEATS
) -> list[tuple]:
    """A multiset fingerprint of `query`'s rows (count and two sums of row hashes) from
    `repeats` fresh connections. Computed in DuckDB: pulling 500,000 rows into Python
    to compare them took most of this script's time."""
    out = []
    for _ in range(repeats):
        con = _connect(threads)
        if setup:
            con.execute(setup)
        statements = [q for q in query.split(";") if q.strip()]
        for statement in statements[:-1]:
            con.execute(statement)
        out.append(
            con.execute(
                f"SELECT count(*), sum(hash({columns})::HUGEINT), sum(hash({columns}, 'salt')::HUGEINT) "
                f"FROM ({statements[-1]})"
            ).fetchone()
        )
        con.close()
    return out


def _group_disagreements(query: str, threads: int) -> list[int]:
    """Per later run, how many groups' values differ from the first run's."""
    results = []
    for _ in range(REPEATS):
        con = _connect(threads)
        results.append(dict(con.execute(query).fetchall()))
        con.close()
    first = results[0]
    return [sum(1 for g in first if first[g] != later.get(g)) for later in results[1:]]


def _moved(runs: list[tuple]) -> int:
    return sum(1 for r in runs[1:] if r != runs[0])


def measure(directory: Path, threads: int) -> list[Invariant]:
    orders = directory / "orders.parquet"
    events = directory / "events.parquet"
    prices = directory / "prices.parquet"
    updates = directory / "updates.parquet"
    con = duckdb.connect()
    con.execute(
        f"COPY (SELECT i AS id, i % {GROUPS} AS g, (hash(i) % 100000) / 100.0 AS amount "
        f"FROM range({ROWS}) r(i)) TO '{orders}' (FORMAT parquet)"
    )
    con.execute(
        f"COPY (SELECT i AS event_id, hash(i * 5 + 1) % {TIES} AS customer FROM range({EVENTS}) r(i)) "
        f"TO '{events}' (FORMAT parquet, ROW_GROUP_SIZE {EVENT_ROW_GROUP})"
    )
    con.execute(
        f"COPY (SELECT i AS product_id, (hash(i) % 10000)::BIGINT AS price FROM range({PRODUCTS}) r(i)) "
        f"TO '{prices}' (FORMAT parquet)"
    )
    con.execute(
        f"COPY (SELECT i AS seq, hash(i * 11) % {PRODUCTS} AS product_id, (hash(i * 13) % 10000)::BIGINT AS price "
        f"FROM range({PRODUCTS}) r(i)) TO '{updates}' (FORMAT parquet)"
    )
    con.close()

    found = []
    parallel = _group_disagreements(f"SELECT g, sum(amount) FROM '{orders}' GROUP BY g", threads)
    found.append(
        Invariant(
            f"a parallel DOUBLE sum disagrees with itself at threads={threads}",
            max(parallel) >= GROUPS // 10,
            f"{', '.join(str(n) for n in parallel)} of {GROUPS:,} groups differed from the first run "
            f"(needs {GROUPS // 10:,} or more in one run)",
        )
    )
    single = _group_disagreements(f"SELECT g, sum(amount) FROM '{orders}' GROUP BY g", 1)
    found.append(
        Invariant(
            "the same sum at threads=1 never disagrees",
            max(single) == 0,
            f"{', '.join(str(n) for n in single)} of {GROUPS:,} groups differed",
        )
    )
    counts = [
        _group_disagreements(f"SELECT g, count(*) FROM '{orders}' GROUP BY g", t)
        for t in (1, threads)
    ]
    found.append(
        Invariant(
            "count() never moves, at one thread or several",
            max(max(c) for c in counts) == 0,
            f"{sum(sum(c) for c in counts)} groups differed over {2 * (REPEATS - 1)} comparisons",
        )
    )
    decimal = _group_disagreements(
        f"SELECT g, sum(amount::DECIMAL(18, 2)) FROM '{orders}' GROUP BY g", threads
    )
    found.append(
        Invariant(
            f"a DECIMAL sum never moves at threads={threads}",
            max(decimal) == 0,
            f"{', '.join(str(n) for n in decimal)} of {GROUPS:,} groups differed",
        )
    )
    ties = _runs(
        f"SELECT event_id, row_number() OVER (ORDER BY customer) AS n FROM '{events}'",
        "event_id, n",
        threads,
        repeats=REPEATS + 2,
    )
    found.append(
        Invariant(
            f"row_number() over tied sort keys moves at threads={threads}",
            _moved(ties) > 0,
            f"{_moved(ties)} of {REPEATS + 1} later runs numbered the events differently",
        )
    )
    tiebreak = _runs(
        f"SELECT event_id, row_number() OVER (ORDER BY customer, event_id) AS n FROM '{events}'",
        "event_id, n",
        threads,
    )
    found.append(
        Invariant(
            "a tiebreak column stops row_number() from moving",
            _moved(tiebreak) == 0,
            f"{_moved(tiebreak)} of {REPEATS - 1} later runs numbered the events differently",
        )
    )
    setup = f"CREATE TABLE p AS SELECT * FROM '{prices}'"
    merge = (
        "MERGE INTO p USING ({source}) u ON p.product_id = u.product_id "
        "WHEN MATCHED THEN UPDATE SET price = u.price; SELECT * FROM p"
    )
    raw = f"SELECT * FROM '{updates}'"
    deduped = f"SELECT * FROM '{updates}' QUALIFY row_number() OVER (PARTITION BY product_id ORDER BY seq DESC) = 1"
    many = _runs(merge.format(source=raw), "product_id, price", threads, setup, repeats=REPEATS + 2)
    found.append(
        Invariant(
            f"MERGE from a source that repeats a key moves at threads={threads}",
            _moved(many) > 0,
            f"{_moved(many)} of {REPEATS + 1} later runs left different prices",
        )
    )
    one = _runs(merge.format(source=raw), "product_id, price", 1, setup)
    found.append(
        Invariant(
            "the same MERGE at threads=1 never moves",
            _moved(one) == 0,
            f"{_moved(one)} of {REPEATS - 1} later runs left different prices",
        )
    )
    fixed = _runs(merge.format(source=deduped), "product_id, price", threads, setup)
    found.append(
        Invariant(
            "deduplicating the MERGE source stops it from moving",
            _moved(fixed) == 0,
            f"{_moved(fixed)} of {REPEATS - 1} later runs left different prices",
        )
    )
    return found


def main(
    argv: list[str] | None = None, measure_fn: Callable[[Path, int], list[Invariant]] | None = None
) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=8, help="the 'several threads' (default 8)")
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="twicerun-premise-") as d:
        found = (measure_fn or measure)(Path(d), args.threads)
    seconds = time.time() - started
    print(f"DuckDB {duckdb.__version__}, {seconds:.1f}s")
    for inv in found:
        print(f"{'holds ' if inv.holds else 'BROKE '} {inv.name}: {inv.detail}")
    broken = [inv.name for inv in found if not inv.holds]
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps(
                {
                    "schema": "twicerun.premise/1",
                    "duckdb": duckdb.__version__,
                    "seconds": round(seconds, 1),
                    "invariants": [inv.__dict__ for inv in found],
                },
                indent=2,
            )
            + "\n"
        )
    if broken:
        print(
            f"measure_duckdb: {len(broken)} invariant{'s' if len(broken) != 1 else ''} broke: "
            f"{'; '.join(broken)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
