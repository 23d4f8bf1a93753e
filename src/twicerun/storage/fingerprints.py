"""What a file a step reads past ctx held when the step began, as one string to compare.

A step may read a file that an earlier step, or an earlier run, wrote (a `COPY ... TO`
export, a Parquet file pyarrow wrote). Whether that file reached the step changed is
what the receipt keeps this for. A stat alone (inode, size, modification time) moves
whenever the file is written again, even with the same bytes, so a deterministic
export rewritten by every run looked like a changed input and took the cause from the
step reading it. A file up to `CONTENT_LIMIT` is therefore named by the SHA-256 of its
bytes, read again only when its stat moves; a larger one keeps the stat, since reading
gigabytes before every execution would cost more than the step.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import itertools
import os
import threading
from collections.abc import Iterator

# SHA-256 reads about 1.9 GB/s on this machine (hashlib, 64 MiB buffer), so the largest
# file read whole costs some 35 ms, and only in an execution that finds it rewritten.
CONTENT_LIMIT = 64 << 20

# A glob matching more files than this is not watched. Listing and stating 500 files
# took 6.5 ms here (14 ms when each was read), in proportion to the step, which opens
# every one of them; past a few thousand, a landing directory read past ctx would pay
# more for this than some steps take.
GLOB_LIMIT = 4096

# (path, inode, size, modification time) to the digest of the bytes found then.
_SEEN: dict[tuple[str, int, int, int], str] = {}

# Set on a thread while it reads a file here: the record of files a step opens itself
# (runner/opened.py) must not take twicerun's own read, made during the step, for one.
OWN_READ = threading.local()


def fingerprint(path: str, limit: int | None = None) -> str | None:
    """`sha256:<hex>` of the file's bytes, or `inode:size:mtime_ns` for a file larger than
    `limit` (CONTENT_LIMIT unless given); None when there is no such file.

    A path with `*` or `?` is a glob, as DuckDB reads one: `glob:<hex>` over the files it
    matches and their fingerprints, None when it matches none or more than GLOB_LIMIT.
    Their bytes are read only while they come to CONTENT_LIMIT together, so a glob over a
    landing directory of large files is stated, not read."""
    if "*" in path or "?" in path:
        return _glob_fingerprint(path)
    try:
        stat = os.stat(path)
    except (OSError, ValueError):
        return None
    stamp = f"{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}"
    if stat.st_size > (CONTENT_LIMIT if limit is None else limit):
        return stamp
    key = (os.path.abspath(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    digest = _SEEN.get(key)
    if digest is None:
        try:
            with _own(), open(path, "rb") as f:
                digest = "sha256:" + hashlib.file_digest(f, "sha256").hexdigest()
        except OSError:
            return stamp
        _SEEN[key] = digest
    return digest


@contextlib.contextmanager
def _own() -> Iterator[None]:
    """Marks this thread's reads and listings meanwhile as twicerun's (OWN_READ); nests."""
    before = getattr(OWN_READ, "active", False)
    OWN_READ.active = True
    try:
        yield
    finally:
        OWN_READ.active = before


def touched_since(path: str, since_ns: int) -> bool:
    """Whether the file at `path` was modified at or after `since_ns` (wall clock, in
    nanoseconds); for a glob or a directory, any file of rows it holds, or the directory
    itself (a file added or removed there). A step that rewrote a file with the bytes it
    had, or cleaned a directory and exported into it, wrote there: what it left is its
    output, though its digest did not move."""
    with _own():
        try:
            if "*" in path or "?" in path:
                found = list(itertools.islice(glob.iglob(path, recursive=True), GLOB_LIMIT + 1))
                found += sorted({os.path.dirname(p) or "." for p in found})
            elif os.path.isdir(path):
                found = [path, *(e.path for e in itertools.islice(os.scandir(path), GLOB_LIMIT))]
            else:
                found = [path]
        except (OSError, ValueError):
            return False
        for p in found:
            try:
                if os.stat(p).st_mtime_ns >= since_ns:
                    return True
            except OSError:
                continue
    return False


def listing_fingerprint(
    directory: str, suffixes: tuple[str, ...], budget: list[int] | None = None
) -> str | None:
    """`glob:<hex>` over the files directly in `directory` whose names end in one of
    `suffixes`, as a glob's; None when there are none, or more than GLOB_LIMIT. With a
    `budget` (bytes left to read, shared by the directories of one execution), their
    bytes are read only while it lasts, and what is read is taken from it."""
    try:
        with _own(), os.scandir(directory) as entries:
            matched = [
                e.path
                for e in itertools.islice(entries, 16 * GLOB_LIMIT)
                if e.name.lower().endswith(suffixes) and e.is_file()
            ]
    except (OSError, ValueError):
        return None
    return _fingerprint_of(matched, budget)


def _glob_fingerprint(pattern: str) -> str | None:
    try:
        with _own():
            matched = list(itertools.islice(glob.iglob(pattern, recursive=True), GLOB_LIMIT + 1))
    except (OSError, ValueError):
        return None
    return _fingerprint_of(matched)


def _fingerprint_of(matched: list[str], budget: list[int] | None = None) -> str | None:
    if not matched or len(matched) > GLOB_LIMIT:
        return None
    sizes = {}
    for path in matched:
        try:
            sizes[path] = os.stat(path).st_size
        except OSError:
            sizes[path] = 0
    # Together past the limit, every file keeps its stat: one budget for the glob.
    total = sum(sizes.values())
    left = CONTENT_LIMIT if budget is None else budget[0]
    limit = CONTENT_LIMIT if total <= left else -1
    if budget is not None and limit > 0:
        budget[0] -= total
    parts = [f"{path}={fingerprint(path, limit) or ''}" for path in sorted(matched)]
    return "glob:" + hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()
