"""One pass of the amplification gap: every source asked about one step, each to the full count.

`twicerun run` amplifies only what the loop found quiet, so it cannot compare the
loop with the amplifiers on the same step. A pass here runs run 1 of everything up
to and including the step (its inputs, and the receipt that says what it reads),
then the step re-run on its own input, then every amplifier, none of them probing.
Used by scripts/amplification_gap.py and scripts/eval.py; a research harness, so it
lives beside them rather than in the package.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from twicerun.judge.policy import Policy
from twicerun.pipeline import Pipeline, Step
from twicerun.result import Series
from twicerun.runner.execute import execute_step
from twicerun.runner.records import Records
from twicerun.runner.scoring import score_series
from twicerun.runner.series import Workbench, discard_directory, run_series
from twicerun.runner.stress import Stressed, amplify
from twicerun.storage.connections import Connections, open_connection
from twicerun.storage.janitor import Janitor
from twicerun.storage.layout import LOOP, Invocation, RunAddress

LOOP_SOURCE = "the loop"


def one_pass(
    pipeline: Pipeline, target: Step, runs: int, threads: int, policy: Policy, run_dir: Path
) -> dict[str, Series]:
    """Every source's scored series for `target`, keyed by source name."""
    invocation = Invocation.create(
        run_dir, {"pipeline": str(pipeline.path), "purpose": "amplification gap"}
    )
    janitor = Janitor()
    records = Records(invocation, RunAddress(LOOP, 1), janitor)
    con = open_connection(threads, invocation.spill_dir)
    connections = Connections(invocation.spill_dir)
    bench = Workbench(
        invocation=invocation,
        records=records,
        connections=connections,
        con=con,
        keys={},
        policy=policy,
        progress=lambda _event: None,
        steps=len(pipeline.steps),
        janitor=janitor,
    )
    try:
        address = RunAddress(LOOP, 1)
        for step in pipeline.steps[: target.index + 1]:
            receipt = execute_step(
                invocation=invocation,
                step=step,
                address=address,
                threads=threads,
                visible=records.visible(address, step.index),
                state_source=lambda _name: None,
                owners=records.owners(address),
                reference=None,
                digest_connection=con,
                connections=connections,
            )
            records.add(address, receipt)
        inputs = records.visible(address, target.index)
        found = [
            run_series(
                bench,
                target,
                kind=LOOP_SOURCE,
                label="gap-loop",
                threads=threads,
                runs=runs,
                inputs_for=lambda _run: inputs,
            )
        ]
        stressed = Stressed(bench)
        found += amplify(bench, target, stressed, runs, threads, probe=None)
        return {s.kind: score_series(s, policy) for s in found}
    finally:
        discard_directory(bench, "amplified")
        connections.shutdown()
        con.close()
        janitor.shutdown()
        # A pass leaves nothing behind: what it measured is in the series it returns.
        shutil.rmtree(invocation.root, ignore_errors=True)
