"""Threads and processes a step starts itself, which no thread count twicerun sets reaches.

twicerun holds DuckDB and pyarrow at the run's thread count, one in the bisect. A step
that hands its work to a `ThreadPoolExecutor`, a `multiprocessing.Pool` or threads of
its own still runs them in parallel there, and in whatever order they finish: a step
that adds their results as they complete differs at "one thread", and was reported as
PERSISTS_SINGLE_THREADED, a claim that one thread had been tried. What the step started
is counted while it runs, by where it was started from, so the report can say so.

Counted: threads started through `threading`, processes through `multiprocessing`
(both of which `concurrent.futures` uses) and programs through `subprocess` (a
`duckdb` or `sort` of its own runs at the machine's thread count). twicerun's own
helpers, and those a library twicerun drives starts (py4j's, for Spark), are not the
step's.
"""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

# Modules whose frames are the machinery of starting, not the code that asked for it.
_MACHINERY = ("threading", "concurrent.futures", "multiprocessing", "subprocess", "os")
# Where a thread, a process and a program are started: (class, method, what it starts).
_STARTS = (
    (threading.Thread, "start", "threads"),
    (multiprocessing.process.BaseProcess, "start", "processes"),
    (subprocess.Popen, "__init__", "processes"),
)
# Modules whose workers are not the step's: twicerun itself, and Spark's bridge to the JVM.
_NOT_THE_STEPS = ("twicerun", "py4j", "pyspark")


def _module(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", ""))


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _under(filename: str, roots: tuple[str, ...]) -> bool:
    # A virtual environment inside the pipeline's directory holds libraries, not its code.
    return filename.startswith(roots) and f"{os.sep}site-packages{os.sep}" not in filename


def _starter(frame: FrameType | None, roots: tuple[str, ...] = ()) -> str | None:
    """Where a start was asked for, as `file:line`: the innermost line of the pipeline's
    own code (under `roots`) that led to it, so a library that starts threads for the
    step (a download manager's pool) is named by the step's line that called it; or,
    with none, the first frame outside the starting machinery. None when that frame is
    twicerun's or Spark's."""
    while frame is not None and _within(_module(frame), _MACHINERY):
        frame = frame.f_back
    if frame is None or _within(_module(frame), _NOT_THE_STEPS):
        return None
    named: FrameType | None = frame if roots else None
    while named is not None and not _under(named.f_code.co_filename, roots):
        named = named.f_back
    at = named or frame
    return f"{Path(at.f_code.co_filename).name}:{at.f_lineno}"


class Started:
    """What a step started while it ran: `"threads at file:line"` -> how many."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def record(self) -> dict[str, int]:
        return dict(sorted(self.counts.items()))


def describe(started: dict[str, int]) -> str:
    """`4 threads (from p.py:17)` and the like, joined, for a report's sentence."""
    parts = []
    for place, count in started.items():
        kind, _, where = place.partition(" at ")
        noun = kind if count != 1 else kind.removesuffix("es" if kind == "processes" else "s")
        parts.append(f"{count} {noun} (from {where})")
    return " and ".join(parts)


@contextlib.contextmanager
def counting(roots: Sequence[Path] = ()) -> Iterator[Started]:
    """Count the threads and processes started until the block ends (only the step runs
    inside it), by where each was started from: `roots` are the pipeline's directories,
    whose lines name a start that a library made for them."""
    started = Started()
    under = tuple(os.path.join(str(r), "") for r in roots)

    def counted(original: Callable[..., Any], kind: str) -> Callable[..., Any]:
        def start(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not (kind == "threads" and self.name.startswith("twicerun")):
                place = _starter(sys._getframe(1), under)
                if place is not None:
                    started.counts[f"{kind} at {place}"] += 1
            return original(self, *args, **kwargs)

        return start

    originals = [getattr(owner, name) for owner, name, _ in _STARTS]
    for (owner, name, kind), original in zip(_STARTS, originals, strict=True):
        setattr(owner, name, counted(original, kind))
    try:
        yield started
    finally:
        for (owner, name, _), original in zip(_STARTS, originals, strict=True):
            setattr(owner, name, original)
