"""The oracle: how two copies of one artifact differ, by how much, and in which column.

Rows are matched on their exact columns (the key). Within a key group the
rows are counted on both sides, so a group that exists on both sides with a
different count is Difference.MULTIPLICITY (a duplicated row, not a count that happens
to differ), a group on the reference side only is Difference.ROW_MISSING and one on the
later side only is Difference.ROW_EXTRA. Float columns never enter the key: inside a
group, rows are paired by the order of their float values (sorted to sorted,
which for one float column is the pairing with the least total movement), and
every pair whose bits differ is Difference.VALUE_DRIFT, measured in ulp and relative
terms. Nested columns with a float inside contribute their exact skeleton to
the key and their float leaves to the drift (see nested.py).

Everything is a query over the two Parquet files; no row crosses into Python.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb
import pyarrow as pa

from twicerun import sql
from twicerun.compare import floats, matching
from twicerun.compare.clock import read_as_clock
from twicerun.compare.columns import (
    INTEGER_IDS,
    TIMESTAMP_IDS,
    ColumnClass,
    canonical_expr,
    classify,
)
from twicerun.compare.nested import Leaf, leaves, skeleton
from twicerun.errors import UsageError
from twicerun.findings import (
    ArtifactFindings,
    Attribution,
    Drift,
    SchemaChange,
    json_float,
)
from twicerun.vocabulary.loop import Difference, Presence, ordered

MAX_ATTRIBUTION_COLUMNS = 32
# Column types a clock read writes; a step whose rows split on one of these gets a hint.
CLOCK_TYPES = TIMESTAMP_IDS | {"time", "time with time zone", "time_ns"}


@dataclass(frozen=True)
class _Column:
    name: str
    type: duckdb.DuckDBPyType = field(hash=False)  # unhashable on DuckDB 1.4.0
    cls: ColumnClass

    @property
    def sql(self) -> str:
        return sql.identifier(self.name)


def _columns(con: duckdb.DuckDBPyConnection, path: Path) -> list[_Column]:
    relation = con.sql(f"SELECT * FROM {sql.parquet(path)}")
    return [
        _Column(n, t, classify(n, t).cls)
        for n, t in zip(relation.columns, relation.types, strict=True)
    ]


def _schema_change(ref: list[_Column], later: list[_Column]) -> SchemaChange:
    ref_types = {c.name: str(c.type) for c in ref}
    later_types = {c.name: str(c.type) for c in later}
    added = [[c.name, str(c.type)] for c in later if c.name not in ref_types]
    dropped = [[c.name, str(c.type)] for c in ref if c.name not in later_types]
    retyped = [
        [c.name, ref_types[c.name], later_types[c.name]]
        for c in ref
        if c.name in later_types and ref_types[c.name] != later_types[c.name]
    ]
    shared_ref = [c.name for c in ref if c.name in later_types]
    shared_later = [c.name for c in later if c.name in ref_types]
    return SchemaChange(added, dropped, retyped, reordered=shared_ref != shared_later)


def check_key(
    artifact: str, columns: Sequence[tuple[str, ColumnClass]], key: Sequence[str]
) -> None:
    """Refuse a --key naming a column that is absent or not exact, naming what is there,
    each column as --key takes it back (a name that is not one word in double quotes)."""
    by_name = dict(columns)
    exact = [sql.shown(n) for n, cls in columns if cls.is_key]
    flag = f"--key {artifact}={','.join(sql.shown(k) for k in key)}"
    for name in key:
        if name not in by_name:
            raise UsageError(
                f"{flag}: {artifact} has no column {sql.shown(name)}; "
                f"its exact columns are {', '.join(exact) or 'none'}"
            )
        if not by_name[name].is_key:
            raise UsageError(
                f"{flag}: {sql.shown(name)} is a {by_name[name].value} column, and "
                f"matching rows on it would turn one ulp of float drift into a missing row and "
                f"an extra one; key on exact columns only ({', '.join(exact) or 'none here'})"
            )


def compare_artifacts(
    con: duckdb.DuckDBPyConnection,
    name: str,
    reference: Path | None,
    later: Path | None,
    *,
    key: Sequence[str] | None = None,
    input_columns: Iterable[str] = (),
    cache: ReferenceCache | None = None,
    attribute_above: int | None = 0,
    keep_imbalance_as: str | None = None,
    in_place: bool | None = None,
) -> ArtifactFindings:
    """Measure how `later` differs from `reference` (either may be absent).

    With a `cache`, the reference side's group counts are computed once and reused
    by every later run compared with the same reference. Attribution is computed
    when more than `attribute_above` rows are unmatched (never when it is None):
    it explains rather than measures, so a caller comparing several runs may
    instead keep each comparison's disagreeing groups (`keep_imbalance_as`, a
    table name) and attribute only the worst with `attribute_table`. `in_place`
    chooses how an artifact without floats is grouped (see `_group_counts`); the
    findings do not depend on it.
    """
    if reference is None or later is None:
        return _one_side(con, name, reference, later)

    ref_cols = _columns(con, reference)
    later_cols = _columns(con, later)
    change = _schema_change(ref_cols, later_cols)
    later_types = {c.name: str(c.type) for c in later_cols}
    shared = [c for c in ref_cols if later_types.get(c.name) == str(c.type)]

    if key is not None:
        check_key(name, [(c.name, c.cls) for c in ref_cols], key)
        key_cols = [c for c in shared if c.name in set(key)]
        ignored = [c.name for c in shared if c.cls.is_key and c.name not in set(key)]
        nested_float = [c for c in shared if c.cls is ColumnClass.NESTED_FLOAT]
        key_exprs = [(c.name, c.sql) for c in key_cols]
    else:
        ignored = []
        nested_float = [c for c in shared if c.cls is ColumnClass.NESTED_FLOAT]
        key_exprs = []
        for c in shared:
            if c.cls.is_key:
                key_exprs.append((c.name, c.sql))
            elif c.cls is ColumnClass.NESTED_FLOAT:
                key_exprs.append((c.name, skeleton(c.sql, c.type)))
    float_cols = [c for c in shared if c.cls is ColumnClass.FLOAT]
    # A leaf's path names its float as a reader would: `total`, `stats.mean`, `"tot al"`.
    leaf_list: list[Leaf] = [Leaf(sql.shown(c.name), c.sql, c.type.id, False) for c in float_cols]
    for c in nested_float:
        leaf_list.extend(leaves(c.sql, c.type, sql.shown(c.name)))

    key_sql = [e for _, e in key_exprs]
    try:
        if leaf_list:
            groups, drift = _measure_with_floats(
                con, reference, later, key_sql, leaf_list, float_cols, nested_float, cache
            )
        else:
            groups, drift = _group_counts(con, reference, later, key_sql, cache, in_place), []
        unmatched = (
            groups["missing"] + groups["extra"] + groups["mult_missing"] + groups["mult_extra"]
        )
        attribution = None
        wanted = attribute_above is not None and unmatched > attribute_above
        attributable = 0 < len(key_exprs) <= MAX_ATTRIBUTION_COLUMNS
        rows = None
        if float_cols and unmatched and attributable and (wanted or keep_imbalance_as):
            rows = _keep_float_rows(con, len(key_exprs), [c.name for c in float_cols])
        if wanted and attributable:
            attribution = attribute_table(
                con, IMBALANCE, [n for n, _ in key_exprs], set(input_columns), unmatched, rows
            )
        reassigned: tuple[list[str], bool] = ([], False)
        if leaf_list and key_exprs and not unmatched and any(d.moved for d in drift):
            reassigned = _reassigned(
                con, [n for n, _ in key_exprs], len(float_cols) + len(nested_float)
            )
        elif attribution is not None and rows is not None:
            reassigned = handed_floats(
                attribution,
                [n for n, _ in key_exprs],
                drift,
                {sql.shown(c.name) for c in float_cols},
            )
        if keep_imbalance_as and unmatched and attributable:
            con.execute(f"DROP TABLE IF EXISTS {keep_imbalance_as}")
            con.execute(f"DROP TABLE IF EXISTS {keep_imbalance_as}{FLOAT_ROWS}")
            con.execute(f"ALTER TABLE {IMBALANCE} RENAME TO {keep_imbalance_as}")
            if rows:
                con.execute(f"ALTER TABLE {rows} RENAME TO {keep_imbalance_as}{FLOAT_ROWS}")
    finally:
        con.execute(
            "; ".join(
                f"DROP TABLE IF EXISTS {table}"
                for table in (
                    IMBALANCE,
                    ROWS,
                    PAIRS,
                    RESIDUE,
                    LEFTOVERS,
                    f"{IMBALANCE}_residue",
                    f"{IMBALANCE}{FLOAT_ROWS}",
                )
            )
        )

    classes = set()
    if change.any:
        classes.add(Difference.SCHEMA)
    if groups["missing"]:
        classes.add(Difference.ROW_MISSING)
    if groups["extra"]:
        classes.add(Difference.ROW_EXTRA)
    if groups["mult_missing"] or groups["mult_extra"]:
        classes.add(Difference.MULTIPLICITY)
    if any(d.moved for d in drift):
        classes.add(Difference.VALUE_DRIFT)
    return ArtifactFindings(
        artifact=name,
        presence=Presence.BOTH,
        classes=ordered(classes, Difference),
        reference_rows=groups["ref_rows"],
        later_rows=groups["later_rows"],
        key=[n for n, _ in key_exprs],
        missing=groups["missing"],
        extra=groups["extra"],
        multiplicity_missing=groups["mult_missing"],
        multiplicity_extra=groups["mult_extra"],
        paired=groups["paired"],
        drift=drift,
        schema=change if change.any else None,
        attribution=attribution,
        not_compared=ignored,
        timestamps=[c.name for c in shared if c.cls.is_key and c.type.id in CLOCK_TYPES],
        uuids=[c.name for c in shared if c.cls.is_key and c.type.id == "uuid"],
        reassigned=reassigned[0],
        reassigned_together=reassigned[1],
    )


def _one_side(
    con: duckdb.DuckDBPyConnection, name: str, reference: Path | None, later: Path | None
) -> ArtifactFindings:
    present = reference or later
    assert present is not None
    (rows,) = con.execute(f"SELECT count(*) FROM {sql.parquet(present)}").fetchone()
    if reference is None:
        return ArtifactFindings(
            name, Presence.LATER_ONLY, [Difference.ROW_EXTRA], 0, int(rows), [], extra=int(rows)
        )
    return ArtifactFindings(
        name, Presence.REFERENCE_ONLY, [Difference.ROW_MISSING], int(rows), 0, [], missing=int(rows)
    )


def _aliases(prefix: str, exprs: Sequence[str]) -> str:
    return ", ".join(f"{e} AS {prefix}{i}" for i, e in enumerate(exprs))


def _on(columns: Sequence[str], left: str = "r", right: str = "l") -> str:
    """Equality on `columns` between two relations, NULL matching NULL."""
    return " AND ".join(f"{left}.{c} IS NOT DISTINCT FROM {right}.{c}" for c in columns)


def _ks(n: int) -> list[str]:
    return [f"k{i}" for i in range(n)]


def _row_count(con: duckdb.DuckDBPyConnection, path: Path) -> int:
    (n,) = con.execute(f"SELECT count(*) FROM {sql.parquet(path)}").fetchone()
    return int(n)


IMBALANCE = "__twicerun_imbalance"
ROWS = "__twicerun_rows"
PAIRS = "__twicerun_pairs"
PAIRS_TRIED = "__twicerun_pairs_tried"
RESIDUE = "__twicerun_residue"
LEFTOVERS = "__twicerun_leftovers"


def _side(cache: ReferenceCache | None, reference: Path, template: str) -> str:
    """The reference side of a grouping query, from the cache when there is one."""
    query = template.format(source=sql.parquet(reference))
    return f"SELECT * FROM {cache.side(reference, query)}" if cache is not None else query


_TABLE_NUMBERS = itertools.count()


class ReferenceCache:
    """Reference-side group counts kept as temporary tables between comparisons."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self._tables: dict[tuple[str, tuple[str, ...]], str] = {}
        # Findings already computed for a pair of canonical digests, for the caller to reuse.
        self.memo: dict[tuple, dict] = {}

    def side(self, reference: Path, query: str) -> str:
        """The name of a table holding the result of `query` over the reference side."""
        slot = (str(reference), (query,))
        table = self._tables.get(slot)
        if table is None:
            table = f"__twicerun_reference_{next(_TABLE_NUMBERS)}"
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS {query}")
            self._tables[slot] = table
        return table

    def clear(self) -> None:
        for table in self._tables.values():
            self.con.execute(f"DROP TABLE IF EXISTS {table}")
        self._tables.clear()
        self.memo.clear()


def _group_counts(
    con: duckdb.DuckDBPyConnection,
    reference: Path,
    later: Path,
    key: Sequence[str],
    cache: ReferenceCache | None = None,
    in_place: bool | None = None,
) -> dict[str, int]:
    """Row counts per key group on both sides, reduced to the groups that disagree.

    The groups whose counts differ are kept in a temporary table for attribution;
    everything else follows from them and the two row counts. `in_place` forces
    (True) or forbids (False) the positional shortcut; by default a sample decides.
    """
    ref_rows, later_rows = _row_count(con, reference), _row_count(con, later)
    if key and (in_place if in_place is not None else _mostly_in_place(con, reference, later, key)):
        _residue_imbalance(con, reference, later, key)
    elif key:
        select = _aliases("k", key)
        r = _side(cache, reference, f"SELECT {select}, count(*) AS n FROM {{source}} GROUP BY ALL")
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE {IMBALANCE} AS
            WITH r AS ({r}),
                 l AS (SELECT {select}, count(*) AS n FROM {sql.parquet(later)} GROUP BY ALL)
            SELECT {", ".join(f"coalesce(r.k{i}, l.k{i}) AS k{i}" for i in range(len(key)))},
                   coalesce(r.n, 0) AS rn, coalesce(l.n, 0) AS ln
            FROM r FULL OUTER JOIN l ON {_on(_ks(len(key)))}
            WHERE r.n IS DISTINCT FROM l.n
            """
        )
    else:
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {IMBALANCE} AS "
            f"SELECT {ref_rows}::BIGINT AS rn, {later_rows}::BIGINT AS ln WHERE rn <> ln"
        )
    return _imbalance_totals(con, ref_rows, later_rows)


POSITIONAL_SAMPLE = 8192
# Below this share of differing positions in the sample, the positional shortcut pays.
IN_PLACE_BELOW = 0.25


def _differs(n: int) -> str:
    return " OR ".join(f"r{i} IS DISTINCT FROM l{i}" for i in range(n))


def _mostly_in_place(
    con: duckdb.DuckDBPyConnection, reference: Path, later: Path, key: Sequence[str]
) -> bool:
    """Whether most rows sit at the same position in both files, judged on the first rows.

    Only speed depends on this guess; the findings are the same either way.
    """
    limit = f"LIMIT {POSITIONAL_SAMPLE}"
    differing, sampled = con.execute(
        f"SELECT count(*) FILTER (WHERE rp IS NULL OR lp IS NULL OR {_differs(len(key))}), count(*) "
        f"FROM (SELECT {_aliases('r', key)}, true AS rp FROM {sql.parquet(reference)} {limit}) "
        f"POSITIONAL JOIN "
        f"(SELECT {_aliases('l', key)}, true AS lp FROM {sql.parquet(later)} {limit})"
    ).fetchone()
    return bool(sampled) and differing < IN_PLACE_BELOW * sampled


def _residue_imbalance(
    con: duckdb.DuckDBPyConnection, reference: Path, later: Path, key: Sequence[str]
) -> None:
    """The disagreeing groups, from the rows that differ position by position.

    A row equal to the other file's row at the same position is one copy on each
    side of the same group, so setting the pair aside changes no group's rn - ln.
    Grouping only the rest (the residue) therefore finds the same disagreeing
    groups with the same differences, reading each file once in step instead of
    hashing every row. What the residue cannot see is whether a group it has on
    one side only also exists, in matched rows, on the other, which decides a
    missing row from a duplicated one; those groups are counted in the full
    other file, and the count is added to both sides so the table reads as if
    every row had been grouped.
    """
    n = len(key)
    ks = _ks(n)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {RESIDUE} AS
        SELECT * FROM
            (SELECT {_aliases("r", key)}, true AS rp FROM {sql.parquet(reference)})
            POSITIONAL JOIN
            (SELECT {_aliases("l", key)}, true AS lp FROM {sql.parquet(later)})
        WHERE rp IS NULL OR lp IS NULL OR {_differs(n)}
        """
    )
    side = "SELECT {cols}, count(*) AS n FROM " + RESIDUE + " WHERE {flag} GROUP BY ALL"
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {IMBALANCE}_residue AS
        WITH r AS ({side.format(cols=", ".join(f"r{i} AS k{i}" for i in range(n)), flag="rp")}),
             l AS ({side.format(cols=", ".join(f"l{i} AS k{i}" for i in range(n)), flag="lp")})
        SELECT {", ".join(f"coalesce(r.k{i}, l.k{i}) AS k{i}" for i in range(n))},
               coalesce(r.n, 0) AS rn, coalesce(l.n, 0) AS ln
        FROM r FULL OUTER JOIN l ON {_on(_ks(len(key)))}
        WHERE r.n IS DISTINCT FROM l.n
        """
    )

    def matched(source: Path, lonely: str) -> str:
        # Rows of the full file in a group the residue has on the other side only.
        return (
            f"SELECT {', '.join(f'i.{k}' for k in ks)}, count(*) AS p "
            f"FROM (SELECT {_aliases('k', key)} FROM {sql.parquet(source)}) s "
            f"JOIN (SELECT {', '.join(ks)} FROM {IMBALANCE}_residue WHERE {lonely} = 0) i "
            f"ON {_on(ks, 's', 'i')} GROUP BY ALL"
        )

    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {IMBALANCE} AS
        WITH pl AS ({matched(later, "ln")}), pr AS ({matched(reference, "rn")})
        SELECT {", ".join(f"i.{k}" for k in ks)},
               i.rn + coalesce(pl.p, 0) + coalesce(pr.p, 0) AS rn,
               i.ln + coalesce(pl.p, 0) + coalesce(pr.p, 0) AS ln
        FROM {IMBALANCE}_residue i
        LEFT JOIN pl ON i.ln = 0 AND {_on(ks, "i", "pl")}
        LEFT JOIN pr ON i.rn = 0 AND {_on(ks, "i", "pr")}
        """
    )
    con.execute(f"DROP TABLE {IMBALANCE}_residue")
    con.execute(f"DROP TABLE {RESIDUE}")


def _measure_with_floats(
    con: duckdb.DuckDBPyConnection,
    reference: Path,
    later: Path,
    key: Sequence[str],
    leaf_list: Sequence[Leaf],
    float_cols: Sequence[_Column],
    nested_float: Sequence[_Column],
    cache: ReferenceCache | None,
) -> tuple[dict[str, int], list[Drift]]:
    """Group counts and drift for an artifact with floats, in two levels.

    Rows identical in every compared column, floats by their bits, pair first:
    they can neither drift nor be anything but a copy. Only the rows left over
    are paired inside their key group, sorted to sorted, and measured. Pairing
    everything sorted to sorted instead would let one duplicated row shift the
    pairing of its whole group and report drift that is not there.
    """
    bits = [floats.bits(c.sql, c.type.id) for c in float_cols]
    bits += [canonical_expr(c.sql, c.type) for c in nested_float]
    n_key, n_bits, n_leaf = len(key), len(bits), len(leaf_list)
    ks = _ks(n_key)
    bs = [f"b{i}" for i in range(n_bits)]
    n_scalar = len(float_cols)
    # A float column's value is its bits read back (every NaN as the one NaN, which no
    # measure tells apart), so only a nested leaf's values are carried beside the bits:
    # carrying every float twice made grouping a wide artifact twice as slow. A list
    # leaf is carried as its floats' bits (floats.bits_list), so -0.0 keeps its sign.
    vs = [f"v{i}" for i in range(n_scalar, n_leaf)]
    carried_values = [
        f"any_value({floats.bits_list(leaf.expr, leaf.type_id) if leaf.is_list else leaf.expr}) AS v{i}"
        for i, leaf in enumerate(leaf_list)
        if i >= n_scalar
    ]

    def value(i: int, side: str = "") -> str:
        if i >= n_scalar:
            return f"{side}v{i}"
        return floats.float_of_bits(f"{side}b{i}", leaf_list[i].type_id)

    template = (
        "SELECT "
        + ", ".join(
            [*([_aliases("k", [*key])] if key else []), _aliases("b", bits), *carried_values]
        )
        + ", count(*) AS n FROM {source} GROUP BY ALL"
    )
    on = _on([*ks, *bs])
    merged = ", ".join(f"coalesce(r.{c}, l.{c}) AS {c}" for c in [*ks, *bs, *vs])
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {ROWS} AS
        WITH r AS ({_side(cache, reference, template)}),
             l AS ({template.format(source=sql.parquet(later))})
        SELECT {merged}, coalesce(r.n, 0) AS rn, coalesce(l.n, 0) AS ln
        FROM r FULL OUTER JOIN l ON {on}
        """
    )
    if key:
        # One grouping by key serves both the disagreeing groups and the pairing below:
        # every group with a row left over on either side, with how many on each.
        cr, cl = "sum(greatest(rn - ln, 0))", "sum(greatest(ln - rn, 0))"
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {LEFTOVERS} AS SELECT {', '.join(ks)}, "
            f"sum(rn) AS rn, sum(ln) AS ln, {cr} AS cr, {cl} AS cl FROM {ROWS} "
            f"GROUP BY ALL HAVING {cr} > 0 OR {cl} > 0"
        )
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {IMBALANCE} AS SELECT {', '.join(ks)}, rn, ln "
            f"FROM {LEFTOVERS} WHERE rn <> ln"
        )
    else:
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {IMBALANCE} AS SELECT sum(rn) AS rn, sum(ln) AS ln "
            f"FROM {ROWS} HAVING sum(rn) <> sum(ln)"
        )
    ref_rows, later_rows = (
        int(v or 0) for v in con.execute(f"SELECT sum(rn), sum(ln) FROM {ROWS}").fetchone()
    )
    groups = _imbalance_totals(con, ref_rows, later_rows)

    # Leftover rows, one per unmatched copy, paired inside their key group by value:
    # DuckDB orders a float by value, -0.0 with 0.0 and every NaN last, and its bits
    # break the ties (-0.0 first). A float's value sorts in eight bytes where its place
    # on the ulp line (floats.ordered) took sixteen, and in less time.
    def order_by(first: int) -> str:
        scalars = [first, *(i for i in range(n_scalar) if i != first)]
        return ", ".join(
            [f"{value(i)}, b{i}" for i in scalars]
            + [f"b{len(float_cols) + j}" for j in range(len(nested_float))]
        )

    pair_on = " AND ".join([*([_on(ks)] if ks else []), "r.__i = l.__i"])
    if key:
        # A key group with one leftover row on a side numbers it 1 whatever the order,
        # and in a keyed artifact that is nearly every group: only the others are sorted.
        # The leftovers per group are counted from the grouped rows, not by a window.
        partition = f"PARTITION BY {', '.join(ks)}"

        def leftover(more: str, fewer: str, count: str) -> str:
            return (
                f"SELECT t.* EXCLUDE (rn, ln), c.{count} AS __c, "
                f"unnest(range(t.{more} - t.{fewer})) FROM {ROWS} t JOIN {LEFTOVERS} c "
                f"ON {_on(ks, 't', 'c')} WHERE t.{more} > t.{fewer}"
            )

        def numbered(side: str, order: str) -> str:
            return (
                f"SELECT * EXCLUDE (__c), 1 AS __i FROM {side} WHERE __c = 1 UNION ALL "
                f"SELECT * EXCLUDE (__c), row_number() OVER ({partition} ORDER BY {order}) "
                f"AS __i FROM {side} WHERE __c > 1"
            )

        if _one_left_each(con):
            # No group has two rows left over on a side, so a row's partner is the one
            # row its group has left on the other side: nothing to expand or number.
            def sides(order: str) -> str:
                return (
                    f"ro AS (SELECT * FROM {ROWS} WHERE rn > ln), "
                    f"lo AS (SELECT * FROM {ROWS} WHERE ln > rn)"
                )

            pair_on, sorted_pairs = _on(ks), False
        else:

            def sides(order: str) -> str:
                return (
                    f"lr AS ({leftover('rn', 'ln', 'cr')}), "
                    f"ll AS ({leftover('ln', 'rn', 'cl')}), ro AS ({numbered('lr', order)}), "
                    f"lo AS ({numbered('ll', order)})"
                )

            sorted_pairs = True
    else:
        carried = ", ".join([*bs, *vs])

        def sides(order: str) -> str:
            return (
                f"ro AS (SELECT *, row_number() OVER (ORDER BY {order}) AS __i FROM "
                f"(SELECT {carried}, unnest(range(rn - ln)) FROM {ROWS} WHERE rn > ln)), "
                f"lo AS (SELECT *, row_number() OVER (ORDER BY {order}) AS __i FROM "
                f"(SELECT {carried}, unnest(range(ln - rn)) FROM {ROWS} WHERE ln > rn))"
            )

        sorted_pairs = True

    def pair(order: str, into: str) -> None:
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE {into} AS
            WITH {sides(order)}
            SELECT {", ".join(f"{value(i, 'r.')} AS a{i}, {value(i, 'l.')} AS b{i}" for i in range(n_leaf))}
            FROM ro r JOIN lo l ON {pair_on}
            """
        )

    pair(order_by(0), PAIRS)
    measured = _scalar_drifts(con, leaf_list)
    if sorted_pairs and n_scalar > 1 and not _settled_by(measured, 0):
        exact = (
            None
            if nested_float
            else lambda into: _pair_exactly(con, sides(order_by(0)), ks, leaf_list, n_scalar, into)
        )
        measured = _least_moved_pairing(con, measured, pair, order_by, n_scalar, leaf_list, exact)
    identical = con.execute(
        "SELECT "
        + ", ".join(
            f"sum(least(rn, ln) * {f'coalesce(len(v{i}), 0)' if leaf.is_list else '1'})"
            for i, leaf in enumerate(leaf_list)
        )
        + f" FROM {ROWS}"
    ).fetchone()
    drift = [
        _drift_of(leaf, measured[i], int(identical[i] or 0))
        if i in measured
        else _leaf_drift(con, i, leaf, int(identical[i] or 0))
        for i, leaf in enumerate(leaf_list)
    ]
    return groups, drift


# How many float columns may lead the order rows are paired by, one ordering each: each
# costs a pairing and a measurement of the rows left over.
PAIRING_ORDERS = 8


def _worst(measured: dict[int, tuple]) -> tuple[int, int]:
    """How far a pairing moves its rows: pairs moved to or from NaN or NULL, then the
    most ulps any scalar float column moved."""
    incomparable = sum(int(m[5] or 0) for m in measured.values())
    return incomparable, max((int(m[2] or 0) for m in measured.values()), default=0)


def _settled_by(measured: dict[int, tuple], first: int) -> bool:
    """Whether the pairing sorted by scalar float `first` moves rows least of any.

    Sorted to sorted is the pairing whose furthest move in the leading column is least
    (in ulps, per key group), so every pairing moves that column at least as far. When no
    other column moved further and nothing moved to or from NaN or NULL, no pairing can
    have a smaller furthest move, and trying others would only cost time."""
    incomparable, furthest = _worst(measured)
    return incomparable == 0 and furthest <= int(measured[first][2] or 0)


def _least_moved_pairing(
    con, measured, pair, order_by, n_scalar, leaf_list, exact=None
) -> dict[int, tuple]:
    """Pair the leftover rows again with each of the first float columns leading the order,
    and keep the pairing whose furthest move is least (the first, on a tie).

    Sorting by the first float column pairs rows correctly only while drift leaves that
    column's order alone. Two rows whose first values sit a few ulps apart swap order
    under the smallest drift, and each is then paired with the other's remaining
    columns: without a key, the report showed an average moving by 501 billion ulps
    where it had moved by two. A column whose values are far apart keeps its order, and
    the pairing it leads moves every column least; the data cannot name the rows, so the
    least movement is the one story the report can defend.

    Where rows sit within a few ulps of each other in every column, no one order pairs
    them; `exact`, where given, then writes the pairing with the least furthest move of
    any (or says there are too many rows for it), and it is kept if it moves less."""
    best = _worst(measured)
    # Every pairing moves column j at least as far as sorting by it does: the largest of
    # those figures is a floor no pairing goes under, and a pairing on it is the best.
    floor = int(measured[0][2] or 0)
    for first in range(1, min(n_scalar, PAIRING_ORDERS)):
        pair(order_by(first), PAIRS_TRIED)
        tried = _scalar_drifts(con, leaf_list, PAIRS_TRIED)
        floor = max(floor, int(tried[first][2] or 0))
        if _worst(tried) < best:
            best, measured = _worst(tried), tried
            con.execute(f"CREATE OR REPLACE TEMP TABLE {PAIRS} AS FROM {PAIRS_TRIED}")
        if _settled_by(tried, first):
            break
    if best > (0, floor) and exact is not None and exact(PAIRS_TRIED):
        tried = _scalar_drifts(con, leaf_list, PAIRS_TRIED)
        if _worst(tried) < best:
            measured = tried
            con.execute(f"CREATE OR REPLACE TEMP TABLE {PAIRS} AS FROM {PAIRS_TRIED}")
    con.execute(f"DROP TABLE IF EXISTS {PAIRS_TRIED}")
    return measured


# Past these, the leftover rows are paired by the orderings above alone: the exact pairing
# compares every row of a group with every other, in Python. On a side, rows in one key
# group, and rows in all. A group of 64 rows with every distance different took 15 ms
# here, so the bound on all of it is about half a second.
EXACT_GROUP = 64
EXACT_ROWS = 2048


def _pair_exactly(con, sides: str, ks, leaf_list, n_scalar: int, into: str) -> bool:
    """Write into `into` the pairing of the leftover rows (per key group) whose furthest move
    in ulps is least of any (matching.least_furthest), where there are few enough rows;
    return whether it did. A value moved to or from NaN or NULL counts as furthest of all."""
    types = [leaf_list[i].type_id for i in range(n_scalar)]
    bits = ", ".join(f"b{i}" for i in range(n_scalar))
    keys = "".join(f"{k}, " for k in ks)
    rows = con.execute(
        f"WITH {sides} SELECT 0, {keys}{bits} FROM ro UNION ALL SELECT 1, {keys}{bits} "
        f"FROM lo LIMIT {2 * EXACT_ROWS + 1}"
    ).fetchall()
    if len(rows) > 2 * EXACT_ROWS:
        return False
    groups: dict[tuple, tuple[list, list]] = {}
    for side, *values in rows:
        group = groups.setdefault(tuple(values[: len(ks)]), ([], []))
        group[side].append(tuple(values[len(ks) :]))
    if any(len(ref) > EXACT_GROUP or len(ref) != len(later) for ref, later in groups.values()):
        return False
    apart = 2**70  # further than any two floats are

    def distance(a: tuple, b: tuple) -> int:
        return max(
            d if (d := floats.ulps_apart(x, y, t)) is not None else apart
            for x, y, t in zip(a, b, types, strict=True)
        )

    columns: dict[str, list] = {f"{s}{i}": [] for i in range(n_scalar) for s in "ab"}
    for ref, later in groups.values():
        for r, j in zip(ref, matching.least_furthest(ref, later, distance), strict=True):
            for i, t in enumerate(types):
                columns[f"a{i}"].append(floats.from_bits(r[i], t))
                columns[f"b{i}"].append(floats.from_bits(later[j][i], t))
    width = {"double": pa.float64(), "float": pa.float32()}
    table = pa.table(
        {name: pa.array(values, width[types[int(name[1:])]]) for name, values in columns.items()}
    )
    con.register("__twicerun_exact", table)
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {into} AS FROM __twicerun_exact")
    finally:
        con.unregister("__twicerun_exact")
    return True


def _reassigned(
    con: duckdb.DuckDBPyConnection, key_names: Sequence[str], n_bits: int
) -> tuple[list[str], bool]:
    """Of an artifact whose rows all paired on the key while floats moved: the key columns
    whose removal lets every row pair with the same floats to the bit, and whether they
    do so only all together. Such rows are the same rows, handed other values of those
    columns, as a row_number() over tied rows hands them; read as drift, a number given to
    another row looked like a sum added in another order.

    Only the rows of ROWS that did not pair are read, since rows that did stay paired in
    any coarser grouping. Every float must pair with the whole key dropped, which real
    drift never does, so one scan settles the usual case."""
    bs = [f"b{i}" for i in range(n_bits)]

    def pairs_keeping(kept: Sequence[str]) -> bool:
        (left,) = con.execute(
            f"SELECT count(*) FROM (SELECT {', '.join([*kept, *bs])}, sum(rn - ln) AS s "
            f"FROM {ROWS} WHERE rn <> ln GROUP BY ALL) WHERE s <> 0"
        ).fetchone()
        return left == 0

    # The moved rows' floats as a multiset, each side's hashes summed against the other's:
    # one scan, where grouping them took a third of the comparison of three million
    # drifting rows. Different multisets almost never sum alike, and the grouping below
    # decides when they do.
    (balance,) = con.execute(
        f"SELECT sum(hash({', '.join(bs)})::HUGEINT * (rn - ln)) FROM {ROWS} WHERE rn <> ln"
    ).fetchone()
    if balance or not pairs_keeping([]):
        return [], False
    names = list(key_names)
    if len(names) == 1:
        return names, False
    if len(names) > MAX_ATTRIBUTION_COLUMNS:
        return names, True
    ks = _ks(len(names))
    alone = [name for j, name in enumerate(names) if pairs_keeping(ks[:j] + ks[j + 1 :])]
    return (alone, False) if alone else (names, True)


# Beside a table of disagreeing groups, the rows that did not pair with their floats' bits,
# each float column under its own name behind this prefix (no key column, `rn` or `ln` can
# be called that), for attribution to say whether the rows it pairs keep their floats.
FLOAT_ROWS = "_floats"
FLOAT_PREFIX = "float:"


def _keep_float_rows(con: duckdb.DuckDBPyConnection, n_key: int, floats: Sequence[str]) -> str:
    """The rows of ROWS that did not pair, by key and each float column's bits."""
    table = f"{IMBALANCE}{FLOAT_ROWS}"
    named = [f"b{i} AS {sql.identifier(FLOAT_PREFIX + name)}" for i, name in enumerate(floats)]
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {table} AS "
        f"SELECT {', '.join([*_ks(n_key), *named])}, rn, ln FROM {ROWS} WHERE rn <> ln"
    )
    return table


def handed_floats(
    a: Attribution, key_names: Sequence[str], drift: Sequence[Drift], checked: set[str]
) -> tuple[list[str], bool]:
    """The blamed key columns, as `reassigned` names them, where rows went unpaired because
    those columns were handed to other rows (row_number() over rows in another order) and
    the few that paired on the whole key by chance paired with another row's float: the
    "drift" on them is one row's value against another's. Dropping the blamed columns
    pairs every row with the same floats (`floats_differ` is empty), so no float moved,
    and the report says so, as it does where every row paired. `checked` names the float
    columns `floats_differ` looked at; drift in any other (a nested float) keeps this
    from being said."""
    blamed = _blamed(a)
    moved = [d for d in drift if d.moved]
    if not blamed or not moved or a.floats_differ or any(d.column not in checked for d in moved):
        return [], False
    return [n for n in key_names if n in blamed], a.chosen_by == "together"


def float_rows_checked(con: duckdb.DuckDBPyConnection, rows: str) -> set[str]:
    """The float columns a table of unpaired rows (FLOAT_ROWS) holds, as drift names them."""
    return {
        sql.shown(name.removeprefix(FLOAT_PREFIX))
        for (name,) in con.execute(f"SELECT column_name FROM (DESCRIBE {rows})").fetchall()
        if name.startswith(FLOAT_PREFIX)
    }


def _blamed(a: Attribution) -> set[str]:
    """The key columns an attribution blames whose removal pairs every row; none where
    it pairs only some, or blames nothing."""
    if a.chosen_by == "together":
        return set(a.tied)
    if a.chosen_by in ("counts", "invented") and a.column and a.after.get(a.column) == 0:
        return {a.column}
    return set()


def _floats_that_differ(
    con: duckdb.DuckDBPyConnection, rows: str, key_names: Sequence[str], a: Attribution
) -> list[str]:
    """The float columns that differ on the rows that pair once the blamed key columns are
    dropped: a `row_number()` over tied rows that keeps one version per customer picks
    another version, and its name and its balance both differ, where blaming the name
    alone reads as if only the name had changed. Empty unless the blamed columns pair
    every row."""
    blamed = _blamed(a)
    if not blamed:
        return []
    kept = [f"k{j}" for j, name in enumerate(key_names) if name not in blamed]
    floats = [
        name
        for (name,) in con.execute(f"SELECT column_name FROM (DESCRIBE {rows})").fetchall()
        if name.startswith(FLOAT_PREFIX)
    ]
    differ = []
    for name in floats:
        (left,) = con.execute(
            f"SELECT count(*) FROM (SELECT sum(rn - ln) AS s FROM {rows} "
            f"GROUP BY {', '.join([*kept, sql.identifier(name)])}) WHERE s <> 0"
        ).fetchone()
        if left:
            differ.append(name.removeprefix(FLOAT_PREFIX))
    return differ


def _one_left_each(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether no key group has more than one row left over on either side, which in a
    keyed artifact is the usual case and lets leftovers pair by their key alone."""
    (one_each,) = con.execute(
        f"SELECT coalesce(max(cr) <= 1 AND max(cl) <= 1, true) FROM {LEFTOVERS}"
    ).fetchone()
    return bool(one_each)


def _imbalance_totals(
    con: duckdb.DuckDBPyConnection, ref_rows: int, later_rows: int
) -> dict[str, int]:
    row = con.execute(
        f"""
        SELECT sum(CASE WHEN ln = 0 THEN rn ELSE 0 END),
               sum(CASE WHEN rn = 0 THEN ln ELSE 0 END),
               sum(CASE WHEN ln > 0 AND rn > ln THEN rn - ln ELSE 0 END),
               sum(CASE WHEN rn > 0 AND ln > rn THEN ln - rn ELSE 0 END)
        FROM {IMBALANCE}
        """
    ).fetchone()
    missing, extra, mult_missing, mult_extra = (int(v or 0) for v in row)
    return {
        "ref_rows": ref_rows,
        "later_rows": later_rows,
        "paired": ref_rows - missing - mult_missing,
        "missing": missing,
        "extra": extra,
        "mult_missing": mult_missing,
        "mult_extra": mult_extra,
    }


# What _leaf_drift's query and _scalar_drifts' return per leaf: compared, moved, the
# furthest ulps and relative move, the furthest pair, pairs without a ulp distance, and
# the pair to show when only those moved.
_DRIFT_AGGREGATES = """count(*),
               count(*) FILTER (WHERE mv),
               max(u) FILTER (WHERE mv),
               max(rl) FILTER (WHERE mv),
               -- The furthest pair, its bits breaking ties so the same pair is shown
               -- every time; a pair without a ulp distance (a NaN) only when no other moved.
               arg_max({'a': ba, 'b': bb, 'r': rl}, {'u': u, 'a': ba, 'b': bb})
                   FILTER (WHERE mv AND u IS NOT NULL),
               count(*) FILTER (WHERE mv AND u IS NULL),
               arg_max({'a': ba, 'b': bb, 'r': rl}, {'a': ba, 'b': bb}) FILTER (WHERE mv AND u IS NULL)"""


def _distances(t: str, source: str, carried: str = "") -> str:
    """Each pair of `source` (columns a and b) with whether it moved and how far.

    Each distance is computed once per pair here: the expressions are large, and
    repeating them in every aggregate doubled the planning time."""
    return f"""
            SELECT {carried}a, b, {floats.moved("a", "b", t)} AS mv, {floats.ulps("a", "b", t)} AS u,
                   {floats.relative("a", "b")} AS rl,
                   -- The pair leaves SQL as its bits: DuckDB drops the sign of -0.0
                   -- when it builds a list or struct of doubles.
                   {floats.bits("a", t)} AS ba, {floats.bits("b", t)} AS bb
            FROM {source}"""


def _scalar_drifts(
    con: duckdb.DuckDBPyConnection, leaf_list: Sequence[Leaf], pairs_table: str = PAIRS
) -> dict[int, tuple]:
    """The drift aggregates of every scalar leaf, one query per float type: the leaves'
    pairs stacked into one column pair (UNPIVOT, NULL pairs kept) and grouped by leaf.

    One query per leaf planned its large expressions once per leaf, about 3 ms each,
    which on an artifact of 400 float columns was a second per comparison; planned once,
    the same figures come from one query in a few tens of milliseconds."""
    by_type: dict[str, list[int]] = {}
    for i, leaf in enumerate(leaf_list):
        if not leaf.is_list:
            by_type.setdefault(leaf.type_id, []).append(i)
    measured: dict[int, tuple] = {}
    for t, indexes in by_type.items():
        pairs = ", ".join(f"(a{i}, b{i}) AS '{i}'" for i in indexes)
        stacked = f"(FROM {pairs_table} UNPIVOT INCLUDE NULLS ((a, b) FOR __leaf IN ({pairs})))"
        rows = con.execute(
            f"SELECT __leaf::INTEGER, {_DRIFT_AGGREGATES} "
            f"FROM ({_distances(t, stacked, carried='__leaf, ')}) GROUP BY __leaf"
        ).fetchall()
        measured.update({row[0]: tuple(row[1:]) for row in rows})
        # No pairs at all: the figures one query over no rows gives.
        for i in indexes:
            measured.setdefault(i, (0, 0, None, None, None, 0, None))
    return measured


def _leaf_drift(con: duckdb.DuckDBPyConnection, i: int, leaf: Leaf, identical: int) -> Drift:
    """A list leaf's drift: its pairs are the lists' elements, unnested."""
    t = leaf.type_id
    source = (
        f"(SELECT {floats.float_of_bits('a', t)} AS a, {floats.float_of_bits('b', t)} AS b "
        f"FROM (SELECT unnest(a{i}) AS a, unnest(b{i}) AS b FROM {PAIRS}))"
    )
    row = con.execute(f"SELECT {_DRIFT_AGGREGATES} FROM ({_distances(t, source)})").fetchone()
    lists_moved = lists_reordered = 0
    if row[1]:
        # A list that only changed its order (a list() over rows that arrived in
        # another order) moves nearly every position by a huge ulp count; say so.
        # The lists here are bits already, so equal means equal to the bit.
        lists_moved, lists_reordered = con.execute(
            f"SELECT count(*), count(*) FILTER (WHERE list_sort(a{i}) IS NOT DISTINCT FROM "
            f"list_sort(b{i})) FROM {PAIRS} WHERE a{i} IS DISTINCT FROM b{i}"
        ).fetchone()
    return _drift_of(leaf, row, identical, lists_moved, lists_reordered)


def _drift_of(
    leaf: Leaf, row: tuple, identical: int, lists_moved: int = 0, lists_reordered: int = 0
) -> Drift:
    t = leaf.type_id
    compared, moved_n, max_ulps, max_rel, at, incomparable, odd = row
    at = at if at is not None else odd
    reference_value = json_float(floats.from_bits(at["a"], t)) if at else None
    later_value = json_float(floats.from_bits(at["b"], t)) if at else None
    return Drift(
        column=leaf.path,
        type=t,
        unit="values" if leaf.is_list else "rows",
        moved=int(moved_n or 0),
        compared=int(compared or 0) + identical,
        max_ulps=int(max_ulps) if max_ulps is not None else None,
        max_relative=json_float(max_rel),
        reference_value=reference_value,
        later_value=later_value,
        incomparable=int(incomparable or 0),
        shown_relative=json_float(at["r"]) if at and at["r"] is not None else None,
        lists_moved=int(lists_moved),
        lists_reordered=int(lists_reordered),
        clock=not leaf.is_list
        and reference_value is not None
        and read_as_clock([reference_value], [later_value], time.time()),
    )


def attribute_table(
    con: duckdb.DuckDBPyConnection,
    table: str,
    key_names: Sequence[str],
    input_columns: set[str],
    before: int,
    rows: str | None = None,
) -> Attribution:
    """Leave-one-out over the disagreeing groups only; with `rows` (the rows that did not
    pair, with their floats, from compare_artifacts), also the floats that differ on the
    rows the blamed columns pair.

    Dropping a column merges groups; a merged group leaves |sum of (rn - ln)| rows
    unmatched, and groups that already agreed add nothing to that sum, so only the
    disagreeing groups need to be read. (One query per column measured faster here
    than a single GROUPING SETS pass.)
    """
    attribution = _leave_one_out(con, table, key_names, input_columns, before)
    if attribution.column is not None:
        attribution = replace(
            attribution,
            clock=_reads_as_clock(con, table, key_names.index(attribution.column)),
        )
    if rows is None:
        return attribution
    return replace(
        attribution, floats_differ=_floats_that_differ(con, rows, key_names, attribution)
    )


def _reads_as_clock(con: duckdb.DuckDBPyConnection, table: str, j: int) -> bool:
    """Whether the blamed column's unmatched values, a few from each side, read as when
    each run was made (compare/clock.py). As text: a timestamp's own text form keeps its
    zone, and a number's its digits."""
    k = f"k{j}"
    (types,) = con.execute(f"SELECT typeof({k}) FROM {table} LIMIT 1").fetchone() or (None,)
    number = types is not None and types.lower() in INTEGER_IDS
    sides = []
    for condition in ("rn > ln", "ln > rn"):
        values = [
            v
            for (v,) in con.execute(
                f"SELECT DISTINCT CAST({k} AS VARCHAR) FROM {table} WHERE {condition} "
                f"LIMIT {CLOCK_SAMPLE}"
            ).fetchall()
        ]
        sides.append([_number(v) if number else v for v in values])
    return read_as_clock(sides[0], sides[1], time.time())


# The unmatched values read back to decide whether they are clock readings: every one must
# be, so a few from each side say as much as all of them would, at a fixed cost.
CLOCK_SAMPLE = 20


def _number(text: str | None) -> float | None:
    return None if text is None else float(text)


def _leave_one_out(
    con: duckdb.DuckDBPyConnection,
    table: str,
    key_names: Sequence[str],
    input_columns: set[str],
    before: int,
) -> Attribution:
    column_of = {name: f"k{j}" for j, name in enumerate(key_names)}

    def left_by(*group_by: str) -> int:
        group = f"GROUP BY {', '.join(group_by)}" if group_by else ""
        (remaining,) = con.execute(
            f"SELECT coalesce(sum(abs(s)), 0) FROM (SELECT sum(rn - ln) AS s FROM {table} {group})"
        ).fetchone()
        return int(remaining)

    after = {
        name: left_by(*(column_of[other] for other in key_names if other != name))
        for name in key_names
    }
    invented = [name for name in key_names if name not in input_columns]
    best = min(after.values())
    if best >= before:
        return _together(con, table, key_names, before, after, invented, left_by)
    if best > 0:
        # One column's removal pairs some rows; columns dropped together may pair them all,
        # and then they are the answer: two columns that moved at random pair a few rows
        # by chance once a column that never moved is dropped, which named that column.
        together = _together(con, table, key_names, before, after, invented, left_by)
        if together.chosen_by == "together":
            return together
    tied = [name for name, v in after.items() if v == best]
    if len(tied) == 1:
        reordered = _reordered(con, table, key_names, tied, left_by) if best == 0 else []
        return Attribution(tied[0], before, after, tied, "counts", invented, reordered)
    tied_invented = [name for name in tied if name in invented]
    if len(tied_invented) == 1:
        return Attribution(tied_invented[0], before, after, tied, "invented", invented)
    return Attribution(None, before, after, tied, "undecided", invented)


def _together(con, table, key_names, before, after, invented, left_by) -> Attribution:
    """No one column's removal pairs every row. The key columns on which the unmatched rows
    agree, each on its own, are grouped by together; if that pairs every row, the other
    columns are the ones that differ, and they are named together.

    Rows that differ in two columns at once are common (`list(id)` and
    `string_agg(id, ',')` in one GROUP BY, both without ORDER BY), and "no single column
    explains them" sent the reader to compare every column by hand. Only read when
    leave-one-out found nothing, on the disagreeing groups alone."""
    none = Attribution(None, before, after, [], "none", invented)
    if len(key_names) < 3:
        return none  # with two columns, dropping both leaves no key to pair on
    agree = [f"k{j}" for j in range(len(key_names)) if left_by(f"k{j}") == 0]
    if not agree:
        return none
    if left_by(*agree) != 0:
        # Columns that agree one at a time need not agree together: a column of few values
        # (first(colour) per group) can hold the same values in both runs on other rows.
        # The set is built up instead, most distinct values first, keeping each column
        # that still pairs every row with those already kept.
        counts = con.execute(
            "SELECT " + ", ".join(f"count(DISTINCT {k})" for k in agree) + f" FROM {table}"
        ).fetchone()
        ranked = [k for _, k in sorted(zip(counts, agree, strict=True), key=lambda p: -p[0])]
        agree = ranked[:1]
        for k in ranked[1:]:
            if left_by(*agree, k) == 0:
                agree.append(k)
    differ = [name for j, name in enumerate(key_names) if f"k{j}" not in agree]
    reordered = _reordered(con, table, key_names, differ, left_by)
    return Attribution(None, before, after, differ, "together", invented, reordered)


def _reordered(con, table, key_names, blamed, left_by) -> list[str]:
    """Those of the `blamed` list columns whose rows pair once every list is sorted, the
    other blamed columns left out: the same elements, in another order."""
    types = dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {table})").fetchall())
    kept = [f"k{j}" for j, name in enumerate(key_names) if name not in blamed]
    return [
        name
        for j, name in enumerate(key_names)
        if name in blamed
        and types.get(f"k{j}", "").endswith("[]")
        and left_by(*kept, f"list_sort(k{j})") == 0
    ]
