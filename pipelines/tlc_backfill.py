"""A backfill of NYC green taxi revenue, written the way it usually is: list the monthly
files oldest first, read them as one table, and sum every money column per month and
payment type.

It reads data/tlc/green_tripdata_{2024-12,2025-01,2025-02}.parquet (or the directory in
TWICERUN_TLC_DIR): generate stand-ins with `python scripts/tlc_partitions.py`, or fetch
the real files with `python scripts/fetch_tlc.py`. docs/data.md tells the story: DuckDB
takes the column set of a file list from its first file, so oldest first, the 2025
column cbd_congestion_fee is dropped without a word, on every run alike.
pipelines/tlc_backfill_twin.py is the same backfill with union_by_name.
"""

import os
from pathlib import Path

MONTHS = ("2024-12", "2025-01", "2025-02")
DATA = Path(
    os.environ.get("TWICERUN_TLC_DIR") or Path(__file__).resolve().parent.parent / "data" / "tlc"
)

# Every charge a passenger pays, by the naming the TLC uses for them.
MONEY = "_amount$|_fee$|surcharge$|^mta_tax$|^extra$"


def monthly_files():
    files = [DATA / f"green_tripdata_{month}.parquet" for month in MONTHS]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(
            f"{DATA} lacks {', '.join(missing)}; run `python scripts/tlc_partitions.py` for "
            f"generated stand-ins or `python scripts/fetch_tlc.py` for the TLC's own files"
        )
    return [str(f) for f in files]


def revenue_by_month(ctx):
    ctx.source("trips", monthly_files())
    ctx.write(
        "revenue",
        f"""
        SELECT strftime(lpep_pickup_datetime, '%Y-%m') AS month,
               payment_type,
               count(*) AS trips,
               sum(COLUMNS('{MONEY}')::DECIMAL(18, 2))
        FROM trips
        GROUP BY ALL
        ORDER BY ALL
        """,
    )


def card_share(ctx):
    ctx.read("revenue")
    ctx.write(
        "card_share",
        """
        SELECT month, sum(total_amount) FILTER (payment_type = 1) / sum(total_amount) AS card
        FROM revenue
        GROUP BY month
        ORDER BY month
        """,
    )
