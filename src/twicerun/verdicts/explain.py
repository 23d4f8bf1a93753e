"""The oracle's explanation of one difference, in one line: classes, counts, how far."""

from __future__ import annotations

import contextlib
from pathlib import Path

import duckdb

from twicerun.compare.clock import sides_in_either_order
from twicerun.compare.oracle import compare_artifacts
from twicerun.findings import NAMED_TOGETHER, ArtifactFindings
from twicerun.sql import shown

# How a sentence names the two sides: two recorded runs, or a record and its re-execution.
BETWEEN_RUNS = ("in the first", "in the second")
AGAINST_RECORD = ("as recorded", "as re-executed")
NOT_ON_DISK = "its rows are not on disk on both sides, so the oracle cannot say how"


def explain(
    con: duckdb.DuckDBPyConnection,
    name: str,
    a: Path | None,
    b: Path | None,
    sides: tuple[str, str] = BETWEEN_RUNS,
) -> tuple[ArtifactFindings | None, str]:
    """The findings for artifact `name` between two copies, and a sentence about them."""
    if a is None or b is None:
        return None, (
            f"{NOT_ON_DISK} (a later run's differing copies are deleted once compared; "
            "`twicerun run --keep-copies` keeps the latest)"
        )
    # Attribution too: one artifact is explained, once, and which columns moved (or that a
    # list only came back in another order) is what the reader of a diff looks for next.
    # Two recorded runs come in the order they were named, which may be newest first; a
    # re-execution always ran after its record.
    ordered = sides_in_either_order() if sides == BETWEEN_RUNS else contextlib.nullcontext()
    with ordered:
        findings = compare_artifacts(con, name, a, b, attribute_above=0)
    return findings, describe(findings, sides)


def describe(f: ArtifactFindings, sides: tuple[str, str] = BETWEEN_RUNS) -> str:
    parts = [f"{f.artifact}: {', '.join(f.classes) or 'no class'}"]
    counts = [
        f"{n:,} {'row' if n == 1 else 'rows'} {what}"
        for n, what in (
            (f.missing, f"only {sides[0]}"),
            (f.extra, f"only {sides[1]}"),
            (f.multiplicity_missing + f.multiplicity_extra, "repeated another number of times"),
        )
        if n
    ]
    if counts:
        parts.append(", ".join(counts) + f" (of {f.reference_rows:,} and {f.later_rows:,})")
    moved = [d for d in f.drift if d.moved]
    if moved:
        worst = max(moved, key=lambda d: d.max_ulps or 0)
        # The furthest pair's own relative figure, as the ulps are its: a column's largest
        # could be another pair's ("0 relative" beside +inf against -inf).
        relative_text = worst.relative_phrase(2)
        count = sum(d.moved for d in moved)
        values = f"{count:,} float {'value' if count == 1 else 'values'} moved"
        parts.append(
            f"{values}, furthest in {worst.column}: {worst.max_ulps:,} "
            f"{'ulp' if worst.max_ulps == 1 else 'ulps'}, {relative_text}"
            if worst.max_ulps is not None
            else values
        )
    if f.schema is not None and f.schema.any:
        parts.append(f"the columns differ: {f.schema.said()}")
    moved_columns = _columns_that_moved(f)
    if moved_columns:
        parts.append(moved_columns)
    if f.reassigned:
        names = [shown(c) for c in f.reassigned]
        dropped = (
            f"{' and '.join(names)} are left out together"
            if f.reassigned_together
            else f"{' or '.join(names)} is left out"
        )
        parts.append(f"every row pairs with the same floats once {dropped}: the same rows")
    return "; ".join(parts)


def _columns_that_moved(f: ArtifactFindings) -> str:
    """Which key columns the unmatched rows differ in, where dropping them pairs every row,
    and which of those lists hold the same elements in another order. Only for rows found
    on one side alone; of a key of one column only the order, since dropping a key's only
    column pairs any rows whose counts agree."""
    a = f.attribution
    if a is None or not (f.missing and f.extra):
        return ""
    clauses = []
    if len(a.after) >= 2:
        if a.chosen_by == "together":
            kept = [shown(k) for k in a.after if k not in a.tied]
            blamed = (
                " and ".join(shown(t) for t in a.tied)
                if len(a.tied) <= NAMED_TOGETHER
                else f"every key column but {' and '.join(kept)}"
            )
            clauses.append(f"they pair once {blamed} are left out together")
        elif a.column is not None and a.after.get(a.column) == 0:
            clauses.append(f"they pair once {shown(a.column)} is left out")
            if a.clock:
                # compare/clock.py: recent instants, one side's all after the other's.
                clauses.append(f"{shown(a.column)} holds the time each was written, a clock read")
        elif len(a.tied) > 1 and a.after.get(a.tied[0]) == 0:
            # A surrogate and the id it was assigned to, whose pairing moved: either, dropped,
            # pairs every row, and a diff has no step inputs to choose between them by.
            clauses.append(f"they pair once {' or '.join(shown(t) for t in a.tied)} is left out")
    if a.reordered:
        names = " and ".join(shown(r) for r in a.reordered)
        verb = "holds" if len(a.reordered) == 1 else "hold"
        clauses.append(f"{names} {verb} the same elements in another order")
    if a.floats_differ and clauses:
        names = " and ".join(shown(f) for f in a.floats_differ)
        clauses.append(
            f"{names} {'differs' if len(a.floats_differ) == 1 else 'differ'} on them too"
        )
    return "; ".join(clauses)
