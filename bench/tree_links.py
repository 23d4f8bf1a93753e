"""How often tie collapse takes a column for a tree's parent links, on trees and on decoys.

    python -m bench.tree_links [--seeds 10] [--before-rev REV] [--json PATH]

Tie collapse leaves a column that links an input's rows into trees as it is
(runner/amplify/tie_collapse.py, kept_references): folding a node's parent onto a few
real ids remade the trees into cycles. Leaving a column whole takes away the ties it
would have made, so the rule should keep real trees and nothing else. This generates
both and counts:

- trees: a node table whose parent column points at another row's scrambled id, with
  1, 5 or 20 roots (NULL parents) and 2, 4 or 8 children per node;
- decoys: a sales table keyed by sale_id from 0, with a store numbered 1 to 50 that is
  NULL on 5 to 40 percent of the rows: every store is a sale_id, and a walk from any
  sale through store ids ends on a NULL within a few steps, as a tree's walks do.

With `--before-rev`, the same inputs are judged by the code at REV too, in a process
of its own. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import environment, write_document
from bench.loop import _checkout

ROWS = 20_000
NODES = 3_000


def inputs(seeds: int) -> list[tuple[str, str, str]]:
    """(kind, label, SQL) for every generated input."""
    made = []
    for roots in (1, 5, 20):
        for fanout in (2, 4, 8):
            for seed in range(seeds):
                made.append(
                    (
                        "tree",
                        f"{roots} roots, {fanout} children each, seed {seed}",
                        f"WITH b AS (SELECT range AS k, CASE WHEN range < {roots} THEN NULL "
                        f"ELSE (range - {roots}) // {fanout} END AS pk FROM range({NODES})), "
                        f"lab AS (SELECT range AS k, (range * {7919 + 2 * seed}) % 1000003 AS label "
                        f"FROM range({NODES})) SELECT a.label AS node_id, p.label AS parent_id, "
                        f"(hash(b.k * 7 + {seed}) % 40)::INT AS kind FROM b JOIN lab a ON a.k = b.k "
                        "LEFT JOIN lab p ON p.k = b.pk",
                    )
                )
    for share in (5, 10, 20, 40):
        for seed in range(seeds):
            made.append(
                (
                    "decoy",
                    f"store NULL on {share} percent, seed {seed}",
                    f"SELECT range AS sale_id, CASE WHEN hash(range * 31 + {seed}) % 100 < "
                    f"{share} THEN NULL ELSE 1 + hash(range * 7 + {seed}) % 50 END AS parent_id, "
                    f"(hash(range * 13 + {seed}) % 1000)::INT AS amount FROM range({ROWS})",
                )
            )
    return made


def judge(made: list[tuple[str, str, str]], work: Path) -> list[bool]:
    """Whether tie collapse, as this process imports it, keeps each input's parent_id."""
    import duckdb

    from twicerun.runner.amplify.base import column_facts
    from twicerun.runner.amplify.tie_collapse import planned

    con = duckdb.connect()
    kept = []
    for i, (_, _, select) in enumerate(made):
        path = work / f"input_{i}.parquet"
        if not path.exists():
            con.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
        plan = planned(con, path, column_facts(con, path), artifact="t")
        kept.append("parent_id left as it is (it links" in getattr(plan, "detail", str(plan)))
    return kept


def tally(made: list[tuple[str, str, str]], kept: list[bool]) -> dict:
    rows = {}
    for (kind, _, _), whole in zip(made, kept, strict=True):
        row = rows.setdefault(kind, {"inputs": 0, "kept": 0})
        row["inputs"] += 1
        row["kept"] += whole
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tree_links")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--before-rev", default=None)
    parser.add_argument("--json", dest="json_path")
    parser.add_argument("--judge-in", help=argparse.SUPPRESS)  # a worker for --before-rev
    args = parser.parse_args(argv)
    made = inputs(args.seeds)
    if args.judge_in:
        print(json.dumps(judge(made, Path(args.judge_in))))
        return 0
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="twicerun-bench-tree-links-"))
    earlier = _checkout(args.before_rev) if args.before_rev else None
    try:
        results = {"this code": tally(made, judge(made, work))}
        if earlier is not None:
            env = {
                **os.environ,
                "PYTHONPATH": os.pathsep.join([str(earlier["root"] / "src"), str(earlier["root"])]),
            }
            done = subprocess.run(
                [sys.executable, "-m", "bench.tree_links", "--seeds", str(args.seeds), "--judge-in", str(work)],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            results[f"before: {earlier['rev'][:7]}"] = tally(made, json.loads(done.stdout))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if earlier is not None:
            shutil.rmtree(earlier["root"], ignore_errors=True)
    for code, rows in results.items():
        said = "; ".join(
            f"{kind}s: kept whole in {r['kept']} of {r['inputs']}" for kind, r in rows.items()
        )
        print(f"{code:>18}: {said}")
    if args.json_path:
        document = {
            "schema": "twicerun.bench-tree-links/1",
            "written": time.strftime("%Y-%m-%d"),
            "command": " ".join(["python -m bench.tree_links", *(argv or sys.argv[1:])]),
            "environment": environment(2),
            "before": {k: earlier[k] for k in ("rev", "subject")} if earlier else None,
            "seconds": round(time.perf_counter() - started, 1),
            "inputs": [{"kind": k, "label": label} for k, label, _ in made],
            "results": results,
        }
        write_document(args.json_path, document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
