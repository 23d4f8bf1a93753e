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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from twicerun.github.decision import StepTrial, score
from twicerun.result import Result, StepResult
from twicerun.typed import schema_said
from twicerun.vocabulary.loop import Amplifier

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
    # Amplifiers turned off by --without (written only when some were, so a baseline
    # measured with all of them reads as it did before the option existed).
    without: tuple[str, ...] = ()


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
    # Whether its floats moved further than another order of adding explains (StepResult.
    # outside_bound); None in a baseline written before it was recorded, which the gate
    # then does not test it against.
    outside_bound: bool | None = None

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
            outside_bound=step.outside_bound,
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
        if not data["settings"]["without"]:
            del data["settings"]["without"]
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
        without=tuple(result.amplifiers_off),
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


def check_addable(
    baseline: Baseline, shapes: Mapping[str, PipelineShape], instrument: Mapping[str, str]
) -> None:
    """What `add` refuses once the trials are in, refused before any runs where it is known
    then: the pipelines and their code, and the twicerun and DuckDB doing the measuring.
    (Spark's version is known only once it starts.) Refusing after the trials wasted every
    minute they took."""
    for key, shape in shapes.items():
        _same_pipeline(baseline, key, shape)
    _every_pipeline(baseline, shapes)
    moved = _moved(baseline, instrument, instrument)
    if moved:
        raise BaselineError(
            f"trials measured now would come from another instrument than the baseline's "
            f"({moved}); {_INSTRUMENTS_DO_NOT_MIX}"
        )


_INSTRUMENTS_DO_NOT_MIX = (
    "what a run measures can change between versions, and trials of different instruments "
    "do not mix, so recreate the baseline without --add"
)


def _same_pipeline(baseline: Baseline, key: str, shape: PipelineShape) -> None:
    if key not in baseline.pipelines:
        raise BaselineError(
            f"{key} is not in the baseline; adding trials keeps the pipeline set, "
            f"so recreate the baseline (without --add) to include it"
        )
    if shape != baseline.pipelines[key]:
        raise BaselineError(
            f"{key} changed since the baseline's trials were measured; trials of "
            f"different code do not mix, so recreate the baseline without --add"
        )


def _every_pipeline(baseline: Baseline, keys: Iterable[str]) -> None:
    missing = sorted(set(baseline.pipelines) - set(keys))
    if missing:
        raise BaselineError(
            f"a trial must cover every pipeline of the baseline; {', '.join(missing)} missing"
        )


def add(baseline: Baseline, trials: Sequence[Mapping[str, Result]]) -> Baseline:
    """`baseline` with more trials, refused when they were measured differently."""
    for trial in trials:
        for key, result in trial.items():
            _same_pipeline(baseline, key, _shape(result))
            if settings_of(result) != baseline.settings:
                raise BaselineError(
                    f"these trials were measured with {_describe(settings_of(result))} and the "
                    f"baseline with {_describe(baseline.settings)}; add trials measured alike"
                )
            moved = _instrument_moved(baseline, result)
            if moved:
                raise BaselineError(
                    f"these trials were measured by another instrument than the baseline's "
                    f"({moved}); {_INSTRUMENTS_DO_NOT_MIX}"
                )
        _every_pipeline(baseline, trial)
    return Baseline(
        settings=baseline.settings,
        pipelines=baseline.pipelines,
        trials=baseline.trials + tuple(trial_of(t) for t in trials),
        command=baseline.command,
    )


# What measures: twicerun itself and the engine that runs the steps. A trial's platform
# or Python may differ (the gate reports that beside its verdicts); these may not.
_INSTRUMENT = ("twicerun", "duckdb", "spark")


def _instrument_moved(baseline: Baseline, result: Result) -> str:
    """How `result` was measured by another twicerun or engine than the baseline's trials,
    in words; "" when alike."""
    return _moved(baseline, asdict(result.environment), _INSTRUMENT)


def _moved(baseline: Baseline, now: Mapping[str, Any], keys: Iterable[str]) -> str:
    """Which of `keys` in the environment `now` differ from the baseline's trials, in words."""
    moved = []
    for key in keys:
        before = {str(t.environment.get(key)) for t in baseline.trials}
        if before != {str(now.get(key))}:
            moved.append(f"{key} {', '.join(sorted(before))} in the baseline, {now.get(key)} now")
    return "; ".join(moved)


def _describe(s: Settings) -> str:
    return (
        f"runs={s.runs}, policy {s.policy}, {'with' if s.amplify else 'without'} amplifiers, "
        f"threads={s.threads}"
        + (f", on {s.engine}" if s.engine != "duckdb" else "")
        + (f", without {' or '.join(s.without)}" if s.without else "")
    )


def describe_settings(s: Settings) -> str:
    return _describe(s)


def measure_alike(
    baseline: Settings,
    now: Settings,
    *,
    action: bool = True,
    otherwise: str = "update the baseline",
) -> str:
    """What to give the check so that it measures as `baseline` did, option by option,
    with the action inputs that set them; both descriptions in full left a reader to
    find the one setting in six that differed. Worded without brackets or quotes, so
    the job summary can show it unescaped."""
    b = baseline
    given: list[tuple[str, str]] = []
    if now.runs != b.runs:
        given.append((f"--runs {b.runs}", f"runs: {b.runs}"))
    if now.policy != b.policy:
        given.append((f"--policy {b.policy}", f"policy: {b.policy}"))
    if now.amplify != b.amplify:
        flag = "--amplify" if b.amplify else "--no-amplify"
        given.append((flag, f"amplify: {'true' if b.amplify else 'false'}"))
    if now.threads != b.threads:
        # Left out, the check takes the baseline's count.
        given.append(("no --threads", "threads left empty"))
    # Whatever the check's --amplify: one sentence then puts back --amplify and what the
    # baseline left out together, and a baseline without amplifiers takes no --without.
    if now.without != b.without:
        names = [w.replace(" ", "-") for w in b.without]
        flags = " ".join(f"--without {n}" for n in names) or "no --without"
        given.append((flags, f"without: {' '.join(names)}" if names else "without left empty"))

    def listed(items: list[str]) -> str:
        return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"

    parts = []
    if given:
        flags = listed([f for f, _ in given])
        inputs = listed([i for _, i in given])
        parts.append(f"give {flags}, in the action {inputs}" if action else f"give {flags}")
    if now.engine != b.engine:
        parts.append(f"run the pipelines on {b.engine} as they were")
    if not parts:
        return f"measure both alike or {otherwise}"
    return f"to measure as the baseline did, {'; '.join(parts)}; or {otherwise}"


def _shape(result: Result) -> PipelineShape:
    return PipelineShape(
        digest=result.pipeline_digest,
        steps=tuple(StepShape(s.name, s.index, s.line) for s in result.steps),
    )


def parse(text: str, where: str, create_command: str) -> Baseline:
    """A Baseline from its JSON text, or one sentence saying why not and what to run.

    A byte order mark in front is set aside: an editor on Windows adds one on saving,
    and refusing the file for it sent the user to rerun every trial of the baseline."""
    try:
        data = json.loads(text.removeprefix("\ufeff"))
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
                else f"not a twicerun baseline ({schema_said(data)})"
            )
            + f"; recreate it with `{create_command}`"
        )
    try:
        baseline = _baseline(data)
    except _Malformed as exc:
        raise BaselineError(
            f"the baseline {where} is malformed: {exc}; recreate it with `{create_command}`"
        ) from exc
    if not baseline.trials:
        raise BaselineError(
            f"the baseline {where} has no trials; recreate it with `{create_command}`"
        )
    return baseline


class _Malformed(ValueError):
    """Where in the document a value is not what `baseline update` writes, and what it is."""


def _at(where: str, expected: str, got: Any) -> _Malformed:
    shown = "an object" if isinstance(got, dict) else json.dumps(got)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return _Malformed(f"{where} should be {expected}, not {shown}")


def _field(data: Any, key: str, where: str) -> Any:
    if not isinstance(data, dict):
        raise _at(where, "an object", data)
    if key not in data:
        raise _Malformed(f"{where} has no {key!r}")
    return data[key]


def _count(value: Any, where: str, least: int = 0) -> int:
    # JSON's true and false are ints to Python; a count written as either is a hand edit.
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise _at(where, f"a whole number of at least {least}", value)
    return value


def _text(value: Any, where: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not (value or optional):
        raise _at(where, "a string" + (" or null" if optional else ""), value)
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _at(where, "an object", value)
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _at(where, "a list", value)
    return value


def _settings(data: Any) -> Settings:
    where = "settings"
    data = _object(data, where)
    unknown = sorted(set(data) - {"runs", "policy", "amplify", "threads", "engine", "without"})
    if unknown:
        raise _Malformed(f"settings has a key twicerun does not write ({unknown[0]!r})")
    amplify = _field(data, "amplify", where)
    if not isinstance(amplify, bool):
        raise _at("settings.amplify", "true or false", amplify)
    engine = data.get("engine", "duckdb")
    if engine not in ("duckdb", "spark"):
        raise _at("settings.engine", '"duckdb" or "spark"', engine)
    without = _list(data.get("without", []), "settings.without")
    kinds = [str(a) for a in Amplifier]
    for name in without:
        if name not in kinds:
            raise _at("settings.without", f"a list of amplifiers ({', '.join(kinds)})", name)
    return Settings(
        runs=_count(_field(data, "runs", where), "settings.runs", least=2),
        policy=_text(_field(data, "policy", where), "settings.policy"),
        amplify=amplify,
        threads=_count(_field(data, "threads", where), "settings.threads", least=1),
        engine=engine,
        without=tuple(without),
    )


def _record(r: Any, where: str, runs: int) -> StepRecord:
    answers = _list(_field(r, "answers", where), f"{where}.answers")
    for i, a in enumerate(answers):
        _count(a, f"{where}.answers[{i}]")
    if not answers or answers[0] != 0 or len(answers) > runs:
        raise _at(
            f"{where}.answers", f"a list of at most {runs} whole numbers starting with 0", answers
        )
    counts = {
        key: _count(_field(r, key, where), f"{where}.{key}")
        for key in ("stress_fired", "stress_compared", "fired", "compared")
    }
    for fired, compared in (("fired", "compared"), ("stress_fired", "stress_compared")):
        if counts[fired] > counts[compared]:
            raise _Malformed(
                f"{where} fired in {counts[fired]} of {counts[compared]} comparisons ({fired} "
                f"is more than {compared})"
            )
    classes = _list(r.get("classes") or [], f"{where}.classes")
    for i, c in enumerate(classes):
        _text(c, f"{where}.classes[{i}]")
    outside = r.get("outside_bound")
    if outside is not None and not isinstance(outside, bool):
        raise _at(f"{where}.outside_bound", "true, false or absent", outside)
    return StepRecord(
        answers=tuple(answers),
        classes=tuple(classes),
        status=_text(r.get("status"), f"{where}.status", optional=True),
        cause=_text(r.get("cause"), f"{where}.cause", optional=True),
        outside_bound=outside,
        **counts,
    )


def _shape_of(p: Any, where: str) -> PipelineShape:
    steps = []
    for i, s in enumerate(_list(_field(p, "steps", where), f"{where}.steps")):
        at = f"{where}.steps[{i}]"
        line = _field(s, "line", at) if isinstance(s, dict) and "line" in s else None
        steps.append(
            StepShape(
                _text(_field(s, "name", at), f"{at}.name"),
                _count(_field(s, "index", at), f"{at}.index"),
                None if line is None else _count(line, f"{at}.line", least=1),
            )
        )
    return PipelineShape(
        digest=_text(_field(p, "digest", where), f"{where}.digest"), steps=tuple(steps)
    )


def _baseline(data: dict[str, Any]) -> Baseline:
    settings = _settings(_field(data, "settings", "the document"))
    pipelines = {
        key: _shape_of(p, f"pipelines[{json.dumps(key)}]")
        for key, p in _object(_field(data, "pipelines", "the document"), "pipelines").items()
    }
    trials = []
    for i, t in enumerate(_list(_field(data, "trials", "the document"), "trials")):
        at = f"trials[{i}]"
        measured = _object(_field(t, "pipelines", at), f"{at}.pipelines")
        records: dict[str, dict[str, StepRecord]] = {}
        for key, shape in pipelines.items():
            steps = _object(
                _field(measured, key, f"{at}.pipelines"), f"{at}.pipelines[{json.dumps(key)}]"
            )
            records[key] = {
                name: _record(
                    _field(steps, name, f"{at}.pipelines[{json.dumps(key)}]"),
                    f"{at}.pipelines[{json.dumps(key)}].{name}",
                    settings.runs,
                )
                for name in shape.names
            }
        trials.append(
            Trial(
                written=_text(_field(t, "written", at), f"{at}.written"),
                environment=_object(_field(t, "environment", at), f"{at}.environment"),
                pipelines=records,
            )
        )
    command = data.get("command", "")
    return Baseline(
        settings=settings,
        pipelines=pipelines,
        trials=tuple(trials),
        command=command if isinstance(command, str) else "",
    )


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
