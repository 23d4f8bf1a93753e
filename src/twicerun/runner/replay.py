"""Executing steps for the verdict verbs: into scratch files, recorded nowhere.

`reproduce` re-executes a step of a recorded run from the inputs its receipt
names; `audit` makes one ordinary run so each step has its inputs, then runs
each step twice more. Either way the executions go into a scratch invocation in
a temporary directory that is removed whatever happens, so nothing they wrote
can be mistaken for a record. The words about what they found are decided in
the verdicts room; this module only executes and digests.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from twicerun.compare.oracle import compare_artifacts
from twicerun.errors import StepCrashed, StepTimedOut
from twicerun.findings import ArtifactFindings
from twicerun.pipeline import Pipeline, Step
from twicerun.result import Environment
from twicerun.runner import interrupts
from twicerun.runner.engines import open_engine
from twicerun.runner.environment import stamp
from twicerun.runner.execute import execute_step
from twicerun.runner.fresh_process import FreshProcess
from twicerun.runner.past_ctx import uncontained
from twicerun.runner.progress import Progress, ProgressEvent, silent
from twicerun.runner.records import Records
from twicerun.runner.step_output import steps_print_to_stderr
from twicerun.storage.connections import open_connection
from twicerun.storage.context import ArtifactRef
from twicerun.storage.layout import LOOP, Invocation, RunAddress, follow
from twicerun.storage.receipts import Receipt

AUDIT = "audit"


class Scratch:
    """A throwaway invocation to execute steps in; removed on close."""

    def __init__(
        self,
        threads: int,
        purpose: str,
        engine: str = "duckdb",
        under: Path | None = None,
        timeout: float | None = None,
        master: str | None = None,
    ):
        self.timeout = timeout
        self.root = Path(tempfile.mkdtemp(prefix="twicerun-scratch-", dir=under))
        self.invocation = Invocation.create(self.root, {"purpose": purpose})
        self.con = open_connection(threads, self.invocation.spill_dir)
        try:
            self.connections = open_engine(engine, threads, self.invocation.spill_dir, master)
        except BaseException:
            self.con.close()
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        self.records = Records(self.invocation, RunAddress(LOOP, 1))

    def execute(
        self,
        step: Step,
        address: RunAddress,
        threads: int,
        visible: Mapping[str, ArtifactRef],
        state_source: Callable[[str], ArtifactRef | None] = lambda _name: None,
    ) -> Receipt:
        """One execution, every artifact named by its canonical digest."""
        receipt = execute_step(
            invocation=self.invocation,
            step=step,
            address=address,
            threads=threads,
            visible=visible,
            state_source=state_source,
            owners={},
            reference=None,
            digest_connection=self.con,
            connections=self.connections,
            canonical=True,
            timeout=self.timeout,
        )
        self.records.add(address, receipt)
        return receipt

    def path(self, record_file: str) -> Path:
        return self.invocation.absolute(record_file)

    def forget(self, address: RunAddress, step: Step) -> None:
        shutil.rmtree(self.invocation.step_dir(address, step.index, step.name), ignore_errors=True)

    def close(self) -> None:
        try:
            self.connections.shutdown()
            self.con.close()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Scratch:
        # Closed in reverse: the scratch directory goes first, then stdout comes back.
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(steps_print_to_stderr())
        self._stack.callback(self.close)
        # Ctrl-C stops its digests' and comparisons' queries too, as it does a step's.
        self._stack.enter_context(interrupts.interruptible(self.con.interrupt))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


# reproduce ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedInputs:
    """What a recorded execution read, resolved to files, or why some cannot be."""

    visible: dict[str, ArtifactRef]
    state: dict[str, ArtifactRef]
    missing: list[str] = field(default_factory=list)


def recorded_inputs(invocation: Invocation, receipt: Receipt) -> RecordedInputs:
    """The artifacts a receipt says its step read, as files in the recorded invocation."""

    visible: dict[str, ArtifactRef] = {}
    state: dict[str, ArtifactRef] = {}
    missing: list[str] = []
    for read in receipt.reads:
        if read.run is None or read.step_index is None:
            continue  # a state read that started from its initial rows: nothing to find
        try:
            address = RunAddress.parse(read.run)
        except ValueError:
            missing.append(f"{read.name} was a stressed copy, never recorded")
            continue
        located = follow(invocation.receipt_at, address, read.step_index, read.name)
        if located is None or not located[2].kept:
            missing.append(f"input {read.name} (from run {read.run}) was pruned or never kept")
            continue
        where, source, record = located
        path = invocation.absolute(record.file)
        if not path.is_file():
            missing.append(f"input {read.name}: {record.file} is gone")
            continue
        ref = ArtifactRef(
            name=read.name,
            run=str(where),
            step_index=read.step_index,
            step_name=source.step_name,
            path=path,
            rows=record.rows,
            canonical_digest=record.canonical_digest,
        )
        (state if read.via == "state" else visible)[read.name] = ref
    return RecordedInputs(visible, state, missing)


# audit -------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditRun:
    """One of a step's two audit executions: its digests by artifact, and its time."""

    seconds: float
    bytes: dict[str, str]
    canonical: dict[str, str]
    # What it read through ctx.state: both audit runs start it from its initial rows.
    state: tuple[str, ...] = ()
    # The state it left the process's random generators in, where it drew from them.
    generators: str | None = None
    # What it raised ("Type: message (at file:line)"), where this execution raised and the
    # other wrote; empty where it wrote.
    raised: str = ""
    # What it read past ctx, as `runner.series.uncontained` names it, with each digest.
    reached: dict[str, str] = field(default_factory=dict)
    # Its first query that drew at random with nothing in the step seeding it; "" for none.
    draws: str = ""
    # Where its artifacts are while the pair is compared, by name (removed right after).
    files: dict[str, str] = field(default_factory=dict)


def audit_run(receipt: Receipt, seconds: float, where: Callable[[str], Path]) -> AuditRun:
    """What an audit keeps of one execution, wherever it ran (here or in the other
    process, which sends these fields back); `where` makes a receipt's file a path."""
    return AuditRun(
        seconds=round(receipt.seconds or seconds, 3),
        bytes={a.name: a.bytes_digest for a in receipt.artifacts},
        canonical={a.name: a.canonical_digest for a in receipt.artifacts},
        state=tuple(r.name for r in receipt.reads if r.via == "state"),
        generators=receipt.generators,
        reached=uncontained(receipt),
        draws=receipt.sql_draws[0] if receipt.sql_draws else "",
        files={a.name: str(where(a.file)) for a in receipt.artifacts},
    )


@dataclass(frozen=True)
class AuditedStep:
    step: Step
    runs: tuple[AuditRun, AuditRun]
    # How the two runs' rows differ, by the oracle, for each artifact whose rows did:
    # "the rows differ" named no kind, where a column that came back in another order and
    # a row gone are not the same finding.
    findings: dict[str, ArtifactFindings] = field(default_factory=dict)


def audit_runs(
    pipeline: Pipeline,
    threads: int,
    steps: Iterable[Step],
    progress: Progress = silent,
    instrument: Callable[[Environment], None] = lambda _env: None,
    timeout: float | None = None,
    master: str | None = None,
) -> list[AuditedStep]:
    """One ordinary run so each step has its inputs, then each chosen step twice more,
    one step at a time (a duration is part of the report, and two steps competing for
    cores would time the machine), each pair's files deleted as soon as it is digested.

    A step that raises stops the audit; the StepCrashed it raises carries, as
    `audited`, the steps audited before it (in the first run, every chosen step
    before the one that raised), so their verdicts are not lost with it.

    `instrument` is told what the steps run on (the engine, its version, the thread or
    partition count) as soon as the engine is up, so a report can name it either way.

    On DuckDB, each step's second audit execution happens in another Python process with
    a string hash seed of its own (runner/fresh_process.py).
    """
    chosen = {s.index for s in steps}
    last = max(chosen, default=-1)
    with Scratch(threads, "audit", pipeline.engine, timeout=timeout, master=master) as scratch:
        # Started before the ordinary run, so that it imports while that executes, and its
        # scratch files inside this one's, removed with it even if it has to be killed. On
        # Spark both runs stay here: a second process would start a second JVM.
        other = (
            FreshProcess(
                pipeline.path, pipeline.seeds, threads, under=scratch.root, timeout=timeout
            )
            if pipeline.engine == "duckdb" and chosen
            else None
        )
        try:
            found, crashed = _audit_in(
                pipeline, threads, chosen, last, scratch, other, progress, instrument
            )
        except BaseException:
            if other is not None:
                other.kill()
            raise
        if other is not None:
            other.close()
    if crashed is not None:
        crashed.audited = found
        raise crashed
    return found


def _audit_in(
    pipeline: Pipeline,
    threads: int,
    chosen: set[int],
    last: int,
    scratch: Scratch,
    other: FreshProcess | None,
    progress: Progress,
    instrument: Callable[[Environment], None],
) -> tuple[list[AuditedStep], StepCrashed | None]:
    found: list[AuditedStep] = []
    crashed: StepCrashed | None = None
    instrument(stamp(threads, scratch.connections))
    # Every execution is known up front, so no connection is opened that none uses.
    here = 1 if other is not None else 2
    scratch.connections.expect(threads, last + 1 + here * len(chosen))
    first = RunAddress(LOOP, 1)
    for step in pipeline.steps[: last + 1]:
        progress(ProgressEvent("audit", 1, 3, step.index, len(pipeline.steps), step.name))
        try:
            scratch.execute(step, first, threads, scratch.records.visible(first, step.index))
        except StepCrashed as exc:
            crashed = exc
            chosen = {i for i in chosen if i < step.index}
            break
    for step in pipeline.steps:
        if step.index not in chosen:
            continue
        inputs = scratch.records.visible(first, step.index)
        runs: list[AuditRun] = []
        raised: list[StepCrashed] = []
        try:
            for n in (1, 2):
                progress(
                    ProgressEvent("audit", n + 1, 3, step.index, len(pipeline.steps), step.name)
                )
                started = time.perf_counter()
                try:
                    if n == 2 and other is not None:
                        reply = other.execute(step.index, step.name, 2, inputs)
                        runs.append(AuditRun(**{**reply, "state": tuple(reply["state"])}))
                        continue
                    receipt = scratch.execute(step, RunAddress(AUDIT, n), threads, inputs)
                except StepCrashed as exc:
                    if isinstance(exc.error, StepTimedOut):
                        exc.audited = found  # a slower run is no answer: the audit stops here
                        raise
                    raised.append(exc)
                    runs.append(_raised(exc, time.perf_counter() - started))
                    continue
                runs.append(audit_run(receipt, time.perf_counter() - started, scratch.path))
            if len(raised) == 2:
                # Both raised: nothing to compare, and the step is broken rather than moving.
                raised[0].audited = found
                raise raised[0]
            # One raised where the other wrote: that is the step not repeating itself.
            found.append(AuditedStep(step, (runs[0], runs[1]), _how(scratch, runs)))
        finally:
            # The other process removes its copies when it is asked for the next step.
            for n in (1, 2):
                scratch.forget(RunAddress(AUDIT, n), step)
    return found, crashed


def _how(scratch: Scratch, runs: list[AuditRun]) -> dict[str, ArtifactFindings]:
    """The oracle's findings for each artifact both runs wrote with other rows."""
    first, second = runs
    found = {}
    for name, digest in first.canonical.items():
        if name not in second.canonical or second.canonical[name] == digest:
            continue
        a, b = first.files.get(name), second.files.get(name)
        if a and b and Path(a).exists() and Path(b).exists():
            found[name] = compare_artifacts(scratch.con, name, Path(a), Path(b), attribute_above=0)
    return found


def _raised(exc: StepCrashed, seconds: float) -> AuditRun:
    at = f" (at {exc.where})" if exc.where else ""
    return AuditRun(
        seconds=round(seconds, 3),
        bytes={},
        canonical={},
        raised=f"{exc.said}{at}",
    )
