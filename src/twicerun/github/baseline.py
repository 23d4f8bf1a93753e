"""The committed baseline: what each step's fire rate looked like over T trials, and the
decision, per step, of how a pull request's run compares with it.

A baseline holds, per pipeline and step, every trial's fire count (all buckets,
so a rate of 2 of 4 that once came out 0 of 4 is on record), classes, statuses,
causes, the environment it was measured in and the twicerun that measured it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twicerun.github.stats import fisher_one_sided
from twicerun.result import Result

SCHEMA = "twicerun.baseline/1"

NEW = "new divergence"
FIXED = "fixed"
UNCHANGED = "unchanged"
RATE_UP = "rate up"
RATE_DOWN = "rate down"
ADDED = "not comparable: step added"
REMOVED = "not comparable: step removed"
RENAMED = "not comparable: step renamed"
NO_BASELINE = "no baseline"

# `fail-on` words and the verdicts each one turns into a failed check.
FAIL_ON = {
    "new": {NEW},
    "rate-up": {RATE_UP},
    "stable": set(),  # decided on statuses, below
    "not-comparable": {ADDED, REMOVED, RENAMED},
}
DEFAULT_FAIL_ON = ("new", "rate-up")
DEFAULT_ALPHA = 0.05


class BaselineError(ValueError):
    """The baseline file is missing or unreadable; the message says how to make one."""


def build(results_by_pipeline: dict[str, Sequence[Result]], command: str) -> dict[str, Any]:
    """A baseline document from T Results per pipeline (one per trial)."""
    pipelines = {}
    environment = None
    trials = runs = 0
    policy = "strict"
    for path, results in results_by_pipeline.items():
        steps = []
        first = results[0]
        environment = environment or first.environment.__dict__
        trials, runs, policy = len(results), first.runs, first.policy
        for s in first.steps:
            per = [next(x for x in r.steps if x.name == s.name) for r in results]
            steps.append(
                {
                    "name": s.name,
                    "index": s.index,
                    "line": s.line,
                    "fired": [x.fired for x in per],
                    "compared": [x.compared for x in per],
                    "classes": [x.classes for x in per],
                    "statuses": [x.status for x in per],
                    "causes": [x.cause for x in per],
                }
            )
        pipelines[path] = {"digest": first.pipeline_digest, "steps": steps}
    return {
        "schema": SCHEMA,
        "written": time.strftime("%Y-%m-%d"),
        "command": command,
        "twicerun": (environment or {}).get("twicerun"),
        "environment": environment,
        "trials": trials,
        "runs": runs,
        "policy": policy,
        "pipelines": pipelines,
    }


def load(path: Path, create_command: str) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise BaselineError(
            f"no baseline at {path}; create one with `{create_command}` and commit it"
        )
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BaselineError(
            f"the baseline {path} is unreadable ({exc}); recreate it with `{create_command}`"
        ) from exc
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise BaselineError(
            f"{path} is not a twicerun baseline (schema {document.get('schema') if isinstance(document, dict) else None!r}); "
            f"recreate it with `{create_command}`"
        )
    return document


@dataclass(frozen=True)
class StepDecision:
    pipeline: str
    name: str
    index: int | None
    line: int | None
    file: str
    verdict: str
    baseline_fired: int | None = None
    baseline_compared: int | None = None
    baseline_trials: int | None = None
    baseline_statuses: list[str | None] = field(default_factory=list)
    now_fired: int | None = None
    now_compared: int | None = None
    status: str | None = None
    classes: list[str] = field(default_factory=list)
    cause: str | None = None
    p_value: float | None = None
    renamed_from: str | None = None
    evidence: list[str] = field(default_factory=list)


def decide(
    baseline: dict[str, Any] | None, pipeline: str, result: Result, alpha: float = DEFAULT_ALPHA
) -> list[StepDecision]:
    """Per step of `result`: how it compares with the baseline, by an exact test on fire counts."""
    recorded = (baseline or {}).get("pipelines", {}).get(pipeline)
    before = {s["name"]: s for s in (recorded or {}).get("steps", [])}
    now_names = {s.name for s in result.steps}
    removed_by_index = {s["index"]: s for n, s in before.items() if n not in now_names}
    decisions = []
    for s in result.steps:
        common = dict(
            pipeline=pipeline,
            name=s.name,
            index=s.index,
            line=s.line,
            file=s.file,
            now_fired=s.fired,
            now_compared=s.compared,
            status=s.status,
            classes=s.classes,
            cause=s.cause,
        )
        if recorded is None:
            decisions.append(StepDecision(verdict=NO_BASELINE, **common))
            continue
        b = before.get(s.name)
        if b is None:
            old = removed_by_index.pop(s.index, None)
            if old is not None:
                decisions.append(StepDecision(verdict=RENAMED, renamed_from=old["name"], **common))
            else:
                decisions.append(StepDecision(verdict=ADDED, **common))
            continue
        k1, n1 = sum(b["fired"]), sum(b["compared"])
        k2, n2 = s.fired, s.compared
        up, down = fisher_one_sided(k1, n1, k2, n2)
        if up < alpha:
            verdict, p = (NEW if k1 == 0 else RATE_UP), up
        elif down < alpha:
            verdict, p = (FIXED if k2 == 0 else RATE_DOWN), down
        else:
            verdict, p = UNCHANGED, min(up, down)
        decisions.append(
            StepDecision(
                verdict=verdict,
                baseline_fired=k1,
                baseline_compared=n1,
                baseline_trials=len(b["fired"]),
                baseline_statuses=b["statuses"],
                p_value=p,
                **common,
            )
        )
    for name, b in before.items():
        if name not in now_names and b["index"] in removed_by_index:
            decisions.append(
                StepDecision(
                    pipeline=pipeline,
                    name=name,
                    index=b["index"],
                    line=b.get("line"),
                    file="",
                    verdict=REMOVED,
                    baseline_fired=sum(b["fired"]),
                    baseline_compared=sum(b["compared"]),
                    baseline_trials=len(b["fired"]),
                    baseline_statuses=b["statuses"],
                )
            )
    return decisions


def is_regression(decision: StepDecision, fail_on: Sequence[str]) -> bool:
    for word in fail_on:
        if decision.verdict in FAIL_ON[word]:
            return True
        if (
            word == "stable"
            and decision.status == "STABLE_ON_THIS_INPUT"
            and "STABLE_ON_THIS_INPUT" not in decision.baseline_statuses
        ):
            return True
    return False


def environment_changes(baseline: dict[str, Any] | None, result: Result) -> list[str]:
    """What differs in the instrument: reported beside the verdicts, never as one."""
    if not baseline or not baseline.get("environment"):
        return []
    before = baseline["environment"]
    now = result.environment.__dict__
    changes = []
    for key in ("duckdb", "threads", "platform", "twicerun"):
        if str(before.get(key)) != str(now.get(key)):
            changes.append(f"{key}: {before.get(key)} in the baseline, {now.get(key)} now")
    return changes
