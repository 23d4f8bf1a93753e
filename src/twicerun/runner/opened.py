"""Files a step opens for reading beside its pipeline while it runs, outside ctx.

SQL kept in `.sql` files and read when the step runs (`(MODELS / "orders.sql")
.read_text()`), or a config file read there, is what the step computes as much as its
code: edited after a run, `reproduce` re-executed the step and called it DIVERGED, and
`diff` said it "diverged with identical inputs", as if the step had stopped repeating
itself. Each such file is recorded with its digest in the receipt, so a verdict can
name the file instead.

Python reports every `open` to audit hooks (PEP 578); one hook, installed the first
time a step is recorded, notes the files opened for reading under the pipeline's
directory (or its package's root) while a step runs. Code is left to the module
digests, twicerun's own run directory to the receipts, and files a step names through
`ctx.source` to their own record. A read from C++ (DuckDB's `read_csv` inside a
query, pyarrow's readers) raises no such event and is not seen.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from twicerun.storage.fingerprints import (
    CONTENT_LIMIT,
    OWN_READ,
    fingerprint,
    listing_fingerprint,
    touched_since,
)

_CODE = (".py", ".pyc", ".pyo", ".so", ".pyd")
# Files of rows, which the run report says a step should read through ctx.source.
DATA_SUFFIXES = (
    ".csv",
    ".tsv",
    ".parquet",
    ".jsonl",
    ".ndjson",
    ".feather",
    ".arrow",
    ".orc",
    ".avro",
    ".xlsx",
    ".csv.gz",
    ".tsv.gz",
    ".jsonl.gz",
)
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_recordings: list[Recording] = []
_installed = False
# Every file a step opened for writing in this process, wherever it is (Recording.consider).
_written_by_steps: set[str] = set()
# Every directory a step changed something in while it ran, in this process (execute.py
# calls wrote_into): a later step whose strings name one may read it whole, as pyarrow's
# read_table("stage") does, which no name of a file shows.
_changed_directories: set[str] = set()


def wrote_into(changed: list[str]) -> None:
    """Note the directories of what an execution changed (files_changed): a directory
    itself where a path ends in a separator, a file's own directory otherwise."""
    for path in changed:
        full = os.path.abspath(path)
        _changed_directories.add(full if path.endswith(("/", os.sep)) else os.path.dirname(full))


# (path, size, mtime_ns) -> digest: a file read by every execution is hashed once.
_digests: dict[tuple[str, int, int], str] = {}


class Recording:
    """The files opened for reading under `roots`, and not under `skip`, so far."""

    def __init__(self, roots: tuple[Path, ...], skip: Path):
        self._roots = tuple(os.path.join(str(r), "") for r in roots)
        self._skip = os.path.join(str(skip), "")
        self.paths: set[str] = set()
        # Files the step wrote itself: reading one back is no input from outside, and
        # reproduce, which runs the step again, would find it rewritten or gone.
        self.written: set[str] = set()
        # Directories it listed: which files it then read, pyarrow or pandas do unseen.
        self.listed: set[str] = set()

    def consider(self, path: Any, mode: Any, flags: Any) -> None:
        if isinstance(path, int):
            return  # a descriptor already open
        full = os.path.abspath(os.fsdecode(os.fspath(path)))
        if isinstance(mode, str):
            if any(c in mode for c in "wax+"):
                self._wrote(full)
                return
        elif isinstance(flags, int) and flags & _WRITES:
            self._wrote(full)
            return
        if full.endswith(_CODE) or full.startswith(self._skip):
            return
        # Anywhere else, a file some step wrote in this process: a pickle left in /tmp
        # for the next step is handed over as much as one beside the pipeline.
        if self._beside(full) or full in _written_by_steps:
            self.paths.add(full)

    def _wrote(self, full: str) -> None:
        self.written.add(full)
        if not full.startswith(self._skip) and not full.endswith(_CODE):
            _written_by_steps.add(full)

    def consider_listing(self, path: Any) -> None:
        if isinstance(path, int):
            return  # a descriptor already open
        full = os.path.abspath(os.fsdecode(os.fspath(path)))
        if self._beside(full):
            self.listed.add(full)

    def written_beside(self) -> list[str]:
        """The files the step opened for writing, outside twicerun's run directory: beside
        the pipeline relative to the working directory, as a path its code names would be,
        and anywhere else as they are."""
        return sorted(
            os.path.relpath(w) if self._beside(w) else w
            for w in self.written
            if not w.startswith(self._skip) and not w.endswith(_CODE)
        )

    def _beside(self, full: str) -> bool:
        """Whether a file or directory is the pipeline's own: under its roots, not under
        twicerun's run directory, an installed package or a bytecode cache."""
        inside = os.path.join(full, "")
        return (
            inside.startswith(self._roots)
            and not full.startswith(self._skip)
            and f"{os.sep}__pycache__{os.sep}" not in inside
            and f"{os.sep}site-packages{os.sep}" not in inside
        )

    def listings(self, directory: Path, began_ns: int = 0) -> dict[str, str]:
        """Each directory the step listed (os.listdir, os.scandir, glob, pathlib), relative
        to `directory` and ending in `/*`, with a fingerprint of the files of rows in it
        (storage/fingerprints.py), where it held any. A directory the step wrote into (a
        file opened for writing, or one changed since `began_ns`, the execution's start on
        the wall clock: DuckDB's COPY writes unseen) is its output, an export, and is left
        out."""
        found: dict[str, str] = {}
        # A walk over a tree of directories (os.walk over a landing area) is a read of
        # everything in it, not a file handed over: too much to fingerprint per execution.
        if len(self.listed) > LISTED_LIMIT:
            return found
        # One budget of bytes for all of them, as for the files of one glob.
        budget = [CONTENT_LIMIT]
        for full in sorted(self.listed):
            inside = os.path.join(full, "")
            if any(w.startswith(inside) for w in self.written):
                continue
            if began_ns and touched_since(full, began_ns):
                continue
            held = listing_fingerprint(full, DATA_SUFFIXES, budget)
            if held is not None:
                found[Path(os.path.relpath(full, directory)).as_posix() + "/*"] = held
        return found

    def digests(self, directory: Path, sources: set[str]) -> dict[str, str]:
        """Each file read, relative to `directory`, with its SHA-256; files named through
        ctx.source are left to their own record."""
        found = {}
        for full in sorted(self.paths - sources - self.written):
            try:
                stat = os.stat(full)
            except OSError:
                continue  # read, then removed by the step: nothing to vouch for
            key = (full, stat.st_size, stat.st_mtime_ns)
            digest = _digests.get(key)
            if digest is None:
                try:
                    with open(full, "rb") as f:
                        digest = hashlib.file_digest(f, "sha256").hexdigest()
                except OSError:
                    continue
                _digests[key] = digest
            # Beside the pipeline relative to it; anywhere else, where it is.
            rel = os.path.relpath(full, directory) if self._beside(full) else full
            found[Path(rel).as_posix()] = digest
        return found


_LISTINGS = ("os.listdir", "os.scandir")
# Directories listed in one execution past which none is watched (Recording.listings).
LISTED_LIMIT = 64


def _hook(event: str, args: tuple) -> None:
    # Called for every audited event in the process, whatever runs: it must be cheap
    # when nothing is recorded, and never raise.
    if not _recordings or getattr(OWN_READ, "active", False):
        return
    if event in _LISTINGS:
        try:
            if args and args[0] is not None and not _importing():
                for recording in _recordings:
                    recording.consider_listing(args[0])
        except Exception:
            return
        return
    if event != "open":
        return
    try:
        path, mode, flags = (*args, None, None, None)[:3]
        for recording in _recordings:
            recording.consider(path, mode, flags)
    except Exception:
        return


def _importing() -> bool:
    """Whether the listing was the import system's, looking for a module to import: a
    step that imports lazily lists the pipeline's directory without reading anything."""
    frame = sys._getframe(1)  # the frame that listed
    for _ in range(4):
        if frame is None:
            return False
        name = frame.f_code.co_filename
        if name.startswith("<frozen importlib") or f"{os.sep}importlib{os.sep}" in name:
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def recording(roots: tuple[Path, ...], skip: Path) -> Iterator[Recording]:
    """Record what is opened for reading under `roots` (not under `skip`) meanwhile."""
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True
    current = Recording(roots, skip)
    _recordings.append(current)
    try:
        yield current
    finally:
        _recordings.remove(current)


# A path to a file of rows inside a string of a step's code: the whole string, or a
# quoted path in its SQL. Globs are left out here: a bare "*.csv" beside a directory
# handed to ctx.source is common, and would be matched against the working directory.
# A glob in the step's own SQL is watched (storage/context.py, `files_in_sql`).
_NAMED_FILE = re.compile(
    r"[^\s'\"(),;*?]+\.(?:parquet|csv|tsv|json|jsonl|ndjson|feather|arrow|orc|duckdb|db|sqlite|sqlite3)(?:\.gz|\.zst)?\b",
    re.IGNORECASE,
)


def files_named(strings: list[str]) -> dict[str, str]:
    """Each file of rows the strings of a step's code name that exists now, by its path as
    written, with its fingerprint (storage/fingerprints.py: the digest of its bytes, or a
    stat for a large file). Taken before an execution, a file an earlier step or run
    rewrote with other rows shows as another fingerprint, whatever reads it (DuckDB,
    pyarrow, pandas), none of which Python's audit hooks see.

    A name that is no file on its own, or a glob, is looked for under each directory the
    strings name: a path built when the step runs (`os.path.join(STAGE, "x.parquet")`,
    `f"{STAGE}/x.parquet"`, `glob.glob(f"{STAGE}/*.parquet")`) has its parts among them,
    and read back with pyarrow, it left a step fed by an earlier step's export with the
    cause PARALLEL_ORDER. A glob is watched by the files it matches (fingerprint)."""
    found: dict[str, str] = {}
    unfound: list[str] = []
    for text in strings:
        # A whole string naming a file that exists, whatever its suffix: a Parquet file
        # called `side_table.dat`, written and read back with pyarrow, went unseen.
        if (
            text not in found
            and _ANY_FILE.fullmatch(text)
            and not text.endswith(_CODE)
            and os.path.isfile(text)
        ):
            held = fingerprint(text)
            if held is not None:
                found[text] = held
        for match in _NAMED_FILE.finditer(text):
            path = match.group(0)
            if path in found:
                continue
            held = fingerprint(path)
            if held is not None:
                found[path] = held
            else:
                unfound.append(path)
        # A glob only ever under a directory: alone, "*.csv" would be read against the
        # working directory, where it is most often half of a ctx.source path.
        unfound.extend(match.group(0) for match in _NAMED_GLOB.finditer(text))
    if _changed_directories:
        # A directory a step wrote into, named whole: watched by every file in it.
        for text in dict.fromkeys(strings):
            if (
                text not in ("", ".", "./")
                and _PATH_LIKE.fullmatch(text)
                and os.path.abspath(text) in _changed_directories
            ):
                key = os.path.join(text, "*")
                held = None if key in found else fingerprint(key)
                if held is not None:
                    found[key] = held
    if unfound:
        for base in _directories(strings):
            for name in dict.fromkeys(unfound):
                path = os.path.join(base, name.lstrip("/"))
                held = None if path in found else fingerprint(path)
                if held is not None:
                    found[path] = held
    return found


# A string that could be a file's path by itself: no space, quote, parenthesis or glob,
# and a suffix (an artifact's name, `orders`, has none, and costs no system call).
_ANY_FILE = re.compile(r"[^\s'\"(),;*?]{1,4096}\.[A-Za-z0-9]{1,10}")


# A glob of files of rows in a string of a step's code (`"*.parquet"`, `"/part-*.csv"`).
_NAMED_GLOB = re.compile(
    r"[^\s'\"(),;]*[*?][^\s'\"(),;]*\.(?:parquet|csv|tsv|json|jsonl|ndjson|feather|arrow|orc)(?:\.gz|\.zst)?\b",
    re.IGNORECASE,
)


# A string that could be a directory's path: no space, quote, parenthesis or glob.
_PATH_LIKE = re.compile(r"[^\s'\"(),;*?]{1,4096}")


# Per working directory and a step's strings, the directories they named after the step's
# first execution in this process.
_named_directories: dict[tuple[str, tuple[str, ...]], list[str]] = {}


def directories_changed(strings: list[str], since_ns: int, cwd: str) -> list[str]:
    """The directories the strings name that gained, lost or replaced a file at or after
    `since_ns` (a directory's own modification time; DuckDB's COPY replaces a file it
    overwrites), each ending in a separator: an export built at run time
    (`f"{STAGE}/part-{p}.parquet"`) names its directory and nothing else.

    Which strings name a directory is looked up once per step, after its first execution
    (which may have made the directory), not on every execution: an artifact's name looks
    like a path, and every system call on the loop's path can hand the GIL to the
    connection helpers (docs/runs.md). Side by side on bench/pipelines/tiny.py, four
    invocations each, a stat per string per execution came out slower in each pair (0.04 s
    of 2.5 s on average, inside the range either code covered); looked up once, neither
    code was ahead. A directory another step makes later is not watched for this one."""
    key = (cwd, tuple(strings))
    named = _named_directories.get(key)
    if named is None:
        named = _named_directories[key] = _directories(strings)
    found = []
    for directory in named:
        try:
            if os.stat(directory).st_mtime_ns >= since_ns:
                found.append(os.path.join(directory, ""))
        except OSError:
            continue
    return found


def _directories(strings: list[str]) -> list[str]:
    """The strings that name a directory that exists now, the working directory aside."""
    return [
        text
        for text in dict.fromkeys(strings)
        if text not in ("", ".", "./") and _PATH_LIKE.fullmatch(text) and os.path.isdir(text)
    ]
