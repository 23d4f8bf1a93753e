"""Column classes, decided from the schema before a single row is read.

A column is one of:

- exact: integers, DECIMAL, strings, blobs, booleans, bits, dates, times,
  timestamps, intervals, UUIDs, enums, and the NULL type of a bare `NULL AS x`
  (no value in it can differ). A correct query run twice cannot give
  two different values here, so any difference is a finding, and these
  columns are what rows are matched on.
- float: FLOAT and DOUBLE. A parallel reduction may add terms in any order,
  so a difference here is measured (in ulp and relative terms), not assumed
  to be wrong.
- nested: LIST, ARRAY, STRUCT, MAP and UNION. One with no float anywhere
  inside behaves as exact; one with a float inside is compared element by
  element, so drift inside a list is measured like drift in a column.

A type not named above is refused. Falling through to a generic comparison
would decide silently what a difference in an unknown type means.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import duckdb

from twicerun import sql
from twicerun.compare import floats
from twicerun.errors import UnsupportedColumn

INTEGER_IDS = frozenset(
    {
        "tinyint",
        "smallint",
        "integer",
        "bigint",
        "hugeint",
        "utinyint",
        "usmallint",
        "uinteger",
        "ubigint",
        "uhugeint",
    }
)
TIMESTAMP_IDS = frozenset(
    {
        "timestamp",
        "timestamp_s",
        "timestamp_ms",
        "timestamp_ns",
        "timestamp with time zone",
        # DuckDB 2: what a pandas or pyarrow column of zoned nanosecond stamps becomes.
        "timestamptz_ns",
    }
)
EXACT_IDS = (
    INTEGER_IDS
    | TIMESTAMP_IDS
    | frozenset(
        {
            "boolean",
            "decimal",
            "varchar",
            "blob",
            "bit",
            "bignum",
            "varint",
            "date",
            "time",
            "time with time zone",
            "time_ns",
            # DuckDB 2's spatial and semi-structured types, whose values hash, group and
            # compare as wholes.
            "geometry",
            "variant",
            "interval",
            "uuid",
            "enum",
            "null",
        }
    )
)
FLOAT_IDS = frozenset({"float", "double"})
NESTED_IDS = frozenset({"list", "array", "struct", "map", "union"})


class ColumnClass(StrEnum):
    EXACT = "exact"
    FLOAT = "float"
    NESTED_EXACT = "nested exact"
    NESTED_FLOAT = "nested with float"

    @property
    def is_key(self) -> bool:
        """Whether rows may be matched on this column."""
        return self in (ColumnClass.EXACT, ColumnClass.NESTED_EXACT)


@dataclass(frozen=True)
class Column:
    """A column's name, its DuckDB type as text, and its class."""

    name: str
    type: str
    cls: ColumnClass


def _children(t: duckdb.DuckDBPyType) -> list[tuple[str, Any]]:
    try:
        return list(t.children)
    except Exception:
        return []


def nested_members(t: duckdb.DuckDBPyType) -> list[tuple[str, duckdb.DuckDBPyType]]:
    """The typed children of a nested type (the union's tag and the array's size left out)."""
    if t.id in ("list", "array"):
        return [(k, v) for k, v in _children(t) if k == "child"]
    if t.id == "union":
        return [(k, v) for k, v in _children(t) if k != ""]
    return [(k, v) for k, v in _children(t)]


def _check(t: duckdb.DuckDBPyType, where: str) -> bool:
    """Validate a type and return whether a float lies anywhere inside it."""
    if t.id in EXACT_IDS:
        return False
    if t.id in FLOAT_IDS:
        return True
    if t.id in NESTED_IDS:
        inner = [_check(child, f"{where}.{key}") for key, child in nested_members(t)]
        return any(inner)
    raise UnsupportedColumn(
        f"column {where} has type {t}, which twicerun does not know how to compare; "
        f"cast it in the step to a type it does (VARCHAR, BLOB, an integer or DOUBLE) "
        f"before ctx.write, or file an issue naming the type"
    )


def classify(name: str, t: duckdb.DuckDBPyType) -> Column:
    """The class of one column, or UnsupportedColumn for a type not on the lists above."""
    has_float = _check(t, name)
    if t.id in FLOAT_IDS:
        cls = ColumnClass.FLOAT
    elif t.id in NESTED_IDS:
        cls = ColumnClass.NESTED_FLOAT if has_float else ColumnClass.NESTED_EXACT
    else:
        cls = ColumnClass.EXACT
    return Column(name=name, type=str(t), cls=cls)


def struct_field(expr: str, name: str, position: int, unnamed: bool) -> str:
    """A struct's field by name, or by position in a struct with an unnamed field: DuckDB
    1.x reads a UNION back from Parquet as a STRUCT whose tag field is named "", and
    then refuses every field's name."""
    if unnamed:
        return f"struct_extract_at({expr}, {position})"
    return f"({expr}).{sql.identifier(name)}"


def has_unnamed_field(t: duckdb.DuckDBPyType) -> bool:
    return t.id == "struct" and any(not k for k, _ in nested_members(t))


def rewrite_floats(
    expr: str, t: duckdb.DuckDBPyType, on_float: Callable[[str, str], str], depth: int = 0
) -> str:
    """`expr` with every float inside it, at any depth, replaced by `on_float(float_expr, type_id)`.

    Everything else keeps its shape: list order and length, struct fields, map
    entries in order, a union's tag. Values with no float inside come back as is.
    """
    if t.id in FLOAT_IDS:
        return on_float(expr, t.id)
    if t.id in EXACT_IDS or not contains_float(t):
        return expr
    var = f"x{depth}"

    def inner(e: str, child: duckdb.DuckDBPyType) -> str:
        return rewrite_floats(e, child, on_float, depth + 1)

    if t.id in ("list", "array"):
        ((_, child),) = nested_members(t)
        return f"list_transform({expr}, lambda {var}: {inner(var, child)})"
    if t.id == "struct":
        unnamed = has_unnamed_field(t)
        fields = ", ".join(
            f"{sql.identifier(k or f'__twicerun_field_{i}')} := "
            f"{inner(struct_field(expr, k, i, unnamed), v)}"
            for i, (k, v) in enumerate(nested_members(t), start=1)
        )
        return f"(CASE WHEN ({expr}) IS NULL THEN NULL ELSE struct_pack({fields}) END)"
    if t.id == "map":
        members = dict(nested_members(t))
        key = inner(f"{var}.key", members["key"])
        value = inner(f"{var}.value", members["value"])
        return f"list_transform(map_entries({expr}), lambda {var}: struct_pack(k := {key}, v := {value}))"
    if t.id == "union":
        parts = ", ".join(
            f"{sql.identifier(k)} := {inner(f'union_extract({expr}, {sql.string(k)})', v)}"
            for k, v in nested_members(t)
        )
        return f"(CASE WHEN ({expr}) IS NULL THEN NULL ELSE struct_pack(tag := union_tag({expr}), {parts}) END)"
    raise UnsupportedColumn(f"no encoding for type {t}")  # unreachable after _check


def canonical_expr(expr: str, t: duckdb.DuckDBPyType) -> str:
    """An expression whose DuckDB hash is equal exactly when the values are equal bit for bit.

    DuckDB's own hash and equality treat -0.0 and 0.0 as one value; floats are
    therefore encoded as their bits wherever they occur, nested ones included.
    """
    return rewrite_floats(expr, t, floats.bits)


def contains_float(t: duckdb.DuckDBPyType) -> bool:
    if t.id in FLOAT_IDS:
        return True
    if t.id in NESTED_IDS:
        return any(contains_float(child) for _, child in nested_members(t))
    return False
