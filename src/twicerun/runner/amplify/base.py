"""What an amplifier's transform returns, and the column facts they share."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb

from twicerun import sql
from twicerun.compare.columns import ColumnClass, classify
from twicerun.storage.atomic import atomic_path


@dataclass(frozen=True)
class Applied:
    """The transform wrote its output; `detail` says what it changed."""

    detail: str


@dataclass(frozen=True)
class Declined:
    """The transform had nothing to change; `reason` says why. `said` asks for the reason
    beside the inputs a series did stress: an input left as written for what it holds
    (a calendar key), not merely for being empty, is part of what the series varied."""

    reason: str
    said: bool = field(default=False, compare=False, repr=False)


Outcome = Applied | Declined


@dataclass(frozen=True)
class ColumnFacts:
    name: str
    # Left out of the hash: DuckDB 1.4.0's types are unhashable (1.4.5's are not), and the
    # name alone tells a table's columns apart.
    type: duckdb.DuckDBPyType = field(hash=False)
    cls: ColumnClass
    distinct: int
    # Part of a key of two to five columns: no two rows share its values and its partners'.
    joint: bool = False
    # The keys of two to five columns it is part of, each by its columns' names: one moved
    # member keeps such a key distinct in row multiplication's added copy.
    keys: tuple[tuple[str, ...], ...] = field(default=(), hash=False, compare=False)

    @property
    def sql(self) -> str:
        return sql.identifier(self.name)


Facts = tuple[int, list[ColumnFacts]]


# Distinct counts per query: DuckDB runs a query of hundreds of DISTINCT aggregates far
# more slowly than the same aggregates a few dozen at a time (bench/pipelines/wide.py,
# docs/comparison.md); on a narrow artifact it makes no difference.
DISTINCT_PER_QUERY = 32


def column_facts(con: duckdb.DuckDBPyConnection, source: Path) -> Facts:
    """Row count, and each column's class and exact count of distinct non-NULL values.

    The costly part of two amplifiers; the caller that runs both on one input
    (runner/stress.py) counts once and hands the facts to each.
    """
    relation = con.sql(f"SELECT * FROM {sql.parquet(source)}")
    names, types = relation.columns, relation.types
    # The row count rides with the first batch of distinct counts.
    counted: list[int] = []
    for start in range(0, max(len(names), 1), DISTINCT_PER_QUERY):
        counts = [
            f"count(DISTINCT {sql.identifier(n)})"
            for n in names[start : start + DISTINCT_PER_QUERY]
        ]
        if start == 0:
            counts.insert(0, "count(*)")
        counted += con.execute(f"SELECT {', '.join(counts)} FROM {sql.parquet(source)}").fetchone()
    rows, distinct = int(counted[0]), counted[1:]
    facts = [
        ColumnFacts(n, t, classify(n, t).cls, int(d))
        for n, t, d in zip(names, types, distinct, strict=True)
    ]
    keys = _key_sets(con, source, rows, facts)
    joint = (
        {c.name for key in keys for c in key}
        | _repeats_told_apart(con, source, rows, facts)
        | _ordered_within(con, source, rows, facts, keys)
    )
    of = {
        c.name: tuple(tuple(k.name for k in key) for key in keys if c.name in {k.name for k in key})
        for c in facts
    }
    return rows, [replace(c, joint=True, keys=of[c.name]) if c.name in joint else c for c in facts]


# Column sets of two to five checked for being a key together, at most, the likeliest first.
MAX_SUBSETS = 28
# Columns whose sets of three, four or five are considered, at most (40 columns make 9,880
# triples; 20 make 4,845 sets of four; 16 make 4,368 sets of five).
MAX_POOL = {3: 40, 4: 20, 5: 16}
# Past rows**2 / CHANCE combinations, random values would be unique too often to mean a key.
CHANCE = 10


def _key_sets(
    con: duckdb.DuckDBPyConnection, source: Path, rows: int, facts: list[ColumnFacts]
) -> list[tuple[ColumnFacts, ...]]:
    """Each set of two to five columns that is a key together, though no smaller
    part of it is: a daily total per (tier, day), units sold per (store, product, day),
    per (store, product, channel, day) or per (store, product, channel, region, day). A step ordering by day within a tier relies on the
    pair, as a sort on an id relies on the id.

    Only exact columns with each value on two rows or more on average: a column nearly
    unique on its own (a measure that rarely ties) is a key together with almost anything,
    and keeping it whole would spare it the folding that shows a sort on it has no
    tiebreak. No set is a key unless all of those columns together are, which one query
    settles for most inputs. Then only sets with at least as many combinations of values
    as there are rows and at most a tenth of the rows squared, pairs first and the fewest
    combinations first: a composite key's columns multiply to little more than the rows
    they identify, and with more combinations than that, values drawn at random would
    repeat no combination often enough (n rows in m equally likely combinations share
    one n**2 / 2m times in expectation; at m = n**2 / 10, no share comes about one time
    in 150) that being unique says nothing of design. Three columns of random codes on
    a few hundred rows are unique together by chance, and were all kept. Sets of four
    are looked for only where no smaller key was found (a table has one grain, most
    often, and this costs one more query), and sets of five only where no set of four
    was either; keys of six or more columns are not."""
    candidates = [
        c for c in facts if c.cls is ColumnClass.EXACT and c.distinct > 1 and 2 * c.distinct <= rows
    ]
    if len(candidates) < 2 or math.prod(c.distinct for c in candidates) < rows:
        return []

    scan = f"FROM {sql.parquet(source)}"
    (together,) = con.execute(
        f"SELECT count(DISTINCT ({', '.join(c.sql for c in candidates)})) {scan}"
    ).fetchone()
    if together != rows:
        return []
    keys: list[tuple[ColumnFacts, ...]] = []
    budget = MAX_SUBSETS
    for size in (2, 3, 4, 5):
        if size >= 4 and keys:
            break
        # The triples of a few hundred columns are millions: on a table that wide, only
        # the columns with the fewest values are tried in threes and fours, a bound on the
        # work paid for by missing a key among the others.
        pool = (
            candidates
            if size == 2
            else sorted(candidates, key=lambda c: c.distinct)[: MAX_POOL[size]]
        )
        plausible = [
            (n, subset)
            for subset in itertools.combinations(pool, size)
            if rows <= (n := math.prod(c.distinct for c in subset)) <= rows * rows / CHANCE
            # A set holding a smaller key is a key for that key's sake.
            and not any(set(key) <= set(subset) for key in keys)
        ]
        plausible.sort(key=lambda pair: pair[0])  # stable: ties keep the columns' order
        subsets = [subset for _, subset in plausible[:budget]]
        if not subsets:
            continue
        budget -= len(subsets)
        counts = ", ".join(
            f"count(DISTINCT ({', '.join(c.sql for c in subset)}))" for subset in subsets
        )
        found = con.execute(f"SELECT {counts} {scan}").fetchone()
        keys.extend(subset for subset, n in zip(subsets, found, strict=True) if n == rows)
        if budget <= 0:
            break
    return keys


def _nearly_unique_repeating(rows: int, facts: list[ColumnFacts]) -> list[ColumnFacts]:
    """Exact columns unique on more than half the rows but not on all: the ones _key_sets
    leaves out, and the two checks after it ask about."""
    return [c for c in facts if c.cls is ColumnClass.EXACT and rows / 2 < c.distinct < rows]


# Nearly unique columns asked, per key of two columns, whether they order each group as the
# key's other column does, at most: the first in the input's column order.
MAX_ORDERED = 8


def _ordered_within(
    con: duckdb.DuckDBPyConnection,
    source: Path,
    rows: int,
    facts: list[ColumnFacts],
    keys: list[tuple[ColumnFacts, ...]],
) -> set[str]:
    """Nearly unique columns that order the rows of each value of one column of a key of two
    as its other column does: a change's time within an entity, rising with its version. A
    step taking each entity's latest change by that time relies on its never repeating
    within an entity. Tie collapse folded it, since it repeats across entities, and
    `arg_max(payload, changed_at)` per entity came out STABLE_ON_THIS_INPUT.

    Being unique within each entity says little on its own: over 3,000 entities of six
    changes each, a time repeated across pairs of entities stays unique within every
    entity about one time in seven at random. Rising, or falling, with the version in
    every entity says more: a column of random values does so at most 2 * 2**-p of the
    time over p consecutive pairs (n rows fall in order one time in n!, and n! >= 2**(n-1)),
    so it is taken for design where that is under APART_BY_CHANCE. Such a column is
    kept whole, as a key's column is; its repeats across entities stay in the input."""
    candidates = _nearly_unique_repeating(rows, facts)
    found: set[str] = set()
    for first, second in [key for key in keys if len(key) == 2][:2]:
        for group, order in ((first, second), (second, first)):
            asked = [c for c in candidates if c.name not in found][:MAX_ORDERED]
            if not asked:
                return found
            lagged = ", ".join(
                f"{c.sql} AS x{i}, lag({c.sql}) OVER w AS p{i}" for i, c in enumerate(asked)
            )
            counts = ", ".join(
                f"count(x{i}), count(p{i}), count(*) FILTER (WHERE x{i} > p{i}), "
                f"count(*) FILTER (WHERE x{i} < p{i})"
                for i in range(len(asked))
            )
            figures = con.execute(
                f"SELECT {counts} FROM (SELECT {lagged} FROM {sql.parquet(source)} "
                f"WINDOW w AS (PARTITION BY {group.sql} ORDER BY {order.sql}))"
            ).fetchone()
            for i, column in enumerate(asked):
                present, pairs, up, down = figures[4 * i : 4 * i + 4]
                if (
                    present == rows
                    and pairs
                    and pairs in (up, down)
                    and 2 * 0.5**pairs < APART_BY_CHANCE
                ):
                    found.add(column.name)
    return found


# A nearly unique column whose every repeat one other column tells apart is taken for half of
# a key where random values of that column would do so less often than this.
APART_BY_CHANCE = 1 / 150


def _repeats_told_apart(
    con: duckdb.DuckDBPyConnection, source: Path, rows: int, facts: list[ColumnFacts]
) -> set[str]:
    """The pairs that are a key where one column is nearly unique on its own and the other
    tells its repeats apart: an event id that an at-least-once feed repeats, and the file
    each copy arrived in. `_key_sets` leaves nearly unique columns out, since they are
    unique together with almost anything; so tie collapse folded the event id, and a
    correct `DISTINCT ON (event_id) ... ORDER BY event_id, filename DESC` fired.

    What sets such a pair apart from chance is the repeats: with r rows repeating a value
    of the column, a second column of k values drawn at random tells all of them apart
    at most (1 - 1/k)**r of the time (less where its values are not equally likely, or
    where a value repeats more than once). Only pairs where that is under APART_BY_CHANCE
    are counted, partners with the fewest values first, MAX_SUBSETS at most (past
    SCREEN_ROWS rows, first on a share of the values: _unique_on_a_share); a measure that
    rarely ties meets few such partners, and stays foldable."""
    exact = [c for c in facts if c.cls is ColumnClass.EXACT and c.distinct > 1]
    pairs: list[tuple[ColumnFacts, ColumnFacts]] = []
    for column in _nearly_unique_repeating(rows, facts):
        repeats = rows - column.distinct
        pairs += [
            (column, partner)
            for partner in sorted(exact, key=lambda c: c.distinct)
            if partner is not column and (1 - 1 / partner.distinct) ** repeats < APART_BY_CHANCE
        ]
    pairs = pairs[:MAX_SUBSETS]
    scan = f"FROM {sql.parquet(source)}"
    if rows > SCREEN_ROWS:
        pairs = _unique_on_a_share(con, scan, pairs)
    if not pairs:
        return set()
    counts = ", ".join(f"count(DISTINCT ({a.sql}, {b.sql}))" for a, b in pairs)
    found = con.execute(f"SELECT {counts} {scan}").fetchone()
    return {c.name for pair, n in zip(pairs, found, strict=True) if n == rows for c in pair}


# Past this many rows, a pair is first counted on the rows of one value in SCREEN_SHARE of
# its nearly unique column, where pairs of random values are ruled out: on bench.dependences'
# worst case, counting every pair whole added 0.37 s to counting values, screened 0.05 s.
SCREEN_ROWS = 100_000
SCREEN_SHARE = 64


def _unique_on_a_share(
    con: duckdb.DuckDBPyConnection, scan: str, pairs: list[tuple[ColumnFacts, ColumnFacts]]
) -> list[tuple[ColumnFacts, ColumnFacts]]:
    """The pairs still unique on every row holding a value of the column that hashes into one
    share: every copy of a value is there, so a repeat the partner does not tell apart shows
    as surely as on the whole input, and a key on the whole input is one on any of its rows."""
    kept: list[tuple[ColumnFacts, ColumnFacts]] = []
    for column, group in itertools.groupby(pairs, key=lambda pair: pair[0]):
        group = list(group)
        counts = ", ".join(f"count(DISTINCT ({a.sql}, {b.sql}))" for a, b in group)
        held, *found = con.execute(
            f"SELECT count(*), {counts} {scan} WHERE hash({column.sql}) % {SCREEN_SHARE} = 0"
        ).fetchone()
        kept += [pair for pair, n in zip(group, found, strict=True) if n == held]
    return kept


def most_distinct(facts: list[ColumnFacts]) -> ColumnFacts | None:
    """The column with the most distinct values; the first one on a tie."""
    return max(facts, key=lambda c: c.distinct, default=None)


def kept_intact(rows: int, columns: list[ColumnFacts]) -> list[ColumnFacts]:
    """The columns an amplifier leaves distinct, so that a correct tiebreak on one survives:
    every column with a different value on every row and every column of a key of two to
    five columns (column_facts), or where there is none, the most distinct.

    A table often has more than one key (an id and an email, an order number and its
    external reference). Keeping only the first of them made a step that orders by the
    second fire, as if a sort on a unique column had no tiebreak, and which key counted
    as "most distinct" was just whichever came first in the table."""
    keys = [c for c in columns if rows > 1 and (c.distinct == rows or c.joint)]
    if keys:
        return keys
    first = most_distinct(columns)
    return [first] if first is not None else []


def copy_ordered(con: duckdb.DuckDBPyConnection, query: str, target: Path) -> None:
    """Write `query` to `target` in the order it gives: one that ends in ORDER BY, or one
    DuckDB documents as keeping its input's order (single-table scans, UNION ALL)."""
    con.execute("SET preserve_insertion_order = true")
    # Through a temporary name: an interrupted write never leaves a short file under
    # the final one for a series to read.
    with atomic_path(target, fsync=False) as temporary:
        con.execute(f"COPY ({query}) TO {sql.string(temporary)} (FORMAT parquet)")


# The names of the columns an amplifier adds to a step's rows while it rearranges them:
# a step's own column may be called anything, `file_row_number` and `copy` included.
POSITION = "__twicerun_position"
COPY = "__twicerun_copy"


@contextmanager
def numbered(con: duckdb.DuckDBPyConnection, source: Path) -> Iterator[str]:
    """The source's rows with each one's exact position in the file as POSITION.

    DuckDB numbers a file's rows for `file_row_number = true`, under that name, and refuses
    a file that has a column of that name already. Such a file is numbered by a streaming
    row_number() over one thread, which sees the rows in file order, into a temporary table
    dropped afterwards: slower, and only for a step that named a column so."""
    names = {n.lower() for n in con.sql(f"SELECT * FROM {sql.parquet(source)}").columns}
    if "file_row_number" not in names:
        yield (
            f"(SELECT * EXCLUDE (file_row_number), file_row_number AS {POSITION} "
            f"FROM {sql.parquet(source, file_row_number='true')})"
        )
        return
    (threads,) = con.execute("SELECT current_setting('threads')").fetchone()
    table = "__twicerun_numbered"
    con.execute("SET threads = 1")
    try:
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {table} AS "
            f"SELECT *, row_number() OVER () - 1 AS {POSITION} FROM {sql.parquet(source)}"
        )
    finally:
        con.execute(f"SET threads = {int(threads)}")
    try:
        yield table
    finally:
        con.execute(f"DROP TABLE IF EXISTS {table}")
