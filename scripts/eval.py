"""The eval: T trials of the reference pipeline and its twins on this machine, written as JSON.

    python scripts/eval.py --trials 10 --json results/eval-DATE.json

Each trial runs, through the library exactly as `twicerun run` does:

1. the reference pipeline, default options (contained, amplified, strict);
2. the same invocation re-scored under reduction-order, executing nothing;
3. the twins, default options;
4. the reference pipeline without containment (baseline 3), without amplifiers;
5. one amplification-gap pass on the intermittent step (the loop and every
   amplifier to the full count, on the same input).

From those it records, per step: the fire-rate distribution (every bucket,
zeros included), the single-threaded rates, classes, causes, statuses and the
magnitudes behind them; the four baselines; the twins' specificity and what
each amplifier did on them; the reassociation bound at both term counts; and
the pre-registered conditions below, each TRIGGERED, not triggered, or NOT
MEASURED when there was nothing to measure. Progress goes to stderr; the wall
time goes into the artifact. `twicerun report` renders the README's tables
from it.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from eval_tables import eval_tables  # noqa: E402
from gap_pass import LOOP_SOURCE, one_pass  # noqa: E402
from tlc_partitions import generate  # noqa: E402

from bench.common import parse_measuring, write_artifact  # noqa: E402
from twicerun.cli import exit_code  # noqa: E402
from twicerun.judge.policy import REDUCTION_ORDER, Policy  # noqa: E402
from twicerun.pipeline import load_pipeline  # noqa: E402
from twicerun.result import Result  # noqa: E402
from twicerun.runner.environment import default_threads, stamp  # noqa: E402
from twicerun.runner.loop import LoopOptions, run_pipeline  # noqa: E402
from twicerun.runner.scoring import score, score_step  # noqa: E402

SCHEMA = "twicerun.eval/1"
REFERENCE = REPO / "pipelines" / "reference.py"
TWINS = REPO / "pipelines" / "twins.py"
# The file-order case (docs/data.md): a backfill wrong the same way on every run, and
# its union_by_name twin, on generated stand-ins for three TLC months.
TLC = REPO / "pipelines" / "tlc_backfill.py"
TLC_TWIN = REPO / "pipelines" / "tlc_backfill_twin.py"
INTERMITTENT = "assign_sparse_keys"
PLANTED = ("revenue_by_day", "assign_customer_keys", "merge_price_updates", "append_audit_log")
CORRECT_FLOAT = "average_basket"
DOWNSTREAM = "summarise_key_batches"
# Each planted bug and the twin that fixes it with one line.
PAIRS = {
    "revenue_by_day": "revenue_by_day_decimal",
    "assign_customer_keys": "assign_customer_keys_tiebreak",
    "merge_price_updates": "merge_price_updates_deduped",
    "append_audit_log": "append_new_audit_entries",
    "assign_sparse_keys": "assign_sparse_keys_tiebreak",
}
HEADROOM = 1000.0
SECONDS_PER_TRIAL = 120.0

# Pre-registered before the first eval was run (see the commit that added this file).
# Each is a way for one piece of twicerun to turn out to be unnecessary or wrong.
CONDITIONS = (
    (
        "oracle",
        "comparing by bit-exact multiset equality never fired on correct float code, "
        "which would leave the oracle with nothing to add",
    ),
    (
        "amplifiers",
        "no amplifier fired on a pass where the loop found the intermittent step "
        "quiet, so amplification has no evidence behind it",
    ),
    (
        "bound",
        f"some observed float drift sat less than {HEADROOM:,.0f}x inside the bound at "
        "the rows-read term count, so the derivation is not conservative enough",
    ),
    (
        "containment",
        "the step downstream of a bug never fired without containment, so "
        "containment removes nothing",
    ),
    ("sensitivity", "a planted bug's main step fired in fewer than every trial"),
    ("specificity", "a twin fired, in the loop or under an amplifier"),
    (
        "intermittent",
        "the intermittent step ended a trial neither DIVERGENT nor STABLE_ON_THIS_INPUT",
    ),
    (
        "cost",
        f"the eval took more than {SECONDS_PER_TRIAL:.0f}s a trial on average, so nobody "
        "will rerun it",
    ),
)

# Baseline 2: static patterns over a step's source, one per bug family.
STATIC_PATTERNS = {
    "float aggregate without DECIMAL": lambda src: (
        bool(re.search(r"\b(sum|avg)\s*\(", src, re.I)) and "DECIMAL" not in src.upper()
    ),
    "row_number over a one-column sort": lambda src: bool(
        re.search(r"row_number\(\)\s*OVER\s*\(\s*ORDER BY\s+\w+\s*\)", src, re.I)
    ),
    "MERGE or UPDATE from an undeduplicated source": lambda src: (
        bool(re.search(r"\bMERGE\s+INTO\b|\bUPDATE\b[\s\S]*\bFROM\b", src, re.I))
        and not re.search(r"\bQUALIFY\b|\bDISTINCT\s+ON\b", src, re.I)
    ),
    "append to its own state": lambda src: (
        "ctx.state(" in src
        and "UNION ALL" in src.upper()
        and not re.search(r"NOT\s+IN|NOT\s+EXISTS|\bEXCEPT\b|\bANTI\b", src, re.I)
    ),
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def by_name(result: Result):
    return {s.name: s for s in result.steps}


def static_flags(path: Path) -> dict[str, list[str]]:
    flags = {}
    for step in load_pipeline(path).steps:
        source = inspect.getsource(step.fn)
        flags[step.name] = [name for name, test in STATIC_PATTERNS.items() if test(source)]
    return flags


def first_findings(step, run: int):
    for c in step.comparisons:
        if c.run == run:
            for a in c.artifacts:
                if a.findings:
                    return a.findings
    return None


def trial(number: int, runs: int, threads: int, run_dir: Path) -> dict:
    started = time.time()
    log(f"trial {number}: the reference pipeline")
    strict = run_pipeline(
        REFERENCE, LoopOptions(runs=runs, threads=threads, run_dir=run_dir / "ref", keep=1)
    )
    tolerant = score(strict, Policy(REDUCTION_ORDER))
    log(f"trial {number}: the twins")
    twins = run_pipeline(
        TWINS, LoopOptions(runs=runs, threads=threads, run_dir=run_dir / "twins", keep=1)
    )
    log(f"trial {number}: the TLC backfill and its twin")
    tlc = run_pipeline(
        TLC, LoopOptions(runs=runs, threads=threads, run_dir=run_dir / "tlc", keep=1)
    )
    tlc_twin = run_pipeline(
        TLC_TWIN, LoopOptions(runs=runs, threads=threads, run_dir=run_dir / "tlc-twin", keep=1)
    )
    log(f"trial {number}: the reference pipeline without containment")
    loose = run_pipeline(
        REFERENCE,
        LoopOptions(
            runs=runs,
            threads=threads,
            run_dir=run_dir / "loose",
            keep=1,
            containment=False,
            amplify=False,
        ),
    )
    log(f"trial {number}: one amplification-gap pass on {INTERMITTENT}")
    pipeline = load_pipeline(REFERENCE)
    target = next(s for s in pipeline.steps if s.name == INTERMITTENT)
    gap = one_pass(pipeline, target, runs, threads, Policy(), run_dir / "gap")
    without_amplifiers = replace(
        strict, steps=[score_step(replace(s, amplifiers=[]), Policy()) for s in strict.steps]
    )
    return {
        "strict": strict,
        "tolerant": tolerant,
        "twins": twins,
        "tlc": tlc,
        "tlc_twin": tlc_twin,
        "loose": loose,
        "gap": {
            kind: {"fired": s.fired, "compared": s.compared, "asked": s.ran}
            for kind, s in gap.items()
        },
        "exit_with_amplifiers": exit_code(strict),
        "exit_without_amplifiers": exit_code(without_amplifiers),
        "seconds": round(time.time() - started, 1),
    }


def summarise(trials: list[dict], runs: int) -> dict:
    reference = trials[0]["strict"]
    steps = []
    for s in reference.steps:
        name = s.name
        rows = {
            "index": s.index,
            "name": name,
            "line": s.line,
            "compared": [],
            "strict": [],
            "threads_one": [],
            "threads_one_compared": [],
            "reduction_order": [],
            "uncontained": [],
            "uncontained_compared": [],
            "classes": [],
            "causes": [],
            "statuses": [],
            "attributed": [],
            "max_ulps": [],
            "max_relative": [],
            "unmatched_reference": [],
            "reference_rows": [],
            "extra_rows": [],
        }
        for t in trials:
            st, to, lo = (
                by_name(t["strict"])[name],
                by_name(t["tolerant"])[name],
                by_name(t["loose"])[name],
            )
            rows["compared"].append(st.compared)
            rows["strict"].append(st.fired)
            rows["reduction_order"].append(to.fired)
            rows["uncontained"].append(lo.fired)
            rows["uncontained_compared"].append(lo.compared)
            rows["threads_one"].append(st.bisect.fired if st.bisect and st.bisect.ran else None)
            rows["threads_one_compared"].append(
                st.bisect.compared if st.bisect and st.bisect.ran else None
            )
            rows["classes"].append(st.classes)
            rows["causes"].append(st.cause)
            rows["statuses"].append(st.status)
            ulps, rel, missing, ref_rows, extra, column = [], [], [], [], [], None
            for c in st.comparisons:
                for a in c.artifacts:
                    f = a.findings
                    if not (a.differs and f):
                        continue
                    for d in f.drift:
                        if d.moved and d.max_ulps is not None:
                            ulps.append(d.max_ulps)
                            if not isinstance(d.max_relative, str):
                                rel.append(d.max_relative)
                    missing.append(f.missing + f.multiplicity_missing)
                    extra.append(f.extra + f.multiplicity_extra)
                    ref_rows.append(f.reference_rows)
                    if f.attribution and f.attribution.column:
                        column = f.attribution.column
            rows["max_ulps"].append(max(ulps) if ulps else None)
            rows["max_relative"].append(max(rel) if rel else None)
            rows["unmatched_reference"].append(max(missing) if missing and max(missing) else None)
            rows["extra_rows"].append(max(extra) if extra and max(extra) else None)
            rows["reference_rows"].append(max(ref_rows) if ref_rows else None)
            rows["attributed"].append(column)
        steps.append(rows)

    twins = []
    amplifier_totals: dict[str, dict] = {}
    twin_steps = [("twins", s.name, s.name) for s in trials[0]["twins"].steps] + [
        ("tlc_twin", s.name, f"{TLC_TWIN.name}: {s.name}") for s in trials[0]["tlc_twin"].steps
    ]
    for key, step_name, shown in twin_steps:
        row = {"name": shown, "fired": [], "compared": [], "amplified_fired": [], "statuses": []}
        for t in trials:
            tw = by_name(t[key])[step_name]
            row["fired"].append(tw.fired)
            row["compared"].append(tw.compared)
            row["amplified_fired"].append(sum(a.fired for a in tw.amplifiers))
            row["statuses"].append(tw.status)
            for a in tw.amplifiers:
                tot = amplifier_totals.setdefault(
                    a.kind,
                    {
                        "amplifier": a.kind,
                        "step_passes": 0,
                        "ran": 0,
                        "comparisons": 0,
                        "fired": 0,
                        "raised": 0,
                        "declined": 0,
                    },
                )
                tot["step_passes"] += 1
                tot["ran"] += 1 if a.ran else 0
                tot["comparisons"] += a.compared
                tot["fired"] += a.fired
                tot["raised"] += 1 if a.error else 0
                tot["declined"] += 1 if a.declined else 0
        twins.append(row)

    sources = []
    for s in trials[0]["tlc"].steps:
        row = {"name": s.name, "fired": [], "compared": [], "statuses": [], "file_order": []}
        for t in trials:
            step = by_name(t["tlc"])[s.name]
            row["fired"].append(step.fired)
            row["compared"].append(step.compared)
            row["statuses"].append(step.status)
            order = [a for a in step.amplifiers if a.kind == "file order"]
            row["file_order"].append(
                {
                    "fired": order[0].fired,
                    "compared": order[0].compared,
                    "declined": order[0].declined,
                }
                if order
                else None
            )
        sources.append(row)

    # Baseline 1: two runs, bit-exact multiset equality (the canonical digest), rescored
    # from each trial's own runs 1 and 2.
    b1_fired, b1_rows, b1_compared = 0, [], []
    for t in trials:
        st = by_name(t["strict"])[CORRECT_FLOAT]
        second = next((c for c in st.comparisons if c.run == 2), None)
        if second is not None and second.differs:
            b1_fired += 1
            f = first_findings(st, 2)
            moved = max((d.moved for d in f.drift), default=0) if f else 0
            b1_rows.append(2 * moved + (f.unmatched if f else 0))
            b1_compared.append(f.reference_rows + f.later_rows if f else 0)
    # Baseline 1, run-matched: the same equality over every comparison the oracle made.
    disagreements, step_trials, twin_fired, twin_step_trials = 0, 0, 0, 0
    for t in trials:
        for s in t["strict"].steps:
            if not s.compared:
                continue
            step_trials += 1
            if sum(1 for c in s.comparisons if c.differs) != s.fired:
                disagreements += 1
        for s in t["twins"].steps:
            if s.compared:
                twin_step_trials += 1
                twin_fired += 1 if any(c.differs for c in s.comparisons) else 0
    # Baseline 2: static patterns.
    flags = static_flags(REFERENCE)
    twin_flags = static_flags(TWINS)
    separated = [bug for bug, fix in PAIRS.items() if flags.get(bug) and not twin_flags.get(fix)]
    bug_steps = set(PAIRS)
    false_flags = [n for n, f in flags.items() if f and n not in bug_steps]
    # Baseline 4: the same measurements without the amplifiers, through the real exit code.
    exit_zero_without = sum(1 for t in trials if t["exit_without_amplifiers"] == 0)
    exit_zero_with = sum(1 for t in trials if t["exit_with_amplifiers"] == 0)

    gap_sources: dict[str, dict] = {}
    loop_quiet = caught = 0
    for t in trials:
        seen = t["gap"]
        for kind, v in seen.items():
            g = gap_sources.setdefault(
                kind,
                {"source": kind, "fired": 0, "compared": 0, "found_nothing": 0, "could_not_ask": 0},
            )
            g["fired"] += v["fired"]
            g["compared"] += v["compared"]
            if not v["asked"] or not v["compared"]:
                g["could_not_ask"] += 1
            elif not v["fired"]:
                g["found_nothing"] += 1
        if seen[LOOP_SOURCE]["compared"] and not seen[LOOP_SOURCE]["fired"]:
            loop_quiet += 1
            if any(v["fired"] for k, v in seen.items() if k != LOOP_SOURCE):
                caught += 1
    for g in gap_sources.values():
        g["rate"] = g["fired"] / g["compared"] if g["compared"] else None

    bound = []
    for s in reference.steps:
        observed, loose_room, tight_room, figure = [], [], [], None
        for t in trials:
            st = by_name(t["strict"])[s.name]
            for b in st.bounds:
                figure = b
                observed.append(b.observed)
                loose_room.append(b.headroom_loose)
                tight_room.append(b.headroom_tight)
        if figure:
            bound.append(
                {
                    "step": s.name,
                    "artifact": figure.artifact,
                    "column": figure.column,
                    "observed": observed,
                    "n_loose": figure.n_loose,
                    "bound_loose": figure.bound_loose,
                    "n_tight": figure.n_tight,
                    "bound_tight": figure.bound_tight,
                    "headroom_loose": loose_room,
                    "headroom_tight": tight_room,
                }
            )

    return {
        "steps": steps,
        "twins": twins,
        "twin_amplifiers": list(amplifier_totals.values()),
        "sources": sources,
        "baselines": {
            "bitexact_two_runs": {
                "step": CORRECT_FLOAT,
                "fired_trials": b1_fired,
                "trials": len(trials),
                "rows_unmatched": b1_rows,
                "rows_compared": b1_compared,
            },
            "bitexact_run_matched": {
                "disagreements": disagreements,
                "step_trials": step_trials,
                "twin_fired": twin_fired,
                "twin_step_trials": twin_step_trials,
            },
            "static_patterns": {
                "separated": separated,
                "pairs": list(PAIRS),
                "false_flags": false_flags,
                "flags": flags,
                "twin_flags": twin_flags,
            },
            "no_amplifiers": {
                "exit_zero_without": exit_zero_without,
                "exit_zero_with": exit_zero_with,
                "trials": len(trials),
            },
        },
        "gap": {
            "step": INTERMITTENT,
            "sources": list(gap_sources.values()),
            "loop_quiet_passes": loop_quiet,
            "loop_quiet_passes_an_amplifier_caught": caught,
            "passes": len(trials),
        },
        "bound": bound,
    }


def judge_conditions(summary: dict, trials: int, seconds: float) -> list[dict]:
    steps = {s["name"]: s for s in summary["steps"]}
    verdicts = []

    def add(key, verdict, evidence):
        text = dict(CONDITIONS)[key]
        verdicts.append({"id": key, "condition": text, "verdict": verdict, "evidence": evidence})

    b1 = summary["baselines"]["bitexact_two_runs"]
    compared = sum(1 for m in steps[CORRECT_FLOAT]["compared"] if m)
    if not compared:
        add("oracle", "NOT MEASURED", f"{CORRECT_FLOAT} compared nothing in any trial")
    else:
        add(
            "oracle",
            "TRIGGERED" if b1["fired_trials"] == 0 else "not triggered",
            f"bit-exact equality fired on {CORRECT_FLOAT} in {b1['fired_trials']} of {trials} trials",
        )

    gap = summary["gap"]
    if gap["loop_quiet_passes"] == 0:
        add(
            "amplifiers",
            "NOT MEASURED",
            f"the loop fired on {INTERMITTENT} in every one of the {trials} passes, "
            "so no pass tested what an amplifier adds",
        )
    else:
        add(
            "amplifiers",
            "TRIGGERED" if gap["loop_quiet_passes_an_amplifier_caught"] == 0 else "not triggered",
            f"an amplifier fired on {gap['loop_quiet_passes_an_amplifier_caught']} of the "
            f"{gap['loop_quiet_passes']} passes where the loop found the step quiet",
        )

    rooms = [r for b in summary["bound"] for r in b["headroom_loose"] if r is not None]
    if not rooms:
        add("bound", "NOT MEASURED", "no float step drifted in any trial")
    else:
        short = sum(1 for r in rooms if r < HEADROOM)
        add(
            "bound",
            "TRIGGERED" if short else "not triggered",
            f"{len(rooms) - short} of {len(rooms)} float step-trials cleared {HEADROOM:,.0f}x at rows read",
        )

    down = steps[DOWNSTREAM]
    measured = sum(1 for m in down["uncontained_compared"] if m)
    if not measured:
        add("containment", "NOT MEASURED", f"{DOWNSTREAM} compared nothing without containment")
    else:
        fired = sum(1 for k in down["uncontained"] if k)
        add(
            "containment",
            "TRIGGERED" if fired == 0 else "not triggered",
            f"{DOWNSTREAM} fired uncontained in {fired} of {measured} trials, contained in "
            f"{sum(1 for k in down['strict'] if k)} of {trials}",
        )

    short = {n: sum(1 for k in steps[n]["strict"] if k) for n in PLANTED}
    measured = all(any(steps[n]["compared"]) for n in PLANTED)
    if not measured:
        add("sensitivity", "NOT MEASURED", "a planted bug's step compared nothing")
    else:
        add(
            "sensitivity",
            "TRIGGERED" if any(v < trials for v in short.values()) else "not triggered",
            ", ".join(f"{n} {v} of {trials}" for n, v in short.items()),
        )

    twin_passes = sum(1 for t in summary["twins"] for m in t["compared"] if m)
    if not twin_passes:
        add("specificity", "NOT MEASURED", "no twin compared anything")
    else:
        fired = sum(
            1
            for t in summary["twins"]
            for k, a in zip(t["fired"], t["amplified_fired"], strict=True)
            if k or a
        )
        add(
            "specificity",
            "TRIGGERED" if fired else "not triggered",
            f"{fired} twin step-trials fired, of {twin_passes} that compared anything",
        )

    statuses = steps[INTERMITTENT]["statuses"]
    if not any(steps[INTERMITTENT]["compared"]):
        add("intermittent", "NOT MEASURED", f"{INTERMITTENT} compared nothing")
    else:
        bad = [s for s in statuses if s not in ("DIVERGENT", "STABLE_ON_THIS_INPUT")]
        counts = {s: statuses.count(s) for s in dict.fromkeys(statuses)}
        add(
            "intermittent",
            "TRIGGERED" if bad else "not triggered",
            ", ".join(f"{s} x{n}" for s, n in counts.items()),
        )

    per_trial = seconds / trials
    add(
        "cost",
        "TRIGGERED" if per_trial > SECONDS_PER_TRIAL else "not triggered",
        f"{seconds:.0f}s over {trials} trials, {per_trial:.0f}s a trial",
    )
    return verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    args = parse_measuring(parser, argv, eval_tables)
    if args is None:
        return 0
    threads = args.threads or default_threads()
    started = time.time()
    trials = []
    with tempfile.TemporaryDirectory(prefix="twicerun-eval-") as run_dir:
        os.environ["TWICERUN_TLC_DIR"] = str(Path(run_dir) / "tlc-data")
        generate(Path(run_dir) / "tlc-data")
        for number in range(1, args.trials + 1):
            trials.append(trial(number, args.runs, threads, Path(run_dir)))
            log(f"trial {number}/{args.trials} done in {trials[-1]['seconds']}s")
    seconds = round(time.time() - started, 1)
    summary = summarise(trials, args.runs)
    env = stamp(threads)
    document = {
        "schema": SCHEMA,
        "written": time.strftime("%Y-%m-%d"),
        "command": "python scripts/eval.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "trials": args.trials,
        "runs": args.runs,
        "seconds": seconds,
        "trial_seconds": [t["seconds"] for t in trials],
        "environment": asdict(env),
        "pipeline": "pipelines/reference.py",
        "twins_pipeline": "pipelines/twins.py",
        **summary,
        "conditions": judge_conditions(summary, args.trials, seconds),
    }
    if args.json_path:
        write_artifact(args.json_path, document, eval_tables)
        log(f"wrote {args.json_path} ({seconds}s)")
    else:
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
