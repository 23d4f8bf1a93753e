"""Executing one step once: a fresh connection, the call, the digests, the receipt.

Only the call itself is timed as the step's seconds; digests and receipts are
the tool's own overhead, which `bench/loop.py` measures against it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import duckdb
import pyarrow as pa

from twicerun.compare.digest import Digests, digests
from twicerun.errors import BadInput, ContractError, StepCrashed, StepTimedOut, UnsupportedColumn
from twicerun.pipeline import Step
from twicerun.pipeline.loader import line_in, missing_module_advice
from twicerun.pipeline.uses import read_now
from twicerun.runner import own_workers
from twicerun.runner.default_connection import already_exists
from twicerun.runner.engines import Engine, session_time_zone
from twicerun.runner.environ_read import reading_environment
from twicerun.runner.environment import platform_stamp
from twicerun.runner.generators import generator_states, left_in, named_generators
from twicerun.runner.handed_objects import reused
from twicerun.runner.interrupts import (
    deadline,
    interruptible,
    reraise_if_requested,
    timed_out,
)
from twicerun.runner.opened import (
    Recording,
    directories_changed,
    files_named,
    recording,
    wrote_into,
)
from twicerun.storage.context import ArtifactRef
from twicerun.storage.fingerprints import fingerprint, touched_since
from twicerun.storage.layout import LOOP, Invocation, RunAddress
from twicerun.storage.receipts import RECEIPT_VERSION, ArtifactRecord, Receipt, save_receipt
from twicerun.storage.space import disk_full, full_disk_advice


@contextlib.contextmanager
def _arrow_at(threads: int) -> Iterator[None]:
    """pyarrow's compute at the execution's thread count while the step runs, put back
    after. A step may group or sum in pyarrow (`Table.group_by`) as well as in SQL, and
    pyarrow's pool is the machine's cores whatever DuckDB was told: the bisect's one
    thread would not reach it, and a step whose order comes from that pool was reported
    as still differing at one thread (PERSISTS_SINGLE_THREADED), not PARALLEL_ORDER.
    Setting it costs well under a microsecond, so every execution does."""
    before = pa.cpu_count()
    pa.set_cpu_count(threads)
    try:
        yield
    finally:
        pa.set_cpu_count(before)


def _raised_only_later(
    address: RunAddress, reference: Receipt | None, step: Step, exc: BaseException
) -> str:
    """A step that ran to the end in run 1 and raised in a later run of the loop: the
    crash is itself an answer that changes from run to run, and the user should hear it
    as such, not as a bug that would fail every run. Unless what it made on DuckDB's
    default connection in run 1 was still there: that is twicerun running every run in
    one process, and a service, a clock or a race is the wrong place to look."""
    if address.series != LOOP or address.run == 1 or reference is None:
        return ""
    if reference.outcome != "ok":
        return ""
    if already_exists(exc) and (step.uses_duckdb_module or step.kept_connections):
        where = (
            "DuckDB's default connection (duckdb.sql() and the like), which is the process's"
            if step.uses_duckdb_module
            else "a DuckDB connection the pipeline keeps ("
            + ", ".join(sorted({name for _, name in step.kept_connections}))
            + "), which outlives the step"
        )
        return (
            f"it ran to the end in run 1 and raised in run {address.run}: its code runs SQL "
            f"on {where}, and every run of twicerun is in one process, so what an earlier "
            "execution made there was still there; ctx.sql runs it on the step's own "
            "connection, which starts empty every time"
        )
    return (
        f"it ran to the end in run 1 and raised in run {address.run}, so whether this step "
        "fails changes from run to run; look for what it depends on that a rerun changes "
        "(a service, a clock, a file, a race)"
    )


def execute_step(
    *,
    invocation: Invocation,
    step: Step,
    address: RunAddress,
    threads: int,
    visible: Mapping[str, ArtifactRef],
    state_source: Callable[[str], ArtifactRef | None],
    owners: Mapping[str, tuple[int, str]],
    reference: Receipt | None,
    digest_connection: duckdb.DuckDBPyConnection,
    connections: Engine,
    canonical: bool = False,
    source_order: Callable[[str, int], list[int]] | None = None,
    defer_receipt: bool = False,
    timeout: float | None = None,
) -> Receipt:
    """Run `step` once at `address` and return its receipt (already saved).

    Each artifact gets its bytes digest here; its canonical digest only when the
    bytes equal `reference`'s (it is copied) and otherwise once a comparison needs
    it (`Records.ensure_canonical`), since most artifacts never differ from run 1.
    With `canonical` (run 1 of the loop) every artifact gets it at once: run 1 is
    what a recorded-run verdict names an answer by. With `defer_receipt`, the receipt
    of an execution that succeeded is returned unsaved, for a caller that is about to
    compare and prune the copy and so would write it twice (`Records.flush`). With
    `timeout`, a call still running after that many seconds is stopped, and the step
    crashed (`StepTimedOut`).
    """
    out_dir = invocation.step_dir(address, step.index, step.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = connections.context(
        threads,
        step_index=step.index,
        step_name=step.name,
        out_dir=out_dir,
        visible=visible,
        state_source=state_source,
        owners=owners,
        source_order=source_order,
    )
    # The plain data of its file the step reads, as it is now: changed by an earlier step
    # or run, it reached the step past containment (pipeline/uses.py). And the files of
    # rows its code names, by a stamp: whatever reads them, an earlier step or run that
    # rewrote one shows here (runner/opened.py).
    values, strings, reached = read_now(step.fn)
    named = files_named(strings)
    # The step's seconds are its own call, writes included; opening and closing the
    # connection is the tool's cost of isolating steps, and is counted as overhead.
    start = time.perf_counter()
    # Against files' modification times, which are the wall clock's: what the step wrote.
    began_ns = time.time_ns()
    # Not os.getcwd() here: it lets go of the GIL, and taking it back from the
    # connection helpers cost the loop a few tenths of a millisecond per execution.
    cwd = invocation.working_directory
    ended = None
    own_generators = named_generators(reached)
    drawn = generator_states(own_generators)
    # Files beside the pipeline the step opens itself (SQL kept in .sql files): part of
    # what it computes, for the verdicts to name (runner/opened.py).
    reads_beside = (
        recording(step.own.directories, invocation.root.parent)
        if step.own is not None
        else contextlib.nullcontext()
    )
    # And the environment variables its code reads (runner/environ_read.py).
    environment = (
        reading_environment(step.own.directories)
        if step.own is not None
        else contextlib.nullcontext()
    )
    # Connections of the pipeline's own that outlive the step: at the run's threads too.
    kept = step.connections_kept()
    try:
        try:
            # stdout is twicerun's: the report, or the Result with --json -. What a step
            # prints goes to stderr, where it cannot corrupt a document a script reads.
            with (
                contextlib.redirect_stdout(sys.stderr),
                ctx._kept_at_run_threads(step.uses_duckdb_module, kept, step.connect_names)
                if step.uses_duckdb_module or kept
                else contextlib.nullcontext(),
                _arrow_at(threads),
                interruptible(ctx._interrupt),
                deadline(timeout, ctx._interrupt, ctx._stop_grace),
                reads_beside as beside,
                environment as variables,
                # Innermost: only what the step's own call starts is counted.
                own_workers.counting(step.own.directories if step.own else ()) as workers,
            ):
                returned = step.call(ctx)
            ended = time.perf_counter()
            generators = left_in(drawn, generator_states(own_generators))
            # A file the step itself rewrote is its output (an export), not something
            # handed to it: only files it left as it found them count as read.
            changed = []
            if named:
                unchanged = {}
                for path, stamp in named.items():
                    if fingerprint(path) == stamp and not touched_since(path, began_ns):
                        unchanged[path] = stamp
                    else:
                        changed.append(path)
                named = unchanged
            changed += directories_changed(strings, began_ns, cwd)
            # A COPY with PARTITION_BY writes a tree under the path it names.
            changed += [
                os.path.join(path, "") if os.path.isdir(path) else path
                for path in ctx.output.copied_to
            ]
            if beside is not None:
                changed += beside.written_beside()
            wrote_into(changed)
            left = ctx._threads_left()
            threads_set_by_step = left if left is not None and left != threads else None
        finally:
            seconds = (ended if ended is not None else time.perf_counter()) - start
            connections.release(ctx)
            # A step that changed directory changed it for the whole process.
            if os.getcwd() != cwd:
                os.chdir(cwd)
    except KeyboardInterrupt:
        raise
    except BadInput as exc:
        reraise_if_requested(exc)
        if address.run > 1 and isinstance(exc, ContractError):
            raise ContractError(f"{exc} (in run {address.run})") from exc
        raise
    except (Exception, SystemExit, GeneratorExit, StepTimedOut) as exc:
        # A step that calls sys.exit() crashed: its exit status is not twicerun's.
        reraise_if_requested(exc)
        exc = printable(exc)
        where = _where(exc, step)
        stopped = timed_out()
        if stopped is not None and stopped is not exc:
            # DuckDB reports a query the timeout stopped as a query that failed.
            stopped.__cause__ = exc
            exc = stopped
        error = "".join(traceback.format_exception(exc)).rstrip()
        save_receipt(
            out_dir,
            _receipt(
                step, address, threads, seconds, ctx, connections, outcome="raised", error=error
            ),
        )
        raise StepCrashed(
            index=step.index,
            name=step.name,
            run=address.run,
            error=exc,
            where=where,
            shown=without_plan(exc),
            hint=(
                full_disk_advice()
                if disk_full(exc)
                else missing_module_advice(exc, Path(step.file) if step.file else None)
                or busy_connection_hint(exc)
                or unread_artifact_hint(
                    exc, visible, {r.name for r in ctx.output.reads}, set(ctx.output.written)
                )
                or _raised_only_later(address, reference, step, exc)
            ),
        ) from exc

    records = []
    for name, path in ctx.output.written.items():
        known = None
        if reference is not None:
            prior = reference.artifact(name)
            if prior is not None:
                known = Digests(
                    prior.bytes_digest, prior.canonical_digest, prior.rows, prior.schema
                )
        try:
            d = digests(digest_connection, path, known=known, canonical=canonical)
        except UnsupportedColumn as exc:
            raise UnsupportedColumn(
                f"artifact {name} of step {step.index} {step.name}: {exc}"
            ) from exc
        records.append(
            ArtifactRecord(
                name=name,
                file=invocation.relative(path),
                rows=d.rows,
                schema=d.schema,
                bytes_digest=d.bytes_digest,
                canonical_digest=d.canonical_digest,
            )
        )
    listed = (
        beside.listings(step.own.directory, began_ns) if beside is not None and step.own else {}
    )
    if listed and named:
        # A directory it listed and its strings name whole is watched once, as a listing.
        as_listed = {os.path.join(step.own.directory, key) for key in listed}
        named = {k: v for k, v in named.items() if os.path.abspath(k) not in as_listed}
    receipt = _receipt(
        step,
        address,
        threads,
        seconds,
        ctx,
        connections,
        outcome="ok",
        artifacts=records,
        sql_outside_ctx=ctx.output.sql_outside_ctx,
        files_in_sql=ctx.output.files_in_sql,
        files_named=named,
        files_changed=changed,
        sql_writes_outside_ctx=ctx.output.sql_writes_outside_ctx,
        sql_draws=ctx.output.sql_draws,
        row_files=ctx.output.row_files,
        attached_for_writing=ctx.output.attached_for_writing,
        reused_objects=reused(str(invocation.root), step.index, ctx.output.objects),
        threads_set_by_step=threads_set_by_step,
        workers_started=workers.record(),
        values_read=values,
        returned=None if returned is None else type(returned).__name__,
        generators=generators,
        opened=_opened(beside, step, ctx),
        files_listed=listed,
        environment=variables.recorded() if variables is not None else None,
    )
    if not defer_receipt:
        save_receipt(out_dir, receipt)
    return receipt


def _opened(beside: Recording | None, step: Step, ctx) -> dict[str, str] | None:
    """The files beside the pipeline the step opened for reading, with their digests;
    None where nothing was recorded (a step without a pipeline directory)."""
    if beside is None or step.own is None:  # one is None exactly when the other is
        return None
    named = {os.path.abspath(f.path) for source in ctx.output.sources for f in source.files}
    return beside.digests(step.own.directory, named)


def _receipt(
    step: Step, address: RunAddress, threads: int, seconds: float, ctx, engine: Engine, **ended
) -> Receipt:
    """What every receipt of an execution says, whatever it ended in, plus how it ended."""
    return Receipt(
        series=address.series,
        run=address.run,
        step_index=step.index,
        step_name=step.name,
        threads=threads,
        seconds=seconds,
        reads=ctx.output.reads,
        sources=ctx.output.sources,
        seed=step.seed_value,
        version=RECEIPT_VERSION,
        code_digest=step.code_digest,
        duckdb=duckdb.__version__,
        platform=platform_stamp(),
        modules=step.own.digests() if step.own is not None else {},
        uses=dict(step.uses),
        time_zone=session_time_zone(engine.name),
        **ended,
    )


# What DuckDB and Spark say of a name that is not in a step's catalog. When the name is
# not a table, DuckDB looks for a Python object of that name where the query was run, and
# the pipeline's module usually holds one: the step that wrote the artifact, when step and
# artifact share a name, which is how most pipelines name them.
_MISSING_TABLE = (
    re.compile(r"Table with name (\S+) does not exist"),
    re.compile(r'Python Object "([^"]+)" of type "[^"]*" found on line .* not suitable for'),
    re.compile(r"\[TABLE_OR_VIEW_NOT_FOUND\] The table or view `([^`]+)` cannot be found"),
)


def unread_artifact_hint(
    exc: BaseException,
    visible: Mapping[str, ArtifactRef],
    read: set[str],
    written: set[str] = frozenset(),
) -> str:
    """What to do when a step's SQL names an artifact it never read: the engine only says
    the table does not exist, since nothing is in a step's catalog until ctx.read. Nor is
    what the step itself wrote: a step writing a batch and then its row count from it in
    SQL met the same bare error."""
    found = next((m for p in _MISSING_TABLE if (m := p.search(str(exc)))), None)
    if found is None:
        return ""
    missing = found.group(1).strip('"').lower()  # both engines' names are case-insensitive
    own = next((n for n in written if n.lower() == missing), None)
    if own is not None:
        return (
            f"{own} is what this step wrote with ctx.write, which writes a file and makes no "
            f"view of it here; to query those rows again in this step, name them first "
            f'(rel = ctx.sql(...); ctx.write("{own}", rel); rel.create_view("{own}_rows")), '
            f"or read {own} in a later step"
        )
    name = next((n for n in visible if n.lower() == missing and n not in read), None)
    if name is None:
        return ""
    ref = visible[name]
    return (
        f"{name} is an artifact of step {ref.step_index} {ref.step_name}; call "
        f'ctx.read("{name}") in this step before its SQL uses it'
    )


# DuckDB's refusals of a call on a connection that is in use (from 2.0 on; earlier
# versions waited): another call still running, or a result whose rows are still being
# read. ctx's calls and the relations they hand out wait their turn (storage/relations.py),
# so what is left is a read that streams. DuckDB's own advice, cursor(), is not in ctx.
_IN_USE = ("connection is busy with another call", "connection has an open result")


def busy_connection_hint(exc: BaseException) -> str:
    """What to do when a ctx call finds the step's one connection still in use."""
    if not any(said in str(exc) for said in _IN_USE):
        return ""
    return (
        "every ctx call runs on the step's one DuckDB connection (the cursor() DuckDB "
        "suggests is not part of ctx); ctx's calls and the relations they return wait their "
        "turn on it, but a read that streams (an Arrow reader, iter_rows) holds it until it "
        "is read to the end: read it to the end, or fetch the rows whole (fetchall(), "
        "to_arrow_table()), before the next call"
    )


def without_plan(exc: BaseException) -> str:
    """Spark's message up to the query plan it appends to an analysis error, or "" where
    there is none. The plan names twicerun's own columns (how an artifact is read into
    partitions), runs to dozens of lines, and stays whole in the receipt's error."""
    if not (type(exc).__module__ or "").startswith("pyspark"):
        return ""
    lines = str(exc).split("\n")
    for i in range(1, len(lines) - 1):
        if lines[i - 1].rstrip().endswith(";") and lines[i + 1].lstrip().startswith(("+- ", ":- ")):
            kept = "\n".join(lines[:i]).rstrip()
            return f"{kept} (Spark's plan of the query is in the step's receipt.json)"
    return ""


def printable(exc: BaseException) -> BaseException:
    """`exc`, with a message that can be shown even where its own `__str__` raises.

    Everything that reports a step's error reads `str()` of it, and an exception class
    whose `__str__` fails (an attribute its `__init__` never set) took twicerun down
    with a traceback of its own, exit 1. Its class becomes a subclass of the same name
    whose message says so; its type, its traceback and its cause are kept."""
    try:
        str(exc)
        return exc
    except Exception as failed:
        said = f"(its message could not be shown: str() raised {type(failed).__name__})"
    kind = type(exc)
    shown = type(
        kind.__name__,
        (kind,),
        {
            "__str__": lambda self: said,
            "__module__": kind.__module__,
            "__qualname__": kind.__qualname__,
        },
    )
    with contextlib.suppress(TypeError):
        exc.__class__ = shown
        return exc
    stand_in = RuntimeError(f"{kind.__name__} {said}")
    stand_in.__traceback__ = exc.__traceback__
    stand_in.__cause__ = exc.__cause__
    return stand_in


def _where(exc: BaseException, step: Step) -> str:
    """The deepest line of the pipeline's own file in the traceback, as file:line."""
    if not step.file:
        return ""
    line = line_in(exc, step.file)
    if line is None:
        return ""
    try:
        shown = Path(step.file).resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        shown = Path(step.file)
    return f"{shown}:{line}"
