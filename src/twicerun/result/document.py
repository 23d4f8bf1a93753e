"""The Result: one versioned JSON document that every report is rendered from.

Nothing downstream of a Result re-runs or re-measures anything, so the
terminal report, a README table and a PR comment about the same invocation
cannot disagree: they are renderings of this one document.

Versioning: `schema` is "twicerun.result/<major>". Fields are only ever added
within a major version; a reader refuses a major it does not know rather than
guessing at what a renamed field meant.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twicerun.findings import ArtifactOutcome, BoundFigures
from twicerun.typed import schema_said, typed
from twicerun.vocabulary.loop import Amplifier, Cause, Difference, Hint, Judged, Reexecution, Status

SCHEMA = "twicerun.result/1"
SCHEMA_FAMILY = "twicerun.result/"


class ResultFormatError(ValueError):
    """A document is not a Result this version of twicerun can read."""


@dataclass(frozen=True)
class Environment:
    """The instrument: every figure in a Result is specific to these."""

    duckdb: str
    threads: int
    platform: str
    python: str
    twicerun: str
    # Which engine ran the steps; for Spark, its version and master. Shuffle
    # partitions, and partitions per artifact read, are `threads`.
    engine: str = "duckdb"
    spark: str | None = None
    spark_master: str | None = None


@dataclass(frozen=True)
class Comparison:
    """Run `run` against run 1, for one step."""

    run: int
    fired: bool
    artifacts: list[ArtifactOutcome] = field(default_factory=list)
    verdict: Judged = Judged.SAME
    # Which answer the later run gave, as a digest of its differing artifacts'
    # canonical digests: two later runs with equal `answer` gave the same rows.
    # Empty when nothing differed from the reference.
    answer: str = ""
    # When the later run raised where the reference did not: the error, as its answer.
    error: str = ""

    @property
    def differs(self) -> bool:
        return any(a.differs for a in self.artifacts)


@dataclass(frozen=True)
class Series:
    """A step re-executed on its own: the single-threaded bisect, or one amplifier.

    `declined` says why an amplifier did not run (nothing to change); `error` why
    one failed. Neither is ever a clean zero: `compared` stays 0 and the report
    lists the amplifier as not varied. `probed_with` names the amplifiers whose
    variation was applied in the same runs (a joint probe that showed no
    difference); those runs are counted once, under each.
    """

    kind: Amplifier | Reexecution
    threads: int
    runs: int = 0
    comparisons: list[Comparison] = field(default_factory=list)
    fired: int = 0
    compared: int = 0
    tolerated: int = 0
    rows_read: int = 0
    declined: str | None = None
    error: str | None = None
    detail: str | None = None
    seconds: float = 0.0
    zero_bound: float | None = None
    probed_with: list[Amplifier] = field(default_factory=list)
    # The classes of difference its comparisons showed, as the policy judged them.
    classes: list[Difference] = field(default_factory=list)
    # Whether its floats moved further than adding in another order explains, at the rows
    # it read (an amplifier's; the bisect's has one order only and is never so).
    outside_bound: bool = False

    @property
    def ran(self) -> bool:
        return self.declined is None and self.error is None


@dataclass(frozen=True)
class SourceFileUsed:
    """One file a step read through ctx.source in run 1: path as given, size, bytes digest."""

    path: str
    size: int
    digest: str


@dataclass(frozen=True)
class SourceUsed:
    """A list of files read as one view; two Results with other files here had other input."""

    name: str
    reader: str
    rows: int
    files: list[SourceFileUsed] = field(default_factory=list)


@dataclass(frozen=True)
class StepResult:
    """One step: its fire rate `fired of compared`, its status, and how it was measured."""

    index: int
    name: str
    line: int
    fired: int
    compared: int
    status: Status | None
    classes: list[Difference] = field(default_factory=list)
    cause: Cause | None = None
    file: str = ""
    stochastic: bool = False
    seed: int | None = None
    wrote: list[str] = field(default_factory=list)
    rows_read: int = 0
    seconds: list[float] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tolerated: int = 0
    bounds: list[BoundFigures] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    bisect: Series | None = None
    amplifiers: list[Series] = field(default_factory=list)
    hints: list[Hint] = field(default_factory=list)
    zero_bound: float | None = None
    sources: list[SourceUsed] = field(default_factory=list)
    # The process-wide random generators the step drew from without seeding them (its loop
    # runs left them in different states), as "Python's random module"; None where not.
    drew_unseeded: str | None = None

    @property
    def outside_bound(self) -> bool:
        """Whether the loop's floats moved further than adding the same terms in another
        order can move a sum (the bound section's OUTSIDE, at the rows read), or moved to
        or from NULL, NaN or an infinity, which no bound covers. For a step the loop found
        quiet, the same of its amplifiers' runs, which are then all the evidence it has."""
        if any(not b.clears_loose for b in self.bounds) or _unbounded(self.comparisons):
            return True
        if self.fired:
            return False
        return any(s.outside_bound or _unbounded(s.comparisons) for s in self.stress)

    @property
    def stress(self) -> list[Series]:
        """The amplifier series that ran, a joint probe once: its runs are recorded under
        each of its members, and counting them once per member would multiply them."""
        distinct, joint = [], False
        for series in self.amplifiers:
            if not series.ran:
                continue
            if series.probed_with:
                if joint:
                    continue
                joint = True
            distinct.append(series)
        return distinct


@dataclass(frozen=True)
class Result:
    """Everything one invocation measured, stamped with the instrument that measured it."""

    pipeline: str
    runs: int
    contained: bool
    policy: str
    environment: Environment
    seconds: float
    steps: list[StepResult]
    schema: str = SCHEMA
    pipeline_digest: str = ""
    artifacts: str = ""
    started: str = ""
    step_seconds: float = 0.0
    disk_bytes: int = 0
    pruned: list[str] = field(default_factory=list)
    kept_failures: list[str] = field(default_factory=list)
    tolerance_rel: float | None = None
    tolerance_ulps: int | None = None
    keys: dict[str, list[str]] = field(default_factory=dict)
    amplified: bool = True
    # The amplifiers turned off by --without while the others ran (none before 0.7.0).
    amplifiers_off: list[str] = field(default_factory=list)
    not_varied: list[str] = field(default_factory=list)
    # Runs each amplifier starts with on a quiet step, continuing to `runs` when one
    # fires. None in a Result written before it was recorded.
    amplifier_probe: int | None = None
    # The confidence of every zero bound in it; None in a Result written before.
    confidence: float | None = None

    @property
    def comparisons_per_step(self) -> int:
        return self.runs - 1

    @property
    def fired_steps(self) -> list[StepResult]:
        return [s for s in self.steps if s.fired > 0]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        # The schema leads, so a reader sees what it is holding first.
        return {"schema": d.pop("schema"), **d}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any) -> Result:
        if not isinstance(data, dict):
            raise ResultFormatError("a Result is a JSON object; this is not one")
        schema = data.get("schema")
        if not isinstance(schema, str) or not schema.startswith(SCHEMA_FAMILY):
            raise ResultFormatError(
                f"not a twicerun Result ({schema_said(data)}); expected schema {SCHEMA!r}"
            )
        if schema != SCHEMA:
            raise ResultFormatError(
                f"this Result has schema {schema!r}, and this twicerun reads {SCHEMA!r}; "
                f"use the twicerun that wrote it, or re-run the pipeline"
            )
        try:
            return typed(cls, data)
        except (TypeError, KeyError, ValueError, AttributeError) as exc:
            raise ResultFormatError(f"malformed Result: {exc}") from exc


def only_run_1_apart(comparisons: list[Comparison]) -> bool:
    """Every later run differed from run 1 and wrote the same rows as every other later
    run: a pattern thread order can give, and so can state a process keeps after one call."""
    answers = {c.answer for c in comparisons}
    return (
        len(comparisons) >= 2
        and all(c.fired for c in comparisons)
        and len(answers) == 1
        and "" not in answers
    )


def load_result(path: str | Path) -> Result:
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultFormatError(f"{path} is not JSON: {exc}") from exc
    return Result.from_dict(data)


def _unbounded(comparisons: list[Comparison]) -> bool:
    """A float that moved to or from NULL, NaN or an infinity in any of these comparisons."""
    return any(
        d.moved and (d.incomparable or (d.max_relative is not None and not _finite(d.max_relative)))
        for c in comparisons
        for a in c.artifacts
        if a.differs and a.findings is not None
        for d in a.findings.drift
        if not (d.lists_moved and d.lists_reordered == d.lists_moved)
    )


def _finite(value: object) -> bool:
    try:
        return value is not None and math.isfinite(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
