"""Pruning old invocation directories, on the success path only.

Only an invocation whose manifest says it completed is ever a candidate. A
live invocation has not completed, and a failed or interrupted one never
will, so neither can be pruned: the run you would want to look at after a
crash is exactly the one that must survive the next invocation.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from twicerun.storage.layout import COMPLETED, Invocation, find_invocations


def prune(run_dir: Path, keep: int, current: Invocation) -> list[str]:
    """Remove all but the newest `keep` completed invocations; `keep=0` keeps everything.

    Returns the names of the directories removed.
    """
    if keep <= 0:
        return []
    completed = []
    for invocation in find_invocations(run_dir):
        try:
            manifest = invocation.manifest()
        except (OSError, ValueError):
            continue  # unreadable manifest: not ours to judge, so not ours to delete
        if manifest.get("outcome") == COMPLETED:
            completed.append((manifest.get("started", 0.0), invocation.root.name, invocation))
    completed.sort(key=lambda item: (item[0], item[1]))
    survivors = {inv.root.resolve() for _, _, inv in completed[-keep:]}
    survivors.add(current.root.resolve())
    removed = []
    for _, name, invocation in completed:
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
        removed.append(name)
    return removed


def kept_failures(run_dir: Path) -> list[str]:
    """Invocation directories left by failed or interrupted invocations."""
    names = []
    for invocation in find_invocations(run_dir):
        try:
            outcome = invocation.manifest().get("outcome")
        except (OSError, ValueError):
            continue
        if outcome in ("failed", "interrupted"):
            names.append(invocation.root.name)
    return names
