"""What DuckDB does with the three TLC months in each order, asserted; and what twicerun
sees of the backfill that depends on it.

    python scripts/tlc_schema.py [--dir DIR] [--json results/tlc-DATE.json]

Without --dir it generates the stand-in partitions (scripts/tlc_partitions.py) in a
temporary directory; with --dir it reads the files there (the real ones, from
scripts/fetch_tlc.py). It reads the list in all six orders and with union_by_name
and checks three facts: oldest first, the read succeeds and cbd_congestion_fee is
silently absent; any order starting with a 2025 month raises an error naming the
column; union_by_name keeps it, NULL for December. It exits 1, naming the fact,
when one stops holding (a DuckDB upgrade can change any of them).

With --json it also runs `twicerun run` on pipelines/tlc_backfill.py and its twin
over the same files and records, per step, the loop's rate beside each amplifier's,
for the README.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import duckdb  # noqa: E402
from tlc_partitions import MONTHS, file_name, generate  # noqa: E402

from bench.common import parse_measuring, write_artifact  # noqa: E402
from twicerun import sql  # noqa: E402
from twicerun.render.markdown import cell, code  # noqa: E402
from twicerun.render.tables import Artifact, Table, carry, stamp  # noqa: E402
from twicerun.runner.environment import default_threads  # noqa: E402
from twicerun.runner.environment import stamp as instrument  # noqa: E402
from twicerun.vocabulary.loop import Amplifier  # noqa: E402

SCHEMA = "twicerun.tlc/1"
NEW_COLUMN = "cbd_congestion_fee"


def _short(text: str, directory: Path) -> str:
    """An error as a reader needs it: file names without the directory, the schema part."""
    text = (
        " ".join(text.split())
        .replace(f"{Path(directory).resolve()}/", "")
        .replace(f"{directory}/", "")
    )
    text = text.split(" Candidate names:")[0]
    return text[:240]


def read_in_order(con: duckdb.DuckDBPyConnection, files: list[Path], **options) -> dict:
    extra = "".join(f", {k} = {'true' if v else 'false'}" for k, v in options.items())
    listed = ", ".join(sql.string(f) for f in files)
    try:
        relation = con.execute(f"SELECT * FROM read_parquet([{listed}]{extra})")
        columns = [d[0] for d in relation.description]
        rows = relation.fetchall()
    except duckdb.Error as exc:
        return {"raised": _short(str(exc), files[0].parent)}
    fee = columns.index(NEW_COLUMN) if NEW_COLUMN in columns else None
    return {
        "rows": len(rows),
        "has_new_column": fee is not None,
        "new_column_nulls": sum(1 for r in rows if fee is not None and r[fee] is None),
    }


def facts(directory: Path) -> tuple[list[dict], list[str]]:
    """Every order, and the facts that must hold; returns (observations, broken facts)."""
    con = duckdb.connect()
    files = [Path(directory) / file_name(m) for m in MONTHS]
    observed = []
    for order in itertools.permutations(range(len(files))):
        seen = read_in_order(con, [files[i] for i in order])
        observed.append({"order": [MONTHS[i] for i in order], "union_by_name": False, **seen})
    seen = read_in_order(con, files, union_by_name=True)
    observed.append({"order": list(MONTHS), "union_by_name": True, **seen})
    broken = []
    oldest = observed[0]
    if "raised" in oldest or oldest["has_new_column"]:
        broken.append(f"oldest first no longer drops {NEW_COLUMN} silently: {oldest}")
    for o in observed[1:-1]:
        starts_2025 = o["order"][0] >= "2025"
        if starts_2025 and not (o.get("raised") and NEW_COLUMN in o["raised"]):
            broken.append(f"{o['order']} no longer raises naming {NEW_COLUMN}: {o}")
        if not starts_2025 and ("raised" in o or o["has_new_column"]):
            broken.append(f"{o['order']} (December first) no longer drops the column: {o}")
    by_name = observed[-1]
    if "raised" in by_name or not by_name["has_new_column"] or not by_name["new_column_nulls"]:
        broken.append(f"union_by_name no longer keeps {NEW_COLUMN} with NULLs for 2024: {by_name}")
    return observed, broken


def case(directory: Path) -> dict:
    """twicerun on the backfill and its twin: per step, the loop beside each amplifier."""
    found = {}
    env = {**os.environ, "TWICERUN_TLC_DIR": str(directory)}
    for pipeline in ("pipelines/tlc_backfill.py", "pipelines/tlc_backfill_twin.py"):
        with tempfile.TemporaryDirectory(prefix="twicerun-tlc-") as run_dir:
            started = time.perf_counter()
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "twicerun",
                    "run",
                    pipeline,
                    "--run-dir",
                    run_dir,
                    "--json",
                    "-",
                ],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            seconds = round(time.perf_counter() - started, 2)
        result = json.loads(done.stdout)
        found[pipeline] = {
            "exit": done.returncode,
            "seconds": seconds,
            "steps": [
                {
                    "name": s["name"],
                    "loop": f"{s['fired']} of {s['compared']}",
                    "status": s["status"],
                    "amplifiers": {
                        a["kind"]: (
                            f"{a['fired']} of {a['compared']}"
                            if not a["declined"] and not a["error"]
                            else "declined"
                            if a["declined"]
                            else "failed"
                        )
                        for a in s["amplifiers"]
                    },
                    "raised": _short(
                        next(
                            (
                                c["error"]
                                for a in s["amplifiers"]
                                for c in a["comparisons"]
                                if c.get("error")
                            ),
                            "",
                        ),
                        directory,
                    ),
                }
                for s in result["steps"]
            ],
        }
    return found


def tables(path: str, d: dict) -> list[dict]:
    a = Artifact(path, d)
    rows = []
    for o in d["facts"]:
        if "raised" in o:
            what = f"raises: {o['raised']}"
        elif o["has_new_column"]:
            what = f"{o['rows']:,} rows, {code(NEW_COLUMN)} kept ({o['new_column_nulls']:,} NULL)"
        else:
            what = f"{o['rows']:,} rows, {code(NEW_COLUMN)} silently absent"
        rows.append(
            [
                " then ".join(o["order"]) + (" (union_by_name)" if o["union_by_name"] else ""),
                cell(what),
            ]
        )
    source = "the generated stand-ins" if d["generated"] else "the files in " + code(d["dir"])
    fact_table = Table(
        "tlc-orders",
        stamp(a, f"`read_parquet` over {source}, in every order."),
        ["files, in the order listed", "what DuckDB does"],
        rows,
    )
    present = {k for p in d["case"].values() for s in p["steps"] for k in s["amplifiers"]}
    names = [str(m) for m in Amplifier if str(m) in present]
    step_rows = []
    for pipeline, p in d["case"].items():
        for s in p["steps"]:
            step_rows.append(
                [
                    code(Path(pipeline).name),
                    code(s["name"]),
                    s["loop"],
                    *[s["amplifiers"].get(n, "") for n in names],
                    s["status"] or "",
                    f"{p['exit']}",
                    cell(s["raised"]),
                ]
            )
    step_table = Table(
        "tlc-steps",
        stamp(
            a,
            f"`twicerun run` at its defaults on {source} ("
            + ", ".join(f"{Path(k).name} {v['seconds']:.1f}s" for k, v in d["case"].items())
            + ").",
        ),
        ["pipeline", "step", "the loop", *names, "status", "exit", "what an amplified run raised"],
        step_rows,
    )
    return carry([fact_table, step_table])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--rows", type=int, default=2000)
    args = parse_measuring(parser, argv, tables)
    if args is None:
        return 0
    with tempfile.TemporaryDirectory(prefix="twicerun-tlc-data-") as scratch:
        directory = args.dir or Path(scratch)
        if args.dir is None:
            generate(directory, args.rows)
        observed, broken = facts(directory)
        for o in observed:
            label = " then ".join(o["order"]) + (" (union_by_name)" if o["union_by_name"] else "")
            print(f"{label}: {o.get('raised') or o}")
        if args.json_path:
            document = {
                "schema": SCHEMA,
                "written": time.strftime("%Y-%m-%d"),
                "command": "python scripts/tlc_schema.py "
                + " ".join(argv if argv is not None else sys.argv[1:]),
                "environment": dict(vars(instrument(default_threads()))),
                "generated": args.dir is None,
                "rows_per_month": args.rows if args.dir is None else None,
                "dir": str(args.dir) if args.dir else "",
                "facts": observed,
                "broken": broken,
                "case": case(directory),
            }
            write_artifact(args.json_path, document, tables)
    for fact in broken:
        print(f"tlc_schema: a fact no longer holds: {fact}", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
