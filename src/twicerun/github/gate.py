"""The pull-request gate, as data: decisions, what to annotate, what to summarise, what to output.

The CLI runs the pipelines and hands their Results here, with a way to run a
pipeline again for the confirmation trials; this module decides per step against
the baseline (github/decision.py holds the statistics) and prepares what the check
delivers as data: the annotations, the step outputs, and a JSON document of it all
(github/summary.py puts it in words: the comment body and the job summary). Nothing
here prints or exits.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from twicerun.display import unseeded_generator
from twicerun.github.baseline import (
    Baseline,
    StepRecord,
    StepShape,
    describe_settings,
    measure_alike,
    settings_of,
)
from twicerun.github.commands import Annotation
from twicerun.github.decision import (
    DEFAULT_ALPHA,
    DEFAULT_CONFIRM,
    DEFAULT_SCREEN,
    Outcome,
    decide_pipeline,
)
from twicerun.render.evidence import plural
from twicerun.render.sections import named, shown_classes
from twicerun.result import Result, StepResult
from twicerun.typed import typed
from twicerun.vocabulary import gate as words
from twicerun.vocabulary.loop import Cause, Difference, Status

SCHEMA = "twicerun.gate/2"


@dataclass(frozen=True)
class GateOptions:
    alpha: float = DEFAULT_ALPHA
    confirm: int = DEFAULT_CONFIRM
    screen: float = DEFAULT_SCREEN
    fail_on: tuple[str, ...] = words.DEFAULT_FAIL_ON


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
    baseline_differed_trials: int | None = None
    baseline_statuses: list[str | None] = field(default_factory=list)
    # Each baseline trial's count of comparisons that differed, for the comment's chart.
    baseline_fired_by_trial: list[int] = field(default_factory=list)
    baseline_stress_fired_by_trial: list[int] = field(default_factory=list)
    # What each of those counts is out of, so that a chart can mix them (a document
    # written before they were kept lacks them; its charts draw the loop's counts alone).
    baseline_compared_by_trial: list[int] = field(default_factory=list)
    baseline_stress_compared_by_trial: list[int] = field(default_factory=list)
    now_fired: int | None = None
    now_compared: int | None = None
    status: str | None = None
    classes: list[str] = field(default_factory=list)
    cause: str | None = None
    screen_p: float | None = None
    confirm_fired: list[int] = field(default_factory=list)
    p_value: float | None = None
    level: float | None = None
    renamed_from: str | None = None
    evidence: list[str] = field(default_factory=list)
    # The amplifiers' comparisons, which decide a step's score when its loop runs agreed.
    now_stress_fired: int = 0
    now_stress_compared: int = 0
    confirm_stress_fired: list[int] = field(default_factory=list)
    confirm_stress_compared: list[int] = field(default_factory=list)
    # For a kind-of-difference verdict: 1 for each trial whose runs lost, added or repeated
    # rows, baseline trials first, then this run, then its re-runs (the comment's chart).
    rows_by_trial: list[int] = field(default_factory=list)
    # The same for a step that now differs at one thread: 1 for each trial in which it
    # still differed when re-executed at threads=1.
    one_thread_by_trial: list[int] = field(default_factory=list)
    # And for one whose floats now move further than another order of adding explains:
    # 1 for each trial in which they did.
    outside_bound_by_trial: list[int] = field(default_factory=list)

    def stress_only(self) -> str:
        """What the amplifiers found, when nothing else explains the verdict: every loop
        count here is zero and some amplifier comparison fired (a quiet loop scores its
        amplifiers' fire rate, so such a step can be `new divergence` at "0 of 4 now")."""
        if self.now_fired or any(self.confirm_fired):
            return ""
        if not (self.now_stress_fired or any(self.confirm_stress_fired)):
            return ""
        text = (
            f"only under the amplifiers: {self.now_stress_fired} of {self.now_stress_compared} now"
        )
        if self.confirm_stress_fired:
            rates = zip(self.confirm_stress_fired, self.confirm_stress_compared, strict=True)
            text += ", then " + ", ".join(f"{k} of {m}" for k, m in rates) + " on re-runs"
        return text


@dataclass(frozen=True)
class Confirmation:
    """The fresh trials one pipeline ran because a step looked worse: the cost of deciding."""

    pipeline: str
    trials: int
    seconds: float
    suspects: list[str]


@dataclass(frozen=True)
class PipelineFailure:
    """A pipeline this check could not finish: a step raised (`crashed`), or its file or
    a step's use of ctx was refused. `line` is the deepest line of the pipeline's own
    file in the traceback, where there is one."""

    pipeline: str
    message: str
    crashed: bool
    step: str | None = None
    index: int | None = None
    line: int | None = None
    # "" for the check's own run, else which confirmation trial it was.
    during: str = ""


class DidNotFinish(Exception):
    """Raised by a `rerun` whose pipeline did not finish, to end that pipeline's decision."""

    def __init__(self, failure: PipelineFailure):
        super().__init__(failure.message)
        self.failure = failure


@dataclass(frozen=True)
class Gate:
    decisions: list[StepDecision]
    regressions: list[StepDecision]
    environment: list[str]
    baseline_error: str | None
    baseline_source: str | None
    baseline_moved: list[str]
    results: dict[str, Result]
    options: GateOptions
    confirmations: list[Confirmation]
    annotations: list[Annotation]
    # The pull request the check ran on ({"number", "head_sha"}), when it ran on one:
    # what the posting side checks an artifact against.
    pull_request: dict[str, Any] | None = None
    failures: list[PipelineFailure] = field(default_factory=list)
    # What edited the baseline, when it moved: one of words.CHANGED_BY.
    changed_by: str = words.CHANGED_BY_PULL_REQUEST

    @property
    def diverged(self) -> int:
        return sum(
            1 for r in self.results.values() for s in r.steps if s.status == Status.DIVERGENT
        )

    @property
    def not_comparable(self) -> list[StepDecision]:
        return [d for d in self.decisions if d.verdict in words.NOT_COMPARABLE]

    def document(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "fail_on": list(self.options.fail_on),
            "alpha": self.options.alpha,
            "confirm": self.options.confirm,
            "screen": self.options.screen,
            "baseline_error": self.baseline_error,
            "baseline_source": self.baseline_source,
            "baseline_moved": self.baseline_moved,
            "pull_request": self.pull_request,
            "changed_by": self.changed_by,
            "environment_changes": self.environment,
            "regressions": len(self.regressions),
            "diverged": self.diverged,
            "confirmations": [asdict(c) for c in self.confirmations],
            "decisions": [asdict(d) for d in self.decisions],
            "failures": [asdict(f) for f in self.failures],
            "results": {path: r.to_dict() for path, r in self.results.items()},
        }

    def json(self) -> str:
        return json.dumps(self.document(), indent=2) + "\n"

    @classmethod
    def from_document(cls, data: Any) -> Gate:
        """A Gate from the document `json()` wrote, enough to render its comment again.

        The fork flow posts from this: the body is rendered here, from data, never
        taken as Markdown from an artifact a fork could have written.
        """
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError(f"not a twicerun gate document (schema {SCHEMA} expected)")
        for key, kind in (
            ("decisions", list),
            ("fail_on", list),
            ("environment_changes", list),
            ("results", dict),
            ("baseline_moved", list),
            ("confirmations", list),
            ("failures", list),
        ):
            if not isinstance(data.get(key, kind()), kind):
                raise ValueError(f"{key} is not a JSON {'list' if kind is list else 'object'}")
        for key in ("baseline_error", "baseline_source"):
            if not isinstance(data.get(key), str | None):
                raise ValueError(f"{key} is not a string")
        changed_by = data.get("changed_by", words.CHANGED_BY_PULL_REQUEST)
        if changed_by not in words.CHANGED_BY:
            raise ValueError(f"changed_by is not one of {', '.join(words.CHANGED_BY)}")
        options = GateOptions(
            alpha=float(data["alpha"]),
            confirm=int(data["confirm"]),
            screen=float(data["screen"]),
            fail_on=tuple(str(w) for w in data["fail_on"] if w in words.FAIL_ON),
        )
        decisions = [typed(StepDecision, d) for d in data["decisions"]]
        for d in decisions:
            if len(d.confirm_stress_fired) != len(d.confirm_stress_compared):
                raise ValueError(f"decisions: {d.name} has unpaired confirmation counts")
        return cls(
            decisions=decisions,
            regressions=[d for d in decisions if is_regression(d, options.fail_on)],
            environment=[str(e) for e in data["environment_changes"]],
            baseline_error=data.get("baseline_error"),
            baseline_source=data.get("baseline_source"),
            baseline_moved=[str(m) for m in data.get("baseline_moved", [])],
            results={k: Result.from_dict(v) for k, v in data["results"].items()},
            options=options,
            confirmations=[typed(Confirmation, c) for c in data.get("confirmations", [])],
            annotations=[],
            pull_request=_pull_request(data.get("pull_request")),
            failures=[typed(PipelineFailure, f) for f in data.get("failures", [])],
            changed_by=changed_by,
        )


def _pull_request(value: Any) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise ValueError("pull_request is not an object")
    return value


Rerun = Callable[[str], Result]


def evaluate(
    results: Mapping[str, Result],
    baseline: Baseline | None,
    *,
    rerun: Rerun,
    options: GateOptions = GateOptions(),
    baseline_error: str | None = None,
    baseline_source: str | None = None,
    baseline_moved: Sequence[str] = (),
    pull_request: dict[str, Any] | None = None,
    failures: Sequence[PipelineFailure] = (),
    changed_by: str = words.CHANGED_BY_PULL_REQUEST,
) -> Gate:
    """Decide every step of every pipeline against the baseline.

    `results` are keyed by repository-relative pipeline path, as the baseline is.
    `rerun(key)` runs that pipeline once more, measured as the first time; it is
    called `options.confirm` times for each pipeline that has a suspect step, and
    raises DidNotFinish when the pipeline does not. `failures` are the pipelines that
    did not finish their first run: each fails the check, and none is "not run".
    """
    failures = list(failures)
    decisions: list[StepDecision] = []
    confirmations: list[Confirmation] = []
    environment: list[str] = []
    if baseline is None:
        for key, result in results.items():
            decisions.extend(_plain(key, s, words.NO_BASELINE) for s in result.steps)
    else:
        measured_otherwise = _settings_differ(baseline, results)
        comparable = [k for k in results if k in baseline.pipelines]
        level = options.alpha / max(1, len(comparable))
        for key, result in results.items():
            if measured_otherwise:
                decisions.extend(
                    _plain(key, s, words.MEASURED_OTHERWISE, [measured_otherwise])
                    for s in result.steps
                )
            elif key not in baseline.pipelines:
                note = f"{key} is in the check but not in the baseline"
                decisions.extend(_plain(key, s, words.PIPELINE_ADDED, [note]) for s in result.steps)
            else:
                try:
                    found, confirmation = _pipeline(key, result, baseline, rerun, options, level)
                except DidNotFinish as exc:
                    failures.append(exc.failure)
                    continue
                decisions.extend(found)
                if confirmation:
                    confirmations.append(confirmation)
        unfinished = {f.pipeline for f in failures}
        for key, shape in baseline.pipelines.items():
            if key not in results and key not in unfinished:
                note = f"{key} is in the baseline but the check did not run it"
                decisions.extend(
                    _absent(baseline, key, s, words.PIPELINE_MISSING, [note]) for s in shape.steps
                )
        environment = environment_changes(baseline, results)
    decisions.extend(_unfinished(f) for f in failures)
    regressions = [d for d in decisions if is_regression(d, options.fail_on)]
    meta = _meta_annotations(baseline_error, baseline_moved, changed_by)
    return Gate(
        decisions=decisions,
        regressions=regressions,
        environment=environment,
        baseline_error=baseline_error,
        baseline_source=baseline_source,
        baseline_moved=list(baseline_moved),
        results=dict(results),
        options=options,
        confirmations=confirmations,
        annotations=meta + annotations(decisions, regressions),
        pull_request=pull_request,
        failures=failures,
        changed_by=changed_by,
    )


def _unfinished(f: PipelineFailure) -> StepDecision:
    during = f"in {f.during}, " if f.during else ""
    return StepDecision(
        pipeline=f.pipeline,
        name=f.step or "(the pipeline)",
        index=f.index,
        line=f.line,
        file=f.pipeline,
        verdict=words.DID_NOT_FINISH,
        evidence=[f"{during}{f.message}"],
    )


def _settings_differ(baseline: Baseline, results: Mapping[str, Result]) -> str | None:
    for result in results.values():
        now = settings_of(result)
        b = baseline.settings
        # Threads too: a parallel-order step fires less, or never, at fewer threads, so a
        # check run at another count than its baseline's could pass a step that got worse.
        if (now.runs, now.policy, now.amplify, now.engine, now.threads, now.without) != (
            b.runs,
            b.policy,
            b.amplify,
            b.engine,
            b.threads,
            b.without,
        ):
            return (
                f"the baseline was measured with {describe_settings(b)}, this check with "
                f"{describe_settings(now)}; {measure_alike(b, now)}"
            )
    return None


def _plain(key: str, s, verdict: str, evidence: Sequence[str] = ()) -> StepDecision:
    return StepDecision(
        pipeline=key,
        name=s.name,
        index=s.index,
        line=s.line,
        file=s.file or key,
        verdict=verdict,
        now_fired=s.fired,
        now_compared=s.compared,
        now_stress_fired=sum(a.fired for a in s.stress),
        now_stress_compared=sum(a.compared for a in s.stress),
        status=s.status,
        # For a step stable on its own input, the classes its amplifiers found, as the
        # terminal report shows them: an empty cell beside a failure explains nothing.
        classes=shown_classes(s),
        cause=s.cause,
        evidence=[*evidence, *_drawn(s)],
    )


def _drawn(s: StepResult) -> list[str]:
    """Why a step that differs may differ, where the run saw it directly: it drew from a
    process-wide random generator without seeding it (the loop's note), which a reviewer
    reading the annotation on its line would otherwise have to find in the log."""
    if not s.drew_unseeded or not (s.fired or any(a.fired for a in s.stress)):
        return []
    return [
        f"it {unseeded_generator(s.drew_unseeded)}, which moves its numbers at any thread count"
    ]


def _pipeline(
    key: str,
    result: Result,
    baseline: Baseline,
    rerun: Rerun,
    options: GateOptions,
    level: float,
) -> tuple[list[StepDecision], Confirmation | None]:
    shape = baseline.pipelines[key]
    before = {s.name: s for s in shape.steps}
    now_names = {s.name for s in result.steps}
    removed_by_index = {s.index: s for s in shape.steps if s.name not in now_names}
    common = [s for s in result.steps if s.name in before]
    scores = baseline.scores(key)
    now_scores = {s.name: StepRecord.of(s).score for s in common}
    # Each step's other statistics, tested in the same family (KINDS): whether a trial's
    # runs lost, added or repeated rows, whether it differed at one thread too, and whether
    # its floats moved past the reassociation bound. Trial t of each is trial t of the
    # step's score. A statistic some baseline trial did not record is not tested for that
    # step: its trials would read as 0 and any 1 now as new.
    tested = tested_kinds(baseline, key, [s.name for s in common])
    for s in common:
        records = baseline.records(key, s.name)
        for kind in tested[s.name]:
            now_scores[kind.key(s.name)] = kind.of(s) or 0.0
            scores[kind.key(s.name)] = [kind.of(r) or 0.0 for r in records]
    fresh_fired: dict[str, list[int]] = {s.name: [] for s in common}
    fresh_stress: dict[str, list[tuple[int, int]]] = {s.name: [] for s in common}
    fresh_kinds: dict[str, list[float]] = {
        kind.key(s.name): [] for s in common for kind in tested[s.name]
    }

    def fresh_trial() -> dict[str, float]:
        again = {s.name: StepRecord.of(s) for s in rerun(key).steps}
        for n in fresh_fired:
            record = again.get(n)
            fresh_fired[n].append(record.fired if record else 0)
            fresh_stress[n].append(
                (record.stress_fired, record.stress_compared) if record else (0, 0)
            )
            for kind in tested[n]:
                fresh_kinds[kind.key(n)].append((kind.of(record) or 0.0) if record else 0.0)
        return trial_statistics(again, tested)

    started = time.monotonic()
    outcomes, ran = decide_pipeline(
        {n: scores[n] for n in now_scores},
        now_scores,
        fresh_trial,
        level=level,
        screen_level=options.screen,
        confirm=options.confirm,
        better_level=options.alpha,
        implied=implied_by(tested),
    )
    suspects = list(
        dict.fromkeys(n.partition(KIND_MARK)[0] for n, o in outcomes.items() if o.screened.suspect)
    )
    confirmation = (
        Confirmation(key, ran, round(time.monotonic() - started, 3), suspects) if ran else None
    )

    decisions = []
    for s in result.steps:
        b = before.get(s.name)
        if b is None:
            old = removed_by_index.pop(s.index, None)
            if old is not None:
                d = _plain(key, s, words.STEP_RENAMED)
                decisions.append(_with(d, renamed_from=old.name))
            else:
                decisions.append(_plain(key, s, words.STEP_ADDED))
            continue
        records = baseline.records(key, s.name)
        outcome = outcomes[s.name]
        # Its answers spread no further, but rows now go where only floats moved before,
        # or it now differs at one thread where only the order of threads moved it.
        kind = None
        if outcome.verdict not in words.WORSE:
            kind = next(
                (
                    k
                    for k in tested[s.name]
                    if outcomes[k.key(s.name)].verdict in (words.NEW, words.RATE_UP)
                ),
                None,
            )
            if kind is not None:
                outcome = outcomes[kind.key(s.name)]
        suspect = outcome.screened.suspect
        history = scores[s.name]
        measured = sum(1 for r in records if r.compared)
        verdict, evidence = outcome.verdict, []
        by_trial: dict[str, list[int]] = {}
        if kind is not None:
            verdict = kind.new if outcome.verdict == words.NEW else kind.up
            trials = [*scores[kind.key(s.name)], outcome.screened.score]
            trials += fresh_kinds[kind.key(s.name)]
            evidence = [
                kind.evidence(scores[kind.key(s.name)], outcome, fresh_kinds[kind.key(s.name)])
            ]
            by_trial = {kind.charted: [int(x) for x in trials]}
        if kind is None and (
            verdict in (words.RATE_UP, words.RATE_DOWN)
            # Suspect by how far its answers spread, on a baseline where they spread too:
            # its comparisons alone ("3 of 4 now" against 19 trials that differed) do
            # not say what looked worse.
            or (verdict == words.NOT_CONFIRMED and any(x >= 1 for x in history))
        ):
            evidence = _answers_spread(history, outcome, len(StepRecord.of(s).answers))
        stressed = sum(1 for r in records if r.status != Status.AMPLIFICATION_FAILED)
        if not s.compared and measured:
            verdict = words.NOTHING_COMPARED
            evidence = [
                f"no run wrote an artifact, so nothing was compared; the baseline compared "
                f"this step in {measured} of {len(records)} trials"
            ]
        elif s.status == Status.AMPLIFICATION_FAILED and stressed:
            # Named as the report names it: a joint probe's failure is its members' together.
            failed = next(((n, a) for n, a in named(s.amplifiers) if a.error), None)
            what = (
                f"{failed[0]} could not run ({failed[1].error})"
                if failed
                else "an amplifier failed"
            )
            verdict = words.AMPLIFIER_FAILED
            evidence = [
                f"{what}; on the baseline no amplifier failed on this step in {stressed} of "
                f"{len(records)} trials"
            ]
        decisions.append(
            _with(
                _plain(key, s, verdict, evidence),
                baseline_fired=sum(r.fired for r in records),
                baseline_compared=sum(r.compared for r in records),
                baseline_trials=len(records),
                baseline_differed_trials=sum(1 for x in history if x > 0),
                baseline_statuses=[r.status for r in records],
                baseline_fired_by_trial=[r.fired for r in records],
                baseline_stress_fired_by_trial=[r.stress_fired for r in records],
                baseline_compared_by_trial=[r.compared for r in records],
                baseline_stress_compared_by_trial=[r.stress_compared for r in records],
                screen_p=outcome.screened.p,
                confirm_fired=fresh_fired[s.name] if suspect else [],
                confirm_stress_fired=[k for k, _ in fresh_stress[s.name]] if suspect else [],
                confirm_stress_compared=[m for _, m in fresh_stress[s.name]] if suspect else [],
                p_value=outcome.p,
                level=level if suspect else None,
                **by_trial,
            )
        )
    decisions.extend(
        _absent(baseline, key, old, words.STEP_REMOVED) for old in removed_by_index.values()
    )
    return decisions, confirmation


# Differences in rows or columns rather than in float values.
ROW_KINDS = frozenset(
    {Difference.ROW_MISSING, Difference.ROW_EXTRA, Difference.MULTIPLICITY, Difference.SCHEMA}
)
# Between a step's name and the name of one of its 0/1 statistics; no step name holds a NUL.
KIND_MARK = "\0"


@dataclass(frozen=True)
class Kind:
    """A 0/1 statistic of one step in one trial, tested beside its score as a member of the
    same family. A score says how far a step's answers spread and cannot rise past "every
    run differs", so what a step that already differed on every run can still get worse in
    is the kind of its differences: `measure` takes a trial (a StepResult or a StepRecord,
    which both have classes, cause and outside_bound) and says whether it showed it, or
    None where the trial did not record it (a baseline written before it was)."""

    name: str
    new: str  # the verdict when no baseline trial showed it
    up: str  # the verdict when fewer baseline trials did
    said: str  # what a trial showing it did, for the evidence line
    charted: str  # the StepDecision list that charts it
    measure: Callable[[Any], bool | None]

    def key(self, step: str) -> str:
        return step + KIND_MARK + self.name

    def of(self, trial: Any) -> float | None:
        """1.0 or 0.0 for a StepResult or a StepRecord; None where it was not recorded."""
        shown = self.measure(trial)
        return None if shown is None else (1.0 if shown else 0.0)

    def evidence(self, history: Sequence[float], outcome: Outcome, fresh: Sequence[float]) -> str:
        trials = [outcome.screened.score, *(fresh if outcome.test else [])]
        return (
            f"{self.said} in {sum(1 for x in history if x)} of "
            f"{plural(len(history), 'trial')} on the baseline, and in "
            f"{sum(1 for x in trials if x)} of {len(trials)} now"
        )


ROWS = Kind(
    "rows",
    words.NEW_KIND,
    words.ROWS_UP,
    "its runs lost, added or repeated rows, or changed columns,",
    "rows_by_trial",
    lambda trial: bool(ROW_KINDS & set(trial.classes)),
)
# The cause is set only on a step that differed, from re-executing it at threads=1: a step
# whose differences all go away there is PARALLEL_ORDER, and one that still differs is not.
ONE_THREAD = Kind(
    "one-thread",
    words.NEW_CAUSE,
    words.ONE_THREAD_UP,
    "it still differed when re-executed at one thread,",
    "one_thread_by_trial",
    lambda trial: trial.cause == Cause.PERSISTS_SINGLE_THREADED,
)
# Drift within what adding in another order explains is the float sum's own; past it
# (first() over the same groups, a running total over ties) the values themselves moved.
OUTSIDE_BOUND = Kind(
    "outside-bound",
    words.NEW_REACH,
    words.REACH_UP,
    "its floats moved further than adding in another order explains,",
    "outside_bound_by_trial",
    lambda trial: trial.outside_bound,
)
KINDS = (ROWS, ONE_THREAD, OUTSIDE_BOUND)


def tested_kinds(baseline: Baseline, key: str, names: Sequence[str]) -> dict[str, list[Kind]]:
    """The statistics tested beside each step's score: those every baseline trial of it
    recorded. One some trial lacks (a baseline written before it existed) would read as 0
    there, and any 1 now as new."""
    return {
        n: [k for k in KINDS if all(k.of(r) is not None for r in baseline.records(key, n))]
        for n in names
    }


def trial_statistics(
    records: Mapping[str, StepRecord], tested: Mapping[str, Sequence[Kind]]
) -> dict[str, float]:
    """One trial of a pipeline as the decision takes it: each step's score, and each of its
    tested statistics under its own key. The gate's fresh trials go through here, and so do
    scripts/gate_resampled.py's trials, which the real CLI recorded."""
    found = {n: r.score for n, r in records.items()}
    found.update(
        {kind.key(n): kind.of(r) or 0.0 for n, r in records.items() for kind in tested.get(n, ())}
    )
    return found


def implied_by(tested: Mapping[str, Sequence[Kind]]) -> dict[str, str]:
    """Each tested statistic, mapped to the score it may merely restate."""
    return {kind.key(n): n for n, kinds in tested.items() for kind in kinds}


def _answers_spread(history: Sequence[float], outcome: Outcome, runs: int) -> list[str]:
    """What a rate verdict was decided on, when the loop decided it: how many pairs of runs
    gave different answers (the score), which can move while every comparison with run 1
    fired before and after (a first run that was the odd one out, then every run its own)."""
    fresh = list(outcome.test.fresh) if outcome.test else []
    if outcome.screened.score < 1:
        return []  # scored by the amplifiers: the comparisons they fired say it

    def pairs(x: float) -> int:
        # Below 1, a quiet loop's amplifier fraction: no two of its runs' answers differed.
        return int(x) if x >= 1 else 0

    before = sorted(pairs(x) for x in history)
    text = (
        f"pairs of runs with different answers: {pairs(outcome.screened.score)} of "
        f"{runs * (runs - 1) // 2} now"
    )
    if fresh:
        text += f", then {', '.join(str(pairs(x)) for x in fresh)} on re-runs"
    if before[0] == before[-1]:
        return [f"{text}, against {before[0]} in every baseline trial"]
    median = statistics.median(before)
    return [f"{text}, against {before[0]} to {before[-1]} on the baseline, median {median:g}"]


def _absent(
    baseline: Baseline, key: str, s: StepShape, verdict: str, evidence: Sequence[str] = ()
) -> StepDecision:
    """A step the baseline has and this check does not: what the baseline said of it."""
    records = baseline.records(key, s.name)
    return StepDecision(
        pipeline=key,
        name=s.name,
        index=s.index,
        line=s.line,
        file=key,
        verdict=verdict,
        baseline_fired=sum(r.fired for r in records),
        baseline_compared=sum(r.compared for r in records),
        baseline_trials=len(records),
        baseline_statuses=[r.status for r in records],
        evidence=list(evidence),
    )


def _with(d: StepDecision, **changes: Any) -> StepDecision:
    return StepDecision(**{**asdict(d), **changes})


def is_regression(decision: StepDecision, fail_on: Sequence[str]) -> bool:
    if decision.verdict == words.DID_NOT_FINISH:
        return True  # whatever fail-on says: nothing was measured that could pass
    for word in fail_on:
        if decision.verdict in words.FAIL_ON[word]:
            return True
        if (
            word == "stable"
            and decision.status == Status.STABLE_ON_THIS_INPUT
            and decision.baseline_trials
            and Status.STABLE_ON_THIS_INPUT not in decision.baseline_statuses
        ):
            return True
    return False


def environment_changes(baseline: Baseline, results: Mapping[str, Result]) -> list[str]:
    """What differs in the instrument: reported beside the verdicts, never as one."""
    before = baseline.trials[-1].environment
    changes: list[str] = []
    for result in results.values():
        now = asdict(result.environment)
        for key in ("duckdb", "spark", "threads", "platform", "twicerun"):
            change = f"{key}: {before.get(key)} in the baseline, {now.get(key)} now"
            if str(before.get(key)) != str(now.get(key)) and change not in changes:
                changes.append(change)
    return changes


def _meta_annotations(error: str | None, moved: Sequence[str], changed_by: str) -> list[Annotation]:
    """Annotations about the check itself; they go first so the per-step ones cannot crowd them out."""
    found = []
    if error:
        found.append(Annotation("error", error, "twicerun: no baseline"))
    if moved:
        found.append(
            Annotation(
                "warning",
                f"This {changed_by} changes the baseline it would be judged against: "
                + "; ".join(moved),
                "twicerun: baseline edited",
            )
        )
    return found


def annotations(
    decisions: Sequence[StepDecision], regressions: Sequence[StepDecision]
) -> list[Annotation]:
    found = []
    failing = {(d.pipeline, d.name) for d in regressions}  # by step: see comment.render
    for d in decisions:
        file = d.file or d.pipeline
        if (d.pipeline, d.name) in failing:
            found.append(
                Annotation("error", _message(d), f"twicerun: {d.name} {d.verdict}", file, d.line)
            )
        elif d.status in (Status.DIVERGENT, Status.STABLE_ON_THIS_INPUT):
            found.append(
                Annotation("warning", _message(d), f"twicerun: {d.name} {d.status}", file, d.line)
            )
        elif d.verdict in words.BETTER:
            found.append(
                Annotation("notice", _message(d), f"twicerun: {d.name} {d.verdict}", file, d.line)
            )
    return found


def _message(d: StepDecision) -> str:
    if d.verdict == words.DID_NOT_FINISH:
        return "; ".join([d.verdict, *d.evidence])
    now = f"{d.now_fired} of {d.now_compared}" if d.now_compared is not None else "not run"
    before = (
        f"differed in {d.baseline_differed_trials} of {d.baseline_trials} baseline trials"
        if d.baseline_differed_trials is not None
        else "no baseline figures"
    )
    parts = [f"{d.verdict}: {now} now, {before}"]
    if d.confirm_fired:
        parts.append(
            "then " + ", ".join(f"{k} of {d.now_compared}" for k in d.confirm_fired) + " on re-runs"
        )
    if d.stress_only():
        parts.append(d.stress_only())
    if d.p_value is not None:
        parts.append(f"p = {d.p_value:.3g}")
    parts.extend(d.evidence)
    if d.classes:
        parts.append(" ".join(d.classes))
    if d.cause:
        parts.append(f"cause {d.cause}")
    return "; ".join(parts)
