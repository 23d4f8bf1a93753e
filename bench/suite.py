"""How long the test suite takes with each number of pytest-xdist workers.

    python -m bench.suite [--workers 2 3] [--repeat 2] [--json PATH]

The suite is kept under five minutes on two cores. Each repetition runs the whole
suite once per worker count in --workers, in that order, so the host's load falls
on every count alike: `python -m pytest -q -n N`, each in a fresh process from the
repository's root, with every other option the suite's own (pyproject.toml). It
records pytest's own figure for the session (the line it ends with), the process's
wall time, the outcome's counts, and the summed time of the tests themselves from
a JUnit report, which rises with the workers when they compete for the cores.

Nothing here is a test; the figures go into the artifact.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from bench.common import environment, parse_measuring, print_tables, write_artifact
from twicerun.render.tables import Artifact, Table, carry, stamp

REPO = Path(__file__).resolve().parent.parent
# pytest's last line: "1374 passed, 2 skipped in 305.05s (0:05:05)".
SESSION = re.compile(r"^=*\s*(?P<counts>.*?) in (?P<seconds>[\d.]+)s\b", re.M)


def run_suite(workers: int, junit: Path) -> dict:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", str(workers), f"--junitxml={junit}"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    found = list(SESSION.finditer(done.stdout))
    if not found:
        raise RuntimeError(f"pytest -n {workers} printed no session line:\n{done.stdout[-2000:]}")
    counts = {
        word: int(number) for number, word in re.findall(r"(\d+) (\w+)", found[-1].group("counts"))
    }
    tests = sum(float(case.get("time", 0)) for case in ET.parse(junit).iter("testcase"))
    return {
        "workers": workers,
        "exit_code": done.returncode,
        "pytest_seconds": float(found[-1].group("seconds")),
        "wall": round(wall, 2),
        "test_seconds": round(tests, 1),
        "counts": counts,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--repeat", type=int, default=2)
    args = parse_measuring(parser, argv, tables)
    if args is None:
        return 0
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="twicerun-bench-suite-") as scratch:
        for repetition in range(args.repeat):
            for workers in args.workers:
                row = run_suite(workers, Path(scratch) / f"junit-{repetition}-{workers}.xml")
                row["repetition"] = repetition
                runs.append(row)
                print(
                    f"-n {workers}: {row['pytest_seconds']:.1f}s, exit {row['exit_code']}, "
                    f"{row['test_seconds']:.0f}s of tests, {row['counts']}",
                    file=sys.stderr,
                )
    document = {
        "schema": "twicerun.bench-suite/1",
        "written": time.strftime("%Y-%m-%d"),
        "command": "python -m bench.suite " + " ".join(argv if argv is not None else sys.argv[1:]),
        "environment": environment(2),
        "cores": len(os.sched_getaffinity(0)),
        "repeat": args.repeat,
        "runs": runs,
    }
    if args.json_path:
        write_artifact(args.json_path, document, tables)
    print_tables(tables, document)
    return 0


# The artifact's tables, as data ------------------------------------------------------


def bench_suite(a: Artifact) -> Table:
    d = a.document
    rows = []
    for workers in dict.fromkeys(r["workers"] for r in d["runs"]):
        mine = [r for r in d["runs"] if r["workers"] == workers]
        seconds = [r["pytest_seconds"] for r in mine]
        rows.append(
            [
                str(workers),
                f"{statistics.median(seconds):.0f}s ({min(seconds):.0f}s to {max(seconds):.0f}s)",
                f"{statistics.median(r['test_seconds'] for r in mine):.0f}s",
                f"{sum(r['exit_code'] == 0 for r in mine)} of {len(mine)}",
            ]
        )
    what = (
        f"{d['cores']} cores. The whole suite {d['repeat']} times with each worker count, "
        "the counts alternating; pytest's own time for the session, and the tests' own "
        "time summed over the workers."
    )
    return Table(
        "bench-suite",
        stamp(a, what),
        ["workers", "the suite (range)", "the tests' own time, summed", "runs that passed"],
        rows,
        ["right", "right", "right", "right"],
    )


def tables(path: str, document: dict) -> list[dict]:
    return carry([bench_suite(Artifact(path, document))])


if __name__ == "__main__":
    raise SystemExit(main())
