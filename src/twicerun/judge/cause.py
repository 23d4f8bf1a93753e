"""Why a step fired, and what a zero out of m comparisons can support.

Cause comes from re-executing a step that fired at threads=1: if it stops
firing there, its answer depended on how the work was split between threads
(Cause.PARALLEL_ORDER); if it keeps firing, the thread count is not the explanation
(Cause.PERSISTS_SINGLE_THREADED), and the tool does not guess among what is left
(a clock read, appended state, a data-dependent branch, something outside).

A zero is m clean comparisons, not a property. It carries the one-sided upper
confidence bound on the per-comparison firing probability (Clopper-Pearson;
for zero fires it has the closed form 1 - (1 - c)^(1/m)), with the caveat that
runs sharing one process, page cache and machine are not independent trials.
"""

from __future__ import annotations

import math

from twicerun.vocabulary.loop import Cause

CONFIDENCE = 0.95


def cause(fired: int, compared: int) -> Cause | None:
    """The cause label from the single-threaded re-executions; None when nothing was compared."""
    if compared == 0:
        return None
    return Cause.PERSISTS_SINGLE_THREADED if fired else Cause.PARALLEL_ORDER


def quiet_chance(fired: int, compared: int, quiet: int) -> float:
    """How likely `quiet` more comparisons in a row are to show no difference, for a
    step measured to differ in `fired` of `compared` and otherwise unknown.

    The posterior predictive under a uniform prior on the step's rate: the mean of
    (1 - p)^quiet over Beta(fired + 1, compared - fired + 1). The bisect stops once
    this falls below 1 - CONFIDENCE: had one thread differed as often as the loop's
    threads did, that many quiet comparisons would rarely have come up.
    """
    a, b = fired + 1, compared - fired + 1
    return math.exp(_log_beta(a, b + quiet) - _log_beta(a, b))


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _binomial_cdf(k: int, m: int, p: float) -> float:
    return sum(math.comb(m, i) * p**i * (1 - p) ** (m - i) for i in range(k + 1))


def upper_bound(fired: int, compared: int, confidence: float = CONFIDENCE) -> float | None:
    """One-sided upper confidence bound on the per-comparison rate (Clopper-Pearson)."""
    if compared <= 0:
        return None
    if fired >= compared:
        return 1.0
    alpha = 1 - confidence
    if fired == 0:
        return 1 - alpha ** (1 / compared)
    low, high = fired / compared, 1.0
    for _ in range(100):  # bisection on P(X <= fired; p) = alpha
        middle = (low + high) / 2
        if _binomial_cdf(fired, compared, middle) > alpha:
            low = middle
        else:
            high = middle
    return high
