"""Running the amplifiers on a step the loop found quiet.

Only the artifacts the step read through ctx.read are substituted; state read
through ctx.state comes from the step's own earlier output, which no upstream
input decides. Every stressed input is written once per amplifier and artifact
(once per run variant for arrival order) and shared by every step that reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from twicerun.pipeline import Step
from twicerun.result import Series
from twicerun.runner.amplify.arrival_order import reorder
from twicerun.runner.amplify.base import Applied, Declined, Facts, Outcome, column_facts
from twicerun.runner.amplify.file_order import permutation
from twicerun.runner.amplify.row_multiplication import multiply_rows
from twicerun.runner.amplify.tie_collapse import collapse_ties
from twicerun.runner.interrupts import reraise_if_requested
from twicerun.runner.series import Workbench, run_series
from twicerun.storage.context import ArtifactRef
from twicerun.storage.layout import LOOP, RunAddress, step_dir_name
from twicerun.vocabulary.loop import Amplifier

PROBE_RUNS = 3
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

    def __init__(self, bench: Workbench):
        self.bench = bench
        self._made: dict[tuple[str, str, int], Outcome] = {}
        # Two amplifiers count the same input's distinct values; count each file once.
        self._facts: dict[Path, Facts] = {}

    def _facts_of(self, path: Path) -> Facts:
        if path not in self._facts:
            self._facts[path] = column_facts(self.bench.con, path)
        return self._facts[path]

    def get(
        self, amplifier: str, ref: ArtifactRef, variant: int = 0
    ) -> tuple[ArtifactRef | None, Outcome]:
        slot = (amplifier, ref.name, variant)
        target = self._path(amplifier, ref.name, variant)
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

    def _path(self, amplifier: str, name: str, variant: int) -> Path:
        suffix = f"-v{variant}" if variant else ""
        return (
            self.bench.invocation.root / AMPLIFIED_DIR / SLUG[amplifier] / f"{name}{suffix}.parquet"
        )

    def _transform(self, amplifier: str, ref: ArtifactRef, target: Path, variant: int) -> Outcome:
        con = self.bench.con
        if amplifier == Amplifier.TIE_COLLAPSE:
            return collapse_ties(
                con, ref.path, target, artifact=ref.name, facts=self._facts_of(ref.path)
            )
        if amplifier == Amplifier.ROW_MULTIPLICATION:
            return multiply_rows(
                con, ref.path, target, artifact=ref.name, facts=self._facts_of(ref.path)
            )
        if amplifier == Amplifier.ARRIVAL_ORDER:
            return reorder(con, ref.path, target, artifact=ref.name, variant=variant)
        raise ValueError(f"{amplifier} has no input transform")


def amplify(
    bench: Workbench,
    step: Step,
    stressed: Stressed,
    runs: int,
    threads: int,
    probe: int | None = PROBE_RUNS,
) -> list[Series]:
    """Every amplifier on one quiet step, each probing first and escalating when it fires.

    `probe=None` runs every amplifier to the full count from the start.
    """
    loop_run1 = RunAddress(LOOP, 1)
    original = bench.records.visible(loop_run1, step.index)
    receipt = bench.records.get(loop_run1, step.index)
    read = [r.name for r in receipt.reads if r.via == "read"] if receipt else []
    label = f"amplify-{step_dir_name(step.index, step.name)}"
    found = []
    for amplifier in Amplifier:
        series_label = f"{label}-{SLUG[amplifier]}"
        common = dict(kind=amplifier, label=series_label, runs=runs, probe=probe)
        if amplifier == Amplifier.FILE_ORDER:
            found.append(_file_order(bench, step, receipt, original, threads, common))
            continue
        if amplifier == Amplifier.THREAD_COUNT:
            raised = raised_threads(threads)
            found.append(
                run_series(
                    bench,
                    step,
                    threads=raised,
                    inputs_for=lambda _run: original,
                    detail=f"threads raised to {raised} from the {threads} in the loop",
                    same_inputs_as_loop=True,
                    **common,
                )
            )
            continue
        if not read:
            found.append(
                Series(
                    kind=amplifier,
                    threads=threads,
                    declined="this step reads no artifact through ctx.read, so there is no input to stress",
                )
            )
            continue
        try:
            inputs_for, detail, declined = _inputs(stressed, amplifier, original, read)
        except Exception as exc:  # an amplifier that raises is a finding, never a clean zero
            reraise_if_requested(exc)
            found.append(
                Series(kind=amplifier, threads=threads, error=f"{type(exc).__name__}: {exc}")
            )
            continue
        if declined:
            found.append(Series(kind=amplifier, threads=threads, declined=declined))
            continue
        found.append(
            run_series(bench, step, threads=threads, inputs_for=inputs_for, detail=detail, **common)
        )
    return found


def _file_order(bench, step, receipt, original, threads, common) -> Series:
    """The step's multi-file sources read in other orders; a run that raises on another
    order has changed its answer (rows to an error), which is a finding, not a failure."""
    sources = [s for s in (receipt.sources if receipt else []) if len(s.files) > 1]
    if not sources:
        single = [s.name for s in (receipt.sources if receipt else [])]
        reason = (
            f"its source{'s' if len(single) > 1 else ''} {', '.join(single)} "
            f"{'are' if len(single) > 1 else 'is'} one file each, so there is no other order"
            if single
            else "this step reads no list of files through ctx.source, so there is no order to change"
        )
        return Series(kind=Amplifier.FILE_ORDER, threads=threads, declined=reason)

    def order_for(run: int):
        if run == 1:
            return None  # as listed: the loop's own order
        return lambda _name, count: permutation(count, run - 1)

    listed = ", ".join(f"{s.name} ({len(s.files)} files)" for s in sources)
    return run_series(
        bench,
        step,
        threads=threads,
        inputs_for=lambda _run: original,
        detail=f"{listed}: run 1 as listed, run 2 reversed, later runs rotated",
        same_inputs_as_loop=True,
        source_order_for=order_for,
        raise_is_answer=True,
        **common,
    )


def _inputs(
    stressed: Stressed, amplifier: str, original: dict[str, ArtifactRef], read: list[str]
) -> tuple[Callable[[int], dict[str, ArtifactRef]], str | None, str | None]:
    """The inputs per run, what changed, or why nothing could."""
    if amplifier == Amplifier.ARRIVAL_ORDER:
        details, reasons = [], []
        for name in read:
            _, outcome = stressed.get(amplifier, original[name], variant=2)
            (details if isinstance(outcome, Applied) else reasons).append(outcome)
        if not details:
            return (lambda _run: original), None, "; ".join(o.reason for o in reasons)

        def per_run(run: int) -> dict[str, ArtifactRef]:
            if run == 1:
                return original  # as written: the loop's own input
            inputs = dict(original)
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

    inputs = dict(original)
    applied, declined = [], []
    for name in read:
        ref, outcome = stressed.get(amplifier, original[name])
        if ref is not None:
            inputs[name] = ref
            applied.append(outcome.detail)
        else:
            declined.append(outcome.reason)
    if not applied:
        return (lambda _run: original), None, "; ".join(declined)
    return (lambda _run: inputs), "; ".join(applied), None
