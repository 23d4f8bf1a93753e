"""The verdict verbs on the reference pipeline, recorded: what docs/verdicts.md shows.

    python scripts/verdicts.py [--pipeline pipelines/reference.py] [--json results/verdicts-DATE.json]

Records one invocation (`twicerun run --runs 2 --no-amplify --keep-copies`, so the
differing copies of run 2 are there for the oracle), then asks it
`diff DIR DIR#2`, `localize DIR` and `reproduce DIR`, and audits the pipeline,
each through the real CLI with `--json -`, timing each verb. The artifact carries
the verbs' own JSON and tables built from it, which `twicerun report` renders.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))


from bench.common import parse_measuring, write_artifact  # noqa: E402
from twicerun.render.markdown import cell, code  # noqa: E402
from twicerun.render.tables import Artifact, Table, carry, stamp  # noqa: E402
from twicerun.runner.environment import default_threads  # noqa: E402
from twicerun.runner.environment import stamp as instrument  # noqa: E402
from twicerun.verdicts.ladder import inputs_note  # noqa: E402

SCHEMA = "twicerun.verdicts/1"


def _twicerun(*args: str, cwd: Path) -> tuple[int, dict, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "twicerun", *args, "--json", "-"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1, 4):
        raise SystemExit(f"twicerun {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return done.returncode, json.loads(done.stdout), round(seconds, 2)


def measure(pipeline: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="twicerun-verdicts-") as scratch:
        work = Path(scratch)
        run_code, result, run_seconds = _twicerun(
            "run",
            str(pipeline),
            "--runs",
            "2",
            "--no-amplify",
            "--keep-copies",
            "--run-dir",
            "runs",
            cwd=work,
        )
        invocation = result["artifacts"]
        verbs = {}
        for name, args in (
            ("diff", ("diff", invocation, f"{invocation}#2")),
            ("localize", ("localize", invocation)),
            ("reproduce", ("reproduce", invocation)),
            ("audit", ("audit", str(pipeline))),
        ):
            exit_code, document, seconds = _twicerun(*args, cwd=work)
            verbs[name] = {"exit": exit_code, "seconds": seconds, "document": document}
            print(f"{name}: exit {exit_code} in {seconds}s", file=sys.stderr)
    return {"run": {"exit": run_code, "seconds": run_seconds}, "verbs": verbs}


def tables(path: str, d: dict) -> list[dict]:
    a = Artifact(path, d)
    v = d["verbs"]
    what = (
        f"One invocation of {code(d['pipeline'])} ({d['run']['seconds']:.1f}s, 2 runs, no "
        f"amplifiers, run 2's differing copies kept), then each verb through the CLI."
    )
    diff = v["diff"]["document"]
    diff_rows = [
        [
            f"{s['index']} {code(s['name'])}",
            s["verdict"],
            cell(
                "; ".join(
                    part
                    for part in (
                        s["explanation"],
                        inputs_note(s["inputs"], s["verdict"], s["instrument"])
                        if s["inputs"] == "identical"
                        and s["verdict"] in ("FIRST DIFFERENCE", "downstream")
                        else "",
                        "; ".join(s["instrument"]),
                    )
                    if part
                )
            ),
        ]
        for s in diff["steps"]
    ]
    reproduce = v["reproduce"]["document"]
    reproduce_rows = [
        [f"{s['index']} {code(s['name'])}", s["verdict"], cell(s["detail"])]
        for s in reproduce["steps"]
    ]
    audit = v["audit"]["document"]
    audit_rows = [
        [
            f"{s['index']} {code(s['name'])}",
            s["verdict"],
            f"{s['seconds'][0]:.2f}s, {s['seconds'][1]:.2f}s",
        ]
        for s in audit["steps"]
    ]
    located = v["localize"]["document"]
    return carry(
        [
            Table(
                "verdicts-diff",
                stamp(
                    a,
                    f"{what} `twicerun diff DIR DIR#2`: {diff['result']} (exit "
                    f"{v['diff']['exit']}, {v['diff']['seconds']:.1f}s). `twicerun localize DIR`: "
                    f"{located['result']} at step {located['index']} {code(located['step'])}.",
                ),
                ["step", "verdict", "why"],
                diff_rows,
            ),
            Table(
                "verdicts-reproduce",
                stamp(
                    a,
                    f"{what} `twicerun reproduce DIR`: exit {v['reproduce']['exit']}, "
                    f"{v['reproduce']['seconds']:.1f}s.",
                ),
                ["step", "re-executed now", "how it differs"],
                reproduce_rows,
            ),
            Table(
                "verdicts-audit",
                stamp(
                    a,
                    f"`twicerun audit {d['pipeline']}`: {audit['verdict']} (exit "
                    f"{v['audit']['exit']}), {v['audit']['seconds']:.1f}s for the whole audit, "
                    f"the process included.",
                ),
                ["step", "verdict", "its two audit runs"],
                audit_rows,
                ["left", "left", "right"],
            ),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipeline", default="pipelines/reference.py")
    args = parse_measuring(parser, argv, tables)
    if args is None:
        return 0
    pipeline = (REPO / args.pipeline).resolve()
    document = {
        "schema": SCHEMA,
        "written": time.strftime("%Y-%m-%d"),
        "command": "python scripts/verdicts.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "environment": dict(vars(instrument(default_threads()))),
        "pipeline": args.pipeline,
        **measure(pipeline),
    }
    if args.json_path:
        write_artifact(args.json_path, document, tables)
    else:
        print(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
