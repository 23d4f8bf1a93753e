"""The oracle's explanation of one difference, in one line: classes, counts, how far."""

from __future__ import annotations

from pathlib import Path

import duckdb

from twicerun.compare.oracle import compare_artifacts
from twicerun.findings import ArtifactFindings


def explain(
    con: duckdb.DuckDBPyConnection, name: str, a: Path | None, b: Path | None
) -> tuple[ArtifactFindings | None, str]:
    """The findings for artifact `name` between two copies, and a sentence about them."""
    if a is None or b is None:
        return None, (
            "its rows are not on disk on both sides, so the oracle cannot say how (a later "
            "run's differing copies are deleted once compared; `twicerun run --keep-copies` "
            "keeps the latest)"
        )
    findings = compare_artifacts(con, name, a, b, attribute_above=None)
    return findings, describe(findings)


def describe(f: ArtifactFindings) -> str:
    parts = [f"{f.artifact}: {', '.join(f.classes) or 'no class'}"]
    counts = [
        f"{n:,} {'row' if n == 1 else 'rows'} {what}"
        for n, what in (
            (f.missing, "only in the first"),
            (f.extra, "only in the second"),
            (f.multiplicity_missing + f.multiplicity_extra, "repeated another number of times"),
        )
        if n
    ]
    if counts:
        parts.append(", ".join(counts) + f" (of {f.reference_rows:,} and {f.later_rows:,})")
    moved = [d for d in f.drift if d.moved]
    if moved:
        worst = max(moved, key=lambda d: d.max_ulps or 0)
        relative = worst.max_relative
        relative_text = f"{relative:.2g}" if isinstance(relative, float) else str(relative)
        count = sum(d.moved for d in moved)
        values = f"{count:,} float {'value' if count == 1 else 'values'} moved"
        parts.append(
            f"{values}, furthest in {worst.column}: {worst.max_ulps:,} "
            f"{'ulp' if worst.max_ulps == 1 else 'ulps'}, {relative_text} relative"
            if worst.max_ulps is not None
            else values
        )
    if f.schema is not None and f.schema.any:
        parts.append("the columns differ")
    return "; ".join(parts)
