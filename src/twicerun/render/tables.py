"""Named tables rendered from committed artifacts.

A Result document's tables are built here; every other artifact (the eval, the
gap, the benches, the gate's calibration) carries its tables as data written by
the script that measured it, and they render as they are. `twicerun report` puts
them into marker blocks and `--check` fails when a block no longer matches. A
table is a stamp (where the numbers came from: the artifact, the command, the
instrument) and a grid; the same grid renders as Markdown, as aligned text, or
as JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twicerun.display import ljust, widest
from twicerun.errors import UsageError
from twicerun.render.instrument import engine
from twicerun.render.markdown import ALIGNMENT_MARKS, bare, code
from twicerun.render.markdown import table as markdown_table
from twicerun.render.markers import NAME_GAP
from twicerun.render.sections import shown_classes


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
        widths = [widest(strip(r[i]) for r in grid) for i in range(len(self.headers))]
        lines = [f"{self.name}: {strip(self.stamp)}"]
        for row in grid:
            lines.append(
                "  "
                + "  ".join(ljust(strip(c), w) for c, w in zip(row, widths, strict=True)).rstrip()
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


def stamp(artifact: Artifact, what: str) -> str:
    """Where a table's numbers came from: the artifact, the command, the instrument."""
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
        inst = f" {engine(env, markdown=True)} on {code(env.get('platform'))}."
    return f"{head}{inst} {what}".strip()


def table_name(text: str) -> str:
    """`text` as a marker can name it: each run of characters a name cannot hold (a space,
    a comma) becomes one `-`, so `pipelines/daily orders.py` renders steps-daily-orders."""
    return NAME_GAP.sub("-", text)


def result_steps(a: Artifact) -> Table:
    d = a.document
    _check_types(d)
    rows = []
    for s in d["steps"]:
        rate = f"{s['fired']} of {s['compared']}" if s["status"] else "not compared"
        rows.append(
            [
                str(s["index"]),
                code(s["name"]),
                rate,
                bare(s["status"] or ""),
                bare(" ".join(shown_classes(s))),
                bare(s["cause"] or ""),
            ]
        )
    env = d["environment"]
    stamp = (
        f"Rendered by `twicerun report` from `{a.path}`: {code(d['pipeline'])}, {d['runs']} runs, "
        f"{'contained' if d['contained'] else 'uncontained'}, policy {bare(d['policy'])}; "
        f"{engine(env, markdown=True)} on {bare(env['platform'])}, {d['seconds']:.1f}s."
    )
    return Table(
        f"steps-{table_name(Path(d['pipeline']).stem)}",
        stamp,
        ["", "step", "fired", "status", "classes", "cause"],
        rows,
    )


def _check_types(d: dict[str, Any]) -> None:
    """The fields the table prints, each of the type twicerun writes. The words are read
    as data (a newer twicerun may have more of them, and they are escaped), but a count
    that is a string or a step that is a number is a hand edit, refused rather than
    printed as a figure."""

    def expect(value: Any, kinds: tuple[type, ...], where: str) -> None:
        wrong = isinstance(value, bool) and bool not in kinds
        if wrong or not isinstance(value, kinds):
            raise TypeError(f"{where} is {value!r}, not of the type twicerun writes there")

    expect(d.get("steps"), (list,), "steps")
    expect(d.get("environment"), (dict,), "environment")
    for key, kinds in (("pipeline", (str,)), ("runs", (int,)), ("contained", (bool,)),
                       ("policy", (str,)), ("seconds", (int, float))):  # fmt: skip
        expect(d.get(key), kinds, key)
    for key in ("platform", "duckdb"):
        expect(d["environment"].get(key), (str,), f"environment.{key}")
    for i, step in enumerate(d["steps"]):
        expect(step, (dict,), f"steps[{i}]")
        for key, kinds in (("index", (int,)), ("name", (str,)), ("fired", (int,)),
                           ("compared", (int,)), ("status", (str, type(None))),
                           ("cause", (str, type(None))), ("classes", (list,))):  # fmt: skip
            expect(step.get(key, [] if key == "classes" else None), kinds, f"steps[{i}].{key}")


# The documents the package itself writes; everything else carries its tables as data.
BUILDERS: dict[str, list[tuple[str, Callable[[Artifact], Table]]]] = {
    "twicerun.result/1": [("steps", result_steps)],
}


def carry(tables: Sequence[Table]) -> list[dict[str, Any]]:
    """Tables as an artifact carries them (the inverse of `carried`), for the script that
    measured the figures to write beside them."""
    return [{**t.json(), "align": t.align} for t in tables]


def carried(artifact: Artifact) -> list[Table]:
    """The tables an artifact carries as data (title, stamp, columns, rows), written by the
    script that measured it: rendered as they are, so the package names no fixture."""
    found = []
    for t in artifact.document.get("tables") or []:
        headers = [str(h) for h in t["headers"]]
        align = [str(a) for a in t.get("align") or []]
        # Checked here, where a bad shape is reported as the artifact's, rather than when
        # the table is drawn, which failed with an internal error.
        if align and (len(align) != len(headers) or not set(align) <= ALIGNMENT_MARKS.keys()):
            raise ValueError(
                f"table {t['name']}'s align is {align}, where each of its {len(headers)} "
                f"columns takes one of {', '.join(sorted(ALIGNMENT_MARKS))}"
            )
        found.append(
            Table(
                name=str(t["name"]),
                stamp=str(t["stamp"]),
                headers=headers,
                rows=[[_pipes(str(c)) for c in row] for row in t["rows"]],
                align=align,
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
