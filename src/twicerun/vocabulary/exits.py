"""Every verb's exit codes, by name, with the sentence `--help` prints for each.

One enum per verb, because the same integer means different things to different
verbs: a failed gate is not "diverged", a stale README block is not a crash.
The `--help` epilogs are generated from these, so the docs cannot drift.
"""

from __future__ import annotations

from enum import IntEnum


class RunExit(IntEnum):
    """`run` and `judge`: the most serious claim present wins."""

    CLEAN = 0
    DIVERGED = 1
    BAD_INPUT = 2
    CRASHED = 3
    ONLY_AMPLIFIED = 4
    AMPLIFIER_FAILED = 5
    INTERRUPTED = 130
    TERMINATED = 143


class GateExit(IntEnum):
    """`gate` and `baseline compare`."""

    PASSED = 0
    FAILED = 1
    BAD_INPUT = 2
    CRASHED = 3
    INTERRUPTED = 130
    TERMINATED = 143


class ReportExit(IntEnum):
    """`report`."""

    RENDERED = 0
    STALE = 1
    BAD_INPUT = 2


class BaselineExit(IntEnum):
    """`baseline update`."""

    WRITTEN = 0
    BAD_INPUT = 2
    CRASHED = 3
    INTERRUPTED = 130
    TERMINATED = 143


class PostExit(IntEnum):
    """`post` and `comment`."""

    DONE = 0
    BAD_INPUT = 2
    FAILED = 3
    INTERRUPTED = 130
    TERMINATED = 143


class DiffExit(IntEnum):
    """`diff`, and `localize` given two runs: one word for the whole comparison."""

    IDENTICAL = 0
    DIVERGED = 1
    NOT_COMPARABLE = 2
    REFUSED = 3
    COULD_NOT_CHECK = 4
    INTERRUPTED = 130
    TERMINATED = 143


class LocalizeExit(IntEnum):
    """`localize`: over one invocation's runs, or (with two) as `diff`."""

    CLEAN = 0
    LOCATED = 1
    NOT_COMPARABLE = 2
    REFUSED = 3
    COULD_NOT_CHECK = 4
    INTERRUPTED = 130
    TERMINATED = 143


class ReproduceExit(IntEnum):
    """`reproduce`: each step re-executed against its receipt."""

    REPRODUCED = 0
    DIVERGED = 1
    REFUSED = 3
    COULD_NOT_CHECK = 4
    INTERRUPTED = 130
    TERMINATED = 143


class AuditExit(IntEnum):
    """`audit`: the pipeline's verdict is the worst of its steps'."""

    REPEATS = 0
    NOT_REPRODUCIBLE = 1
    BAD_INPUT = 2
    CRASHED = 3
    INTERRUPTED = 130
    TERMINATED = 143


# Integer values repeat across verbs (0 is every verb's success), so the sentences are
# kept per enum: an IntEnum member hashes as its integer.
MEANINGS: dict[type[IntEnum], dict[int, str]] = {
    RunExit: {
        RunExit.CLEAN: "every step agreed with itself wherever it was tested",
        RunExit.DIVERGED: "a step gave a different answer on the pipeline's own input",
        RunExit.BAD_INPUT: "bad input: the pipeline, a flag or an artifact name is wrong, "
        "or a column type twicerun does not compare",
        RunExit.CRASHED: "a step raised in the loop (or ran past --step-timeout), or "
        "twicerun itself failed; the invocation directory is kept",
        RunExit.ONLY_AMPLIFIED: "a step gave a different answer only on an input an amplifier built",
        RunExit.AMPLIFIER_FAILED: "an amplifier failed, so a quiet step went without its stress test",
        RunExit.INTERRUPTED: "interrupted (Ctrl-C); the invocation directory is kept",
        RunExit.TERMINATED: "terminated (SIGTERM), handled as an interrupt; the invocation directory is kept",
    },
    GateExit: {
        GateExit.PASSED: "no step failed the check (per --fail-on)",
        GateExit.FAILED: "the check failed: a step got worse than on the baseline, or a "
        "pipeline or step could not be compared with it",
        GateExit.BAD_INPUT: "bad input, including a missing or unreadable baseline, or a "
        "pipeline whose file or use of ctx was refused (reported like a crash)",
        GateExit.CRASHED: "a pipeline crashed (a step raised: the comment, summary and an "
        "annotation on the line say so first), or twicerun failed",
        GateExit.INTERRUPTED: "interrupted (Ctrl-C)",
        GateExit.TERMINATED: "terminated (SIGTERM), handled as an interrupt",
    },
    ReportExit: {
        ReportExit.RENDERED: "rendered; with --check, every block matches; with --update, done",
        ReportExit.STALE: "--check: a block is stale (it is named, with a diff)",
        ReportExit.BAD_INPUT: "bad input: an artifact unreadable, markers that do not pair, or "
        "the marker blocks in the file and the tables the artifacts render differ (both "
        "sides are named)",
    },
    BaselineExit: {
        BaselineExit.WRITTEN: "written, or already holding the trials asked for",
        BaselineExit.BAD_INPUT: "bad input, including a baseline too small for the gate ever "
        "to find a step worse",
        BaselineExit.CRASHED: "a pipeline crashed, or twicerun failed",
        BaselineExit.INTERRUPTED: "interrupted (Ctrl-C); nothing is written",
        BaselineExit.TERMINATED: "terminated (SIGTERM), handled as an interrupt; nothing is written",
    },
    DiffExit: {
        DiffExit.IDENTICAL: "identical: every step's outputs are the same on both sides",
        DiffExit.DIVERGED: "diverged: a step's outputs differ (the first one is named)",
        DiffExit.NOT_COMPARABLE: "not comparable: the two runs have different step lists",
        DiffExit.REFUSED: "refused: a run cannot be read, or a flag is wrong",
        DiffExit.COULD_NOT_CHECK: "could not check: no step differs, but at least one could "
        "not be evaluated (an artifact gone, a receipt this version cannot read)",
        DiffExit.INTERRUPTED: "interrupted (Ctrl-C)",
        DiffExit.TERMINATED: "terminated (SIGTERM), handled as an interrupt",
    },
    LocalizeExit: {
        LocalizeExit.CLEAN: "clean: no step's runs disagreed (with two runs: identical)",
        LocalizeExit.LOCATED: "located: the first step whose runs disagreed is named (with "
        "two runs: diverged)",
        LocalizeExit.NOT_COMPARABLE: "not comparable (two runs with different step lists)",
        LocalizeExit.REFUSED: "refused: a run cannot be read, or a flag is wrong",
        LocalizeExit.COULD_NOT_CHECK: "could not check: nothing disagreed, but a step could "
        "not be evaluated",
        LocalizeExit.INTERRUPTED: "interrupted (Ctrl-C)",
        LocalizeExit.TERMINATED: "terminated (SIGTERM), handled as an interrupt",
    },
    ReproduceExit: {
        ReproduceExit.REPRODUCED: "every step re-executed gave what its receipt records",
        ReproduceExit.DIVERGED: "a step gave something else (the oracle says how)",
        ReproduceExit.REFUSED: "refused: the run or the pipeline cannot be read, or a flag is wrong",
        ReproduceExit.COULD_NOT_CHECK: "no step diverged, but at least one could not be "
        "checked (its code or DuckDB changed, an input is gone)",
        ReproduceExit.INTERRUPTED: "interrupted (Ctrl-C); nothing was written into the run",
        ReproduceExit.TERMINATED: "terminated (SIGTERM), handled as an interrupt; nothing was written into the run",
    },
    AuditExit: {
        AuditExit.REPEATS: "every step audited is deterministic or reproducible",
        AuditExit.NOT_REPRODUCIBLE: "a step is not reproducible: its two audit runs wrote "
        "different rows, or one raised where the other wrote",
        AuditExit.BAD_INPUT: "bad input: the pipeline or a flag is wrong",
        AuditExit.CRASHED: "a step raised in the ordinary run or in both audit runs, or ran "
        "past --step-timeout (the verdicts of the steps audited before it are printed "
        "first), or twicerun failed",
        AuditExit.INTERRUPTED: "interrupted (Ctrl-C); the scratch files are deleted",
        AuditExit.TERMINATED: "terminated (SIGTERM), handled as an interrupt; the scratch files are deleted",
    },
    PostExit: {
        PostExit.DONE: "posted, edited, or already current",
        PostExit.BAD_INPUT: "bad input: a missing document, token, repository or pull request",
        PostExit.FAILED: "GitHub refused or could not be reached, after retries",
        PostExit.INTERRUPTED: "interrupted (Ctrl-C)",
        PostExit.TERMINATED: "terminated (SIGTERM), handled as an interrupt",
    },
}
