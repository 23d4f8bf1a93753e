"""Quoting for the SQL twicerun writes itself: one place, so no caller gets it slightly wrong.

A leaf like `errors`: every room may import it. Paths and names come from the
user's disk and pipeline, so they are always quoted, never pasted.
"""

from __future__ import annotations

import re
from pathlib import Path

# A name DuckDB takes bare: an artifact's, a view's, a reader option's.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def string(text: str | Path) -> str:
    """A SQL string literal holding exactly `text`."""
    return "'" + str(text).replace("'", "''") + "'"


def identifier(name: str) -> str:
    """A quoted identifier naming exactly `name`, whatever characters it holds."""
    return '"' + name.replace('"', '""') + '"'


# DuckDB reads a path holding any of these as a glob, and reads the file of that name
# only when the glob matches nothing: `part[1].csv` reads part1.csv where that exists.
_GLOB = str.maketrans({"[": "[[]", "*": "[*]", "?": "[?]"})


def file(path: str | Path) -> str:
    """A SQL string literal that DuckDB's readers take as exactly the file `path` (each glob
    character in a class of its own). Not a path holding a backslash, which DuckDB's glob
    takes for a separator, so that no class can hold it: such a path is left as written,
    which DuckDB reads as that file wherever its glob matches nothing else. (DuckDB's glob
    never lists such a file, so ctx.source never reads one through a glob.)"""
    text = str(path)
    return string(text if "\\" in text else text.translate(_GLOB))


def parquet(path: str | Path, **options: str) -> str:
    """`read_parquet(...)` over one file, with options passed as written (`x = true`)."""
    extra = "".join(f", {key} = {value}" for key, value in options.items())
    return f"read_parquet({file(path)}{extra})"


def shown(column: str) -> str:
    """A column's name as prose can hold it: as it is when it reads as one word, else in
    SQL's double quotes, so that `tot al` or `x.y` cannot be read as two words or a path.
    (Prose, not SQL: every sentence that names a column, in any room, goes through here.)"""
    if column.isidentifier():
        return column
    return identifier(column)
