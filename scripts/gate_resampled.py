"""The gate's decision on trials the real CLI recorded, drawn again many times.

scripts/gate_calibration.py drives the decision on trials it makes up from models of a
step (a coin at 0.2 a run, a burst, a drift); scripts/gate_coins.py runs the real CLI, but
forty calls cannot tell a failure rate of one percent from one of five. This script sits
between them. For each family of steps it records many trials of a pipeline with `twicerun
baseline update`, each a real invocation (the loop, the bisect, the amplifiers), and
fewer of a worse version; then it draws pull requests from those trials: a baseline of
the gate's default size, the pull request's own trial and its confirmation trials, drawn
without replacement, each decided by the gate's own function
(`twicerun.github.decision.decide_pipeline`, on the figures
`twicerun.github.gate.trial_statistics` makes of a trial, as the gate makes them).

Two families: gate_coins.py's pipeline (a steady step and four `random()` coins), and
one with a step of each kind of difference the gate tests beside a step's score: a
steady step, a float sum over groups that drifts with the order its threads add in, the
same sum losing a group on some runs, `first()` without an order (rows that differ by
thread order, and under the amplifiers when the loop saw nothing), and a coin.

So the trials are the ones twicerun really records, models or no models. What it does
not vary: the draws share one pool, so the intervals printed are over the draws, and the
pool of recorded trials is itself one sample of each step's behaviour.

    python scripts/gate_resampled.py --json results/gate-resampled-$(date +%F).json
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from gate_calibration import FAILING, _pct, rate
from gate_coins import pipeline, recording, twicerun, write

from twicerun.github.baseline import load
from twicerun.github.decision import (
    DEFAULT_ALPHA,
    DEFAULT_CONFIRM,
    DEFAULT_SCREEN,
    decide_pipeline,
    default_trials,
)
from twicerun.github.gate import KIND_MARK, implied_by, tested_kinds, trial_statistics

SCHEMA = "twicerun.gate-resampled/1"
PIPELINE = "pipeline.py"


def mixed(flip: float, coin: float) -> str:
    """Steps whose differences are of every kind the gate tests; `flip` is how often the
    first step's flag changes (0: never), `coin` how often the last step's coin does."""
    return f"""
def events(ctx):
    ctx.write("events", "SELECT i AS id, i % 1000 AS grp, (hash(i) % 100000) / 7.0 AS amount, "
                        "(SELECT CASE WHEN random() < {flip} THEN 1 ELSE 0 END) AS flag "
                        "FROM range(250000) t(i)")


def totals(ctx):
    ctx.read("events")
    ctx.write("totals", "SELECT grp, sum(amount) AS total FROM events GROUP BY grp")


def totals_losing_a_group(ctx):
    ctx.read("events")
    ctx.write("kept", "SELECT grp, sum(amount) AS total FROM events GROUP BY grp "
                      "HAVING NOT (grp = 0 AND random() < 0.1)")


def first_ids(ctx):
    ctx.read("events")
    ctx.write("firsts", "SELECT grp, first(id) AS id FROM events GROUP BY grp")


def coin(ctx):
    ctx.write("coin", "SELECT CASE WHEN random() < {coin} THEN 1 ELSE 0 END AS v")
"""


# Each family: (the pipeline as it was, as the worse pull request has it, and what each is).
FAMILIES = {
    "coins": (
        pipeline(None, 0.1),
        pipeline(0.5, 0.6),
        "steady, and coins at 0.05, 0.1, 0.2, 0.3",
        "the steady step now at 0.5, the 0.1 coin at 0.6",
    ),
    "mixed": (
        mixed(0, 0.2),
        mixed(0.3, 0.6),
        "steady, a drifting sum, that sum losing a group on 10% of runs, first() unordered, "
        "a coin at 0.2",
        "the steady step now differs on 30% of its runs, the coin at 0.6",
    ),
}


def record(cwd: Path, source: str, trials: int, name: str) -> tuple[list[dict], dict, float]:
    """`trials` real trials of the pipeline `source`, as the decision takes them, with the
    statistics tested for each step and how long the recording took."""
    (cwd / PIPELINE).write_text(source)
    _, seconds = twicerun(
        "baseline", "update", PIPELINE, "--trials", str(trials), "--output", name, cwd=cwd
    )
    baseline = load(cwd / name, "baseline update")
    (key,) = baseline.pipelines
    names = [s.name for s in baseline.pipelines[key].steps]
    tested = tested_kinds(baseline, key, names)
    return [trial_statistics(t.pipelines[key], tested) for t in baseline.trials], tested, seconds


def draw(
    pool: list[dict],
    after: list[dict] | None,
    *,
    trials: int,
    confirm: int,
    implied: dict[str, str],
    rng: random.Random,
) -> tuple[set[str], int]:
    """One pull request: a baseline from `pool`, its trials from `after` (or from `pool` too,
    none of them reused). The steps it failed, and how many confirmation trials it ran."""
    if after is None:
        picked = rng.sample(pool, trials + 1 + confirm)
        baseline_trials, now, fresh = picked[:trials], picked[trials], picked[trials + 1 :]
    else:
        baseline_trials = rng.sample(pool, trials)
        now, *fresh = rng.sample(after, 1 + confirm)
    baseline = {s: [t[s] for t in baseline_trials] for s in pool[0]}
    again = iter(fresh)
    outcomes, ran = decide_pipeline(
        baseline,
        now,
        lambda: next(again),
        level=DEFAULT_ALPHA,
        screen_level=DEFAULT_SCREEN,
        confirm=confirm,
        seed=rng.randrange(1 << 30),
        implied=implied,
    )
    failed = {s.partition(KIND_MARK)[0] for s, o in outcomes.items() if o.verdict in FAILING}
    return failed, ran


def resample(
    pool: list[dict], after: list[dict] | None, draws: int, trials: int, implied: dict, seed: int
) -> dict:
    rng = random.Random(seed)
    per_step: Counter[str] = Counter()
    failed_any = extra = 0
    for _ in range(draws):
        failed, ran = draw(
            pool, after, trials=trials, confirm=DEFAULT_CONFIRM, implied=implied, rng=rng
        )
        failed_any += bool(failed)
        extra += ran
        per_step.update(failed)
    steps = [s for s in pool[0] if KIND_MARK not in s]
    return {
        "draws": draws,
        "failed": rate(failed_any, draws),
        "per_step": {s: rate(per_step[s], draws) for s in steps},
        "mean_extra_trials": extra / draws,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--unchanged-trials", type=int, default=150)
    parser.add_argument("--worse-trials", type=int, default=40)
    parser.add_argument("--draws", type=int, default=4000, help="pull requests drawn, each way")
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    trials = default_trials(DEFAULT_ALPHA, 5, DEFAULT_CONFIRM)
    if (
        args.unchanged_trials < trials + 1 + DEFAULT_CONFIRM
        or args.worse_trials < 1 + DEFAULT_CONFIRM
    ):
        parser.error(
            f"--unchanged-trials needs at least {trials + 1 + DEFAULT_CONFIRM} (a baseline of "
            f"{trials}, a pull request and {DEFAULT_CONFIRM} confirmations drawn without "
            f"replacement) and --worse-trials at least {1 + DEFAULT_CONFIRM}"
        )
    started = time.monotonic()
    families = {}
    for family, (before, after, _, _) in FAMILIES.items():
        with tempfile.TemporaryDirectory() as tmp:
            cwd = Path(tmp).resolve()
            unchanged, tested, unchanged_seconds = record(
                cwd, before, args.unchanged_trials, "unchanged.json"
            )
            worse, _, worse_seconds = record(cwd, after, args.worse_trials, "worse.json")
        print(f"{family}: recorded {len(unchanged)} and {len(worse)} trials", file=sys.stderr)
        implied = implied_by(tested)
        families[family] = {
            "recorded": {
                "unchanged": {"trials": len(unchanged), "seconds": round(unchanged_seconds, 1)},
                "worse": {"trials": len(worse), "seconds": round(worse_seconds, 1)},
            },
            "unchanged": resample(unchanged, None, args.draws, trials, implied, args.seed),
            "worse": resample(unchanged, worse, args.draws, trials, implied, args.seed + 1),
        }
    document = {
        **recording(SCHEMA, "gate_resampled.py", argv, started),
        "settings": {
            "alpha": DEFAULT_ALPHA,
            "screen": DEFAULT_SCREEN,
            "confirm": DEFAULT_CONFIRM,
            "baseline_trials": trials,
            "unchanged_trials": args.unchanged_trials,
            "worse_trials": args.worse_trials,
            "seed": args.seed,
        },
        "families": families,
    }
    document["tables"] = [table(document)]
    if args.json:
        write(args.json, document)
    for family, f in families.items():
        print(
            f"{family}: unchanged failed {f['unchanged']['failed']['rate']:.2%} of "
            f"{args.draws}; worse failed {f['worse']['failed']['rate']:.2%}"
        )
    return 0


def table(d: dict) -> dict:
    e, s = d["environment"], d["settings"]
    recorded = "; ".join(
        f"{name}, {f['recorded']['unchanged']['trials']} trials in "
        f"{f['recorded']['unchanged']['seconds']:.0f}s and {f['recorded']['worse']['trials']} "
        f"of its worse version in {f['recorded']['worse']['seconds']:.0f}s"
        for name, f in d["families"].items()
    )
    stamp = (
        f"Generated by `twicerun report` from `{d['command']}` ({d['written']}, "
        f"{d['seconds']:.0f}s in all), twicerun {e['twicerun']}, DuckDB {e['duckdb']}, "
        f"{e['cpus']} cores. Recorded with `twicerun baseline update` at its defaults: "
        f"{recorded}. Each pull request drawn: a baseline of {s['baseline_trials']} trials, "
        f"its own trial and {s['confirm']} confirmation trials, none reused; alpha "
        f"{s['alpha']:g}, screen {s['screen']:g}. Rates with their 95% interval over the draws."
    )

    def worst(summary: dict) -> str:
        name, r = max(summary["per_step"].items(), key=lambda item: item[1]["k"])
        return f"`{name}` {_pct(r)}"

    rows = []
    for name, f in d["families"].items():
        _, _, was, now = FAMILIES[name]
        for side, said in (("unchanged", f"unchanged: {was}"), ("worse", f"worse: {now}")):
            r = f[side]
            rows.append(
                [
                    f"`{name}`",
                    said,
                    f"{r['draws']:,}",
                    _pct(r["failed"]),
                    worst(r),
                    f"{r['mean_extra_trials']:.2f}",
                ]
            )
    return {
        "name": "gate-resampled",
        "stamp": stamp,
        "headers": [
            "family",
            "pull request's trials drawn from",
            "pull requests",
            "failed the check",
            "worst single step",
            "extra trials a pull request",
        ],
        "rows": rows,
    }


if __name__ == "__main__":
    sys.exit(main())
