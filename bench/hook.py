"""What the `twicerun-readme` pre-commit hook costs to install and to run.

    python -m bench.hook [--repeat 3] [--runs 10] [--json PATH]

Install: pre-commit builds a hook's environment with `pip install .` in a fresh
venv, so it gets twicerun and every dependency, DuckDB and pyarrow included,
though `report --check` imports neither. Side by side, each --repeat times into
a fresh venv from the pinned versions in requirements.lock: that full install,
and the smallest one the check needs (twicerun without dependencies, plus click
and markdown-it-py). Wall time and bytes on disk. pip's cache is whatever this
machine has; the first repetition warms it, so the median is of warm installs.

Run: `twicerun report --check README.md` in a fresh process, --runs times,
median wall; and, in that same process, whether duckdb or pyarrow were imported.

Nothing here is a test; the figures go into the artifact and docs.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import environment, parse_measuring, write_artifact
from twicerun.render.tables import Artifact, Table, carry, stamp

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "requirements.lock"
KINDS = {
    "full": "the hook's environment as pre-commit builds it (`pip install .`)",
    "minimal": "what `report --check` imports (twicerun, click, markdown-it-py)",
}
PROBE = (
    "import sys\n"
    "from twicerun.cli import main\n"
    "code = main(['report', '--check', 'README.md'])\n"
    "print('engine-imported' if {'duckdb', 'pyarrow'} & set(sys.modules) else 'engine-not-imported')\n"
    "sys.exit(code)\n"
)


def _bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def install(kind: str, where: Path) -> tuple[float, int]:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    pip = [str(where / "bin" / "pip"), "install", "-q", "-c", str(LOCK)]
    started = time.perf_counter()
    if kind == "full":
        subprocess.run([*pip, str(REPO)], check=True)
    else:
        subprocess.run([*pip, "--no-deps", str(REPO)], check=True)
        subprocess.run([*pip, "click", "markdown-it-py"], check=True)
    return time.perf_counter() - started, _bytes(where)


def run_check(python: str, runs: int) -> tuple[float, bool]:
    walls, engine = [], False
    for _ in range(runs):
        started = time.perf_counter()
        out = subprocess.run(
            [python, "-c", PROBE], cwd=REPO, capture_output=True, text=True, check=False
        )
        walls.append(time.perf_counter() - started)
        if out.returncode != 0:
            raise RuntimeError(f"report --check failed: {out.stderr}")
        engine = engine or "engine-imported" in out.stdout
    return statistics.median(walls), engine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    args = parse_measuring(parser, argv, tables)
    if args is None:
        return 0
    installs: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    scratch = Path(tempfile.mkdtemp(prefix="twicerun-bench-hook-"))
    try:
        for repetition in range(args.repeat):
            for kind in KINDS:  # side by side: each repetition does both
                where = scratch / f"{kind}-{repetition}"
                seconds, size = install(kind, where)
                installs[kind].append({"seconds": round(seconds, 2), "bytes": size})
                print(f"{kind}: {seconds:.1f}s, {size / 2**20:.0f} MiB", file=sys.stderr)
        check_seconds, engine = run_check(str(scratch / "full-0" / "bin" / "python"), args.runs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    document = {
        "schema": "twicerun.bench-hook/1",
        "written": time.strftime("%Y-%m-%d"),
        "command": "python -m bench.hook " + " ".join(argv if argv is not None else sys.argv[1:]),
        "environment": environment(1),
        "repeat": args.repeat,
        "runs": args.runs,
        "installs": installs,
        "check_seconds": round(check_seconds, 3),
        "check_imports_engine": engine,
    }
    for kind, rows in installs.items():
        warm = rows[1:] or rows
        print(
            f"{kind}: median {statistics.median(r['seconds'] for r in warm):.1f}s, "
            f"{statistics.median(r['bytes'] for r in warm) / 2**20:.0f} MiB"
        )
    print(f"report --check README.md: median {check_seconds:.3f}s; engine imported: {engine}")
    if args.json_path:
        write_artifact(args.json_path, document, tables)
    return 0


# The artifact's tables, as data ------------------------------------------------------


def bench_hook(a: Artifact) -> Table:
    d = a.document
    rows = []
    for kind, what in KINDS.items():
        warm = d["installs"][kind][1:] or d["installs"][kind]
        seconds = statistics.median(r["seconds"] for r in warm)
        size = statistics.median(r["bytes"] for r in warm)
        rows.append([what, f"{seconds:.1f}s", f"{size / 2**20:,.0f} MiB"])
    what = (
        f"Median of {len(d['installs']['full']) - 1 or 1} warm installs of each, side by side. "
        f"`report --check README.md` in a fresh process: median {d['check_seconds']:.3f}s of "
        f"{d['runs']}, and DuckDB and pyarrow "
        f"{'were' if d['check_imports_engine'] else 'were not'} imported."
    )
    return Table(
        "bench-hook",
        stamp(a, what),
        ["install", "wall", "on disk"],
        rows,
        ["left", "right", "right"],
    )


def tables(path: str, document: dict) -> list[dict]:
    return carry([bench_hook(Artifact(path, document))])


if __name__ == "__main__":
    raise SystemExit(main())
