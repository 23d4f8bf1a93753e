"""Named tables rendered from committed artifacts: Results, the eval, the gap, the benches.

Every figure twicerun publishes about itself comes out of one of these
functions, applied to a JSON artifact a script wrote; `twicerun report` puts
them into README marker blocks and `--check` fails when a block no longer
matches. A table is a stamp (where the numbers came from: the artifact, the
command, the instrument) and a grid; the same grid renders as Markdown, as
aligned text, or as JSON.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twicerun.errors import UsageError
from twicerun.render.markdown import cell, code, plain
from twicerun.render.markdown import table as markdown_table


@dataclass(frozen=True)
class Table:
    name: str
    stamp: str
    headers: list[str]
    rows: list[list[str]]
    align: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        return f"{self.stamp}\n\n" + markdown_table(self.headers, self.rows, self.align or None)

    def text(self) -> str:
        def strip(cell: str) -> str:
            return cell.replace("\\", "").replace("`", "")

        grid = [self.headers, *self.rows]
        widths = [max(len(strip(r[i])) for r in grid) for i in range(len(self.headers))]
        lines = [f"{self.name}: {strip(self.stamp)}"]
        for row in grid:
            lines.append(
                "  "
                + "  ".join(strip(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            )
        return "\n".join(lines) + "\n"

    def json(self) -> dict[str, Any]:
        return {"name": self.name, "stamp": self.stamp, "headers": self.headers, "rows": self.rows}


@dataclass(frozen=True)
class Artifact:
    path: str
    document: dict[str, Any]

    @property
    def schema(self) -> str:
        return str(self.document.get("schema", ""))


# Formatting ------------------------------------------------------------------------


def number(n: int | float | None) -> str:
    if n is None:
        return "n/a"
    return f"{n:,}" if isinstance(n, int) else f"{n:,.2f}"


def distribution(fired: Sequence[int | None], compared: Sequence[int | None]) -> str:
    """A fire rate over trials, every bucket shown: an omitted one would read as impossible."""
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


def _stamp(artifact: Artifact, what: str) -> str:
    d = artifact.document
    env = d.get("environment", {})
    parts = [f"Rendered by `twicerun report` from `{artifact.path}`"]
    if d.get("written"):
        parts.append(f"written {d['written']}")
    if d.get("command"):
        parts.append(f"by `{d['command']}`")
    head = ", ".join(parts) + "."
    inst = ""
    if env:
        inst = f" DuckDB {env.get('duckdb')} at threads={env.get('threads')} on {code(env.get('platform'))}."
    return f"{head}{inst} {what}".strip()


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
        _stamp(a, _eval_what(d)),
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
        "eval-containment", _stamp(a, _eval_what(d)), ["step", "contained", "uncontained"], rows
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
        _stamp(a, _eval_what(d)),
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
        _stamp(a, _eval_what(d)),
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
        "eval-baselines", _stamp(a, _eval_what(d)), ["baseline", "how it compares", "result"], rows
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
        _stamp(a, what),
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
        _stamp(a, _eval_what(d)),
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
        _stamp(a, _eval_what(d)),
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
        _stamp(a, ""),
        ["trials", "wall time", "median per trial", "range per trial"],
        rows,
        ["right", "right", "right", "right"],
    )


# The gap script, the benches, a Result ------------------------------------------------


def gap_table(a: Artifact) -> Table:
    d = a.document
    what = f"{d['passes']} passes of {d['runs']} runs over {code(d['step'])}, {d['seconds']:,.0f}s"
    return _gap("gap", a, d, what)


def _ratio_range(runs: list[dict], wall: str, steps: str) -> str:
    """The median's ratio is one figure; the spread over invocations says how settled it is."""
    ratios = [r[wall] / r[steps] for r in runs if r.get(steps)]
    if len(ratios) < 2:
        return ""
    return f" ({min(ratios):.2f}x to {max(ratios):.2f}x)"


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
            f"{m['peak_disk_bytes'] / 2**20:,.0f} MiB ({m['peak_disk_bytes'] / m['one_run_bytes']:.1f} runs' worth)",
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
    what = f"Median of {len(d['runs'])} invocations of `{d.get('pipeline', 'pipelines/reference.py')}`, each in a fresh process."
    return Table(
        "bench-loop",
        _stamp(a, what),
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


def bench_oracle(a: Artifact) -> Table:
    d = a.document
    base = d["seconds"]["EXCEPT ALL both ways"]
    rows = [[name, f"{s:.3f}s", f"{s / base:.2f}x"] for name, s in d["seconds"].items()]
    rows.append(
        [
            "canonical digest, same rows reordered",
            f"{d['identical_digest_seconds']:.3f}s",
            f"{d['identical_digest_seconds'] / base:.2f}x",
        ]
    )
    what = f"Two {d['rows']:,}-row, six-column artifacts differing in a few rows; median of {d['repeat']}."
    return Table(
        "bench-oracle",
        _stamp(a, what),
        ["comparison", "median", "against EXCEPT ALL"],
        rows,
        ["left", "right", "right"],
    )


def result_steps(a: Artifact) -> Table:
    d = a.document
    rows = []
    for s in d["steps"]:
        rate = f"{s['fired']} of {s['compared']}" if s["status"] else "not compared"
        rows.append(
            [
                str(s["index"]),
                code(s["name"]),
                rate,
                s["status"] or "",
                " ".join(s["classes"]),
                s["cause"] or "",
            ]
        )
    env = d["environment"]
    stamp = (
        f"Rendered by `twicerun report` from `{a.path}`: `{plain(d['pipeline'])}`, {d['runs']} runs, "
        f"{'contained' if d['contained'] else 'uncontained'}, policy {d['policy']}; DuckDB {env['duckdb']} at "
        f"threads={env['threads']} on {plain(env['platform'])}, {d['seconds']:.1f}s."
    )
    return Table(
        f"steps-{Path(d['pipeline']).stem}",
        stamp,
        ["", "step", "fired", "status", "classes", "cause"],
        rows,
    )


BUILDERS: dict[str, list[tuple[str, Callable[[Artifact], Table]]]] = {
    "twicerun.eval/1": [
        ("eval-steps", eval_steps),
        ("eval-containment", eval_containment),
        ("eval-baselines", eval_baselines),
        ("eval-twins", eval_twins),
        ("eval-twin-amplifiers", eval_twin_amplifiers),
        ("eval-gap", eval_gap),
        ("eval-bound", eval_bound),
        ("eval-conditions", eval_conditions),
        ("eval-cost", eval_cost),
    ],
    "twicerun.gap/1": [("gap", gap_table)],
    "twicerun.bench-loop/1": [("bench-loop", bench_loop)],
    "twicerun.bench-oracle/1": [("bench-oracle", bench_oracle)],
    "twicerun.result/1": [("steps", result_steps)],
}


def carried(artifact: Artifact) -> list[Table]:
    """The tables an artifact carries as data (title, stamp, columns, rows), written by the
    script that measured it: rendered as they are, so the package names no fixture."""
    found = []
    for t in artifact.document.get("tables") or []:
        found.append(
            Table(
                name=str(t["name"]),
                stamp=str(t["stamp"]),
                headers=[str(h) for h in t["headers"]],
                rows=[[_pipes(str(c)) for c in row] for row in t["rows"]],
                align=[str(a) for a in t.get("align", [])],
            )
        )
    return found


def _pipes(cell: str) -> str:
    """Cells are Markdown as the script wrote them; only a bare `|` would end one early."""
    return re.sub(r"(?<!\\)\|", r"\\|", cell)


def renders(document: object) -> bool:
    """Whether `twicerun report` can render anything from this JSON document."""
    if not isinstance(document, dict):
        return False
    return document.get("schema") in BUILDERS or isinstance(document.get("tables"), list)


def render_tables(artifacts: Sequence[Artifact]) -> dict[str, Table]:
    """Every table the artifacts can render, by name; a later artifact of a kind wins."""
    tables: dict[str, Table] = {}
    for artifact in artifacts:
        try:
            for _, build in BUILDERS.get(artifact.schema, []):
                t = build(artifact)
                tables[t.name] = t
            for t in carried(artifact):
                tables[t.name] = t
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise UsageError(
                f"{artifact.path} says it is {artifact.schema or 'an artifact'} but has the "
                f"wrong shape ({type(exc).__name__}: {exc}); regenerate it with the script "
                f"that wrote it"
            ) from exc
    return tables
