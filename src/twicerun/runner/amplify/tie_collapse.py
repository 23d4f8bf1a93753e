"""Tie collapse: more rows sharing each value, in the columns a sort or partition could tie on.

Every exact column except the ones kept intact (each column with a different
value on every row, or else the most distinct one: usually an id, left so a
correct tiebreak on it still works) whose density is below the target is
folded into ceil(rows / target) buckets, and never fewer than two, and every
value is replaced by another real value of the same column: the distinct values,
in sort order, are cut into that many runs of consecutive values, and each run
takes one value spaced evenly between the column's least and greatest, both
included. Folding keeps the values' order (a value never passes one it was
below), and the extremes are where the ties are, so a top N in either direction
meets them. One value would make the column a constant and take away every
difference between its rows. Row order is kept, so this changes tie density and
nothing else. A column already at or past the target is left alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from twicerun import sql
from twicerun.compare.columns import ColumnClass
from twicerun.runner.amplify.base import (
    POSITION,
    Applied,
    ColumnFacts,
    Declined,
    Facts,
    Outcome,
    column_facts,
    copy_ordered,
    kept_intact,
    numbered,
)

ROWS_PER_VALUE = 500
# A column folded into one value would be a constant: every difference between its rows,
# which another stress (rows in another order) could have shown, gone.
MIN_VALUES = 2


@dataclass(frozen=True)
class Collapse:
    """Which columns fold into how many values: the plan, before any row is written."""

    chosen: tuple[ColumnFacts, ...]
    buckets: int
    detail: str

    def ctes(self, src: str = "src") -> list[str]:
        """One value map per chosen column, over the relation `src`."""
        maps = []
        b = self.buckets
        for i, c in enumerate(self.chosen):
            # Each of the n distinct values, numbered k in sort order once; value k is in
            # run k * b // n and takes the value numbered round(run * (n - 1) / (b - 1)),
            # so every substitute is a real value of the column, the first run takes the
            # least and the last the greatest. b >= 2 and n > b (plan_collapse).
            maps.append(
                f"r{i} AS (SELECT v, row_number() OVER (ORDER BY v) - 1 AS k, "
                f"count(*) OVER () AS n FROM "
                f"(SELECT DISTINCT {c.sql} AS v FROM {src} WHERE {c.sql} IS NOT NULL)), "
                f"m{i} AS (SELECT o.v AS old, t.v AS new FROM r{i} o JOIN r{i} t "
                f"ON t.k = ((o.k * {b} // o.n) * (o.n - 1) * 2 + {b - 1}) // ({2 * (b - 1)}))"
            )
        return maps

    def select(self, src: str = "src") -> str:
        """Every column of `src` (its POSITION too), the chosen ones folded. The
        joins do not keep row order: a caller that writes these rows sorts them."""
        folded = ", ".join(f"m{i}.new AS {c.sql}" for i, c in enumerate(self.chosen))
        joins = " ".join(
            f"LEFT JOIN m{i} ON {src}.{c.sql} = m{i}.old" for i, c in enumerate(self.chosen)
        )
        return f"SELECT {src}.* REPLACE ({folded}) FROM {src} {joins}"

    def facts(self, facts: Facts) -> Facts:
        """The facts of the collapsed rows, without counting them again: a chosen column
        had more distinct values than buckets, and each of its runs of values went to a
        value of its own, so it now has exactly `buckets`; the row count and every other
        column are as they were."""
        rows, columns = facts
        chosen = {c.name for c in self.chosen}
        return rows, [replace(c, distinct=self.buckets) if c.name in chosen else c for c in columns]


def plan_collapse(
    facts: Facts, *, artifact: str, rows_per_value: int = ROWS_PER_VALUE
) -> Collapse | Declined:
    rows, columns = facts
    if rows == 0:
        return Declined(f"{artifact} has no rows")
    exact = [c for c in columns if c.cls is ColumnClass.EXACT]
    keep = kept_intact(rows, exact)
    candidates = [c for c in exact if c.name not in {k.name for k in keep}]
    # A list, struct or map can tie as well, and is never folded: a decline says so
    # rather than claim nothing could tie.
    nested = [sql.shown(c.name) for c in columns if c.cls is ColumnClass.NESTED_EXACT]
    unfolded = f" ({', '.join(nested)}: lists, structs and maps are not folded)" if nested else ""
    if not candidates:
        besides = f" besides {_kept(keep)}" if keep else ""
        return Declined(f"{artifact} has no exact column{besides}, so nothing could tie{unfolded}")
    buckets = max(MIN_VALUES, math.ceil(rows / rows_per_value))
    chosen = [c for c in candidates if c.distinct > buckets]
    if not chosen:
        densest = min(candidates, key=lambda c: rows / max(c.distinct, 1))
        per_value = rows / max(densest.distinct, 1)
        if per_value >= rows_per_value:
            return Declined(
                f"every column of {artifact} that could tie already has {per_value:,.0f} "
                f"or more rows per value, at or past the {rows_per_value:,} this amplifier aims "
                f"for{unfolded}"
            )
        # Fewer rows than the target per value, but no column has more values than the
        # buckets it would be folded into (a small input's column of one or two values).
        most = max(c.distinct for c in candidates)
        return Declined(
            f"every column of {artifact} that could tie has {_count(most, 'value')} or fewer "
            f"across its {_count(rows, 'row')}, no more than folding would leave (one value "
            f"per {rows_per_value:,} rows, and never fewer than {MIN_VALUES}), so there is "
            f"nothing to fold{unfolded}"
        )
    detail = "; ".join(
        f"{artifact}.{sql.shown(c.name)} into {_count(buckets, 'value')}, from {rows / c.distinct:,.0f} to "
        f"{rows / buckets:,.0f} rows per value"
        for c in chosen
    )
    return Collapse(tuple(chosen), buckets, detail)


def _kept(keep: list[ColumnFacts]) -> str:
    if len(keep) == 1 and not keep[0].joint:
        return f"its most distinct one ({sql.shown(keep[0].name)})"
    single = ", ".join(sql.shown(c.name) for c in keep if not c.joint)
    joint = ", ".join(sql.shown(c.name) for c in keep if c.joint)
    if not joint:
        return f"its keys ({single}: each has a different value on every row, and is kept so)"
    parts = [f"{single}: a different value on every row"] if single else []
    parts.append(f"{joint}: a key when taken two to five together")
    return f"its keys ({'; '.join(parts)}; each is kept so)"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def collapse_ties(
    con: duckdb.DuckDBPyConnection,
    source: Path,
    target: Path,
    *,
    artifact: str,
    rows_per_value: int = ROWS_PER_VALUE,
    facts: Facts | None = None,
) -> Outcome:
    plan = plan_collapse(
        facts or column_facts(con, source), artifact=artifact, rows_per_value=rows_per_value
    )
    if isinstance(plan, Declined):
        return plan
    with numbered(con, source) as rows_of:
        query = (
            f"WITH src AS (SELECT * FROM {rows_of}), {', '.join(plan.ctes())}, "
            f"collapsed AS ({plan.select()}) "
            f"SELECT * EXCLUDE ({POSITION}) FROM collapsed ORDER BY {POSITION}"
        )
        copy_ordered(con, query, target)
    return Applied(plan.detail)
