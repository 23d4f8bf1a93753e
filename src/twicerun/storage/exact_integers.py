"""128-bit integers stored exactly.

DuckDB's Parquet writer stores HUGEINT and UHUGEINT as DOUBLE, and `sum` of any
integer column is a HUGEINT, so without this every integer total would reach the
oracle as a float: a changed total reported as float drift in ulps, and two totals
past 2**53 that differ by one written as the same double, so a step that is not
deterministic would look as if it were. DECIMAL(38,0) is a Parquet type that holds
every integer of up to 38 digits exactly; a value beyond that is refused by name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from twicerun import sql
from twicerun.errors import ContractError

STORED_AS = "DECIMAL(38,0)"
# A type token, not a STRUCT field that happens to be named hugeint: in a type's text
# a field name is followed by a space and its type, a type by `,`, `)`, `[` or the end.
_HUGE = re.compile(r"\bU?HUGEINT(?=[,)\[]|$)")


def exact_casts(names: Sequence[str], types: Sequence[object]) -> dict[str, str]:
    """Each column whose type holds a 128-bit integer, with the type it is stored as."""
    casts = {}
    for name, type_ in zip(names, types, strict=True):
        text = str(type_)
        if _HUGE.search(text):
            casts[name] = _HUGE.sub(STORED_AS, text)
    return casts


def projection(names: Sequence[str], casts: dict[str, str]) -> list[str]:
    """Every column in order, those in `casts` cast, each under its own name."""
    return [
        f"CAST({sql.identifier(n)} AS {casts[n]}) AS {sql.identifier(n)}"
        if n in casts
        else sql.identifier(n)
        for n in names
    ]


def too_wide(head: str, casts: dict[str, str], error: Exception) -> ContractError | None:
    """The sentence for a value beyond 38 digits, or None when `error` is something else."""
    if STORED_AS not in str(error) or "cast" not in str(error).lower():
        return None
    names = list(casts)
    which = names[0] if len(names) == 1 else f"one of {', '.join(names[:-1])} and {names[-1]}"
    return ContractError(
        f"{head}: {which} holds an integer of more than 38 digits, which Parquet cannot store "
        f"exactly (twicerun stores HUGEINT and UHUGEINT as {STORED_AS}); cast it in the step, to "
        f"VARCHAR to keep every digit or to DOUBLE if an approximation will do"
    )
