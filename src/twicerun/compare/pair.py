"""Settling one pair of artifacts: by bytes, by canonical digest, or by the oracle.

The cheap answers come first. Equal bytes prove sameness without reading a
row; equal canonical digests prove the same multiset of rows; only a pair
neither can settle is handed to the oracle, which reads both sides to say
how they differ. An artifact present on one side only needs no oracle to be
a difference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from twicerun.findings import ArtifactFindings, ArtifactOutcome
from twicerun.vocabulary.loop import Presence, SettledBy


@dataclass(frozen=True)
class Side:
    """One side of a pair: where the artifact is and what its receipt says about it."""

    name: str
    path: Path | None
    bytes_digest: str
    canonical_digest: str
    rows: int
    schema: list[list[str]]


Oracle = Callable[[Side | None, Side | None], ArtifactFindings]


class Digested(Protocol):
    bytes_digest: str
    canonical_digest: str


def same_rows(a: Digested, b: Digested) -> SettledBy | None:
    """What proves two copies hold the same rows (bytes, or canonical digest), or None.

    The one definition of sameness: the loop's pairs, the pruning of copies
    identical to run 1, and the verdicts over recorded runs all ask it.
    """
    if a.bytes_digest == b.bytes_digest:
        return SettledBy.BYTES
    # An empty canonical digest was never computed, and two of them prove nothing.
    if a.canonical_digest and a.canonical_digest == b.canonical_digest:
        return SettledBy.CANONICAL
    return None


def settle(
    reference: Side | None, later: Side | None, oracle: Oracle | None = None
) -> ArtifactOutcome:
    """Compare one artifact across two runs, reading rows only when the digests disagree."""
    if reference is None and later is None:
        raise ValueError("settle needs at least one side")
    if reference is None or later is None:
        present = reference or later
        assert present is not None
        return ArtifactOutcome(
            name=present.name,
            presence=Presence.LATER_ONLY if reference is None else Presence.REFERENCE_ONLY,
            settled_by=SettledBy.PRESENCE,
            differs=True,
            reference_rows=reference.rows if reference else None,
            later_rows=later.rows if later else None,
            findings=oracle(reference, later) if oracle is not None else None,
        )
    common = dict(
        name=reference.name,
        presence=Presence.BOTH,
        reference_rows=reference.rows,
        later_rows=later.rows,
    )
    proof = same_rows(reference, later)
    if proof is not None:
        return ArtifactOutcome(settled_by=proof, differs=False, **common)
    findings = oracle(reference, later) if oracle is not None else None
    return ArtifactOutcome(
        settled_by=SettledBy.ORACLE if oracle is not None else SettledBy.CANONICAL,
        differs=True,
        findings=findings,
        **common,
    )
