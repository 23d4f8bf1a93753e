"""Nested values with floats inside, split into what is exact and what is measured.

A nested column holding a float somewhere (a LIST of DOUBLE, a STRUCT with a
DOUBLE field, a MAP with DOUBLE values) is split in two:

- its skeleton: the same value with every float replaced by whether it is
  NULL. Lengths, exact fields, map keys and union tags all stay, so the
  skeleton is exact and takes part in matching rows like any exact column;
- its leaves: one per path to a float (`scores[]`, `stats.mean`,
  `prices.value[]`; a name that is not one word in SQL's double quotes, so a
  path reads one way only), each an expression giving that float, or a flat list of
  them when a list lies on the path. Two rows whose skeletons match have
  leaves of the same shape, so leaves are compared element by element, in
  ulp and relative terms, like a float column.

A list whose floats come back in another order keeps its skeleton and moves
its leaves, so it is a difference, measured as drift.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from twicerun import sql
from twicerun.compare.columns import (
    FLOAT_IDS,
    contains_float,
    has_unnamed_field,
    nested_members,
    rewrite_floats,
    struct_field,
)


@dataclass(frozen=True)
class Leaf:
    """One path to a float inside a column: a scalar, or a flat list of floats."""

    path: str
    expr: str
    type_id: str
    is_list: bool


def _var(depth: int) -> str:
    return f"n{depth}"


def skeleton(expr: str, t: duckdb.DuckDBPyType) -> str:
    """The exact part of a value: floats replaced by whether they are NULL."""
    return rewrite_floats(expr, t, lambda e, _type_id: f"(({e}) IS NULL)")


def _union_member(expr: str, member: str) -> str:
    return f"union_extract({expr}, {sql.string(member)})"


def leaves(expr: str, t: duckdb.DuckDBPyType, path: str, depth: int = 0) -> list[Leaf]:
    """Every path to a float inside a value of type t."""
    if t.id in FLOAT_IDS:
        return [Leaf(path, expr, t.id, False)]
    if not contains_float(t):
        return []
    v = _var(depth)
    found: list[Leaf] = []
    if t.id in ("list", "array"):
        ((_, child),) = nested_members(t)
        for leaf in leaves(v, child, f"{path}[]", depth + 1):
            inner = f"list_transform({expr}, lambda {v}: {leaf.expr})"
            found.append(
                Leaf(leaf.path, f"flatten({inner})" if leaf.is_list else inner, leaf.type_id, True)
            )
        return found
    if t.id == "struct":
        unnamed = has_unnamed_field(t)
        for position, (k, c) in enumerate(nested_members(t), start=1):
            field = struct_field(expr, k, position, unnamed)
            found.extend(leaves(field, c, f"{path}.{sql.shown(k)}", depth + 1))
        return found
    if t.id == "map":
        members = dict(nested_members(t))
        for part, getter in (("key", "map_keys"), ("value", "map_values")):
            for leaf in leaves(v, members[part], f"{path}.{part}[]", depth + 1):
                inner = f"list_transform({getter}({expr}), lambda {v}: {leaf.expr})"
                found.append(
                    Leaf(
                        leaf.path,
                        f"flatten({inner})" if leaf.is_list else inner,
                        leaf.type_id,
                        True,
                    )
                )
        return found
    if t.id == "union":
        for k, c in nested_members(t):
            found.extend(leaves(_union_member(expr, k), c, f"{path}.{sql.shown(k)}", depth + 1))
        return found
    return found
