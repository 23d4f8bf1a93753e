"""The gate's statistics: is a step's behaviour on this pull request worse than on the baseline?

Pure functions over numbers; nothing here knows what a Result or a file is, so the
calibration script drives exactly the code the gate calls.

The unit is a *trial*: one whole invocation (N runs of a pipeline, amplifiers
included). Trials are independent of each other; the runs inside one are not (they
share run 1 and its inputs), so no test here treats a run or a comparison as the
unit. Each step gets one score per trial (`score`), and every test is a rank or
permutation test over trials, which needs nothing but this: on an unchanged pull
request, a trial measured now is exchangeable with one measured for the baseline.

The decision has two stages (docs/action.md explains why):

1. `screen`: the pull request's own trial. A step is suspect when its score is
   above all but a `screen` fraction of the baseline's trials. Cheap and lenient;
   it only decides what to re-run.
2. `confirm_test`: each pipeline with a suspect step runs `confirm` fresh trials.
   Those are compared with the baseline's by an exact permutation test, jointly over
   every step of the pipeline (Westfall-Young min-p, so the steps' dependence is
   used rather than assumed away), at `alpha / pipelines`. A step fails the check
   only when it was suspect *and* stage 2 finds it worse.

Stage 2's trials are new, so under "nothing changed" they are exchangeable with the
baseline's whatever stage 1 saw; the screen can only remove rejections. Hence
P(the check fails on an unchanged pull request) <= alpha, family-wise, for any
distribution of answers.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from twicerun.vocabulary import gate as words

DEFAULT_ALPHA = 0.05
DEFAULT_CONFIRM = 3
DEFAULT_SCREEN = 0.25
POWER_TARGET = 0.9
# Above this many subsets, stage 2 samples them instead (still exact in level, see _subsets).
ENUMERATE_UP_TO = 20_000
SAMPLES = 9_999


@dataclass(frozen=True)
class StepTrial:
    """What one trial measured of one step.

    `answers` are the loop runs' answer identities, run 1 first: equal integers
    mean the same answer (canonical digests, under the run's policy). `stress_fired`
    of `stress_compared` are the amplifiers' comparisons, made only on quiet steps.
    """

    answers: tuple[int, ...]
    stress_fired: int = 0
    stress_compared: int = 0


def score(trial: StepTrial) -> float:
    """How far a step's answers spread in one trial; larger is worse, 0 is steady.

    The count of run pairs whose answers differ: symmetric in the runs, so a rare
    answer that happens to land on run 1 counts as one odd run, not as every
    comparison firing. A step whose loop runs all agreed scores the fraction of
    amplifier comparisons that fired, scaled below 1 so that any disagreement on
    the pipeline's own input ranks above any found only under stress.
    """
    counts: dict[int, int] = {}
    for a in trial.answers:
        counts[a] = counts.get(a, 0) + 1
    n = len(trial.answers)
    pairs = (n * n - sum(c * c for c in counts.values())) // 2
    if pairs:
        return float(pairs)
    return trial.stress_fired / (trial.stress_compared + 1)


def screen_p(baseline: Sequence[float], now: float) -> float:
    """Conformal p-value of one new trial's score among the baseline's (1 when steady)."""
    if now <= 0:
        return 1.0
    return (1 + sum(1 for b in baseline if b >= now)) / (len(baseline) + 1)


@dataclass(frozen=True)
class StepTest:
    """Stage 2 for one step: the fresh trials' scores and the permutation p-values."""

    fresh: tuple[float, ...]
    p: float  # this step alone
    adjusted_p: float  # family-wise over every step of the pipeline (Westfall-Young)


def confirm_test(
    baseline: Mapping[str, Sequence[float]],
    fresh: Mapping[str, Sequence[float]],
    seed: int = 0,
) -> dict[str, StepTest]:
    """Exact permutation test of n fresh trials against T baseline trials, every step at once.

    `baseline[step]` has T scores (trial t of every step is the same invocation) and
    `fresh[step]` n scores. The statistic per step is the sum of the n fresh scores;
    under exchangeability every choice of n trials out of the T+n is equally likely
    to have been the fresh ones. Ties count against rejecting.
    """
    steps = list(baseline)
    if not steps:
        return {}
    n = len(next(iter(fresh.values())))
    pooled = {s: [*baseline[s], *fresh[s]] for s in steps}
    total = len(pooled[steps[0]])
    observed = tuple(range(total - n, total))
    # Steps that never vary cannot reject and cannot tie: leave them out of the work.
    varying = [s for s in steps if max(pooled[s]) > min(pooled[s])]
    subsets = list(_subsets(total, n, observed, seed))
    sums = {s: [sum(pooled[s][i] for i in sub) for sub in subsets] for s in varying}
    count = len(subsets)

    # Marginal p of every subset for every step: the share of subsets whose sum is
    # at least as large. Sorting once per step makes it O(S log S).
    marginal: dict[str, list[float]] = {}
    for s in varying:
        values = sums[s]
        order = sorted(values, reverse=True)
        at_least = {}
        for rank, v in enumerate(order, start=1):
            at_least[v] = rank  # the last (largest) rank for equal values counts every tie
        marginal[s] = [at_least[v] / count for v in values]

    observed_p = {s: marginal[s][0] for s in varying}
    tests = {s: StepTest(tuple(fresh[s]), 1.0, 1.0) for s in steps if s not in varying}
    # Step-down min-p: the most significant step is compared with the minimum over
    # all steps, the next with the minimum over the rest, and so on; adjusted
    # p-values are made monotone.
    ordered = sorted(varying, key=lambda s: observed_p[s])
    suffix_min = [1.0] * count
    adjusted: dict[str, float] = {}
    for s in reversed(ordered):
        suffix_min = [min(a, b) for a, b in zip(suffix_min, marginal[s], strict=True)]
        adjusted[s] = sum(1 for m in suffix_min if m <= observed_p[s]) / count
    running = 0.0
    for s in ordered:
        running = max(running, adjusted[s])
        tests[s] = StepTest(tuple(fresh[s]), observed_p[s], running)
    return tests


def _subsets(total: int, n: int, observed: tuple[int, ...], seed: int):
    """Every n-subset of `total` trials, the observed one first; or a random sample of them.

    The sample keeps the observed subset and adds SAMPLES drawn uniformly, which is
    itself a valid permutation test: its p-value is never below alpha more often
    than alpha.
    """
    yield observed
    if math.comb(total, n) <= ENUMERATE_UP_TO:
        for sub in itertools.combinations(range(total), n):
            if sub != observed:
                yield sub
        return
    rng = random.Random(seed)
    for _ in range(SAMPLES):
        yield tuple(sorted(rng.sample(range(total), n)))


def smallest_p(trials: int, confirm: int) -> float:
    """The smallest p-value stage 2 can reach with this many baseline trials."""
    return 1 / math.comb(trials + confirm, confirm)


def needed_trials(alpha: float, confirm: int, pipelines: int = 1) -> int:
    """The fewest baseline trials with which stage 2 can find any step worse at all."""
    t = 1
    while smallest_p(t, confirm) > alpha / pipelines:
        t += 1
    return t


def coin_power(
    trials: int,
    alpha: float = DEFAULT_ALPHA,
    runs: int = 5,
    confirm: int = DEFAULT_CONFIRM,
    pipelines: int = 1,
    screen: float = DEFAULT_SCREEN,
) -> float:
    """How often the check fails a pull request that makes one step, which never differed
    on a baseline of `trials` trials, give one of two answers at random on each run;
    counting only its disagreements inside the loop (amplifiers only add to that).

    Each trial shows it with probability d = 1 - 2 ** (1 - runs). The screen singles it out
    when its trial shows it and 1 / (trials + 1) is within `screen`; stage 2, at this
    pipeline's share of alpha, then needs it in at least k of the `confirm` fresh trials,
    and k shrinks as the baseline grows.
    """
    d = 1 - 2 ** (1 - runs)
    if 1 / (trials + 1) > screen:
        return 0.0
    level = alpha / pipelines
    k_min = next(
        (
            k
            for k in range(1, confirm + 1)
            if math.comb(trials + confirm - k, confirm - k) / math.comb(trials + confirm, confirm)
            <= level
        ),
        None,
    )
    if k_min is None:
        return 0.0
    return d * sum(
        math.comb(confirm, k) * d**k * (1 - d) ** (confirm - k) for k in range(k_min, confirm + 1)
    )


@dataclass(frozen=True)
class Shortfall:
    """A baseline the gate can decide with that still misses the power target: how often
    it catches a coin-flip step, and the fewest trials that reach the target (None when
    no number does at this many runs a trial)."""

    power: float
    enough: int | None


def shortfall(
    trials: int,
    alpha: float = DEFAULT_ALPHA,
    runs: int = 5,
    confirm: int = DEFAULT_CONFIRM,
    pipelines: int = 1,
    screen: float = DEFAULT_SCREEN,
) -> Shortfall | None:
    """None when `trials` meets the power target; what it misses by otherwise."""
    power = coin_power(trials, alpha, runs, confirm, pipelines, screen)
    if power >= POWER_TARGET:
        return None
    return Shortfall(power, trials_for_power(alpha, runs, confirm, pipelines, screen=screen))


def default_trials(
    alpha: float = DEFAULT_ALPHA,
    runs: int = 5,
    confirm: int = DEFAULT_CONFIRM,
    power: float = POWER_TARGET,
    pipelines: int = 1,
) -> int:
    """How many trials `baseline update` takes by default, from alpha and the power target.

    Two needs, the larger wins. The screen ranks one trial among T baseline trials,
    so it can single anything out at level alpha only when T + 1 >= 1 / alpha. And
    the power target: coin_power at least `power`, each pipeline tested at its share
    of alpha. Where no number of trials reaches it (too few runs a trial), the floor.
    """
    floor = max(math.ceil(1 / alpha) - 1, needed_trials(alpha, confirm, pipelines))
    return max(floor, trials_for_power(alpha, runs, confirm, pipelines, power) or 0)


def trials_for_power(
    alpha: float = DEFAULT_ALPHA,
    runs: int = 5,
    confirm: int = DEFAULT_CONFIRM,
    pipelines: int = 1,
    power: float = POWER_TARGET,
    screen: float = DEFAULT_SCREEN,
) -> int | None:
    """The fewest baseline trials whose coin_power reaches `power`; None if none does
    (more trials lower what stage 2 needs, never below one confirmation trial in
    `confirm`, so the search stops once that is reached)."""
    t = needed_trials(alpha, confirm, pipelines)
    while t < 100_000:
        if coin_power(t, alpha, runs, confirm, pipelines, screen) >= power:
            return t
        if (
            math.comb(t + confirm - 1, confirm - 1) / math.comb(t + confirm, confirm)
            <= alpha / pipelines
            and 1 / (t + 1) <= screen
        ):
            return None  # k is 1 already: more trials change nothing
        t += 1
    return None


@dataclass(frozen=True)
class Screened:
    step: str
    score: float
    p: float
    suspect: bool


def screen(
    baseline: Mapping[str, Sequence[float]], now: Mapping[str, float], level: float
) -> dict[str, Screened]:
    """Stage 1: which steps of one pipeline look worse on the pull request's own trial."""
    found = {}
    for step, value in now.items():
        p = screen_p(baseline.get(step, ()), value)
        found[step] = Screened(step, value, p, value > 0 and p <= level)
    return found


def improved_p(baseline: Sequence[float], now: float) -> float:
    """How unusual a low score is among the baseline's (for reporting a fix; never fails)."""
    return (1 + sum(1 for b in baseline if b <= now)) / (len(baseline) + 1)


@dataclass(frozen=True)
class Outcome:
    """The decision on one step: its verdict and the figures behind it."""

    verdict: str
    screened: Screened
    test: StepTest | None = None
    p: float | None = None


def decide_pipeline(
    baseline: Mapping[str, Sequence[float]],
    now: Mapping[str, float],
    fresh_trial: Callable[[], Mapping[str, float]],
    *,
    level: float,
    screen_level: float = DEFAULT_SCREEN,
    confirm: int = DEFAULT_CONFIRM,
    better_level: float = DEFAULT_ALPHA,
    seed: int = 0,
    implied: Mapping[str, str] | None = None,
) -> tuple[dict[str, Outcome], int]:
    """Decide every step of one pipeline; the gate and scripts/gate_calibration.py call this.

    `baseline[step]` holds the step's score in each baseline trial and `now[step]` its
    score in the pull request's trial (steps the baseline lacks are the caller's
    business). `fresh_trial()` runs the pipeline once more and returns every step's
    score; it is called `confirm` times, and only if a step is suspect. `level` is
    this pipeline's share of alpha. Returns the outcomes and how many fresh trials ran.

    `implied` maps a 0/1 statistic to the score it may merely restate (a step's rows to
    its score, for a step whose every difference is in rows): where, in every trial of
    the baseline, the pull request and the fresh trials alike, it is 1 exactly when that
    score is above 0, it is left out of stage 2, since a member that restates another
    only makes the family's adjustment stricter. The rule looks at every trial the same
    way, whichever are labelled fresh, so the permutation test keeps its level.
    """
    screened = screen(baseline, now, screen_level)
    suspects = [s for s, sc in screened.items() if sc.suspect]
    tests: dict[str, StepTest] = {}
    if suspects:
        fresh: dict[str, list[float]] = {s: [] for s in now}
        for _ in range(confirm):
            trial = fresh_trial()
            for s in fresh:
                fresh[s].append(trial.get(s, 0.0))
        restated = {
            s
            for s, by in (implied or {}).items()
            if s in now
            and by in now
            and all(
                v == (1.0 if w > 0 else 0.0)
                for v, w in zip(
                    [*baseline[s], now[s], *fresh[s]],
                    [*baseline[by], now[by], *fresh[by]],
                    strict=True,
                )
            )
        }
        family = [s for s in now if s not in restated]
        tests = confirm_test(
            {s: baseline[s] for s in family}, {s: fresh[s] for s in family}, seed=seed
        )
    outcomes = {}
    for s, sc in screened.items():
        history = baseline[s]
        if s in tests and sc.suspect:
            test = tests[s]
            if test.adjusted_p <= level:
                verdict = words.NEW if max(history, default=0) == 0 else words.RATE_UP
            else:
                verdict = words.NOT_CONFIRMED
            outcomes[s] = Outcome(verdict, sc, test, test.adjusted_p)
            continue
        if history and max(history) > 0:
            p_low = improved_p(history, sc.score)
            if p_low <= better_level:
                verdict = words.FIXED if sc.score == 0 else words.RATE_DOWN
                outcomes[s] = Outcome(verdict, sc, None, p_low)
                continue
        outcomes[s] = Outcome(words.UNCHANGED, sc)
    return outcomes, (confirm if suspects else 0)
