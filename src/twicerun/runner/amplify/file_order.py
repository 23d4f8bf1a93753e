"""File order: the files of a multi-file source read in other orders.

The answer to a union of files must not depend on the order they are listed in.
DuckDB takes a list's column set from its first file, so a backfill listing its
months oldest first can silently drop a column that later months added, and
the same list newest first raises. A loop that always lists them the same way
agrees with itself every time; another order shows the dependence.

A pure function over positions: run 1 of a series reads the list as the step
wrote it, and each later run one of the other orders, reversed first, then each
rotation, in turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from twicerun.runner.amplify.base import Applied, Declined, Outcome


def orders(count: int) -> list[list[int]]:
    """Every order this amplifier tries for `count` files, the listed order excluded."""
    listed = list(range(count))
    found: list[list[int]] = []
    for candidate in [listed[::-1], *(listed[k:] + listed[:k] for k in range(1, count))]:
        if candidate != listed and candidate not in found:
            found.append(candidate)
    return found


def other_order(files: Sequence[str], variant: int) -> tuple[list[str] | None, Outcome]:
    """The files in the `variant`-th other order (1 = reversed), or why there is none."""
    if len(files) < 2:
        return None, Declined(
            f"its source is {'one file' if files else 'no file'}, so there is no other order"
        )
    choices = orders(len(files))
    order = choices[(variant - 1) % len(choices)]
    how = (
        "reversed"
        if order == list(range(len(files)))[::-1]
        else f"rotated to start at file {order[0] + 1}"
    )
    return [files[i] for i in order], Applied(how)


def permutation(count: int, variant: int) -> list[int]:
    """Positions for the `variant`-th other order of `count` files (identity for one file)."""
    if count < 2:
        return list(range(count))
    choices = orders(count)
    return choices[(variant - 1) % len(choices)]
