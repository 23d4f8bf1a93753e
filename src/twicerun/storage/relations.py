"""The relations a step's `ctx` hands back, with the row-at-a-time reads of DuckDB 1.x.

A pipeline written for DuckDB 1.x reads one value as `ctx.sql(query).fetchone()[0]`.
DuckDB 2 took `fetchone` and `fetchmany` off relations, since a relation keeps no
result between calls and would run its query again on each. The contract says a
pipeline written for another runner with the same `ctx` works as is, and such a
runner on DuckDB 1.x gave both; so where the installed DuckDB lacks them, the
relations `ctx` returns (and the relations derived from them) have them again, as
DuckDB 1.x had them: the first call runs the relation once and keeps its rows, and
each later call hands out the next ones, None (or an empty list) once they are all
out, and a `fetchall` after them the rows they left. Where DuckDB has them, its own
relations are handed back untouched.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

import duckdb

# DuckDB 2 answers an instance's `fetchone` from `__getattr__` with an error, so the
# class is what says whether relations have one.
_LACKING = not hasattr(duckdb.DuckDBPyRelation, "fetchone")

# Rows already run and not yet handed out, per relation.
_PENDING: weakref.WeakKeyDictionary[Any, Iterator[tuple]] = weakref.WeakKeyDictionary()


def handed_out(relation: Any) -> Any:
    """`relation`, able to `fetchone` and `fetchmany` whatever the installed DuckDB."""
    if _LACKING and type(relation) is duckdb.DuckDBPyRelation:
        relation.__class__ = _Relation
    return relation


def _pending(relation: Any) -> Iterator[tuple]:
    rows = _PENDING.get(relation)
    if rows is None:
        rows = _PENDING[relation] = iter(relation.fetchall())
    return rows


if _LACKING:

    class _Relation(duckdb.DuckDBPyRelation):
        """DuckDB's relation, plus the two reads DuckDB 1.x had (same layout: no slots)."""

        __slots__ = ()

        def fetchone(self) -> tuple | None:
            """The next row of this relation's rows, run once on the first call; None after
            the last."""
            return next(_pending(self), None)

        def fetchmany(self, size: int = 1) -> list[tuple]:
            """Up to `size` next rows, run once on the first call; [] after the last."""
            rows = _pending(self)
            return [row for _, row in zip(range(size), rows, strict=False)]

        def fetchall(self) -> list[tuple]:
            """The rows a fetchone or fetchmany left, ending that result; otherwise every
            row, the relation run again (both as on DuckDB 1.x)."""
            rows = _PENDING.pop(self, None)
            return list(rows) if rows is not None else super().fetchall()

        def _derive(self, *args: Any, **kwargs: Any) -> Any:
            # `ctx.read("t").filter(...).fetchone()` worked on DuckDB 1.x too.
            return handed_out(super()._derive(*args, **kwargs))
