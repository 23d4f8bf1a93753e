"""The committed baseline: what each step did over T trials, and how it was measured.

A trial is one invocation of every pipeline in the check. The baseline keeps every
trial whole, dated and stamped with its environment, and for each step what the
gate's test needs (the loop runs' answer identities and the amplifiers' counts)
beside what the comment shows (fire counts, statuses, classes, causes). Trials can
be added to a baseline as long as they were measured the same way on the same code,
so a workflow on pushes to main can make it stronger instead of replacing it.

Pipeline keys are repository-relative POSIX paths, so `./pipelines/x.py` and
`pipelines/x.py` are one pipeline on both sides.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from twicerun.github.decision import StepTrial, score
from twicerun.result import Result, StepResult

SCHEMA = "twicerun.baseline/2"


class BaselineError(ValueError):
    """The baseline is missing, unreadable or unusable; the message says what to do."""


def pipeline_key(path: str | os.PathLike[str], root: Path | None = None) -> str:
    """The one name a pipeline has in a baseline: relative to `root` (the working
    directory), POSIX separators, no `./`."""
    root = (root or Path.cwd()).resolve()
    p = Path(path)
    if p.is_absolute():
        try:
            p = p.resolve().relative_to(root)
        except ValueError:
            return p.resolve().as_posix()
    text = os.path.normpath(p.as_posix()).replace(os.sep, "/")
    return str(PurePosixPath(text))


@dataclass(frozen=True)
class Settings:
    """How the trials were measured; a check measured otherwise is not comparable."""

    runs: int
    policy: str
    amplify: bool
    threads: int
    # The engine the steps ran on; baselines written before Spark was driven ran DuckDB.
    engine: str = "duckdb"


@dataclass(frozen=True)
class StepRecord:
    """One step in one trial."""

    answers: tuple[int, ...]
    stress_fired: int
    stress_compared: int
    fired: int
    compared: int
    status: str | None
    classes: tuple[str, ...] = ()
    cause: str | None = None

    @property
    def trial(self) -> StepTrial:
        return StepTrial(self.answers, self.stress_fired, self.stress_compared)

    @property
    def score(self) -> float:
        return score(self.trial)

    @classmethod
    def of(cls, step: StepResult) -> StepRecord:
        """The record of a step as a Result measured it.

        Run 1 is answer 0; a later run that did not fire (under the run's policy)
        gave run 1's answer; one that fired is named by the canonical digests of
        what it wrote, so two later runs that wrote the same rows share a name.
        """
        names: dict[str, int] = {}
        answers = [0]
        for c in sorted(step.comparisons, key=lambda c: c.run):
            if not c.artifacts:
                continue
            if not c.fired:
                answers.append(0)
                continue
            # A Result written before answers were recorded: count the run as unique.
            name = c.answer or f"run {c.run}"
            answers.append(names.setdefault(name, len(names) + 1))
        ran = step.stress
        return cls(
            answers=tuple(answers),
            stress_fired=sum(a.fired for a in ran),
            stress_compared=sum(a.compared for a in ran),
            fired=step.fired,
            compared=step.compared,
            status=step.status,
            classes=tuple(step.classes),
            cause=step.cause,
        )


@dataclass(frozen=True)
class StepShape:
    name: str
    index: int
    line: int | None


@dataclass(frozen=True)
class PipelineShape:
    digest: str
    steps: tuple[StepShape, ...]

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.steps]


@dataclass(frozen=True)
class Trial:
    written: str
    environment: dict[str, Any]
    pipelines: dict[str, dict[str, StepRecord]]


@dataclass(frozen=True)
class Baseline:
    settings: Settings
    pipelines: dict[str, PipelineShape]
    trials: tuple[Trial, ...]
    command: str
    schema: str = SCHEMA

    def scores(self, pipeline: str) -> dict[str, list[float]]:
        """Per step of `pipeline`, its score in each trial, in trial order."""
        return {
            s.name: [t.pipelines[pipeline][s.name].score for t in self.trials]
            for s in self.pipelines[pipeline].steps
        }

    def records(self, pipeline: str, step: str) -> list[StepRecord]:
        return [t.pipelines[pipeline][step] for t in self.trials]

    def to_json(self) -> str:
        """Indented, with each step record on one line: a reviewer diffs trials, not digits."""
        data = asdict(self)
        records: dict[str, str] = {}
        for trial in data["trials"]:
            for steps in trial["pipelines"].values():
                for name, record in steps.items():
                    token = f"\0record {len(records)}\0"
                    records[json.dumps(token)] = json.dumps(record)
                    steps[name] = token
        text = json.dumps(data, indent=1)
        for token, record in records.items():
            text = text.replace(token, record, 1)
        return text + "\n"


def settings_of(result: Result) -> Settings:
    return Settings(
        runs=result.runs,
        policy=result.policy,
        amplify=result.amplified,
        threads=result.environment.threads,
        engine=result.environment.engine,
    )


def trial_of(results: Mapping[str, Result], written: str | None = None) -> Trial:
    first = next(iter(results.values()))
    return Trial(
        written=written or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        environment=asdict(first.environment),
        pipelines={
            key: {s.name: StepRecord.of(s) for s in result.steps} for key, result in results.items()
        },
    )


def build(trials: Sequence[Mapping[str, Result]], command: str) -> Baseline:
    """A baseline from T trials, each a Result per pipeline key."""
    first = trials[0]
    settings = {settings_of(r) for trial in trials for r in trial.values()}
    if len(settings) != 1:
        raise BaselineError("the trials were measured with different settings; measure them alike")
    return Baseline(
        settings=settings.pop(),
        pipelines={key: _shape(r) for key, r in first.items()},
        trials=tuple(trial_of(t) for t in trials),
        command=command,
    )


def add(baseline: Baseline, trials: Sequence[Mapping[str, Result]]) -> Baseline:
    """`baseline` with more trials, refused when they were measured differently."""
    for trial in trials:
        for key, result in trial.items():
            if key not in baseline.pipelines:
                raise BaselineError(
                    f"{key} is not in the baseline; adding trials keeps the pipeline set, "
                    f"so recreate the baseline (without --add) to include it"
                )
            if _shape(result) != baseline.pipelines[key]:
                raise BaselineError(
                    f"{key} changed since the baseline's trials were measured; trials of "
                    f"different code do not mix, so recreate the baseline without --add"
                )
            if settings_of(result) != baseline.settings:
                raise BaselineError(
                    f"these trials were measured with {_describe(settings_of(result))} and the "
                    f"baseline with {_describe(baseline.settings)}; add trials measured alike"
                )
        missing = sorted(set(baseline.pipelines) - set(trial))
        if missing:
            raise BaselineError(
                f"a trial must cover every pipeline of the baseline; {', '.join(missing)} missing"
            )
    return Baseline(
        settings=baseline.settings,
        pipelines=baseline.pipelines,
        trials=baseline.trials + tuple(trial_of(t) for t in trials),
        command=baseline.command,
    )


def _describe(s: Settings) -> str:
    return (
        f"runs={s.runs}, policy {s.policy}, {'with' if s.amplify else 'without'} amplifiers, "
        f"threads={s.threads}" + (f", on {s.engine}" if s.engine != "duckdb" else "")
    )


def describe_settings(s: Settings) -> str:
    return _describe(s)


def _shape(result: Result) -> PipelineShape:
    return PipelineShape(
        digest=result.pipeline_digest,
        steps=tuple(StepShape(s.name, s.index, s.line) for s in result.steps),
    )


def parse(text: str, where: str, create_command: str) -> Baseline:
    """A Baseline from its JSON text, or one sentence saying why not and what to run."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BaselineError(
            f"the baseline {where} is not JSON ({exc}); recreate it with `{create_command}`"
        ) from exc
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != SCHEMA:
        older = isinstance(schema, str) and schema.startswith("twicerun.baseline/")
        raise BaselineError(
            f"{where} is "
            + (
                f"a baseline of an older format ({schema}), which lacks the per-run answers the test needs"
                if older
                else f"not a twicerun baseline (schema {schema!r})"
            )
            + f"; recreate it with `{create_command}`"
        )
    try:
        trials = tuple(
            Trial(
                written=str(t["written"]),
                environment=dict(t["environment"]),
                pipelines={
                    key: {
                        name: StepRecord(
                            answers=tuple(int(a) for a in r["answers"]),
                            stress_fired=int(r["stress_fired"]),
                            stress_compared=int(r["stress_compared"]),
                            fired=int(r["fired"]),
                            compared=int(r["compared"]),
                            status=r.get("status"),
                            classes=tuple(r.get("classes") or ()),
                            cause=r.get("cause"),
                        )
                        for name, r in steps.items()
                    }
                    for key, steps in t["pipelines"].items()
                },
            )
            for t in data["trials"]
        )
        baseline = Baseline(
            settings=Settings(**data["settings"]),
            pipelines={
                key: PipelineShape(
                    digest=str(p["digest"]),
                    steps=tuple(
                        StepShape(str(s["name"]), int(s["index"]), s.get("line"))
                        for s in p["steps"]
                    ),
                )
                for key, p in data["pipelines"].items()
            },
            trials=trials,
            command=str(data.get("command", "")),
        )
        for t in baseline.trials:
            for key, shape in baseline.pipelines.items():
                for name in shape.names:
                    t.pipelines[key][name]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BaselineError(
            f"the baseline {where} is malformed (at {exc!s}); recreate it with `{create_command}`"
        ) from exc
    if not baseline.trials:
        raise BaselineError(
            f"the baseline {where} has no trials; recreate it with `{create_command}`"
        )
    return baseline


def load(path: Path, create_command: str) -> Baseline:
    path = Path(path)
    if not path.exists():
        raise BaselineError(
            f"no baseline at {path}; create one with `{create_command}` and commit it"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(
            f"the baseline {path} is unreadable ({exc}); recreate it with `{create_command}`"
        ) from exc
    return parse(text, str(path), create_command)


def what_moved(base: Baseline, mine: Baseline) -> list[str]:
    """In words, how the pull request's copy of the baseline differs from the base branch's."""
    lines = []
    if base.settings != mine.settings:
        lines.append(
            f"settings: {_describe(base.settings)} on the base branch, {_describe(mine.settings)} here"
        )
    if len(base.trials) != len(mine.trials):
        lines.append(f"trials: {len(base.trials)} on the base branch, {len(mine.trials)} here")
    for key in sorted(set(base.pipelines) | set(mine.pipelines)):
        if key not in mine.pipelines:
            lines.append(f"{key}: removed from the baseline")
            continue
        if key not in base.pipelines:
            lines.append(f"{key}: added to the baseline")
            continue
        before, after = base.scores(key), mine.scores(key)
        for step in sorted(set(before) | set(after)):
            if step not in after:
                lines.append(f"{key} {step}: removed")
            elif step not in before:
                lines.append(f"{key} {step}: added")
            elif sorted(before[step]) != sorted(after[step]):
                lines.append(
                    f"{key} {step}: differed in {sum(1 for x in before[step] if x > 0)} of "
                    f"{len(before[step])} trials on the base branch, "
                    f"{sum(1 for x in after[step] if x > 0)} of {len(after[step])} here"
                )
    if not lines and base != mine:
        lines.append("its stamps or command (no figure the test reads moved)")
    return lines
