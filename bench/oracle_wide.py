"""The oracle on a wide float artifact, this code beside an earlier one, in one run.

    python -m bench.oracle_wide --before-rev REV [--rows 200000] [--columns 40]
                                [--repeat 5] [--json PATH]

Two artifacts of --rows rows, an integer key and --columns DOUBLE columns, the later
one with about a third of its values moved up by one ulp (the shape a parallel sum
leaves in a wide table of measures). Each repetition starts a fresh process for each
code, the earlier first, and each process times three comparisons after one it does
not time; the figure per process is the median of its three. Both codes must find the
same moved counts and the same largest ulp distances, or the bench stops.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PER_CHILD = 3


def make_artifacts(directory: Path, rows: int, columns: int) -> tuple[Path, Path]:
    import duckdb

    con = duckdb.connect()
    values = ", ".join(f"(hash(g * {j + 3}) % 1000003) / 7.0 AS c{j}" for j in range(columns))
    moved = ", ".join(
        f"CASE WHEN hash(g, {j}) % 3 = 0 THEN nextafter(c{j}, 1e300) ELSE c{j} END AS c{j}"
        for j in range(columns)
    )
    reference, later = directory / "reference.parquet", directory / "later.parquet"
    con.execute(f"COPY (SELECT g, {values} FROM range({rows}) r(g)) TO '{reference}'")
    con.execute(f"COPY (SELECT g, {moved} FROM read_parquet('{reference}')) TO '{later}'")
    return reference, later


def child(reference: str, later: str, threads: int) -> dict:
    """Time the oracle of whichever twicerun this process imports."""
    import duckdb

    import twicerun
    from twicerun.compare.oracle import compare_artifacts

    con = duckdb.connect(config={"threads": threads})

    def once():
        return compare_artifacts(con, "wide", Path(reference), Path(later), attribute_above=None)

    findings = once()
    seconds = []
    for _ in range(PER_CHILD):
        start = time.perf_counter()
        once()
        seconds.append(time.perf_counter() - start)
    return {
        "twicerun": twicerun.__file__,
        "seconds": seconds,
        "findings": {d.column: [d.moved, d.compared, d.max_ulps] for d in findings.drift},
    }


def _spawn(reference: Path, later: Path, threads: int, code: Path | None) -> dict:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code / "src")
    done = subprocess.run(
        [sys.executable, "-m", "bench.oracle_wide", "--child", str(reference), str(later),
         "--threads", str(threads)],
        cwd=REPO, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"a child failed:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    expected = (code / "src") if code is not None else (REPO / "src")
    if not Path(result["twicerun"]).resolve().is_relative_to(expected.resolve()):
        raise SystemExit(f"the child imported twicerun from {result['twicerun']}, not {expected}")
    return result


def main(argv: list[str] | None = None) -> int:
    from bench.common import environment, retable, retable_option, write_artifact

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--columns", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--before-rev", default=None, help="the earlier code, a git revision")
    parser.add_argument("--json", dest="json_path", default=None)
    parser.add_argument("--child", nargs=2, metavar=("REFERENCE", "LATER"), help=argparse.SUPPRESS)
    retable_option(parser)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child, args.threads)))
        return 0
    if args.retable:
        retable(args.retable, tables)
        return 0
    if not args.before_rev:
        parser.error("--before-rev REV is required: the figure is this code beside that one")

    from bench.loop import _checkout

    earlier = _checkout(args.before_rev)
    this: list[float] = []
    before: list[float] = []
    try:
        with tempfile.TemporaryDirectory(prefix="twicerun-bench-wide-") as d:
            reference, later = make_artifacts(Path(d), args.rows, args.columns)
            for repetition in range(1, args.repeat + 1):
                old = _spawn(reference, later, args.threads, earlier["root"])
                new = _spawn(reference, later, args.threads, None)
                if old["findings"] != new["findings"]:
                    raise SystemExit("the two codes measured different drift; not a like-for-like")
                before.append(statistics.median(old["seconds"]))
                this.append(statistics.median(new["seconds"]))
                print(
                    f"repetition {repetition}: {before[-1]:.2f}s at {earlier['rev'][:7]}, "
                    f"{this[-1]:.2f}s now",
                    flush=True,
                )
            findings = new["findings"]
    finally:
        import shutil

        shutil.rmtree(earlier["root"], ignore_errors=True)
    document = {
        "schema": "twicerun.bench-oracle-wide/1",
        "written": time.strftime("%Y-%m-%d"),
        "command": "python -m bench.oracle_wide "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "environment": environment(args.threads),
        "rows": args.rows,
        "columns": args.columns,
        "repeat": args.repeat,
        "before": {"rev": earlier["rev"], "subject": earlier["subject"], "seconds": before},
        "seconds": this,
        "moved": sum(m for m, _, _ in findings.values()),
        "compared": sum(c for _, c, _ in findings.values()),
    }
    for line in _lines(document):
        print(line)
    if args.json_path:
        write_artifact(args.json_path, document, tables)
    return 0


def _lines(d: dict) -> list[str]:
    return [
        f"{d['rows']:,} rows x {d['columns']} floats, {d['moved']:,} of {d['compared']:,} values "
        f"moved by one ulp; one comparison, median of {d['repeat']} processes: "
        f"{statistics.median(d['seconds']):.2f}s now, "
        f"{statistics.median(d['before']['seconds']):.2f}s at {d['before']['rev'][:7]}"
    ]


def tables(path: str, document: dict) -> list[dict]:
    from twicerun.render.tables import Artifact, Table, carry, stamp

    d = document

    def cell(seconds: list[float]) -> str:
        return f"{statistics.median(seconds):.2f}s ({min(seconds):.2f} to {max(seconds):.2f})"

    rev = d["before"]["rev"][:7]
    table = Table(
        name="bench-oracle-wide",
        stamp=stamp(
            Artifact(path, d),
            f"Two artifacts of {d['rows']:,} rows, an integer key and {d['columns']} DOUBLE "
            f"columns, {d['moved']:,} of their {d['compared']:,} float values moved by one ulp. "
            f"In each of {d['repeat']} repetitions, a fresh process per code (`{rev}` first) "
            f"times {PER_CHILD} comparisons after an untimed one; the figure is the median of "
            f"the processes' medians, with their range. Both codes found the same drift.",
        ),
        headers=["", "this code", f"`{rev}`"],
        rows=[["one comparison", cell(d["seconds"]), cell(d["before"]["seconds"])]],
        align=["left", "right", "right"],
    )
    return carry([table])


if __name__ == "__main__":
    raise SystemExit(main())
