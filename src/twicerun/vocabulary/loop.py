"""The loop's statuses: the one word a report gives a step, from its fire counts.

None of them claims more than a fire rate can: a step that never fired is
NO_DIVERGENCE_OBSERVED, not "stable".
"""

from __future__ import annotations

DIVERGENT = "DIVERGENT"
STABLE_ON_THIS_INPUT = "STABLE_ON_THIS_INPUT"
NO_DIVERGENCE_OBSERVED = "NO_DIVERGENCE_OBSERVED"
AMPLIFICATION_FAILED = "AMPLIFICATION_FAILED"

STATUSES = (DIVERGENT, STABLE_ON_THIS_INPUT, NO_DIVERGENCE_OBSERVED, AMPLIFICATION_FAILED)
