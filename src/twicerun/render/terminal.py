"""The report `twicerun run` prints, rendered from a Result and nothing else."""

from __future__ import annotations

from pathlib import Path

from twicerun.display import ljust, widest
from twicerun.render.evidence import (
    bound_lines,
    evidence,
    left_out_lines,
    plural,
    step_evidence,
)
from twicerun.render.instrument import at, engine, single
from twicerun.render.sections import (
    amplification_section,
    cause_section,
    named,
    not_varied_line,
    shown_classes,
    status_section,
)
from twicerun.result import Result, StepResult, only_run_1_apart
from twicerun.sql import shown
from twicerun.vocabulary.loop import Cause, Status


def rate(step: StepResult) -> str:
    """`k of m`: a rate always carries its denominator."""
    return f"{step.fired} of {step.compared}"


def _later_runs(runs: int) -> str:
    """Runs 2 to `runs` (three or more in all), as a sentence names them."""
    return "runs 2 and 3" if runs == 3 else f"runs 2 to {runs}"


def _header(result: Result) -> list[str]:
    m = result.comparisons_per_step
    env = result.environment
    if result.contained:
        later = "run 2 reads" if result.runs == 2 else f"{_later_runs(result.runs)} read"
        contained = (
            f"yes: {later} run 1's upstream artifacts, so a difference "
            f"cannot travel to the steps after it"
        )
    else:
        contained = (
            "no (--no-containment): every run reads its own upstream artifacts, so a "
            "difference upstream is charged again to each step downstream of it"
        )
    policy = {
        "strict": "strict: any difference in any artifact counts",
        "reduction-order": "reduction-order: float drift inside the reassociation bound, "
        "gone at one thread, is tolerated; any other difference counts",
    }.get(result.policy, result.policy)
    manual = []
    if result.tolerance_rel is not None:
        manual.append(f"relative drift up to {result.tolerance_rel:g}")
    if result.tolerance_ulps is not None:
        manual.append(f"drift up to {plural(result.tolerance_ulps, 'ulp')}")
    if manual:
        policy += f"; also tolerated: {' and '.join(manual)}"
    keys = (
        [
            "keys       "
            + "; ".join(
                f"{name} matched on {', '.join(shown(c) for c in cols)}"
                for name, cols in result.keys.items()
            )
            + " (--key): their other exact columns are not compared"
        ]
        if result.keys
        else []
    )
    return [
        f"pipeline   {result.pipeline}",
        f"runs       {result.runs}: run 1 is the reference and each later run is compared "
        f"with it, {m} comparison{'s' if m != 1 else ''} per step",
        f"contained  {contained}",
        f"policy     {policy}",
        *keys,
        f"engine     {engine(env)}",
        f"platform   {env.platform}, Python {env.python}, twicerun {env.twicerun}",
        f"artifacts  {result.artifacts}",
    ]


def _step_lines(result: Result) -> list[str]:
    width = widest(s.name for s in result.steps)
    index_width = max((len(str(s.index)) for s in result.steps), default=1)
    rate_width = max((len(rate(s)) for s in result.steps if s.status), default=0)
    lines = []
    for s in result.steps:
        head = f"  {s.index:>{index_width}} {ljust(s.name, width)}"
        pad = f"  {'':>{index_width}}     "
        if s.status is None:
            lines.append(f"{head}  not compared: no run wrote an artifact")
            # Why it wrote none may be in a note (a helper taken for a step).
            lines.extend(f"{pad}note: {note}" for note in s.notes)
            continue
        line = f"{head}  {rate(s):>{rate_width}}  {s.status}"
        shown = shown_classes(s)
        if shown:
            line += "  " + " ".join(shown)
        if s.tolerated:
            line += f" ({s.tolerated} tolerated)"
        if s.cause:
            line += f"  cause {s.cause}"
        for hint in s.hints:
            line += f"  hint {hint}"
        lines.append(line)
        if s.fired or s.tolerated:
            lines.extend(pad + line for line in step_evidence(s))
        elif s.status == Status.STABLE_ON_THIS_INPUT:
            # The loop has nothing to show; what differed is in the series that fired.
            for name, a in named(s.amplifiers):
                found = evidence(a.comparisons) if a.ran and a.fired else []
                if found:
                    lines.append(f"{pad}under {name}, each run against that series' run 1:")
                    lines.extend(f"{pad}  {line}" for line in found)
                raised = [c for c in a.comparisons if c.error] if a.ran and a.fired else []
                if raised and not found:
                    # A run that raised has no rows to show: without this line the step
                    # read as stable-on-input with nothing under it.
                    lines.append(
                        f"{pad}under {name}, run {raised[0].run} raised where run 1 had rows "
                        f"({len(raised)} of {a.compared} did); the error is under "
                        f"{Status.STABLE_ON_THIS_INPUT} below"
                    )
        if s.fired and s.seed is not None and s.cause == Cause.PARALLEL_ORDER:
            # The bisect held it still at one thread: the seed is not the whole story there.
            lines.append(
                f"{pad}the seed was held at {s.seed} in every run and the result moved anyway at "
                f"{at(result.environment, result.environment.threads)}, but not with "
                f"{single(result.environment)}: the seed holds this step still only there"
            )
        elif s.fired and s.seed is not None:
            lines.append(
                f"{pad}the seed was held at {s.seed} in every run and the result moved anyway, "
                f"so the seed does not control this step"
            )
        elif s.seed is not None:
            # A quiet line alone read as "this step cannot change"; it drew the same numbers
            # because it was handed the same seed, as `audit` says beside its verdict.
            lines.append(
                f"{pad}the seed was held at {s.seed} in every run, so its runs agreeing says "
                f"nothing of another seed (--seed {s.name}=N draws other numbers)"
            )
        lines.extend(pad + line for line in left_out_lines(s.comparisons))
        if s.cause == Cause.PARALLEL_ORDER and only_run_1_apart(s.comparisons):
            lines.append(
                f"{pad}{_later_runs(result.runs)} all wrote the same rows, and only run 1 other "
                f"ones: a step whose first execution in a process differs from the rest (a "
                f"module-level cache or counter, a file its first run left) looks like this "
                f"too, and the re-executions at one thread, all after the first, could not "
                f"tell the two apart"
            )
        for note in s.notes:
            lines.append(f"{pad}note: {note}")
    return lines


def _bound_section(result: Result) -> list[str]:
    steps = [s for s in result.steps if s.bounds]
    if not steps:
        return []
    lines = [
        "",
        "reassociation bound: two orders of adding n float terms differ by at most 2*gamma_n,",
        "relative; rows read is the n that decides, terms per output value shows the slack:",
    ]
    for s in steps:
        lines.extend("  " + line for line in bound_lines(s))
        if s.cause == Cause.PERSISTS_SINGLE_THREADED:
            lines.append(
                "      one thread on the same inputs still differed, so the order of adding "
                "does not explain this drift, inside the bound or not"
            )
        elif any(not b.clears_loose for b in s.bounds):
            # OUTSIDE alone read as float drift gone large; say what it points at instead.
            lines += [
                "      OUTSIDE: more than adding the same terms in another order can move a sum, "
                "unless",
                "      they cancel; the values themselves changed (first(), a sample, a running "
                "total over ties)",
            ]
    return lines


def _footer(result: Result, retention: bool) -> list[str]:
    fired = len(result.fired_steps)
    stable = sum(1 for s in result.steps if s.status == Status.STABLE_ON_THIS_INPUT)
    more = f", {stable} more only under an amplifier" if stable else ""
    lines = [
        f"{fired} of {len(result.steps)} step{'s' if len(result.steps) != 1 else ''} diverged{more}, "
        f"in {result.seconds:.1f}s ({result.step_seconds:.1f}s of it inside step executions)."
    ]
    if retention and result.pruned:
        n = len(result.pruned)
        lines.append(f"Removed {n} older invocation director{'ies' if n != 1 else 'y'} (--keep).")
    if retention and result.kept_failures:
        lines.append(_kept_failures(result))
    return lines


def _kept_failures(result: Result) -> str:
    """Which directories failed invocations left: a count alone sent the reader to list the
    run directory and open manifests to find them."""
    names = result.kept_failures
    where = Path(result.artifacts).parent
    if len(names) == 1:
        return (
            f"1 directory from a failed, interrupted or killed invocation is kept beside this "
            f"one, {where / names[0]}; remove it once read."
        )
    shown = [str(where / n) for n in names[-3:]]
    more = f" (and {len(names) - 3} older)" if len(names) > 3 else ""
    return (
        f"{len(names)} directories from failed, interrupted or killed invocations are kept "
        f"beside this one, {', '.join(shown[:-1])} and {shown[-1]}{more}; remove them once read."
    )


def render_run(result: Result, *, retention: bool = True) -> str:
    """The whole terminal report, ending in a newline.

    `retention` False leaves out what the invocation's retention removed and kept, for
    a report of a Result re-scored later (`judge`), which removed nothing itself.
    """
    lines = [
        *_header(result),
        "",
        *_step_lines(result),
        *cause_section(result),
        *amplification_section(result),
        *status_section(result),
        *_bound_section(result),
        "",
        *_footer(result, retention),
        *not_varied_line(result),
    ]
    return "\n".join(lines) + "\n"
