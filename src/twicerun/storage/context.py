"""The `ctx` a step receives: reads, state, writes and SQL on a fresh DuckDB connection.

The context knows nothing about runs or containment. Whoever builds it hands
it the artifacts this execution may see (`visible`), where its own earlier
state comes from (`state_source`), and the names other steps own; the loop,
the bisect and the amplifiers differ only in what they hand over.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from twicerun import sql
from twicerun.errors import ContractError, UnknownArtifact
from twicerun.storage.atomic import atomic_path
from twicerun.storage.error_lines import as_written, line_offset
from twicerun.storage.exact_integers import exact_casts, projection, too_wide
from twicerun.storage.fingerprints import fingerprint
from twicerun.storage.receipts import ReadRecord, SourceRecord
from twicerun.storage.relations import handed_out
from twicerun.storage.source_files import (
    SOURCE_COPY,
    SOURCE_ROWS,
    checked_files,
    duckdb_glob,
    file_record,
    reader_of,
    reader_options,
    source_query,
)

# Statement types whose result is rows; everything else is a statement and returns None.
_ROW_STATEMENTS = {"SELECT", "EXPLAIN", "PRAGMA", "CALL"}
# A change that hands back rows (INSERT ... RETURNING), which con.sql returns as a relation.
_CHANGES = {"INSERT", "UPDATE", "DELETE"}
_RETURNING = re.compile(r"\breturning\b", re.IGNORECASE)
_PIVOT = re.compile(r"\bpivot\b", re.IGNORECASE)
# SET threads, PRAGMA threads, SET GLOBAL threads, RESET threads: any of them.
_THREADS = re.compile(r"\bthreads\b", re.IGNORECASE)
# Where COPY ... TO (and EXPORT DATABASE ... TO) names the file it writes.
_TARGET_FILE = re.compile(r"\bto\s+'((?:[^']|'')*)'", re.IGNORECASE)
_QUOTED = re.compile(r"'((?:[^']|'')*)'")
# Ways a query can pull rows in behind ctx.read's back.
# A quoted path of a file of rows in a query, which DuckDB reads as a table.
# A quoted path to a file of rows, or a glob of them, as DuckDB reads one.
_FILE_LITERAL = re.compile(
    r"'((?:[^']|'')*\.(?:parquet|csv|tsv|json|ndjson|jsonl|duckdb|db|sqlite|sqlite3)(?:\.gz|\.zst)?)'",
    re.IGNORECASE,
)
_OUTSIDE_READ = re.compile(
    r"\b(read_parquet|read_csv\w*|read_json\w*|parquet_scan|read_ndjson\w*|read_text|"
    r"read_blob|sqlite_scan|postgres_scan|attach|import\s+database)\b|"
    r"'[^']*\.(parquet|csv|json|ndjson)'",
    re.IGNORECASE,
)
# The first argument of a function that reads files, which may be a path of any name
# (read_csv('orders.txt'), read_text('notes.md')) or a list of them: every string in it.
_READ_ARGUMENT = re.compile(
    r"\b(?:read_\w+|parquet_scan|sqlite_scan)\s*\(\s*(\[(?:[^\]']|'(?:[^']|'')*')*\]|'(?:[^']|'')*')",
    re.IGNORECASE,
)
# SQL that draws at random, other values in every execution at any thread count: random()
# unless the step called setseed() first, the uuid functions, and a sample with no seed
# (a seed is written `(reservoir, 7)` or `REPEATABLE (7)` after the sample's size).
_RANDOM = re.compile(r"\brandom\s*\(\s*\)", re.IGNORECASE)
_SETSEED = re.compile(r"\bsetseed\s*\(", re.IGNORECASE)
_UUID = re.compile(r"\b(?:gen_random_uuid|uuid|uuidv4|uuidv7)\s*\(\s*\)", re.IGNORECASE)
_SAMPLE = re.compile(
    r"\b(?:using\s+sample|tablesample)\s+(?:\w+\s*\([^()]*\)|[\d.]+\s*(?:%|percent|rows)?)\s*"
    r"(?:\(\s*\w+\s*(?:,\s*(?P<seed>\d+)\s*)?\)\s*)?"
    r"(?:repeatable\s*\(\s*(?P<repeatable>\d+)\s*\))?",
    re.IGNORECASE,
)


# The same in Spark SQL: rand(), randn() and random() with no seed argument (one with a
# seed is seeded per partition), uuid(), shuffle() of an array, and a TABLESAMPLE of a
# share or a count of rows with no REPEATABLE (seed) after it.
_SPARK_RANDOM = re.compile(r"\b(?:rand|randn|random|uuid)\s*\(\s*\)|\bshuffle\s*\(", re.I)
_SPARK_SAMPLE = re.compile(
    r"\btablesample\s*\(\s*[\d.]+\s*(?:percent|rows)\s*\)(?!\s*repeatable\s*\()", re.I
)


def spark_first_draw(text: str, seeded: bool = False) -> tuple[int, int] | None:
    """Where Spark SQL `text` first draws at random with no seed (`first_draw` on Spark,
    which has no setseed(), so `seeded` changes nothing); None where it does not."""
    found = [m for m in (_SPARK_RANDOM.search(text), _SPARK_SAMPLE.search(text)) if m]
    return min((m.span() for m in found), default=None)


def first_draw(text: str, seeded: bool = False) -> tuple[int, int] | None:
    """Where SQL `text` first draws at random with no seed, None where it does not: a
    random() (unless `seeded`, a setseed() before it in the step), a uuid function, or a
    sample without a seed."""
    found = [_UUID.search(text), None if seeded else _RANDOM.search(text)]
    found += [m for m in _SAMPLE.finditer(text) if not (m.group("seed") or m.group("repeatable"))]
    return min((m.span() for m in found if m), default=None)


# How much of a query that draws the notes quote: the draw, and what leads up to it.
QUOTED = 200


def quoted_at(text: str, span: tuple[int, int] | None, width: int = QUOTED) -> str:
    """`text` on one line, cut to `width` characters around `span` (the draw) where it is
    longer, with an ellipsis where it was cut: a draw past the first 200 characters of a
    long query was left out of the quote that names it."""
    if len(text) <= width:
        return text
    start = 0 if span is None else max(0, min(span[0] - width // 3, len(text) - width))
    end = start + width
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")


def relation_sql(relation: duckdb.DuckDBPyRelation) -> str:
    """The SQL DuckDB runs for `relation`, or nothing where it cannot render one."""
    try:
        return relation.sql_query()
    except (duckdb.Error, AttributeError, RuntimeError):
        return ""


# A table of ctx.sql's rows, as DuckDB renders its name in a relation's query.
_HELD = re.compile(r'"?(__twicerun_sql_\d+)"?')


# IMPORT DATABASE reads every file of the directory EXPORT DATABASE wrote (its schema and
# load scripts, and a file of rows per table), none of which need name a file of rows.
_IMPORT = re.compile(r"\bimport\s+database\s+'((?:[^']|'')*)'", re.IGNORECASE)


@dataclass(frozen=True)
class ArtifactRef:
    """Where an artifact this execution may read lives, and how many rows it holds."""

    name: str
    run: str
    step_index: int
    step_name: str
    path: Path
    rows: int
    canonical_digest: str = ""


@dataclass
class StepOutput:
    """What an execution wrote and read, gathered while it runs."""

    written: dict[str, Path] = field(default_factory=dict)
    reads: list[ReadRecord] = field(default_factory=list)
    sources: list[SourceRecord] = field(default_factory=list)
    sql_outside_ctx: list[str] = field(default_factory=list)
    sql_writes_outside_ctx: list[str] = field(default_factory=list)
    # Queries that draw at random with nothing in the step seeding the draw (_RANDOM and
    # its kin above), as run.
    sql_draws: list[str] = field(default_factory=list)
    # What in a written plan gave each row the file it was read from (Spark's
    # input_file_name(), _metadata): a stressed copy of a source is one file elsewhere.
    row_files: list[str] = field(default_factory=list)
    # Files a query named by a quoted path and read past ctx, each with its fingerprint as
    # the query began ("" when absent): a file an earlier step, or an earlier run, rewrote
    # with other rows shows as another fingerprint.
    files_in_sql: dict[str, str] = field(default_factory=dict)
    # Database files the step attached without READ_ONLY (ATTACH 'x.duckdb'), which outlive
    # the step, the run and the invocation: what one run writes there, the next one reads.
    attached_for_writing: list[str] = field(default_factory=list)
    # Files and directories its SQL wrote past ctx (COPY ... TO 'x', EXPORT DATABASE 'd'),
    # as named, a directory ending in "/": for the note on a step that reads them.
    copied_to: list[str] = field(default_factory=list)
    # Weak references to the objects (a pyarrow Table, a DataFrame) artifacts were written
    # from, so that one handed over again by a later execution can be recognised.
    objects: dict[str, Any] = field(default_factory=dict)


def reference_to(data: Any) -> weakref.ref | None:
    """A weak reference to `data` when it is an object a step could keep and hand over
    again unchanged (a pyarrow Table, a DataFrame): not SQL text, which runs afresh, nor
    a DuckDB relation, which runs its query again on every use."""
    if isinstance(data, str | duckdb.DuckDBPyRelation):
        return None
    try:
        return weakref.ref(data)
    except TypeError:
        return None


# An artifact is a file named after it, and file names stop at 255 bytes; this
# leaves room for the suffixes of temporary files.
MAX_NAME = 128


def check_name(name: Any, call: str, where: str) -> str:
    # ctx.source names a view of outside files, not an artifact.
    what = "a source name" if call == "ctx.source" else "an artifact name"
    if isinstance(name, str) and sql.IDENTIFIER.match(name) and len(name) > MAX_NAME:
        raise ContractError(
            f"{call}({name[:20]}...) in {where}: {what} is at most {MAX_NAME} "
            f"characters, this one has {len(name)}; shorten it"
        )
    if not isinstance(name, str) or not sql.IDENTIFIER.match(name):
        raise ContractError(
            f"{call}({name!r}) in {where}: {what} is an identifier "
            f"(ASCII letters, digits and underscores, not starting with a digit), such as "
            f"{_suggest(name)!r}"
        )
    return name


def _suggest(name: Any) -> str:
    # ASCII only: Python's \w would keep an é, and suggest a name that is refused too.
    text = re.sub(r"[^A-Za-z0-9_]+", "_", str(name)).strip("_") or "artifact"
    return f"_{text}" if text[0].isdigit() else text


class ContractChecks:
    """What every engine's `ctx` refuses, in the same words: names, ownership, state."""

    def __init__(
        self,
        *,
        threads: int,
        step_index: int,
        step_name: str,
        out_dir: Path,
        visible: Mapping[str, ArtifactRef],
        state_source: Callable[[str], ArtifactRef | None],
        owners: Mapping[str, tuple[int, str]],
        source_order: Callable[[str, int], list[int]] | None = None,
    ):
        # Given a source's name and its number of files, the order to read them in (the
        # file-order amplifier's way in); None reads them as the step listed them.
        self._source_order = source_order
        self._threads = threads
        self._index = step_index
        self._name = step_name
        self._out_dir = Path(out_dir)
        self._visible = visible
        self._state_source = state_source
        self._owners = dict(owners)
        self.output = StepOutput()
        self._read_names: set[str] = set()
        self._where = f"step {step_index} {step_name}"
        # Whether the step's SQL called setseed(): DuckDB's random() after it draws seeded.
        self._seeded = False

    # What a step may use: the contract's calls, and what an engine adds (Spark's session).
    OFFERS: tuple[str, ...] = ("read", "state", "write", "sql", "source", "threads")

    # Where a query of this engine's SQL first draws at random unseeded, if it does (given
    # whether the step seeded the generator already).
    _first_draw: Callable[[str, bool], tuple[int, int] | None] = staticmethod(first_draw)

    def _note_draws(self, text: str, shown: str = "") -> None:
        """Note a query that draws at random unseeded: other values every execution.
        `shown` is how the query reads to the step's author, where that is not `text`."""
        self._seeded = self._seeded or bool(_SETSEED.search(text))
        if self._first_draw(text, self._seeded) is not None:
            one_line = " ".join((shown or text).split())
            at = self._first_draw(one_line, self._seeded)
            self.output.sql_draws.append(quoted_at(one_line, at))

    def _threads_left(self) -> int | None:
        """The thread count the step left in force, where it set one of its own; None
        where this engine does not tell (DuckDB's `ctx` reads its setting)."""
        return None

    # How long a step told to stop (`_interrupt`) has to come back on its own before the main
    # thread is sent a signal: a query DuckDB stopped returns in milliseconds.
    _stop_grace: float = 0.5

    def _interrupt(self) -> None:
        """Stop the query the step is running, from another thread (--step-timeout); an
        engine that cannot leaves it to the signal the main thread is sent."""

    def _kept_at_run_threads(
        self, default: bool, kept: Sequence[Any] = (), connects: Sequence[Any] = ()
    ) -> contextlib.AbstractContextManager[None]:
        """For the step's duration, the DuckDB connections the process keeps that the step's
        code reaches (the default one, what `duckdb.sql()` runs on, and `kept`, connections
        of the pipeline's own) at the run's thread count, and a database it opens itself
        (through `duckdb.connect` or the names in `connects`) too; an engine whose steps are
        not DuckDB's leaves them alone."""
        return contextlib.nullcontext()

    def __getattr__(self, attribute: str) -> Any:
        # Only reached when nothing else has the name: a step asked for something the
        # contract does not give (ctx.con, ctx.execute), or a typo. Python's own message
        # names neither what exists nor where SQL goes.
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        offers = ", ".join(self.OFFERS[:-1]) + f" and {self.OFFERS[-1]}"
        raise AttributeError(
            f"ctx has no attribute {attribute!r}; a step's ctx has {offers}, and the step's "
            f"SQL goes through ctx.sql"
        )

    def _check_state(self, name: str, initial: Any) -> None:
        check_name(name, "ctx.state", self._where)
        if not isinstance(initial, str):
            raise ContractError(
                f"ctx.state({name!r}, initial): initial is a SQL query string giving the rows "
                f"to start from, got {type(initial).__name__}"
            )
        owner = self._owners.get(name)
        if owner is not None and owner[0] != self._index:
            raise ContractError(
                f"ctx.state({name!r}) in step {self._index} {self._name}: {name} belongs to "
                f"step {owner[0]} {owner[1]}; a step's state is its own artifact "
                f"(read another step's with ctx.read)"
            )

    def _state_record(self, name: str, ref: ArtifactRef | None) -> None:
        if ref is not None:
            rows, digest, run, index = ref.rows, ref.canonical_digest, ref.run, ref.step_index
        else:
            rows, run, index, digest = 0, None, None, ""
        self.output.reads.append(
            ReadRecord(
                name=name,
                via="state",
                run=run,
                step_index=index,
                rows=rows,
                canonical_digest=digest,
            )
        )

    def _read_record(self, name: str, ref: ArtifactRef) -> None:
        if name not in self._read_names:
            self._read_names.add(name)
            self.output.reads.append(
                ReadRecord(
                    name=name,
                    via="read",
                    run=ref.run,
                    step_index=ref.step_index,
                    rows=ref.rows,
                    canonical_digest=ref.canonical_digest,
                )
            )

    def _check_write(self, name: str, engine: str) -> Path:
        """The artifact's final path, once `name` may be written by this step."""
        check_name(name, "ctx.write", self._where)
        if name in self.output.written:
            raise ContractError(
                f"ctx.write({name!r}) in step {self._index} {self._name}: {name} was already "
                f"written by this step; write each artifact once"
            )
        owner = self._owners.get(name)
        if owner is not None and owner[0] != self._index:
            raise ContractError(
                f"ctx.write({name!r}) in step {self._index} {self._name}: {name} is already "
                f"written by step {owner[0]} {owner[1]}; give this artifact another name"
            )
        # Both engines' catalogs ignore case, so `T` and `t` would be one view to a reader.
        for other, (index, step) in [
            *((n, (self._index, self._name)) for n in self.output.written),
            *self._owners.items(),
        ]:
            if other != name and other.lower() == name.lower():
                who = "this step" if index == self._index else f"step {index} {step}"
                raise ContractError(
                    f"ctx.write({name!r}) in step {self._index} {self._name}: {other} is already "
                    f"written by {who}, and {engine} does not tell names apart by case, so a "
                    f"step reading both would see one; give this artifact a different name"
                )
        return self._out_dir / f"{name}.parquet"

    def _source_record(
        self,
        name: str,
        reader: str,
        listed: list[str],
        rows: int,
        options: dict,
        order: list[int],
        columns: list[str],
    ) -> None:
        self.output.sources.append(
            SourceRecord(
                name=name,
                reader=reader,
                files=[file_record(path) for path in listed],
                rows=int(rows),
                options={k: options[k] for k in sorted(options)},
                order=order,
                columns=list(columns),
            )
        )

    def _resolve(self, name: str) -> tuple[str, ArtifactRef | None]:
        """The artifact `name` names, and the name it was written under. Both engines' SQL
        ignores case, and no two artifacts may differ only by case (`_check_write`), so
        `orders` names the `Orders` an earlier step wrote, as it would in a query."""
        ref = self._visible.get(name)
        if ref is not None:
            return name, ref
        folded = [n for n in self._visible if n.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0], self._visible[folded[0]]
        return name, None

    def _unknown_read(self, name: str) -> str:
        head = f"ctx.read({name!r}) in step {self._index} {self._name}"
        owner = self._owners.get(name)
        if any(written.lower() == name.lower() for written in self.output.written):
            return (
                f"{head}: {name} was written by this step itself, and ctx.read reads what "
                f"earlier steps wrote; to use those rows again here, make them a table "
                f'(ctx.sql("CREATE TABLE ... AS ...")) and write from it, or use ctx.state '
                f"for this step's copy from its previous run"
            )
        if owner is not None and owner[0] == self._index:
            return f"{head}: {name} is this step's own artifact; use ctx.state to read its earlier copy"
        if owner is not None and owner[0] > self._index:
            return (
                f"{head}: {name} is written by step {owner[0]} {owner[1]}, which runs after this "
                f"one; a step reads only what earlier steps wrote"
            )
        if not self._visible:
            return f"{head}: no earlier step wrote any artifact"
        listed = ", ".join(sorted(n for n in self._visible if not n.startswith(SOURCE_COPY)))
        return f"{head}: no earlier step wrote an artifact called {name}; the ones that exist are {listed}"


class StepContext(ContractChecks):
    """The `ctx` of one execution of one step, on DuckDB."""

    def __init__(self, *, connection: duckdb.DuckDBPyConnection, **bound: Any):
        super().__init__(**bound)
        self._con = connection
        self._results = 0
        # The query whose rows each ctx.sql table holds, to show in place of its name.
        self._held: dict[str, str] = {}
        self._names_threads = False
        # Whether the step attached a database file: DuckDB lets one database in the process
        # hold a file, so this connection must be closed before the next execution opens one.
        self._attached = False
        # ctx is one connection, and DuckDB 2 refuses a call on a connection busy with
        # another ("connection is busy with another call") where DuckDB 1 waited: a step
        # writing its partitions from a thread pool raised, in some runs and not others.
        # Its calls through ctx take turns, as they did on DuckDB 1.
        self._turn = threading.RLock()

    @property
    def threads(self) -> int:
        """The thread count in force for this execution."""
        return self._threads

    def _threads_left(self) -> int | None:
        """The connection's thread count once the step is done, which a `SET threads`
        inside the step changes; None when it cannot be read, or when no SQL the step
        ran names `threads` (reading the setting costs a query, about 0.1 ms)."""
        if not self._names_threads:
            return None
        try:
            (value,) = self._con.execute("SELECT current_setting('threads')").fetchone()
            return int(value)
        except (duckdb.Error, TypeError, ValueError):
            return None

    def _interrupt(self) -> None:
        self._con.interrupt()

    @contextlib.contextmanager
    def _kept_at_run_threads(
        self, default: bool, kept: Sequence[Any] = (), connects: Sequence[Any] = ()
    ) -> Iterator[None]:
        """DuckDB's default connection (with `default`) and the pipeline's own connections
        in `kept` at the run's thread count while the step runs, so a `duckdb.sql()` or a
        `CON.sql()` in the step is measured at the threads the run says, and the bisect's
        one thread reaches it; each one's count is put back after. The connections stay
        the process's: what a pipeline sets up on them as it is imported (a lookup table, a
        relation held in a module variable) is for every step to use. (DuckDB makes a
        default the first time it is asked, which costs as much as opening a database, so
        only steps whose code names duckdb ask.) A module-level `duckdb.connect()` used to
        keep DuckDB's own count, and a sum on it that drifted with the order its threads
        added in was called PERSISTS_SINGLE_THREADED."""
        connections = ([duckdb.default_connection()] if default else []) + list(kept)
        with contextlib.ExitStack() as stack:
            for connection in {id(c): c for c in connections}.values():
                stack.enter_context(_at_threads(connection, self._threads))
            if default:
                stack.enter_context(_new_databases_at(self._threads, connects))
            yield

    def read(self, name: str) -> duckdb.DuckDBPyRelation:
        """Expose the artifact `name` of an earlier step as a view and return a relation over it."""
        with self._turn:
            check_name(name, "ctx.read", self._where)
            written_as, ref = self._resolve(name)
            if ref is None:
                raise UnknownArtifact(self._unknown_read(name), name=name)
            self._con.execute(
                f"CREATE OR REPLACE VIEW {sql.identifier(name)} AS SELECT * FROM {sql.parquet(ref.path)}"
            )
            self._read_record(written_as, ref)
            return handed_out(self._con.table(name), self._turn)

    def source(self, name: str, files: Any, **options: Any) -> duckdb.DuckDBPyRelation:
        """Files from outside the pipeline (Parquet or CSV: a list, one path, or a glob) as the
        view `name`, read as DuckDB reads that list; each file is recorded with its size and
        digest, and its rows count toward rows read."""
        with self._turn:
            check_name(name, "ctx.source", self._where)
            head = f"ctx.source({name!r}, files) in {self._where}"
            listed = self._listed(head, files)
            reader = reader_of(head, listed)
            reader_options(head, options)  # a bad option is refused before any file is read
            order = list(range(len(listed)))
            if self._source_order is not None and len(listed) > 1:
                order = self._source_order(name, len(listed))
            copy = self._visible.get(SOURCE_COPY + name)
            if copy is not None:
                # An amplifier's stressed copy of these rows, read instead of the files; the
                # receipt still names the files, which is what the step asked for.
                query = f"SELECT * FROM {sql.parquet(copy.path)}"
            else:
                query = source_query(reader, [listed[i] for i in order], options, head)
            self._con.execute(f"CREATE OR REPLACE VIEW {sql.identifier(name)} AS {query}")
            # Counting reads every file's schema (and, for CSV, its rows), so a list DuckDB
            # cannot read in this order raises here, where the step asked for it. Once a
            # list has been counted, the same files read the same way are not counted again.
            slot = None if copy else (query, tuple(file_record(p).digest for p in listed))
            rows = SOURCE_ROWS.get(slot)
            if rows is None:
                # fetchall, not fetchone: DuckDB 2 holds a result fetched short of its end as
                # unfinished, and refuses the step's next read of a relation until it ends.
                ((rows,),) = self._con.execute(
                    f"SELECT count(*) FROM {sql.identifier(name)}"
                ).fetchall()
                if slot is not None:
                    SOURCE_ROWS[slot] = int(rows)
            relation = self._con.table(name)
            self._source_record(name, reader, listed, rows, options, order, relation.columns)
            return handed_out(relation, self._turn)

    def _listed(self, head: str, files: Any) -> list[str]:
        """The files as a list of paths, a glob expanded in DuckDB's own order."""
        return checked_files(head, files, lambda text: duckdb_glob(self._con, text))

    def state(self, name: str, initial: str) -> duckdb.DuckDBPyRelation:
        """This step's own `name` as its previous run left it, or the rows of `initial`."""
        with self._turn:
            self._check_state(name, initial)
            ref = self._state_source(name)
            if ref is not None:
                self._con.execute(
                    f"CREATE OR REPLACE VIEW {sql.identifier(name)} AS SELECT * FROM {sql.parquet(ref.path)}"
                )
            else:
                try:
                    # The step's query on lines of its own, numbered as it wrote them.
                    with as_written(1):
                        self._con.execute(
                            f"CREATE OR REPLACE VIEW {sql.identifier(name)} AS\n{initial}"
                        )
                except duckdb.ParserException:
                    # Parsed again alone (parsed, never run), so that the error shows the
                    # step's SQL and not twicerun's view around it.
                    self._con.extract_statements(initial)
                    raise
            self._state_record(name, ref)
            return handed_out(self._con.table(name), self._turn)

    def write(self, name: str, data: Any) -> None:
        """Make `data` (a SQL query, a DuckDB relation, a pyarrow Table or RecordBatchReader, or
        a DataFrame) this step's artifact."""
        final = self._check_write(name, "DuckDB")
        frame = sys._getframe(1)  # whose names a query in `data` may use
        # No fsync: an artifact is atomic against readers and against this process
        # dying, and a power cut costs only a rerun, which is what this tool does.
        with self._turn:
            with atomic_path(final, fsync=False) as temporary:
                self._write_parquet(name, data, temporary, frame)
            self.output.written[name] = final
            ref = reference_to(data)
            if ref is not None:
                self.output.objects[name] = ref

    def sql(self, query: str, params: Any = None) -> duckdb.DuckDBPyRelation | None:
        """Run SQL on this step's connection: a relation for a query, None for a statement.

        The SQL runs now, once. A DuckDB relation on its own is lazy and runs its
        query again on every use, so `ctx.sql("SELECT setseed(0.5)")` would never
        seed anything and a query calling random() would give new rows each time
        it was read. A query's rows are therefore kept in a temporary table and the
        relation returned reads that.
        """
        with self._turn:
            if _THREADS.search(query):
                self._names_threads = True
            caller = _Caller(self._con, sys._getframe(1))
            statements = self._parsed(query, f"ctx.sql in step {self._index} {self._name}")
            self._outside(query, statements)
            if not statements:
                return None
            if any(statement.kind == "ATTACH" for statement in statements):
                self._attached = True
                try:
                    return self._run_statements(statements, caller, params)
                finally:
                    self._note_attached()
            return self._run_statements(statements, caller, params)

    def _run_statements(self, statements: list[_Statement], caller: _Caller, params: Any) -> Any:
        *before, last = statements
        for statement in before:
            with as_written(0, statement.offset):
                caller.execute(statement.query)
        kind = last.kind
        if kind == "SELECT" or self._is_query(last):
            self._results += 1
            table = f"__twicerun_sql_{self._results}"
            self._held[table] = last.query
            # The query on a line of its own, so DuckDB's error snippet (LINE n) shows the
            # step's SQL rather than this wrapper and its table name.
            with as_written(1, last.offset):
                caller.execute(f"CREATE TEMP TABLE {table} AS\n{last.query}\n", params)
            return handed_out(self._con.table(table), self._turn)
        if kind in _ROW_STATEMENTS or (kind in _CHANGES and _RETURNING.search(last.query)):
            with as_written(0, last.offset):
                rows = caller.sql(last.query, params=params).to_arrow_table()
            return handed_out(self._con.from_arrow(rows), self._turn)
        with as_written(0, last.offset):
            caller.execute(last.query, params)
        return None

    def _note_attached(self) -> None:
        """Record the database files now attached for writing, read from DuckDB's catalog
        rather than the SQL, which may name a file in a variable or a secret."""
        try:
            rows = self._con.execute(
                "SELECT path FROM duckdb_databases() "
                "WHERE NOT internal AND path IS NOT NULL AND NOT readonly ORDER BY path"
            ).fetchall()
        except duckdb.Error:
            return
        for (path,) in rows:
            if path not in self.output.attached_for_writing:
                self.output.attached_for_writing.append(path)

    def _write_parquet(self, name: str, data: Any, target: Path, frame: Any) -> None:
        destination = sql.string(target)
        if isinstance(data, str):
            caller = _Caller(self._con, frame)
            if _OUTSIDE_READ.search(data):
                self.output.sql_outside_ctx.append(" ".join(data.split())[:200])
                self._stamp_files(data)
            self._note_draws(data)
            query, offset = self._one_query(name, data)
            # Lines of twicerun's own SQL above the step's query in the COPY that runs it;
            # None once the COPY reads rows kept from it (its errors are not the step's).
            added: int | None = 1
            try:
                bound = caller.sql(query)
                casts = exact_casts(bound.columns, bound.types)
            except duckdb.Error:
                # Raised again by the COPY below, whose error shows the step's SQL.
                casts = {}
            kept = None
            if casts and _PIVOT.search(query):
                # A PIVOT without an IN list takes its columns from the rows, so binding
                # it again (the COPY's cast below) can give other columns than the bind
                # that named them: a step that is fine would raise, or lose a column.
                # Its rows are kept once, and the casts named from what they are.
                self._results += 1
                kept = f"__twicerun_write_{self._results}"
                with as_written(1, offset):
                    caller.execute(f"CREATE TEMP TABLE {kept} AS\n{query}\n")
                bound = self._con.table(kept)
                casts = exact_casts(bound.columns, bound.types)
                query = f"SELECT * FROM {kept}"
                added = None
            if casts:
                # The step's query stays on lines of its own inside the cast around it.
                cast = f"SELECT {', '.join(projection(bound.columns, casts))} FROM (\n"
                query = f"{cast}{query}\n)"
                added = None if added is None else added + cast.count("\n")
            # On lines of their own, so a trailing `-- comment` cannot swallow the `)`.
            numbered = contextlib.nullcontext() if added is None else as_written(added, offset)
            try:
                with self._exactly(name, casts), numbered:
                    caller.execute(f"COPY (\n{query}\n) TO {destination} (FORMAT parquet)")
            finally:
                if kept is not None:
                    self._con.execute(f"DROP TABLE IF EXISTS {kept}")
        elif isinstance(data, duckdb.DuckDBPyRelation):
            # A relation built with the relation API (`rel.order("random()")`) draws in
            # SQL no string of the step's holds; DuckDB renders what it will run.
            # Rows ctx.sql holds were drawn, and noted, when it ran: only what the relation
            # adds draws now, so its own text decides and the held query is only shown.
            rendered = relation_sql(data)
            self._note_draws(rendered, shown=self._unheld(rendered))
            casts = exact_casts(data.columns, data.types)
            if casts:
                data = data.project(", ".join(projection(data.columns, casts)))
            with self._exactly(name, casts):
                data.to_parquet(str(target))
        elif _is_arrow(data) or _is_frame(data):
            if _is_arrow(data) and hasattr(data, "read_all"):
                # A RecordBatchReader, which is what DuckDB's `rel.arrow()` returns: it
                # streams from this connection's open result, so scanning it from the same
                # connection is refused ("connection has an open result"). Read it first.
                data = data.read_all()
            if _is_arrow(data) and not data.schema.names:
                raise self._no_columns(name, "pyarrow table")
            # A DataFrame (pandas, polars, anything exporting an Arrow stream) is scanned
            # by DuckDB itself, as `con.register` scans it: a DuckDB user's expectation,
            # so a pandas index is left out as DuckDB leaves it out.
            view = f"__twicerun_arrow_{name}"
            try:
                self._con.register(view, data)
            except duckdb.Error as exc:
                if "at least one column" in str(exc):
                    raise self._no_columns(name, type(data).__name__) from exc
                raise ContractError(
                    f"ctx.write({name!r}, data) in step {self._index} {self._name}: DuckDB "
                    f"cannot read this {type(data).__name__} ({str(exc).splitlines()[0]}); "
                    f"write it as a pyarrow Table instead"
                ) from exc
            try:
                scan = self._con.sql(f'SELECT * FROM "{view}"')
                casts = exact_casts(scan.columns, scan.types)
                columns = ", ".join(projection(scan.columns, casts)) if casts else "*"
                with self._exactly(name, casts):
                    self._con.execute(
                        f'COPY (SELECT {columns} FROM "{view}") TO {destination} (FORMAT parquet)'
                    )
            finally:
                self._con.unregister(view)
        else:
            # Rows held in plain Python are one call away from a Table; say which call.
            made = {
                "dict": "; pyarrow.table(data) makes a Table of a dict of columns",
                "list": "; pyarrow.Table.from_pylist(data) makes a Table of a list of rows (dicts)",
            }.get(type(data).__name__, "")
            raise ContractError(
                f"ctx.write({name!r}, data) in step {self._index} {self._name}: data must be a SQL "
                f"query string, a DuckDB relation, a pyarrow Table or RecordBatchReader, or a "
                f"DataFrame (pandas, polars), got {type(data).__name__}{made}"
            )

    def _no_columns(self, name: str, what: str) -> ContractError:
        # DuckDB's own word for it reads like a crash of the step's code.
        return ContractError(
            f"ctx.write({name!r}, data) in step {self._index} {self._name}: the {what} has no "
            f"columns, and an artifact needs at least one; write the columns it should hold "
            f"(or a count, `SELECT count(*) AS n ...`)"
        )

    def _unheld(self, rendered: str) -> str:
        """A relation's query as the step wrote it: a table holding the rows of a ctx.sql
        query shown as that query, not under a name the step never wrote."""
        held = self._held
        return _HELD.sub(
            lambda m: f"({held[m.group(1)]})" if m.group(1) in held else m.group(0), rendered
        )

    @contextlib.contextmanager
    def _exactly(self, name: str, casts: dict[str, str]):
        """A 128-bit integer past 38 digits, refused in one sentence naming its column."""
        try:
            yield
        except duckdb.Error as exc:
            refused = casts and too_wide(
                f"ctx.write({name!r}, data) in step {self._index} {self._name}", casts, exc
            )
            if refused:
                raise refused from exc
            raise

    def _one_query(self, name: str, sql: str) -> tuple[str, int]:
        """`sql` as exactly one query, its trailing semicolon gone, and the lines of `sql`
        before it.

        Parsed first, so nothing in it can close the COPY around it and add a
        statement of its own (such as a second COPY to a path outside the run).
        """
        head = f"ctx.write({name!r}, sql) in step {self._index} {self._name}"
        statements = self._parsed(sql, head)
        if len(statements) != 1:
            raise ContractError(
                f"{head}: give exactly one query, got {len(statements)} statements; run the "
                f"others with ctx.sql first"
            )
        (statement,) = statements
        if statement.kind != "SELECT" and not self._is_query(statement):
            raise ContractError(
                f"{head}: give a query (SELECT, WITH, VALUES or FROM), got a "
                f"{statement.kind} statement; run it with ctx.sql and write a query of its result"
            )
        # The query loses the blank lines it started with, which the offset counts instead.
        lead = statement.query[: len(statement.query) - len(statement.query.lstrip())]
        return _without_final_semicolons(statement.query), statement.offset + lead.count("\n")

    def _outside(self, query: str, statements: list[_Statement]) -> None:
        """Note SQL that moves rows past ctx: a read of a file or database, and a file
        written by COPY ... TO or EXPORT DATABASE, which nothing compares. The file a
        COPY writes to is not read, so its name alone does not make the COPY a read."""
        reads = False
        for statement in statements:
            text = statement.query
            self._note_draws(text)
            target = _TARGET_FILE.search(text)
            if statement.kind == "EXPORT" or (statement.kind == "COPY" and target):
                self.output.sql_writes_outside_ctx.append(" ".join(text.split())[:200])
                # EXPORT DATABASE names its directory as its first string.
                target = target or _QUOTED.search(text)
                if target:
                    path = target.group(1).replace("''", "'")
                    self.output.copied_to.append(
                        os.path.join(path, "") if statement.kind == "EXPORT" else path
                    )
                text = _TARGET_FILE.sub("", text)
            if _OUTSIDE_READ.search(text):
                reads = True
                self._stamp_files(text)
        if reads:
            self.output.sql_outside_ctx.append(" ".join(query.split())[:200])

    def _stamp_files(self, text: str) -> None:
        """Record each file `text` names by a quoted path, by its fingerprint now
        (storage/fingerprints.py), "" where there is none: a file of rows by its name, any
        file a reading function is handed (read_csv('orders.txt')), and a directory IMPORT
        DATABASE reads, as the glob of every file in it."""
        paths = [m.group(1).replace("''", "'") for m in _FILE_LITERAL.finditer(text)]
        paths += [
            q.group(1).replace("''", "'")
            for m in _READ_ARGUMENT.finditer(text)
            for q in _QUOTED.finditer(m.group(1))
        ]
        paths += [os.path.join(m.group(1).replace("''", "'"), "*") for m in _IMPORT.finditer(text)]
        for path in paths:
            if path not in self.output.files_in_sql:
                self.output.files_in_sql[path] = fingerprint(path) or ""

    def _parsed(self, text: str, head: str) -> list[_Statement]:
        """The statements of `text`, as the step wrote them.

        A PIVOT whose columns come from the data (no `IN` list) is one statement to its
        author, but DuckDB first enumerates the values that become columns: 2.x files
        it as one MULTI statement, 1.x as the statements it will run (an enum, then
        the query or the CREATE), none with text of the step's own. Those are put
        back together as the one statement they came from, of the kind of the last.
        """
        statements = self._con.extract_statements(text)
        # A statement the step wrote is a piece of its text; one DuckDB made up is not
        # (its text is empty, or on 1.5 with a semicolon after it, a garbled fragment).
        made_up = [not st.query.strip() or st.query.strip() not in text for st in statements]
        if len(statements) > 1 and all(made_up):
            return [_Statement(statements[-1].type.name, _without_final_semicolons(text))]
        # One statement alone keeps DuckDB's text, which 1.x may rewrite (a PRAGMA as a
        # SELECT of its table function) and still runs.
        if len(statements) > 1 and any(made_up):
            raise ContractError(
                f"{head}: DuckDB {duckdb.__version__} cannot tell a PIVOT without an IN list "
                f"apart from the statements around it; give it a call of its own"
            )
        parsed, start = [], 0
        for st in statements:
            offset, start = line_offset(text, st.query, start)
            parsed.append(_Statement(st.type.name, st.query, offset))
        return parsed

    def _is_query(self, statement: _Statement) -> bool:
        """A statement DuckDB files as MULTI that is nonetheless one query.

        A PIVOT whose columns come from the data (no `IN` list) parses as MULTI on
        DuckDB 2.x (see `_parsed`); it still gives rows, and a DuckDB user writes it
        where a query goes. It counts as a query when it parses as the inside of a
        COPY, which a CREATE ... AS PIVOT does not.
        """
        if statement.kind != "MULTI":
            return False
        try:
            wrapped = self._con.extract_statements(
                f"COPY (\n{statement.query.strip().removesuffix(';')}\n) TO 'x' (FORMAT parquet)"
            )
        except duckdb.Error:
            return False
        return len(wrapped) == 1


def _without_final_semicolons(text: str) -> str:
    """`text` up to its closing semicolons, and any comment after them, found by DuckDB's
    tokenizer: put inside `COPY (...)`, `SELECT 1; -- daily` would close it early."""
    # The tokenizer's offsets count UTF-8 bytes, not characters: read them in the bytes,
    # or a query holding 'über' is cut in the wrong place (or past its end).
    raw = text.encode()
    tokens = [(at, kind) for at, kind in duckdb.tokenize(text) if kind != duckdb.token_type.comment]
    cut = None
    while tokens and tokens[-1][1] == duckdb.token_type.operator and raw[tokens[-1][0]] == ord(";"):
        cut = tokens.pop()[0]
    return (text if cut is None else raw[:cut].decode()).strip()


# DuckDB finds a Python object a query names (a pyarrow Table, a DataFrame, a relation)
# in the locals and globals of the frame that called it. Called from here, that would be
# this module's frame, not the step's; run from this, it is a frame with the step's names.
_AS_CALLER = compile("__twicerun_call(*__twicerun_args, **__twicerun_kwargs)", "<ctx.sql>", "eval")


class _Caller:
    """The step's connection, its SQL run where DuckDB sees the names of the code that
    called ctx.sql or ctx.write: `ctx.sql("SELECT * FROM df")` finds a step's `df` as
    `con.sql` would."""

    def __init__(self, con: duckdb.DuckDBPyConnection, frame: Any):
        self._con = con
        self._globals = frame.f_globals
        self._locals = dict(frame.f_locals)

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        names = dict(self._locals)
        names.update(__twicerun_call=method, __twicerun_args=args, __twicerun_kwargs=kwargs)
        return eval(_AS_CALLER, self._globals, names)

    def execute(self, query: str, params: Any = None) -> Any:
        return self._call(self._con.execute, query, params)

    def sql(self, query: str, params: Any = None) -> duckdb.DuckDBPyRelation:
        return self._call(self._con.sql, query, params=params)


@dataclass(frozen=True)
class _Statement:
    """One statement of a step's SQL: DuckDB's name for its kind, and its text."""

    kind: str
    query: str
    # Lines of the step's string before this statement: DuckDB numbers an error's
    # lines within the statement it ran (storage/error_lines.py).
    offset: int = 0


def _is_arrow(data: Any) -> bool:
    module = type(data).__module__ or ""
    return module.startswith("pyarrow") and hasattr(data, "schema")


def _is_frame(data: Any) -> bool:
    """A DataFrame DuckDB can scan: one exporting an Arrow stream (pandas 2.2 and later,
    polars, and others), or a pandas or polars one from before they did."""
    kind = type(data)
    if hasattr(kind, "__arrow_c_stream__"):
        return True
    root = (kind.__module__ or "").split(".")[0]
    return root in ("pandas", "polars") and kind.__name__ == "DataFrame"


@contextlib.contextmanager
def _at_threads(connection: duckdb.DuckDBPyConnection, threads: int) -> Iterator[None]:
    """`connection` at `threads` while the block runs, and at its own count again after."""
    try:
        before = connection.execute("SELECT current_setting('threads')").fetchall()[0][0]
        connection.execute(f"SET threads = {int(threads)}")
    except duckdb.Error:
        yield  # a result the pipeline left open there refuses the SET: leave it be
        return
    try:
        yield
    finally:
        with contextlib.suppress(duckdb.Error):
            connection.execute(f"SET threads = {int(before)}")


# What `duckdb.connect()` opens when it is given no database: a new one every time.
_NEW_DATABASE = ("", ":memory:")


@contextlib.contextmanager
def _new_databases_at(threads: int, names: Sequence[Any] = ()) -> Iterator[None]:
    """While the block runs, `duckdb.connect()` of a new in-memory database that is given no
    thread count opens it at `threads`. A step that opens its own database (`con =
    duckdb.connect()` in its body) got DuckDB's count, one per core, so the bisect's one
    thread never reached it. Only a new in-memory database: another connection to a file,
    or to a named in-memory database, already open in this process is refused when its
    config differs from the first one's. `names` are (namespace, name) pairs that hold
    `duckdb.connect` under a name of the pipeline's (`from duckdb import connect`), bound
    before the step ran: each is pointed at the same replacement, and back after."""
    original = duckdb.connect

    def connect(database: Any = ":memory:", *args: Any, **kwargs: Any) -> Any:
        if str(database) in _NEW_DATABASE:
            if len(args) >= 2:  # read_only, config given by position
                args = (args[0], {"threads": threads, **(args[1] or {})}, *args[2:])
            else:
                kwargs["config"] = {"threads": threads, **(kwargs.get("config") or {})}
        return original(database, *args, **kwargs)

    held = [(namespace, name) for namespace, name in names if namespace.get(name) is original]
    duckdb.connect = connect
    for namespace, name in held:
        namespace[name] = connect
    try:
        yield
    finally:
        duckdb.connect = original
        for namespace, name in held:
            if namespace.get(name) is connect:
                namespace[name] = original
