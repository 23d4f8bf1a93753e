"""Arrival order: the same rows, in another order.

A step that pins itself to one thread is deterministic only for as long as its
input keeps arriving in the same order; rerunning it cannot show that, but
handing it the same rows reordered can. Variant 1 is the input as it is,
variant 2 its row groups in reverse (rows inside each group kept in order;
with a single row group, the rows reversed), and every later variant a
shuffle seeded by the variant number.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from twicerun import sql
from twicerun.runner.amplify.base import (
    POSITION,
    Applied,
    Declined,
    Outcome,
    copy_ordered,
    numbered,
)


def _row_groups(con: duckdb.DuckDBPyConnection, source: Path) -> list[tuple[int, int]]:
    sizes = con.execute(
        f"SELECT row_group_id, any_value(row_group_num_rows) FROM parquet_metadata({sql.file(source)}) "
        f"GROUP BY row_group_id ORDER BY row_group_id"
    ).fetchall()
    spans, start = [], 0
    for _, size in sizes:
        spans.append((start, start + int(size)))
        start += int(size)
    return spans


def _group_of(spans: list[tuple[int, int]], lo: int, hi: int) -> str:
    """The index of the group among spans[lo:hi] that holds the row at POSITION, as SQL."""
    if hi - lo == 1:
        return str(lo)
    mid = (lo + hi) // 2
    return (
        f"CASE WHEN {POSITION} < {spans[mid][0]} THEN {_group_of(spans, lo, mid)} "
        f"ELSE {_group_of(spans, mid, hi)} END"
    )


def reorder(
    con: duckdb.DuckDBPyConnection, source: Path, target: Path, *, artifact: str, variant: int
) -> Outcome:
    (rows,) = con.execute(f"SELECT count(*) FROM {sql.parquet(source)}").fetchone()
    if rows <= 1:
        return Declined(f"{artifact} has {rows} row{'s' if rows != 1 else ''}, so no other order")
    with numbered(con, source) as rows_of:
        if variant <= 1:
            query, what = (
                f"SELECT * EXCLUDE ({POSITION}) FROM {rows_of} ORDER BY {POSITION}",
                "as written",
            )
        elif variant == 2 and len(spans := _row_groups(con, source)) > 1:
            size = spans[0][1] - spans[0][0]
            if (
                all(hi - lo == size for lo, hi in spans[:-1])
                and spans[-1][1] - spans[-1][0] <= size
            ):
                # Every row group but a shorter last one has one size (DuckDB's writer does
                # that), so a row's group is a division.
                query = (
                    f"SELECT * EXCLUDE ({POSITION}) FROM {rows_of} "
                    f"ORDER BY {POSITION} // {size} DESC, {POSITION}"
                )
            else:
                # Groups of several sizes (a writer that flushed early, or UNION ALL's seams):
                # a row's group by binary search over the groups' first rows, a few
                # comparisons per row, rather than a range join.
                query = (
                    f"SELECT * EXCLUDE ({POSITION}) FROM {rows_of} "
                    f"ORDER BY {_group_of(spans, 0, len(spans))} DESC, {POSITION}"
                )
            what = f"its {len(spans)} row groups in reverse"
        elif variant == 2:
            query = f"SELECT * EXCLUDE ({POSITION}) FROM {rows_of} ORDER BY {POSITION} DESC"
            what = "reversed"
        else:
            query = (
                f"SELECT * EXCLUDE ({POSITION}) FROM {rows_of} "
                f"ORDER BY hash({POSITION}, {variant}), {POSITION}"
            )
            what = f"shuffled with seed {variant}"
        copy_ordered(con, query, target)
    return Applied(f"{artifact}: the same {rows:,} rows, {what}")
