"""The reassociation bound: how far a float sum may move when its terms are added in
another order, derived rather than picked.

Summing n floating-point terms in any order gives a result within
gamma_n * sum(|x_i|) of the exact sum, where gamma_n = n*u / (1 - n*u) and u is
the unit roundoff (2^-53 for DOUBLE, 2^-24 for FLOAT). Two orders can each be
that far off in opposite directions, so they differ by at most twice that.
The sum of absolute terms is not recorded, so max(|a|, |b|) of the two
results stands in for it, which makes the bound a relative one:

    |a - b| / max(|a|, |b|) <= 2 * gamma_n

The stand-in is exact for sums of same-signed terms and too small where terms
cancel, which errs toward reporting a divergence, never toward hiding one.

n is a term count, and two are printed. The loose one is the rows the step
read through ctx (an upper bound on the terms behind any single value, as
long as every term came through ctx.read or ctx.state), and it is the one
that decides. The tight one is rows read divided by the artifact's output
rows: the average number of terms behind one value, which shows how much
slack the loose count carries but, being an average, bounds nothing.
"""

from __future__ import annotations

import math

from twicerun.compare.floats import UNIT_ROUNDOFF
from twicerun.findings import BoundFigures


def gamma(n: int, u: float) -> float:
    if n <= 0:
        return 0.0
    nu = n * u
    return math.inf if nu >= 1 else nu / (1 - nu)


def reassociation_bound(n: int, type_id: str) -> float:
    """The largest relative difference two summation orders of n terms can produce."""
    return 2 * gamma(n, UNIT_ROUNDOFF[type_id])


def figures(
    artifact: str, column: str, type_id: str, observed: float, rows_read: int, output_rows: int
) -> BoundFigures:
    n_tight = max(1, math.ceil(rows_read / output_rows)) if output_rows else rows_read
    loose, tight = reassociation_bound(rows_read, type_id), reassociation_bound(n_tight, type_id)
    return BoundFigures(
        artifact=artifact,
        column=column,
        type=type_id,
        observed=observed,
        n_loose=rows_read,
        bound_loose=loose,
        headroom_loose=loose / observed if observed > 0 else None,
        clears_loose=observed <= loose,
        n_tight=n_tight,
        bound_tight=tight,
        headroom_tight=tight / observed if observed > 0 else None,
        clears_tight=observed <= tight,
    )
