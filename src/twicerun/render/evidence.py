"""The evidence under a step that differed: sentences built from its findings.

Works on the Result's typed findings (render reads only the Result). For
each artifact that differed, the sentences come from the comparison that
showed the most: the one with the most unmatched rows, or, for drift, the
most moved values; the furthest move is the largest over all comparisons.
"""

from __future__ import annotations

from twicerun.display import listed, some
from twicerun.findings import NAMED_TOGETHER, ArtifactFindings, Attribution, Drift, finite
from twicerun.result import Comparison, StepResult
from twicerun.sql import shown
from twicerun.vocabulary.loop import Difference, Presence


def number(n: int | None) -> str:
    return "?" if n is None else f"{n:,}"


def value(v: float | str | None) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return {"nan": "NaN", "inf": "+inf", "-inf": "-inf"}.get(v, v)
    return repr(float(v))


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def _per_artifact(comparisons: list[Comparison]) -> dict[str, list[tuple[int, ArtifactFindings]]]:
    found: dict[str, list[tuple[int, ArtifactFindings]]] = {}
    for c in comparisons:
        for a in c.artifacts:
            if a.differs and a.findings:
                found.setdefault(a.name, []).append((c.run, a.findings))
    return found


# Artifacts described one by one; a step writing 200 artifacts that all differed printed
# two lines or more for every one, 400 lines under one step.
ARTIFACTS_SHOWN = 5


def evidence(comparisons: list[Comparison]) -> list[str]:
    """The sentences for one series of comparisons: the loop's, or an amplifier's (whose
    run 1 is the reference its later runs were compared with). Past ARTIFACTS_SHOWN
    artifacts, one line counts the rest, with the classes they showed."""
    lines: list[str] = []
    found = list(_per_artifact(comparisons).items())
    for name, seen in found[:ARTIFACTS_SHOWN]:
        lines.extend(_artifact_lines(name, seen, len(comparisons)))
    rest = found[ARTIFACTS_SHOWN:]
    if rest:
        classes = sorted(
            {c for _, seen in rest for _, f in seen for c in f.classes},
            key=list(Difference).index,
        )
        lines.append(
            f"{plural(len(rest), 'more artifact')} differed too ({some([n for n, _ in rest], 3)})"
            + (f", showing {' '.join(classes)}" if classes else "")
            + "; the Result (--json) has what each showed"
        )
    return lines


def left_out_lines(comparisons: list[Comparison]) -> list[str]:
    """Artifacts whose copies differed only in columns a --key leaves out: counted as the
    same answer, and said so, since a quiet step was otherwise silent about what moved."""
    moved: dict[str, tuple[int, list[str]]] = {}
    for c in comparisons:
        for a in c.artifacts:
            f = a.findings
            if a.differs and f is not None and not f.classes and f.not_compared:
                count, columns = moved.get(a.name, (0, f.not_compared))
                moved[a.name] = (count + 1, columns)
    return [
        f"{name}: differed in {count} of {plural(len(comparisons), 'comparison')}, only in "
        f"the columns --key leaves out ({', '.join(shown(c) for c in columns)}), so counted "
        f"as the same answer"
        for name, (count, columns) in moved.items()
    ]


def step_evidence(step: StepResult) -> list[str]:
    return evidence(step.comparisons)


def _artifact_lines(
    name: str, seen: list[tuple[int, ArtifactFindings]], comparisons: int
) -> list[str]:
    lines: list[str] = []
    one_sided = [(run, f) for run, f in seen if f.presence != Presence.BOTH]
    for run, f in one_sided[:1]:
        if f.presence == Presence.REFERENCE_ONLY:
            lines.append(
                f"{name}: written by run 1 and not by run {run}, so "
                f"{_all_rows(f.reference_rows, 'missing there')}"
            )
        else:
            lines.append(
                f"{name}: written by run {run} and not by run 1, so "
                f"{_all_rows(f.later_rows, 'extra')}"
            )
    both = [(run, f) for run, f in seen if f.presence == Presence.BOTH]
    if not both:
        return lines

    schema = next((f.schema for _, f in both if f.schema), None)
    if schema:
        lines.append(f"{name}: schema changed: {schema.said()}")

    run, worst = max(both, key=lambda item: item[1].unmatched)
    if worst.not_compared:
        lines.append(
            f"{name}: matched on {', '.join(shown(c) for c in worst.key)} (--key); "
            f"{', '.join(shown(c) for c in worst.not_compared)} not compared"
        )
    elif not worst.key and worst.schema and (worst.schema.retyped or worst.schema.dropped):
        # Its exact columns may have been retyped or dropped: the key is what both sides
        # share, and "it has no exact column" was said of an integer count retyped. With
        # no float left either (drift has one entry per float compared), nothing paired
        # rows at all, and "by their float values" named values there were none of.
        paired = (
            "rows were paired by their float values alone"
            if worst.drift
            else "no value was compared, only how many rows each run wrote"
        )
        lines.append(
            f"{name}: matched on no key: no exact column kept its name and type in both "
            f"runs, so {paired}"
        )
    elif not worst.key:
        lines.append(
            f"{name}: matched on no key: it has no exact column, so rows were paired by their "
            f"float values alone"
        )
    if worst.reference_rows == 0 and worst.later_rows:
        # "0 of 0 reference rows and 3 of 3 later rows found no partner" said it in riddles.
        lines.append(
            f"{name}: run 1 wrote no rows to it and run {run} wrote "
            f"{_every(worst.later_rows, 'extra')}"
        )
    elif worst.later_rows == 0 and worst.reference_rows:
        lines.append(
            f"{name}: run {run} wrote no rows to it and run 1 wrote "
            f"{_every(worst.reference_rows, 'missing there')}"
        )
    elif worst.missing or worst.extra:
        lines.append(
            f"{name}: {number(worst.missing)} of {plural(worst.reference_rows, 'reference row')} "
            f"and {number(worst.extra)} of {plural(worst.later_rows, 'later row')} found no partner"
        )
    if worst.multiplicity_extra:
        lines.append(
            f"{name}: {plural(worst.multiplicity_extra, 'row')} of run {run} "
            f"{'repeats a row' if worst.multiplicity_extra == 1 else 'repeat rows'} that run 1 "
            f"has fewer times ({plural(worst.reference_rows, 'row')} in run 1, "
            f"{number(worst.later_rows)} in run {run})"
        )
    if worst.multiplicity_missing:
        lines.append(
            f"{name}: {plural(worst.multiplicity_missing, 'row')} of run 1 "
            f"{'appears' if worst.multiplicity_missing == 1 else 'appear'} fewer times in "
            f"run {run} ({plural(worst.reference_rows, 'row')} in run 1, "
            f"{number(worst.later_rows)} in run {run})"
        )
    explained = [f for _, f in both if f.attribution]
    chosen = max(explained, key=lambda f: f.unmatched) if explained else None
    attribution = chosen.attribution if chosen else None
    # "No single column" speaks of rows with no partner on either side; rows that only
    # repeat another number of times pair with nothing whatever the key, and saying so
    # of them would send a reader to the columns for what is a count.
    if attribution and (attribution.chosen_by != "none" or (chosen.missing and chosen.extra)):
        line = attribution_line(attribution)
        if line:
            lines.append(line)
    lines.extend(_drift_lines(name, both, comparisons))
    return lines


def _every(n: int, what: str) -> str:
    """`3 rows, all of them extra`; one row is `1 row, which is extra`."""
    return f"1 row, which is {what}" if n == 1 else f"{number(n)} rows, all of them {what}"


def _all_rows(n: int | None, what: str) -> str:
    """Every row of an artifact only one side wrote, counted as a sentence reads."""
    if n is None:
        return f"its rows are all {what}"
    if n == 0:
        return f"the whole artifact is {what}, though it has no rows"
    if n == 1:
        return f"its one row is {what}"
    return f"its {number(n)} rows are all {what}"


def attribution_line(a: Attribution) -> str | None:
    before, after = a.before, a.after
    if len(after) < 2:
        # Dropping a key's only column leaves nothing to pair on, so every row "pairs" when
        # the counts agree: a line that said so named the column as if it explained something.
        return _reordered_clause(a).removeprefix("; ") or None
    column = shown(a.column) if a.column is not None else None
    if a.chosen_by == "none":
        # Said, not left out: without it a reader looks for the one column to blame.
        if len(after) < 2:
            return None
        # One row on each side is the commonest case; "all 2" read as a slip.
        rows = "both" if before == 2 else f"all {number(before)}"
        return (
            f"dropping any one of the {number(len(after))} key columns leaves {rows} "
            f"unmatched rows unmatched, so no single column explains them"
        )
    if a.chosen_by == "together":
        kept = [shown(k) for k in a.after if k not in a.tied]
        # Past a few names, the columns that agree are the shorter list to read.
        blamed = (
            listed([shown(t) for t in a.tied])
            if len(a.tied) <= NAMED_TOGETHER
            else f"every key column but {listed(kept)}"
        )
        line = (
            f"dropping {blamed} together from the key pairs every row, though no one of "
            f"them does alone"
        )
        return line + _reordered_clause(a) + _floats_clause(a)
    if a.chosen_by == "undecided":
        return _undecided_line(a)
    left = after[a.column]
    head = (
        f"dropping {column} from the key pairs every row"
        if left == 0
        else f"dropping {column} from the key takes unmatched rows from {number(before)} to {number(left)}"
    )
    if a.chosen_by == "invented":
        others = [shown(t) for t in a.tied if t != a.column]
        return (
            f"{head}; {' and '.join(others)} {'does' if len(others) == 1 else 'do'} the same, "
            f"and {column} is named because no input of this step has that column"
        ) + _floats_clause(a)
    return head + _reordered_clause(a) + _floats_clause(a)


def _undecided_line(a: Attribution) -> str:
    """Several columns tie on the counts, and whether the step made them up cannot break
    the tie: none of them was made up, or more than one was."""
    tied = [shown(t) for t in a.tied]
    left = a.after[a.tied[0]]
    effect = (
        "pairs every row"
        if left == 0
        else f"leaves {number(left)} of {number(a.before)} unmatched rows"
    )
    which = (
        f"either {tied[0]} or {tied[1]}" if len(tied) == 2 else f"any one of {listed(tied, 'or')}"
    )
    made_up = [shown(t) for t in a.tied if t in a.invented]
    if not made_up:
        reason = (
            "neither is a column the step invented"
            if len(tied) == 2
            else "none of them is a column the step invented"
        )
    elif len(made_up) == len(tied):
        reason = (
            "both are columns the step invented"
            if len(tied) == 2
            else "all of them are columns the step invented"
        )
    else:
        both = "both" if len(made_up) == 2 else "all"
        reason = f"{listed(made_up)} are {both} columns the step invented"
    return (
        f"dropping {which} from the key {effect}, and {reason}, "
        f"so the counts could not choose between them"
    )


def _floats_clause(a: Attribution) -> str:
    """The floats that differ on the rows the blamed columns pair: other rows, not one
    value changed."""
    if not a.floats_differ:
        return ""
    names = listed([shown(f) for f in a.floats_differ])
    verb = "differs" if len(a.floats_differ) == 1 else "differ"
    return f"; {names} {verb} on those rows too"


def _reordered_clause(a: Attribution) -> str:
    """The blamed list columns whose lists hold the same elements on both sides."""
    if not a.reordered:
        return ""
    names = listed([shown(r) for r in a.reordered])
    verb = "holds" if len(a.reordered) == 1 else "hold"
    return f"; {names} {verb} the same elements in another order"


def _further_relative(far: Drift, drifts: list[Drift]) -> str:
    """The largest relative move, where a pair other than the one shown made it.

    The pair shown is the one furthest in ulps; the reassociation bound's observed figure
    is the largest relative move, which a pair of smaller values can make with fewer ulps.
    Without this the two figures disagreed with nothing to say why."""
    largest = max((f for d in drifts if (f := finite(d.max_relative)) is not None), default=None)
    # A pair shown at an infinity (or without a figure) is as far as a pair can be.
    shown = finite(far.pair_relative())
    if largest is None or shown is None or largest <= shown:
        return ""
    if f"{largest:.3g}" == f"{shown:.3g}":
        return ""
    return f"; another pair moved further in relative terms, {largest:.3g}"


def _drift_lines(
    name: str, both: list[tuple[int, ArtifactFindings]], comparisons: int
) -> list[str]:
    lines: list[str] = []
    # Keyed by the drift's path, which the oracle already wrote as a reader reads it.
    columns: dict[str, list[Drift]] = {}
    for _, f in both:
        for d in f.drift:
            if d.moved:
                columns.setdefault(d.column, []).append(d)
    over = f"over {plural(comparisons, 'comparison')}" if comparisons > 1 else "in this comparison"
    rest = list(columns.items())[COLUMNS_SHOWN:]
    for column, drifts in list(columns.items())[:COLUMNS_SHOWN]:
        most = max(drifts, key=lambda d: d.moved)
        lines.append(
            f"{name}: {number(most.moved)} of {number(most.compared)} paired "
            f"{most.unit} moved on {column}"
        )
        measured = [d for d in drifts if d.max_ulps is not None]
        if measured:
            far = max(measured, key=lambda d: d.max_ulps)
            lines.append(
                f"furthest move {over}: {column}, {plural(far.max_ulps, 'ulp')} and "
                f"{far.relative_phrase(3)}, {value(far.reference_value)} against "
                f"{value(far.later_value)}{_further_relative(far, drifts)}"
            )
        reordered = max(drifts, key=lambda d: d.lists_reordered)
        k, n = reordered.lists_reordered, reordered.lists_moved
        if k:
            which = (
                "the one list that moved"
                if n == 1
                else f"all {number(n)} lists that moved"
                if k == n
                else f"{number(k)} of the {number(n)} lists that moved"
            )
            lines.append(
                f"{name}: {which} on {column} {'holds' if k == 1 else 'hold'} the same values "
                f"in another order: what moved is the order, which no ulp count describes"
            )
        # The most in one comparison, as the count of rows that moved above it is.
        odd = max(d.incomparable for d in drifts)
        if odd:
            lines.append(
                f"{name}: {plural(odd, 'value')} of {column} moved to or from NaN or NULL, "
                f"which no ulp count describes"
            )
    if rest:
        lines.append(_more_columns_line(name, rest, over))
    line = _reassigned_line(name, [f for _, f in both if any(d.moved for d in f.drift)])
    if line:
        lines.append(line)
    return lines


def _reassigned_line(name: str, moved: list[ArtifactFindings]) -> str:
    """Where the rows that moved are the same rows, handed other values of some key
    columns: said once, from the comparisons that moved, since read as drift alone a
    number given to another row looks like a sum added in another order."""
    found = [f for f in moved if f.reassigned]
    if not found:
        return ""
    f = max(found, key=lambda f: sum(1 for g in found if g.reassigned == f.reassigned))
    columns = [shown(c) for c in f.reassigned]
    if f.reassigned_together and len(columns) > NAMED_TOGETHER:
        # Past a few names, the key as a whole: it is every key column that moved.
        columns = [f"all {len(columns)} key columns"]
        dropped = "once the whole key is dropped"
    elif f.reassigned_together:
        dropped = f"once {listed(columns)} are dropped from the key together"
    elif len(columns) == 1:
        dropped = f"once {columns[0]} is dropped from the key"
    else:
        dropped = f"once any one of {listed(columns, 'or')} is dropped from the key"
    many = len(moved) > 1
    where = (
        ("in every comparison that moved, " if many else "")
        if len(found) == len(moved)
        else f"in {len(found)} of the {len(moved)} comparisons that moved, "
    )
    handed = listed(columns, "or" if len(columns) > 1 and not f.reassigned_together else "and")
    return (
        f"{name}: {where}every row pairs with the same floats to the bit {dropped}: "
        f"the same rows with {handed} handed to other ones (as row_number() over tied rows "
        f"does), so no float moved by being added in another order"
    )


# Float columns described one by one, per artifact and per step's bounds; a wide artifact
# (hundreds of float columns, as feature tables have) printed two lines for every one.
COLUMNS_SHOWN = 5


def _more_columns_line(name: str, rest: list[tuple[str, list[Drift]]], over: str) -> str:
    """One line for the moved columns past the first COLUMNS_SHOWN: how many, which,
    and the furthest move among them."""
    names = [column for column, _ in rest]
    said = f"{name}: {plural(len(names), 'more column')} moved too ({some(names, 3)})"
    measured = [(c, d) for c, ds in rest for d in ds if d.max_ulps is not None]
    if not measured:
        return said
    column, far = max(measured, key=lambda cd: cd[1].max_ulps)
    return (
        f"{said}; the furthest move among them {over}: {column}, "
        f"{plural(far.max_ulps, 'ulp')} and {far.relative_phrase(3)}"
    )


def bound_lines(step: StepResult) -> list[str]:
    lines: list[str] = []
    # Past COLUMNS_SHOWN, the columns outside the bound come first, since they decide,
    # and the rest are counted on one line.
    ordered = (
        sorted(step.bounds, key=lambda b: b.clears_loose)
        if len(step.bounds) > COLUMNS_SHOWN
        else step.bounds
    )
    for b in ordered[:COLUMNS_SHOWN]:
        lines.append(
            f"{step.index} {step.name}, {b.artifact}.{b.column}: observed {b.observed:.3g}"
        )
        counts = [(b.n_loose, b.bound_loose, b.headroom_loose, b.clears_loose, "rows read")]
        if b.n_tight > 1 or b.n_loose <= 1:
            counts.append((b.n_tight, b.bound_tight, b.headroom_tight, b.clears_tight, TIGHT_LABEL))
        for n, bound, headroom, clears, label in counts:
            room = f"headroom {headroom:,.0f}x" if headroom is not None else "no drift to measure"
            lines.append(
                f"    n = {number(n)} {label}, bound {bound:.3g}, {room}, "
                f"{'inside' if clears else 'OUTSIDE'}"
            )
        if len(counts) == 1:
            # One row out per row in: a running total sums many terms into each value, and
            # an average of one says nothing of them, nor is a bound of one term a verdict.
            lines.append(
                f"    {TIGHT_LABEL}: none to average, since {b.artifact} has as many rows as "
                f"the step read or more (a window, or a value per row)"
            )
    rest = ordered[COLUMNS_SHOWN:]
    if rest:
        outside = sum(1 for b in rest if not b.clears_loose)
        measured = [b for b in rest if b.headroom_loose is not None]
        least = min(measured, key=lambda b: b.headroom_loose) if measured else None
        lines.append(
            f"{step.index} {step.name}: {plural(len(rest), 'more column')}, "
            + (
                f"{number(len(rest) - outside)} inside and {number(outside)} OUTSIDE"
                if outside
                else "every one inside"
            )
            + " at the rows-read n"
            + (
                f"; the least headroom {least.headroom_loose:,.0f}x, on "
                f"{least.artifact}.{least.column}"
                if least is not None
                else ""
            )
        )
    return lines


TIGHT_LABEL = "terms per output value"
