"""Turning measured comparisons into a step's verdict under a policy.

The same function scores a step right after the loop measured it and again
when `twicerun judge` re-scores a saved invocation, so the two cannot drift
apart: only the policy differs, never the findings.
"""

from __future__ import annotations

from dataclasses import replace

from twicerun.compare.findings import ArtifactFindings
from twicerun.judge.policy import FIRES, PairMeasure, Policy, judge_step
from twicerun.judge.status import loop_status
from twicerun.result import Comparison, Result, StepResult


def measures(comparison: Comparison) -> list[PairMeasure]:
    return [
        PairMeasure(
            artifact=a.name,
            differs=a.differs,
            findings=ArtifactFindings.from_dict(a.findings) if a.findings else None,
        )
        for a in comparison.artifacts
    ]


def score_step(step: StepResult, policy: Policy) -> StepResult:
    """The step with its fire count, tolerated count, classes, bounds and status set."""
    judgement = judge_step([measures(c) for c in step.comparisons], step.rows_read, policy)
    comparisons = [
        replace(c, verdict=v, fired=v == FIRES)
        for c, v in zip(step.comparisons, judgement.verdicts, strict=True)
    ]
    compared = sum(1 for c in comparisons if c.artifacts)
    return replace(
        step,
        comparisons=comparisons,
        fired=judgement.fired,
        tolerated=judgement.tolerated,
        compared=compared,
        classes=judgement.classes,
        bounds=[b.to_dict() for b in judgement.bounds],
        status=loop_status(judgement.fired, compared),
    )


def score(result: Result, policy: Policy) -> Result:
    """Re-score every step of a Result under `policy`; measurements are untouched."""
    return replace(
        result,
        policy=policy.name,
        tolerance_rel=policy.tolerance_rel,
        tolerance_ulps=policy.tolerance_ulps,
        steps=[score_step(s, policy) for s in result.steps],
    )
