"""Standard output whose reader may leave early (`twicerun run p.py | head`).

Click turns a broken pipe into exit 1, which is what `run` says when a step diverged,
so a script with `pipefail` read a finished clean run as a divergent one. Here, once
the reader has gone, the rest of the output goes nowhere and the verb's own exit
code stands: the measurement was made and recorded whether or not anyone read it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


class _Tolerant:
    """A text stream that drops what it cannot deliver once its pipe is broken."""

    def __init__(self, stream: Any):
        self._stream = stream
        self._gone = False

    def _leave(self) -> None:
        # Point the descriptor at /dev/null, so that the flush at exit cannot fail either.
        self._gone = True
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._leave()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._leave()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def reader_may_leave() -> Iterator[None]:
    """Within, a broken pipe on standard output ends the output, not the command."""
    original = sys.stdout
    if original is None or isinstance(original, _Tolerant):
        yield
        return
    sys.stdout = _Tolerant(original)
    try:
        yield
        sys.stdout.flush()
    finally:
        sys.stdout = original
