"""DuckDB's errors about a step's SQL, with `LINE n` counted in the text the step wrote.

ctx runs a step's query inside SQL of its own (`COPY (` on the line above it, a
`CREATE TEMP TABLE ... AS` for ctx.sql), and runs each statement of a string of several
on its own. DuckDB numbers the lines of what it was handed, so a one-line query that
named a column wrongly was reported at `LINE 2`, and the third statement of a string at
its own line 2. The snippet under `LINE n` is the step's own line either way; only the
number, and the caret under it, are put right.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import duckdb

_LINE = re.compile(r"LINE (\d+): ")
_CARET = re.compile(r" *\^+ *")


def line_offset(text: str, statement: str, start: int = 0) -> tuple[int, int]:
    """How many lines of `text` come before `statement`, found at or after `start`, and
    where the search for the next statement starts; (0, start) where it is not found
    as written (DuckDB may give a statement back rewritten)."""
    found = text.find(statement, start) if statement else -1
    if found < 0:
        return 0, start
    return text.count("\n", 0, found), found + len(statement)


def renumbered(message: str, shift: int, added: int) -> str:
    """`message` with every `LINE n:` past the first `added` lines moved by `shift`, and
    the caret line under it moved with the number's width."""
    lines = message.split("\n")
    for i, line in enumerate(lines):
        match = _LINE.match(line)
        if match is None or int(match.group(1)) <= added:
            continue  # a line of ctx's own SQL: it says nothing of the step's text
        old = match.group(0)
        new = f"LINE {int(match.group(1)) + shift}: "
        lines[i] = new + line[len(old) :]
        if i + 1 < len(lines) and _CARET.fullmatch(lines[i + 1]):
            width = len(new) - len(old)
            caret = lines[i + 1]
            lines[i + 1] = " " * width + caret if width >= 0 else caret[-width:]
    return "\n".join(lines)


@contextlib.contextmanager
def as_written(added: int, offset: int = 0) -> Iterator[None]:
    """Raise a DuckDB error from inside with its line numbers in the step's own text:
    ctx put `added` lines of its own before the statement, which began `offset` lines
    into the string the step passed."""
    try:
        yield
    except duckdb.Error as exc:
        shift = offset - added
        message = str(exc)
        fixed = renumbered(message, shift, added) if shift else message
        if fixed == message:
            raise
        try:
            again = type(exc)(fixed)
        except Exception:  # an error class that takes other arguments: leave it whole
            raise exc from None
        raise again.with_traceback(exc.__traceback__) from None
