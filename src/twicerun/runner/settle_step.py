"""Comparing one step of a later run with the same step of its reference run.

Digests settle what they can; the oracle measures the rest. Used by the loop
and by every series (the bisect, the amplifiers), so all of them compare alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import duckdb

from twicerun.compare.oracle import (
    FLOAT_ROWS,
    ReferenceCache,
    attribute_table,
    compare_artifacts,
    float_rows_checked,
    handed_floats,
)
from twicerun.compare.pair import Side, settle
from twicerun.findings import ArtifactFindings
from twicerun.result import ArtifactOutcome, Comparison
from twicerun.runner.records import Records
from twicerun.storage.layout import LOOP, RunAddress
from twicerun.vocabulary.loop import SettledBy


def compare_step(
    records: Records,
    con: duckdb.DuckDBPyConnection,
    reference: RunAddress,
    later: RunAddress,
    index: int,
    keys: Mapping[str, Sequence[str]],
    cache: ReferenceCache | None = None,
    keep_prefix: str | None = None,
) -> Comparison:
    """Compare one step's artifacts in `later` with the reference run's.

    Attribution explains rather than measures, so it is not computed here. With a
    `keep_prefix`, each artifact's disagreeing groups are kept in a temporary
    table, and `attribute_worst` attributes the comparison that left the most.
    """
    # Canonical digests are left out until a pair's bytes differ; these do, so now
    # they are needed, for these artifacts only.
    differing = records.bytes_differ(reference, later, index)
    records.ensure_canonical(con, reference, index, differing)
    records.ensure_canonical(con, later, index, differing)
    ref_sides = records.sides(reference, index)
    later_sides = records.sides(later, index)
    inputs = records.input_columns(later, index)

    def oracle(ref: Side | None, lat: Side | None) -> ArtifactFindings:
        name = (ref or lat).name  # type: ignore[union-attr]
        # Two later runs that wrote the same rows get the same findings: measure once.
        slot = (
            name,
            ref.canonical_digest if ref else None,
            lat.canonical_digest if lat else None,
        )
        if cache is not None and slot in cache.memo:
            return cache.memo[slot]
        findings = compare_artifacts(
            con,
            name,
            ref.path if ref else None,
            lat.path if lat else None,
            key=keys.get(name),
            input_columns=inputs,
            cache=cache,
            attribute_above=None,
            keep_imbalance_as=f"{keep_prefix}{_table_safe(name)}" if keep_prefix else None,
        )
        if cache is not None:
            cache.memo[slot] = findings
        return findings

    outcomes = []
    for name in list(ref_sides) + [n for n in later_sides if n not in ref_sides]:
        outcomes.append(settle(ref_sides.get(name), later_sides.get(name), oracle))
    return Comparison(
        run=later.run,
        fired=any(o.differs for o in outcomes),
        artifacts=outcomes,
        answer=_answer(outcomes, later_sides),
    )


def _answer(outcomes: Sequence[ArtifactOutcome], later_sides: Mapping[str, Side]) -> str:
    """A name for the rows this later run wrote, equal for two runs that wrote the same rows."""
    tokens = sorted(
        f"{o.name}\0{later_sides[o.name].canonical_digest if o.name in later_sides else '(absent)'}"
        for o in outcomes
        if o.differs
    )
    if not tokens:
        return ""
    return hashlib.sha256("\n".join(tokens).encode("utf-8")).hexdigest()[:16]


KEEP_PREFIX = "__twicerun_keep_"


def _table_safe(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


class WorstComparisons:
    """Per step and artifact, the comparison that left the most rows unmatched.

    Each comparison keeps its disagreeing groups in a temporary table; only the
    worst one per artifact is kept, and at the end it is the one attributed.
    Attribution explains rather than measures, so it is computed once, there.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        prefix: str = KEEP_PREFIX,
        address_of: Callable[[int], RunAddress] = lambda run: RunAddress(LOOP, run),
    ):
        """`prefix` names the kept tables (one per series, so none meets another's);
        `address_of` gives the address of a run number, whose receipt says what it read."""
        self.con = con
        self.prefix = _table_safe(prefix)
        self.address_of = address_of
        self._worst: dict[tuple[int, str], tuple[int, int, str]] = {}

    def keep_prefix(self, run: int) -> str:
        """What compare_step names the tables of run `run` by."""
        return f"{self.prefix}{run}_"

    def consider(self, index: int, comparison: Comparison) -> None:
        for a in comparison.artifacts:
            if a.settled_by != SettledBy.ORACLE:
                continue  # bytes, digests or presence settled it: no table was kept
            table = f"{self.keep_prefix(comparison.run)}{_table_safe(a.name)}"
            count = a.unmatched
            previous = self._worst.get((index, a.name))
            if count and self._exists(table) and (previous is None or count > previous[0]):
                if previous is not None:
                    self._drop(previous[2])
                self._worst[(index, a.name)] = (count, comparison.run, table)
            elif previous is None or previous[2] != table:
                self._drop(table)

    def _drop(self, table: str) -> None:
        """A kept table, and the rows with floats compare_artifacts kept beside it."""
        self.con.execute(f"DROP TABLE IF EXISTS {table}; DROP TABLE IF EXISTS {table}{FLOAT_ROWS}")

    def _exists(self, table: str) -> bool:
        return bool(
            self.con.execute(
                "SELECT 1 FROM duckdb_tables() WHERE table_name = ?", [table]
            ).fetchall()
        )

    def attribute(
        self, records: Records, index: int, comparisons: list[Comparison]
    ) -> list[Comparison]:
        updated = list(comparisons)
        for (step, name), (count, run, table) in list(self._worst.items()):
            if step != index:
                continue
            i = next(i for i, c in enumerate(updated) if c.run == run)
            comparison = updated[i]
            inputs = records.input_columns(self.address_of(run), index)
            artifacts = []
            for a in comparison.artifacts:
                if a.name == name and a.findings:
                    rows = f"{table}{FLOAT_ROWS}"
                    kept_rows = rows if self._exists(rows) else None
                    attribution = attribute_table(
                        self.con, table, a.findings.key, inputs, count, kept_rows
                    )
                    found = replace(a.findings, attribution=attribution)
                    # Only where floats moved: the check reads the kept table's columns.
                    moved = any(d.moved for d in found.drift)
                    if kept_rows is not None and moved and not found.reassigned:
                        handed, together = handed_floats(
                            attribution,
                            found.key,
                            found.drift,
                            float_rows_checked(self.con, kept_rows),
                        )
                        found = replace(found, reassigned=handed, reassigned_together=together)
                    a = replace(a, findings=found)
                artifacts.append(a)
            updated[i] = replace(comparison, artifacts=artifacts)
            self._drop(table)
            del self._worst[(step, name)]
        return updated

    def drop(self) -> None:
        """Drop every kept table, for a series that ended before it could attribute them."""
        for _, _, table in self._worst.values():
            self._drop(table)
        self._worst.clear()
