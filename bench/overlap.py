"""What the work done beside a step saves, and what it might hide.

    python -m bench.overlap [--pairs 16] [--tiny 5] [--json PATH]
    python -m bench.overlap --pool ARTIFACT [ARTIFACT ...]

Every step execution gets a brand-new DuckDB, opened ahead on a helper thread.
DuckDB lets go of the GIL while it opens one, so three helpers can open three
at once, and on tiny steps the wait for the next connection nearly disappears;
but the helpers then run beside the step, on the cores it would have had. This
runs two settings alternately, each invocation in a fresh process, so both see
the same machine at the same time:

- one helper, two connections ahead (what twicerun did first);
- three helpers, three ahead (what it does now).

A third setting was measured once, with the code of commits 12cae85 to cfe632f,
and is kept in results/experiments/bench-overlap-receipts-beside-2026-12-01.json:
receipts written on the janitor's thread, beside the next step. It lowered the
sparse tie step's fire rate, so receipts stay on the loop's path (docs/runs.md).

On the reference pipeline (amplifiers off) it counts, per step, the loop's
comparisons that fired; on `bench/pipelines/tiny.py` it takes twicerun's own
time per execution (wall outside the steps' own calls, over the executions).

Nothing here is a test; the figures go into the artifact and docs/runs.md.

`--pool` measures nothing: it pools artifacts of the same two settings and asks,
per step, how often shuffling which setting each invocation had gives a
difference in mean fire count at least as far below zero as the one measured
(three helpers against one). That was the rule fixed before the 60-invocation
artifact was read: under one time in twenty, and the helpers would have gone.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import environment, parse_measuring, print_tables, write_artifact
from twicerun.render.tables import Artifact, Table, carry, stamp

REPO = Path(__file__).resolve().parent.parent
SETTINGS = {
    "one helper, two ahead": (1, 2),
    "three helpers, three ahead": (3, 3),
}
_COUNT = {2: "two", 3: "three"}
REFERENCE = "pipelines/reference.py"
TINY = "bench/pipelines/tiny.py"


def child(pipeline: str, helpers: int, ahead: int) -> dict:
    """One invocation in this process, with the connections set as asked."""
    from bench.loop import _executions
    from twicerun.runner.loop import LoopOptions, run_pipeline
    from twicerun.storage.connections import Connections

    Connections.HELPERS = helpers
    Connections.AHEAD = ahead
    with tempfile.TemporaryDirectory(prefix="twicerun-bench-overlap-") as run_dir:
        result = run_pipeline(
            REPO / pipeline, LoopOptions(run_dir=Path(run_dir), keep=0, amplify=False)
        )
        executions = sum(_executions(Path(result.artifacts))[0].values())
    return {
        "wall": result.seconds,
        "steps": result.step_seconds,
        "executions": executions,
        "fired": {s.name: [s.fired, s.compared] for s in result.steps},
        "threads": result.environment.threads,
    }


def _spawn(pipeline: str, helpers: int, ahead: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "bench.overlap", "--child", pipeline, str(helpers), str(ahead)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(pairs: int, tiny: int) -> dict:
    reference: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    small: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    for i in range(pairs):
        for name, setting in SETTINGS.items():  # interleaved
            reference[name].append(_spawn(REFERENCE, *setting))
        print(f"reference round {i + 1} of {pairs}", file=sys.stderr, flush=True)
    for i in range(tiny):
        for name, setting in SETTINGS.items():
            small[name].append(_spawn(TINY, *setting))
        print(f"tiny round {i + 1} of {tiny}", file=sys.stderr, flush=True)
    return {"reference": reference, "tiny": small}


SHUFFLES = 20_000


def pooled(paths: list[str], shuffles: int = SHUFFLES, seed: int = 20261201) -> list[str]:
    """Per step: both settings' fired comparisons over the pooled artifacts, and the
    one-sided chance, settings shuffled across invocations, of a difference in mean
    per-invocation fire count at least as far below zero as the measured one."""
    by_setting: dict[str, list[dict]] = {}
    for path in paths:
        reference = json.loads(Path(path).read_text())["reference"]
        for name, runs in reference.items():
            by_setting.setdefault(name, []).extend(runs)
    (first, one), (second, other) = list(by_setting.items())
    lines = []
    for step in one[0]["fired"]:
        a = [r["fired"][step][0] for r in one]
        b = [r["fired"][step][0] for r in other]
        measured = sum(b) / len(b) - sum(a) / len(a)
        pool, rng, below = a + b, random.Random(seed), 0
        for _ in range(shuffles):
            rng.shuffle(pool)
            if sum(pool[len(a) :]) / len(b) - sum(pool[: len(a)]) / len(a) <= measured:
                below += 1
        lines.append(
            f"{step}: {first} {sum(a)} of {4 * len(a)}, {second} {sum(b)} of {4 * len(b)} "
            f"over {len(a)} and {len(b)} invocations; difference in mean {measured:+.3f}, "
            f"as low or lower in {below / shuffles:.3f} of {shuffles:,} shuffles"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["--pool"]:
        print("\n".join(pooled(args_in[1:])))
        return 0
    if args_in[:1] == ["--child"]:
        _, pipeline, helpers, ahead = args_in
        print(json.dumps(child(pipeline, int(helpers), int(ahead))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--tiny", type=int, default=5)
    args = parse_measuring(parser, args_in, tables)
    if args is None:
        return 0
    started = time.perf_counter()
    figures = measure(args.pairs, args.tiny)
    first = figures["reference"][next(iter(SETTINGS))][0]
    document = {
        "schema": "twicerun.bench-overlap/1",
        "written": time.strftime("%Y-%m-%d"),
        "command": "python -m bench.overlap " + " ".join(args_in),
        "environment": environment(first["threads"]),
        "pairs": args.pairs,
        "tiny_pairs": args.tiny,
        "seconds": round(time.perf_counter() - started, 1),
        **figures,
    }
    print_tables(tables, document)
    if args.json_path:
        write_artifact(args.json_path, document, tables)
    return 0


# The artifact's tables, as data ------------------------------------------------------


def _fired(runs: list[dict], step: str) -> str:
    fired = sum(r["fired"][step][0] for r in runs)
    compared = sum(r["fired"][step][1] for r in runs)
    return f"{fired} of {compared}"


def _per_execution(runs: list[dict]) -> str:
    ms = [(r["wall"] - r["steps"]) / r["executions"] * 1000 for r in runs]
    return f"{statistics.median(ms):.1f} ms ({min(ms):.1f} to {max(ms):.1f})"


def bench_overlap(a: Artifact) -> Table:
    d = a.document
    reference = d["reference"]
    names = list(reference)  # the settings this artifact measured, in its order
    steps = [
        s
        for s in reference[names[0]][0]["fired"]
        if any(r["fired"][s][0] for n in names for r in reference[n])
    ]
    rows = [
        [f"`{s}`: loop comparisons that fired", *(_fired(reference[n], s) for n in names)]
        for s in steps
    ]
    rows.append(
        [
            "`tiny.py`: twicerun's own time per execution (range)",
            *(_per_execution(d["tiny"][n]) for n in names),
        ]
    )
    rows.append(
        [
            "`tiny.py`: inside the steps, median",
            *(f"{statistics.median(r['steps'] for r in d['tiny'][n]):.2f}s" for n in names),
        ]
    )
    rows.append(
        [
            "`tiny.py`: the whole invocation, median",
            *(f"{statistics.median(r['wall'] for r in d['tiny'][n]):.2f}s" for n in names),
        ]
    )
    what = (
        f"{d['pairs']} invocations of `{REFERENCE}` per setting (amplifiers off) and "
        f"{d['tiny_pairs']} of `{TINY}`, the {_COUNT.get(len(names), len(names))} settings "
        f"{'alternating' if len(names) == 2 else 'in turn'}, each invocation in a "
        f"fresh process; {d['seconds']:.0f}s in all."
    )
    return Table(
        "bench-overlap",
        stamp(a, what),
        ["", *names],
        rows,
        ["left", *["right"] * len(names)],
    )


def tables(path: str, document: dict) -> list[dict]:
    return carry([bench_overlap(Artifact(path, document))])


if __name__ == "__main__":
    raise SystemExit(main())
