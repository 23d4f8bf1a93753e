"""The gate end to end on real pipelines: coins that DuckDB's random() flips on every run.

Writes a five-step pipeline (a steady step and four steps that change their answer
on a coin flip per run, at p = 0.05, 0.1, 0.2 and 0.3), makes a baseline with
`twicerun baseline update` at its defaults, then runs `twicerun baseline compare`
on the unchanged pipeline (--unchanged times) and on a worse one (--worse times:
the steady step now flips at 0.5 and the 0.1 step at 0.6). Every call is the real
CLI in its own process. The artifact records each exit code and what each call
cost, and carries its table for `twicerun report`.

    python scripts/gate_coins.py --json results/gate-coins-$(date +%F).json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from twicerun import __version__
from twicerun.vocabulary import gate as words

SCHEMA = "twicerun.gate-coins/1"


def coin(name: str, p: float) -> str:
    return (
        f"def {name}(ctx):\n"
        f'    ctx.write("{name}", "SELECT CASE WHEN random() < {p} THEN 1 ELSE 0 END AS v")\n'
    )


def pipeline(steady: float | None, p10: float) -> str:
    first = (
        'def steady(ctx):\n    ctx.write("steady", "SELECT 1 AS v")\n'
        if steady is None
        else coin("steady", steady)
    )
    return "\n\n".join(
        [
            first,
            coin("coin_05", 0.05),
            coin("coin_10", p10),
            coin("coin_20", 0.2),
            coin("coin_30", 0.3),
        ]
    )


def twicerun(*args: str, cwd: Path) -> tuple[int, float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "twicerun", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"twicerun {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.returncode, seconds


def compare(cwd: Path, n: int, label: str) -> list[dict]:
    outcomes = []
    for i in range(n):
        gate = cwd / "gate.json"
        code, seconds = twicerun(
            "baseline",
            "compare",
            "--pipelines",
            "coins.py",
            "--baseline",
            "baseline.json",
            "--json",
            str(gate),
            cwd=cwd,
        )
        document = json.loads(gate.read_text())
        failed = [d["name"] for d in document["decisions"] if d["verdict"] in words.WORSE]
        outcomes.append(
            {
                "exit": code,
                "seconds": round(seconds, 2),
                "failed_steps": failed,
                # Which statistic failed each (a score's `rate up`, a kind's verdict), and
                # every suspect's verdict, so a failure can be traced without re-running.
                "suspects": {
                    d["name"]: d["verdict"]
                    for d in document["decisions"]
                    if d["name"] in {n for c in document["confirmations"] for n in c["suspects"]}
                },
                "extra_trials": sum(c["trials"] for c in document["confirmations"]),
            }
        )
        print(f"{label} {i + 1}/{n}: exit {code} {failed}", file=sys.stderr)
    return outcomes


def recording(schema: str, script: str, argv: list[str] | None, started: float) -> dict:
    """The fields a recording of these scripts opens with: what wrote it, when, on what
    (scripts/gate_resampled.py's too)."""
    return {
        "schema": schema,
        "written": time.strftime("%Y-%m-%d"),
        "command": " ".join(["python", f"scripts/{script}", *(argv or sys.argv[1:])]),
        "environment": {
            "twicerun": __version__,
            "duckdb": duckdb.__version__,
            "python": platform.python_version(),
            "platform": f"{platform.system()}-{platform.machine()}",
            "cpus": os.cpu_count(),
        },
        "seconds": round(time.monotonic() - started, 1),
    }


def write(path: Path, document: dict) -> None:
    """The artifact, under a temporary name first, so a reader never finds half of it."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def summarise(outcomes: list[dict]) -> dict:
    return {
        "n": len(outcomes),
        "failed": sum(1 for o in outcomes if o["exit"] == 1),
        "median_seconds": sorted(o["seconds"] for o in outcomes)[len(outcomes) // 2],
        "extra_trials": sum(o["extra_trials"] for o in outcomes),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--unchanged", type=int, default=40)
    parser.add_argument("--worse", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "coins.py").write_text(pipeline(None, 0.1))
        _, baseline_seconds = twicerun(
            "baseline", "update", "coins.py", "--output", "baseline.json", cwd=cwd
        )
        trials = len(json.loads((cwd / "baseline.json").read_text())["trials"])
        unchanged = compare(cwd.resolve(), args.unchanged, "unchanged")
        (cwd / "coins.py").write_text(pipeline(0.5, 0.6))
        worse = compare(cwd.resolve(), args.worse, "worse")
    document = {
        **recording(SCHEMA, "gate_coins.py", argv, started),
        "baseline": {"trials": trials, "seconds": round(baseline_seconds, 1)},
        "unchanged": {"summary": summarise(unchanged), "calls": unchanged},
        "worse": {"summary": summarise(worse), "calls": worse},
    }
    document["tables"] = [table(document)]
    if args.json:
        write(args.json, document)
    u, w = document["unchanged"]["summary"], document["worse"]["summary"]
    print(f"unchanged: {u['failed']} of {u['n']} failed; worse: {w['failed']} of {w['n']} failed")
    return 0


def table(d: dict) -> dict:
    e = d["environment"]
    u, w = d["unchanged"]["summary"], d["worse"]["summary"]
    stamp = (
        f"Generated by `twicerun report` from `{d['command']}` ({d['written']}, {d['seconds']:.0f}s "
        f"in all), twicerun {e['twicerun']}, DuckDB {e['duckdb']}, {e['cpus']} cores. The baseline: "
        f"`twicerun baseline update` at its defaults, {d['baseline']['trials']} trials in "
        f"{d['baseline']['seconds']:.0f}s."
    )
    return {
        "name": "gate-coins",
        "stamp": stamp,
        "headers": [
            "pipeline",
            "`baseline compare` calls",
            "failed the check",
            "median seconds a call",
            "confirmation trials run",
        ],
        "rows": [
            [
                "unchanged: steady, and coins at 0.05, 0.1, 0.2, 0.3",
                str(u["n"]),
                str(u["failed"]),
                f"{u['median_seconds']:.1f}",
                str(u["extra_trials"]),
            ],
            [
                "worse: the steady step now at 0.5, the 0.1 coin at 0.6",
                str(w["n"]),
                str(w["failed"]),
                f"{w['median_seconds']:.1f}",
                str(w["extra_trials"]),
            ],
        ],
    }


if __name__ == "__main__":
    sys.exit(main())
