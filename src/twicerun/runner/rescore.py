"""`twicerun judge`: re-score a saved invocation under another policy, executing nothing.

Findings already recorded in the Result are reused as they are. Only a pair
that differed and has no findings (a Result written before the oracle ran on
it) is measured, from the artifacts the invocation kept on disk.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import duckdb

from twicerun.compare.oracle import compare_artifacts
from twicerun.errors import UsageError
from twicerun.judge.policy import Policy
from twicerun.result import Result, ResultFormatError, load_result
from twicerun.runner.scoring import score
from twicerun.storage.layout import (
    COMPLETED,
    LOOP,
    MANIFEST_NAME,
    Invocation,
    RunAddress,
    a_file_given_for_a_run,
    find_invocations,
    follow,
    invocations_with,
)
from twicerun.storage.receipts import Receipt, load_receipt
from twicerun.storage.retention import REMOVED_BY_KEEP, removed_since


def resolve_invocation(path: Path) -> Invocation:
    """An invocation directory, or the newest completed one inside a run directory."""
    path = Path(path)
    if (path / MANIFEST_NAME).is_file():
        return Invocation(path)
    if path.is_dir():
        completed = invocations_with(path, COMPLETED)
        if completed:
            return completed[-1][0]
        others = len(find_invocations(path))
        stopped = (
            f" ({others} invocation{'s' if others != 1 else ''} there did not complete, and "
            f"only a completed one has a Result)"
            if others
            else ""
        )
        raise UsageError(
            f"{path} holds no completed invocation to judge{stopped}; run `twicerun run "
            f"PIPELINE` first"
        )
    if not path.exists():
        if removed_since(path):
            raise UsageError(f"{path} does not exist: {REMOVED_BY_KEEP}")
        raise UsageError(f"{path} does not exist; give an invocation or run directory")
    if (path.parent / MANIFEST_NAME).is_file():
        # Its result.json, most likely: the invocation is the directory that holds it.
        raise UsageError(f"{path} is a file of the invocation {path.parent}; give {path.parent}")
    raise UsageError(a_file_given_for_a_run(path, "an invocation or run directory"))


def load_saved(invocation: Invocation) -> Result:
    if not invocation.result_path.is_file():
        outcome = invocation.manifest().get("outcome")
        raise UsageError(
            f"{invocation.root} has no result.json (its invocation {outcome}); "
            f"only a completed invocation can be judged"
        )
    try:
        return load_result(invocation.result_path)
    except ResultFormatError as exc:
        raise UsageError(f"{invocation.result_path}: {exc}") from exc


def rejudge(invocation: Invocation, policy: Policy) -> Result:
    result = load_saved(invocation)
    result = _fill_missing_findings(invocation, result)
    return score(result, policy)


def _fill_missing_findings(invocation: Invocation, result: Result) -> Result:
    con: duckdb.DuckDBPyConnection | None = None
    steps = []
    try:
        for step in result.steps:
            comparisons = []
            for comparison in step.comparisons:
                artifacts = []
                for a in comparison.artifacts:
                    if a.differs and a.findings is None:
                        con = con or duckdb.connect()
                        ref = _artifact_path(
                            invocation, RunAddress(LOOP, 1), step.index, step.name, a.name
                        )
                        later = _artifact_path(
                            invocation,
                            RunAddress(LOOP, comparison.run),
                            step.index,
                            step.name,
                            a.name,
                        )
                        findings = compare_artifacts(
                            con, a.name, ref, later, key=result.keys.get(a.name)
                        )
                        a = replace(a, findings=findings)
                    artifacts.append(a)
                comparisons.append(replace(comparison, artifacts=artifacts))
            steps.append(replace(step, comparisons=comparisons))
    finally:
        if con is not None:
            con.close()
    return replace(result, steps=steps)


def _artifact_path(
    invocation: Invocation, address: RunAddress, index: int, step: str, name: str
) -> Path | None:
    """The file of (address, step, name), following a pruned copy as Records.ref does."""

    def get(address: RunAddress, index: int) -> Receipt | None:
        directory = invocation.step_dir(address, index, step)
        try:
            return load_receipt(directory)
        except (TypeError, ValueError, KeyError) as exc:
            raise UsageError(
                f"cannot measure {name} of step {index} {step}: the receipt in {directory} "
                f"cannot be read ({exc}); re-run the pipeline"
            ) from exc

    found = follow(get, address, index, name)
    if found is None:
        return None
    address, _, record = found
    if not record.kept:
        raise UsageError(
            f"cannot measure {name} of step {index} {step} in run {address.run}: its copy was deleted "
            f"once its findings were recorded, and the Result has no findings for it; re-run "
            f"the pipeline (with --keep-copies to keep the latest differing copies)"
        )
    path = invocation.absolute(record.file)
    if not path.exists():
        raise UsageError(
            f"cannot measure {name} of step {index} {step} in run {address.run}: {path} is gone; "
            f"re-run the pipeline"
        )
    return path
