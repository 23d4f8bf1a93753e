"""Files from outside the pipeline, as ctx.source names them on either engine: which
files a path, list or glob means, how DuckDB reads them, and the size and digest each
is recorded with. Both engines' contexts check and expand a source here, so a pipeline
reads the same files, in the same order, on Spark as on DuckDB.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from twicerun import sql
from twicerun.errors import ContractError
from twicerun.storage.receipts import SourceFile

_READERS = {".parquet": "parquet", ".csv": "csv", ".tsv": "csv"}

# The key under which an amplifier hands a step, in `visible`, a stressed copy of one of
# its sources, read in place of the files: "source " and the source's name. The space
# keeps it from ever naming an artifact (a name is an identifier), so ctx.read cannot
# reach it and only ctx.source looks it up.
SOURCE_COPY = "source "


def source_query(reader: str, files: list[str], options: dict[str, Any], head: str = "") -> str:
    """The query ctx.source exposes as its view: the files read as DuckDB reads that list,
    with the options as given. The amplifiers write a source's rows from the same query."""
    paths = ", ".join(sql.file(path) for path in files)
    return f"SELECT * FROM read_{reader}([{paths}]{reader_options(head, options)})"


def reader_of(head: str, files: list[str]) -> str:
    kinds = set()
    for path in files:
        suffixes = [s.lower() for s in Path(path).suffixes if s.lower() not in (".gz", ".zst")]
        kind = _READERS.get(suffixes[-1] if suffixes else "")
        if kind is None:
            raise ContractError(
                f"{head}: {path} is neither Parquet nor CSV by its name; ctx.source reads "
                f".parquet, .csv and .tsv files (compressed CSV too)"
            )
        kinds.add(kind)
    if len(kinds) > 1:
        raise ContractError(f"{head}: the list mixes Parquet and CSV files; give one source each")
    return kinds.pop()


def reader_options(head: str, options: dict[str, Any]) -> str:
    """Reader options as DuckDB named parameters, exactly as given."""
    rendered = []
    for key, value in sorted(options.items()):
        if not sql.IDENTIFIER.match(key):
            raise ContractError(f"{head}: {key!r} is not a reader option name")
        rendered.append(f", {key} = {_literal(head, key, value)}")
    return "".join(rendered)


def _literal(head: str, key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return sql.string(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return "[" + ", ".join(sql.string(v) for v in value) + "]"
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return "{" + ", ".join(f"{sql.string(k)}: {sql.string(v)}" for k, v in value.items()) + "}"
    raise ContractError(
        f"{head}: option {key}={value!r} is not a bool, number, string, list of strings or "
        f"dict of strings"
    )


# Digests of files read through ctx.source, by (path, size, modification time): a
# file is read once per process however many runs read it, and a changed file is
# a new key.
FILE_DIGESTS: dict[tuple[str, int, int], str] = {}


# Rows of a source, by the query that reads it and the digests of its files, in the
# order read. Every query over a CSV list makes DuckDB sniff the files again, which
# for a few small files costs about as much as the step's own query, so counting them
# in every run of every step that reads them was paid once per execution; the same
# bytes read by the same query have the same rows.
SOURCE_ROWS: dict[tuple[str, tuple[str, ...]], int] = {}


def file_record(path: str) -> SourceFile:
    stat = Path(path).stat()
    key = (str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in FILE_DIGESTS:
        with open(path, "rb") as f:
            FILE_DIGESTS[key] = hashlib.file_digest(f, "sha256").hexdigest()
    return SourceFile(path=path, size=stat.st_size, digest=FILE_DIGESTS[key])


# s3://, gs://, https://, hdfs://...: a scheme of two letters or more, so `C:/` is not one.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")


def refuse_url(head: str, path: str) -> None:
    """ctx.source reads local files: twicerun records the size and digest of each."""
    if path.lower().startswith("file://"):
        raise ContractError(
            f"{head}: {path} is a file: URL; give the path itself "
            f"({path[len('file://') :]!r}), as DuckDB and the receipt name files by path"
        )
    if _URL.match(path):
        raise ContractError(
            f"{head}: {path} is a URL, and ctx.source reads local files, since twicerun "
            f"records the size and digest of every file a step read; copy the files to a "
            f"local directory first and give their paths"
        )


def relative_to_cwd(path: str | Path) -> str:
    """Where a relative path was looked for: the working directory twicerun was started in,
    not the pipeline file's, which is what a pipeline run from elsewhere trips on."""
    if Path(path).is_absolute():
        return ""
    return f" (a relative path is read from the working directory, {Path.cwd()})"


def duckdb_glob(con: duckdb.DuckDBPyConnection, text: str) -> list[str]:
    """The files `text` matches as DuckDB's glob() finds them, in its order: files only, a
    name starting with a dot included, and `**` at any depth (zero directories too), none of
    which Python's glob module does alike. Every engine expands a ctx.source glob here, so a
    pipeline reads the same files on Spark as on DuckDB."""
    return [row[0] for row in con.execute("SELECT file FROM glob(?)", [text]).fetchall()]


def checked_files(head: str, files: Any, glob: Callable[[str], list[str]]) -> list[str]:
    """The files as a list of paths, a glob expanded by `glob`, in the order it gives."""
    alone = isinstance(files, (str, Path))
    if alone:
        files = [str(files)]
    if not isinstance(files, (list, tuple)) or not files:
        raise ContractError(
            f"{head}: files is a list of paths (or one path, or a glob), got "
            f"{type(files).__name__ if not isinstance(files, (list, tuple)) else 'an empty list'}"
        )
    listed = []
    for entry in files:
        if not isinstance(entry, (str, Path)):
            raise ContractError(f"{head}: {entry!r} is not a path")
        refuse_url(head, str(entry))  # before a glob, which DuckDB would try to fetch
        if any(c in str(entry) for c in "*?["):
            # DuckDB reads a path, and every entry of a list, as a glob, a file named
            # like one included (part[1].csv reads part1.csv where that exists); so
            # does this, and reads back exactly the files it found (sql.file).
            found = glob(str(entry))
            if not found:
                raise ContractError(
                    f"{head}: the glob {str(entry)!r}{'' if alone else ' in the list'} "
                    f"matches no file{relative_to_cwd(str(entry))}"
                )
            listed.extend(found)
            continue
        # DuckDB reads `~/landing/a.parquet` from the home directory; so do the checks
        # below, the receipt's digest, and Spark, which would not expand it.
        entry = os.path.expanduser(entry)
        if Path(entry).is_dir():
            raise ContractError(
                f"{head}: {entry} is a directory; name its files, or a glob such as "
                f"{(Path(entry) / '*.parquet').as_posix()!r}"
            )
        if not Path(entry).is_file():
            raise ContractError(
                f"{head}: {entry} does not exist or is not a file{relative_to_cwd(entry)}"
            )
        listed.append(str(entry))
    return listed
