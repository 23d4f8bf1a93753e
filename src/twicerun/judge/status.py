"""Statuses: the one word a report gives a step, from its fire counts.

The words belong to the first vocabulary (a measurement of a step over
repeated runs), and none of them claims more than a fire rate can: a step
that never fired is NO_DIVERGENCE_OBSERVED, not "stable".
"""

from __future__ import annotations

from twicerun.vocabulary.loop import (
    AMPLIFICATION_FAILED,
    DIVERGENT,
    NO_DIVERGENCE_OBSERVED,
    STABLE_ON_THIS_INPUT,
    STATUSES,
)

__all__ = [
    "AMPLIFICATION_FAILED",
    "DIVERGENT",
    "NO_DIVERGENCE_OBSERVED",
    "STABLE_ON_THIS_INPUT",
    "STATUSES",
    "final_status",
    "loop_status",
]


def loop_status(fired: int, compared: int) -> str | None:
    """The status the main loop alone supports; None where nothing could be compared."""
    if compared == 0:
        return None
    return DIVERGENT if fired > 0 else NO_DIVERGENCE_OBSERVED


def final_status(
    fired: int, compared: int, amplified_fired: int, amplifier_failed: bool
) -> str | None:
    """The status from the loop and the amplifiers together.

    A divergence on the real input outranks one found only under stress, which
    outranks an amplifier that could not run; a quiet step whose amplifiers all
    ran and stayed quiet is the only one left NO_DIVERGENCE_OBSERVED.
    """
    if compared == 0:
        return None
    if fired:
        return DIVERGENT
    if amplified_fired:
        return STABLE_ON_THIS_INPUT
    if amplifier_failed:
        return AMPLIFICATION_FAILED
    return NO_DIVERGENCE_OBSERVED
