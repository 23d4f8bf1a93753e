"""Telling an interrupt from a crash.

DuckDB turns a Ctrl-C that arrives during a query into `RuntimeError("Query
interrupted")` (measured with DuckDB 2.0.1), so the exception a step raises
cannot say whether the user asked to stop. While the loop runs, SIGINT is noted
here before the usual KeyboardInterrupt is raised, and the runner asks
`requested()` wherever it would otherwise record a failure: an interrupt is
exit 130 and keeps everything, never a crashed step or a failed amplifier.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_requested = threading.Event()


def _on_sigint(signum, frame) -> None:
    _requested.set()
    raise KeyboardInterrupt


@contextlib.contextmanager
def watching() -> Iterator[None]:
    """Note SIGINT for the duration (main thread only; elsewhere Python owns no handler)."""
    _requested.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def requested() -> bool:
    return _requested.is_set()


def reraise_if_requested(exc: BaseException) -> None:
    """Raise KeyboardInterrupt in place of `exc` when the user asked to stop."""
    if requested() and not isinstance(exc, KeyboardInterrupt):
        raise KeyboardInterrupt from exc
