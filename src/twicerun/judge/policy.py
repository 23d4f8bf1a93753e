"""Policies: what a measured difference is worth. They judge findings and never change them.

- strict (the default): any difference fires.
- reduction-order: a comparison whose only differences are float drift inside
  the derived reassociation bound (bound.py) is TOLERATED rather than fired,
  where the drift can come from adding in another order: not in the loop of a
  step that one thread, on the same input, still showed differing (the bisect),
  never in the single-threaded runs themselves, and never where the oracle
  found the floats only changed places (a list's elements in another order, or
  rows handed each other's values).

Manual tolerances (--tolerance-rel, --tolerance-ulps) work under either
policy: drift within every tolerance given is tolerated too. A tolerated
comparison is reported as such and never counts toward a fire rate, so it
never sets exit code 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from twicerun.findings import ArtifactOutcome, BoundFigures, Drift, finite
from twicerun.judge.bound import figures, reassociation_bound
from twicerun.vocabulary.loop import Difference, Judged, ordered

STRICT = "strict"
REDUCTION_ORDER = "reduction-order"
POLICIES = (STRICT, REDUCTION_ORDER)

SAME, FIRES, TOLERATED = Judged.SAME, Judged.FIRES, Judged.TOLERATED


@dataclass(frozen=True)
class Policy:
    name: str = STRICT
    tolerance_rel: float | None = None
    tolerance_ulps: int | None = None

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise ValueError(f"unknown policy {self.name!r}; choose one of {', '.join(POLICIES)}")


@dataclass(frozen=True)
class StepJudgement:
    verdicts: list[str]
    classes: list[str]
    bounds: list[BoundFigures] = field(default_factory=list)

    @property
    def fired(self) -> int:
        return self.verdicts.count(FIRES)

    @property
    def tolerated(self) -> int:
        return self.verdicts.count(TOLERATED)


def drift_tolerated(
    drift: Drift, rows_read: int, policy: Policy, reassociation: bool = True
) -> bool:
    """Whether one column's drift is inside what the policy (or a manual tolerance) allows.

    `reassociation` says whether adding in another order can explain drift here at all;
    where it cannot, reduction-order tolerates nothing, and only a manual tolerance,
    which claims no cause, still applies."""
    if drift.moved == 0:
        return True
    relative = finite(drift.max_relative)
    if drift.incomparable or relative is None:
        return False
    # A list whose floats came back in another order was not summed in another order:
    # its moves are elements trading places, however close their values are.
    by_policy = (
        reassociation
        and not drift.lists_reordered
        and policy.name == REDUCTION_ORDER
        and relative <= reassociation_bound(rows_read, drift.type)
    )
    manual = []
    if policy.tolerance_rel is not None:
        manual.append(relative <= policy.tolerance_rel)
    if policy.tolerance_ulps is not None:
        manual.append(drift.max_ulps is not None and drift.max_ulps <= policy.tolerance_ulps)
    return by_policy or (bool(manual) and all(manual))


def differing_pairs(pairs: Sequence[ArtifactOutcome]) -> list[ArtifactOutcome]:
    """The pairs that differ in what is compared. A pair whose digests differed but in which
    the oracle found nothing in the columns it compares (a --key left the differing column
    out) is the same answer."""
    return [p for p in pairs if p.differs and (p.findings is None or p.findings.classes)]


def judge_comparison(
    pairs: Sequence[ArtifactOutcome], rows_read: int, policy: Policy, reassociation: bool = True
) -> Judged:
    differing = differing_pairs(pairs)
    if not differing:
        return SAME
    for pair in differing:
        f = pair.findings
        if f is None or f.classes != [Difference.VALUE_DRIFT]:
            return FIRES
        # Rows handed each other's floats (f.reassigned) moved no sum either.
        summed = reassociation and not f.reassigned
        if not all(drift_tolerated(d, rows_read, policy, summed) for d in f.drift):
            return FIRES
    return TOLERATED


def judge_step(
    comparisons: Sequence[Sequence[ArtifactOutcome]],
    rows_read: int,
    policy: Policy,
    reassociation: bool = True,
) -> StepJudgement:
    verdicts = [judge_comparison(pairs, rows_read, policy, reassociation) for pairs in comparisons]
    classes: set[str] = set()
    worst: dict[tuple[str, str], tuple[float, str, int]] = {}
    for pairs in comparisons:
        for pair in pairs:
            if not pair.differs or pair.findings is None:
                continue
            classes.update(pair.findings.classes)
            for d in pair.findings.drift:
                if d.lists_moved and d.lists_reordered == d.lists_moved:
                    # Every list that moved holds its floats in another order: no sum was
                    # reassociated, so a bound on reassociation has nothing to say of it.
                    continue
                relative = finite(d.max_relative)
                if d.moved and relative is not None:
                    k = (pair.name, d.column)
                    if k not in worst or relative > worst[k][0]:
                        worst[k] = (relative, d.type, pair.findings.reference_rows)
    bounds = [
        figures(artifact, column, type_id, observed, rows_read, output_rows)
        for (artifact, column), (observed, type_id, output_rows) in worst.items()
    ]
    return StepJudgement(verdicts=verdicts, classes=ordered(classes, Difference), bounds=bounds)
