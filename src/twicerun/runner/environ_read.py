"""Environment variables a step's own code reads while it runs, by name and digest.

A job driven by a scheduler takes its date or its target from the environment
(`os.environ["RUN_DATE"]`). Run again with another value, the step computes another
answer: `reproduce` called it DIVERGED and `diff` "diverged with identical inputs", as if
it had stopped repeating itself. Each variable the step reads is recorded, so a verdict
can name it instead.

Only reads made by the pipeline's own code (its file, or a module beside it) count:
libraries read the environment for their own settings (a temporary directory, a
proxy), which say nothing of the answer. Values are recorded as digests, never as
text, since a step may read a secret. A step that reads more than `COPIED` variables
has copied the environment (for a subprocess, say) rather than read settings, and
nothing is recorded for it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from twicerun.storage.receipts import value_digest

COPIED = 32
_ENVIRON = type(os.environ)


def _machinery(filename: str) -> bool:
    """Frames of the mapping's own machinery (os.py, the frozen collections.abc, this
    file), not of the code that read."""
    return filename in (os.__file__, __file__) or filename.startswith("<frozen")


class EnvironmentReads:
    """What the code under `roots` read from `os.environ` so far: name to digest."""

    def __init__(self, roots: tuple[Path, ...], start: dict[str, str]):
        self._roots = tuple(os.path.join(str(r), "") for r in roots)
        # The environment as the step found it: a variable the step sets and then reads
        # came from the step, not from outside, and reproduce would find it unset.
        self._start = start
        self.read: dict[str, str] = {}

    def note(self, key: Any) -> None:
        if not isinstance(key, str) or key in self.read:
            return
        frame = sys._getframe(1)
        while frame is not None and _machinery(frame.f_code.co_filename):
            frame = frame.f_back
        if frame is None:
            return
        where = os.path.abspath(frame.f_code.co_filename)
        if where.startswith(self._roots) and f"{os.sep}site-packages{os.sep}" not in where:
            self.read[key] = value_digest(self._start.get(key))

    def recorded(self) -> dict[str, str] | None:
        """The reads, or None where the step copied the whole environment."""
        return None if len(self.read) > COPIED else dict(sorted(self.read.items()))


# The reads of the step running now, if one is: steps run one at a time.
_active: EnvironmentReads | None = None


def _install() -> None:
    """Put the noting `__getitem__` on os.environ's class, once per process, and leave it.

    Replacing and restoring it around every execution changed the class twice per
    execution. On CPython 3.13.0, after 500 such executions (1,000 changes to the class),
    `os.environ.get` went on calling the original `__getitem__`, so nothing a later step
    read was recorded; 3.11 and 3.12 did not do this. The suite's run on 3.13.0 showed it,
    and tests/test_environ_read.py keeps the class changed once."""
    if getattr(_ENVIRON.__getitem__, "_twicerun_notes", False):
        return
    original = _ENVIRON.__getitem__

    def __getitem__(self, key):
        reads = _active
        if reads is not None and self is os.environ:
            _quietly(reads.note, key)
        return original(self, key)

    __getitem__._twicerun_notes = True  # type: ignore[attr-defined]
    _ENVIRON.__getitem__ = __getitem__


@contextlib.contextmanager
def reading_environment(roots: tuple[Path, ...]) -> Iterator[EnvironmentReads]:
    """Note what the code under `roots` reads from os.environ meanwhile (its `[]`, `get`,
    `in` and `os.getenv` all go through `__getitem__`)."""
    global _active
    _install()
    reads = EnvironmentReads(roots, dict(os.environ))
    outer, _active = _active, reads
    try:
        yield reads
    finally:
        _active = outer


def _quietly(note, key: Any) -> None:
    # Reading the environment must behave exactly as it would without twicerun.
    with contextlib.suppress(Exception):
        note(key)
