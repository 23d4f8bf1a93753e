"""The eval's and the gap script's tables, as data written into their artifacts.

The package renders Result documents; what it says about itself (the eval of the
reference pipeline and its twins, the amplification gap) is described here, by
the scripts that measured it, and `twicerun report` renders those tables as they
are. `python scripts/eval.py --retable results/eval-DATE.json` rebuilds them from
an artifact's own figures, measuring nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from twicerun.render.markdown import cell, code
from twicerun.render.tables import Artifact, Table, carry, stamp


def number(n: int | float | None) -> str:
    if n is None:
        return "n/a"
    return f"{n:,}" if isinstance(n, int) else f"{n:,.2f}"


def distribution(fired: Sequence[int | None], compared: Sequence[int | None]) -> str:
    """A fire rate over trials, every bucket shown: an omitted one would read as impossible.

    Except where the denominators differ between trials: a series that stops once its
    answer is settled (the bisect) has them differ, and there a bucket it could not
    have stopped in would read as possible, so only the buckets that occurred are shown.
    """
    trials = len(fired)
    measured = [(k, m) for k, m in zip(fired, compared, strict=True) if k is not None and m]
    missing = trials - len(measured)
    if not measured:
        return f"not compared in any of {trials}"
    ms = sorted({m for _, m in measured})
    parts = []
    for m in ms:
        counts = {k: 0 for k in range(m, -1, -1)}
        for k, mm in measured:
            if mm == m:
                counts[k] += 1
        nonzero = [k for k, c in counts.items() if c]
        if len(nonzero) == 1 and counts[nonzero[0]] == len(measured) and not missing:
            return f"{nonzero[0]} of {m} in all {trials}"
        if len(ms) > 1:
            counts = {k: c for k, c in counts.items() if c}
        parts.extend(f"{k} of {m} ×{c}" for k, c in counts.items())
    if missing:
        parts.append(f"not compared ×{missing}")
    return ", ".join(parts)


def tally(values: Sequence[Any]) -> str:
    seen: dict[str, int] = {}
    for v in values:
        key = "none" if v in (None, []) else (" ".join(v) if isinstance(v, list) else str(v))
        seen[key] = seen.get(key, 0) + 1
    if len(seen) == 1:
        return f"{next(iter(seen))} in all {len(values)}"
    return ", ".join(f"{k} ×{n}" for k, n in seen.items())


def median_of(values: Sequence[float | int | None], fmt: Callable[[float], str]) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return "NOT MEASURED"
    return f"median {fmt(statistics.median(present))} (n={len(present)})"


# The eval ---------------------------------------------------------------------------


def _eval_what(d: dict[str, Any]) -> str:
    return f"{d['trials']} trials of {d['runs']} runs, {d['seconds']:,.0f}s in all."


def eval_steps(a: Artifact) -> Table:
    d = a.document
    rows = []
    for s in d["steps"]:
        ones = s["threads_one"]
        if all(v is None for v in ones):
            threads_one = "not bisected: it never fired"
        else:
            threads_one = distribution(ones, s["threads_one_compared"])
        if all(not c for c in s["classes"]):
            what = ["never differed"]
        else:
            what = [tally(s["classes"])]
        if any(c for c in s["causes"]):
            what.append(f"cause {tally(s['causes'])}")
        if any(v is not None for v in s["max_ulps"]):
            what.append(
                f"furthest move {median_of(s['max_ulps'], lambda v: f'{v:,.0f} ulp')}, "
                f"{median_of(s['max_relative'], lambda v: f'{v:.2g} relative')}"
            )
        if any(v is not None for v in s["unmatched_reference"]):
            rows_ = max(v for v in s["reference_rows"] if v is not None)
            what.append(
                f"{median_of(s['unmatched_reference'], lambda v: f'{v:,.0f}')} of {rows_:,} "
                f"reference rows found no partner"
            )
        elif any(v is not None for v in s["extra_rows"]):
            what.append(f"{median_of(s['extra_rows'], lambda v: f'{v:,.0f}')} extra rows")
        rows.append(
            [
                f"{s['index']} {code(s['name'])}",
                distribution(s["strict"], s["compared"]),
                threads_one,
                distribution(s["reduction_order"], s["compared"]),
                "; ".join(what),
                tally(s["statuses"]),
            ]
        )
    return Table(
        "eval-steps",
        stamp(a, _eval_what(d)),
        [
            "step",
            "fires under strict",
            "at threads=1",
            "under reduction-order",
            "classes, cause, how far",
            "status",
        ],
        rows,
    )


def eval_containment(a: Artifact) -> Table:
    d = a.document
    rows = [
        [
            f"{s['index']} {code(s['name'])}",
            distribution(s["strict"], s["compared"]),
            distribution(s["uncontained"], s["uncontained_compared"]),
        ]
        for s in d["steps"]
    ]
    return Table(
        "eval-containment", stamp(a, _eval_what(d)), ["step", "contained", "uncontained"], rows
    )


def eval_twins(a: Artifact) -> Table:
    d = a.document
    rows = []
    for t in d["twins"]:
        fired = sum(1 for k, amp in zip(t["fired"], t["amplified_fired"], strict=True) if k or amp)
        rows.append(
            [
                code(t["name"]),
                f"{fired} of {len(t['fired'])}",
                distribution(t["fired"], t["compared"]),
                tally(t["statuses"]),
            ]
        )
    return Table(
        "eval-twins",
        stamp(a, _eval_what(d)),
        ["twin", "trials it fired in, loop or amplifier", "loop fire rate", "status"],
        rows,
    )


def eval_twin_amplifiers(a: Artifact) -> Table:
    d = a.document
    rows = [
        [
            t["amplifier"],
            f"{t['ran']} of {t['step_passes']}",
            number(t["comparisons"]),
            number(t["fired"]),
            number(t["raised"]),
            number(t["declined"]),
        ]
        for t in d["twin_amplifiers"]
    ]
    return Table(
        "eval-twin-amplifiers",
        stamp(a, _eval_what(d)),
        ["amplifier", "twin step-passes it ran on", "comparisons", "fired", "raised", "declined"],
        rows,
        ["left", "right", "right", "right", "right", "right"],
    )


def eval_baselines(a: Artifact) -> Table:
    d = a.document
    b = d["baselines"]
    b1, b1m, b2, b4 = (
        b["bitexact_two_runs"],
        b["bitexact_run_matched"],
        b["static_patterns"],
        b["no_amplifiers"],
    )
    median_rows = median_of(b1["rows_unmatched"], lambda v: f"{v:,.0f}")
    compared = max(b1["rows_compared"], default=0)
    steps = {s["name"]: s for s in d["steps"]}
    down = steps.get("summarise_key_batches")
    rows = [
        [
            "1",
            "two runs, bit-exact multiset equality (the canonical digest), from each trial's runs 1 and 2",
            f"fired on {code(b1['step'])}, which is correct code, in {b1['fired_trials']} of {b1['trials']} trials; "
            f"rows failing to pair: {median_rows} of {compared:,} compared",
        ],
        [
            "1, run-matched",
            "the same equality over every comparison the oracle made",
            f"disagreed with the oracle's strict fire count on {b1m['disagreements']} of {b1m['step_trials']} "
            f"step-trials; fired on {b1m['twin_fired']} of {b1m['twin_step_trials']} twin step-trials",
        ],
        [
            "2",
            "four static patterns over each step's source",
            f"separated {len(b2['separated'])} of {len(b2['pairs'])} bug-and-fix pairs; flagged "
            f"{len(b2['false_flags'])} step with no bug ({', '.join(code(n) for n in b2['false_flags']) or 'none'})",
        ],
        [
            "3",
            "the same tool without containment",
            f"{code('summarise_key_batches')}, which only reads a buggy step, fired uncontained: "
            f"{distribution(down['uncontained'], down['uncontained_compared'])}; contained: "
            f"{distribution(down['strict'], down['compared'])}"
            if down
            else "NOT MEASURED",
        ],
        [
            "4",
            "the same measurements without the amplifiers, through the real exit-code function",
            f"exit 0 in {b4['exit_zero_without']} of {b4['trials']} trials without them, "
            f"{b4['exit_zero_with']} with them",
        ],
    ]
    return Table(
        "eval-baselines", stamp(a, _eval_what(d)), ["baseline", "how it compares", "result"], rows
    )


def _gap(name: str, a: Artifact, gap: dict[str, Any], what: str) -> Table:
    """The amplification-gap table, whether the eval or the gap script measured it."""
    passes = gap["passes"]
    rows = [
        [
            s["source"],
            f"{s['fired']:,} of {s['compared']:,}",
            f"{s['rate']:.2f}" if s["rate"] is not None else "NOT MEASURED",
            f"{s['found_nothing']} of {passes}",
            f"{s['could_not_ask']} of {passes}",
        ]
        for s in gap["sources"]
    ]
    what += (
        f"; the loop found nothing on {gap['loop_quiet_passes']} of them, and an amplifier "
        f"fired on {gap['loop_quiet_passes_an_amplifier_caught']} of those."
    )
    return Table(
        name,
        stamp(a, what),
        [
            "source",
            "comparisons that fired",
            "per comparison",
            "passes it found nothing on",
            "passes it could not ask",
        ],
        rows,
        ["left", "right", "right", "right", "right"],
    )


def eval_gap(a: Artifact) -> Table:
    g = a.document["gap"]
    return _gap("eval-gap", a, g, f"{g['passes']} passes over {code(g['step'])}")


def eval_bound(a: Artifact) -> Table:
    d = a.document
    rows = []
    for b in d["bound"]:
        loose = [r for r in b["headroom_loose"] if r is not None]
        tight = [r for r in b["headroom_tight"] if r is not None]
        rows.append(
            [
                f"{code(b['step'])} ({code(b['artifact'] + '.' + b['column'])})",
                median_of(b["observed"], lambda v: f"{v:.2g}"),
                f"{b['bound_loose']:.3g} at n = {b['n_loose']:,} rows read",
                f"{b['bound_tight']:.3g} at n = {b['n_tight']:,} terms per value",
                f"{median_of(loose, lambda v: f'{v:,.0f}x')}; cleared 1,000x in {sum(1 for r in loose if r >= 1000)} of {len(loose)}",
                f"{median_of(tight, lambda v: f'{v:,.0f}x')}; cleared 1,000x in {sum(1 for r in tight if r >= 1000)} of {len(tight)}",
            ]
        )
    return Table(
        "eval-bound",
        stamp(a, _eval_what(d)),
        [
            "float step",
            "observed furthest relative drift",
            "bound, loose",
            "bound, tight",
            "headroom, loose",
            "headroom, tight",
        ],
        rows,
    )


def eval_conditions(a: Artifact) -> Table:
    d = a.document
    rows = [
        [
            cell(c["condition"]),
            f"**{c['verdict']}**" if c["verdict"] == "TRIGGERED" else c["verdict"],
            cell(c["evidence"]),
        ]
        for c in d["conditions"]
    ]
    return Table(
        "eval-conditions",
        stamp(a, _eval_what(d)),
        ["pre-registered condition", "verdict", "what it came out as"],
        rows,
    )


def eval_cost(a: Artifact) -> Table:
    d = a.document
    per = d["trial_seconds"]
    rows = [
        [
            str(d["trials"]),
            f"{d['seconds']:,.0f}s",
            f"{statistics.median(per):,.0f}s",
            f"{min(per):,.0f}s to {max(per):,.0f}s",
        ]
    ]
    return Table(
        "eval-cost",
        stamp(a, ""),
        ["trials", "wall time", "median per trial", "range per trial"],
        rows,
        ["right", "right", "right", "right"],
    )


def gap_table(a: Artifact) -> Table:
    d = a.document
    what = f"{d['passes']} passes of {d['runs']} runs over {code(d['step'])}, {d['seconds']:,.0f}s"
    return _gap("gap", a, d, what)


def eval_sources(a: Artifact) -> Table:
    """The file-order case: the backfill's steps, the loop beside the file-order amplifier."""
    d = a.document
    rows = []
    for s in d["sources"]:
        runs = [o for o in s["file_order"] if o is not None]
        if runs and all(o["declined"] for o in runs):
            order = f"declined in all {len(runs)}: {runs[0]['declined']}"
        else:
            order = distribution(
                [o["fired"] if o else None for o in s["file_order"]],
                [o["compared"] if o else None for o in s["file_order"]],
            )
        rows.append(
            [code(s["name"]), distribution(s["fired"], s["compared"]), order, tally(s["statuses"])]
        )
    return Table(
        "eval-sources",
        stamp(a, _eval_what(d) + " `pipelines/tlc_backfill.py` on generated stand-ins."),
        ["step", "fires in the loop", "fires under file order", "status"],
        rows,
    )


EVAL_TABLES = (
    eval_steps,
    eval_containment,
    eval_baselines,
    eval_twins,
    eval_twin_amplifiers,
    eval_gap,
    eval_bound,
    eval_conditions,
    eval_cost,
)


def eval_tables(path: str, document: dict[str, Any]) -> list[dict[str, Any]]:
    a = Artifact(path, document)
    builders = EVAL_TABLES + ((eval_sources,) if "sources" in document else ())
    return carry([build(a) for build in builders])


def gap_tables(path: str, document: dict[str, Any]) -> list[dict[str, Any]]:
    return carry([gap_table(Artifact(path, document))])
