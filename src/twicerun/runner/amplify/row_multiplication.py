"""Row multiplication: more rows of the same shape.

The input is written `factor` times over, one copy after another. The most
distinct column is kept distinct where it can be (an integer is shifted past
the column's range for each copy, a string gets a copy suffix), so an id stays
an id; every other column keeps its values, so each tie group grows too.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from twicerun import sql
from twicerun.compare.columns import INTEGER_IDS
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

FACTOR = 2
# Shifted through HUGEINT and BIGINT below, which a UHUGEINT past 2**127 would overflow.
_SHIFTABLE = INTEGER_IDS - {"uhugeint"}


def multiply_rows(
    con: duckdb.DuckDBPyConnection,
    source: Path,
    target: Path,
    *,
    artifact: str,
    factor: int = FACTOR,
    facts: Facts | None = None,
) -> Outcome:
    rows, facts = facts or column_facts(con, source)
    if rows == 0:
        return Declined(f"{artifact} has no rows to multiply")
    keep = most_distinct(facts)
    shift = None
    if keep is not None and keep.type.id in _SHIFTABLE:
        low, high = con.execute(
            f"SELECT min({keep.sql})::HUGEINT, max({keep.sql})::HUGEINT FROM {sql.parquet(source)}"
        ).fetchone()
        if low is not None:
            span = high - low + 1
            # Widen to BIGINT and give up the shift where even that would overflow.
            if high + span * (factor - 1) < 2**63:
                shift = f"({keep.sql}::BIGINT + copy * {span})"
    if shift is None and keep is not None and keep.type.id == "varchar":
        shift = f"CASE WHEN copy = 0 THEN {keep.sql} ELSE {keep.sql} || '#' || copy END"
    replace = f" REPLACE ({shift} AS {keep.sql})" if shift and keep else ""
    query = (
        f"SELECT * EXCLUDE (copy, file_row_number){replace} FROM {numbered(source)}, "
        f"range({factor}) c(copy) ORDER BY copy, file_row_number"
    )
    copy_ordered(con, query, target)
    return Applied(f"{artifact} {rows:,} rows to {rows * factor:,}")
