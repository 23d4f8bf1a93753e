"""Settling one pair of artifacts: by bytes, by canonical digest, or by the oracle.

The cheap answers come first. Equal bytes prove sameness without reading a
row; equal canonical digests prove the same multiset of rows; only a pair
neither can settle is handed to the oracle, which reads both sides to say
how they differ. An artifact present on one side only needs no oracle to be
a difference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

BOTH = "both"
REFERENCE_ONLY = "reference only"
LATER_ONLY = "later only"

BY_BYTES = "bytes"
BY_CANONICAL = "canonical digest"
BY_ORACLE = "oracle"
BY_PRESENCE = "presence"


@dataclass(frozen=True)
class Side:
    """One side of a pair: where the artifact is and what its receipt says about it."""

    name: str
    path: Path | None
    bytes_digest: str
    canonical_digest: str
    rows: int
    schema: list[list[str]]


@dataclass(frozen=True)
class PairOutcome:
    """Whether one artifact came back different, and what settled it."""

    name: str
    presence: str
    settled_by: str
    differs: bool
    reference_rows: int | None
    later_rows: int | None
    findings: dict[str, Any] | None = field(default=None)


Oracle = Callable[[Side | None, Side | None], dict[str, Any]]


class Digested(Protocol):
    bytes_digest: str
    canonical_digest: str


def same_rows(a: Digested, b: Digested) -> str | None:
    """What proves two copies hold the same rows (BY_BYTES, BY_CANONICAL), or None.

    The one definition of sameness: the loop's pairs, the pruning of copies
    identical to run 1, and the verdicts over recorded runs all ask it.
    """
    if a.bytes_digest == b.bytes_digest:
        return BY_BYTES
    # An empty canonical digest was never computed, and two of them prove nothing.
    if a.canonical_digest and a.canonical_digest == b.canonical_digest:
        return BY_CANONICAL
    return None


def settle(reference: Side | None, later: Side | None, oracle: Oracle | None = None) -> PairOutcome:
    """Compare one artifact across two runs, reading rows only when the digests disagree."""
    if reference is None and later is None:
        raise ValueError("settle needs at least one side")
    if reference is None or later is None:
        present = reference or later
        assert present is not None
        return PairOutcome(
            name=present.name,
            presence=LATER_ONLY if reference is None else REFERENCE_ONLY,
            settled_by=BY_PRESENCE,
            differs=True,
            reference_rows=reference.rows if reference else None,
            later_rows=later.rows if later else None,
            findings=oracle(reference, later) if oracle is not None else None,
        )
    common = dict(
        name=reference.name, presence=BOTH, reference_rows=reference.rows, later_rows=later.rows
    )
    proof = same_rows(reference, later)
    if proof is not None:
        return PairOutcome(settled_by=proof, differs=False, **common)
    findings = oracle(reference, later) if oracle is not None else None
    return PairOutcome(
        settled_by=BY_ORACLE if oracle is not None else BY_CANONICAL,
        differs=True,
        findings=findings,
        **common,
    )
