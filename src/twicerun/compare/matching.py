"""The pairing of two equal lists of rows whose furthest move is least (a bottleneck matching).

Rows that have no key left to pair them by can only be paired by their values. Sorting
both sides by one column pairs them well while drift leaves that column's order alone;
where rows sit within a few ulps of each other in every column, no one order does, and the
pairing it gives can hand a row another row's values. For a handful of rows the best
pairing is found outright: the least distance at which every row still has a partner,
searched over the distances that occur, each tried with augmenting paths (Kuhn's method).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

Row = TypeVar("Row")


def least_furthest(
    left: Sequence[Row], right: Sequence[Row], distance: Callable[[Row, Row], int]
) -> list[int]:
    """For each row of `left`, the index of its partner in `right`: a pairing whose largest
    `distance` is the least any pairing has. Ties between pairings go to the one the
    search meets first, which depends only on the rows' order, so the same lists give the
    same pairing every time."""
    if len(left) != len(right):
        raise ValueError("both sides need as many rows")
    n = len(left)
    d = [[distance(a, b) for b in right] for a in left]
    candidates = sorted({x for row in d for x in row})
    lo, hi = 0, len(candidates) - 1
    best: list[int] | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        found = _perfect(d, n, candidates[mid])
        if found is None:
            lo = mid + 1
        else:
            best, hi = found, mid - 1
    assert best is not None or n == 0  # every pairing is under the largest distance
    return best or []


def _perfect(d: list[list[int]], n: int, limit: int) -> list[int] | None:
    """A pairing using only distances up to `limit`, or None when there is none."""
    partner_of_right = [-1] * n
    for i in range(n):
        if not _augment(d, n, limit, i, [False] * n, partner_of_right):
            return None
    pairing = [-1] * n
    for j, i in enumerate(partner_of_right):
        pairing[i] = j
    return pairing


def _augment(
    d: list[list[int]], n: int, limit: int, i: int, seen: list[bool], partner: list[int]
) -> bool:
    # Iterative depth-first search for an augmenting path from left row i, so that a
    # group of rows never meets Python's recursion limit.
    stack = [(i, 0)]
    path: list[tuple[int, int]] = []
    while stack:
        row, start = stack.pop()
        for j in range(start, n):
            if seen[j] or d[row][j] > limit:
                continue
            seen[j] = True
            if partner[j] == -1:
                path.append((row, j))
                for r, c in path:
                    partner[c] = r
                return True
            path.append((row, j))
            stack.append((row, j + 1))
            stack.append((partner[j], 0))
            break
        else:
            if path:
                path.pop()
    return False
