"""`reproduce`: does a step, re-executed now from its recorded inputs, give its record?

A different question from the ladder's: not "do two recorded runs agree" but
"does this step's code, run again, produce what its receipt says it produced".
A step whose code or DuckDB changed since, or whose inputs are gone, is COULD
NOT CHECK: re-executing it would answer a question about other code.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from twicerun.display import differ_too, few, ljust, unseeded_draw, widest
from twicerun.storage.connections import same_time_zone
from twicerun.storage.fingerprints import fingerprint
from twicerun.storage.receipts import RECEIPT_VERSION, Receipt, value_digest
from twicerun.verdicts.explain import AGAINST_RECORD, explain
from twicerun.verdicts.recorded import Output
from twicerun.vocabulary.ladder import Replay


@dataclass(frozen=True)
class Replayed:
    index: int
    name: str
    verdict: Replay
    detail: str = ""
    seconds: float | None = None
    # A query of the re-execution that drew at random with nothing in the step seeding it.
    draws: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "verdict": str(self.verdict),
            "detail": self.detail,
            "seconds": self.seconds,
            "draws_in_sql": self.draws or None,
        }


@dataclass(frozen=True)
class ReproduceReport:
    run: str
    steps: list[Replayed] = field(default_factory=list)
    schema: str = "twicerun.reproduce/1"
    # What differs in how the record and the re-execution were produced, beside the
    # verdicts and never one of them (as in the ladder's reports).
    instrument: list[str] = field(default_factory=list)

    @property
    def worst(self) -> Replay:
        verdicts = {s.verdict for s in self.steps}
        if Replay.DIVERGED in verdicts:
            return Replay.DIVERGED
        if Replay.COULD_NOT_CHECK in verdicts:
            return Replay.COULD_NOT_CHECK
        return Replay.REPRODUCED

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "run": self.run,
            "result": str(self.worst),
            "instrument": self.instrument,
            "steps": [s.to_dict() for s in self.steps],
        }

    def lines(self) -> list[str]:
        width = widest(s.name for s in self.steps)
        out = [f"re-executed from {self.run}'s recorded inputs, against its receipts:"]
        if self.instrument:
            out.append(f"  produced differently: {'; '.join(self.instrument)}")
        for s in self.steps:
            took = f" ({s.seconds:.2f}s)" if s.seconds is not None else ""
            out.append(f"  {s.index:>2} {ljust(s.name, width)}  {s.verdict}{took}")
            if s.detail:
                out.append(f"       {s.detail}")
            if s.draws and s.verdict is Replay.DIVERGED:
                out.append(f"       {unseeded_draw(s.draws)}")
        return out


def twicerun_change(recorded_by: str, now: str) -> list[str]:
    """The twicerun that recorded a run, named when it is not this one: how artifacts are
    stored is part of the instrument (see RecordedStep.recorded_by)."""
    if recorded_by and recorded_by != now:
        return [f"twicerun ({recorded_by} when recorded, {now} now)"]
    return []


def _differ(recorded: dict[str, str], now: Callable[[str], str | None]) -> list[str]:
    """The names whose digest now is not the recorded one."""
    return [name for name, digest in sorted(recorded.items()) if now(name) != digest]


def _changed_since(names: list[str], which: str) -> str:
    return (
        f"{few(names)}, {which}, {'has' if len(names) == 1 else 'have'} changed since it "
        f"was recorded"
    )


def _where(opened: list[str]) -> str:
    """Where files a step opened were: a file outside the pipeline's directory (one an
    earlier step wrote in /tmp, say) is recorded by its absolute path."""
    return "past ctx" if any(os.path.isabs(rel) for rel in opened) else "beside the pipeline"


def _reached_changed(
    receipt: Receipt,
    directory: Path | None,
    modules_now: dict[str, str] | None,
    uses_now: dict[str, str] | None,
) -> str:
    """What the step reached beyond its own code that is not as recorded, named: the modules
    beside the pipeline, what it uses from its file, files it read beside it, and the
    environment variables it read (the receipt's REACHED fields), or ""."""

    def on_disk(rel: str) -> str | None:
        path = directory / rel
        return _sha256(path) if path.is_file() else None

    if directory is not None:
        if receipt.modules is None and modules_now:
            return (
                f"its receipt records no digest of {', '.join(sorted(modules_now))}, which the "
                f"pipeline imports from its directory (written by an older twicerun)"
            )
        changed = _differ(receipt.modules or {}, on_disk)
        if changed:
            return _changed_since(changed, "which the pipeline imports from its directory")
    # After the modules beside it: a value imported from helpers.py is named there first.
    if uses_now is not None:
        if receipt.uses is None:
            if uses_now:
                return (
                    f"its receipt records no digest of {few(sorted(uses_now))}, which it "
                    f"uses from the pipeline file (written by an older twicerun)"
                )
        else:
            added = [name for name in sorted(uses_now) if name not in receipt.uses]
            changed = sorted(_differ(receipt.uses, uses_now.get) + added)
            if changed:
                return _changed_since(changed, "which it uses from the pipeline file")
    if directory is not None and receipt.opened:
        gone = [rel for rel in sorted(receipt.opened) if on_disk(rel) is None]
        if gone:
            return (
                f"{few(gone)}, which it read {_where(gone)} when it was recorded, "
                f"{'is' if len(gone) == 1 else 'are'} gone"
            )
        changed = _differ(receipt.opened, on_disk)
        if changed:
            return _changed_since(changed, f"which it read {_where(changed)}")
    # Files of rows read past ctx, as named (relative to the working directory, which the
    # step re-executed here reads them against): a side file rewritten since, whatever
    # wrote it, made the step DIVERGED, as if it had stopped repeating itself.
    sourced = {os.path.abspath(f.path) for s in receipt.sources for f in s.files}
    past = {
        path: stamp
        for path, stamp in {**receipt.files_in_sql, **receipt.files_named}.items()
        if os.path.abspath(path) not in sourced
    }
    changed = [path for path, stamp in sorted(past.items()) if (fingerprint(path) or "") != stamp]
    if changed:
        return _changed_since(changed, "which it read past ctx")
    if receipt.environment:
        other = _differ(receipt.environment, lambda name: value_digest(os.environ.get(name)))
        if len(other) == 1:
            (name,) = other
            how = (
                "is unset now"
                if name not in os.environ
                else "is set now, and was unset when it was recorded"
                if receipt.environment[name] == ""
                else "has another value now"
            )
            return f"{name}, which it read from the environment, {how}"
        if other:
            return (
                f"{few(other)}, which it read from the environment, differ now (set, unset "
                f"or given other values since it was recorded)"
            )
    return ""


def cannot_check(
    receipt: Receipt | None,
    code_digest: str,
    duckdb_version: str,
    directory: Path | None = None,
    modules_now: dict[str, str] | None = None,
    time_zone_now: str | None = None,
    uses_now: dict[str, str] | None = None,
) -> str:
    """Why re-executing this step would not test its record, or "".

    `directory` is the pipeline's, and `modules_now` what it imports from there at its
    top level now: a helper beside the pipeline that changed is the step's code changing.
    `uses_now` is what the step uses from its own file now (pipeline/uses.py): a constant
    or a function of the file that changed is too."""
    if receipt is None:
        return "no receipt to check against"
    if receipt.version > RECEIPT_VERSION:
        return (
            f"its receipt is version {receipt.version}; this twicerun reads up to {RECEIPT_VERSION}"
        )
    if receipt.outcome != "ok":
        return "it raised when it was recorded"
    if not receipt.code_digest and not code_digest:
        return "twicerun cannot read this step's code, so it cannot tell whether it changed"
    if not receipt.code_digest:
        return "its receipt records no code digest (written by an older twicerun)"
    if receipt.code_digest != code_digest:
        return "its code changed since it was recorded"
    reached = _reached_changed(receipt, directory, modules_now, uses_now)
    if reached:
        return reached
    if not receipt.duckdb:
        return "its receipt records no DuckDB version (written by an older twicerun)"
    if receipt.duckdb != duckdb_version:
        return f"it was recorded with DuckDB {receipt.duckdb}; this is {duckdb_version}"
    if receipt.time_zone and time_zone_now and not same_time_zone(receipt.time_zone, time_zone_now):
        # A TIMESTAMPTZ cast to a date or text lands elsewhere in another zone: the step
        # would differ without having changed.
        return (
            f"it was recorded in the time zone {receipt.time_zone}; this session's is "
            f"{time_zone_now} (set TZ={receipt.time_zone} to check it)"
        )
    for source in receipt.sources:
        for f in source.files:
            if not Path(f.path).is_file():
                return f"its source {source.name} file {f.path} is gone"
            if Path(f.path).stat().st_size != f.size or _sha256(Path(f.path)) != f.digest:
                return f"its source {source.name} file {f.path} changed since it was recorded"
    return ""


def _sha256(path: Path) -> str:
    import hashlib

    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def compare_fresh(
    con: duckdb.DuckDBPyConnection,
    recorded: list[Output],
    fresh: dict[str, tuple[str, Path]],
) -> tuple[Replay, str]:
    """The verdict for one re-execution: its outputs (canonical digest, file) against the
    record's. A recorded output that cannot be named makes it COULD NOT CHECK."""
    unnamed = [o for o in recorded if not o.canonical]
    if unnamed:
        return Replay.COULD_NOT_CHECK, "; ".join(f"{o.name}: {o.why}" for o in unnamed)
    names = {o.name for o in recorded}
    if names != set(fresh):
        only = sorted(names ^ set(fresh))
        return Replay.DIVERGED, f"it wrote another set of artifacts ({', '.join(only)})"
    moved = [o for o in recorded if fresh[o.name][0] != o.canonical]
    if not moved:
        return Replay.REPRODUCED, ""
    # The oracle explains the first; the others are named from their digests, as diff does.
    first, *others = moved
    _, sentence = explain(con, first.name, first.path, fresh[first.name][1], AGAINST_RECORD)
    if others:
        sentence += f"; {differ_too([o.name for o in others])}"
    return Replay.DIVERGED, sentence
