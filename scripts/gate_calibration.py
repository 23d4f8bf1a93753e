"""How often the gate fails an unchanged pull request, and how often it catches a real change.

Drives the gate's own decision (`twicerun.github.decision.decide_pipeline`, the
function `twicerun gate` calls) on synthetic trials built with the loop's
structure: each trial runs a step R times, every later run is compared with run 1,
and only when all R agreed do the amplifiers add their runs (series of three runs,
each compared with its own first run). By default one series: on a step that reads
no artifact only the thread-count amplifier applies, the others decline, so one is
the fewest a quiet step gets and the power figures are the cautious ones. A step's
behaviour is a
per-run model of its answers:

- `steady`: always the same answer;
- `rare q`: one other answer, on each run with probability q;
- `several q/k`: one of k other answers, each with probability q/k;
- `fresh q`: with probability q a run's answer is new (float noise, a timestamp);
- `bursty q@b`: the trial is a bad one with probability b, and then each run gives
  the other answer with probability q (dependence between the runs of one trial,
  which is what breaks a test that treats runs as the unit);
- `drift with rows r`: a new answer on every run (a float sum over many groups), and
  each later run's difference is in rows rather than in floats alone with probability
  r; the gate's second statistic, whether a trial's runs differed in rows, varies only
  for such steps (for every other model it restates the score);
- `drift ..., one thread c`: the same drift, which still moves at one thread in a
  trial with probability c (and otherwise goes away there, as a float sum's does);
- `drift ..., past the bound p`: the same drift, whose floats move past the
  reassociation bound in a trial with probability p (the gate's fourth statistic; in
  every other model they never do).

The gate's third statistic is whether the bisect, re-executing a step that differed at
one thread, still saw it differ. Every model but drift draws its answers at one thread
as it does at more (random() is random at any thread count), so the bisect is simulated
as it runs: a series of up to `runs` executions compared with its own first, stopped at
the first difference or once its quiet comparisons would have been improbable
(judge.cause.quiet_chance). A rare coin's bisect often sees nothing, so for those models
the statistic does not merely restate the score: what it costs the family, and what it
adds when such a step's rate goes up, both show here.

For the false-fail rate each simulated pull request draws a fresh baseline of T
trials and a pull-request trial from the same models (the guarantee is over both);
for power, the pull request's trials come from a changed model. Each figure comes
with its n and a 95% interval; the script exits 1 when a family-wise false-fail
rate is above alpha by more than its Monte Carlo error, so a change to the decision
that breaks calibration is noticed.

    python scripts/gate_calibration.py --json results/gate-calibration-$(date +%F).json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from twicerun import __version__
from twicerun.github.decision import (
    DEFAULT_ALPHA,
    DEFAULT_CONFIRM,
    DEFAULT_SCREEN,
    StepTrial,
    decide_pipeline,
    default_trials,
    score,
)
from twicerun.github.gate import KIND_MARK, KINDS, ONE_THREAD, OUTSIDE_BOUND, ROWS
from twicerun.judge.cause import CONFIDENCE, quiet_chance
from twicerun.vocabulary import gate as words

SCHEMA = "twicerun.gate-calibration/1"
AMPLIFIER_RUNS = 3


@dataclass(frozen=True)
class Model:
    """A step's per-run answer distribution; `draw(rng, trial_state)` gives one run's answer.

    `rows` is the chance that a run whose answer differs from run 1's differs in rows
    (ROW_MISSING, ROW_EXTRA, ...) rather than in float values alone: 1 for the models
    above it (a coin flip on a row), 0 for pure float drift. The gate tests it beside the
    score, as each trial's second statistic. `one_thread` is the chance that in a trial
    the step's answers move at one thread as they do at more (1 for a random() coin, 0
    for a float sum's drift), which the bisect then looks for (its third statistic)."""

    name: str
    draw_trial: Callable[[random.Random], Callable[[random.Random], int]]
    rows: float = 1.0
    one_thread: float = 1.0
    # The chance that a trial's differences move its floats past the reassociation bound
    # (the fourth statistic): 0 for every model of the null families.
    outside: float = 0.0


def steady() -> Model:
    return Model("steady", lambda rng: lambda r: 0)


def rare(q: float) -> Model:
    return Model(f"rare {q:g}", lambda rng: lambda r: 1 if r.random() < q else 0)


def several(q: float, k: int) -> Model:
    return Model(
        f"several {q:g}/{k}", lambda rng: lambda r: 1 + r.randrange(k) if r.random() < q else 0
    )


def fresh(q: float) -> Model:
    def per_trial(rng: random.Random):
        return lambda r: r.randrange(1, 1 << 30) if r.random() < q else 0

    return Model(f"fresh {q:g}", per_trial)


def bursty(q: float, b: float) -> Model:
    def per_trial(rng: random.Random):
        bad = rng.random() < b
        return lambda r: 1 if bad and r.random() < q else 0

    return Model(f"bursty {q:g}@{b:g}", per_trial)


def drift(rows: float, one_thread: float = 0.0, outside: float = 0.0) -> Model:
    """A new answer on every run (a float sum over many groups), which is a difference in
    rows on each later run with probability `rows`, which one thread still shows in a
    trial with probability `one_thread`, and whose floats move past the reassociation
    bound in a trial with probability `outside` (a value picked rather than summed)."""

    def per_trial(rng: random.Random):
        return lambda r: r.randrange(1, 1 << 30)

    name = f"drift with rows {rows:g}" + (f", one thread {one_thread:g}" if one_thread else "")
    name += f", past the bound {outside:g}" if outside else ""
    return Model(name, per_trial, rows, one_thread, outside)


AMPLIFIERS = 1  # set from --amplifiers


def trial_score(model: Model, runs: int, rng: random.Random) -> tuple[float, float, float, float]:
    """One trial of one step, as the loop and the amplifiers would record it: its score,
    whether its runs differed in rows, whether one thread still showed a difference, and
    whether its floats moved past the bound (the gate's second to fourth statistics)."""
    answer = model.draw_trial(rng)
    answers = tuple(answer(rng) for _ in range(runs))
    stress_fired = stress_compared = 0
    if len(set(answers)) == 1:
        for _ in range(AMPLIFIERS):
            series = [answer(rng) for _ in range(AMPLIFIER_RUNS)]
            stress_compared += AMPLIFIER_RUNS - 1
            stress_fired += sum(1 for a in series[1:] if a != series[0])
    differing = sum(1 for a in answers[1:] if a != answers[0])
    # Models whose every difference is in rows draw nothing more: their figures stay those
    # the calibration gave before the second statistic existed.
    if model.rows >= 1 or model.rows <= 0:
        rows = float(bool(differing) and model.rows >= 1)
    else:
        rows = float(any(rng.random() < model.rows for _ in range(differing)))
    # The bisect runs on a step the loop saw differ, or, where it was quiet, one the
    # thread-count amplifier (the series simulated here) saw differ.
    fired, compared = (differing, runs - 1) if differing else (stress_fired, stress_compared)
    one_thread = 0.0
    if fired and (model.one_thread >= 1 or rng.random() < model.one_thread):
        one_thread = bisect(answer, fired, compared, runs, rng)
    # Drawn only for a model that moves past the bound in some trials, so that every other
    # model's figures stay those the calibration gave before the fourth statistic existed.
    outside = 0.0
    if model.outside > 0 and differing:
        outside = float(model.outside >= 1 or rng.random() < model.outside)
    return score(StepTrial(answers, stress_fired, stress_compared)), rows, one_thread, outside


def bisect(answer, fired: int, compared: int, runs: int, rng: random.Random) -> float:
    """1.0 when the bisect's re-executions at one thread differ from their first, drawn
    from the trial's own answers and stopped as runner/bisect.py stops."""
    first = answer(rng)
    for quiet in range(1, runs):
        if answer(rng) != first:
            return 1.0
        if quiet_chance(fired, compared, quiet) < 1 - CONFIDENCE:
            break
    return 0.0


def pipeline_trial(models: dict[str, Model], runs: int, rng: random.Random) -> dict[str, float]:
    """Every statistic the gate tests for one trial: each step's score, its rows, whether
    it differed at one thread, and whether its floats moved past the reassociation bound.
    Only the models the power table changes a step into move past the bound; in every other
    it is 0 in every trial, and no random draw is spent on it."""
    found = {}
    for name, m in models.items():
        (
            found[name],
            found[ROWS.key(name)],
            found[ONE_THREAD.key(name)],
            found[OUTSIDE_BOUND.key(name)],
        ) = trial_score(m, runs, rng)
    return found


def step_of(key: str) -> str:
    return key.partition(KIND_MARK)[0]


def implied(models: dict[str, Model]) -> dict[str, str]:
    """Each step's 0/1 statistics, mapped to its score, as the gate passes them."""
    return {kind.key(s): s for s in models for kind in KINDS}


def simulate(
    before: dict[str, Model],
    after: dict[str, Model],
    *,
    trials: int,
    runs: int,
    alpha: float,
    confirm: int,
    screen: float,
    rng: random.Random,
) -> tuple[dict[str, str], int]:
    """One pull request: a baseline drawn from `before`, the pull request from `after`."""
    history = [pipeline_trial(before, runs, rng) for _ in range(trials)]
    baseline = {s: [t[s] for t in history] for s in history[0]}
    now = pipeline_trial(after, runs, rng)
    outcomes, ran = decide_pipeline(
        baseline,
        now,
        lambda: pipeline_trial(after, runs, rng),
        level=alpha,
        screen_level=screen,
        confirm=confirm,
        seed=rng.randrange(1 << 30),
        implied=implied(before),
    )
    return {s: o.verdict for s, o in outcomes.items()}, ran


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson interval for k successes in n."""
    if n == 0:
        return 0.0, 1.0
    z = 1.959964
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def rate(k: int, n: int) -> dict:
    low, high = wilson(k, n)
    return {"k": k, "n": n, "rate": k / n if n else None, "low": low, "high": high}


FAILING = (words.NEW, words.RATE_UP)

# Families of steps checked together. The first is the five-step coin
# pipeline; the others mix the models above, two of them with dependence inside a
# trial, so the family-wise figure covers what a real pipeline does.
FAMILIES = {
    "coins": {
        "steady": steady(),
        "coin_05": rare(0.05),
        "coin_10": rare(0.10),
        "coin_20": rare(0.20),
        "coin_30": rare(0.30),
    },
    "mixed": {
        "a_steady": steady(),
        "b_steady": steady(),
        "c_rare_01": rare(0.01),
        "d_several": several(0.15, 3),
        "e_fresh_02": fresh(0.02),
        "f_fresh_all": fresh(1.0),
        "g_half": rare(0.5),
        "h_bursty": bursty(0.5, 0.2),
        "i_drift": drift(0.0),
        "j_drift_rows": drift(0.1),
        "k_drift_thread": drift(0.0, 0.2),
    },
    "bursty": {
        "steady": steady(),
        "burst_05": bursty(0.6, 0.05),
        "burst_10": bursty(0.4, 0.10),
        "burst_30": bursty(0.3, 0.30),
        "rare_run1": rare(0.03),
    },
}

# Changes for power: (family, step, new model, what it means).
CHANGES = [
    ("coins", "steady", rare(0.05), "a steady step now differs on 5% of its runs"),
    ("coins", "steady", rare(0.10), "a steady step now differs on 10% of its runs"),
    ("coins", "steady", rare(0.20), "a steady step now differs on 20% of its runs"),
    ("coins", "steady", rare(0.30), "a steady step now differs on 30% of its runs"),
    ("coins", "steady", rare(0.50), "a steady step now differs on half its runs"),
    ("coins", "steady", fresh(0.10), "a steady step now gives a new answer on 10% of its runs"),
    ("coins", "coin_10", rare(0.30), "a step at 10% of runs now at 30%"),
    ("coins", "coin_10", rare(0.60), "a step at 10% of runs now at 60%"),
    ("coins", "coin_05", rare(0.50), "a step at 5% of runs now at half"),
    ("mixed", "i_drift", drift(0.1), "a step drifting on every run now loses rows on 10% of them"),
    ("mixed", "i_drift", drift(0.3), "a step drifting on every run now loses rows on 30% of them"),
    ("mixed", "j_drift_rows", drift(0.5), "a drifting step losing rows on 10% of runs now on half"),
    (
        "mixed",
        "i_drift",
        drift(0.0, 1.0),
        "a step drifting by thread order on every run now differs at one thread in every trial",
    ),
    (
        "mixed",
        "i_drift",
        drift(0.0, 0.3),
        "a step drifting by thread order on every run now differs at one thread in 30% of trials",
    ),
    (
        "mixed",
        "k_drift_thread",
        drift(0.0, 0.6),
        "a drifting step that differed at one thread in 20% of trials now in 60%",
    ),
    (
        "mixed",
        "i_drift",
        drift(0.0, 0.0, 1.0),
        "a step drifting inside the bound on every run now drifts past it in every trial",
    ),
    (
        "mixed",
        "i_drift",
        drift(0.0, 0.0, 0.3),
        "a step drifting inside the bound on every run now drifts past it in 30% of trials",
    ),
]


def run(args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    alpha, confirm, screen, runs = args.alpha, args.confirm, args.screen, args.runs
    trials = args.trials or default_trials(alpha, runs, confirm)
    started = time.monotonic()
    common = dict(trials=trials, runs=runs, alpha=alpha, confirm=confirm, screen=screen)

    null = []
    worst_excess = -1.0
    for family, models in FAMILIES.items():
        per_step = dict.fromkeys(models, 0)
        family_fails = 0
        # Nothing changed, so a step called `fixed` or `rate down` is a false claim too:
        # it fails nothing, but it is printed as a finding, with no confirmation behind it.
        family_better = 0
        reruns = 0
        for _ in range(args.null):
            verdicts, ran = simulate(models, models, rng=rng, **common)
            reruns += ran
            # A step fails when either of its statistics does, as in the gate; only its
            # score is ever called better.
            failed = {step_of(s) for s, v in verdicts.items() if v in FAILING}
            family_fails += bool(failed)
            family_better += any(v in words.BETTER for s, v in verdicts.items() if s in models)
            for s in failed:
                per_step[s] += 1
        fw = rate(family_fails, args.null)
        margin = 2 * math.sqrt(alpha * (1 - alpha) / args.null)
        worst_excess = max(worst_excess, fw["rate"] - (alpha + margin))
        null.append(
            {
                "family": family,
                "models": {s: m.name for s, m in models.items()},
                "family_wise": fw,
                "claimed_better": rate(family_better, args.null),
                "per_step": {s: rate(k, args.null) for s, k in per_step.items()},
                "mean_extra_trials": reruns / args.null,
            }
        )

    # One baseline, many unchanged pull requests: what a team keeping one baseline sees.
    one_baseline = []
    models = FAMILIES["coins"]
    for _ in range(args.baselines):
        history = [pipeline_trial(models, runs, rng) for _ in range(trials)]
        baseline = {s: [t[s] for t in history] for s in history[0]}
        fails = 0
        for _ in range(args.per_baseline):
            outcomes, _ = decide_pipeline(
                baseline,
                pipeline_trial(models, runs, rng),
                lambda: pipeline_trial(models, runs, rng),
                level=alpha,
                screen_level=screen,
                confirm=confirm,
                seed=rng.randrange(1 << 30),
                implied=implied(models),
            )
            fails += any(o.verdict in FAILING for o in outcomes.values())
        one_baseline.append(fails)

    power = []
    for family, step, model, meaning in CHANGES:
        before = FAMILIES[family]
        after = {**before, step: model}
        caught = 0
        reruns = 0
        for _ in range(args.power):
            verdicts, ran = simulate(before, after, rng=rng, **common)
            reruns += ran
            caught += any(
                verdicts[k] in FAILING for k in (step, *(kind.key(step) for kind in KINDS))
            )
        power.append(
            {
                "family": family,
                "step": step,
                "before": before[step].name,
                "after": model.name,
                "meaning": meaning,
                "caught": rate(caught, args.power),
                "mean_extra_trials": reruns / args.power,
            }
        )

    document = {
        "schema": SCHEMA,
        "written": time.strftime("%Y-%m-%d"),
        "command": " ".join(["python", "scripts/gate_calibration.py", *sys.argv[1:]]),
        "environment": {
            "twicerun": __version__,
            "python": platform.python_version(),
        },
        "seconds": round(time.monotonic() - started, 1),
        "settings": {
            "alpha": alpha,
            "runs": runs,
            "trials": trials,
            "confirm": confirm,
            "screen": screen,
            "seed": args.seed,
            "amplifiers": AMPLIFIERS,
            "amplifier_runs": AMPLIFIER_RUNS,
        },
        "null": null,
        "one_baseline": {
            "baselines": args.baselines,
            "per_baseline": args.per_baseline,
            "fails": one_baseline,
        },
        "power": power,
        "worst_excess": worst_excess,
    }
    document["tables"] = tables(document)
    return document


def _pct(r: dict) -> str:
    return f"{100 * r['rate']:.1f}% ({100 * r['low']:.1f} to {100 * r['high']:.1f})"


def tables(d: dict) -> list[dict]:
    """The tables this artifact carries, as data: `twicerun report` renders them as they are."""
    s = d["settings"]
    stamp = (
        f"Generated by `twicerun report` from the gate calibration ({d['written']}, "
        f"`{d['command']}`, {d['seconds']:.0f}s): alpha {s['alpha']}, {s['runs']} runs, "
        f"baselines of {s['trials']} trials, {s['confirm']} confirmation trials, screen "
        f"{s['screen']}. Rates with their 95% interval."
    )
    null_rows = []
    better_counted = all("claimed_better" in entry for entry in d["null"])
    for entry in d["null"]:
        worst = max(entry["per_step"].items(), key=lambda kv: kv[1]["rate"])
        null_rows.append(
            [
                f"`{entry['family']}`",
                ", ".join(f"{m}" for m in entry["models"].values()),
                f"{entry['family_wise']['n']:,}",
                _pct(entry["family_wise"]),
                f"`{worst[0]}` {_pct(worst[1])}",
                f"{entry['mean_extra_trials']:.2f}",
            ]
            # Artifacts from before the count was kept are rebuilt as they were.
            + ([_pct(entry["claimed_better"])] if better_counted else [])
        )
    step_rows = [
        [f"`{entry['family']}`", f"`{step}`", entry["models"][step], _pct(r)]
        for entry in d["null"]
        for step, r in entry["per_step"].items()
    ]
    power_rows = [
        [
            p["meaning"],
            f"`{p['before']}` to `{p['after']}`",
            f"{p['caught']['n']:,}",
            _pct(p["caught"]),
            f"{p['mean_extra_trials']:.2f}",
        ]
        for p in d["power"]
    ]
    fails = d["one_baseline"]["fails"]
    per = d["one_baseline"]["per_baseline"]
    ordered = sorted(fails)

    def quantile(q: float) -> int:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    over = sum(1 for f in fails if f > 5)
    steady_power = [
        p for p in d["power"] if p["before"] == "steady" and p["after"].startswith("rare")
    ]
    smallest = next((p for p in steady_power if p["caught"]["rate"] >= 0.8), None)
    return [
        {
            "name": "gate-false-fail",
            "stamp": stamp,
            "headers": [
                "family",
                "per-run models",
                "pull requests",
                "failed, any step",
                "worst single step",
                "extra trials a pull request",
                *(["a step called better, any step"] if better_counted else []),
            ],
            "rows": null_rows,
        },
        {
            "name": "gate-false-fail-steps",
            "stamp": stamp,
            "headers": ["family", "step", "per-run model", "failed the check"],
            "rows": step_rows,
        },
        {
            "name": "gate-power",
            "stamp": stamp
            + (
                f" The smallest change of a steady step that the defaults catch at least 80% of "
                f"the time: {smallest['meaning'].removeprefix('a steady step now ')}."
                if smallest
                else " No change in this grid is caught 80% of the time."
            ),
            "headers": [
                "change",
                "per-run model",
                "pull requests",
                "failed the check",
                "extra trials",
            ],
            "rows": power_rows,
        },
        {
            "name": "gate-one-baseline",
            "stamp": stamp,
            "headers": [
                "baselines",
                "unchanged pull requests each",
                "failures per baseline: median",
                "90th percentile",
                "most",
                "baselines with more than 5 failures",
            ],
            "rows": [
                [
                    f"{len(fails)}",
                    f"{per}",
                    f"{quantile(0.5)}",
                    f"{quantile(0.9)}",
                    f"{max(fails)}",
                    f"{over} of {len(fails)}",
                ]
            ],
        },
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--trials", type=int, default=None, help="default: the gate's default")
    parser.add_argument("--confirm", type=int, default=DEFAULT_CONFIRM)
    parser.add_argument("--screen", type=float, default=DEFAULT_SCREEN)
    parser.add_argument("--null", type=int, default=4000, help="unchanged pull requests a family")
    parser.add_argument("--power", type=int, default=1000, help="pull requests a change")
    parser.add_argument("--baselines", type=int, default=100)
    parser.add_argument("--per-baseline", type=int, default=40)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument(
        "--amplifiers", type=int, default=1, help="amplifier series on a quiet step (1 to 4)"
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--retable",
        type=Path,
        default=None,
        help="re-render the tables of an existing artifact from its own figures, measuring nothing",
    )
    args = parser.parse_args(argv)
    if args.retable:
        document = json.loads(args.retable.read_text(encoding="utf-8"))
        document["tables"] = tables(document)
        tmp = args.retable.with_name(f".{args.retable.name}.tmp")
        tmp.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        tmp.replace(args.retable)
        return 0
    global AMPLIFIERS
    AMPLIFIERS = args.amplifiers
    document = run(args)
    text = json.dumps(document, indent=1) + "\n"
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json.with_name(f".{args.json.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(args.json)
    for entry in document["null"]:
        print(f"{entry['family']}: family-wise false fail {_pct(entry['family_wise'])}")
    for p in document["power"]:
        print(f"{p['meaning']}: caught {_pct(p['caught'])}")
    if document["worst_excess"] > 0:
        print(
            "calibration broken: a family-wise false-fail rate exceeds alpha by more than "
            "its Monte Carlo error",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
