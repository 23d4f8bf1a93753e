"""Pruning old invocation directories, on the success path only.

Only an invocation whose manifest says it completed is ever a candidate. A
live invocation has not completed, and a failed or interrupted one never
will, so neither can be pruned: the run you would want to look at after a
crash is exactly the one that must survive the next invocation.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
from pathlib import Path

from twicerun.storage.atomic import is_temporary
from twicerun.storage.layout import (
    COMPLETED,
    FAILED,
    INTERRUPTED,
    INVOCATION_NAME,
    KILLED,
    RUNNING,
    Invocation,
    invocations_with,
)
from twicerun.storage.processes import alive

# The manifest field in which an invocation that pruned names what it removed, and what
# the invocations it removed had named, so that a verb given a name retention took can say
# so; the newest this many, to bound the manifest.
REMOVED = "removed"
REMEMBERED = 200
# What a verb says of a name removed_since recognises.
REMOVED_BY_KEEP = (
    "a later `twicerun run` of the same pipeline in the same run directory removed it when it "
    "completed, since each one keeps only that pipeline's newest completed invocations there "
    "(--keep, 1 by default); record a run you mean to compare later with --keep 0, or in a "
    "--run-dir of its own"
)


def prune(run_dir: Path, keep: int, current: Invocation) -> list[str]:
    """Remove all but the newest `keep` completed invocations of `current`'s pipeline;
    `keep=0` keeps everything. Another pipeline's invocations are its own to prune: the
    gate runs several pipelines into one run directory in turn, and a user may too.

    Returns the names of the directories removed, and records them in `current`'s manifest.
    """
    if keep <= 0:
        return []
    _finish_removals(run_dir)
    pipeline = _pipeline_of(current.manifest())
    # Oldest first; an unreadable manifest is not ours to judge, so not ours to delete, and
    # one that names no pipeline (or another) is not this pipeline's.
    completed = [
        (invocation, manifest)
        for invocation, manifest in invocations_with(run_dir, COMPLETED)
        if pipeline is not None and _pipeline_of(manifest) == pipeline
    ]
    survivors = {inv.root.resolve() for inv, _ in completed[-keep:]}
    survivors.add(current.root.resolve())
    removed, history = [], []
    for invocation, manifest in completed:
        name = invocation.root.name
        if invocation.root.resolve() in survivors:
            continue
        # Rename first, so an interrupted removal never leaves something that
        # looks like an invocation directory with half its files.
        doomed = invocation.root.with_name(f".removing-{name}")
        try:
            invocation.root.rename(doomed)
        except OSError:
            continue
        with contextlib.suppress(OSError):
            shutil.rmtree(doomed)
        history.extend(_remembered(manifest))
        removed.append(name)
    if removed:
        # Only a message depends on this record, never a removal: failing to write it loses
        # nothing the run measured.
        with contextlib.suppress(OSError, ValueError):
            current.update_manifest(**{REMOVED: (history + removed)[-REMEMBERED:]})
    return removed


# What a removal renames an invocation directory to (layout names them
# YYYYMMDD-HHMMSS-xxxx); a look-alike of the user's own is left alone.
_REMOVING = re.compile(r"\.removing-" + INVOCATION_NAME.pattern)


def _finish_removals(run_dir: Path) -> None:
    """Remove what an earlier removal left when it was cut short (Ctrl-C, a file it could
    not delete then): renamed already, it is no invocation, and nothing else would."""
    with contextlib.suppress(OSError):
        for path in run_dir.iterdir():
            if _REMOVING.fullmatch(path.name) and path.is_dir() and not path.is_symlink():
                with contextlib.suppress(OSError):
                    shutil.rmtree(path)


def removed_since(path: Path) -> bool:
    """Whether `path`, not there now, names an invocation that --keep removed from the run
    directory it was in: a completed invocation there remembers removing it."""
    if INVOCATION_NAME.fullmatch(path.name) is None:
        return False
    return any(
        path.name in _remembered(manifest)
        for _, manifest in invocations_with(path.parent, COMPLETED)
    )


def _pipeline_of(manifest: dict) -> str | None:
    """The pipeline file an invocation ran, resolved as it was then (as given, in a
    manifest that did not resolve it)."""
    path = manifest.get("pipeline_resolved") or manifest.get("pipeline")
    return path if isinstance(path, str) else None


def _remembered(manifest: dict) -> list[str]:
    names = manifest.get(REMOVED)
    if not isinstance(names, list):
        return []
    return [n for n in names if isinstance(n, str)]


def kept_failures(run_dir: Path) -> list[str]:
    """Invocation directories left by failed, interrupted or killed invocations."""
    return [inv.root.name for inv, _ in invocations_with(run_dir, FAILED, INTERRUPTED, KILLED)]


def reap(run_dir: Path, current: Invocation) -> list[str]:
    """Mark invocations whose process died without a word as killed, and clear their
    temporary files; returns their names.

    Only invocations started on this host are judged, by their recorded pid: on a
    run directory shared between machines a pid elsewhere means nothing here.
    """
    reaped = []
    host = socket.gethostname()
    for invocation, manifest in invocations_with(run_dir, RUNNING):
        if invocation.root.resolve() == current.root.resolve() or manifest.get("host") != host:
            continue
        if alive(manifest.get("pid"), manifest.get("pid_started")):
            continue
        for path in invocation.root.rglob("*"):
            if is_temporary(path) and path.is_file():
                with contextlib.suppress(OSError):
                    path.unlink()
        with contextlib.suppress(OSError, ValueError):
            invocation.update_manifest(outcome=KILLED, reaped_by=current.root.name)
            reaped.append(invocation.root.name)
    return reaped
