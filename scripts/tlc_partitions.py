"""Small, deterministic stand-ins for three monthly NYC TLC green trip files.

    python scripts/tlc_partitions.py [DIR] [--rows 2000]     # default DIR: data/tlc

Writes green_tripdata_2024-12.parquet, _2025-01 and _2025-02 with the column lists
of pipelines/tlc_green_schema.sql: the December file without cbd_congestion_fee,
the two 2025 files with it. Values come from hash() of the row number and the
month, never from random(), so every run writes the same bytes. No TLC bytes are
in them (docs/data.md says why none are committed); tests and CI use these, and
scripts/fetch_tlc.py fetches the real files where there is a network.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb

from twicerun import sql

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "pipelines" / "tlc_green_schema.sql"
MONTHS = ("2024-12", "2025-01", "2025-02")
DEFAULT_DIR = REPO / "data" / "tlc"


def file_name(month: str) -> str:
    return f"green_tripdata_{month}.parquet"


def _money(seed: str, modulus: int, scale: float = 100.0) -> str:
    return f"round((hash(range, '{seed}') % {modulus}) / {scale}, 2)"


def generate(directory: Path, rows: int = 2000) -> list[Path]:
    """Write the three partitions into `directory`; return their paths, oldest first."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute("SET threads = 1")  # one writer: the same bytes on every machine
    con.execute(SCHEMA.read_text(encoding="utf-8"))
    written = []
    for month in MONTHS:
        table = "green_trips_2024" if month < "2025" else "green_trips_2025"
        columns = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]
        values = {
            "VendorID": "(1 + hash(range, 'vendor') % 2)::INTEGER",
            "lpep_pickup_datetime": f"TIMESTAMP '{month}-01' + to_seconds((hash(range, 'at') % 2419200)::BIGINT)",
            "lpep_dropoff_datetime": f"TIMESTAMP '{month}-01' + to_seconds((hash(range, 'at') % 2419200 + 300 + hash(range, 'len') % 3000)::BIGINT)",
            "store_and_fwd_flag": "CASE WHEN hash(range, 'fwd') % 50 = 0 THEN 'Y' ELSE 'N' END",
            "RatecodeID": "(1 + hash(range, 'rate') % 5)::BIGINT",
            "PULocationID": "(1 + hash(range, 'pu') % 265)::INTEGER",
            "DOLocationID": "(1 + hash(range, 'do') % 265)::INTEGER",
            "passenger_count": "(1 + hash(range, 'pax') % 4)::BIGINT",
            "trip_distance": _money("dist", 2000),
            "fare_amount": _money("fare", 6000),
            "extra": "CASE WHEN hash(range, 'extra') % 3 = 0 THEN 1.0 ELSE 0.0 END",
            "mta_tax": "0.5",
            "tip_amount": _money("tip", 1500),
            "tolls_amount": "CASE WHEN hash(range, 'toll') % 20 = 0 THEN 6.94 ELSE 0.0 END",
            "ehail_fee": "NULL::DOUBLE",
            "improvement_surcharge": "1.0",
            "total_amount": "0.0",  # set below, as the sum of the parts
            "payment_type": "(1 + hash(range, 'pay') % 4)::BIGINT",
            "trip_type": "(1 + hash(range, 'type') % 2)::BIGINT",
            "congestion_surcharge": "CASE WHEN hash(range, 'cong') % 4 = 0 THEN 2.75 ELSE 0.0 END",
            "cbd_congestion_fee": "CASE WHEN hash(range, 'cbd') % 3 = 0 THEN 0.75 ELSE 0.0 END",
        }
        parts = [
            c
            for c in columns
            if c
            in (
                "fare_amount",
                "extra",
                "mta_tax",
                "tip_amount",
                "tolls_amount",
                "improvement_surcharge",
                "congestion_surcharge",
                "cbd_congestion_fee",
            )
        ]
        select = ", ".join(f"{values[c]} AS {c}" for c in columns)
        target = directory / file_name(month)
        con.execute(f"DELETE FROM {table}")
        con.execute(
            f"INSERT INTO {table} SELECT * REPLACE (round({' + '.join(parts)}, 2) AS total_amount) "
            f"FROM (SELECT {select} FROM range({rows}))"
        )
        con.execute(f"COPY (SELECT * FROM {table}) TO {sql.string(target)} (FORMAT parquet)")
        written.append(target)
    con.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--rows", type=int, default=2000, help="rows per month")
    args = parser.parse_args(argv)
    for path in generate(args.directory, args.rows):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
