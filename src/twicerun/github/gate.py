"""The pull-request gate, as data: decisions, what to annotate, what to summarise, what to output.

The CLI runs the pipelines and hands their Results here; this module decides
per step against the baseline, and prepares every artefact of the check (the
comment body, the annotations, the job summary, the step outputs, and a JSON
document of it all). Nothing here prints or exits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from twicerun.github.baseline import (
    DEFAULT_ALPHA,
    FIXED,
    RATE_DOWN,
    StepDecision,
    decide,
    environment_changes,
    is_regression,
)
from twicerun.github.commands import Annotation
from twicerun.github.comment import BUDGET, render
from twicerun.result import Result

SCHEMA = "twicerun.gate/1"


@dataclass
class Gate:
    decisions: list[StepDecision]
    regressions: list[StepDecision]
    environment: list[str]
    baseline_error: str | None
    results: dict[str, Result]
    fail_on: list[str]
    alpha: float
    annotations: list[Annotation] = field(default_factory=list)

    @property
    def diverged(self) -> int:
        return sum(1 for r in self.results.values() for s in r.steps if s.status == "DIVERGENT")

    def document(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "fail_on": self.fail_on,
            "alpha": self.alpha,
            "baseline_error": self.baseline_error,
            "environment_changes": self.environment,
            "regressions": len(self.regressions),
            "diverged": self.diverged,
            "decisions": [asdict(d) for d in self.decisions],
            "results": {path: r.to_dict() for path, r in self.results.items()},
        }

    def json(self) -> str:
        return json.dumps(self.document(), indent=2) + "\n"


def evaluate(
    results: dict[str, Result],
    baseline: dict[str, Any] | None,
    *,
    fail_on: Sequence[str],
    alpha: float = DEFAULT_ALPHA,
    baseline_error: str | None = None,
) -> Gate:
    decisions: list[StepDecision] = []
    environment: list[str] = []
    for path, result in results.items():
        decisions.extend(decide(baseline, path, result, alpha))
        for change in environment_changes(baseline, result):
            if change not in environment:
                environment.append(change)
    regressions = [d for d in decisions if is_regression(d, fail_on)]
    gate = Gate(decisions, regressions, environment, baseline_error, results, list(fail_on), alpha)
    gate.annotations = annotations(gate)
    return gate


def annotations(gate: Gate) -> list[Annotation]:
    found = []
    for d in gate.decisions:
        file = d.file or d.pipeline
        if d in gate.regressions:
            found.append(
                Annotation("error", _message(d), f"twicerun: {d.name} {d.verdict}", file, d.line)
            )
        elif d.status == "DIVERGENT" or d.status == "STABLE_ON_THIS_INPUT":
            found.append(
                Annotation("warning", _message(d), f"twicerun: {d.name} {d.status}", file, d.line)
            )
        elif d.verdict in (FIXED, RATE_DOWN):
            found.append(
                Annotation("notice", _message(d), f"twicerun: {d.name} {d.verdict}", file, d.line)
            )
    return found


def _message(d: StepDecision) -> str:
    now = f"{d.now_fired} of {d.now_compared}" if d.now_compared is not None else "not run"
    before = (
        f"{d.baseline_fired} of {d.baseline_compared} over {d.baseline_trials} baseline trials"
        if d.baseline_compared is not None
        else "no baseline"
    )
    parts = [f"{d.verdict}: {now} now, {before}"]
    if d.p_value is not None:
        parts.append(f"exact test p = {d.p_value:.3g}")
    if d.classes:
        parts.append(" ".join(d.classes))
    if d.cause:
        parts.append(f"cause {d.cause}")
    return "; ".join(parts)


def stamp(results: dict[str, Result]) -> str:
    first = next(iter(results.values()), None)
    if first is None:
        return "twicerun ran no pipeline."
    env = first.environment
    return (
        f"twicerun {env.twicerun}, DuckDB {env.duckdb} at threads={env.threads}, "
        f"{first.runs} runs, policy {first.policy}."
    )


def comment_body(
    gate: Gate, pipelines: str, summary_url: str | None = None, budget: int = BUDGET
) -> str:
    return render(
        gate.decisions,
        pipelines=pipelines,
        regressions=gate.regressions,
        environment=gate.environment,
        stamp=stamp(gate.results),
        baseline_error=gate.baseline_error,
        summary_url=summary_url,
        budget=budget,
    )


def summary(gate: Gate, pipelines: str) -> str:
    """The job summary: the comment's content with nothing cut."""
    body = comment_body(gate, pipelines, budget=10**9)
    # The hidden marker belongs to the comment; the summary has no use for it.
    return body.split("\n", 1)[1].lstrip("\n")


def write_document(gate: Gate, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(gate.json(), encoding="utf-8")
