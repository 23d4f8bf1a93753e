"""An exact test on fire counts, so a noisy runner does not turn an intermittent step into a
regression.

Fisher's exact test on the 2x2 table (fired, quiet) x (baseline, now): with the
row and column totals fixed, the number of fires that land in "now" follows a
hypergeometric distribution, and the one-sided p-value is the probability of a
split at least as lopsided as the one observed. No approximation, no minimum
count: it is exact at the small numbers a CI gate sees (four comparisons a run).
"""

from __future__ import annotations

from math import comb


def _hypergeometric(x: int, fired: int, baseline_n: int, now_n: int) -> float:
    total = baseline_n + now_n
    return comb(now_n, x) * comb(baseline_n, fired - x) / comb(total, fired)


def fisher_one_sided(
    baseline_fired: int, baseline_n: int, now_fired: int, now_n: int
) -> tuple[float, float]:
    """(p that now fires at least this much more often, p that now fires at least this much less)."""
    fired = baseline_fired + now_fired
    low = max(0, fired - baseline_n)
    high = min(fired, now_n)
    if baseline_n + now_n == 0:
        return 1.0, 1.0
    up = sum(_hypergeometric(x, fired, baseline_n, now_n) for x in range(now_fired, high + 1))
    down = sum(_hypergeometric(x, fired, baseline_n, now_n) for x in range(low, now_fired + 1))
    return min(1.0, up), min(1.0, down)
