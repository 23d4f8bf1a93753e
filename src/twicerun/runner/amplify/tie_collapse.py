"""Tie collapse: more rows sharing each value, in the columns a sort or partition could tie on.

Every exact column except the most distinct one (usually an id, left intact so
a correct tiebreak on it still works) whose density is below the target is
folded into ceil(rows / target) buckets, and every value is replaced by another
real value of the same column: the k-th distinct value (in sort order) by the
(k mod buckets)-th. Row order is kept, so this changes tie density and nothing
else. A column already at or past the target is left alone.
"""

from __future__ import annotations

import math
from pathlib import Path

import duckdb

from twicerun.compare.columns import ColumnClass
from twicerun.runner.amplify.base import (
    Applied,
    Declined,
    Facts,
    Outcome,
    column_facts,
    copy_ordered,
    most_distinct,
    numbered,
)

ROWS_PER_VALUE = 500


def collapse_ties(
    con: duckdb.DuckDBPyConnection,
    source: Path,
    target: Path,
    *,
    artifact: str,
    rows_per_value: int = ROWS_PER_VALUE,
    facts: Facts | None = None,
) -> Outcome:
    rows, facts = facts or column_facts(con, source)
    if rows == 0:
        return Declined(f"{artifact} has no rows")
    exact = [c for c in facts if c.cls is ColumnClass.EXACT]
    keep = most_distinct(exact)
    candidates = [c for c in exact if keep is not None and c.name != keep.name]
    if not candidates:
        return Declined(
            f"{artifact} has no exact column besides its most distinct one"
            + (f" ({keep.name})" if keep else "")
            + ", so nothing could tie"
        )
    buckets = max(1, math.ceil(rows / rows_per_value))
    chosen = [c for c in candidates if c.distinct > buckets]
    if not chosen:
        densest = min(candidates, key=lambda c: rows / max(c.distinct, 1))
        return Declined(
            f"every column of {artifact} that could tie already has {rows / max(densest.distinct, 1):,.0f} "
            f"or more rows per value, at or past the {rows_per_value:,} this amplifier aims for"
        )
    maps = []
    replace = []
    for i, c in enumerate(chosen):
        # Each distinct value, numbered in sort order once; value k takes the value
        # numbered k mod buckets, so every substitute is a real value of the column.
        maps.append(
            f"r{i} AS (SELECT v, row_number() OVER (ORDER BY v) - 1 AS k FROM "
            f"(SELECT DISTINCT {c.sql} AS v FROM src WHERE {c.sql} IS NOT NULL)), "
            f"m{i} AS (SELECT o.v AS old, n.v AS new FROM r{i} o JOIN r{i} n ON n.k = o.k % {buckets})"
        )
        replace.append(f"m{i}.new AS {c.sql}")
    joins = " ".join(f"LEFT JOIN m{i} ON src.{c.sql} = m{i}.old" for i, c in enumerate(chosen))
    query = (
        f"WITH src AS (SELECT * FROM {numbered(source)}), "
        f"{', '.join(maps)} "
        f"SELECT src.* EXCLUDE (file_row_number) REPLACE ({', '.join(replace)}) FROM src {joins} "
        f"ORDER BY src.file_row_number"
    )
    copy_ordered(con, query, target)
    detail = "; ".join(
        f"{artifact}.{c.name} into {buckets:,} values, from {rows / c.distinct:,.0f} to "
        f"{rows / buckets:,.0f} rows per value"
        for c in chosen
    )
    return Applied(detail)
