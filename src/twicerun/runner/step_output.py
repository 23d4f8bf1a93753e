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
from collections.abc import Iterator


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
