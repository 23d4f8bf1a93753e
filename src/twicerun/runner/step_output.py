"""Where what a step prints goes: stderr, down to the file descriptor.

stdout is twicerun's: the report, or the Result with `--json -`, which a script reads
whole. A step's `print` is sent to stderr by `contextlib.redirect_stdout` around each
call, but that only moves Python's `sys.stdout`: a subprocess the step starts (a copy
tool, a cloud CLI), `os.write(1, ...)` or a C extension writes to descriptor 1 itself.
So while steps run, descriptor 1 is a copy of descriptor 2, and it is put back after:
once per invocation or replay, not per step, since two system calls per execution
would sit on the loop's own path.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def steps_print_to_stderr() -> Iterator[None]:
    # Nothing of twicerun's waits in sys.stdout's buffer: nothing below the CLI writes
    # there, and the CLI's click.echo flushes each line.
    try:
        saved = os.dup(1)
    except OSError:  # no descriptor 1 at all: nothing a step writes there can matter
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


@contextlib.contextmanager
def imports_print_to_stderr() -> Iterator[None]:
    """Importing a pipeline runs its top-level code, which prints like a step can (a
    banner, a config dump), and used to land on stdout ahead of `--json -`'s document."""
    with steps_print_to_stderr(), contextlib.redirect_stdout(sys.stderr):
        yield


class _MainThreadOnly:
    """sys.stdout for the main thread, sys.stderr for every other one."""

    def __init__(self, stdout: Any):
        self._stdout = stdout

    def _target(self) -> Any:
        if threading.current_thread() is threading.main_thread():
            return self._stdout
        return sys.stderr

    def write(self, text: str) -> int:
        return self._target().write(text)

    def writelines(self, lines: Any) -> None:
        self._target().writelines(lines)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stdout, name)


@contextlib.contextmanager
def other_threads_print_to_stderr() -> Iterator[None]:
    """For as long as a command runs, what a thread other than the main one prints goes to
    stderr. A thread a step started can outlive the step, and between steps, or while the
    CLI writes the report or `--json -`'s document, its `print` went to stdout: a line of
    it landed in front of the Result, which a script could then not parse. twicerun's own
    output is written by the main thread; its helper threads print nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    original = sys.stdout
    sys.stdout = _MainThreadOnly(original)
    try:
        yield
    finally:
        # A step's thread still running prints on until the process ends, after the
        # command has returned too: then sys.stdout stays as it is for the process.
        left = [
            t
            for t in threading.enumerate()
            if t is not threading.main_thread() and not t.name.startswith("twicerun-")
        ]
        if isinstance(sys.stdout, _MainThreadOnly) and not left:
            sys.stdout = original
