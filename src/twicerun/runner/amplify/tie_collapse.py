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

A column that decides another in the input (each `user_id` with one `user_name`, one
`unit_price` per `product_id`) moves with it: such columns are folded as one, each row
taking all of their values from one row of the input, so what one decides it still
decides. Folded apart, two users merged into one `user_id` kept their two names, and a
correct `any_value(user_name) ... GROUP BY user_id` fired.

Three relations between rows are kept as well (since 0.7.14): a signed column whose values
come in opposite pairs (a ledger's two legs) is folded by absolute value, each row keeping
its sign (kept_opposite); a column that links rows into trees (a node's parent) is not
folded at all (kept_references), nor, since 0.7.15, what such a tree carries from parent
to child (a depth, a path), nor a running quantity carried from row to row, with what is
folded together with it (kept_chains). `planned` applies every rule.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import duckdb

from twicerun import sql
from twicerun.compare.columns import INTEGER_IDS, TIMESTAMP_IDS, ColumnClass
from twicerun.display import listed
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
# How far up a tree kept_references follows links before it calls them circular, and
# from how many rows (the first by key): links that go round in circles send most rows
# round them, so a thousand starts find them at a bounded cost on any input.
MAX_DEPTH = 64
WALKS = 1000
# A column folded into one value would be a constant: every difference between its rows,
# which another stress (rows in another order) could have shown, gone.
MIN_VALUES = 2


class Unit(NamedTuple):
    """Columns folded as one: `lead` (a chosen column) orders them, and each row takes the
    values of every column in `moved` from the one row that gives it its new `lead`."""

    lead: ColumnFacts
    moved: tuple[ColumnFacts, ...] = ()
    # Where the lead's values come in opposite pairs (kept_opposite): its absolute values
    # other than zero are folded into this many, and each row keeps its sign; 0 for the
    # usual fold.
    halves: int = 0
    # Whether the lead holds zero, which has no opposite and is left as it is.
    zero: bool = False

    @property
    def columns(self) -> tuple[ColumnFacts, ...]:
        return (self.lead, *self.moved)


@dataclass(frozen=True)
class Collapse:
    """Which columns fold into how many values: the plan, before any row is written."""

    chosen: tuple[ColumnFacts, ...]
    buckets: int
    detail: str
    # Each chosen column on its own, unless the input ties it to others (dependent_units).
    units: tuple[Unit, ...] = ()

    def __post_init__(self):
        if not self.units:
            object.__setattr__(self, "units", tuple(Unit(c) for c in self.chosen))

    def ctes(self, src: str = "src") -> list[str]:
        """One value map per unit, over the relation `src` (numbered: POSITION)."""
        maps = []
        b = self.buckets
        # Each of the n distinct values (or combinations), numbered k in sort order once;
        # k is in run k * b // n and takes the one numbered round(run * (n - 1) / (b - 1)),
        # so every substitute is real, the first run takes the least and the last the
        # greatest. b >= 2 and n > b (plan_collapse).
        pick = f"t.k = ((o.k * {b} // o.n) * (o.n - 1) * 2 + {b - 1}) // ({2 * (b - 1)})"
        for i, unit in enumerate(self.units):
            c = unit.lead
            if unit.halves:
                h = unit.halves
                half = f"t.k = ((o.k * {h} // o.n) * (o.n - 1) * 2 + {h - 1}) // ({2 * (h - 1)})"
                maps.append(
                    f"r{i} AS (SELECT v, row_number() OVER (ORDER BY v) - 1 AS k, "
                    f"count(*) OVER () AS n FROM "
                    f"(SELECT DISTINCT abs({c.sql}) AS v FROM {src} WHERE {c.sql} <> 0)), "
                    f"m{i} AS (SELECT o.v AS old, t.v AS new FROM r{i} o JOIN r{i} t ON {half})"
                )
                continue
            if not unit.moved:
                maps.append(
                    f"r{i} AS (SELECT v, row_number() OVER (ORDER BY v) - 1 AS k, "
                    f"count(*) OVER () AS n FROM "
                    f"(SELECT DISTINCT {c.sql} AS v FROM {src} WHERE {c.sql} IS NOT NULL)), "
                    f"m{i} AS (SELECT o.v AS old, t.v AS new FROM r{i} o JOIN r{i} t ON {pick})"
                )
                continue
            # A combination is known by its hash and stands for the first row holding it; two
            # combinations sharing a hash share a substitute, which is still one real row.
            values = ", ".join(f"s.{m.sql}" for m in unit.columns)
            maps.append(
                f"r{i} AS (SELECT h, p, row_number() OVER (ORDER BY v, h) - 1 AS k, "
                f"count(*) OVER () AS n FROM (SELECT {_combination(unit, src)} AS h, "
                f"min({src}.{c.sql}) AS v, min({POSITION}) AS p FROM {src} "
                f"WHERE {src}.{c.sql} IS NOT NULL GROUP BY h)), "
                f"m{i} AS (SELECT o.h AS old, {values} FROM r{i} o JOIN r{i} t ON {pick} "
                f"JOIN {src} s ON s.{POSITION} = t.p)"
            )
        return maps

    def select(self, src: str = "src") -> str:
        """Every column of `src` (its POSITION too), the chosen ones folded. The
        joins do not keep row order: a caller that writes these rows sorts them."""
        folded, joins = [], []
        for i, unit in enumerate(self.units):
            if unit.halves:
                c = unit.lead.sql
                # Zero has no opposite and stays zero; no other value becomes zero.
                folded.append(
                    f"CASE WHEN {src}.{c} < 0 THEN -m{i}.new WHEN {src}.{c} > 0 THEN m{i}.new "
                    f"ELSE {src}.{c} END AS {c}"
                )
                joins.append(f"LEFT JOIN m{i} ON abs({src}.{c}) = m{i}.old")
                continue
            if not unit.moved:
                folded.append(f"m{i}.new AS {unit.lead.sql}")
                joins.append(f"LEFT JOIN m{i} ON {src}.{unit.lead.sql} = m{i}.old")
                continue
            # A row whose lead is NULL has no substitute and keeps all of its values.
            folded += [
                f"CASE WHEN m{i}.old IS NULL THEN {src}.{m.sql} ELSE m{i}.{m.sql} END AS {m.sql}"
                for m in unit.columns
            ]
            joins.append(f"LEFT JOIN m{i} ON {_combination(unit, src)} = m{i}.old")
        return f"SELECT {src}.* REPLACE ({', '.join(folded)}) FROM {src} {' '.join(joins)}"

    def facts(self, facts: Facts) -> Facts:
        """The facts of the collapsed rows, without counting them again: a chosen column
        had more distinct values than buckets, and each of its runs of values went to a
        value of its own, so it now has exactly `buckets`; a column moved with it has at
        most that many (counted as its old count where that was fewer); the row count
        and every other column are as they were."""
        rows, columns = facts
        chosen = {c.name for c in self.chosen}
        moved = {m.name for u in self.units for m in u.moved}
        paired = {u.lead.name: 2 * u.halves + u.zero for u in self.units if u.halves}
        return rows, [
            replace(c, distinct=paired[c.name])
            if c.name in paired
            else replace(c, distinct=self.buckets)
            if c.name in chosen
            else replace(c, distinct=min(c.distinct, self.buckets))
            if c.name in moved
            else c
            for c in columns
        ]


def _decided_together(
    con: duckdb.DuckDBPyConnection,
    source: Path,
    plan: Collapse,
    pool: list[ColumnFacts],
    decides: dict[str, set[str]],
) -> list[tuple[ColumnFacts, tuple[ColumnFacts, ...], list[ColumnFacts]]]:
    """Columns that a chosen column decides together with one or two columns of few values
    that are not folded: a price per product and region, a budget per account and month, a
    price per product, region and tier. Folding the product alone merged products whose
    prices differ within a region, and a step taking `any_value(unit_price)` per product
    and region fired.

    Each such set (x and its contexts) is one grouping, a sixteenth of x's values first. A
    column the contexts decide on their own is left out, since folding x does not touch
    that, which costs one grouping by them. At most MAX_PAIRS pairs, the fewest values
    first, and then MAX_TRIPLES triples, for what no pair decided: on an input of many such
    columns, a price that a set further down decides is folded apart as before. Then two
    chosen columns together (a price per customer and product), and two or three contexts
    that decide a chosen column (a price per product and day), each bounded the same way. Each
    find is (x, the columns with it, what they decide), and all of them join x's unit."""
    chosen = {c.name for c in plan.chosen}
    contexts = sorted(
        (
            c
            for c in pool
            if c.name not in chosen and c.cls is ColumnClass.EXACT and c.distinct <= plan.buckets
        ),
        key=lambda c: c.distinct,
    )
    alone: dict[tuple[str, ...], tuple[set[str], int]] = {}

    def grouped_by(zs: tuple[ColumnFacts, ...]) -> tuple[set[str], int]:
        """What the contexts `zs` decide on their own, and on how many of their
        combinations that could be told (those on two rows or more)."""
        key = tuple(z.name for z in zs)
        if key not in alone:
            most = math.prod(z.distinct for z in zs)
            others = [y for y in pool if y.name not in key and y.distinct <= most]
            same, repeated = (
                _same_in_groups(con, source, list(zs), others, "true") if others else ({}, 0)
            )
            alone[key] = ({name for name, flag in same.items() if flag}, repeated)
        return alone[key]

    def decided_by(zs: tuple[ColumnFacts, ...]) -> set[str]:
        return grouped_by(zs)[0]

    found: list[tuple[ColumnFacts, tuple[ColumnFacts, ...], list[ColumnFacts]]] = []
    leads = sorted(plan.chosen, key=lambda c: c.distinct)[:MAX_DETERMINANTS]
    for size, budget in ((1, MAX_PAIRS), (2, MAX_TRIPLES)):
        for x in leads:
            if budget <= 0:
                break
            # Triples among the few contexts with the fewest values only: each is a grouping
            # of the contexts alone before the one that counts, and 50 contexts make 1,225.
            for zs in itertools.combinations(contexts if size == 1 else contexts[:4], size):
                if budget <= 0:
                    break
                names = {x.name, *(z.name for z in zs)}
                # What x decides alone, or with a smaller set already found, is settled.
                settled = decides.get(x.name, set()) | {
                    y.name for lead, _, ys in found if lead is x for y in ys
                }
                most = x.distinct * math.prod(z.distinct for z in zs)
                targets = [
                    y
                    for y in pool
                    if y.name not in names and y.name not in settled and y.distinct <= most
                ]
                if size > 1 and targets:
                    budget -= 1  # the grouping by the contexts alone counts, for triples
                targets = [y for y in targets if y.name not in decided_by(zs)] if targets else []
                if not targets:
                    continue
                if size == 1:
                    budget -= 1
                targets, repeated = _one_value_within(con, source, [x, *zs], targets)
                if targets and repeated >= MIN_REPEATED:
                    found.append((x, zs, targets))
    # Two columns that are both folded can decide a third together: a negotiated price per
    # customer and product, where there are too many of each to be a context. Folded apart,
    # merged customers and merged products kept their prices, and a correct any_value(price)
    # per customer and product fired. What either decides alone is known already (`decides`,
    # for the chosen columns asked), so each pair costs its own grouping only; at most
    # MAX_PAIRS of them, the columns with the fewest values first.
    budget = MAX_PAIRS
    for i, x in enumerate(leads):
        for z in leads[i + 1 :]:
            if budget <= 0:
                break
            settled = decides.get(x.name, set()) | decides.get(z.name, set())
            settled |= {y.name for lead, _, ys in found if lead in (x, z) for y in ys}
            targets = [y for y in pool if y.name not in (x.name, z.name, *settled)]
            if not targets:
                continue
            budget -= 1
            targets, repeated = _one_value_within(con, source, [x, z], targets)
            if targets and repeated >= MIN_REPEATED:
                found.append((x, (z,), targets))
    # A chosen column that two contexts (or three) decide together, a daily price per
    # product and day:
    # folded on its own it keeps that (a fold is a function of the value), but the joint
    # probe folds only its added copy, which then gave each product and day of the first
    # copy a second price, and a correct any_value(price) per product and day fired. Folded
    # with the two, each added row takes all three from one real row, which agrees with the
    # first copy. At most MAX_TRIPLES such questions, each one grouping by the two.
    budget = MAX_TRIPLES
    for x in leads:
        # Three as well, a daily rate per region and tier, among the same four.
        sets = [zs for size in (2, 3) for zs in itertools.combinations(contexts[:4], size)]
        for zs in sets:
            if budget <= 0:
                return found
            if math.prod(z.distinct for z in zs) < x.distinct:
                continue  # fewer combinations than x has values: they cannot decide it
            budget -= 1
            key = tuple(z.name for z in zs)
            if key in alone:  # asked of every column already, for the triples above
                decided, repeated = alone[key]
                decides_x = x.name in decided
            else:  # asked of x alone: one aggregate, where every column made it 0.9 s
                same, repeated = _same_in_groups(con, source, list(zs), [x], "true")
                decides_x = same[x.name]
            if decides_x and repeated >= MIN_REPEATED:
                found.append((x, zs, []))
                break
    return found


def _one_value_within(
    con: duckdb.DuckDBPyConnection,
    source: Path,
    by: list[ColumnFacts],
    targets: list[ColumnFacts],
) -> tuple[list[ColumnFacts], int]:
    """Those of `targets` with one value on the rows of every combination of `by`, and on
    how many combinations that could be told; asked first of the rows of a sixteenth of the
    first column's values, which rules most columns out at a sixteenth of the cost, and then
    of every row for the columns left."""
    repeated = 0
    for subset in (f"hash({by[0].sql}) % {SUBSET} = 0", "true"):
        if targets:
            same, repeated = _same_in_groups(con, source, by, targets, subset)
            targets = [y for y in targets if same[y.name]]
    return targets, repeated


def _same_in_groups(
    con: duckdb.DuckDBPyConnection,
    source: Path,
    by: list[ColumnFacts],
    others: list[ColumnFacts],
    subset: str,
) -> tuple[dict[str, bool], int]:
    """For each column of `others`, whether it has one value (NULL counting as one) on
    all the rows of every combination of `by`'s values (none NULL), among the rows
    `subset` keeps; and how many combinations are on two rows or more, the only ones
    that can rule a column out. A subset with no such row (a NULL from bool_and) rules
    nothing out."""
    same: dict[str, bool] = {}
    grouped = ", ".join(c.sql for c in by)
    present = " AND ".join(f"{c.sql} IS NOT NULL" for c in by)
    repeated = 0
    for start in range(0, len(others), DEPENDENTS_PER_QUERY):
        batch = others[start : start + DEPENDENTS_PER_QUERY]
        flags = ", ".join(f"bool_and(d{j})" for j in range(len(batch)))
        named = ", ".join(
            f"min(hash({y.sql})) = max(hash({y.sql})) AS d{j}" for j, y in enumerate(batch)
        )
        repeated, *row = con.execute(
            f"SELECT count(*) FILTER (WHERE n > 1), {flags} FROM (SELECT count(*) AS n, {named} "
            f"FROM {sql.parquet(source)} WHERE {present} AND {subset} GROUP BY {grouped})"
        ).fetchone()
        same.update({y.name: flag is not False for y, flag in zip(batch, row, strict=True)})
    return same, repeated


def _combination(unit: Unit, src: str) -> str:
    return f"hash({', '.join(f'{src}.{m.sql}' for m in unit.columns)})"


# Columns whose dependence on one chosen column is checked in one query, at most: the
# check is two plain aggregates per column, and a wide input is checked in batches.
DEPENDENTS_PER_QUERY = 64
SUBSET = 16
MAX_DETERMINANTS = 16
MAX_PAIRS = 4
MAX_TRIPLES = 4
# A column is taken to depend on another only where ten values of that one or more sit
# on two rows or more: a column with no repeated value is decided by it and everything
# else alike, by chance, and a balanced two-valued column agrees within ten pairs of rows
# one time in a thousand.
MIN_REPEATED = 10


def kept_references(
    con: duckdb.DuckDBPyConnection, source: Path, plan: Collapse, facts: Facts, *, artifact: str
) -> Collapse | Declined:
    """`plan` without the chosen columns that link the input's rows into trees: every value
    of the column is a value of a key of the same input (a node's `parent_id` among the
    `node_id`s, a manager among the employees), some rows are roots (the column NULL),
    most of which have children, and following the links up from the first WALKS rows
    reaches a root within MAX_DEPTH steps.

    Folding such a column onto a few real ids remade the links: parents of parents came
    round to themselves, and a correct step walking up from each node with a recursive
    query never ended, while one walking down from the roots lost every node under a
    cycle. Left as it is, the trees are the input's. Values alone would also take a column
    of small ids for a link into a key of consecutive numbers (products 1 to 50,000 beside
    updates numbered 1 to 100,000); such a column has no NULL, or its links go round in
    circles, and it is folded as before, as is a tree whose roots point to themselves.
    What a tree carries from parent to child is left as it is too (_carried_down).
    One scan per column with a key of its type, and for a column with NULLs one query of
    its values, one of its roots and one walk up per such key; one query more per tree
    found."""
    rows, columns = facts
    keys = [
        k
        for k in kept_intact(rows, [c for c in columns if c.cls is ColumnClass.EXACT])
        if not k.joint and k.distinct == rows
    ]
    refers: dict[str, str] = {}
    src = f"(SELECT * FROM {sql.parquet(source)})"
    for c in plan.chosen:
        alike = [
            k
            for k in keys
            if (c.type.id in INTEGER_IDS and k.type.id in INTEGER_IDS) or str(c.type) == str(k.type)
        ]
        if not alike:
            continue
        # The roots first: one scan, and no column of ids without NULLs goes further.
        link = c.sql
        ((roots,),) = con.execute(f"SELECT count(*) FROM {src} WHERE {link} IS NULL").fetchall()
        if not roots:
            continue
        for k in alike:
            key = k.sql
            ((outside,),) = con.execute(
                f"SELECT count(*) FROM (SELECT DISTINCT {link} AS v FROM {src} "
                f"WHERE {link} IS NOT NULL) d ANTI JOIN {src} s ON d.v = s.{key}"
            ).fetchall()
            if outside:
                continue
            # A tree's roots head trees: most have children. A nullable column of small ids
            # (a store, 1 to 50) inside a key numbered 0 to n has its NULLs on rows nobody
            # points to, and its walks end on them as quickly as a tree's do.
            ((roots, heads),) = con.execute(
                f"SELECT count(*), count(*) FILTER (WHERE r.{key} IN (SELECT {link} FROM "
                f"{src} WHERE {link} IS NOT NULL)) FROM {src} r WHERE r.{link} IS NULL"
            ).fetchall()
            if 2 * heads < roots:
                continue
            ((endless,),) = con.execute(
                f"WITH RECURSIVE s AS (SELECT {key} AS k, {link} AS up FROM {src} "
                f"WHERE {link} IS NOT NULL AND {link} <> {key}), "
                f"starts AS (SELECT up FROM s ORDER BY k LIMIT {WALKS}), "
                f"walk(node, depth) AS (SELECT up, 1 FROM starts UNION ALL "
                f"SELECT s.up, walk.depth + 1 FROM walk JOIN s ON s.k = walk.node "
                f"WHERE walk.depth < {MAX_DEPTH}) "
                f"SELECT count(*) FILTER (WHERE depth = {MAX_DEPTH}) FROM walk"
            ).fetchall()
            if not endless:
                refers[c.name] = k.name
                break
    if not refers:
        return plan
    said = "; ".join(
        f"{artifact}.{sql.shown(c)} left as it is (it links each row to another's "
        f"{sql.shown(k)}, into trees, which folding it would remake)"
        for c, k in refers.items()
    )
    rest = [c for c in plan.chosen if c.name not in refers]
    carried = _carried_down(con, src, refers, rest, rows)
    if carried:
        said += "; " + "; ".join(
            f"{artifact}.{sql.shown(c)} left as it is (on every row it follows from the "
            f"parent's, {how}, which folding would break)"
            for c, how in carried.items()
        )
    left = tuple(c for c in rest if c.name not in carried)
    if not left:
        what = "links its rows into trees" + (" or is carried down them" if carried else "")
        return Declined(f"every column of {artifact} that could tie {what}: {said}")
    detail = "; ".join(_folded(artifact, c, rows, plan.buckets) for c in left)
    return Collapse(left, plan.buckets, f"{detail}; {said}")


def _carried_down(
    con: duckdb.DuckDBPyConnection,
    src: str,
    refers: dict[str, str],
    columns: list[ColumnFacts],
    rows: int,
) -> dict[str, str]:
    """Of `columns`, those carried down the trees `refers` makes (link column to key):
    on every row with a parent, the column is the parent's plus one step that is the same
    on every row and not zero (a depth, a level), or, for text, starts with the parent's
    (a path). Folded, a child's depth stopped being one below its parent's, and a correct
    step checking it raised (a contract-only probe, unseen129, AMPLIFICATION_FAILED). A
    column equal to its parent's on every row (a tree's root) is left to fold: the fold
    maps equal values to equal values, so it stays equal. Over most of the rows only,
    since a handful of links says nothing. One query per link."""
    carried: dict[str, str] = {}
    for link, key in refers.items():
        tests, kinds = [], []
        for c in columns:
            child, parent = f"c.{c.sql}", f"p.{c.sql}"
            if c.name in carried:
                continue
            if c.type.id in INTEGER_IDS or c.type.id == "decimal":
                if c.type.id in INTEGER_IDS:
                    child, parent = (
                        f"TRY_CAST({child} AS HUGEINT)",
                        f"TRY_CAST({parent} AS HUGEINT)",
                    )
                step = f"{child} - {parent}"
                tests.append(
                    f"count(*) FILTER (WHERE {step} IS NULL OR {step} = 0) "
                    f"+ count(DISTINCT {step}) - 1"
                )
                kinds.append((c.name, "one step on from it"))
            elif c.type.id == "varchar":
                tests.append(
                    f"count(*) FILTER (WHERE {child} IS NULL OR {parent} IS NULL "
                    f"OR {child} = {parent} OR NOT starts_with({child}, {parent}))"
                )
                kinds.append((c.name, "starting with it"))
        if not tests:
            continue
        try:
            pairs, *counts = con.execute(
                f"SELECT count(*), {', '.join(tests)} FROM {src} c "
                f"JOIN {src} p ON c.{sql.identifier(link)} = p.{sql.identifier(key)}"
            ).fetchall()[0]
        except duckdb.Error:
            continue  # a difference out of range: not a step, whatever else it is
        if pairs < rows / 2:
            continue
        for (name, how), differ in zip(kinds, counts, strict=True):
            if differ == 0:
                carried[name] = how
    return carried


# Column pairs kept_chains compares in one query, at most.
MAX_CHAINED = 24


def kept_chains(
    con: duckdb.DuckDBPyConnection, source: Path, plan: Collapse, facts: Facts, *, artifact: str
) -> Collapse | Declined:
    """`plan` without the units whose columns carry a running quantity from row to row:
    on every row, column A is column B's value on the row before, in the order a key of
    the input gives (a stock item's `qty_before` is its `qty_after` of the movement
    before, by `seq`; an account's opening balance is its last closing one).

    Folding gave each row the values of some other row, so the chain broke wherever two
    neighbours took theirs from different rows, and a correct step checking it raised (a
    contract-only probe, unseen117: 11,159 breaks in 12,000 movements, AMPLIFICATION_FAILED).
    The whole unit is left as it is, so what its columns add up to on a row holds too.
    The orders tried are a key's numeric, date or timestamp column, alone or within the
    other column of a key of two; one query per order, comparing every pair of numeric
    columns of the units folded."""
    rows, columns = facts
    numeric = INTEGER_IDS | {"decimal"}
    folded = [c for u in plan.units for c in u.columns if c.type.id in numeric]
    pairs = [(a, b) for a in folded for b in folded if a.name != b.name][:MAX_CHAINED]
    if not pairs:
        return plan
    ordered = INTEGER_IDS | {"date"} | TIMESTAMP_IDS
    orders: list[tuple[str, str]] = []  # (PARTITION BY ..., ORDER BY ...)
    for c in columns:
        if c.distinct == rows and rows > 1 and c.type.id in ordered:
            orders.append(("", c.sql))
        for key in c.keys:
            if len(key) == 2 and c.type.id in ordered:
                (other,) = [n for n in key if n != c.name]
                orders.append((f"PARTITION BY {sql.identifier(other)} ", c.sql))
    chained: set[str] = set()
    for over, by in orders:
        tests = ", ".join(
            f"count(*) FILTER (WHERE p{i} IS NOT NULL AND p{i} IS DISTINCT FROM {a.sql}), "
            f"count(*) FILTER (WHERE p{i} IS NOT NULL)"
            for i, (a, _) in enumerate(pairs)
        )
        lags = ", ".join(
            f"lag({b.sql}) OVER ({over}ORDER BY {by}) AS p{i}" for i, (_, b) in enumerate(pairs)
        )
        counts = con.execute(
            f"SELECT {tests} FROM (SELECT *, {lags} FROM {sql.parquet(source)})"
        ).fetchall()[0]
        for i, (a, b) in enumerate(pairs):
            differ, compared = counts[2 * i], counts[2 * i + 1]
            # Most of the rows: a chain over a handful of rows is chance.
            if differ == 0 and compared >= rows / 2:
                chained |= {a.name, b.name}
    if not chained:
        return plan
    gone = [u for u in plan.units if {c.name for c in u.columns} & chained]
    left = tuple(u for u in plan.units if u not in gone)
    said = "; ".join(
        f"{artifact}.{sql.shown(u.lead.name)} left as it is"
        + (f", with {listed([sql.shown(m.name) for m in u.moved])}" if u.moved else "")
        + " (on every row one column is another's value on the row before, in the input's "
        "order, a running quantity that folding would break)"
        for u in gone
    )
    if not left:
        return Declined(
            f"every column of {artifact} that could tie carries a running quantity: {said}"
        )
    prefixes = tuple(f"{artifact}.{sql.shown(u.lead.name)} into " for u in gone)
    kept = [part for part in plan.detail.split("; ") if not part.startswith(prefixes)]
    leads = {u.lead.name for u in left}
    return Collapse(
        tuple(c for c in plan.chosen if c.name in leads),
        plan.buckets,
        "; ".join([*kept, said]),
        left,
    )


def planned(
    con: duckdb.DuckDBPyConnection,
    source: Path,
    facts: Facts,
    *,
    artifact: str,
    rows_per_value: int = ROWS_PER_VALUE,
) -> Collapse | Declined:
    """What tie collapse folds in `source`, every rule applied: the columns that could tie
    (plan_collapse), less those that link rows into trees or are carried down them
    (kept_references), with what they decide or keep an order with (dependent_units), less
    running quantities (kept_chains), opposite pairs kept (kept_opposite)."""
    plan = plan_collapse(facts, artifact=artifact, rows_per_value=rows_per_value)
    if isinstance(plan, Collapse):
        plan = kept_references(con, source, plan, facts, artifact=artifact)
    if isinstance(plan, Collapse):
        plan = dependent_units(con, source, plan, facts, artifact=artifact)
    if isinstance(plan, Collapse):
        plan = kept_chains(con, source, plan, facts, artifact=artifact)
    if isinstance(plan, Collapse):
        plan = kept_opposite(con, source, plan, artifact=artifact)
    return plan


def dependent_units(
    con: duckdb.DuckDBPyConnection, source: Path, plan: Collapse, facts: Facts, *, artifact: str
) -> Collapse | Declined:
    """`plan` with each chosen column joined by the columns it decides in `source`.

    Column Y depends on chosen column X when every row with the same X (not NULL) has
    the same Y, which one GROUP BY X settles for every Y at once. Columns tied by such
    dependences, directly or through one another, form one unit. Only columns with two
    values or more count: a constant depends on everything, and would tie every chosen
    column to every other. Keys are left out as they are left alone. The cost is a
    grouping of a sixteenth of the rows per chosen column (MAX_DETERMINANTS at most),
    and one of every row for the few columns that pass it."""
    rows, columns = facts
    keys = kept_intact(rows, [c for c in columns if c.cls is ColumnClass.EXACT])
    kept = {k.name for k in keys}
    chosen = {c.name for c in plan.chosen}
    # Pairs one of which is folded, that keep an order on every row; one scan of ranges and
    # one of the pairs, for both uses below.
    ordered = ordered_pairs(
        con,
        source,
        [c for c in columns if c.distinct > 1],
        lambda a, b: a.name in chosen or b.name in chosen,
    )
    # A chosen column in order with a key (a check-out after a unique check-in) is left as it
    # is: the key is never folded, so the column folded apart from it could pass it.
    pinned: dict[str, str] = {}
    for a, b in ordered:
        if (a in kept) != (b in kept):
            column, key = (b, a) if a in kept else (a, b)
            pinned.setdefault(column, key)
    said = ""
    if pinned:
        left = tuple(c for c in plan.chosen if c.name not in pinned)
        said = "; ".join(
            f"{artifact}.{sql.shown(c)} left as it is (on every row it is at most or at least "
            f"the key {sql.shown(k)}, which is kept)"
            for c, k in pinned.items()
        )
        if not left:
            return Declined(
                f"every column of {artifact} that could tie keeps an order with a key: {said}"
            )
        detail = "; ".join(_folded(artifact, c, rows, plan.buckets) for c in left)
        plan = Collapse(left, plan.buckets, f"{detail}; {said}")
    pool = [c for c in columns if c.name not in kept and c.name not in pinned and c.distinct > 1]
    chosen = {c.name for c in plan.chosen}
    in_pool = {c.name for c in pool}
    ordered = [(a, b) for a, b in ordered if a in in_pool and b in in_pool]
    parent = {c.name: c.name for c in pool}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    decides: dict[str, set[str]] = {}
    # On a wide input, only the chosen columns with the fewest values are looked at as
    # deciding others, a bound on the work (one scan of the input each) paid for by
    # folding the rest apart as before: an entity's id, on many rows each, is the usual
    # column to decide a name or a price, a measure nearly unique on every row is not.
    for x in sorted(plan.chosen, key=lambda c: c.distinct)[:MAX_DETERMINANTS]:
        others = [y for y in pool if y.name != x.name and y.distinct <= x.distinct]
        # Rows of a sixteenth of x's values first: a column that differs within one of
        # their groups differs within x's, and is out at a sixteenth of the cost; what is
        # left (most often the columns x does decide) is checked on every row.
        others, repeated = _one_value_within(con, source, [x], others)
        decides[x.name] = {y.name for y in others} if repeated >= MIN_REPEATED else set()
        for y in decides[x.name]:
            parent[root(y)] = root(x.name)
    together = _decided_together(con, source, plan, pool, decides)
    for x, zs, ys in together:
        for c in (*zs, *ys):
            parent[root(c.name)] = root(x.name)
    for a, b in ordered:
        parent[root(b)] = root(a)
    in_order = {name for pair in ordered for name in pair}
    # Tied by a dependence, which the detail names first.
    dependent = {n for x, ys in decides.items() if ys for n in (x, *ys)} | {
        c.name for x, zs, ys in together for c in (x, *zs, *ys)
    }
    if not any(decides.values()) and not together and not ordered:
        return plan
    members: dict[str, list[ColumnFacts]] = {}
    for c in pool:
        members.setdefault(root(c.name), []).append(c)
    units = []
    for group in members.values():
        leads = [c for c in group if c.name in chosen]
        if leads:
            # The most distinct chosen column orders the unit, the first in the table on a tie.
            lead = max(leads, key=lambda c: c.distinct)
            units.append(Unit(lead, tuple(c for c in group if c is not lead)))
    # Said in the order the chosen columns come, as without dependences.
    order = [c.name for c in plan.chosen]
    units.sort(key=lambda u: order.index(u.lead.name))
    detail = []
    b = plan.buckets
    for unit in units:
        lead, moved = unit.lead, unit.moved
        line = _folded(artifact, lead, rows, b)
        if moved:
            names = [sql.shown(m.name) for m in moved]
            if {m.name for m in moved} <= decides.get(lead.name, set()):
                it = "it" if len(moved) == 1 else "them"
                why = f"{sql.shown(lead.name)} decides {it} in the input, and still does"
            elif {lead.name, *(m.name for m in moved)} <= in_order - dependent:
                why = "on every row of the input one is at most the other, and still is"
            else:
                why = "they depend on one another in the input, and still do"
            line += (
                f", {listed(names)} moved with it, each row taking "
                f"{'both' if len(moved) == 1 else 'all of them'} from one row ({why})"
            )
        detail.append(line)
    if said:
        detail.append(said)
    return Collapse(plan.chosen, b, "; ".join(detail), tuple(units))


# Signed exact numbers, whose values can come in opposite pairs; each as the type its
# negation is computed in without overflow (HUGEINT's least value has no opposite at all).
_SIGNED = {"tinyint": "HUGEINT", "smallint": "HUGEINT", "integer": "HUGEINT", "bigint": "HUGEINT"}


def kept_opposite(
    con: duckdb.DuckDBPyConnection, source: Path, plan: Collapse, *, artifact: str
) -> Collapse:
    """`plan`, with each column folded on its own whose values come in opposite pairs
    (every value's negation is a value too, and some are below zero) folded by absolute
    value, each row keeping its sign: a value and its negation stay each other's negation.

    A ledger's two legs (+x and -x on one transaction), a sale and its reversal: a
    correct step checking that each transaction sums to zero raised on the usual fold,
    which sent the two legs to values that no longer cancel. One query finds which
    columns are below zero anywhere, and one more per such column checks the pairs."""
    single = [
        u
        for u in plan.units
        if not u.moved and (u.lead.type.id in _SIGNED or u.lead.type.id == "decimal")
    ]
    if not single:
        return plan
    lows = con.execute(
        f"SELECT {', '.join(f'min({u.lead.sql}) < 0' for u in single)} FROM {sql.parquet(source)}"
    ).fetchall()[0]
    halves = max(MIN_VALUES, math.ceil(plan.buckets / 2))
    paired: dict[str, Unit] = {}
    for unit, low in zip(single, lows, strict=True):
        if not low:
            continue
        c = unit.lead.sql
        wide = _SIGNED.get(unit.lead.type.id, str(unit.lead.type))
        ((unpaired, absolute, zero),) = con.execute(
            f"WITH d AS (SELECT DISTINCT CAST({c} AS {wide}) AS v FROM {sql.parquet(source)} "
            f"WHERE {c} IS NOT NULL) "
            f"SELECT count(*) FILTER (WHERE d.v <> 0 AND e.v IS NULL), "
            f"count(*) FILTER (WHERE d.v > 0), coalesce(bool_or(d.v = 0), false) "
            f"FROM d LEFT JOIN d e ON e.v = -d.v"
        ).fetchall()
        # The fold needs more absolute values than it leaves (as the usual fold does).
        if unpaired == 0 and absolute > halves:
            paired[unit.lead.name] = unit._replace(halves=halves, zero=bool(zero))
    if not paired:
        return plan
    units = tuple(paired.get(u.lead.name, u) for u in plan.units)
    detail = plan.detail
    for name, unit in paired.items():
        detail = detail.replace(
            f"{artifact}.{sql.shown(name)} into {_count(plan.buckets, 'value')}",
            f"{artifact}.{sql.shown(name)} (its values come in opposite pairs: folded by "
            f"absolute value, each row keeping its sign, so a value and its negation still "
            f"cancel) into {_count(2 * unit.halves + unit.zero, 'value')}",
            1,
        )
    return replace(plan, units=units, detail=detail)


# Types whose values a step compares across columns of one row (a stay's check-in and
# check-out, a range's low and high), by family: only columns of one family are compared.
_ORDERED_FAMILIES = (
    INTEGER_IDS | {"decimal"},
    frozenset({"date"}),
    TIMESTAMP_IDS,
)
# Columns of one family compared pairwise in one query, at most.
MAX_ORDERED = 12


def ordered_pairs(
    con: duckdb.DuckDBPyConnection,
    source: Path,
    columns: list[ColumnFacts],
    wanted: Callable[[ColumnFacts, ColumnFacts], bool],
) -> list[tuple[str, str]]:
    """Pairs (a, b) of `columns` of one family, among those `wanted` says to look at, with
    a <= b on every row of the input where both are set, and ranges that share half of
    each. Folded apart, each into values of its own, a row's check-in could pass its
    check-out, and a correct step checking that no stay ends before it starts raised on
    the stressed input (unseen89). One query per family for the ranges, one for the pairs."""
    pairs: list[tuple[str, str]] = []
    for family in _ORDERED_FAMILIES:
        members = [c for c in columns if c.type.id in family][:MAX_ORDERED]
        if len(members) < 2 or not any(wanted(a, b) for a, b in itertools.permutations(members, 2)):
            continue
        ends = con.execute(
            "SELECT "
            + ", ".join(f"min({c.sql}), max({c.sql})" for c in members)
            + f" FROM {sql.parquet(source)}"
        ).fetchone()
        ranges = {c.name: ends[2 * i : 2 * i + 2] for i, c in enumerate(members)}
        candidates = [
            (a, b)
            for a, b in itertools.permutations(members, 2)
            if wanted(a, b) and _overlap(ranges[a.name], ranges[b.name])
        ]
        if not candidates:
            continue
        held = con.execute(
            "SELECT "
            + ", ".join(f"coalesce(bool_and({a.sql} <= {b.sql}), false)" for a, b in candidates)
            + f" FROM {sql.parquet(source)}"
        ).fetchone()
        pairs += [(a.name, b.name) for (a, b), ok in zip(candidates, held, strict=True) if ok]
    return pairs


def _width(low, high) -> float:
    gap = high - low
    return gap.total_seconds() if hasattr(gap, "total_seconds") else float(gap)


def _overlap(a: tuple, b: tuple) -> bool:
    """Whether two columns' ranges share at least half of each: one below the other on
    every row then says something about the rows. A day of the week is below an id on
    every row only because their ranges barely meet, and folding them as one would tie
    columns that have nothing to do with each other."""
    if None in a or None in b:
        return False
    shared = _width(max(a[0], b[0]), min(a[1], b[1]))
    wide_a, wide_b = _width(*a), _width(*b)
    return wide_a > 0 and wide_b > 0 and shared >= wide_a / 2 and shared >= wide_b / 2


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
        sparsest = min(candidates, key=lambda c: rows / max(c.distinct, 1))
        per_value = rows / max(sparsest.distinct, 1)
        # Columns kept intact can be far sparser than the rest: without naming them, "every
        # column ... already has 230,769 or more rows per value" read as false of a
        # timestamp with sixty. A column with a value per row needs no saying.
        key = _kept_sparse(keep, rows)
        if per_value >= rows_per_value:
            return Declined(
                f"every column of {artifact} that could tie already has {per_value:,.0f} "
                f"or more rows per value, at or past the {rows_per_value:,} this amplifier aims "
                f"for{unfolded}{key}"
            )
        # Fewer rows than the target per value, but no column has more values than the
        # buckets it would be folded into (a small input's column of one or two values).
        most = max(c.distinct for c in candidates)
        return Declined(
            f"every column of {artifact} that could tie has {_count(most, 'value')} or fewer "
            f"across its {_count(rows, 'row')}, no more than folding would leave (one value "
            f"per {rows_per_value:,} rows, and never fewer than {MIN_VALUES}), so there is "
            f"nothing to fold{unfolded}{key}"
        )
    detail = "; ".join(_folded(artifact, c, rows, buckets) for c in chosen)
    return Collapse(tuple(chosen), buckets, detail)


def _folded(artifact: str, column: ColumnFacts, rows: int, buckets: int) -> str:
    return (
        f"{artifact}.{sql.shown(column.name)} into {_count(buckets, 'value')}, from "
        f"{rows / column.distinct:,.0f} to {rows / buckets:,.0f} rows per value"
    )


def _kept_sparse(keep: list[ColumnFacts], rows: int) -> str:
    """The clause a decline ends with for the columns kept intact that repeat values."""
    joint = [sql.shown(c.name) for c in keep if c.joint and c.distinct < rows]
    if joint:
        return f"; {listed(joint)}, a key when taken together, are kept as they are"
    single = [c for c in keep if not c.joint and c.distinct < rows]
    if single:
        return (
            f"; {sql.shown(single[0].name)}, the most distinct column, is kept as it is, so "
            f"that a tiebreak on it still works"
        )
    return ""


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
    plan: Collapse | Declined | None = None,
) -> Outcome:
    """`plan`, where the caller made it already (runner/stress.py), saves deciding again."""
    if plan is None:
        facts = facts or column_facts(con, source)
        plan = planned(con, source, facts, artifact=artifact, rows_per_value=rows_per_value)
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
