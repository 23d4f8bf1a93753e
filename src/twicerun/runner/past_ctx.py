"""What a step read past ctx that can be told apart run by run.

Containment hands every later run's step run 1's artifacts, so a difference upstream
cannot reach it through `ctx.read`. Rows also pass between steps past ctx: a value of
the pipeline's file one step fills and another reads, an environment variable, a file
one step writes and another reads. Each execution's receipt keeps what it found of these
(digests of values and variables, stamps of files); here they are named as the reports
name them, so that a run, a bisect or an audit can tell which of them moved.
"""

from __future__ import annotations

import fnmatch
import os

from twicerun.display import few
from twicerun.runner.records import Records
from twicerun.storage.layout import LOOP, RunAddress
from twicerun.storage.receipts import Receipt


def uncontained(receipt: Receipt) -> dict[str, str]:
    """What an execution read past ctx that can be told apart run by run, as the report
    names it, with its digest or stamp: plain values of its file, environment variables,
    files it opened beside the pipeline, files its SQL named, directories it listed."""
    found = {f"{name} of its file": d for name, d in (receipt.values_read or {}).items()}
    found.update({f"environment variable {n}": d for n, d in (receipt.environment or {}).items()})
    # A file read through ctx.source has its own record, and its own note when it changed.
    sourced = {os.path.abspath(f.path) for s in receipt.sources for f in s.files}
    for files in (
        receipt.opened or {},
        receipt.files_named,
        receipt.files_in_sql,
        receipt.files_listed,
    ):
        found.update(
            {
                f"{'files' if '*' in path or '?' in path else 'file'} {path}": d
                for path, d in files.items()
                if os.path.abspath(path) not in sourced
            }
        )
    return found


def uncontained_moved(records: Records, index: int, runs: int) -> list[str]:
    """What a step read past ctx that was not as run 1 found it in some later loop run: a
    value, a variable or a file an earlier step (or an earlier run) changed, which
    containment does not hold to run 1's."""
    seen = [records.get(RunAddress(LOOP, k), index) for k in range(1, runs + 1)]
    found = [uncontained(r) for r in seen if r is not None]
    if len(found) < 2:
        return []
    first = found[0]
    return sorted(
        {
            n
            for later in found[1:]
            for n in first.keys() | later.keys()
            if first.get(n) != later.get(n)
        }
    )


def changed_by(
    records: Records,
    names: list[str],
    index: int,
    runs: int,
    steps: dict[int, str],
    directory: str | None = None,
) -> list[str]:
    """Of `names` (uncontained_moved's), the files another step changed while it ran in
    the loop, each as "step N name writes file X past ctx.write": the place to look, where
    the note on the step that reads them can only say that something did. `steps` names
    each index; a file it opened or a directory it listed is named relative to the
    pipeline's `directory`, one its code or SQL names relative to the working directory."""
    paths = {name: name.split(" ", 1)[1] for name in names if name.startswith(("file ", "files "))}
    if not paths:
        return []
    found = []
    for other, step_name in sorted(steps.items()):
        if other == index:
            continue
        changed = {
            # A directory keeps its separator: what lies under it was changed.
            os.path.join(os.path.abspath(path), "")
            if path.endswith(("/", os.sep))
            else os.path.abspath(path)
            for k in range(1, runs + 1)
            if (receipt := records.get(RunAddress(LOOP, k), other)) is not None
            for path in receipt.files_changed
        }
        if not changed:
            continue
        hit = [
            name
            for name, path in paths.items()
            if _covers(path, changed)
            or (directory is not None and _covers(os.path.join(directory, path), changed))
        ]
        if hit:
            found.append(f"step {other} {step_name} writes {_named(hit)} past ctx.write")
    return found


def _named(names: list[str]) -> str:
    """ "file a", "files a and b", or as many as fit with how many more: a step that lands a
    batch per run wrote one file a run."""
    if all(n.startswith("file ") for n in names):
        paths = [n.removeprefix("file ") for n in names]
        return f"{'file' if len(paths) == 1 else 'files'} {few(paths, 3)}"
    return few(names, 3)


def _covers(path: str, changed: set[str]) -> bool:
    """Whether a file the reader named (a path, a glob, or a listed "dir/*") is one of the
    `changed` paths, holds one, or lies in a changed directory (one ending in a separator)."""
    pattern = os.path.abspath(path)
    if any(c.endswith(os.sep) and pattern.startswith(c) for c in changed):
        return True
    if "*" in path or "?" in path:
        return any(fnmatch.fnmatch(c, pattern) for c in changed)
    return pattern in changed
