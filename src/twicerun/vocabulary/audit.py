"""The audit's words: whether a step, run twice more on the same inputs, repeats itself.

A claim about the step, not about a pair of files; ordered, so a step's verdict
is the worst over its artifacts and a pipeline's the worst over its steps. Never
mixed with the ladder's words (two recorded runs) or the loop's (a fire rate).
"""

from __future__ import annotations

from enum import Enum


class Repeatability(Enum):
    """Declared in order: a larger value is a worse verdict."""

    DETERMINISTIC = (0, "deterministic")
    REPRODUCIBLE = (1, "reproducible")
    NOT_REPRODUCIBLE = (2, "not reproducible")

    def __init__(self, rank: int, word: str):
        self.rank = rank
        self.word = word

    def __str__(self) -> str:
        return self.word

    def __lt__(self, other: Repeatability) -> bool:
        return self.rank < other.rank

    def __gt__(self, other: Repeatability) -> bool:
        return self.rank > other.rank
