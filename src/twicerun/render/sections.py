"""The parts of the report after the step lines: cause, amplification, what a status
means for the steps that carry it, and what was not varied."""

from __future__ import annotations

from twicerun.display import listed, ljust, widest
from twicerun.render.evidence import plural
from twicerun.render.instrument import at, is_spark, one, single
from twicerun.result import Result, Series, StepResult
from twicerun.vocabulary.loop import Amplifier, Cause, Judged, Status


def percent(p: float | None) -> str:
    return "?" if p is None else f"{100 * p:.0f} percent"


def confidence(result: Result) -> str:
    """The level the zero bounds were computed at, as the Result records it."""
    if result.confidence is None:  # a Result written before the level was recorded
        return "one-sided"
    return f"{percent(result.confidence)}, one-sided"


def series_rate(series: Series) -> str:
    return f"{series.fired} of {series.compared}"


def measured_at(result: Result, step, threads: int) -> str:
    """Where the difference the bisect explains was measured: the loop, or, for a step the
    loop found quiet, the thread-count amplifier."""
    if step.fired or step.tolerated:
        # What the bisect explains is every comparison that differed, tolerated or not: a
        # policy changes what a difference is worth, not how often one was measured.
        shown = (
            f"{step.fired + step.tolerated} of {step.compared} at {at(result.environment, threads)}"
        )
        return shown + (f" ({step.tolerated} tolerated)" if step.tolerated else "")
    stressed = next(a for a in step.amplifiers if a.kind == Amplifier.THREAD_COUNT)
    return f"{series_rate(stressed)} under {Amplifier.THREAD_COUNT}"


def shown_classes(step: StepResult | dict) -> list[str]:
    """The classes a step's line shows: the loop's, or, for a step stable on its own input,
    those its firing amplifiers showed, in report order, once each. Takes a StepResult or
    a step as the Result's JSON holds it (the README tables read the document)."""

    def get(o, key):
        return o.get(key) if isinstance(o, dict) else getattr(o, key)

    if get(step, "classes"):
        return list(get(step, "classes"))
    if get(step, "status") != Status.STABLE_ON_THIS_INPUT:
        return []
    seen: list[str] = []
    for series in get(step, "amplifiers") or []:
        if get(series, "fired"):
            seen += [c for c in get(series, "classes") or [] if c not in seen]
    return seen


def cause_section(result: Result) -> list[str]:
    steps = [
        s for s in result.steps if s.bisect is not None and (s.fired or s.tolerated or s.cause)
    ]
    if not steps:
        return []
    threads = result.environment.threads
    width = widest(s.name for s in steps)
    runs = result.runs  # the cap; each bisect stops once its cause is settled
    lines = [
        "",
        "cause, from re-executing each step that fired"
        + (
            f" (in the loop, or under {Amplifier.THREAD_COUNT} where the loop was quiet)"
            if any(not (s.fired or s.tolerated) for s in steps)
            else ""
        )
        + f" at {one(result.environment)} on run 1's inputs, up to "
        f"{plural(runs, 'time')}, stopping once the cause was settled:",
    ]
    labels = set()
    for s in steps:
        b = s.bisect
        if b.error:
            lines.append(
                f"  {_n(s, steps)} {ljust(s.name, width)}  no cause, since at "
                f"{at(result.environment, 1)} {b.error}"
            )
            continue
        label = s.cause or Judged.TOLERATED
        labels.add(label)
        lines.append(
            f"  {_n(s, steps)} {ljust(s.name, width)}  {label:<24}  {measured_at(result, s, threads)}, "
            f"{series_rate(b)} at {at(result.environment, 1)}"
        )
    if Cause.PARALLEL_ORDER in labels:
        # The bisect stops early on a step the loop saw differ often, so the zeros
        # behind this label can have different lengths: each one's bound is given.
        zeros = sorted(
            {
                s.bisect.compared: s.bisect.zero_bound
                for s in steps
                if s.cause == Cause.PARALLEL_ORDER
            }.items()
        )
        bounds = "; ".join(
            f"{plural(m, 'clean comparison')} leave{'s' if m == 1 else ''} it anywhere up to {percent(bound)}"
            for m, bound in zeros
        )
        lines.append(
            f"  {Cause.PARALLEL_ORDER}: the step stopped firing with {single(result.environment)}. "
            f"Of the per-comparison "
            f"rate at {at(result.environment, 1)}, {bounds} ({confidence(result)}), and runs sharing a process and a "
            f"machine are not independent draws."
        )
    if Cause.PERSISTS_SINGLE_THREADED in labels:
        lines.append(
            f"  {Cause.PERSISTS_SINGLE_THREADED}: {single(result.environment)} did not stop it, so "
            f"{'the partitioning' if is_spark(result.environment) else 'the thread count'} is not "
            "the explanation; twicerun does not guess among what is left (state the step appends to, a "
            "clock, a data-dependent branch, something outside the pipeline)."
        )
    return lines


def amplification_section(result: Result) -> list[str]:
    steps = [s for s in result.steps if s.amplifiers]
    if not steps:
        if not result.amplified:
            return [
                "",
                "amplification: not run (--no-amplify), so every quiet step below is quiet on this input only.",
            ]
        return []
    # Results written before the probe was recorded always started at min(3, runs).
    probe = result.amplifier_probe or min(3, result.runs)
    how = (
        f"{probe} runs each, continuing to {result.runs} when one fires"
        if probe < result.runs
        else f"{probe} runs each"
    )
    lines = ["", f"amplification, on the steps the loop found quiet ({how}):"]
    # An amplifier every step declined for one reason (file order, where no step reads a
    # list of files) is said once, not once per step: a long pipeline's section was mostly that.
    everywhere = _declined_everywhere(steps)
    for kind, reason in everywhere.items():
        lines.append(f"  {kind}, on every step below: not run: {reason}")
    for s in steps:
        lines.append(f"  {_n(s, steps)} {s.name}")
        ordered = sorted(s.amplifiers, key=lambda a: list(Amplifier).index(a.kind))
        members = [a for a in ordered if a.probed_with]
        # Amplifiers this step declined for one reason share a line, at the first one's place.
        declined: dict[str, list[Series]] = {}
        for a in ordered:
            if a.declined and not a.probed_with and a.kind not in everywhere:
                declined.setdefault(a.declined, []).append(a)
        for a in ordered:
            if a.probed_with:
                # One probe ran for all its members: print it once, not once per member.
                if a is members[0]:
                    lines += _joint_probe(members)
                continue
            if a.declined:
                group = declined.get(a.declined, [])
                if a.kind in everywhere or a is not group[0]:
                    continue
                if len(group) == 1:
                    lines.append(f"      {a.kind:<19} not run: {shortened(a.declined)}")
                else:
                    names = ", ".join(str(g.kind) for g in group)
                    lines.append(f"      {names}, not run: {shortened(a.declined)}")
                continue
            if a.error:
                # What it varied, too: a step that rejects a stressed input names a value
                # the reader has never seen without it.
                on = f" on {shortened(a.detail)}" if a.detail else ""
                text = f"FAILED after {plural(a.runs, 'run')}{on}: {a.error}"
            else:
                text = f"{series_rate(a)}: {shortened(a.detail)}" if a.detail else series_rate(a)
                if a.tolerated:
                    text += f" ({a.tolerated} tolerated)"
            lines.append(f"      {a.kind:<19} {text}")
    return lines


# How many quiet steps varied alike share one line.
ALIKE = 5

# What an amplifier varied, or why it did not run, is said input by input, and a step that
# reads 300 artifacts printed one line of 40,000 characters. Past this many, the line keeps
# its first parts (inputs are separated by "; ") and counts the rest; the Result keeps all.
DETAIL_CHARS = 1000


def shortened(text: str) -> str:
    """`text` as the terminal shows it: whole up to DETAIL_CHARS, else its first parts
    within that and how many more the Result (--json) holds."""
    if len(text) <= DETAIL_CHARS:
        return text
    parts = text.split("; ")
    kept, size = [parts[0]], len(parts[0])
    for part in parts[1:]:
        size += 2 + len(part)
        if size > DETAIL_CHARS:
            break
        kept.append(part)
    left = len(parts) - len(kept)
    if not left:
        return text
    return "; ".join(kept) + f"; and {left} more, which the Result (--json) holds"


def _spans(indices: list[int]) -> str:
    """Step numbers as runs: `1 to 39`, `2, 4 and 6 to 9`."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return listed([f"{r[0]} to {r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs])


def _declined_everywhere(steps: list[StepResult]) -> dict[str, str]:
    """Each amplifier that every one of `steps` declined, all for the same reason: the reason."""
    if len(steps) < 2:
        return {}
    found: dict[str, str] = {}
    for kind in Amplifier:
        reasons = {
            next((a.declined for a in s.amplifiers if a.kind == kind and not a.probed_with), "")
            for s in steps
        }
        if len(reasons) == 1 and (reason := reasons.pop()):
            found[str(kind)] = reason
    return found


def named(amplifiers: list[Series]) -> list[tuple[str, Series]]:
    """Each series with the name to report it under: a joint probe's members, which carry
    the same runs, become one entry named for all of them."""
    joint = [a for a in amplifiers if a.probed_with]
    entries: list[tuple[str, Series]] = []
    for a in amplifiers:
        if not a.probed_with:
            entries.append((str(a.kind), a))
        elif a is joint[0]:
            entries.append((f"{listed([str(m.kind) for m in joint])} together", a))
    return entries


def _joint_probe(members: list[Series]) -> list[str]:
    """The joint probe's members, what it measured, and (on a line of its own) what it varied.
    Each member's Result entry carries the same comparisons and detail, prefixed with the
    names of the others."""
    names = ", ".join(str(a.kind) for a in members)
    first = members[0]
    if first.error:
        text = f"      {names}, probed together: FAILED after {plural(first.runs, 'run')}: {first.error}"
    else:
        text = f"      {names}, probed together: {series_rate(first)}"
    if first.tolerated:
        text += f" ({first.tolerated} tolerated)"
    detail = first.detail
    if detail.startswith("probed together with "):
        detail = detail.partition(": ")[2]
    return [text, f"          {shortened(detail)}"] if detail else [text]


def _varied(s: StepResult, off: list[str]) -> tuple[list[str], list[str]]:
    """What a quiet step was varied by, and what not: declined, or turned off (`off`)."""
    varied = [f"the loop {s.fired} of {s.compared}"]
    missing = []
    for a in sorted(s.amplifiers, key=lambda a: list(Amplifier).index(a.kind)):
        if a.ran:
            varied.append(f"{a.kind} {series_rate(a)}")
        else:
            missing.append(a.kind)
    if not s.amplifiers and not off:
        missing.append("every amplifier")
    missing += [f"{kind} (--without)" for kind in off]
    return varied, missing


def status_section(result: Result) -> list[str]:
    lines: list[str] = []
    stable = [s for s in result.steps if s.status == Status.STABLE_ON_THIS_INPUT]
    if stable:
        lines += [
            "",
            f"{Status.STABLE_ON_THIS_INPUT}: agreed with itself on the input it was handed, and stopped "
            "agreeing once that input was stressed:",
        ]
        for s in stable:
            by_name = named(s.amplifiers)
            fired = [f"{series_rate(a)} under {name}" for name, a in by_name if a.ran and a.fired]
            lines.append(f"  {_n(s, stable)} {s.name}: {', '.join(fired)}")
            for name, a in by_name:
                raised = [c for c in a.comparisons if c.error]
                if raised:
                    lines.append(
                        f"    under {name}, run {raised[0].run} raised where run 1 had rows "
                        f"({len(raised)} of {a.compared} did): {raised[0].error}"
                    )
        lines.append(
            "  This is the case a plain repeat loop reports as a clean zero. It is not a milder "
            f"{Status.DIVERGENT}; it says the step broke under the stresses named, and nothing beyond them."
        )
    failed = [s for s in result.steps if s.status == Status.AMPLIFICATION_FAILED]
    if failed:
        lines += [
            "",
            f"{Status.AMPLIFICATION_FAILED}: an amplifier could not run, so these zeros were not tightened:",
        ]
        for s in failed:
            errors = [f"{name}: {a.error}" for name, a in named(s.amplifiers) if a.error]
            lines.append(f"  {_n(s, failed)} {s.name}: {'; '.join(errors)}")
    quiet = [s for s in result.steps if s.status == Status.NO_DIVERGENCE_OBSERVED]
    if quiet:
        lines += [
            "",
            f"{Status.NO_DIVERGENCE_OBSERVED} counts what was tried and lists what was not; it does not say the code is right:",
        ]
        # Five or more steps that were varied alike share a line: a long pipeline of quiet
        # steps was otherwise one identical line per step, repeating the section above. Fewer
        # keep their names, which a line of step numbers would make the reader look up.
        alike: dict[str, list[StepResult]] = {}
        for s in quiet:
            varied, missing = _varied(s, result.amplifiers_off)
            text = f"varied: {', '.join(varied)}"
            if missing:
                text += f"; not varied (declined or not run): {', '.join(missing)}"
            alike.setdefault(text, []).append(s)
        width = widest(s.name for group in alike.values() if len(group) < ALIKE for s in group)
        for s in quiet:
            text, group = next((t, g) for t, g in alike.items() if s in g)
            if len(group) < ALIKE:
                lines.append(f"  {_n(s, quiet)} {ljust(s.name, width)}  {text}")
            elif s is group[0]:
                lines.append(f"  steps {_spans([g.index for g in group])}: {text}")
        known = {s.compared: s.zero_bound for s in quiet}
        known.update(
            {
                a.compared: a.zero_bound
                for s in quiet
                for a in s.amplifiers
                if a.ran and a.compared and not a.fired
            }
        )
        bounds = [
            f"{plural(m, 'clean comparison')} leave{'s' if m == 1 else ''} the per-comparison rate "
            f"anywhere up to {percent(b)}"
            for m, b in sorted(known.items())
            if b is not None
        ]
        lines.append(
            f"  {'; '.join(bounds)} ({confidence(result)}; runs on one machine are not independent)."
        )
    return lines


def not_varied_line(result: Result) -> list[str]:
    return [
        f"Not varied by this invocation, whatever a step's status says: {', '.join(result.not_varied)}."
    ]


def _n(s, listed) -> str:
    """A step's index, right-aligned among the steps of one list, so its names line up."""
    width = max(len(str(x.index)) for x in listed)
    return f"{s.index:>{width}}"
