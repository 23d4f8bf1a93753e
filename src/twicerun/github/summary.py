"""The check in words: the sticky comment's body, the job summary, the log's last line,
and the stamp under them, all rendered from a Gate (github/gate.py), the same way for
a check that just ran and for a gate document read back to post from a fork's run."""

from __future__ import annotations

from collections.abc import Mapping

from twicerun.display import some
from twicerun.github.comment import BUDGET, headlines, render
from twicerun.github.decision import (
    POWER_TARGET,
    shortfall,
)
from twicerun.github.gate import Gate, GateOptions
from twicerun.render.evidence import plural
from twicerun.render.instrument import engine
from twicerun.result import Result


def power_note(gate: Gate) -> str:
    """A sentence under the stamp when the baseline is smaller than the power target needs:
    the check can fail a pull request, but passing says less than it would with the
    default number of trials, and a green check should not hide that. '' otherwise."""
    first = next(iter(gate.results.values()), None)
    # A gate document read back (the fork flow) may carry any count: only whole trials count.
    compared = [
        d for d in gate.decisions if (d.baseline_trials or 0) > 0 and d.pipeline in gate.results
    ]
    if first is None or not compared or gate.baseline_error:
        return ""
    trials = min(d.baseline_trials or 0 for d in compared)
    pipelines = len({d.pipeline for d in compared})
    o = gate.options
    if not (0 < o.alpha < 1 and o.confirm >= 1 and 0 < o.screen <= 1 and first.runs >= 2):
        return ""  # settings the CLI refuses, from a document edited by hand: nothing to say
    short = shortfall(trials, o.alpha, first.runs, o.confirm, pipelines, o.screen)
    if short is None:
        return ""
    power, enough = short.power, short.enough
    target = f"{POWER_TARGET * 100:.0f} percent"
    reach = (
        f"{enough} trials reach {target} (`twicerun baseline update --add`)"
        if enough is not None
        else f"no number of trials reaches {target} with {first.runs} runs a trial"
    )
    return (
        f"With {plural(trials, 'baseline trial')}, a step that newly gives one of two answers "
        f"at random on each run fails this check {power * 100:.0f} percent of the time; {reach}."
    )


def stamp(results: Mapping[str, Result], options: GateOptions) -> str:
    first = next(iter(results.values()), None)
    if first is None:
        return "twicerun finished no pipeline."
    env = first.environment
    # Every engine the pipelines ran on, each once: a Spark pipeline's stamp said "DuckDB at
    # threads=2", and a check of a DuckDB and a Spark pipeline named only the first.
    engines = list(dict.fromkeys(engine(r.environment) for r in results.values()))
    return (
        f"twicerun {env.twicerun}, {'; '.join(engines)}, "
        f"{first.runs} runs, policy {first.policy}; alpha {options.alpha} family-wise, "
        f"{plural(options.confirm, 'confirmation trial')} for a suspect pipeline."
    )


# GitHub refuses a job summary over 1 MiB of UTF-8 (and drops all of it); this leaves
# room for what else is in it. The renderer counts characters, which for step names in
# another script are two or three bytes each, so the summary is measured once rendered.
SUMMARY_BUDGET = 1_000_000


def comment_identity(gate: Gate, comment_id: str | None = None) -> str:
    """What the sticky comment is found again by: an explicit id, or the set of pipelines
    (normalised and sorted, so `b.py a.py` and `./a.py b.py` share one comment)."""
    # A pipeline that did not finish still names the comment it would have updated.
    return comment_id or " ".join(sorted({*gate.results, *(f.pipeline for f in gate.failures)}))


def comment_body(
    gate: Gate,
    pipelines: str,
    summary_url: str | None = None,
    budget: int = BUDGET,
    comment_id: str | None = None,
    in_summary: bool = False,
) -> str:
    del pipelines  # the comment is identified by what ran, not by how it was spelled
    return render(
        gate.decisions,
        pipelines=comment_identity(gate, comment_id),
        regressions=gate.regressions,
        environment=gate.environment,
        stamp=_at_commit(gate) + stamp(gate.results, gate.options),
        note=power_note(gate),
        baseline_error=gate.baseline_error,
        baseline_moved=gate.baseline_moved,
        changed_by=gate.changed_by,
        baseline_source=gate.baseline_source,
        confirmations=[
            # No seconds here: a comment that changed with the timing would be edited
            # on every run. The gate document has them.
            (c.pipeline, f"{c.trials} more trials, for {some(c.suspects)}")
            for c in gate.confirmations
        ],
        summary_url=summary_url,
        budget=budget,
        in_summary=in_summary,
    )


def _at_commit(gate: Gate) -> str:
    """The commit the comment speaks for: after a new push, until its check finishes (or
    if it is cancelled), the comment still shows the last one, and says which that was."""
    sha = (gate.pull_request or {}).get("head_sha")
    return f"Measured at {sha[:12]}: " if isinstance(sha, str) and sha else ""


def headline(gate: Gate) -> str:
    """The summary's headings in one line, for the end of the log."""
    return "; ".join(headlines(gate.decisions, gate.regressions, gate.baseline_error))


def summary(gate: Gate, pipelines: str) -> str:
    """The job summary: the comment's content, cut only past GitHub's 1 MiB."""
    budget = SUMMARY_BUDGET
    while True:
        body = comment_body(gate, pipelines, budget=budget, in_summary=True)
        # The hidden marker belongs to the comment; the summary has no use for it.
        body = body.split("\n", 1)[1].lstrip("\n")
        size = len(body.encode("utf-8"))
        if size <= SUMMARY_BUDGET or budget <= 1:
            return body
        budget = max(1, budget * SUMMARY_BUDGET // size - 1)
