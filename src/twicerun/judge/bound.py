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
from dataclasses import dataclass

from twicerun.compare.floats import UNIT_ROUNDOFF


def gamma(n: int, u: float) -> float:
    if n <= 0:
        return 0.0
    nu = n * u
    return math.inf if nu >= 1 else nu / (1 - nu)


def reassociation_bound(n: int, type_id: str) -> float:
    """The largest relative difference two summation orders of n terms can produce."""
    return 2 * gamma(n, UNIT_ROUNDOFF[type_id])


@dataclass(frozen=True)
class BoundFigures:
    """The bound at both term counts beside the drift actually observed."""

    artifact: str
    column: str
    type: str
    observed: float
    n_loose: int
    bound_loose: float
    n_tight: int
    bound_tight: float

    @property
    def clears_loose(self) -> bool:
        return self.observed <= self.bound_loose

    @property
    def clears_tight(self) -> bool:
        return self.observed <= self.bound_tight

    @property
    def headroom_loose(self) -> float | None:
        return self.bound_loose / self.observed if self.observed > 0 else None

    @property
    def headroom_tight(self) -> float | None:
        return self.bound_tight / self.observed if self.observed > 0 else None

    def to_dict(self) -> dict:
        return {
            "artifact": self.artifact,
            "column": self.column,
            "type": self.type,
            "observed": self.observed,
            "n_loose": self.n_loose,
            "bound_loose": self.bound_loose,
            "headroom_loose": self.headroom_loose,
            "clears_loose": self.clears_loose,
            "n_tight": self.n_tight,
            "bound_tight": self.bound_tight,
            "headroom_tight": self.headroom_tight,
            "clears_tight": self.clears_tight,
        }


def figures(
    artifact: str, column: str, type_id: str, observed: float, rows_read: int, output_rows: int
) -> BoundFigures:
    n_tight = max(1, math.ceil(rows_read / output_rows)) if output_rows else rows_read
    return BoundFigures(
        artifact=artifact,
        column=column,
        type=type_id,
        observed=observed,
        n_loose=rows_read,
        bound_loose=reassociation_bound(rows_read, type_id),
        n_tight=n_tight,
        bound_tight=reassociation_bound(n_tight, type_id),
    )
