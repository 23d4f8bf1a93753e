"""The ladder: two recorded runs compared step by step, in chain order.

Each step gets exactly one rung (vocabulary/ladder.py). A rung is about the
step's outputs, named by their canonical digests; what produced them (the code,
DuckDB, threads, the seed, the platform) is an annotation beside the rung and
never changes it, so `same` never hides that the code changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

from twicerun.display import differ_too, listed, ljust, unseeded_draw, widest
from twicerun.storage.connections import same_time_zone
from twicerun.storage.layout import FAILED, INTERRUPTED, KILLED
from twicerun.verdicts.explain import NOT_ON_DISK, explain
from twicerun.verdicts.recorded import Output, RecordedRun, RecordedStep
from twicerun.vocabulary.ladder import Comparing, Locating, Rung

# What a receipt says about how an output was produced: (field, what to call it).
INSTRUMENT = (
    ("code_digest", "the step's code"),
    ("duckdb", "DuckDB version"),
    ("threads", "threads"),
    ("seed", "seed"),
    ("platform", "platform"),
    ("time_zone", "time zone"),
)


# What a receipt keeps, by name and digest, of what the step's code reached beyond itself:
# (field, what to call it).
REACHED = (
    ("modules", "modules beside the pipeline"),
    ("uses", "what it uses from the pipeline file"),
    ("opened", "files it read beside the pipeline"),
    ("environment", "environment variables it read"),
    # What it read from its file as it ran, where `uses` is what the file held at import:
    # a dict an earlier step filled differently (runner/past_ctx.py).
    ("values_read", "values of the pipeline file as it ran"),
    # Files of rows read past ctx, by the fingerprints taken as it began: a side database
    # another step inserts into was read with other rows, and diff said the step diverged
    # with identical inputs.
    # A path its SQL reads is most often one its code names too: one entry for both.
    (("files_in_sql", "files_named"), "files of rows it read past ctx"),
    ("files_listed", "directories it listed"),
)


@dataclass(frozen=True)
class StepVerdict:
    index: int
    name: str
    rung: Rung
    why: str = ""  # for COULD NOT CHECK: what stopped it
    instrument: list[str] = field(default_factory=list)  # what produced it differently
    inputs: str = ""  # "identical", "differ: x, y", or "" when unknown
    explanation: str = ""  # the oracle's, on the first difference
    # A query of the step that drew at random with nothing in the step seeding it, from
    # either run's receipt; "" for none.
    draws: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "verdict": str(self.rung),
            "why": self.why,
            "instrument": self.instrument,
            "inputs": self.inputs,
            "draws_in_sql": self.draws or None,
            "explanation": self.explanation,
        }


@dataclass(frozen=True)
class Ladder:
    """`diff` (or `localize` given two runs): one word and a rung per step."""

    a: str
    b: str
    result: Comparing
    steps: list[StepVerdict]
    stopped_at_first: bool = False
    schema: str = "twicerun.diff/1"
    # Why the two runs are not comparable, when they are not: said once, before the
    # per-step lines, which alone left a reader to infer it from "no such step".
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "a": self.a,
            "b": self.b,
            "result": str(self.result),
            "reason": self.reason,
            "steps": [s.to_dict() for s in self.steps],
        }

    def lines(self) -> list[str]:
        width = widest(s.name for s in self.steps)
        out = [f"{self.result}: {self.a} against {self.b}"]
        if self.reason:
            out.append(f"  {self.reason}")
        for s in self.steps:
            out.append(f"  {s.index:>2} {ljust(s.name, width)}  {s.rung}")
            if s.why:
                out.append(f"       {s.why}")
            if s.explanation:
                out.append(f"       {s.explanation}")
            note = inputs_note(s.inputs, s.rung, s.instrument)
            if note:
                out.append(f"       {note}")
            if s.instrument:
                out.append(f"       produced differently: {'; '.join(s.instrument)}")
            if s.draws and s.rung in (Rung.FIRST_DIFFERENCE, Rung.DOWNSTREAM):
                out.append(f"       {unseeded_draw(s.draws)}")
        if self.stopped_at_first:
            out.append("  (stopped at the first difference)")
        return out


def inputs_note(inputs: str, rung: Rung | str, instrument: list[str]) -> str:
    """What a step's inputs say about its rung, in the words diff prints and the README's
    table renders from a diff document."""
    if inputs == "identical" and rung in (Rung.FIRST_DIFFERENCE, Rung.DOWNSTREAM):
        if instrument:
            # "diverged with identical inputs" alone read as a step that stopped repeating
            # itself, beside the line naming what was produced differently.
            return "nothing it read through ctx differs, but what produced it does"
        return "diverged with identical inputs"
    if inputs == "identical" and rung == Rung.RECONVERGED:
        # Reconverged by its place in the chain; without this line a step beside the
        # difference read as one that recovered from it.
        return "by position only: nothing it read through ctx differs"
    if inputs.startswith("differ"):
        return f"its inputs {inputs}"
    return ""


def instrument_changes(a: RecordedStep, b: RecordedStep) -> list[str]:
    """What differs in how the two outputs were produced, named; never a verdict."""
    if a.receipt is None or b.receipt is None:
        return []
    changes = []
    if a.engine and b.engine and a.engine != b.engine:
        changes.append(f"engine ({_engine(a.engine)} against {_engine(b.engine)})")
    spark = (a.engine or "").startswith("spark"), (b.engine or "").startswith("spark")
    for name, shown in INSTRUMENT:
        left, right = getattr(a.receipt, name), getattr(b.receipt, name)
        if name == "threads" and any(spark):
            if not all(spark):
                # DuckDB's threads against Spark's partitions measure nothing alike; the
                # engine line above already says how the two were produced.
                continue
            # On Spark the run's thread count is its shuffle partitions.
            shown = "partitions"
        if name != "threads" and name != "seed" and (not left or not right):
            side = "the first" if not left else "the second"
            if left or right:
                changes.append(f"{shown} not recorded in {side} run")
            continue
        if name == "time_zone" and same_time_zone(left, right):
            continue  # two names for one zone (Etc/UTC, UTC)
        if left != right:
            if name == "code_digest":
                changes.append(f"{shown} ({str(left)[:12]} against {str(right)[:12]})")
            else:
                changes.append(f"{shown} ({left} against {right})")
    for name, shown in REACHED:
        changed = _digests_changed(_reached(a.receipt, name), _reached(b.receipt, name))
        if changed:
            changes.append(f"{shown} ({changed})")
    if a.recorded_by and b.recorded_by and a.recorded_by != b.recorded_by:
        changes.append(f"twicerun ({a.recorded_by} against {b.recorded_by})")
    return changes


def _reached(receipt, name: str | tuple[str, ...]) -> dict[str, str] | None:
    """A REACHED field of a receipt, or several merged into one."""
    if isinstance(name, str):
        return getattr(receipt, name)
    merged: dict[str, str] = {}
    for one in name:
        merged.update(getattr(receipt, one) or {})
    return merged


def _digests_changed(left: dict[str, str] | None, right: dict[str, str] | None) -> str:
    """Which of what the step reached beyond its own code (REACHED) differ between two
    receipts: a helper edited between the runs changes what the step computes, as its own
    code does."""
    if left is None or right is None:
        return ""  # an older receipt: not recorded, so not claimed either way
    parts = []
    for rel in sorted(set(left) | set(right)):
        if rel not in left:
            parts.append(f"{rel} only in the second")
        elif rel not in right:
            parts.append(f"{rel} only in the first")
        elif left[rel] != right[rel]:
            # A fingerprint reads sha256:<hex>: the hex is what tells two apart.
            one, other = (str(v).removeprefix("sha256:")[:12] for v in (left[rel], right[rel]))
            parts.append(f"{rel} {one or 'absent'} against {other or 'absent'}")
    return ", ".join(parts)


def _engine(recorded: str) -> str:
    return "DuckDB" if recorded == "duckdb" else recorded.replace("spark", "Spark", 1)


def inputs_compared(a: RecordedStep, b: RecordedStep) -> str:
    if a.receipt is None or b.receipt is None:
        return ""
    if a.receipt.outcome != "ok" or b.receipt.outcome != "ok":
        # A step that raised stopped reading where it raised (inside ctx.source, say), so
        # what it read says nothing of what it would have: "read source raw on one side
        # only" blamed the input for what was the step's own failure to read it.
        return ""
    left = {r.name: r.canonical_digest for r in a.receipt.reads}
    right = {r.name: r.canonical_digest for r in b.receipt.reads}
    files: dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]]]] = {}
    # Files from outside the pipeline are named by their bytes, in the order listed.
    for side, receipt, at in ((left, a.receipt, 0), (right, b.receipt, 1)):
        for s in receipt.sources:
            name = f"source {s.name}"
            side[name] = "|".join(f"{f.path}:{f.digest}" for f in s.files)
            files.setdefault(name, ([], []))[at].extend((f.path, f.digest) for f in s.files)
    if set(left) != set(right):
        return "differ: it read " + ", ".join(sorted(set(left) ^ set(right))) + " on one side only"
    # An input named on both sides with different digests differs, whatever else is
    # unknown (a ctx.state read of its initial query has no digest to name it by).
    moved = sorted(n for n in left if left[n] and right[n] and left[n] != right[n])
    if moved:
        return "differ: " + ", ".join(
            f"{n} ({_files_moved(*files[n])})" if n in files else n for n in moved
        )
    if not all(left.values()) or not all(right.values()):
        return ""
    return "identical"


FILES_NAMED = 3


def _files_moved(first: list[tuple[str, str]], second: list[tuple[str, str]]) -> str:
    """Which of a source's files differ between two runs: the question after "its inputs
    differ: source raw" is which file, and the receipts name each by path and bytes."""
    a, b = dict(first), dict(second)
    parts = []
    for paths, what in (
        ([p for p in b if p not in a], "only in the second"),
        ([p for p in a if p not in b], "only in the first"),
        ([p for p in a if p in b and a[p] != b[p]], "with other bytes"),
    ):
        if paths:
            shown = ", ".join(paths[:FILES_NAMED])
            more = f" and {len(paths) - FILES_NAMED} more" if len(paths) > FILES_NAMED else ""
            parts.append(f"{shown}{more} {what}")
    return "; ".join(parts) or "the same files, listed in another order"


def _same_outputs(a: RecordedStep, b: RecordedStep) -> bool:
    left = {o.name: o.canonical for o in a.outputs}
    right = {o.name: o.canonical for o in b.outputs}
    return left == right


def diff(
    a: RecordedRun,
    b: RecordedRun,
    con: duckdb.DuckDBPyConnection,
    *,
    stop_at_first: bool = False,
    schema: str = "twicerun.diff/1",
) -> Ladder:
    left, right = a.steps(con), b.steps(con)
    names = [[(s.index, s.name) for s in steps] for steps in (left, right)]
    comparable = names[0] == names[1]
    # A run whose invocation stopped (a step raised, Ctrl-C, a kill) holds the steps it
    # reached: the same pipeline cut short, which is something the other side's later
    # steps could not be checked against, not a pipeline with other steps.
    cut = {"first": a.stopped(), "second": b.stopped()}
    shorter = min(names, key=len)
    if not comparable and shorter == max(names, key=len)[: len(shorter)]:
        side = "first" if shorter is names[0] else "second"
        comparable = bool(cut[side])

    def absent(side: str, name: str) -> str:
        if comparable and cut[side]:
            return f"the {side} run stopped before this step"
        # A step inserted or removed before it moves it, and it is then compared with
        # nothing: "has no such step" said the step was gone when it was there.
        there = [s.index for s in (right if side == "second" else left) if s.name == name]
        if there:
            return f"the {side} run has it as step {there[0]}; the steps before it changed"
        return f"the {side} run has no such step"

    verdicts: list[StepVerdict] = []
    seen_first = False
    right_by_index = {s.index: s for s in right}
    for s in left:
        other = right_by_index.get(s.index)
        if other is None or other.name != s.name:
            verdicts.append(
                StepVerdict(s.index, s.name, Rung.COULD_NOT_CHECK, why=absent("second", s.name))
            )
            continue
        common = dict(
            instrument=instrument_changes(s, other),
            inputs=inputs_compared(s, other),
            draws=next((q for r in (s.receipt, other.receipt) if r for q in r.sql_draws), ""),
        )
        if not s.checkable or not other.checkable:
            why = "; ".join(
                f"{side}: {step.problem()}"
                for side, step in (("first", s), ("second", other))
                if step.problem()
            )
            verdicts.append(StepVerdict(s.index, s.name, Rung.COULD_NOT_CHECK, why=why, **common))
            continue
        same = _same_outputs(s, other)
        if not seen_first:
            if same:
                verdicts.append(StepVerdict(s.index, s.name, Rung.SAME, **common))
                continue
            seen_first = True
            verdicts.append(
                StepVerdict(
                    s.index,
                    s.name,
                    Rung.FIRST_DIFFERENCE,
                    explanation=_explanation(con, s, other),
                    **common,
                )
            )
            if stop_at_first:
                break
            continue
        rung = Rung.RECONVERGED if same else Rung.DOWNSTREAM
        verdicts.append(StepVerdict(s.index, s.name, rung, **common))
    # By position and name: the second run's step 1 `twice` is not the first's step 1
    # `pick`, and matching by position alone left it out of the list.
    listed = {(v.index, v.name) for v in verdicts}
    for s in right:
        if (s.index, s.name) not in listed and not stop_at_first:
            verdicts.append(
                StepVerdict(s.index, s.name, Rung.COULD_NOT_CHECK, why=absent("first", s.name))
            )
    verdicts.sort(key=lambda v: v.index)  # stable: the first run's step before the second's
    if not comparable:
        result = Comparing.NOT_COMPARABLE
    elif seen_first:
        result = Comparing.DIVERGED
    elif any(v.rung is Rung.COULD_NOT_CHECK for v in verdicts):
        result = Comparing.COULD_NOT_CHECK
    else:
        result = Comparing.IDENTICAL
    reason = "" if comparable else _not_comparable(a, b, left, right)
    if comparable and len(left) != len(right):
        side = "first" if len(left) < len(right) else "second"
        reason = f"the {side} run stopped early: {cut[side]}"
    return Ladder(a.label, b.label, result, verdicts, stop_at_first and seen_first, schema, reason)


SHOWN_STEPS = 6


def _not_comparable(
    a: RecordedRun, b: RecordedRun, left: list[RecordedStep], right: list[RecordedStep]
) -> str:
    """Why two runs' steps do not line up: other pipelines, or one pipeline edited between."""
    manifests = [run.manifest() for run in (a, b)]
    pipelines = [m.get("pipeline") or "" for m in manifests]
    # By the resolved path: `p.py` and `./p.py` are one pipeline.
    where = [m.get("pipeline_resolved") or m.get("pipeline") or "" for m in manifests]

    def listed(steps: list[RecordedStep]) -> str:
        names = [s.name for s in steps]
        more = f" and {len(names) - SHOWN_STEPS} more" if len(names) > SHOWN_STEPS else ""
        return (", ".join(names[:SHOWN_STEPS]) + more) or "none"

    what = (
        f"they record two pipelines, {pipelines[0]} and {pipelines[1]}"
        if all(where) and where[0] != where[1]
        else "the pipeline's steps changed between the two runs"
    )
    return f"{what}: the first run's steps are {listed(left)}; the second's are {listed(right)}"


def _explanation(con: duckdb.DuckDBPyConnection, a: RecordedStep, b: RecordedStep) -> str:
    left = {o.name: o for o in a.outputs}
    right = {o.name: o for o in b.outputs}
    only = sorted(set(left) ^ set(right))
    if only:
        return f"written on one side only: {', '.join(only)}"
    differ = [name for name in left if left[name].canonical != right[name].canonical]
    if not differ:
        return ""
    # One artifact is explained (the oracle's work); the others that differ are only named,
    # from their digests: "part_0: ..." alone read as if part_0 were all that moved.
    name, *others = differ
    more = f"; {differ_too(others)}" if others else ""
    elsewhere = _kept_elsewhere(name, left[name], right[name])
    if elsewhere:
        return f"{NOT_ON_DISK}; {elsewhere}{more}"
    _, sentence = explain(con, name, left[name].path, right[name].path)
    return sentence + more


def _kept_elsewhere(name: str, left: Output, right: Output) -> str:
    """Where one side's rows are gone and another run of its invocation kept a copy (the
    latest that differed, under --keep-copies): the diff that can say how it differs."""
    if (left.path is None) == (right.path is None):
        return ""
    gone, there = (left, right) if left.path is None else (right, left)
    if gone.kept_by is None:
        return ""
    k, label = gone.kept_by
    invocation = label.rpartition("#")[0]
    return (
        f"run {k} of {invocation} kept its copy of {name}: "
        f"`twicerun diff {there.run} {label}` says how that run's rows differ"
    )


@dataclass(frozen=True)
class Located:
    """`localize` over one invocation: the first step whose runs disagreed, if any."""

    run: str
    result: Locating
    step: str = ""
    index: int | None = None
    runs: str = ""  # which runs disagreed with run 1
    explanation: str = ""
    unchecked: list[str] = field(default_factory=list)
    schema: str = "twicerun.localize/1"
    # As `diff` says it beside a step: "differ: source raw" when what the step read was
    # not the same in the first run that disagreed (a landing directory that got a file).
    inputs: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "run": self.run,
            "result": str(self.result),
            "step": self.step,
            "index": self.index,
            "runs": self.runs,
            "explanation": self.explanation,
            "inputs": self.inputs,
            "could_not_check": self.unchecked,
        }

    def lines(self) -> list[str]:
        if self.result is Locating.LOCATED:
            out = [f"{self.result}: step {self.index} {self.step} of {self.run}: {self.runs}"]
            if self.explanation:
                out.append(f"  {self.explanation}")
            if self.inputs:
                out.append(f"  its inputs {self.inputs}")
        else:
            out = [f"{self.result}: {self.run}"]
            if self.explanation:
                out.append(f"  {self.explanation}")
        out += [f"  not checked: {u}" for u in self.unchecked]
        return out


def localize_one(label: str, runs: list[RecordedRun], con: duckdb.DuckDBPyConnection) -> Located:
    """The first step, in chain order, whose later runs disagreed with run 1."""
    reference = runs[0]
    first = reference.steps(con)
    others = [(r, {s.index: s for s in r.steps(con)}) for r in runs[1:]]
    unchecked = []
    if not others:
        # Nothing was compared, so nothing can be called clean: an invocation that
        # stopped in run 1 (a step raised, Ctrl-C) left no later run.
        raised = [f"step {s.index} {s.name}: {s.problem()}" for s in first if not s.checkable]
        return Located(
            label,
            Locating.COULD_NOT_CHECK,
            unchecked=["the invocation has no run after run 1 to compare with it", *raised],
        )
    for step in first:
        disagreeing, missing = [], {}
        for run, by_index in others:
            other = by_index.get(step.index)
            if other is None or not step.checkable or not other.checkable:
                # Why, from whichever side cannot be read: a later run that stopped inside
                # the step is that run's problem, not run 1's.
                if not step.checkable:
                    why = step.problem()
                elif other is None:
                    why = "this run has no record of the step"
                else:
                    why = other.problem()
                missing.setdefault(why, []).append(run.address.run)
                continue
            if not _same_outputs(step, other):
                disagreeing.append((run, other))
        if disagreeing:
            run, other = disagreeing[0]
            numbers = listed([str(r.address.run) for r, _ in disagreeing])
            inputs = inputs_compared(step, other)
            return Located(
                label,
                Locating.LOCATED,
                step.name,
                step.index,
                f"run{'s' if len(disagreeing) > 1 else ''} {numbers} of {len(runs)} disagreed "
                f"with run 1",
                _explanation(con, step, other),
                unchecked,
                inputs=inputs if inputs.startswith("differ") else "",
            )
        for problem, numbers in missing.items():
            unchecked.append(
                f"step {step.index} {step.name} (run{'s' if len(numbers) > 1 else ''} "
                f"{listed([str(n) for n in numbers])}): {problem}"
            )
    if unchecked:
        outcome = reference.manifest().get("outcome")
        if outcome in (FAILED, INTERRUPTED, KILLED):
            # Said first: it is why a later run stops partway, not a fault in the records.
            unchecked.insert(0, f"the invocation did not complete: its manifest says {outcome}")
        return Located(label, Locating.COULD_NOT_CHECK, unchecked=unchecked)
    # What "clean" covered, so a bare word is not read as more than it checked.
    later = {2: "run 2", 3: "runs 2 and 3"}.get(len(runs), f"runs 2 to {len(runs)}")
    steps = f"{len(first)} step{'s' if len(first) != 1 else ''}"
    return Located(
        label, Locating.CLEAN, explanation=f"{later} agreed with run 1 on every step ({steps})"
    )
