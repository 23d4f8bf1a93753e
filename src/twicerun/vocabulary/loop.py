"""The loop's words: what repeated runs of a step measured, and nothing about a baseline.

Each kind of word is an enum whose members are written into the Result as their
values, so a renderer, the judge and the gate compare members, never spellings.
Members are declared in the order a report lists them.

None of them claims more than a fire rate can: a step that never fired is
NO_DIVERGENCE_OBSERVED, not "stable".
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """The one word a report gives a step, from its fire counts."""

    DIVERGENT = "DIVERGENT"
    STABLE_ON_THIS_INPUT = "STABLE_ON_THIS_INPUT"
    NO_DIVERGENCE_OBSERVED = "NO_DIVERGENCE_OBSERVED"
    AMPLIFICATION_FAILED = "AMPLIFICATION_FAILED"


class Difference(StrEnum):
    """A class of difference the oracle found between an artifact and run 1's copy."""

    SCHEMA = "SCHEMA"
    ROW_MISSING = "ROW_MISSING"
    ROW_EXTRA = "ROW_EXTRA"
    MULTIPLICITY = "MULTIPLICITY"
    VALUE_DRIFT = "VALUE_DRIFT"


class Cause(StrEnum):
    """Why a step fired, from re-executing it at threads=1 on run 1's inputs."""

    PARALLEL_ORDER = "PARALLEL_ORDER"
    PERSISTS_SINGLE_THREADED = "PERSISTS_SINGLE_THREADED"


class Hint(StrEnum):
    """A suspicion the findings support without the bisect deciding it."""

    WALL_CLOCK = "WALL_CLOCK"
    RANDOM_UUID = "RANDOM_UUID"


class Amplifier(StrEnum):
    """An input built to make a quiet step's non-determinism show itself."""

    TIE_COLLAPSE = "tie collapse"
    THREAD_COUNT = "thread count"
    ROW_MULTIPLICATION = "row multiplication"
    ARRIVAL_ORDER = "arrival order"
    FILE_ORDER = "file order"


class Presence(StrEnum):
    """Which sides of a comparison hold an artifact."""

    BOTH = "both"
    REFERENCE_ONLY = "reference only"
    LATER_ONLY = "later only"


class SettledBy(StrEnum):
    """What decided whether an artifact came back the same: the cheapest proof that could."""

    BYTES = "bytes"
    CANONICAL = "canonical digest"
    ORACLE = "oracle"
    PRESENCE = "presence"


class Judged(StrEnum):
    """The policy's word for one comparison."""

    SAME = "same"
    FIRES = "fires"
    TOLERATED = "tolerated"


class Reexecution(StrEnum):
    """The one re-execution of a step that is not an amplifier."""

    BISECT = "bisect"


# The findings fields (as the Result spells them) that count rows of one side that
# found no partner on the other: the measure of how far two answers are apart in rows.
UNMATCHED_FIELDS = ("missing", "extra", "multiplicity_missing", "multiplicity_extra")

# The single-threaded bisect's series kind.
BISECT = Reexecution.BISECT


def ordered(members, kind: type[StrEnum]) -> list:
    """The members present, in the order their enum declares them (the report's order)."""
    present = set(members)
    return [m for m in kind if m in present]
