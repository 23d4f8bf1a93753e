"""The ladder's words: how two recorded runs of a pipeline compare, step by step, and
whether one step re-executed now gives what its receipt says it gave.

A vocabulary of its own, beside the loop's (a fire rate over repeated runs) and
the audit's (a step against itself): `diff` and `localize` answer "do these two
runs agree", `reproduce` answers "does this step still produce its record".
"""

from __future__ import annotations

from enum import StrEnum


class Rung(StrEnum):
    """Exactly one per step of a two-run comparison, in chain order."""

    SAME = "same"
    FIRST_DIFFERENCE = "FIRST DIFFERENCE"
    DOWNSTREAM = "downstream"
    RECONVERGED = "reconverged"
    COULD_NOT_CHECK = "COULD NOT CHECK"


class Comparing(StrEnum):
    """One word for a whole two-run comparison (`diff`, `localize` of two runs)."""

    IDENTICAL = "identical"
    DIVERGED = "diverged"
    NOT_COMPARABLE = "not comparable"
    REFUSED = "refused"
    COULD_NOT_CHECK = "could not check"


class Locating(StrEnum):
    """One word for `localize` over the runs of one invocation."""

    CLEAN = "clean"
    LOCATED = "located"
    REFUSED = "refused"
    COULD_NOT_CHECK = "could not check"


class Replay(StrEnum):
    """A step re-executed from its recorded inputs, against what its receipt says."""

    REPRODUCED = "REPRODUCED"
    DIVERGED = "DIVERGED"
    COULD_NOT_CHECK = "COULD NOT CHECK"
