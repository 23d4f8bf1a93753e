"""How text is shown: names listed as a sentence lists them, how many terminal columns a
string takes, and padding to a number of columns.

A step's name is a Python identifier, so it can be `集計` as well as `total`. `str.ljust`
and f-string widths count characters, and a terminal shows an East Asian wide or
full-width character in two columns and a combining mark in none, so a report
padded by characters lines its columns up for ASCII names only.
"""

from __future__ import annotations

import unicodedata


def listed(names: list[str], word: str = "and") -> str:
    """`a`, `a and b`, `a, b and c` (or `or`): names as a sentence lists them. One for
    every room, so the runner's details, the reports and the verdicts list alike."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


def some(names, shown: int = 5) -> str:
    """The first `shown` names, and how many more: a list that may run to hundreds (a
    gate's steps, a wide artifact's columns) kept to one line."""
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown:,} more"


def few(names: list[str], shown: int = 5) -> str:
    """`listed` while there are at most `shown` names, `some` past that."""
    return listed(names) if len(names) <= shown else some(names, shown)


def columns(text: str) -> int:
    """The columns `text` takes in a terminal: two for a wide or full-width character,
    none for a combining mark, one for anything else."""
    total = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        total += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return total


def widest(texts) -> int:
    """The columns the widest of `texts` takes; 0 for none."""
    return max((columns(t) for t in texts), default=0)


def ljust(text: str, width: int) -> str:
    """`text` followed by spaces up to `width` columns (as `f"{text:<{width}}"` for ASCII)."""
    return text + " " * max(0, width - columns(text))


def rjust(text: str, width: int) -> str:
    """Spaces up to `width` columns, then `text` (as `f"{text:>{width}}"` for ASCII)."""
    return " " * max(0, width - columns(text)) + text


def differ_too(names: list[str]) -> str:
    """The other artifacts of a step that differ, after the one a verb explains: named from
    their digests, the oracle run on none of them."""
    return f"{few(names, 3)} {'differs' if len(names) == 1 else 'differ'} too"


def unseeded_generator(generators: str) -> str:
    """What every report says of a step that drew from a process-wide generator (Python's
    random module, numpy's global one) and left it in another state each run. "Without
    seeding it" read as wrong to a step that called `random.seed()` with no value, which
    takes a seed from the system afresh each time: no seed the step fixed, either way."""
    return f"drew from {generators} with no seed fixed in the step"


def unseeded_draw(query: str) -> str:
    """What the loop's notes and the verdicts say of a step whose SQL drew at random with
    nothing in the step seeding it (storage/context.py's first_draw), quoting the
    query: one sentence, so that every report names it alike."""
    return f"its SQL draws at random and nothing in the step seeds the draw: {query}"
