"""What the oracle found about one artifact in one comparison: measurements, no verdicts.

A leaf like `errors` and `vocabulary`: the compare room produces these types and
the Result stores them as they are, typed, so a renderer reads fields rather
than keys of a dict.

Findings say how two copies of an artifact differ and by how much. Whether
that difference matters is the judge's business; nothing here changes when
the policy does, which is why a saved run can be re-judged without being
re-measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from twicerun.sql import shown
from twicerun.vocabulary.loop import UNMATCHED_FIELDS, Difference, Presence, SettledBy


def json_float(value: float | None) -> float | str | None:
    """A float JSON can hold: non-finite values become the strings Python's float() reads."""
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def finite(value: float | str | None) -> float | None:
    """A figure as `json_float` stored it, as a number; None where it is absent, NaN or
    infinite, which no bound or comparison of sizes can use."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


@dataclass(frozen=True)
class SchemaChange:
    """Columns added, dropped or retyped between run 1 and a later run, and reordering."""

    added: list[list[str]] = field(default_factory=list)
    dropped: list[list[str]] = field(default_factory=list)
    retyped: list[list[str]] = field(default_factory=list)
    reordered: bool = False

    @property
    def any(self) -> bool:
        return bool(self.added or self.dropped or self.retyped or self.reordered)

    def said(self) -> str:
        """What changed, as the run report and the verdict verbs both word it."""
        parts = [f"added {shown(n)} {t}" for n, t in self.added]
        parts += [f"dropped {shown(n)} {t}" for n, t in self.dropped]
        parts += [f"retyped {shown(n)} from {a} to {b}" for n, a, b in self.retyped]
        if self.reordered:
            parts.append("columns reordered")
        return "; ".join(parts)


@dataclass(frozen=True)
class Drift:
    """How one float column (or one path to a float inside a nested column) moved.

    `unit` is "rows" for a float column and "values" for a path through a list,
    where every element is counted. `max_ulps` and `max_relative` are maxima over
    the values that moved; the two values shown are the pair furthest apart in
    ulp. `incomparable` counts moves with no ulp distance: a NaN or a NULL on
    one side only.
    """

    column: str
    type: str
    unit: str
    moved: int
    compared: int
    max_ulps: int | None = None
    max_relative: float | str | None = None
    reference_value: float | str | None = None
    later_value: float | str | None = None
    incomparable: int = 0
    # The relative difference of the pair shown (reference_value, later_value);
    # max_relative may belong to another pair.
    shown_relative: float | str | None = None
    # For a path through a list: how many paired lists moved at all, and how many of
    # those hold the same values (bit for bit) in another order, where what moved is
    # the order and no ulp count says anything about the floats.
    lists_moved: int = 0
    lists_reordered: int = 0
    # The pair shown reads as when each run was made: epoch seconds of the recent past,
    # the later run's after run 1's (compare/clock.py).
    clock: bool = False

    def pair_relative(self) -> float | str | None:
        """The relative difference of the pair shown ("inf" where one side is an infinity
        the other is not), None when it has none.

        A Result written before `shown_relative` was recorded falls back to the column's
        largest, but not where its pair holds an infinity or a NaN: that Result has no
        figure for such a pair, and the fallback printed another pair's (a "0 relative"
        beside +inf against -inf)."""
        if self.shown_relative is not None:
            return self.shown_relative
        infinite = any(
            isinstance(v, str) or (isinstance(v, float) and not math.isfinite(v))
            for v in (self.reference_value, self.later_value)
        )
        return None if infinite else self.max_relative

    def relative_phrase(self, digits: int) -> str:
        """The pair shown's relative figure as the report and the verdict verbs say it."""
        v = self.pair_relative()
        if v is None:
            return "no relative figure"
        if v == "inf":
            return "infinitely far in relative terms"
        if isinstance(v, str):
            return f"{v} relative"
        return f"{v:.{digits}g} relative"


# How many key columns dropped together a sentence names; past it, the columns that agreed.
NAMED_TOGETHER = 4


@dataclass(frozen=True)
class Attribution:
    """Leave-one-out over the key: which column, dropped, lets the rows pair.

    `before` counts rows on both sides that found no partner; `after` maps each
    key column to the same count with that column dropped from the key.
    `chosen_by` is "counts" when one column left the fewest rows unmatched,
    "invented" when several tied and exactly one of them is a column no input
    of the step carries, "undecided" when the counts and that preference could
    not choose, "together" when no single column helps but the rows pair once the
    columns in `tied` are dropped together (every other key column agrees), and
    "none" when no single column helps and that does not either.

    `reordered` names the list columns among those blamed (`column`, or `tied` when
    together) whose unmatched rows pair once each list's elements are sorted: the same
    values in another order, as `list()` without ORDER BY gives.

    `floats_differ` names the float columns whose values differ on the rows that pair once
    the blamed columns are dropped, when they pair every row: other rows, not the same row
    with one value changed (a version picked among tied ones differs in every column it
    does not share with the others).

    `clock` says whether the blamed column's unmatched values read as when each run was
    made (compare/clock.py): instants of the recent past, the later run's after run 1's.
    None where nobody asked: no column was blamed, or a Result from before 0.7.17.
    """

    column: str | None
    before: int
    after: dict[str, int]
    tied: list[str]
    chosen_by: str
    invented: list[str] = field(default_factory=list)
    reordered: list[str] = field(default_factory=list)
    floats_differ: list[str] = field(default_factory=list)
    clock: bool | None = None


@dataclass(frozen=True)
class ArtifactFindings:
    """Everything measured about one artifact in one comparison with run 1."""

    artifact: str
    presence: Presence
    classes: list[Difference]
    reference_rows: int
    later_rows: int
    key: list[str]
    missing: int = 0
    extra: int = 0
    multiplicity_missing: int = 0
    multiplicity_extra: int = 0
    paired: int = 0
    drift: list[Drift] = field(default_factory=list)
    schema: SchemaChange | None = None
    attribution: Attribution | None = None
    not_compared: list[str] = field(default_factory=list)
    timestamps: list[str] = field(default_factory=list)
    # Exact columns of type UUID, which uuid() and gen_random_uuid() draw anew on every call.
    uuids: list[str] = field(default_factory=list)
    # Where every row paired on the key and floats moved: the key columns whose removal
    # (each on its own, or all of them together when `reassigned_together`) lets every row
    # find one on the other side with the same floats to the bit. The rows are the same,
    # handed other values of those columns (a row_number() over tied rows): no float moved
    # by being added in another order.
    reassigned: list[str] = field(default_factory=list)
    reassigned_together: bool = False

    @property
    def unmatched(self) -> int:
        return sum(getattr(self, name) for name in UNMATCHED_FIELDS)

    @property
    def keyless(self) -> bool:
        return not self.key


@dataclass(frozen=True)
class ArtifactOutcome:
    """One artifact in one comparison of a later run against its reference: whether it
    came back different, what settled that, and what the oracle measured if it ran."""

    name: str
    presence: Presence
    settled_by: SettledBy
    differs: bool
    reference_rows: int | None = None
    later_rows: int | None = None
    findings: ArtifactFindings | None = None

    @property
    def unmatched(self) -> int:
        """Rows of either side that found no partner; 0 where nothing was measured."""
        return self.findings.unmatched if self.findings else 0


@dataclass(frozen=True)
class BoundFigures:
    """The reassociation bound at both term counts beside the float drift actually
    observed (judge/bound.py computes it); headroom is bound over observed."""

    artifact: str
    column: str
    type: str
    observed: float
    n_loose: int
    bound_loose: float
    headroom_loose: float | None
    clears_loose: bool
    n_tight: int
    bound_tight: float
    headroom_tight: float | None
    clears_tight: bool
