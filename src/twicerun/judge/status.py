"""Statuses: the one word a report gives a step, from its fire counts.

The words belong to the first vocabulary (a measurement of a step over
repeated runs), and none of them claims more than a fire rate can: a step
that never fired is Status.NO_DIVERGENCE_OBSERVED, not "stable".
"""

from __future__ import annotations

from twicerun.vocabulary.loop import Status


def final_status(
    fired: int, compared: int, amplified_fired: int, amplifier_failed: bool
) -> Status | None:
    """The status from the loop and the amplifiers together.

    A divergence on the real input outranks one found only under stress, which
    outranks an amplifier that could not run; a quiet step whose amplifiers all
    ran and stayed quiet is the only one left Status.NO_DIVERGENCE_OBSERVED.
    """
    if compared == 0:
        return None
    if fired:
        return Status.DIVERGENT
    if amplified_fired:
        return Status.STABLE_ON_THIS_INPUT
    if amplifier_failed:
        return Status.AMPLIFICATION_FAILED
    return Status.NO_DIVERGENCE_OBSERVED
