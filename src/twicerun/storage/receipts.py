"""What one execution of one step left behind: its receipt.

A receipt is written once the step's artifacts are on disk and their digests
are known. It is what a later command reads instead of re-reading rows: the
artifact names, row counts and schemas, both digests, what the step read and
from which run, how long it took and how it ended.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from twicerun.storage.atomic import read_json, write_json_atomic
from twicerun.typed import typed

RECEIPT_NAME = "receipt.json"
# 2: the step's code digest, the instrument (DuckDB, platform), canonical digests of
# what it read, and of what it wrote in run 1. A version-1 receipt has none of them;
# a verdict that needs one says COULD NOT CHECK rather than passing.
RECEIPT_VERSION = 2


@dataclass(frozen=True)
class ArtifactRecord:
    """One artifact a step wrote, with both digests.

    `file` is relative to the invocation directory. When `kept` is false the
    file was removed because its canonical digest equals run 1's, and any
    reader of it is sent to `same_as` (run 1's copy) instead.
    """

    name: str
    file: str
    rows: int
    schema: list[list[str]]
    bytes_digest: str
    canonical_digest: str
    kept: bool = True
    same_as: str | None = None


@dataclass(frozen=True)
class ReadRecord:
    """One artifact a step read: by `ctx.read`, or as its own earlier state by `ctx.state`."""

    name: str
    via: str
    run: str | None
    step_index: int | None
    rows: int
    # The rows it read, named; "" where the source's had not been computed.
    canonical_digest: str = ""


@dataclass(frozen=True)
class SourceFile:
    """One file a step read through ctx.source: its path as given, size and bytes digest."""

    path: str
    size: int
    digest: str


@dataclass(frozen=True)
class SourceRecord:
    """A list of files from outside the pipeline, exposed to a step as one view.

    `files` is in the order the step gave them; `order` is the order they were
    read in (a permutation of their positions), which differs only when the
    file-order amplifier re-ran the step.
    """

    name: str
    reader: str
    files: list[SourceFile]
    rows: int
    options: dict[str, Any] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)
    # The view's columns: which columns of a step's output came in with its inputs, for
    # attribution (empty in receipts written before 0.6.2).
    columns: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Receipt:
    series: str
    run: int
    step_index: int
    step_name: str
    threads: int
    seconds: float
    outcome: str
    artifacts: list[ArtifactRecord] = field(default_factory=list)
    reads: list[ReadRecord] = field(default_factory=list)
    error: str | None = None
    seed: int | None = None
    sql_outside_ctx: list[str] = field(default_factory=list)
    # Receipt version 1 lacks everything below; see RECEIPT_VERSION.
    version: int = 1
    code_digest: str = ""
    duckdb: str = ""
    platform: str = ""
    sources: list[SourceRecord] = field(default_factory=list)
    # The thread count the step left its connection at, when a SET inside it changed
    # `threads`: the count the execution mostly ran at, whatever `threads` above says.
    threads_set_by_step: int | None = None
    # The modules the pipeline imported from its own directory, by file relative to it, with
    # the SHA-256 each had: code the step may call, beside its own. None: not recorded (a
    # receipt from before twicerun recorded them); {}: the pipeline imported none.
    modules: dict[str, str] | None = None
    # What the step uses from its pipeline file besides its own source (constants, the
    # file's functions and classes, its closure's values), by name, with the SHA-256 of
    # each: None when not recorded (an older twicerun); {}: it uses none.
    uses: dict[str, str] | None = None
    # Files beside the pipeline the step opened for reading while it ran, outside ctx (SQL
    # kept in .sql files), by path relative to the pipeline's directory, with the SHA-256
    # each had: None when not recorded (an older twicerun, or a failed execution).
    opened: dict[str, str] | None = None
    # Environment variables the step's own code read while it ran, by name, with the
    # SHA-256 of each value ("" where unset; never the value, which may be a secret):
    # None when not recorded (an older twicerun, a failed execution, or a step that read
    # so many it copied the environment).
    environment: dict[str, str] | None = None
    # The time zone the step's session started in (DuckDB's TimeZone, the machine's; on
    # Spark the session's, which twicerun sets): None when not recorded (an older twicerun).
    time_zone: str | None = None
    # A digest of the state the step left Python's global random generator (and numpy's,
    # where loaded) in, when it changed it; None when it drew nothing from them, or was not
    # recorded (an older twicerun). Runs that leave different states drew unseeded.
    generators: str | None = None
    # Statements that wrote a file past ctx.write (COPY ... TO, EXPORT DATABASE), which
    # nothing compares; empty when there were none or it was not recorded (an older twicerun).
    sql_writes_outside_ctx: list[str] = field(default_factory=list)
    # Queries that drew at random with nothing in the step seeding the draw (random()
    # before any setseed(), a uuid function, a sample without a seed), as run: empty when
    # there were none, or it was not recorded (an older twicerun).
    sql_draws: list[str] = field(default_factory=list)
    # What in the plan of an artifact it wrote gave each row the file it was read from
    # (Spark's input_file_name(), _metadata): empty when nothing did, or it was not
    # recorded (DuckDB, whose filename column is a column of the rows; Spark Connect; an
    # older twicerun).
    row_files: list[str] = field(default_factory=list)
    # Database files the step attached without READ_ONLY, which outlive it and the
    # invocation; empty when there were none or it was not recorded (an older twicerun).
    attached_for_writing: list[str] = field(default_factory=list)
    # Artifacts written from the very object (a pyarrow Table, a DataFrame) an earlier
    # execution of the step in this invocation wrote: kept from before, not computed now.
    reused_objects: list[str] = field(default_factory=list)
    # Threads and processes the step started itself, which no thread count twicerun sets
    # reaches: "threads at file:line" (where they were started from) -> how many. Empty
    # when it started none, or it was not recorded (an older twicerun).
    workers_started: dict[str, int] = field(default_factory=dict)
    # The plain data of its own file the step's code reads (a module dict, a list), each
    # by name with the SHA-256 of its value as the execution began: None when not
    # recorded (an older twicerun), which `diff` must not take for "read none".
    values_read: dict[str, str] | None = None
    # Files its SQL named by a quoted path and read past ctx, each by its fingerprint when
    # the query began (storage/fingerprints.py: "sha256:<hex>" of its bytes, or
    # "inode:size:mtime_ns" for a large file; "" when absent): empty when none, or not
    # recorded (an older twicerun).
    files_in_sql: dict[str, str] = field(default_factory=dict)
    # Files of rows the strings of its code name (a path pyarrow or pandas reads), each by
    # its fingerprint as the execution began, where it existed then: empty when none, or
    # not recorded (an older twicerun).
    files_named: dict[str, str] = field(default_factory=dict)
    # Of the files its code names (files_named), those it changed while it ran, past
    # ctx.write (an export, a database it inserted into), as named: empty when none, or
    # not recorded (an older twicerun). A step that reads one of them is told which.
    files_changed: list[str] = field(default_factory=list)
    # Directories beside the pipeline it listed while it ran (os.listdir, glob), as
    # "dir/*", each by a fingerprint of the files of rows in it: empty when none, or not
    # recorded (an older twicerun).
    files_listed: dict[str, str] = field(default_factory=dict)
    # The type of what the step's function returned, which twicerun ignores; None when it
    # returned None, or it was not recorded (an older twicerun).
    returned: str | None = None

    @property
    def rows_read(self) -> int:
        return sum(r.rows for r in self.reads) + sum(s.rows for s in self.sources)

    def artifact(self, name: str) -> ArtifactRecord | None:
        for a in self.artifacts:
            if a.name == name:
                return a
        return None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rows_read"] = self.rows_read
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Receipt:
        """Every value checked against its field's type (TypeError or ValueError naming it,
        which a verdict reports as a receipt it cannot read); fields a newer twicerun added
        are dropped (its `version` says so to a reader)."""
        return typed(cls, d)


def save_receipt(step_dir: Path, receipt: Receipt) -> None:
    # Atomic but not fsynced: one per step per run, and a power cut costs a rerun.
    # Compact: written once or twice per step execution and read back by twicerun.
    write_json_atomic(Path(step_dir) / RECEIPT_NAME, receipt.to_dict(), fsync=False, compact=True)


def load_receipt(step_dir: Path) -> Receipt | None:
    path = Path(step_dir) / RECEIPT_NAME
    if not path.exists():
        return None
    return Receipt.from_dict(read_json(path))


def value_digest(value: str | None) -> str:
    """What a receipt records of an environment variable: "" where it is not set, the
    SHA-256 of its value otherwise (never the value, which may be a secret)."""
    if value is None:
        return ""
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()
