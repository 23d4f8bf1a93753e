"""What the loop costs beyond the steps it runs, on the reference pipeline.

    python -m bench.loop [--repeat 3] [--pipeline pipelines/reference.py] [--json PATH]

Each repetition runs one `twicerun run` invocation in a fresh child process
(so peak RSS is that invocation's own) and reports, side by side:

- wall: the invocation's wall time, as its Result records it;
- steps: the summed wall time of step executions inside it (each step's own
  call, its writes included);
- overhead: (wall - steps) / steps, the tool's own cost as a ratio;
- where the overhead went: opening and closing a fresh DuckDB connection per
  step, computing digests, the oracle (on pairs the digests could not settle),
  and everything else (receipts, pruning, the Result);
- the loop alone: the same two figures up to where the bisect and the amplifiers
  start, with only the loop's own step executions;
- peak RSS of the child, and peak bytes on disk under its run directory,
  sampled every 20 ms while it runs, also as a multiple of what run 1's
  artifacts take (one run's worth);
- the multiplier: the invocation's wall over one plain execution of the same
  steps. The plain execution is timed `--plains` times (3) in a process of its
  own after each repetition's invocations, after one unmeasured execution
  there, and the fastest is the denominator of every invocation in that
  repetition, so that with `--before-rev` both codes are divided by the same
  figure, measured the same way.

Medians over the repetitions are printed last. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

from bench.common import bare_context, environment, retable, retable_option, write_artifact
from twicerun.render.tables import Artifact, Table, carry, stamp

REPO = Path(__file__).resolve().parent.parent


def _tree_bytes(root: Path) -> tuple[int, int]:
    """Bytes of every file under `root`, and of its Parquet files alone (the artifacts,
    without the receipts, manifests and Result that keep account of them)."""
    total = parquet = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                size = os.lstat(os.path.join(dirpath, name)).st_size
                total += size
                if name.endswith(".parquet"):
                    parquet += size
    return total, parquet


def _tree_split(root: Path) -> tuple[int, int, int, int]:
    """`_tree_bytes` of `root`, then of the amplifiers' inputs under it (`*/amplified`), from
    one walk: two walks, one for the whole and one for the inputs, saw an input the second
    had already seen deleted, and counted it against the runs (a twins repetition read 2.05
    runs' worth where every other read 1.7)."""
    total = parquet = amplified = amplified_parquet = 0
    for dirpath, _, files in os.walk(root):
        inside = Path(dirpath).relative_to(root).parts[1:2] == ("amplified",)
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                size = os.lstat(os.path.join(dirpath, name)).st_size
                total += size
                amplified += size if inside else 0
                if name.endswith(".parquet"):
                    parquet += size
                    amplified_parquet += size if inside else 0
    return total, parquet, amplified, amplified_parquet


def child(pipeline: str, run_dir: str, extra: list[str]) -> dict:
    """One invocation, in this process, with the overhead's parts timed."""
    if "--digests-only" in extra:
        _without_the_oracle()
    from twicerun.compare import digest as digest_module
    from twicerun.runner import execute as execute_module
    from twicerun.runner import loop as loop_module
    from twicerun.runner import settle_step as comparison_module
    from twicerun.runner.loop import LoopOptions, run_pipeline
    from twicerun.storage import connections as connections_module

    timers = {
        "open": 0.0,
        "close": 0.0,
        "digests": 0.0,
        "oracle": 0.0,
        "after_loop": 0.0,
        "engine_start": 0.0,
    }
    loop_steps = [0.0]

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timers[name] += time.perf_counter() - start

        return wrapper

    connections_module.Connections.open = timed("open", connections_module.Connections.open)
    connections_module.Connections.close = timed("close", connections_module.Connections.close)
    execute_module.digests = timed("digests", digest_module.digests)
    comparison_module.compare_artifacts = timed("oracle", comparison_module.compare_artifacts)
    # The loop alone (issue 2's figure): everything before the bisect and the amplifiers
    # start, against the step executions of the loop's own runs.
    loop_module._cause_and_amplify = timed("after_loop", loop_module._cause_and_amplify)
    loop_module.open_engine = timed("engine_start", loop_module.open_engine)
    loop_execute = loop_module.execute_step

    lazy = "--lazy-run-1" in extra

    def counted(**kwargs):
        if lazy:  # receipts as before version 2: run 1's canonical digests left for later
            kwargs["canonical"] = False
        receipt = loop_execute(**kwargs)
        loop_steps[0] += receipt.seconds
        return receipt

    loop_module.execute_step = counted

    peak = {"disk": 0, "without_amplified": 0, "parquet": 0, "parquet_without_amplified": 0}
    stop = threading.Event()

    def measure():
        total, parquet, amplified, amplified_parquet = _tree_split(Path(run_dir))
        peak["disk"] = max(peak["disk"], total)
        peak["without_amplified"] = max(peak["without_amplified"], total - amplified)
        peak["parquet"] = max(peak["parquet"], parquet)
        peak["parquet_without_amplified"] = max(
            peak["parquet_without_amplified"], parquet - amplified_parquet
        )

    def sample():
        while not stop.is_set():
            measure()
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    options = LoopOptions(run_dir=Path(run_dir), keep=0, **_options(extra))
    try:
        result = run_pipeline(pipeline, options)
    finally:
        stop.set()
        sampler.join()
    measure()
    one_run, one_run_parquet = _tree_bytes(Path(result.artifacts) / "loop" / "1")
    executions, seconds = _executions(Path(result.artifacts))
    bisect_wall = sum(s.bisect.seconds for s in result.steps if s.bisect is not None)
    return {
        "executions": executions,
        "step_seconds_by_series": seconds,
        # The two parts after the loop: the bisect's series, and everything else (the
        # amplifiers' inputs written, then their series run).
        "bisect_wall": bisect_wall,
        "amplify_wall": timers["after_loop"] - bisect_wall,
        "one_run_bytes": one_run,
        "one_run_parquet_bytes": one_run_parquet,
        "wall": result.seconds,
        "steps": result.step_seconds,
        "open": timers["open"],
        "close": timers["close"],
        "digests": timers["digests"],
        "oracle": timers["oracle"],
        "engine_start": timers["engine_start"],
        "engine": result.environment.engine,
        "environment": asdict(result.environment),
        "loop_wall": result.seconds - timers["after_loop"],
        "loop_steps": loop_steps[0],
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "peak_disk_bytes": peak["disk"],
        "peak_disk_without_amplified_bytes": peak["without_amplified"],
        "peak_parquet_bytes": peak["parquet"],
        "peak_parquet_without_amplified_bytes": peak["parquet_without_amplified"],
        "final_disk_bytes": result.disk_bytes,
        "fired": len(result.fired_steps),
        "threads": result.environment.threads,
        "duckdb": result.environment.duckdb,
    }


def _executions(root: Path) -> tuple[dict[str, int], dict[str, float]]:
    """Step executions by series, and the seconds inside them, from the receipts the
    invocation left."""
    counts: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for receipt in root.glob("*/*/*/receipt.json"):
        series = receipt.relative_to(root).parts[0]
        if series.startswith("bisect"):
            kind = "bisect"
        elif series.startswith("amplify-"):
            kind = series.rsplit("-", 1)[-1]
        else:
            kind = series
        counts[kind] = counts.get(kind, 0) + 1
        spent = json.loads(receipt.read_text()).get("seconds") or 0.0
        seconds[kind] = seconds.get(kind, 0.0) + spent
    return dict(sorted(counts.items())), dict(sorted(seconds.items()))


def plain_run(pipeline_path: str, threads: int) -> float:
    """Every step once, as a bare runner would run the pipeline: a fresh context per step on
    the pipeline's engine (a new DuckDB connection, or a new Spark session) and its reads and
    writes as ctx does them; nothing compared, digested or recorded. The denominator of the
    multiplier. Starting the engine is not part of it (Spark's start-up is timed apart)."""
    from twicerun.pipeline import load_pipeline
    from twicerun.runner.engines import open_engine
    from twicerun.storage.context import ArtifactRef

    pipeline = load_pipeline(pipeline_path)
    engine = open_engine(pipeline.engine, threads, None)
    try:
        with tempfile.TemporaryDirectory(prefix="twicerun-plain-") as scratch:
            visible: dict = {}
            started = time.perf_counter()
            for step in pipeline.steps:
                out = Path(scratch) / f"{step.index:02d}"
                out.mkdir()
                ctx = bare_context(engine, threads, step.index, step.name, out, visible)
                step.call(ctx)
                engine.release(ctx)
                for name, path in ctx.output.written.items():
                    visible[name] = ArtifactRef(name, "plain/1", step.index, step.name, path, 0)
            return time.perf_counter() - started
    finally:
        engine.shutdown()


def _without_the_oracle() -> None:
    """The loop as issue 2 specified it, before the oracle: digests decide, nothing measures.

    Every pair the digests cannot settle gets empty findings, so the invocation still
    completes; its Result says nothing about how runs differed and is only timed.
    """
    from twicerun.findings import ArtifactFindings
    from twicerun.runner import settle_step as comparison_module
    from twicerun.vocabulary.loop import Presence

    def unmeasured(con, name, reference, later, **_):
        return ArtifactFindings(name, Presence.BOTH, [], 0, 0, [])

    comparison_module.compare_artifacts = unmeasured


def _options(extra: list[str]) -> dict:
    options: dict = {}
    if "--no-containment" in extra:
        options["containment"] = False
    if "--no-amplify" in extra:
        options["amplify"] = False
    return options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipeline", default=str(REPO / "pipelines" / "reference.py"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", dest="json_path", default=None)
    retable_option(parser)
    parser.add_argument("--no-containment", action="store_true")
    parser.add_argument(
        "--no-amplify", action="store_true", help="without amplifiers (the bisect still runs)"
    )
    parser.add_argument(
        "--digests-only",
        action="store_true",
        help="time the loop without the oracle (digests only), as the loop was first specified",
    )
    parser.add_argument(
        "--receipt-cost",
        action="store_true",
        help="also run each repetition with run 1's canonical digests left lazy, side by side, "
        "to measure what naming every run-1 answer (receipt version 2) costs",
    )
    parser.add_argument(
        "--before",
        metavar="PATH",
        default=None,
        help="a committed bench-loop artifact of the same pipeline measured with earlier code; "
        "its invocations are carried beside this one's in the cost table",
    )
    parser.add_argument(
        "--before-rev",
        metavar="REV",
        default=None,
        help="a git revision of this repository: each repetition also runs that code's "
        "invocation, just before this code's, so both are measured side by side on one machine "
        "at one time; they are carried beside this one's in the cost table",
    )
    parser.add_argument(
        "--plains",
        type=int,
        default=3,
        metavar="N",
        help="plain executions timed per repetition, in a process of their own after its "
        "invocations and one unmeasured execution; the fastest is the multiplier's denominator "
        "for every invocation of that repetition, this code's and --before-rev's alike "
        "(default 3)",
    )
    parser.add_argument("--plain-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--lazy-run-1", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--run-dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.retable:
        retable(args.retable, tables)
        return 0
    extra = (
        (["--no-containment"] if args.no_containment else [])
        + (["--no-amplify"] if args.no_amplify else [])
        + (["--digests-only"] if args.digests_only else [])
        + (["--lazy-run-1"] if args.lazy_run_1 else [])
    )

    if args.child:
        print(json.dumps(child(args.pipeline, args.run_dir, extra)))
        return 0
    if args.plain_child:
        # One unmeasured first: the first execution in a fresh process pays for what later
        # ones find warm (on Spark, the JVM compiling the code paths the steps take), and a
        # warm plain execution is the smaller, so the stricter, denominator.
        plain_run(args.pipeline, args.threads)
        walls = [plain_run(args.pipeline, args.threads) for _ in range(args.plains)]
        print(json.dumps({"plain_walls": walls}))
        return 0
    if args.plains < 1:
        parser.error("--plains must be at least 1")
    if args.before and args.before_rev:
        parser.error("give --before or --before-rev, not both")
    before = _before(args.before, args.pipeline) if args.before else None
    earlier = _checkout(args.before_rev) if args.before_rev else None

    rows, lazy_rows, earlier_rows = [], [], []
    for i in range(args.repeat):
        if earlier is not None:
            row = _spawn(args.pipeline, extra, code=earlier["root"])
            if row is None:
                return 1
            earlier_rows.append(row)
            print(_line(f"rev {i + 1}", row), flush=True)
        row = _spawn(args.pipeline, extra)
        if row is None:
            return 1
        rows.append(row)
        print(_line(f"run {i + 1}", row), flush=True)
        if args.receipt_cost:
            row = _spawn(args.pipeline, [*extra, "--lazy-run-1"])
            if row is None:
                return 1
            lazy_rows.append(row)
            print(_line(f"lazy {i + 1}", row), flush=True)
        walls = _spawn_plains(args.pipeline, args.plains, rows[-1]["threads"])
        if walls is None:
            return 1
        share_denominator([rows[-1], *lazy_rows[-1:], *earlier_rows[-1:]], walls)
        print(
            f"plain {i + 1}: fastest {min(walls):.3f}s of " + ", ".join(f"{w:.3f}" for w in walls),
            flush=True,
        )

    median = {
        k: statistics.median(r[k] for r in rows)
        for k in rows[0]
        if isinstance(rows[0][k], (int, float))
    }
    if all("step_seconds_by_series" in r for r in rows):
        kinds = sorted({k for r in rows for k in r["step_seconds_by_series"]})
        median["step_seconds_by_series"] = {
            k: statistics.median(r["step_seconds_by_series"].get(k, 0.0) for r in rows)
            for k in kinds
        }
    print(_line("median", median))
    print(
        f"\n{Path(args.pipeline).name}, duckdb {rows[0]['duckdb']} at threads={rows[0]['threads']}, "
        f"{args.repeat} repetitions, containment {'off' if args.no_containment else 'on'}, "
        f"amplifiers {'off' if args.no_amplify else 'on'}"
        + (", oracle off (digests only)" if args.digests_only else "")
    )
    if args.json_path:
        pipeline = Path(args.pipeline).resolve()
        document = {
            "schema": "twicerun.bench-loop/1",
            "written": time.strftime("%Y-%m-%d"),
            "command": "python -m bench.loop "
            + " ".join(argv if argv is not None else sys.argv[1:]),
            # The instrument as the invocation's own Result stamped it (engine included).
            "environment": rows[0].get("environment") or environment(rows[0]["threads"]),
            "pipeline": str(pipeline.relative_to(REPO))
            if pipeline.is_relative_to(REPO)
            else str(pipeline),
            "runs": rows,
            "median": median,
        }
        if lazy_rows:
            document["lazy_runs"] = lazy_rows
            document["lazy_median"] = {
                k: statistics.median(r[k] for r in lazy_rows)
                for k in lazy_rows[0]
                if isinstance(lazy_rows[0][k], (int, float))
            }
        if before:
            document["before"] = before
        if earlier is not None:
            keep = ("executions", "wall", "steps", "plain_wall", "plain_walls")
            document["before"] = {
                "rev": earlier["rev"],
                "subject": earlier["subject"],
                "runs": [{k: r[k] for k in keep} for r in earlier_rows],
            }
        write_artifact(args.json_path, document, tables)
    if earlier is not None:
        shutil.rmtree(earlier["root"], ignore_errors=True)
    return 0


def _checkout(rev: str) -> dict:
    """The code at `rev` (src, bench and pipelines), in a temporary directory of its own."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise SystemExit(
                f"--before-rev {rev}: git {' '.join(args)} failed: {done.stderr.strip()}"
            )
        return done.stdout.strip()

    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    root = Path(tempfile.mkdtemp(prefix="twicerun-bench-rev-"))
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", sha, "src", "bench", "pipelines"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    return {"rev": sha, "subject": git("log", "-1", "--format=%s", sha)[:120], "root": root}


def _before(path: str, pipeline: str) -> dict:
    """The figures of an earlier artifact the cost table needs, with where they came from."""
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    if document.get("schema") != "twicerun.bench-loop/1" or not all(
        "plain_wall" in r for r in document.get("runs", [])
    ):
        raise SystemExit(f"--before {path}: not a bench-loop artifact with plain executions")
    wanted = Path(pipeline).resolve()
    if (REPO / document.get("pipeline", "")).resolve() != wanted:
        raise SystemExit(
            f"--before {path}: measured {document.get('pipeline')}, not {pipeline}; "
            f"compare like with like"
        )
    keep = ("executions", "wall", "steps", "plain_wall")
    return {
        "path": Path(path).resolve().relative_to(REPO).as_posix(),
        "written": document.get("written"),
        "command": document.get("command"),
        "runs": [{k: r[k] for k in keep} for r in document["runs"]],
    }


def _spawn(pipeline: str, extra: list[str], code: Path | None = None) -> dict | None:
    """One invocation in a fresh child process, so its peak RSS is its own; with `code`,
    that checkout's twicerun and bench run it instead of this one's."""
    env = None
    if code is not None:
        # Ahead of the installed (editable) twicerun on sys.path; checked below.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code / "src"), str(code)])}
        found = subprocess.run(
            [sys.executable, "-c", "import twicerun; print(twicerun.__file__)"],
            cwd=code,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not Path(found).resolve().is_relative_to(code.resolve()):
            raise SystemExit(f"--before-rev: the child imported twicerun from {found}, not {code}")
    with tempfile.TemporaryDirectory(prefix="twicerun-bench-") as run_dir:
        return _bench_child(
            ["--child", "--pipeline", str(Path(pipeline).resolve()), "--run-dir", run_dir, *extra],
            cwd=code or REPO,
            env=env,
        )


def _bench_child(args: list[str], cwd: Path, env: dict | None = None) -> dict | None:
    """`python -m bench.loop ARGS` in a fresh process: the JSON its last line prints, or
    None (its stderr passed on) if it failed."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.loop", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def share_denominator(slot: list[dict], walls: list[float]) -> None:
    """One denominator for every invocation of a repetition: the fastest of several warm
    plain executions, measured by this code whichever code ran the invocation. Noise only
    ever adds time, so the fastest is the steadiest estimate of what the steps cost, and
    the smallest denominator: the multiplier errs high, never low."""
    for row in slot:
        row["plain_walls"] = list(walls)
        row["plain_wall"] = min(walls)


def _spawn_plains(pipeline: str, n: int, threads: int) -> list[float] | None:
    """`n` plain executions in one fresh process of this code, after the repetition's
    invocations have finished (so nothing else runs beside them)."""
    args = ["--plain-child", "--pipeline", str(Path(pipeline).resolve())]
    found = _bench_child([*args, "--plains", str(n), "--threads", str(threads)], cwd=REPO)
    return None if found is None else found["plain_walls"]


def _line(label: str, r: dict) -> str:
    overhead = r["wall"] - r["steps"]
    other = overhead - r["open"] - r["close"] - r["digests"] - r["oracle"]
    return (
        f"{label:>7}: wall {r['wall']:6.2f}s  steps {r['steps']:6.2f}s  "
        f"overhead {overhead / r['steps']:.2f}x "
        f"(connections {r['open'] + r['close']:.2f}s, digests {r['digests']:.2f}s, "
        f"oracle {r['oracle']:.2f}s, "
        f"other {other:.2f}s)  peak RSS {r['peak_rss_bytes'] / 2**20:,.0f} MiB  "
        f"peak disk {r['peak_disk_bytes'] / 2**20:,.0f} MiB "
        f"({r['peak_disk_bytes'] / r['one_run_bytes']:.1f} runs' worth; "
        f"{r['peak_disk_without_amplified_bytes'] / r['one_run_bytes']:.1f} without amplified inputs); "
        f"the loop alone: wall {r['loop_wall']:.2f}s  steps {r['loop_steps']:.2f}s  "
        f"overhead {(r['loop_wall'] - r['loop_steps']) / r['loop_steps']:.2f}x"
    )


# The artifact's tables, as data ------------------------------------------------------


def _ratio_range(runs: list[dict], wall: str, steps: str) -> str:
    """The median's ratio is one figure; the spread over invocations says how settled it is."""
    ratios = [r[wall] / r[steps] for r in runs if r.get(steps)]
    if len(ratios) < 2:
        return ""
    return f" ({min(ratios):.2f}x to {max(ratios):.2f}x)"


def _size(size: float) -> str:
    """Bytes for a table cell: KiB under a mebibyte, where a tiny pipeline's whole invocation
    read "0 MiB" beside its multiple of a run's worth."""
    return f"{size / 2**20:,.0f} MiB" if size >= 2**20 else f"{size / 2**10:,.0f} KiB"


def _peak_disk(m: dict) -> str:
    cell = (
        f"{_size(m['peak_disk_bytes'])} "
        f"({m['peak_disk_bytes'] / m['one_run_bytes']:.1f} runs' worth"
    )
    if m.get("one_run_parquet_bytes"):  # artifacts written before this split lack it
        one = m["one_run_parquet_bytes"]
        cell += (
            f"; the Parquet alone {m['peak_parquet_bytes'] / one:.1f}, "
            f"{m['peak_parquet_without_amplified_bytes'] / one:.1f} without amplified inputs"
        )
    return cell + ")"


def bench_loop(a: Artifact) -> Table:
    d = a.document
    m = d["median"]
    overhead = m["wall"] - m["steps"]
    rows = [
        [
            "the whole invocation",
            f"{m['wall']:.1f}s",
            f"{m['steps']:.1f}s",
            f"{m['wall'] / m['steps']:.2f}x{_ratio_range(d['runs'], 'wall', 'steps')}",
            f"{m['open'] + m['close']:.1f}s, {m['digests']:.1f}s, {m['oracle']:.1f}s, "
            f"{overhead - m['open'] - m['close'] - m['digests'] - m['oracle']:.1f}s",
            f"{m['peak_rss_bytes'] / 2**20:,.0f} MiB",
            _peak_disk(m),
        ]
    ]
    if "loop_wall" in m:  # artifacts written before the bench split the loop out lack it
        rows.append(
            [
                "the loop alone, up to the bisect",
                f"{m['loop_wall']:.1f}s",
                f"{m['loop_steps']:.1f}s",
                f"{m['loop_wall'] / m['loop_steps']:.2f}x"
                f"{_ratio_range(d['runs'], 'loop_wall', 'loop_steps')}",
                "not split",
                "",
                "",
            ]
        )
    if "bisect_wall" in m:  # artifacts written before the bench split these out lack it
        by_series = m["step_seconds_by_series"]
        bisect_steps = by_series.get("bisect", 0.0)
        amplify_steps = sum(v for k, v in by_series.items() if k not in ("loop", "bisect"))
        for label, wall, steps in (
            ("the single-threaded bisect", m["bisect_wall"], bisect_steps),
            ("the amplifiers: their inputs written, then probed", m["amplify_wall"], amplify_steps),
        ):
            if steps:
                rows.append(
                    [
                        label,
                        f"{wall:.1f}s",
                        f"{steps:.1f}s",
                        f"{wall / steps:.2f}x",
                        "not split",
                        "",
                        "",
                    ]
                )
    if "lazy_median" in d:  # artifacts measured with --receipt-cost
        lazy = d["lazy_median"]
        lazy_overhead = lazy["wall"] - lazy["steps"]
        rows.append(
            [
                "the whole invocation, run 1's canonical digests left lazy (receipt version 1)",
                f"{lazy['wall']:.1f}s",
                f"{lazy['steps']:.1f}s",
                f"{lazy['wall'] / lazy['steps']:.2f}x"
                f"{_ratio_range(d['lazy_runs'], 'wall', 'steps')}",
                f"{lazy['open'] + lazy['close']:.1f}s, {lazy['digests']:.1f}s, "
                f"{lazy['oracle']:.1f}s, "
                f"{lazy_overhead - lazy['open'] - lazy['close'] - lazy['digests'] - lazy['oracle']:.1f}s",
                f"{lazy['peak_rss_bytes'] / 2**20:,.0f} MiB",
                f"{lazy['peak_disk_bytes'] / 2**20:,.0f} MiB",
            ]
        )
    what = f"Median of {len(d['runs'])} invocations of `{d.get('pipeline', 'pipelines/reference.py')}`, each in a fresh process."
    if "one_run_parquet_bytes" in d["median"]:
        what += (
            " A run's worth is what run 1 left on disk; the Parquet alone counts the artifacts "
            "only, without the receipts and the Result that every execution adds."
        )
    if d["runs"][0].get("engine") == "spark":
        what += (
            " Peak RSS is the Python process's; Spark's JVM is a process of its own and not in it."
        )
    return Table(
        _name("bench-loop", d),
        stamp(a, what),
        [
            "part",
            "wall",
            "inside step executions",
            "wall / steps (range over invocations)",
            "connections, digests, oracle, rest",
            "peak RSS",
            "peak disk",
        ],
        rows,
    )


def _name(base: str, d: dict) -> str:
    """The reference pipeline's tables keep their names; another pipeline's are suffixed."""
    stem = Path(d.get("pipeline", "pipelines/reference.py")).stem
    return base if stem == "reference" else f"{base}-{stem}"


def _cost_row(runs: list[dict]) -> list[str]:
    total = [sum(r["executions"].values()) for r in runs]
    per_exec = [(r["wall"] - r["steps"]) / n * 1000 for r, n in zip(runs, total, strict=True)]
    multiplier = [r["wall"] / r["plain_wall"] for r in runs]
    # The part of the multiplier no saving in twicerun's own work can remove: the step
    # executions a verdict needs, timed inside the invocation, over the same plain execution.
    floor = [r["steps"] / r["plain_wall"] for r in runs]
    # The breakdown of one invocation whose total is the median (the lower one for an even
    # count), so the series shown add up to the total beside them: the bisect's stopping
    # rule lets the count differ from one invocation to the next.
    middle = statistics.median_low(total)
    executions = runs[total.index(middle)]["executions"]
    order = [
        "loop",
        "bisect",
        "threads+order+ties+rows",
        "threads+order+rows",
        "threads+order+ties",
        "threads+ties+rows",
        "threads+order",
        "threads+rows",
        "threads+ties",
        "ties+rows",
        "ties",
        "threads",
        "rows",
        "order",
        "files",
    ]
    shown = ", ".join(
        f"{k} {executions[k]}"
        for k in sorted(
            executions, key=lambda k: (k not in order, order.index(k) if k in order else 0, k)
        )
    )
    return [
        f"{middle:,} ({shown})",
        f"{statistics.median(per_exec):.1f} ms ({min(per_exec):.1f} to {max(per_exec):.1f})",
        f"{statistics.median(r['plain_wall'] for r in runs):.2f}s",
        f"{statistics.median(multiplier):.1f}x ({min(multiplier):.1f}x to {max(multiplier):.1f}x)",
        f"{statistics.median(floor):.1f}x ({min(floor):.1f}x to {max(floor):.1f}x)",
    ]


def bench_cost(a: Artifact) -> Table:
    """Executions per verdict and twicerun's own cost per execution (issue 16's figures),
    beside the same figures from the artifact `--before` named, when one was."""
    d = a.document
    runs = d["runs"]
    rows = [["this artifact", *_cost_row(runs)]]
    before = d.get("before")
    if before and "rev" in before:  # --before-rev: measured alongside, repetition by repetition
        rows.append(
            [f"before: the code at {before['rev'][:7]}, run alongside", *_cost_row(before["runs"])]
        )
    elif before:
        rows.append([f"before: `{before['path']}`", *_cost_row(before["runs"])])
    if all("plain_walls" in r for r in runs):
        n = len(runs[0]["plain_walls"])
        what = (
            f"{len(runs)} invocations of `{d.get('pipeline')}`, each in a fresh process; the plain "
            f"execution runs every step once, with no comparison, digest or receipt, {n} times "
            f"in a process of its own after each repetition's invocations (after one unmeasured "
            f"execution there), and the fastest of them is the denominator of every invocation "
            f"in that repetition"
            + (", whichever code ran it." if "rev" in d.get("before", {}) else ".")
        )
    else:
        what = (
            f"{len(runs)} invocations of `{d.get('pipeline')}`, each in a fresh process; the plain "
            f"execution runs every step once in the same process, with no comparison, digest or "
            f"receipt."
        )
    if runs[0].get("engine") == "spark":
        start = [r["engine_start"] for r in runs]
        what += (
            f" Steps ran on Spark; starting it took a median {statistics.median(start):.1f}s "
            f"({min(start):.1f}s to {max(start):.1f}s) of each invocation's wall time, which "
            f"the plain execution does not pay."
        )
    return Table(
        _name("bench-cost", d),
        stamp(a, what),
        [
            "code",
            "step executions (by series)",
            "twicerun's own time per execution (range)",
            "one plain execution",
            "multiplier: invocation over plain (range)",
            "of which the step executions alone (range)",
        ],
        rows,
        ["left", "left", "right", "right", "right", "right"],
    )


def tables(path: str, document: dict) -> list[dict]:
    a = Artifact(path, document)
    built = [bench_loop(a)]
    if all("plain_wall" in r for r in document["runs"]):
        built.append(bench_cost(a))
    return carry(built)


if __name__ == "__main__":
    raise SystemExit(main())
