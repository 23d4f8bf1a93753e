"""Running the amplifiers on a step the loop found quiet.

Only the artifacts the step read through ctx.read are substituted; state read
through ctx.state comes from the step's own earlier output, which no upstream
input decides. Every stressed input is written once per amplifier and artifact
(once per run variant for arrival order) and shared by every step that reads it.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from twicerun.display import listed
from twicerun.errors import BadInput
from twicerun.pipeline import Step
from twicerun.result import Series
from twicerun.runner.amplify.arrival_order import reorder
from twicerun.runner.amplify.base import (
    Applied,
    Declined,
    Facts,
    Outcome,
    column_facts,
    copy_ordered,
)
from twicerun.runner.amplify.file_order import permutation
from twicerun.runner.amplify.row_multiplication import multiply_rows
from twicerun.runner.amplify.tie_collapse import (
    Collapse,
    collapse_ties,
    planned,
)
from twicerun.runner.interrupts import reraise_if_requested
from twicerun.runner.rederive import derived_inputs, recompute, said
from twicerun.runner.series import Workbench, discard_directory, run_series
from twicerun.storage.context import ArtifactRef
from twicerun.storage.layout import LOOP, RunAddress, step_dir_name
from twicerun.storage.receipts import SourceRecord
from twicerun.storage.source_files import SOURCE_COPY, source_query
from twicerun.storage.space import disk_full
from twicerun.vocabulary.loop import Amplifier

PROBE_RUNS = 3
# The variant under which the joint probe's copy of an input (rows multiplied, the added
# copy's ties collapsed where that applies) is kept, and the tag of the joint probe's
# reorderings of it.
_STACKED = 99
_JOINT = "joint"
AMPLIFIED_DIR = "amplified"
SLUG = {
    Amplifier.TIE_COLLAPSE: "ties",
    Amplifier.THREAD_COUNT: "threads",
    Amplifier.ROW_MULTIPLICATION: "rows",
    Amplifier.ARRIVAL_ORDER: "order",
    Amplifier.FILE_ORDER: "files",
}


def raised_threads(threads: int) -> int:
    """More threads than the loop used: twice as many, and at least four."""
    return max(4, 2 * threads)


class Stressed:
    """Stressed copies of run 1's artifacts, each written once and shared."""

    def __init__(self, bench: Workbench, steps: Mapping[int, Step] | None = None):
        self.bench = bench
        # The pipeline's steps by index, to write again an input that others decide
        # (rederive.py); without them, every input is stressed on its own.
        self.steps = steps
        self._made: dict[tuple[str, str, int], Outcome] = {}
        # Two amplifiers count the same input's distinct values; count each file once.
        self._facts: dict[Path, Facts] = {}
        self._collapses: dict[Path, Collapse | Declined] = {}

    def _facts_of(self, path: Path) -> Facts:
        if path not in self._facts:
            self._facts[path] = column_facts(self.bench.con, path)
        return self._facts[path]

    def collapse_of(self, ref: ArtifactRef) -> Collapse | Declined:
        """What tie collapse would fold in `ref`, decided from its facts (and which of its
        columns decide which) without writing."""
        if ref.path not in self._collapses:
            facts = self._facts_of(ref.path)
            self._collapses[ref.path] = planned(self.bench.con, ref.path, facts, artifact=ref.name)
        return self._collapses[ref.path]

    def get(
        self, amplifier: str, ref: ArtifactRef, variant: int = 0, tag: str = ""
    ) -> tuple[ArtifactRef | None, Outcome]:
        """`tag` tells apart two transforms of one artifact that start from different
        files (the joint probe reorders the stacked input, not the loop's)."""
        slot = (amplifier, ref.name, variant, tag)
        target = self._path(amplifier, ref.name, variant, tag)
        if slot not in self._made:
            target.parent.mkdir(parents=True, exist_ok=True)
            self._made[slot] = self._transform(amplifier, ref, target, variant)
        outcome = self._made[slot]
        if isinstance(outcome, Declined):
            return None, outcome
        rows = pq.read_metadata(target).num_rows
        stressed = ArtifactRef(
            ref.name,
            f"{AMPLIFIED_DIR}/{SLUG[amplifier]}",
            ref.step_index,
            ref.step_name,
            target,
            rows,
        )
        return stressed, outcome

    def forget(self, name: str) -> None:
        """Delete every stressed copy of artifact `name`: no step left to amplify reads it.

        The joint probe writes several copies of each input (stacked, then reordered
        twice), so keeping them all to the end of the invocation would hold several
        times the inputs' size on disk at once."""
        for slot in [slot for slot in self._made if slot[1] == name]:
            amplifier, _, variant, tag = slot
            if not isinstance(self._made.pop(slot), Declined):
                self.bench.janitor.remove(self._path(amplifier, name, variant, tag))

    def source_copy(self, step: Step, source: SourceRecord) -> ArtifactRef | str:
        """The rows the step read through ctx.source as `source`, written once in the order
        the step's engine reads the files, for the input transforms to stress as they do an
        artifact; or why they could not be written."""
        target = (
            self.bench.invocation.root
            / AMPLIFIED_DIR
            / "sources"
            / (f"{step_dir_name(step.index, step.name)}-{source.name}.parquet")
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        files = [f.path for f in source.files]
        try:
            if self.bench.connections.name == "duckdb":
                copy_ordered(
                    self.bench.con, source_query(source.reader, files, source.options), target
                )
            else:
                self._engine_copy(step, source, files, target)
        except Exception as exc:
            reraise_if_requested(exc)
            if disk_full(exc) or not _a_read_that_failed(exc):
                raise
            # The step read these files a moment ago; a copy that fails is a gap in what
            # was varied, said as such, not a finding about the step.
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return f"its source {source.name} could not be copied to stress it ({first})"
        return ArtifactRef(
            f"{SOURCE_COPY}{source.name}",
            f"{AMPLIFIED_DIR}/sources",
            step.index,
            step.name,
            target,
            pq.read_metadata(target).num_rows,
        )

    def _engine_copy(self, step: Step, source: SourceRecord, files: list[str], target: Path):
        """The source's rows as the step's engine reads them (Spark's reader takes Spark's
        options, which DuckDB's would not), written through the engine's own ctx.write,
        in order, as one Parquet file at `target`."""
        scratch = target.with_name(f".{target.stem}")
        scratch.mkdir(parents=True, exist_ok=True)
        ctx = self.bench.connections.context(
            1,
            step_index=step.index,
            step_name=step.name,
            out_dir=scratch,
            visible={},
            state_source=lambda _name: None,
            owners={},
        )
        try:
            ctx.write(source.name, ctx.source(source.name, files, **source.options))
        finally:
            self.bench.connections.release(ctx)
        (scratch / f"{source.name}.parquet").replace(target)
        self.bench.janitor.remove_tree(scratch)

    def forget_source(self, copy: ArtifactRef) -> None:
        """Delete a source's copy and every stressed copy of it: they were one step's."""
        self.forget(copy.name)
        self._facts.pop(copy.path, None)
        self.bench.janitor.remove(copy.path)

    def _path(self, amplifier: str, name: str, variant: int, tag: str = "") -> Path:
        suffix = (f"-v{variant}" if variant else "") + (f"-{tag}" if tag else "")
        return (
            self.bench.invocation.root / AMPLIFIED_DIR / SLUG[amplifier] / f"{name}{suffix}.parquet"
        )

    def _transform(self, amplifier: str, ref: ArtifactRef, target: Path, variant: int) -> Outcome:
        con = self.bench.con
        if amplifier == Amplifier.TIE_COLLAPSE:
            return collapse_ties(
                con, ref.path, target, artifact=ref.name, plan=self.collapse_of(ref)
            )
        if amplifier == Amplifier.ROW_MULTIPLICATION:
            # The joint probe's stacked input: rows multiplied and the added copy's ties
            # collapsed (where that applies) in one pass, so the collapsed copy is never
            # written on its own.
            collapse = self.collapse_of(ref) if variant == _STACKED else None
            return multiply_rows(
                con,
                ref.path,
                target,
                artifact=ref.name,
                facts=self._facts_of(ref.path),
                collapse=collapse if isinstance(collapse, Collapse) else None,
            )
        if amplifier == Amplifier.ARRIVAL_ORDER:
            return reorder(con, ref.path, target, artifact=ref.name, variant=variant)
        raise ValueError(f"{amplifier} has no input transform")


# Every amplifier here that applies to a quiet step is probed in one series first,
# and each on its own only when that series shows any difference. Each adds
# variation of its own kind (how many threads share the work, the order rows
# arrive in, how many rows share a value, how many rows there are), so none can
# take away what another varies, and a quiet step, most steps, costs one probe
# instead of four. File order stays on its own: it changes what a step reads.
TOGETHER = (
    Amplifier.THREAD_COUNT,
    Amplifier.ARRIVAL_ORDER,
    Amplifier.TIE_COLLAPSE,
    Amplifier.ROW_MULTIPLICATION,
)


def amplify(
    bench: Workbench,
    step: Step,
    stressed: Stressed,
    runs: int,
    threads: int,
    probe: int | None = PROBE_RUNS,
    without: frozenset[Amplifier] = frozenset(),
) -> list[Series]:
    """Every amplifier on one quiet step, each probing first and escalating when it fires;
    those in `without` (turned off by the user) not at all.

    With a probe, the amplifiers in TOGETHER that apply are probed as one series;
    a joint probe that shows no difference at all reports each member with its
    comparisons (`probed_with` names the others), and any difference sends every
    member to its own series as usual. `probe=None` runs every amplifier on its
    own to the full count from the start.
    """
    loop_run1 = RunAddress(LOOP, 1)
    original = bench.records.visible(loop_run1, step.index)
    receipt = bench.records.get(loop_run1, step.index)
    label = f"amplify-{step_dir_name(step.index, step.name)}"
    made: dict[Amplifier, Series | dict] = {}
    inputs = _Inputs(bench, stressed, step, receipt, original)
    derive = _Derive(bench, stressed, step, label, threads, inputs.read, inputs.sources)

    def plan(amplifier: Amplifier) -> Series | dict:
        # Made when first needed: a joint probe that stays quiet never needs its members'
        # own inputs, and writing a stressed input is most of an amplifier's overhead.
        if amplifier not in made:
            made[amplifier] = _plan(
                bench, stressed, amplifier, receipt, original, inputs, threads, derive
            )
        return made[amplifier]

    settled: dict[Amplifier, Series] = {}
    split: Series | None = None
    try:
        if probe:
            settled, split = _together(
                bench, step, stressed, plan, inputs, label, runs, probe, without, derive
            )
        together = written_together(bench, inputs.read, derive.targets)
        found = _each(bench, step, plan, settled, label, runs, probe, without, together)
    finally:
        inputs.forget()
        derive.forget()
    return _charge_together(found, split) if split is not None else found


def _each(bench, step, plan, settled, label, runs, probe, without, together) -> list[Series]:
    """Every amplifier's Series: the joint probe's where it settled one, else its own.
    `together` is the groups of inputs one step wrote together, which a failure of a
    transform that changes what rows hold is told of."""
    found = []
    for amplifier in Amplifier:
        if amplifier in without:
            continue
        if amplifier in settled:
            found.append(settled[amplifier])
            continue
        planned = plan(amplifier)
        if isinstance(planned, Series):
            found.append(planned)
            continue
        series = run_series(
            bench,
            step,
            kind=amplifier,
            label=f"{label}-{SLUG[amplifier]}",
            runs=runs,
            probe=probe,
            attribute=True,
            **planned,
        )
        if series.error and together and amplifier in _CHANGES_ROWS:
            series = replace(series, error=series.error + _written_together(together, amplifier))
        found.append(series)
    return found


# The transforms that change what an input's rows hold, not only their order or the threads.
_CHANGES_ROWS = (Amplifier.ROW_MULTIPLICATION, Amplifier.TIE_COLLAPSE)


def written_together(bench, read: list[str], rewritten: set[str]) -> list[tuple[list[str], str]]:
    """The inputs of `read` that one step wrote together (a batch and its manifest), by that
    step, leaving out those written again from the stressed copies (rederive.py)."""
    by_step: dict[tuple[int, str], list[str]] = {}
    owners = bench.records.owners(RunAddress(LOOP, 1))
    for name in read:
        if name in owners and name not in rewritten:
            by_step.setdefault(owners[name], []).append(name)
    return [(names, f"step {i} {n}") for (i, n), names in by_step.items() if len(names) > 1]


def _written_together(together: list[tuple[list[str], str]], amplifier: Amplifier) -> str:
    """Why a correct step can fail here: a transform that changes each input on its own
    breaks what inputs written together say of each other, a count, a total, which no run
    of the pipeline could break, since one step wrote them from the same rows (unseen143)."""
    groups = "; ".join(f"{by} wrote {listed(names)} together" for names, by in together)
    return (
        f" ({groups}, and {amplifier} changes each input on its own, "
        f"so what one says of another, a count or a total, need not hold in the stressed "
        f"copies: a step that checks it fails there on correct code, and --without "
        f"{str(amplifier).replace(' ', '-')} leaves this amplifier out)"
    )


class _Derive:
    """The inputs of one step that others of its inputs decide, written again from the
    stressed copies of those (rederive.py) once per transform, and deleted after the step."""

    def __init__(self, bench, stressed, step, label, threads, read, sources=()):
        self.bench, self.stressed, self.label, self.threads = bench, stressed, label, threads
        self.derived = (
            derived_inputs(bench.records, step.index, read, sources)
            if stressed.steps is not None
            else None
        )
        self.targets = set(self.derived.targets) if self.derived else set()
        self.tag = f"derived{step.index}"
        self._made: dict[str, dict[str, ArtifactRef] | str] = {}

    def __call__(
        self, tag: str, overlay: Mapping[str, ArtifactRef]
    ) -> tuple[dict[str, ArtifactRef], str]:
        """The targets whose inputs `overlay` (the stressed copies, by name) changed,
        written again from it, and what to say of them; none when their chain raised, which
        the caller then stresses on their own as before, and the clause says why."""
        if self.derived is None:
            return {}, ""
        wanted = [t for t, (roots, _) in self.derived.targets.items() if set(roots) & set(overlay)]
        if not wanted:
            return {}, ""
        if tag not in self._made:
            self._made[tag] = recompute(
                self.bench,
                self.stressed.steps,
                self.derived,
                overlay,
                f"{self.label}-derive-{tag}",
                self.threads,
            )
        made = self._made[tag]
        if isinstance(made, str):
            return {}, (
                f"{listed(wanted)} not written again from the stressed rows ({made}), so "
                f"stressed on {'its' if len(wanted) == 1 else 'their'} own"
            )
        found = {name: made[name] for name in wanted if name in made}
        return found, said(self.derived, self.stressed.steps, list(found))

    def last(self, read: list[str]) -> tuple[list[str], str | None]:
        """`read` with the inputs others decide moved to the end, since they are written
        again from what was stressed before them, and the first of those (None if none)."""
        decided = [n for n in read if n in self.targets]
        return [n for n in read if n not in self.targets] + decided, next(iter(decided), None)

    def forget(self) -> None:
        for tag in self._made:
            discard_directory(self.bench, f"{self.label}-derive-{tag}")


class _Inputs:
    """What the input amplifiers may stress in one step: each artifact it read through
    ctx.read, and a copy of the rows of each source it read through ctx.source
    (written once, when first needed, and deleted with its stressed copies after the step).

    A source's copy is keyed SOURCE_COPY + its name, which is how the step's ctx.source
    finds it in place of the files; the input transforms treat it as any artifact."""

    def __init__(self, bench: Workbench, stressed: Stressed, step: Step, receipt, original):
        self.bench, self.stressed, self.step = bench, stressed, step
        self.original = original
        self.read = [r.name for r in receipt.reads if r.via == "read"] if receipt else []
        self.sources = list(receipt.sources) if receipt else []
        self.row_files = list(receipt.row_files) if receipt else []
        self._made: tuple[Mapping[str, ArtifactRef], list[str], list[str]] | None = None

    def _make(self) -> tuple[Mapping[str, ArtifactRef], list[str], list[str]]:
        if self._made is None:
            copies: dict[str, ArtifactRef] = {}
            unstressed: list[str] = []
            names = [s.name for s in self.sources]
            for source in self.sources:
                if self.row_files:
                    # Its copy is one file in another place: every row would come from it,
                    # and a step ordering by file would meet ties the files never make.
                    unstressed.append(
                        f"its source {source.name} is read for the file each row came from "
                        f"({listed(self.row_files)}), which a stressed copy, one file "
                        f"elsewhere, would change for every row"
                    )
                elif names.count(source.name) > 1:
                    if source is self.sources[names.index(source.name)]:
                        unstressed.append(
                            f"its source {source.name} is read more than once, from "
                            f"different calls, so no one copy stands in for it"
                        )
                else:
                    made = self.stressed.source_copy(self.step, source)
                    if isinstance(made, ArtifactRef):
                        copies[SOURCE_COPY + source.name] = made
                    else:
                        unstressed.append(made)
            self._made = (ChainMap(copies, self.original), [*self.read, *copies], unstressed)
        return self._made

    @property
    def stressable(self) -> Mapping[str, ArtifactRef]:
        """The loop's inputs, with each source's copy beside them."""
        return self._make()[0]

    @property
    def names(self) -> list[str]:
        """The keys in `stressable` the input amplifiers stress, artifacts first."""
        return self._make()[1]

    def nothing_to_stress(self) -> str:
        """Why no input amplifier applies; read only when `names` is empty."""
        unstressed = self._make()[2]
        if not unstressed:
            return "this step reads no artifact through ctx.read, so there is no input to stress"
        return f"this step reads no artifact through ctx.read, and {'; '.join(unstressed)}"

    def left_out(self) -> str:
        """What was not stressed beside what was, for an amplifier's detail: a source
        that could not be copied is a gap in what was varied, and says so."""
        unstressed = self._make()[2]
        return f"; not stressed: {'; '.join(unstressed)}" if unstressed else ""

    def forget(self) -> None:
        if self._made is not None:
            for key in self._made[1][len(self.read) :]:
                self.stressed.forget_source(self._made[0][key])


def _charge_together(found: list[Series], joint: Series) -> list[Series]:
    """A joint probe that moved the step was split, and each member ran on its own. When
    none of them moved it alone, the difference needs their variation together (a top-N
    over ties moves only when the ties are there and the rows arrive in another order), so
    the joint probe's runs are what is reported, under each member, as for a quiet probe.
    Reporting the members' own quiet series instead called such a step
    NO_DIVERGENCE_OBSERVED, after twicerun had seen it differ."""
    members = [joint.kind, *joint.probed_with]
    alone = [s for s in found if s.kind in members]
    if any(s.error or any(c.differs or c.error for c in s.comparisons) for s in alone):
        return found
    # Not yet scored, so counted from the comparisons (none of which differed).
    counts = {s.kind: sum(1 for c in s.comparisons if c.artifacts) for s in alone if s.ran}
    if len(set(counts.values())) == 1:
        quiet = f"in {next(iter(counts.values()))} comparisons each"
    else:
        quiet = "; ".join(f"{kind} in {n} comparisons" for kind, n in counts.items())
    charged = []
    for s in found:
        if s.kind not in members:
            charged.append(s)
            continue
        others = [m for m in members if m != s.kind]
        charged.append(
            replace(
                joint,
                kind=s.kind,
                probed_with=others,
                detail=(
                    f"probed together with {listed(others)}: {joint.detail}; on its own, "
                    f"none moved the step, {quiet}"
                ),
            )
        )
    return charged


def _plan(bench, stressed, amplifier, receipt, original, inputs, threads, derive) -> Series | dict:
    """How one amplifier would run on this step (run_series' arguments), or the Series
    saying why it cannot (declined, or its transform failed)."""
    if amplifier == Amplifier.FILE_ORDER:
        return _file_order(receipt, original, threads)
    if amplifier == Amplifier.THREAD_COUNT:
        raised = raised_threads(threads)
        if bench.connections.name == "spark":
            # Within one partition count Spark's answers hold still; across counts is
            # where partition-dependent steps move, so each run gets another count.
            return dict(
                threads=raised,
                threads_for=lambda run: raised + (run - 1) * threads,
                inputs_for=lambda _run: original,
                detail=(
                    f"partitions {raised} in run 1, then {threads} more in each later run "
                    f"(the loop used {threads})"
                ),
                same_inputs_as_loop=True,
            )
        return dict(
            threads=raised,
            inputs_for=lambda _run: original,
            detail=f"threads raised to {raised} from the {threads} in the loop",
            same_inputs_as_loop=True,
        )
    try:
        read = inputs.names
        if not read:
            return Series(kind=amplifier, threads=threads, declined=inputs.nothing_to_stress())
        inputs_for, detail, declined = _inputs(stressed, amplifier, inputs.stressable, read, derive)
    except Exception as exc:  # an amplifier that raises is a finding, never a clean zero
        reraise_if_requested(exc)
        return Series(kind=amplifier, threads=threads, error=f"{type(exc).__name__}: {exc}")
    if declined:
        return Series(kind=amplifier, threads=threads, declined=declined)
    return dict(threads=threads, inputs_for=inputs_for, detail=detail + inputs.left_out())


def _together(bench, step, stressed, plan, inputs, label, runs, probe, without, derive):
    """One probe with the variation of every member of TOGETHER that applies: each input's
    rows multiplied, the added copy's ties collapsed, then reordered run by run, at raised
    threads.

    Each member's Series when the probe showed no difference at all. When it showed one,
    no member is settled (each runs on its own) and the probe, continued to the full count
    like any probe that fires, comes back as the second value with its members in
    `probed_with`, for `_charge_together`. Nothing when fewer than two members apply, or
    when the raised thread count, which the probe is built on, is turned off."""
    if Amplifier.THREAD_COUNT in without:
        return {}, None
    threads = plan(Amplifier.THREAD_COUNT)
    if not isinstance(threads, dict):
        return {}, None
    # The first connection at raised threads (the probe's, or the thread-count series'
    # when there is no probe) opens while the inputs are written, not after.
    first = threads["threads_for"](1) if threads.get("threads_for") else threads["threads"]
    bench.connections.warm(first)
    try:
        if not inputs.names:
            return {}, None
        inputs_for, details = _joint(stressed, inputs.stressable, inputs.names, without, derive)
    except Exception as exc:
        reraise_if_requested(exc)
        return {}, None  # each member runs, and fails or not, on its own
    members = [m for m in TOGETHER if m == Amplifier.THREAD_COUNT or m in details]
    if len(members) < 2:
        return {}, None
    series = run_series(
        bench,
        step,
        kind=Amplifier.THREAD_COUNT,
        label=f"{label}-{'+'.join(SLUG[m] for m in members)}",
        threads=threads["threads"],
        threads_for=threads.get("threads_for"),
        runs=runs,
        probe=probe,
        attribute=True,
        inputs_for=inputs_for,
        # Reordering comes last in the detail: it reorders what the others made.
        detail="; ".join(
            [threads["detail"], *(details[m] for m in _JOINT_DETAIL_ORDER if m in details)]
        )
        + inputs.left_out(),
    )
    if series.error or any(c.differs or c.error for c in series.comparisons):
        return {}, replace(series, probed_with=[m for m in members if m != series.kind])
    joint = {}
    for member in members:
        others = [m for m in members if m != member]
        joint[member] = replace(
            series,
            kind=member,
            probed_with=others,
            detail=f"probed together with {listed(others)}: {series.detail}",
        )
    return joint, None


_JOINT_DETAIL_ORDER = (
    Amplifier.TIE_COLLAPSE,
    Amplifier.ROW_MULTIPLICATION,
    Amplifier.ARRIVAL_ORDER,
)


def _joint(stressed, original, read, without, derive):
    """The joint probe's inputs per run, and what each input amplifier changed (only those
    that changed something). Run 1 reads each input with its rows multiplied and the added
    copy's ties collapsed, where those apply, written in one pass; later runs read the same
    rows reordered. A member in `without` changes nothing: without row multiplication the
    probe reads the tie-collapsed copy tie collapse reads on its own."""
    # Overlays on the loop's inputs: only what a step reads is ever resolved.
    base = ChainMap({}, original)
    changed: dict[Amplifier, list[str]] = {}
    multiply = Amplifier.ROW_MULTIPLICATION not in without
    collapse_on = Amplifier.TIE_COLLAPSE not in without
    whole: list[str] = []  # inputs collapsed on every row, not multiplied
    unmultiplied: list[str] = []  # inputs left as written for what they hold
    ordered, first_decided = derive.last(read)
    rewritten: dict[str, ArtifactRef] = {}
    for name in ordered:
        if name == first_decided:
            rewritten, clause = derive(_JOINT, {n: base[n] for n in base.maps[0]})
            base.update(rewritten)
            if clause:
                key = Amplifier.ROW_MULTIPLICATION if multiply else Amplifier.TIE_COLLAPSE
                changed.setdefault(key, []).append(clause)
        if name in rewritten:
            continue
        stacked, outcome = None, None
        if multiply:
            stacked, outcome = stressed.get(
                Amplifier.ROW_MULTIPLICATION,
                original[name],
                # Plain stacking, no sort, when the added copy's ties stay as they are.
                variant=_STACKED if collapse_on else 0,
            )
        if stacked is not None:
            changed.setdefault(Amplifier.ROW_MULTIPLICATION, []).append(outcome.detail)
            collapse = stressed.collapse_of(original[name]) if collapse_on else None
            if isinstance(collapse, Collapse):
                changed.setdefault(Amplifier.TIE_COLLAPSE, []).append(collapse.detail)
            base[name] = stacked
            continue
        if outcome is not None and outcome.said:
            unmultiplied.append(outcome.reason)
        # Not multiplied (row multiplication off, no rows, or a key no copy can keep): its
        # ties are still collapsed where that applies, on every row, as tie collapse reads it.
        if collapse_on:
            collapsed, folded = stressed.get(Amplifier.TIE_COLLAPSE, original[name])
            if collapsed is not None:
                whole.append(
                    folded.detail + (", on every row (not multiplied)" if multiply else "")
                )
                base[name] = collapsed
    # A rewritten input is this step's own, not the copy other steps share under its name.
    tags = {name: f"{_JOINT}-{derive.tag}" if name in rewritten else _JOINT for name in read}
    reordered = [
        name
        for name in read
        if Amplifier.ARRIVAL_ORDER not in without
        and stressed.get(Amplifier.ARRIVAL_ORDER, base[name], variant=2, tag=tags[name])[0]
        is not None
    ]
    if Amplifier.TIE_COLLAPSE in changed and multiply:
        changed[Amplifier.TIE_COLLAPSE].append(
            "each in the added copy of the rows, the first copy as it was"
        )
    if whole:
        changed.setdefault(Amplifier.TIE_COLLAPSE, []).extend(whole)
    if Amplifier.ROW_MULTIPLICATION in changed:
        changed[Amplifier.ROW_MULTIPLICATION] += unmultiplied
    if reordered:
        changed[Amplifier.ARRIVAL_ORDER] = [
            f"{', '.join(reordered)}: run 1 as stressed above, run 2 with row groups reversed, "
            f"later runs shuffled"
        ]

    def per_run(run: int) -> Mapping[str, ArtifactRef]:
        if run == 1:
            return base
        inputs = ChainMap({}, base)
        for name in reordered:
            ref, _ = stressed.get(Amplifier.ARRIVAL_ORDER, base[name], variant=run, tag=tags[name])
            inputs[name] = ref or base[name]
        return inputs

    return per_run, {amplifier: "; ".join(d) for amplifier, d in changed.items()}


def _files_behind_ctx(receipt) -> str:
    """For a step whose SQL reads files itself (`read_csv('data/*.csv')`): that this
    amplifier cannot reorder those, and what would let it."""
    files = receipt.files_in_sql if receipt is not None else {}
    named = sorted(files)
    # One file has no other order; a glob or a list of files has.
    if not (len(named) > 1 or any(stamp.startswith("glob:") for stamp in files.values())):
        return ""
    return (
        f" (its SQL reads {', '.join(repr(n) for n in named[:3])}"
        f"{' and more' if len(named) > 3 else ''} itself, in an order only DuckDB decides; "
        f"read through ctx.source(name, files), they are recorded and reordered)"
    )


def _file_order(receipt, original, threads) -> Series | dict:
    """The step's multi-file sources read in other orders; a run that raises on another
    order has changed its answer (rows to an error), which is a finding, not a failure."""
    # Distinct paths: a list naming one file twice reads the same whichever way round, and
    # reversing it was reported as an order varied when nothing had changed.
    every = receipt.sources if receipt else []
    sources = [s for s in every if len({f.path for f in s.files}) > 1]
    if not sources:
        single = [s.name for s in every]
        listed = [len(s.files) for s in every if len(s.files) > 1]
        repeats = ""
        if listed:
            repeats = (
                f" (listed {listed[0]} times)"
                if len(single) == 1
                else " (some listed more than once)"
            )
        reason = (
            f"its source{'s' if len(single) > 1 else ''} {', '.join(single)} "
            f"{'are one file each' if len(single) > 1 else 'is one file'}{repeats}, so there is "
            f"no other order"
            if single
            else "this step reads no list of files through ctx.source, so there is no order to change"
            + _files_behind_ctx(receipt)
        )
        return Series(kind=Amplifier.FILE_ORDER, threads=threads, declined=reason)

    def order_for(run: int):
        if run == 1:
            return None  # as listed: the loop's own order
        return lambda _name, count: permutation(count, run - 1)

    listed = ", ".join(f"{s.name} ({len(s.files)} files)" for s in sources)
    return dict(
        threads=threads,
        inputs_for=lambda _run: original,
        detail=f"{listed}: run 1 as listed, run 2 reversed, later runs rotated",
        same_inputs_as_loop=True,
        source_order_for=order_for,
        raise_is_answer=True,
    )


def _inputs(
    stressed: Stressed,
    amplifier: str,
    original: Mapping[str, ArtifactRef],
    read: list[str],
    derive: _Derive,
) -> tuple[Callable[[int], Mapping[str, ArtifactRef]], str | None, str | None]:
    """The inputs per run, what changed, or why nothing could."""
    if amplifier == Amplifier.ARRIVAL_ORDER:
        details, reasons = [], []
        for name in read:
            _, outcome = stressed.get(amplifier, original[name], variant=2)
            (details if isinstance(outcome, Applied) else reasons).append(outcome)
        if not details:
            return (lambda _run: original), None, "; ".join(o.reason for o in reasons)

        def per_run(run: int) -> Mapping[str, ArtifactRef]:
            if run == 1:
                return original  # as written: the loop's own input
            inputs = ChainMap({}, original)
            for name in read:
                ref, _ = stressed.get(amplifier, original[name], variant=run)
                if ref is not None:
                    inputs[name] = ref
            return inputs

        names = ", ".join(
            name
            for name in read
            if isinstance(stressed.get(amplifier, original[name], 2)[1], Applied)
        )
        return (
            per_run,
            f"{names}: run 1 as written, run 2 with row groups reversed, later runs shuffled",
            None,
        )

    inputs = ChainMap({}, original)
    applied, declined = [], []
    ordered, first_decided = derive.last(read)
    rewritten: dict[str, ArtifactRef] = {}
    for name in ordered:
        if name == first_decided:
            rewritten, clause = derive(SLUG[amplifier], dict(inputs.maps[0]))
            inputs.update(rewritten)
            if clause:
                applied.append(clause)
        if name in rewritten:
            continue
        ref, outcome = stressed.get(amplifier, original[name])
        if ref is not None:
            inputs[name] = ref
            applied.append(outcome.detail)
        else:
            declined.append(outcome)
    if not applied:
        return (lambda _run: original), None, "; ".join(o.reason for o in declined)
    return (lambda _run: inputs), "; ".join(applied + [o.reason for o in declined if o.said]), None


def _a_read_that_failed(exc: BaseException) -> bool:
    """An engine that could not read or write the source's rows again (DuckDB's errors,
    a source refused, Spark's own exception classes), not a fault of twicerun's."""
    return isinstance(exc, (duckdb.Error, BadInput)) or type(exc).__module__.startswith(
        ("pyspark", "py4j")
    )
