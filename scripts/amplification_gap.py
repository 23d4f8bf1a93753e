"""Point the loop and each amplifier at one step, pass after pass, and count what each sees.

    python scripts/amplification_gap.py --passes 10 [--step assign_sparse_keys]
        [--pipeline pipelines/reference.py] [--runs 5] [--json results/gap-DATE.json]

`twicerun run` cannot produce this: it only amplifies steps the loop found
quiet, so whenever the loop catches the step no amplifier is asked. Here every
source runs on every pass, each for the full number of runs and on the same
run-1 inputs: the plain loop (the step re-run on its own input), then tie
collapse, thread count, row multiplication and arrival order. Per source it
reports comparisons that fired, the per-comparison rate, the passes on which it
compared and found nothing, and the passes on which it could not ask at all (it
declined, or raised). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from eval_tables import gap_tables  # noqa: E402
from gap_pass import LOOP_SOURCE, one_pass  # noqa: E402

from bench.common import parse_measuring, write_artifact  # noqa: E402
from twicerun.judge.policy import Policy  # noqa: E402
from twicerun.pipeline import load_pipeline  # noqa: E402
from twicerun.runner.environment import default_threads, stamp  # noqa: E402

SCHEMA = "twicerun.gap/1"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--pipeline", default=str(REPO / "pipelines" / "reference.py"))
    parser.add_argument("--step", default="assign_sparse_keys")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    args = parse_measuring(parser, argv, gap_tables)
    if args is None:
        return 0

    pipeline = load_pipeline(args.pipeline)
    by_name = {s.name: s for s in pipeline.steps}
    if args.step not in by_name:
        print(
            f"amplification_gap: {args.pipeline} has no step {args.step}; its steps are "
            f"{', '.join(by_name)}",
            file=sys.stderr,
        )
        return 2
    target = by_name[args.step]
    threads = args.threads or default_threads()
    policy = Policy()
    started = time.time()
    totals: dict[str, dict] = {}
    passes = []
    with tempfile.TemporaryDirectory(prefix="twicerun-gap-") as run_dir:
        for p in range(1, args.passes + 1):
            print(f"pass {p}/{args.passes}", file=sys.stderr, flush=True)
            seen = one_pass(pipeline, target, args.runs, threads, policy, Path(run_dir))
            passes.append(
                {
                    kind: {"fired": s.fired, "compared": s.compared, "asked": s.ran}
                    for kind, s in seen.items()
                }
            )
            for kind, s in seen.items():
                t = totals.setdefault(
                    kind,
                    {
                        "source": kind,
                        "fired": 0,
                        "compared": 0,
                        "found_nothing": 0,
                        "could_not_ask": 0,
                    },
                )
                t["fired"] += s.fired
                t["compared"] += s.compared
                if not s.ran or s.compared == 0:
                    t["could_not_ask"] += 1
                elif s.fired == 0:
                    t["found_nothing"] += 1
    sources = list(totals.values())
    for t in sources:
        t["rate"] = t["fired"] / t["compared"] if t["compared"] else None
        t["passes"] = args.passes
    loop_quiet = [
        i
        for i, p in enumerate(passes)
        if p[LOOP_SOURCE]["compared"] and not p[LOOP_SOURCE]["fired"]
    ]
    caught = sum(
        1 for i in loop_quiet if any(v["fired"] for k, v in passes[i].items() if k != LOOP_SOURCE)
    )
    env = stamp(threads)
    document = {
        "schema": SCHEMA,
        "pipeline": str(Path(args.pipeline).resolve().relative_to(REPO))
        if Path(args.pipeline).resolve().is_relative_to(REPO)
        else args.pipeline,
        "step": args.step,
        "passes": args.passes,
        "runs": args.runs,
        "environment": asdict(env),
        "seconds": round(time.time() - started, 1),
        "written": time.strftime("%Y-%m-%d"),
        "command": "python scripts/amplification_gap.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "sources": sources,
        "loop_quiet_passes": len(loop_quiet),
        "loop_quiet_passes_an_amplifier_caught": caught,
        "per_pass": passes,
    }
    width = max(len(t["source"]) for t in sources)
    print(
        f"{args.step} of {Path(args.pipeline).name}, {args.passes} passes of {args.runs} runs, "
        f"DuckDB {env.duckdb} at threads={threads}, {document['seconds']}s"
    )
    print(f"  {'source':<{width}}  fired          rate   found nothing  could not ask")
    for t in sources:
        rate = f"{t['rate']:.2f}" if t["rate"] is not None else "NOT MEASURED"
        print(
            f"  {t['source']:<{width}}  {t['fired']:>4} of {t['compared']:<5}  {rate:>5}  "
            f"{t['found_nothing']:>4} of {args.passes:<5}  {t['could_not_ask']:>4} of {args.passes}"
        )
    print(
        f"The loop found nothing on {len(loop_quiet)} of the passes where it compared anything; "
        f"an amplifier fired on {caught} of those."
    )
    if args.json_path:
        write_artifact(args.json_path, document, gap_tables)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
