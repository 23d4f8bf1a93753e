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

They also take turns on the step's one connection. DuckDB 2 refuses a call on a
connection another thread's call is using, where DuckDB 1 waited; ctx's own calls
already wait for each other (storage/context.py), and so do these relations' reads:
`ctx.sql(query).fetchall()` from a thread pool runs as it did on DuckDB 1. A read that
streams (`iter_rows`, `to_arrow_reader`) holds the connection until it is read to the
end, which no lock can wait out; the crash report says so (runner/execute.py). On
DuckDB 1.x relations are handed back as DuckDB made them: an instance of its relation
class cannot be given a Python subclass, so their reads take no turn (docs/pipelines.md).
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Iterator
from typing import Any

import duckdb

# DuckDB 2 answers an instance's `fetchone` from `__getattr__` with an error, so the
# class is what says whether relations have one.
_LACKING = not hasattr(duckdb.DuckDBPyRelation, "fetchone")

# Rows already run and not yet handed out, per relation.
_PENDING: weakref.WeakKeyDictionary[Any, Iterator[tuple]] = weakref.WeakKeyDictionary()
# The lock of the ctx each relation came from, for the reads that run its query.
_TURNS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def handed_out(relation: Any, turn: Any = None) -> Any:
    """`relation`, able to `fetchone` and `fetchmany` whatever the installed DuckDB, its
    reads holding `turn` (a ctx's lock) while they run."""
    if not _LACKING or not isinstance(relation, duckdb.DuckDBPyRelation):
        return relation
    if type(relation) is duckdb.DuckDBPyRelation:
        relation.__class__ = _Relation
    if turn is not None:
        _TURNS[relation] = turn
    return relation


@contextlib.contextmanager
def _turn_of(relation: Any) -> Iterator[None]:
    turn = _TURNS.get(relation)
    if turn is None:
        yield
        return
    with turn:
        yield


def _taking_turns(member: Any) -> Any:
    """DuckDB's relation method (or property) `member`, run holding the relation's ctx
    lock: reading rows, and building a relation too, which parses and binds on the
    connection (`filter("g = 1")` asks DuckDB what `g` is)."""
    if isinstance(member, property):
        return property(_taking_turns(member.fget), doc=member.__doc__)

    @functools.wraps(member)
    def in_turn(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _turn_of(self):
            return member(self, *args, **kwargs)

    return in_turn


def _connection_members() -> list[str]:
    """The relation's members that may use its connection: the public ones and the
    special ones DuckDB reports a closed connection from (its `_RELATION_DUNDERS`),
    plus `_fresh`, which binds. A reader a member returns (`to_arrow_reader`) is made
    in turn and read outside it: no lock can be held for as long as a caller streams."""
    try:
        from duckdb import _relation

        special = set(_relation._RELATION_DUNDERS)
    except (ImportError, AttributeError):
        special = {"__len__", "__contains__", "__getattr__", "__getitem__"}
    return [
        name
        for name, member in vars(duckdb.DuckDBPyRelation).items()
        if (not name.startswith("_") or name in special or name == "_fresh")
        and not isinstance(member, staticmethod | classmethod)
        and (callable(member) or isinstance(member, property))
    ]


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
            if rows is not None:
                return list(rows)
            with _turn_of(self):
                return super().fetchall()

        def _derive(self, *args: Any, **kwargs: Any) -> Any:
            # `ctx.read("t").filter(...).fetchone()` worked on DuckDB 1.x too; deriving
            # binds the new relation on the connection, in turn.
            with _turn_of(self):
                return handed_out(super()._derive(*args, **kwargs), _TURNS.get(self))

    for _name in _connection_members():
        if _name not in vars(_Relation):  # fetchall and _derive take their turn above
            setattr(_Relation, _name, _taking_turns(vars(duckdb.DuckDBPyRelation)[_name]))
