"""A recorded run: one run of one invocation, as its receipts describe it.

Named on the command line as an invocation directory (its run 1), `DIR#k` or
`DIR/loop/k` (run k of it), or a run directory (the newest completed invocation
in it). Paths in receipts are relative to the invocation, so a directory copied
to another machine reads the same there.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb

from twicerun.compare.digest import canonical_digest
from twicerun.errors import UsageError
from twicerun.storage.layout import (
    COMPLETED,
    FAILED,
    INTERRUPTED,
    KILLED,
    LOOP,
    MANIFEST_NAME,
    RUNNING,
    Invocation,
    RunAddress,
    a_file_given_for_a_run,
    follow,
    invocations_with,
)
from twicerun.storage.receipts import RECEIPT_NAME, RECEIPT_VERSION, Receipt, load_receipt
from twicerun.storage.retention import REMOVED_BY_KEEP, removed_since

_STEP_DIR = re.compile(r"(\d+)-(.*)\Z")


@dataclass(frozen=True)
class Output:
    """One artifact a step wrote, named by its rows; `why` says why it cannot be."""

    name: str
    canonical: str = ""
    path: Path | None = None
    why: str = ""
    # Where its rows are gone: another run of the same invocation that kept a copy of this
    # artifact (--keep-copies keeps the latest that differed), as (its number, `DIR#k`).
    kept_by: tuple[int, str] | None = None
    # The run it is from, named as a command line would name it.
    run: str = ""


# The manifest fields a verdict reads, with the JSON types twicerun writes them as.
_MANIFEST_FIELDS = (
    ("threads", int, "a whole number"),
    ("seeds", dict, "an object of step names and seeds"),
    ("engine", str, "a string"),
    ("spark", str, "a string"),
    ("twicerun", str, "a string"),
    ("pipeline", str, "a string"),
    ("pipeline_resolved", str, "a string"),
)


@dataclass(frozen=True)
class RecordedStep:
    """One step of a recorded run: its receipt, or why there is none to read."""

    index: int
    name: str
    receipt: Receipt | None
    why: str = ""
    outputs: list[Output] = field(default_factory=list)
    # The twicerun that recorded it, from the run's manifest ("" when it does not say):
    # how artifacts are stored is part of the instrument (0.2.0 began storing HUGEINT
    # exactly, as DECIMAL(38,0), where 0.1.0 left DuckDB's DOUBLE).
    recorded_by: str = ""
    # What ran the step, from the manifest: "duckdb", or Spark with its version ("spark 4.0.0");
    # "" when the manifest does not say. The engine is the instrument before anything else.
    engine: str = ""

    @property
    def checkable(self) -> bool:
        return self.receipt is not None and not self.why and all(o.canonical for o in self.outputs)

    def problem(self) -> str:
        """Why this step cannot be evaluated, or "" when it can."""
        if self.why:
            return self.why
        missing = [o for o in self.outputs if not o.canonical]
        return "; ".join(f"{o.name}: {o.why}" for o in missing)


@dataclass(frozen=True)
class RecordedRun:
    invocation: Invocation
    address: RunAddress
    label: str

    @classmethod
    def parse(cls, text: str) -> RecordedRun:
        """`DIR`, `DIR#k`, `DIR/loop/k`, or a run directory holding invocations."""
        where, _, run = text.partition("#")
        path = Path(where)
        if not run:
            run_number = 1
        elif run.isdigit() and int(run) >= 1:
            run_number = int(run)
        else:
            raise UsageError(f"{text}: after '#' comes a run number (1, 2, ...), not {run!r}")
        inside = _enclosing_invocation(path)
        if inside is not None:
            # A directory inside an invocation: its loop's run k as the files show it
            # (INV/loop/k) is that run; anything else is named back in the form to give.
            root, parts = inside
            if len(parts) == 2 and parts[0] == LOOP and parts[1].isdigit() and int(parts[1]) >= 1:
                if run and int(run) != int(parts[1]):
                    raise UsageError(
                        f"{text} names run {parts[1]} by its directory and run {run} after '#'; "
                        f"give one of {root}#{int(parts[1])} or {root}#{run}"
                    )
                path, run_number = root, int(parts[1])
            elif len(parts) > 2 and parts[0] == LOOP and parts[1].isdigit():
                raise UsageError(
                    f"{where} is a step of run {parts[1]}; a run is compared whole, so give "
                    f"{root}#{parts[1]}"
                )
            else:
                raise UsageError(
                    f"{where} is inside the invocation {root}, not a run of it; give {root} "
                    f"for its run 1, or {root}#k for run k (its runs are "
                    f"{', '.join(_runs(Invocation(root))) or 'none'})"
                )
        if (path / MANIFEST_NAME).is_file():
            invocation = Invocation(path)
        elif path.is_dir():
            completed = invocations_with(path, COMPLETED)
            if not completed:
                raise UsageError(
                    f"{where} is neither an invocation directory nor a run directory holding a "
                    f"completed one; give the directory `twicerun run` printed"
                )
            invocation = completed[-1][0]
        else:
            # The name alone, as `ls .twicerun` shows it, is the likeliest slip.
            beside = Path(".twicerun") / where
            if not path.is_absolute() and (beside / MANIFEST_NAME).is_file():
                raise UsageError(
                    f"{where} does not exist here; the invocation of that name is "
                    f"{beside}, so give {beside}{'#' + run if run else ''}"
                )
            if removed_since(path) or (
                not path.is_absolute() and path.parent == Path() and removed_since(beside)
            ):
                raise UsageError(f"{where} does not exist: {REMOVED_BY_KEEP}")
            if path.exists():
                raise UsageError(a_file_given_for_a_run(path, "a recorded invocation"))
            raise UsageError(f"{where} does not exist; give a recorded invocation directory")
        address = RunAddress(LOOP, run_number)
        if not (invocation.root / address.series / str(run_number)).is_dir():
            raise UsageError(
                f"{invocation.root} has no run {run_number}; its runs are "
                f"{', '.join(_runs(invocation)) or 'none'}"
            )
        return cls(invocation=invocation, address=address, label=text)

    def manifest(self) -> dict:
        """The invocation's manifest, {} when it cannot be read; a field a verdict reads that
        holds the wrong type is refused, naming it, rather than trusted."""
        try:
            manifest = self.invocation.manifest()
        except (OSError, ValueError):
            return {}
        if not isinstance(manifest, dict):
            return {}
        for key, kinds, what in _MANIFEST_FIELDS:
            value = manifest.get(key)
            if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
                raise UsageError(
                    f"{self.invocation.manifest_path}: {key} should be {what}, not "
                    f"{json.dumps(value)[:40]}; twicerun wrote this record of the invocation, "
                    f"so it was edited since: run the pipeline again to record it anew"
                )
        return manifest

    def stopped(self) -> str:
        """Why this run may hold fewer steps than its pipeline has: its invocation did not
        complete ("its invocation failed: step 0 load raised in run 1 ..."); '' when it did.
        A run that stopped is cut short, not a pipeline with other steps."""
        manifest = self.manifest()
        outcome = manifest.get("outcome")
        if not isinstance(outcome, str) or outcome == COMPLETED:
            return ""
        error = manifest.get("error")
        first = error.strip().splitlines()[0] if isinstance(error, str) and error.strip() else ""
        said = {
            FAILED: "failed",
            INTERRUPTED: "was interrupted",
            KILLED: "was killed",
            RUNNING: "is still running, or was stopped without a word",
        }.get(outcome, f"ended {outcome}")
        return f"its invocation {said}" + (f": {first}" if first else "")

    def steps(self, con: duckdb.DuckDBPyConnection) -> list[RecordedStep]:
        """Every step of this run in chain order, each output named by its canonical digest
        (computed from the file where the receipt left it out)."""
        run = self.invocation.root / self.address.series / str(self.address.run)
        found = []
        manifest = self.manifest()
        by = str(manifest.get("twicerun") or "")
        engine = str(manifest.get("engine") or "")
        if engine == "spark" and manifest.get("spark"):
            engine = f"spark {manifest['spark']}"
        for directory in sorted(p for p in run.iterdir() if p.is_dir()):
            match = _STEP_DIR.match(directory.name)
            if match is None:
                continue
            index = int(match.group(1))
            try:
                receipt = load_receipt(directory)
            except (OSError, ValueError, TypeError, KeyError) as exc:
                found.append(
                    RecordedStep(
                        index, match.group(2), None, f"its {RECEIPT_NAME} cannot be read ({exc})"
                    )
                )
                continue
            if receipt is None:
                found.append(RecordedStep(index, match.group(2), None, f"it has no {RECEIPT_NAME}"))
                continue
            if receipt.version > RECEIPT_VERSION:
                why = (
                    f"its receipt is version {receipt.version}, and this twicerun reads up to "
                    f"{RECEIPT_VERSION}"
                )
                found.append(RecordedStep(index, receipt.step_name, receipt, why))
                continue
            if receipt.outcome != "ok":
                found.append(
                    RecordedStep(index, receipt.step_name, receipt, "it raised in this run")
                )
                continue
            outputs = [self.output(con, index, a.name) for a in receipt.artifacts]
            found.append(RecordedStep(index, receipt.step_name, receipt, "", outputs))
        return [replace(step, recorded_by=by, engine=engine) for step in found]

    def named(self, run: int) -> str:
        """Run `run` of this invocation as `diff` takes it: DIR for run 1, DIR#k otherwise."""
        shown = os.path.relpath(self.invocation.root)
        where = str(self.invocation.root) if shown.startswith("..") else shown
        return where if run == 1 else f"{where}#{run}"

    def _kept_copy(self, index: int, name: str) -> tuple[int, str] | None:
        """The latest loop run other than this one whose copy of the artifact is on disk."""
        for k in sorted((int(r) for r in _runs(self.invocation)), reverse=True):
            address = RunAddress(LOOP, k)
            if k == 1 or address == self.address:
                continue  # run 1 keeps everything: a copy there is no copy of this run's kind
            receipt = self.invocation.receipt_at(address, index)
            record = receipt.artifact(name) if receipt else None
            if (
                record is not None
                and record.kept
                and self.invocation.absolute(record.file).is_file()
            ):
                return k, self.named(k)
        return None

    def output(self, con: duckdb.DuckDBPyConnection, index: int, name: str) -> Output:
        located = follow(self.invocation.receipt_at, self.address, index, name)
        if located is None:
            return Output(name, why="its receipt does not list it")
        _, _, record = located
        path = self.invocation.absolute(record.file) if record.kept else None
        if path is not None and not path.is_file():
            return Output(name, record.canonical_digest, None, f"{record.file} is gone")
        if record.canonical_digest:
            return Output(
                name,
                record.canonical_digest,
                path,
                kept_by=self._kept_copy(index, name) if path is None else None,
                run=self.named(self.address.run),
            )
        if path is None:
            return Output(name, why="its copy was deleted after it was compared, unnamed")
        try:
            digest, _, _ = canonical_digest(con, path)
        except (duckdb.Error, OSError) as exc:
            return Output(name, why=f"{record.file} cannot be read ({type(exc).__name__})")
        return Output(name, digest, path, run=self.named(self.address.run))


def two_runs(a: str, b: str) -> tuple[RecordedRun, RecordedRun]:
    """A and B as `diff` and `localize` compare them: two runs, not one run named twice
    (the same directory, or a run directory and its newest invocation), which would
    always come out `identical` and say nothing."""
    left, right = RecordedRun.parse(a), RecordedRun.parse(b)
    if (left.invocation.root.resolve(), left.address) == (
        right.invocation.root.resolve(),
        right.address,
    ):
        root, run = left.invocation.root, left.address.run
        named = f"{a} is given twice" if a == b else f"{a} and {b} are both run {run} of {root}"
        raise UsageError(
            f"{named}, and a run always matches itself; give another run (another "
            f"invocation, or {root}#k for its run k), or `twicerun localize {root}` to find "
            f"where its own runs disagreed"
        )
    return left, right


def _enclosing_invocation(path: Path) -> tuple[Path, tuple[str, ...]] | None:
    """The invocation directory `path` lies inside (not `path` itself), with the parts
    below it, whether or not `path` exists (INV/loop/9 is a run that INV lacks); None when
    no directory above it within a few levels is one."""
    if (path / MANIFEST_NAME).is_file():
        return None
    resolved = path.resolve()
    # A run's step directories sit three levels down (INV/loop/k/NN-step); no deeper.
    for depth, parent in enumerate(resolved.parents[:4], start=1):
        if (parent / MANIFEST_NAME).is_file():
            # Named as the user would (relative where it lies below here), but resolved,
            # so that a symlink on the way cannot make `..` land somewhere else.
            shown = os.path.relpath(parent)
            return (parent if shown.startswith("..") else Path(shown)), resolved.parts[-depth:]
    return None


def _runs(invocation: Invocation) -> list[str]:
    series = invocation.root / LOOP
    if not series.is_dir():
        return []
    return sorted((p.name for p in series.iterdir() if p.name.isdigit()), key=int)
