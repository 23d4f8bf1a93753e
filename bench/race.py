"""How often the tie race in `assign_customer_keys` gives five equal answers in a row.

    python -m bench.race [--executions 200] [--json PATH]

The eval's pre-registered sensitivity condition asks the loop to catch every planted
bug in every trial, and `assign_customer_keys` is the step that has missed it: a loop
of five runs in which all five answers were equal (0 of 4). This measures the race on
its own, with nothing of twicerun around it, and sets the eval's record beside it:

- the events input, written once by `make_inputs` through twicerun's own ctx.write, so
  it is the file the step reads in an invocation;
- the step's query, taken from `pipelines/reference.py` as the step hands it to
  ctx.write, executed `--executions` times, each on a fresh DuckDB connection at the
  loop's thread count, and identified by a digest of its rows;
- from the answers' shares p, the chance that two executions differ (1 - sum p^2), that
  five agree (sum p^5, a loop that fires 0 of 4, were executions independent), and that
  ten trials hold at least one such loop;
- every committed eval (results/eval-*.json and results/experiments/eval-*.json): in how
  many trials each planted bug's main step fired 0 of its comparisons in the loop.

Nothing here is a test; the figures go into the artifact and the README.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.common import environment, parse_measuring, print_tables, write_artifact
from twicerun.render.tables import Artifact, Table, carry, stamp

REPO = Path(__file__).resolve().parent.parent
REFERENCE = "pipelines/reference.py"
STEP = "assign_customer_keys"
# The steps the sensitivity condition names, as scripts/eval.py lists them.
CONDITION_STEPS = (
    "revenue_by_day",
    "assign_customer_keys",
    "merge_price_updates",
    "append_audit_log",
)
RUNS = 5
TRIALS = 10


class _Capture:
    """A ctx that keeps what a step hands to ctx.write and runs nothing."""

    def __init__(self) -> None:
        self.written: dict[str, str] = {}

    def read(self, name: str) -> None:
        return None

    def write(self, name: str, data: str) -> None:
        self.written[name] = data


def _inputs(pipeline, threads: int, scratch: Path) -> Path:
    """The events artifact as `make_inputs` writes it through twicerun's ctx."""
    from twicerun.runner.engines import open_engine

    engine = open_engine(pipeline.engine, threads, None)
    try:
        step = next(s for s in pipeline.steps if s.name == "make_inputs")
        ctx = engine.context(
            threads,
            step_index=step.index,
            step_name=step.name,
            out_dir=scratch,
            visible={},
            state_source=lambda _name: None,
            owners={},
        )
        step.call(ctx)
        engine.release(ctx)
        return ctx.output.written["events"]
    finally:
        engine.shutdown()


def measure(executions: int, threads: int) -> dict:
    import duckdb

    from twicerun import sql
    from twicerun.pipeline import load_pipeline

    pipeline = load_pipeline(str(REPO / REFERENCE))
    capture = _Capture()
    next(s for s in pipeline.steps if s.name == STEP).call(capture)
    (query,) = capture.written.values()
    answers = []
    with tempfile.TemporaryDirectory(prefix="twicerun-race-") as scratch:
        events = _inputs(pipeline, threads, Path(scratch))
        for _ in range(executions):
            con = duckdb.connect(config={"threads": threads})
            try:
                con.execute(f"CREATE VIEW events AS SELECT * FROM {sql.parquet(events)}")
                (answer,) = con.execute(
                    f"SELECT count(*)::VARCHAR || ':' || sum(hash(t))::VARCHAR FROM ({query}) t"
                ).fetchall()
                answers.append(answer[0])
            finally:
                con.close()
    counts = collections.Counter(answers)
    return {"query": " ".join(query.split()), "shares": sorted(counts.values(), reverse=True)}


def eval_record() -> list[dict]:
    """Per committed eval, each condition step's loop fire counts over its trials."""
    found = []
    paths = [*sorted((REPO / "results").glob("eval-*.json"))]
    paths += sorted((REPO / "results" / "experiments").glob("eval-*.json"))
    for path in paths:
        document = json.loads(path.read_text(encoding="utf-8"))
        steps = {s["name"]: s for s in document.get("steps", [])}
        found.append(
            {
                "artifact": path.relative_to(REPO).as_posix(),
                "fired": {n: steps[n]["strict"] for n in CONDITION_STEPS if n in steps},
            }
        )
    return found


def main(argv: list[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=200)
    args = parse_measuring(parser, args_in, tables)
    if args is None:
        return 0
    from twicerun.runner.environment import default_threads

    threads = default_threads()
    started = time.perf_counter()
    figures = measure(args.executions, threads)
    document = {
        "schema": "twicerun.bench-race/1",
        "written": time.strftime("%Y-%m-%d"),
        "command": "python -m bench.race " + " ".join(args_in),
        "environment": environment(threads),
        "step": STEP,
        "executions": args.executions,
        **figures,
        "evals": eval_record(),
        "seconds": round(time.perf_counter() - started, 1),
    }
    print_tables(tables, document)
    if args.json_path:
        write_artifact(args.json_path, document, tables)
    return 0


# The artifact's tables, as data ------------------------------------------------------


def chances(shares: list[int]) -> dict[str, float]:
    """From the answers' counts: two executions differ, a loop of RUNS agrees, and TRIALS
    trials hold at least one loop that agrees, were executions independent draws."""
    n = sum(shares)
    p = [c / n for c in shares]
    agree = sum(x**RUNS for x in p)
    return {
        "differ": 1 - sum(x * x for x in p),
        "agree": agree,
        "some_trial": 1 - (1 - agree) ** TRIALS,
    }


def bench_race(a: Artifact) -> Table:
    d = a.document
    c = chances(d["shares"])
    n = sum(d["shares"])
    rows = [
        ["distinct answers", f"{len(d['shares'])} in {n} executions"],
        ["the commonest answer's share", f"{d['shares'][0] / n:.2f}"],
        ["chance two executions differ (a loop comparison that fires)", f"{c['differ']:.2f}"],
        [
            f"chance {RUNS} executions agree (a loop that fires 0 of {RUNS - 1})",
            f"{c['agree']:.3f}",
        ],
        [f"chance {TRIALS} trials hold at least one such loop", f"{c['some_trial']:.2f}"],
    ]
    for step in CONDITION_STEPS:
        trials = [f for e in d["evals"] for f in e["fired"].get(step, [])]
        quiet = sum(1 for f in trials if f == 0)
        evals = sum(1 for e in d["evals"] if 0 in e["fired"].get(step, []))
        rows.append(
            [
                f"committed evals: trials in which the loop fired 0 of {RUNS - 1} on `{step}`",
                f"{quiet} of {len(trials)}, in {evals} of {len(d['evals'])} evals",
            ]
        )
    what = (
        f"{n} executions of `{d['step']}`'s query from `{REFERENCE}`, each on a fresh DuckDB "
        f"connection with nothing of twicerun around it, on the events input as "
        f"`make_inputs` writes it; then every committed eval's loop fire counts. "
        f"{d['seconds']:.0f}s in all."
    )
    return Table("bench-race", stamp(a, what), ["", "figure"], rows, ["left", "right"])


def tables(path: str, document: dict) -> list[dict]:
    return carry([bench_race(Artifact(path, document))])


if __name__ == "__main__":
    raise SystemExit(main())
