"""How often `twicerun audit` of a step mapping over a forked pool of workers hangs.

    python -m bench.forked_pool [--audits 300] [--before-rev REV] [--timeout 20] [--json PATH]

A pool leaving its `with` block terminates its workers with SIGTERM. A worker still
starting at that moment (the other had done the whole map) used to get the signal
while it still held twicerun's handler, and live on, waiting on a queue its pool had
let go of; the pool, the step and the command then waited for ever
(docs/pipelines.md). The race is rare, so this counts it over many audits, each in a
process of its own, and, with `--before-rev`, over the code at REV too, the two
codes alternating so that the host's load falls on both alike. An audit that has not
ended after `--timeout` seconds is counted as hung and its process group killed.
Nothing here is a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import environment, write_document
from bench.loop import _checkout

PIPELINE = """
import multiprocessing


def _double(v):
    return v * 2


def inputs(ctx):
    ctx.write("t", "SELECT range AS v FROM range(10)")


def doubled(ctx):
    values = [v for (v,) in ctx.read("t").order("v").fetchall()]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        doubled = pool.map(_double, values)
    ctx.write("d", f"SELECT unnest({doubled}) AS d")
"""


def audit_once(pipeline: Path, timeout: float, code: Path | None) -> dict:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code / "src"), str(code)])
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "twicerun", "audit", str(pipeline)],
        cwd=pipeline.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # so that a hung audit's workers are killed with it
    )
    try:
        _, err = process.communicate(timeout=timeout)
        return {
            "exit": process.returncode,
            "seconds": round(time.perf_counter() - started, 2),
            "stderr": err.decode(errors="replace")[-400:] if process.returncode else "",
        }
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return {"exit": None, "seconds": None, "stderr": ""}


def summary(outcomes: list[dict]) -> dict:
    ended = [o["seconds"] for o in outcomes if o["exit"] is not None]
    return {
        "audits": len(outcomes),
        "hung": sum(o["exit"] is None for o in outcomes),
        "exit_0": sum(o["exit"] == 0 for o in outcomes),
        "other_exits": [o for o in outcomes if o["exit"] not in (0, None)],
        "median_seconds": statistics.median(ended) if ended else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.forked_pool")
    parser.add_argument("--audits", type=int, default=300, help="audits per code")
    parser.add_argument("--before-rev", default=None, help="also the code at this revision")
    parser.add_argument(
        "--timeout", type=float, default=20.0, help="seconds before an audit counts as hung"
    )
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)
    earlier = _checkout(args.before_rev) if args.before_rev else None
    codes: dict[str, Path | None] = {"this code": None}
    if earlier is not None:
        codes[f"before: {earlier['rev'][:7]}"] = earlier["root"]
    work = Path(tempfile.mkdtemp(prefix="twicerun-bench-forked-pool-"))
    pipeline = work / "pool.py"
    pipeline.write_text(PIPELINE.lstrip(), encoding="utf-8")
    outcomes: dict[str, list[dict]] = {name: [] for name in codes}
    started = time.perf_counter()
    try:
        for i in range(args.audits):
            for name, code in codes.items():
                outcomes[name].append(audit_once(pipeline, args.timeout, code))
            if (i + 1) % 25 == 0:
                counts = ", ".join(
                    f"{n}: {sum(o['exit'] is None for o in outcomes[n])} hung" for n in codes
                )
                print(
                    f"{i + 1} of {args.audits} audits per code; {counts}",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if earlier is not None:
            shutil.rmtree(earlier["root"], ignore_errors=True)
    results = {name: summary(outcomes[name]) for name in codes}
    for name, row in results.items():
        print(f"{name:>18}: {row['hung']} of {row['audits']} audits hung, {row['exit_0']} exited 0")
    if args.json_path:
        document = {
            "schema": "twicerun.bench-forked-pool/1",
            "written": time.strftime("%Y-%m-%d"),
            "command": " ".join(["python -m bench.forked_pool", *(argv or sys.argv[1:])]),
            "environment": environment(2),
            "before": {k: earlier[k] for k in ("rev", "subject")} if earlier else None,
            "timeout_seconds": args.timeout,
            "seconds": round(time.perf_counter() - started, 1),
            "pipeline": PIPELINE.lstrip(),
            "results": results,
        }
        write_document(args.json_path, document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
