"""Row multiplication: more rows of the same shape.

The input is written `factor` times over, one copy after another. Every key
base.kept_intact finds stays a key where it can (a column unique on its own, or
where there is none the most distinct, moved; a key of two to five columns by
moving one of its members, `_moves`), each moved column in the form a step reads
it (`_shift`), so an id stays an id; every other column keeps its values, so each
tie group grows too.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import duckdb

from twicerun import sql
from twicerun.compare.columns import INTEGER_IDS
from twicerun.display import listed
from twicerun.runner.amplify.base import (
    COPY,
    POSITION,
    Applied,
    ColumnFacts,
    Declined,
    Facts,
    Outcome,
    column_facts,
    copy_ordered,
    kept_intact,
    numbered,
)
from twicerun.runner.amplify.tie_collapse import Collapse, ordered_pairs

FACTOR = 2
# Shifted dates and timestamps stay within four-digit years, which every reader writes alike.
_FIRST_DAY, _LAST_DAY = datetime.date(1000, 1, 1), datetime.date(9999, 12, 31)
_YEAR_10000_US = 253_402_300_800_000_000  # epoch_us of 10000-01-01
_YEAR_1000_US = -30_610_224_000_000_000  # epoch_us of 1000-01-01
# What joins a text key to its copy's number: the first that no value of the column holds.
_MARKS = ("#", "~", "|", "\u241f")
# The timestamps an artifact can hold: Parquet brings milliseconds and seconds back as
# microseconds (TIMESTAMP), and keeps nanoseconds as they are.
_TIMESTAMPS = ("timestamp", "timestamp with time zone", "timestamp_ns", "timestamptz_ns")
_FLOATS = ("float", "double")
# Shifted through HUGEINT and BIGINT below, which a UHUGEINT past 2**127 would overflow.
_SHIFTABLE = INTEGER_IDS - {"uhugeint"}


def multiply_rows(
    con: duckdb.DuckDBPyConnection,
    source: Path,
    target: Path,
    *,
    artifact: str,
    factor: int = FACTOR,
    facts: Facts | None = None,
    collapse: Collapse | None = None,
) -> Outcome:
    """With `collapse`, the copies after the first are the source's rows with their ties
    collapsed, in one pass: the joint probe's input, without writing the collapsed copy
    first. The first copy is the source's rows as they are."""
    facts = facts or column_facts(con, source)
    if collapse is not None:
        facts = collapse.facts(facts)
    rows, columns = facts
    if rows == 0:
        return Declined(f"{artifact} has no rows to multiply")
    # Every key of the input stays a key (base.kept_intact): a step may rely on any of them.
    # One that cannot be moved within its type is said, not left to look like a key.
    keys = kept_intact(rows, columns)
    shifts, stuck = _moves(con, source, keys, factor)
    calendar = _calendar_filled(con, source, [k for k, _ in shifts]) + _day_filled(
        con, source, [k for k in stuck if k.distinct == rows]
    )
    if calendar:
        return Declined(
            f"{artifact} is keyed by {listed(calendar)}, which no added copy could repeat "
            f"and none could move past without leaving the calendar, so it is left as written",
            said=True,
        )
    alongside = _moved_along(con, source, shifts, [c for c in columns if c not in keys], factor)
    shifts += alongside

    def replaced(copy: str) -> str:
        # The kept columns' values in copy number `copy` (a literal, or a column).
        if not shifts:
            return ""
        return f" REPLACE ({', '.join(f'{s.format(copy=copy)} AS {k.sql}' for k, s in shifts)})"

    if collapse is None:
        # UNION ALL of single-table scans keeps each copy in file order, one copy after
        # another (DuckDB's order preservation), so no sort is needed.
        query = " UNION ALL ".join(
            f"SELECT *{replaced(str(copy))} FROM {sql.parquet(source)}" for copy in range(factor)
        )
        copy_ordered(con, query, target)
    else:
        # The first copy is the rows as they were and only the added ones are collapsed:
        # folding a column takes away the differences between its rows, which another
        # stress (rows in another order) may need. A step that keeps the first of each
        # key's rows on one thread moves only when they arrive in another order, and a
        # column folded to a few values could hide that in every one of them.
        with numbered(con, source) as rows_of:
            query = (
                f"WITH src AS (SELECT * FROM {rows_of}), {', '.join(collapse.ctes())}, "
                f"collapsed AS ({collapse.select()}) "
                f"SELECT * EXCLUDE ({COPY}, {POSITION}){replaced(COPY)} FROM ("
                f"SELECT src.*, 0 AS {COPY} FROM src UNION ALL "
                f"SELECT collapsed.*, c.{COPY} FROM collapsed, range(1, {factor}) c({COPY})"
                f") ORDER BY {COPY}, {POSITION}"
            )
            copy_ordered(con, query, target)
    grown = f"{artifact} {rows:,} {'row' if rows == 1 else 'rows'} to {rows * factor:,}"
    copies = "copy" if factor == 2 else "copies"
    # Said, since a step that checks its input's range (no day past the year) raises
    # on what this wrote, and its error then names a value the input never held.
    along = [c.name for c, _ in alongside]
    moved = [
        sql.shown(k.name) for k, _ in shifts if k.type.id not in _FLOATS and k.name not in along
    ]
    if moved:
        grown += (
            f", {listed(moved)} moved past {'its range' if len(moved) == 1 else 'their ranges'} in the "
            f"added {copies}"
        )
    if along:
        grown += (
            f", {listed([sql.shown(n) for n in along])} moved by as much as the key "
            f"{'it keeps' if len(along) == 1 else 'they keep'} an order with"
        )
    raised = [sql.shown(k.name) for k, _ in shifts if k.type.id in _FLOATS]
    if raised:
        grown += f", {listed(raised)} raised to the next float up in the added {copies}"
    repeats = f"{'copy repeats' if factor == 2 else 'copies repeat'}"
    # A float that could not move has values alike or a float apart (_next_float): saying
    # it spans too much of its type, or is of a type that does not move, was wrong of it.
    floats = [c for c in stuck if c.type.id in _FLOATS]
    others = [c for c in stuck if c not in floats]
    if others:
        one = len(others) == 1
        grown += (
            f", {listed([sql.shown(c.name) for c in others])} not moved ({'it spans' if one else 'they span'} too much of "
            f"{'its type' if one else 'their types'} to move past, or {'is' if one else 'are'} "
            f"of a type, or text in a form, that does not move), so the added "
            f"{repeats} {'it' if one else 'them'}"
        )
    if floats:
        one = len(floats) == 1
        grown += (
            f", {listed([sql.shown(c.name) for c in floats])} not moved (some of "
            f"{'its' if one else 'their'} values repeat or lie a float apart, so no next "
            f"float up keeps the copies apart), so the added {repeats} {'it' if one else 'them'}"
        )
    return Applied(grown)


def _moved_along(
    con: duckdb.DuckDBPyConnection,
    source: Path,
    shifts: list[tuple[ColumnFacts, str]],
    others: list[ColumnFacts],
    factor: int,
) -> list[tuple[ColumnFacts, str]]:
    """Columns of a moved key's own type that keep an order with it on every row (a
    call's end after its unique start, a range's high after its unique low), each moved by
    as much as the key in each copy. Moved alone, a copy's start passed its end, and a
    correct step refusing a call that ends before it starts raised (unseen90, and with
    integer bounds unseen93). The key is a date or a timestamp, or a number moved by one
    amount on every row (not one moved as a date of eight digits, whose move differs from
    row to row and would carry its partner to a day no parse accepts). A column whose last
    copy would pass the year 9999 (an end kept as 9999-12-31 for "open") or its type stays
    as it is."""
    scan = f"FROM {sql.parquet(source)}"
    dated = {"date", *_TIMESTAMPS}
    movable = [(k, t) for k, t in shifts if k.type.id in {*dated, *_SHIFTABLE, "decimal"}]
    if not movable or not others:
        return []
    evenly: dict[str, bool] = {}  # asked only of a numeric key some column keeps an order with
    by_name = {k.name: (k, t) for k, t in movable}
    candidates = [c for c in others if any(c.type.id == k.type.id for k, _ in movable)]
    pairs = ordered_pairs(
        con,
        source,
        [*(k for k, _ in movable), *candidates],
        lambda a, b: (a.name in by_name) != (b.name in by_name) and a.type.id == b.type.id,
    )
    along: dict[str, tuple[ColumnFacts, str]] = {}
    for a, b in pairs:
        key, column = (a, b) if a in by_name else (b, a)
        if column in along:
            continue
        k, template = by_name[key]
        if k.type.id not in dated:
            if key not in evenly:
                evenly[key] = _moved_evenly(con, k, template, scan, factor)
            if not evenly[key]:
                continue
        c = next(c for c in candidates if c.name == column)
        # Braces doubled, as in every template (a name may hold them).
        name, key_name = (x.sql.replace("{", "{{").replace("}", "}}") for x in (c, k))
        moved = f"CAST({name} + ({template} - {key_name}) AS {c.type})"
        last = moved.format(copy=factor - 1)
        # A number past its type raises here, in the cast, and stays as it is. A day or an
        # instant must stay within four-digit years moved either way: an end kept as
        # 9999-12-31 for "open" stays open, as it did when every key moved forward.
        opposite = f"{name} - ({template.format(copy=factor - 1)} - {key_name})"
        check = (
            f"year(min({last})), year(max({last})), year(max({opposite}))"
            if k.type.id in dated
            else f"max({last}), max({last}), max({last})"
        )
        try:
            lowest, highest, back = con.execute(f"SELECT {check} {scan}").fetchone()
        except duckdb.Error:
            continue
        if highest is not None and (
            k.type.id not in dated or (lowest >= 1000 and max(highest, back) <= 9999)
        ):
            along[column] = (c, moved)
    return list(along.values())


def _moved_evenly(
    con: duckdb.DuckDBPyConnection, key: ColumnFacts, template: str, scan: str, factor: int
) -> bool:
    """Whether the template moves every row of a numeric key by one amount in each copy."""
    last = template.format(copy=factor - 1)
    try:
        (amounts,) = con.execute(
            f"SELECT count(DISTINCT ({last}) - {key.sql}) {scan} WHERE {key.sql} IS NOT NULL"
        ).fetchone()
    except duckdb.Error:
        return False
    return amounts == 1


def _moves(
    con: duckdb.DuckDBPyConnection, source: Path, kept: list[ColumnFacts], factor: int
) -> tuple[list[tuple[ColumnFacts, str]], list[ColumnFacts]]:
    """The kept columns to move, each with its template, and those that had to move and
    could not. A column unique on its own moves, and so does one kept for another reason
    than a key (a repeat told apart, a time ordered within a key); a key of several columns
    needs only one member moved to stay distinct (`_move_first` says which is tried first).
    Moving every member wrote (2027, 13, 32) for a key of year, month and day, and a
    correct `make_date` on it raised."""
    shifts: dict[str, tuple[ColumnFacts, str]] = {}
    stuck: list[ColumnFacts] = []
    tried: dict[str, str | None] = {}

    def shift(keep: ColumnFacts) -> str | None:
        if keep.name not in tried:
            tried[keep.name] = _shift(con, source, keep, factor)
        return tried[keep.name]

    by_name = {c.name: c for c in kept}
    for keep in kept:
        if keep.keys:
            continue  # below, once per key
        moved = shift(keep)
        if moved is None:
            stuck.append(keep)
        else:
            shifts[keep.name] = (keep, moved)
    keys = list(dict.fromkeys(key for c in kept for key in c.keys))
    for key in keys:
        members = [by_name[n] for n in key if n in by_name]
        if any(m.name in shifts for m in members):
            continue
        parts = _calendar_parts(con, source, members)
        order = {m.name: (_move_first(m), m.name in parts, m.distinct) for m in members}
        for member in sorted(members, key=lambda m: order[m.name]):
            moved = shift(member)
            if moved is not None:
                shifts[member.name] = (member, moved)
                break
        else:
            stuck += [m for m in members if m not in stuck]
    # In the input's column order, as the detail lists them.
    order = {c.name: i for i, c in enumerate(kept)}
    return sorted(shifts.values(), key=lambda pair: order[pair[0].name]), stuck


# Types whose moved values are always values of the same kind (a day, an instant, a UUID, a
# hash key), whatever a step builds from them: the member of a key moved first.
_MOVE_CLEANLY = frozenset({"date", "uuid", "blob", *_TIMESTAMPS})


def _move_first(member: ColumnFacts) -> bool:
    """Whether a member of a key is tried after a date, a timestamp, a UUID or a BLOB, which
    are tried first; then (`_moves`) a member that is no part of a date or time, then the
    one with the fewest values (a year before a day of the month). An hour of the day
    beside a date, moved past its range, made 24:00 of every hour a correct `make_time`
    raised on; the date moved instead stays a date."""
    return member.type.id not in _MOVE_CLEANLY


# The most a part of a date or a time of day can be: a minute or a second.
_LARGEST_PART = 60


def _calendar_parts(
    con: duckdb.DuckDBPyConnection, source: Path, members: list[ColumnFacts]
) -> set[str]:
    """The members that are whole numbers within 0 to 60, as a month, a day of the month,
    an hour or a minute are: moved past that range, they are no such part. A key of region
    and month moved the month, the member with fewer values, to 13, and a correct
    `make_date(2026, month, 1)` raised; the region moved instead is another region."""
    small = [m for m in members if m.type.id in _SHIFTABLE and 0 < m.distinct <= _LARGEST_PART + 1]
    if not small:
        return set()
    return {
        m.name
        for m, (low, high) in zip(small, _ranges(con, source, small), strict=True)
        if low is not None and low >= 0 and high <= _LARGEST_PART
    }


def _day_filled(
    con: duckdb.DuckDBPyConnection, source: Path, unmoved: list[ColumnFacts]
) -> list[str]:
    """The unique text columns that could not move and read as times of day, every value:
    the slots of a day that fill it, `00:00` to `23:59`, with no room left in their form.
    Repeated by the added copy, they tied each slot with its copy, and a correct
    `row_number() OVER (ORDER BY slot)` came out STABLE_ON_THIS_INPUT, exit 4 (unseen98).
    Such an input is left as written, as one keyed by a month is."""
    text = [c for c in unmoved if c.type.id == "varchar"]
    if not text:
        return []
    off = con.execute(
        "SELECT "
        + ", ".join(
            # A time alone: DuckDB casts a whole timestamp to TIME too.
            f"count(*) FILTER (WHERE NOT coalesce(regexp_full_match({c.sql}, "
            f"'[0-9]{{1,2}}:[0-9]{{2}}(:[0-9]{{2}}([.][0-9]+)?)?') "
            f"AND TRY_CAST({c.sql} AS TIME) IS NOT NULL "
            f"OR try_strptime({c.sql}, '%I:%M %p') IS NOT NULL, false))"
            for c in text
        )
        + f" FROM {sql.parquet(source)}"
    ).fetchone()
    return [
        f"{sql.shown(c.name)} (times of day, {c.distinct:,} of them, with no room left in "
        f"the day for a copy)"
        for c, n in zip(text, off, strict=True)
        if not n
    ]


def _ranges(con: duckdb.DuckDBPyConnection, source: Path, columns: list[ColumnFacts]) -> list:
    """Each integer column's least and greatest value, in one scan."""
    ends = con.execute(
        "SELECT "
        + ", ".join(f"min({c.sql})::HUGEINT, max({c.sql})::HUGEINT" for c in columns)
        + f" FROM {sql.parquet(source)}"
    ).fetchone()
    return list(zip(ends[::2], ends[1::2], strict=True))


# Whole numbers that fill one of these ranges, every value once, are a part of a date or a
# time of day: a month's number in a table of months, an hour in a table of hours.
_CALENDAR = {
    (1, 12): "the months of a year",
    (0, 23): "the hours of a day",
    (0, 59): "the minutes of an hour",
    (1, 31): "the days of a month",
    (0, 6): "the days of a week",
    (1, 7): "the days of a week",
    (1, 4): "the quarters of a year",
    (1, 52): "the weeks of a year",
    (1, 53): "the weeks of a year",
    (1, 365): "the days of a year",
    (1, 366): "the days of a year",
}


def _calendar_filled(
    con: duckdb.DuckDBPyConnection, source: Path, moved: list[ColumnFacts]
) -> list[str]:
    """The moved columns that hold every value of a part of a date or a time, each once,
    each named with what it counts. A month's number moved past 12 in a table of months was
    13 to 24, and a correct `make_date(2026, month_num, 1)` raised, AMPLIFICATION_FAILED,
    exit 5 (unseen77); repeated, it would make a correct `lag() OVER (ORDER BY month_num)`
    fire. Such an input is left as written: it is a table of a few dozen rows at most."""
    small = [
        c
        for c in moved
        if c.type.id in _SHIFTABLE and any(c.distinct == high - low + 1 for low, high in _CALENDAR)
    ]
    if not small:
        return []
    return [
        f"{sql.shown(c.name)} ({_CALENDAR[(low, high)]}, {low} to {high})"
        for c, (low, high) in zip(small, _ranges(con, source, small), strict=True)
        if (low, high) in _CALENDAR and c.distinct == high - low + 1
    ]


def _shift(con: duckdb.DuckDBPyConnection, source: Path, keep, factor: int) -> str | None:
    """An expression template (`{copy}` is the copy's number) that keeps `keep` distinct
    across copies, or None when the column cannot be shifted.

    Each copy moves past the column's range, and a value keeps the form a step may parse
    it in: an integer stays an integer (a DECIMAL a DECIMAL), a date a date, and a string
    that reads as an integer or an ISO date moves as one (a suffix would make a step that
    casts it raise, which reads as the amplifier failing on correct code); a date written
    as eight digits (20240131, as an integer or as text) moves by whole days and stays
    one; a UUID, or a string that reads back as one, becomes another UUID; text ending in
    a number (`ORD-000123`, or digits with zeros in front, `00042`) keeps the text before
    it and moves the number, at its width where it fits; a time of day goes round the
    clock (`_time_moved`). Other strings get a suffix. A
    float does not move past its range but to the next float up (_next_float).
    Tie collapse never folds a column kept intact (a folded one has fewer values than
    the column it kept), so the range is the source's."""
    column = keep.sql.replace("{", "{{").replace("}", "}}")  # a name may hold braces
    last = factor - 1
    scan = f"FROM {sql.parquet(source)}"
    kind = keep.type.id
    if kind in _SHIFTABLE:
        low, high = con.execute(
            f"SELECT min({keep.sql})::HUGEINT, max({keep.sql})::HUGEINT {scan}"
        ).fetchone()
        # 20240131 is a date to a warehouse (a date key) and to the step that parses it:
        # one past it is the 1st of February, not 20240132, which no parse accepts. Each
        # value is parsed only where the range allows eight-digit dates at all (the range
        # comes from the file's statistics; parsing two million ids took most of a second).
        as_text = f"CAST({keep.sql} AS VARCHAR)"
        if (
            low is not None
            and low >= 10000101
            and high <= 99991231
            and _all_ymd(con, as_text, scan)
        ):
            shifted = _ymd_shift(con, as_text, column, scan, last)
            if shifted is not None:
                return f"CAST({shifted} AS {keep.type})"
        # 202403 is a month to a warehouse (a period key), and moved as an integer past
        # its range it was 202413, which no parse accepts.
        for lowest, highest, forms in ((100001, 999912, _YM), (1000010100, 9999123123, _YMDH)):
            # Ids and epoch seconds have such ranges too: their least and greatest values
            # are read first, and the column is scanned only where both are such periods.
            if (
                low is not None
                and low >= lowest
                and high <= highest
                and _both_read(con, low, high, forms[0][0])
            ):
                shifted = _period_moved(
                    con, as_text, f"CAST({column} AS VARCHAR)", scan, last, forms
                )
                if shifted is not None:
                    return f"CAST({shifted} AS {keep.type})"
        # Widen to BIGINT; a key near its top (ids counted down from the largest BIGINT)
        # moves below its range instead, and one that spans too much of BIGINT for
        # either (a hash) cannot move at all.
        if low is None:
            return None
        span = _whole_cycles(low, high, last) or _magnitude(low, high, last) or high - low + 1
        if high + span * last < 2**63:
            return f"({column}::BIGINT + {{copy}} * {span})"
        if low - span * last >= -(2**63):
            return f"({column}::BIGINT - {{copy}} * {span})"
        return _flipped(con, keep, column, scan, factor)
    if kind == "decimal":
        # An id kept as DECIMAL(18,0), the way databases with one numeric type export
        # them, was not moved, so its copies repeated it. It moves by whole units past its
        # range, in its own type, where the last copy still fits its precision.
        precision, scale = (value for _, value in keep.type.children)
        low, high = con.execute(f"SELECT min({keep.sql}), max({keep.sql}) {scan}").fetchone()
        if low is None:
            return None
        span = int(high - low) + 1
        if max(abs(low), abs(high + span * last)) >= 10 ** (precision - scale):
            return None
        return f"CAST({column} + {{copy}} * {span} AS {keep.type})"
    if kind in _FLOATS:
        return _next_float(con, keep, column, scan, factor)
    if kind == "time":
        moved = _time_moved(con, keep.sql, column, scan, factor, finer=True)
        return None if moved is None else f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {moved} END"
    if kind == "date":
        span = _date_span(con, keep.sql, scan, last)
        return None if span is None else f"({column} + CAST({{copy}} * {span} AS INTEGER))"
    if kind in _TIMESTAMPS:
        # epoch_us takes no TIMESTAMPTZ_NS; as a TIMESTAMPTZ it is the same instant.
        instant = "CAST({} AS TIMESTAMPTZ)" if kind == "timestamptz_ns" else "{}"
        low, high = con.execute(
            f"SELECT epoch_us({instant.format(f'min({keep.sql})')}), "
            f"epoch_us({instant.format(f'max({keep.sql})')}) {scan}"
        ).fetchone()
        if low is None:
            return None
        if kind == "timestamp_ns":
            # Nanoseconds in a BIGINT end in 2262. DuckDB 1.x turns TIMESTAMP_NS plus an
            # interval into microseconds, so every copy, the first too, lost its
            # nanoseconds and the key its distinct values there: moved in nanoseconds.
            ns = 2**63 // 1000  # the microseconds a BIGINT of nanoseconds holds, either way
            span = _signed_span(high - low + 1, last, low, high, -ns, ns - 1)
            if span is None:
                return None
            return (
                f"make_timestamp_ns(epoch_ns({column}) + CAST({{copy}} AS BIGINT) * {span * 1000})"
            )
        span = _signed_span(high - low + 1, last, low, high, _YEAR_1000_US, _YEAR_10000_US - 1)
        if span is None:
            return None
        # Adding an interval keeps each of these types (TIMESTAMPTZ_NS its nanoseconds).
        return f"({column} + to_microseconds(CAST({{copy}} AS BIGINT) * {span}))"
    if kind == "uuid":
        return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {_other_uuid(column)} END"
    if kind == "blob":
        return _other_blob(con, keep, column, scan)
    if kind != "varchar" or str(keep.type) == "JSON":
        # JSON is text to DuckDB, but a suffix (`{"k": 1}#1`) is no JSON: the stressed
        # input failed to write, and the amplifier with it, on correct code.
        return None
    as_int = f"TRY_CAST({keep.sql} AS HUGEINT)"
    as_date = f"TRY_CAST({keep.sql} AS DATE)"
    as_uuid = f"CAST(TRY_CAST({keep.sql} AS UUID) AS VARCHAR)"
    holding = ", ".join(
        f"count(*) FILTER (WHERE contains({keep.sql}, {sql.string(mark)}))" for mark in _MARKS
    )
    (
        not_int, low, high, not_date, not_uuid, not_upper_uuid, not_digits, widths, width,
        not_numbered, *held
    ) = con.execute(
        f"SELECT count(*) FILTER (WHERE CAST({as_int} AS VARCHAR) IS DISTINCT FROM {keep.sql}), "
        f"min({as_int}), max({as_int}), "
        f"count(*) FILTER (WHERE CAST({as_date} AS VARCHAR) IS DISTINCT FROM {keep.sql}), "
        f"count(*) FILTER (WHERE {as_uuid} IS DISTINCT FROM {keep.sql}), "
        f"count(*) FILTER (WHERE upper({as_uuid}) IS DISTINCT FROM {keep.sql}), "
        f"count(*) FILTER (WHERE NOT regexp_full_match({keep.sql}, '[0-9]+')), "
        f"count(DISTINCT length({keep.sql})), max(length({keep.sql})), "
        f"count(*) FILTER (WHERE NOT coalesce(right({keep.sql}, 1) BETWEEN '0' AND '9', false)), "
        f"{holding} {scan}"
    ).fetchone()  # fmt: skip
    if not not_digits and widths == 1 and width == 8 and _all_ymd(con, keep.sql, scan):
        shifted = _ymd_shift(con, keep.sql, column, scan, last)
        if shifted is not None:
            return shifted
    if not not_digits and widths == 1 and width in (6, 10):
        shifted = _period_moved(con, keep.sql, column, scan, last, _YM if width == 6 else _YMDH)
        if shifted is not None:
            return shifted
    if not not_int and low is not None and high + (high - low + 1) * last < 2**126:
        span = _whole_cycles(low, high, last) or _magnitude(low, high, last) or high - low + 1
        return f"CAST(CAST({column} AS HUGEINT) + {{copy}} * {span} AS VARCHAR)"
    if not not_date:
        span = _date_span(con, f"CAST({keep.sql} AS DATE)", scan, last)
        if span is not None:
            return f"CAST(CAST({column} AS DATE) + CAST({{copy}} * {span} AS INTEGER) AS VARCHAR)"
    if not not_uuid or not not_upper_uuid:
        other = f"CAST({_other_uuid(column)} AS VARCHAR)"
        other = other if not not_uuid else f"upper({other})"
        return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {other} END"
    parsed = _parsed_text(con, keep.sql, column, scan, last)
    if parsed is not None:
        return parsed or None
    numbered_text = None if not_numbered else _numbered_text(con, keep.sql, column, scan, last)
    if numbered_text is not None:
        return numbered_text
    formed = _hex_or_email(con, keep.sql, column, scan)
    if formed is not None:
        return formed
    lettered = _letter_code(con, keep.sql, column, scan, last)
    if lettered is not None:
        return lettered
    # A mark no value holds keeps every copy distinct: value || mark || copy splits at its
    # only mark. With '#' always, a column holding both 'a' and 'a#1' met itself.
    mark = next((m for m, n in zip(_MARKS, held, strict=True) if not n), _MARKS[0])
    mark = sql.string(mark).replace("{", "{{").replace("}", "}}")
    return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {column} || {mark} || {{copy}} END"


# Microseconds a text timestamp moves by a multiple of, the coarsest its values all keep
# (whole days, hours, minutes, seconds, milliseconds), so that a moved value is written as
# its own were: a form to the minute writes no seconds, and a move of whole seconds made
# two values meet there.
_GRAINS = (86_400_000_000, 3_600_000_000, 60_000_000, 1_000_000, 1_000, 1)
# The forms a timestamp kept as text is written in, besides DuckDB's own (its VARCHAR
# cast), which a moved value is written back in: ISO 8601 with a T, with or without a Z and
# a fraction of three or six digits, the same with a space, with slashes, and compact.
_WRITTEN = (
    "%Y-%m-%dT%H:%M:%S.%fZ",
    "%Y-%m-%dT%H:%M:%S.%gZ",
    "%Y-%m-%dT%H:%M:%SZ",
    "%Y-%m-%dT%H:%M:%S.%f",
    "%Y-%m-%dT%H:%M:%S.%g",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M:%S.%f",
    "%Y-%m-%d %H:%M:%S.%g",
    "%Y/%m/%d %H:%M:%S",
    "%Y%m%dT%H%M%SZ",
    # To the minute (a schedule's slots), and days written otherwise than ISO 8601 with a
    # time after them: their seconds were moved past 59, which their own format refuses.
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%dT%H",
    "%Y-%m-%d %H",
    "%m/%d/%Y %H:%M:%S",
    "%m/%d/%Y %H:%M",
    "%d/%m/%Y %H:%M:%S",
    "%d/%m/%Y %H:%M",
    "%d.%m.%Y %H:%M:%S",
    "%d.%m.%Y %H:%M",
    "%m/%d/%Y %I:%M:%S %p",
    "%m/%d/%Y %I:%M %p",
)


def _parsed_text(
    con: duckdb.DuckDBPyConnection, value: str, column: str, scan: str, last: int
) -> str | None:
    """For text a step may read as another type: a template moving timestamps past their
    range, in whole units of the finest part any value uses, written back in the form every
    value is written in (DuckDB's own, `2026-03-01 10:00:05`, or one of `_WRITTEN`, such as
    `2026-03-01T10:00:05.000Z`), or in such a form with an offset after it
    (`_offset_text`); times of day round the clock (`_time_text`); periods, quarters and
    IPv4 addresses (`_period_text`); "" (not moved) for timestamps in any other form, times
    that fill the day, and JSON objects or arrays; None for anything else, which moves as
    text does. A
    suffix or a moved trailing number wrote `{"id": 7}#1` and `10:00:65`, which a correct
    step that parses them raised on, and row multiplication failed on a step that had done
    nothing wrong."""
    (sample,) = con.execute(f"SELECT min({value}) {scan}").fetchone()
    if sample is None:
        return None
    decimal = _decimal_text(con, sample, value, column, scan, last)
    if decimal is not None:
        return decimal
    # The form is guessed from one value, then checked on every value, in one scan; a value
    # that reads as no timestamp, time or JSON says the column is other text, unscanned.
    *matches, parses = con.execute(
        "SELECT "
        + ", ".join(
            ["CAST(TRY_CAST(? AS TIMESTAMP) AS VARCHAR) = ?"]
            + [f"strftime(try_strptime(?, {sql.string(f)}), {sql.string(f)}) = ?" for f in _WRITTEN]
            + [
                "TRY_CAST(? AS TIMESTAMP) IS NOT NULL OR TRY_CAST(? AS TIME) IS NOT NULL "
                "OR coalesce(json_valid(?) AND left(ltrim(?), 1) IN ('{', '['), false)"
            ]
        ),
        [sample, sample] * (1 + len(_WRITTEN)) + [sample] * 4,
    ).fetchone()
    form = next((f for f, hit in zip((None, *_WRITTEN), matches, strict=True) if hit), False)
    if form is not False:
        moved = _timestamp_text(con, form, value, column, scan, last)
        if moved is not None:
            return moved
    else:
        # Before the casts below: DuckDB casts `2024/03/15` to a timestamp, and a time.
        moved = _period_text(con, sample, value, column, scan, last)
        if moved is not None or not parses:
            return moved
        moved = _offset_text(con, sample, value, column, scan, last)
        if moved is not None:
            return moved
    not_ts, not_time, not_json = con.execute(
        f"SELECT count(*) FILTER (WHERE TRY_CAST({value} AS TIMESTAMP) IS NULL), "
        f"count(*) FILTER (WHERE TRY_CAST({value} AS TIME) IS NULL), "
        f"count(*) FILTER (WHERE NOT coalesce(json_valid({value}) "
        f"AND left(ltrim({value}), 1) IN ('{{', '['), false)) {scan} WHERE {value} IS NOT NULL"
    ).fetchone()
    if not not_time:
        moved = _time_text(con, value, column, scan, last + 1)
        if moved is not None:
            return moved
    if not not_ts or not not_time or not not_json:
        return ""
    return None


def _timestamp_text(
    con: duckdb.DuckDBPyConnection,
    form: str | None,
    value: str,
    column: str,
    scan: str,
    last: int,
) -> str | None:
    """For text written as a timestamp in `form` (DuckDB's own where None): a template
    moving it past its range in whole units of its finest part, back before it where the
    last copy stays at or after the year 1000, written back in that form; "" where
    neither way fits; None where a value is in another form."""
    read = (
        "TRY_CAST({} AS TIMESTAMP)" if form is None else f"try_strptime({{}}, {sql.string(form)})"
    )
    write = "CAST({} AS VARCHAR)" if form is None else f"strftime({{}}, {sql.string(form)})"
    parsed = read.format(value)
    off, low, high, *off_grain = con.execute(
        f"SELECT count(*) FILTER (WHERE {write.format(parsed)} IS DISTINCT FROM {value}), "
        f"epoch_us(min({parsed})), epoch_us(max({parsed})), "
        + ", ".join(f"count(*) FILTER (WHERE epoch_us({parsed}) % {g} <> 0)" for g in _GRAINS)
        + f" {scan} WHERE {value} IS NOT NULL"
    ).fetchone()
    if off or low is None:
        return None
    grain = next(g for g, n in zip(_GRAINS, off_grain, strict=True) if not n)
    whole = -(-(high - low + 1) // grain) * grain
    span = _signed_span(whole, last, low, high, _YEAR_1000_US, _YEAR_10000_US - 1)
    if span is None:
        return ""
    moved = f"{read.format(column)} + to_microseconds(CAST({{copy}} AS BIGINT) * {span})"
    return write.format(moved)


# A timestamp's offset from UTC at the end of its text: +01, +0100 or +01:00 (or -).
_OFFSET = r"[+-][0-9]{2}(?::?[0-9]{2})?"
# The forms of the time before it: DuckDB's own (None), and ISO 8601 with a T or a space.
_BEFORE_OFFSET = (None, *(f for f in _WRITTEN if not f.endswith("Z") and "/" not in f))


def _offset_text(
    con: duckdb.DuckDBPyConnection, sample: str, value: str, column: str, scan: str, last: int
) -> str | None:
    """For timestamps written with their offset (`2026-03-01T10:00:05+00:00`, as Python's
    `isoformat()` writes an aware time): the time before the offset moved as
    `_timestamp_text` moves it, and each value's own offset kept, so every copy reads as
    the instant it was moved to. A unique such column was repeated by the added copy,
    beside a key that moved, and a correct row number ordered by it came out
    STABLE_ON_THIS_INPUT (unseen84). None for anything else."""
    found = re.fullmatch(f"(.*?)({_OFFSET})", sample)
    if found is None:
        return None
    hits = con.execute(
        "SELECT "
        + ", ".join(
            "CAST(TRY_CAST(? AS TIMESTAMP) AS VARCHAR) = ?"
            if f is None
            else f"strftime(try_strptime(?, {sql.string(f)}), {sql.string(f)}) = ?"
            for f in _BEFORE_OFFSET
        ),
        [found.group(1), found.group(1)] * len(_BEFORE_OFFSET),
    ).fetchone()
    form = next((f for f, hit in zip(_BEFORE_OFFSET, hits, strict=True) if hit), False)
    if form is False:
        return None
    pattern = sql.string(f"^(.*?)({_OFFSET})$")
    (other,) = con.execute(
        f"SELECT count(*) FILTER (WHERE NOT regexp_full_match({value}, {pattern})) {scan} "
        f"WHERE {value} IS NOT NULL"
    ).fetchone()
    if other:
        return None
    # In the template, whose braces are doubled, the pattern's `{2}` is written `{{2}}`.
    braced = pattern.replace("{", "{{").replace("}", "}}")
    moved = _timestamp_text(
        con,
        form,
        f"regexp_extract({value}, {pattern}, 1)",
        f"regexp_extract({column}, {braced}, 1)",
        scan,
        last,
    )
    if not moved:
        return None
    offset = f"regexp_extract({column}, {braced}, 2)"
    return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {moved} || {offset} END"


_DAY_US = 86_400_000_000
# Microseconds a time of day moves by a multiple of, the coarsest its values all keep
# (whole minutes, seconds, milliseconds), so that a moved value is written as its own were.
_TIME_GRAINS = _GRAINS[1:]  # a day has no whole days
# The forms a time of day kept as text is written in besides DuckDB's own (`10:00:05`,
# `10:00:05.5`): hours and minutes, seconds with three or six digits of fraction, hours
# without a zero in front, and a twelve-hour clock with AM or PM.
_TIME_WRITTEN = (
    "%H:%M",
    "%H:%M:%S.%g",
    "%H:%M:%S.%f",
    "%-H:%M",
    "%-H:%M:%S",
    "%I:%M %p",
    "%-I:%M %p",
    "%I:%M:%S %p",
    "%-I:%M:%S %p",
)


def _time_moved(
    con: duckdb.DuckDBPyConnection, value: str, column: str, scan: str, factor: int, finer: bool
) -> str | None:
    """For a time of day (`value` read as a TIME; `column`, the same in the template): the
    added copies' expression, a TIME, or None where none keeps every copy distinct.

    A time of day has nowhere past its range to go, so a unique one was repeated by the
    added copy; a step ordering by it (a row number over the slots of a day, correct on
    its input) then met ties between each row and its copy, which differed in the key that
    did move, and came out STABLE_ON_THIS_INPUT. Where the values span at most a day's
    share per copy, each copy moves on by that span, in whole units of the finest part any
    value uses, round past midnight: still a time of day, written as its own were. With
    `finer` (a TIME, whose form is its type), one that spans more moves by a fraction of
    that finest part instead (a slot of every minute of the day gets its half minute)."""
    low, high, *off_grain = con.execute(
        f"SELECT epoch_us(min({value})), epoch_us(max({value})), "
        + ", ".join(f"count(*) FILTER (WHERE epoch_us({value}) % {g} <> 0)" for g in _TIME_GRAINS)
        + f" {scan}"
    ).fetchone()
    if low is None or high >= _DAY_US:  # 24:00:00 wraps onto midnight
        return None
    grain = next(g for g, n in zip(_TIME_GRAINS, off_grain, strict=True) if not n)
    span = high - low + grain
    if span * factor <= _DAY_US:
        return (
            f"(TIME '00:00:00' + to_microseconds((epoch_us({column}) + "
            f"CAST({{copy}} AS BIGINT) * {span}) % {_DAY_US}))"
        )
    if finer and grain >= factor:
        return f"({column} + to_microseconds(CAST({{copy}} AS BIGINT) * {grain // factor}))"
    return None


def _time_text(
    con: duckdb.DuckDBPyConnection, value: str, column: str, scan: str, factor: int
) -> str | None:
    """For text that reads as a time of day in one form every value is written in
    (DuckDB's own, or one of `_TIME_WRITTEN`): a template moving it as `_time_moved` does
    and writing it back in that form, or None."""
    forms = (None, *_TIME_WRITTEN)
    off = con.execute(
        "SELECT "
        + ", ".join(
            f"count(*) FILTER (WHERE {_time_written(f, _time_read(f, value))} "
            f"IS DISTINCT FROM {value})"
            for f in forms
        )
        + f" {scan} WHERE {value} IS NOT NULL"
    ).fetchone()
    form = next((f for f, n in zip(forms, off, strict=True) if not n), False)
    if form is False:
        return None
    read = _time_read(form, "{}")
    moved = _time_moved(con, read.format(value), read.format(column), scan, factor, finer=False)
    if moved is None:
        return None
    return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {_time_written(form, moved)} END"


def _time_read(form: str | None, value: str) -> str:
    if form is None:
        return f"TRY_CAST({value} AS TIME)"
    return f"CAST(try_strptime({value}, {sql.string(form)}) AS TIME)"


def _time_written(form: str | None, time: str) -> str:
    if form is None:
        return f"CAST({time} AS VARCHAR)"
    return f"strftime(DATE '1900-01-01' + {time}, {sql.string(form)})"


# Digits after the point a decimal kept as text may have for it to move as a DECIMAL(38, s).
_MAX_SCALE = 18
_DECIMAL_TEXT = r"-?[0-9]+(\.[0-9]+)?"


def _decimal_text(
    con: duckdb.DuckDBPyConnection, sample: str, value: str, column: str, scan: str, last: int
) -> str | None:
    """For numbers kept as text with a point (`12.5`, `-0.05`; a column landed as text to be
    cast in a later step): a template moving them past their range by whole units, as a
    DECIMAL with as many digits after the point as the longest value has, written back as
    text, so a step's CAST to a number still reads them. None for anything else, and where
    two values are one number (`1.5` and `1.50`), which would meet in a copy. Where the
    fraction had no one width, the trailing number moved, or the text got a suffix, and a
    correct CAST raised."""
    if not re.fullmatch(_DECIMAL_TEXT, sample):
        return None
    pattern = sql.string(_DECIMAL_TEXT)
    other, scale = con.execute(
        f"SELECT count(*) FILTER (WHERE NOT regexp_full_match({value}, {pattern})), "
        f"max(length(split_part({value}, '.', 2))) {scan} WHERE {value} IS NOT NULL"
    ).fetchone()
    if other or not scale or scale > _MAX_SCALE:
        return None
    number = f"CAST({value} AS DECIMAL(38, {scale}))"
    low, high, texts, numbers = con.execute(
        f"SELECT min({number}), max({number}), count(DISTINCT {value}), count(DISTINCT {number}) "
        f"{scan}"
    ).fetchone()
    span = int(high) - int(low) + 1 if low is not None else 0
    if (
        texts != numbers
        or low is None
        or max(abs(low), abs(high) + span * last) >= 10 ** (38 - scale)
    ):
        return None
    moved = f"CAST(CAST({column} AS DECIMAL(38, {scale})) + {{copy}} * {span} AS VARCHAR)"
    # The first copy as it was: written back as a DECIMAL, `-2.5` would read `-2.50`.
    return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {moved} END"


def _numbered_text(
    con: duckdb.DuckDBPyConnection, value: str, column: str, scan: str, last: int
) -> str | None:
    """A template for text ending in a number (`ORD-000123`, `user_17`, or a zip code
    `00042`, with nothing before it): the number moves past its range and the text
    before it stays, so a step that parses the number out still can, where a suffix made
    it raise. The number keeps its width where every value has one width and the last
    copy fits in it, and is written without zeros in front where it does not. None where
    two values could meet in a copy (numbers of several widths, some with zeros in front:
    `07` and `007`) or the column holds anything else."""
    digits = f"regexp_extract({value}, '[0-9]+$')"
    not_numbered, low, high, widths, width, zeros = con.execute(
        f"SELECT count(*) FILTER (WHERE NOT coalesce("
        f"regexp_full_match({value}, '(?s)(.*[^0-9])?[0-9]{{1,30}}'), false)), "
        f"min(TRY_CAST({digits} AS HUGEINT)), max(TRY_CAST({digits} AS HUGEINT)), "
        f"count(DISTINCT length({digits})), max(length({digits})), "
        f"count(*) FILTER (WHERE {digits} LIKE '0_%') {scan}"
    ).fetchone()
    if not_numbered or low is None or (widths > 1 and zeros):
        return None
    span = high - low + 1
    moved = f"regexp_extract({column}, '[0-9]+$')"
    number = f"CAST(CAST({moved} AS HUGEINT) + {{copy}} * {span} AS VARCHAR)"
    if widths == 1 and high + span * last < 10**width:
        number = f"lpad({number}, {width}, '0')"
    before = f"left({column}, length({column}) - length({moved}))"
    return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {before} || {number} END"


def _all_ymd(con: duckdb.DuckDBPyConnection, text: str, scan: str) -> bool:
    """Whether every value of `text` is a date written as eight digits, YYYYMMDD."""
    (not_ymd,) = con.execute(
        f"SELECT count(*) FILTER (WHERE NOT coalesce(regexp_full_match({text}, '[0-9]{{8}}') "
        f"AND try_strptime({text}, '%Y%m%d') IS NOT NULL, false)) {scan}"
    ).fetchone()
    return not not_ymd


def _ymd_shift(
    con: duckdb.DuckDBPyConnection, text: str, column: str, scan: str, last: int
) -> str | None:
    """A template moving YYYYMMDD dates (as text, `text` read from the source and
    `column` in the template) past their range by whole days, back before it where there
    is room (_date_span), written back as YYYYMMDD text; None where neither way fits."""
    as_date = f"CAST(strptime({text}, '%Y%m%d') AS DATE)"
    span = _date_span(con, as_date, scan, last)
    if span is None:
        return None
    moved = f"CAST(strptime(CAST({column} AS VARCHAR), '%Y%m%d') AS DATE)"
    return f"strftime({moved} + CAST({{copy}} * {span} AS INTEGER), '%Y%m%d')"


# Periods kept as text, each with the unit it moves by: a month (`2024-03`, `03/2024`), an
# ISO week (`2024-W05`), or a day written otherwise than ISO 8601 (`03/15/2024`,
# `15.03.2024`); and, kept as digits (text or an integer), a month (`202403`) or an hour
# (`2026030110`, an hourly partition's key). Of forms that read one value alike (`03/04/2024`), the first that every
# value of the column round-trips through is the one it is read and written in.
_YM = (("%Y%m", "month"),)
_YMDH = (("%Y%m%d%H", "hour"),)
_PERIODS = (
    ("%Y-%m", "month"),
    ("%Y/%m", "month"),
    ("%m/%Y", "month"),
    ("%b %Y", "month"),
    ("%B %Y", "month"),
    ("%G-W%V", "week"),
    ("%GW%V", "week"),
    ("%m/%d/%Y", "day"),
    ("%-m/%-d/%Y", "day"),
    ("%d/%m/%Y", "day"),
    ("%-d/%-m/%Y", "day"),
    ("%d.%m.%Y", "day"),
    ("%d-%m-%Y", "day"),
    ("%m-%d-%Y", "day"),
    ("%Y/%m/%d", "day"),
    ("%Y.%m.%d", "day"),
)


def _both_read(con: duckdb.DuckDBPyConnection, low: int, high: int, form: str) -> bool:
    """Whether the digits of both `low` and `high` read as a time in `form`."""
    (both,) = con.execute(
        f"SELECT try_strptime(?, {sql.string(form)}) IS NOT NULL "
        f"AND try_strptime(?, {sql.string(form)}) IS NOT NULL",
        [str(low), str(high)],
    ).fetchone()
    return bool(both)


def _period_text(
    con: duckdb.DuckDBPyConnection, sample: str, value: str, column: str, scan: str, last: int
) -> str | None:
    """For text that reads as a month, an ISO week or a day in one of `_PERIODS`, judged
    first on one value, `sample`: `_period_moved` in the forms it reads in; else None."""
    hits = con.execute(
        "SELECT "
        + ", ".join(
            f"strftime(try_strptime(?, {sql.string(f)}), {sql.string(f)}) = ?" for f, _ in _PERIODS
        ),
        [sample, sample] * len(_PERIODS),
    ).fetchone()
    forms = tuple(p for p, hit in zip(_PERIODS, hits, strict=True) if hit)
    if forms:
        return _period_moved(con, value, column, scan, last, forms)
    if re.fullmatch(_QUARTER, sample):
        return _quarter_moved(con, value, column, scan, last)
    if re.fullmatch(_IPV4, sample):
        return _ipv4_moved(con, value, column, scan, last)
    if re.fullmatch(r"[0-9:]+ [AP]M", sample):  # a time of day no TIME cast reads
        # "" where it has no room to move: a suffix (`12:00 AM#1`) is no time a step parses.
        return _time_text(con, value, column, scan, last + 1) or ""
    return None


def _matched_range(
    con: duckdb.DuckDBPyConnection, value: str, pattern: str, number: str, scan: str
) -> tuple[int, int] | None:
    """The least and greatest `number` of the column's values, where every value of it
    matches `pattern`; None where one does not, or there is none."""
    matches = f"regexp_full_match({value}, {sql.string(pattern)})"
    other, low, high = con.execute(
        f"SELECT count(*) FILTER (WHERE NOT {matches}), min({number}) FILTER (WHERE {matches}), "
        f"max({number}) FILTER (WHERE {matches}) {scan} WHERE {value} IS NOT NULL"
    ).fetchone()
    return None if other or low is None else (low, high)


# An IPv4 address as written, each part without zeros in front.
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}"


def _ipv4_number(text: str) -> str:
    parts = [f"CAST(split_part({text}, '.', {k}) AS BIGINT)" for k in range(1, 5)]
    return f"({parts[0]} * 16777216 + {parts[1]} * 65536 + {parts[2]} * 256 + {parts[3]})"


def _ipv4_moved(
    con: duckdb.DuckDBPyConnection, value: str, column: str, scan: str, last: int
) -> str | None:
    """A template moving IPv4 addresses past their range as the 32-bit numbers they are,
    written back as four parts; None where a value is in no such form or the last copy
    would pass 255.255.255.255. The last part, a trailing number, was moved past 255, and
    a correct step reading it as a byte raised."""
    found = _matched_range(con, value, _IPV4, _ipv4_number(value), scan)
    if found is None:
        return None
    low, high = found
    span = high - low + 1
    if high + span * last > 2**32 - 1:
        return None
    n = f"({_ipv4_number(column)} + {{copy}} * {span})"
    dotted = " || '.' || ".join(
        f"CAST(({n} // {2 ** (8 * k)}) % 256 AS VARCHAR)" for k in (3, 2, 1, 0)
    )
    return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {dotted} END"


# A quarter kept as text, `2024-Q1` or `2024Q1`, which no strptime reads.
_QUARTER = r"[0-9]{4}-?Q[1-4]"


def _quarter_moved(
    con: duckdb.DuckDBPyConnection, value: str, column: str, scan: str, last: int
) -> str | None:
    """A template moving quarters past their range by whole years, back before it where
    there is room, the quarter kept; None where a value is in no such form or neither way
    fits. The
    trailing number moved (`2024-Q5`), and a step building the quarter's first month from
    it made no month."""
    found = _matched_range(con, value, _QUARTER, f"TRY_CAST(left({value}, 4) AS INTEGER)", scan)
    if found is None:
        return None
    low, high = found
    span = _signed_span(high - low + 1, last, low, high, 1000, 9999)
    if span is None:
        return None
    moved = (
        f"CAST(CAST(left({column}, 4) AS INTEGER) + {{copy}} * {span} AS VARCHAR) "
        f"|| substr({column}, 5)"
    )
    return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {moved} END"


def _period_moved(
    con: duckdb.DuckDBPyConnection,
    value: str,
    column: str,
    scan: str,
    last: int,
    forms: tuple[tuple[str, str], ...],
) -> str | None:
    """A template moving periods (`value` as text, `column` the same in the template) past
    their range by whole months, weeks or days, back before it where there is room (as a
    day moves, `_date_span`), written back in the first of `forms` that every value
    round-trips through; None where none does, or neither way fits.

    A month kept as text (`2024-03`, the key of a monthly table) ends in a number, and the
    number was moved past its range: `2024-14`, which a correct `CAST(month || '-01' AS
    DATE)` raised on; an ISO week came out `2024-W54`, a day `03/15/2025` from
    `03/15/2024` by a year's shift, which may be a 29 February no year has."""
    for form, unit in forms:
        read = f"try_strptime({{}}, {sql.string(form)})"
        parsed = read.format(value)
        off, low, high = con.execute(
            f"SELECT count(*) FILTER (WHERE strftime({parsed}, {sql.string(form)}) "
            f"IS DISTINCT FROM {value}), CAST(min({parsed}) AS DATE), CAST(max({parsed}) AS DATE) "
            f"{scan} WHERE {value} IS NOT NULL"
        ).fetchone()
        if off or low is None:
            continue
        # Each unit's copies within the years 1000 to 9999, back first (_signed_span).
        if unit == "month":
            first, final = (d.year * 12 + d.month - 1 for d in (low, high))
            months = _signed_span(final - first + 1, last, first, final, 1000 * 12, 9999 * 12 + 11)
            if months is None:
                return None
            step = f"to_months(CAST({{copy}} AS INTEGER) * {months})"
        elif unit == "hour":
            first, final = con.execute(
                f"SELECT epoch_us(min({parsed})) // 3600000000, epoch_us(max({parsed})) // 3600000000 "
                f"{scan} WHERE {value} IS NOT NULL"
            ).fetchone()
            hour = 3_600_000_000
            earliest, latest = -(-_YEAR_1000_US // hour), (_YEAR_10000_US - 1) // hour - 1
            hours = _signed_span(final - first + 1, last, first, final, earliest, latest)
            if hours is None:
                return None
            step = f"to_hours(CAST({{copy}} AS BIGINT) * {hours})"
        else:
            days = _signed_span(
                (high - low).days + (7 if unit == "week" else 1),
                last,
                low.toordinal(),
                high.toordinal(),
                _FIRST_DAY.toordinal(),
                _LAST_DAY.toordinal(),
            )
            if days is None:
                return None
            step = f"to_days(CAST({{copy}} AS INTEGER) * {days})"
        moved = f"strftime({read.format(column)} + {step}, {sql.string(form)})"
        return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {moved} END"
    return None


# Bits flipped in a key that spans its whole type (a 64-bit hash), by the type's width.
_FLIP_BITS = {"tinyint": 8, "smallint": 16, "integer": 32, "bigint": 64, "hugeint": 128}


# Years of the Gregorian calendar, after which every date recurs on the same day.
_CYCLE = 400


def _whole_cycles(low: int, high: int, last: int) -> int | None:
    """For integers that could be years (all within 1000 to 9999): a span past their range
    in whole 400-year cycles, where the last copy stays within four digits; else None. A key
    of year, month and day moved by its own range (three years) made 2024-02-29 into
    2027-02-29, and a correct `make_date` raised; a year moved by whole cycles keeps every
    date it is part of, leap days included."""
    if low < 1000 or high > 9999:
        return None
    span = -(-(high - low + 1) // _CYCLE) * _CYCLE
    return span if high + span * last <= 9999 else None


def _magnitude(low: int, high: int, last: int) -> int | None:
    """For whole numbers from 0 up: a move by the first power of ten past the greatest, so
    that the same ids in two inputs move alike. Moved by each input's own range, an order's
    id and its one payment's (a column unique in payments too) moved by different amounts,
    and a copy's payment met no order: a correct step refusing orphaned payments raised,
    AMPLIFICATION_FAILED, exit 5 (unseen100). Two inputs then part only where a power of ten
    falls between their greatest ids. None below zero, or past BIGINT."""
    if low < 0:
        return None
    power = 10 ** len(str(high))
    return power if high + power * last < 2**63 else None


def _flipped(con: duckdb.DuckDBPyConnection, keep, column: str, scan: str, factor: int):
    """For an integer key no shift fits (a hash over nearly all of its type): the added
    copy with alternate bits flipped, one-to-one within the type, kept only where no
    flipped value meets an original, which a join of the column with itself checks (and
    with a hash's spread, none does). One added copy only; None otherwise."""
    bits = _FLIP_BITS.get(keep.type.id.removeprefix("u"))
    if factor != 2 or bits is None:
        return None
    mask = int("01" * (bits // 2), 2)  # 0x55...55: under the signed type's top, so it casts
    flip = f"xor({{}}, CAST({mask} AS {keep.type}))"
    distinct = f"(SELECT DISTINCT {keep.sql} AS v {scan})"
    (meets,) = con.execute(
        f"SELECT count(*) FROM {distinct} a JOIN {distinct} b ON {flip.format('a.v')} = b.v"
    ).fetchone()
    if meets:
        return None
    return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {flip.format(column)} END"


def _next_float(con: duckdb.DuckDBPyConnection, keep, column: str, scan: str, factor: int):
    """For a float key (a score on no two rows alike): each copy takes the next float up
    from the copy before it. Moving it past its range by adding a span, as an integer
    moves, would round away the low bits that kept close values apart. Kept only where
    no copy meets a value of another (adjacent floats in the input, NaN, infinity), which
    one count over every copy's values checks; None otherwise, and the copies repeat it.

    A unique score was repeated by the added copy, so a correct `arg_max(id, score)` per
    group met ties the input never held and came out STABLE_ON_THIS_INPUT."""
    up = f"CAST('inf' AS {keep.type})"

    def raised(value: str, steps: int) -> str:
        for _ in range(steps):
            value = f"nextafter({value}, {up})"
        return value

    every = " UNION ALL ".join(f"SELECT {raised(keep.sql, n)} AS v {scan}" for n in range(factor))
    distinct, values = con.execute(f"SELECT count(DISTINCT v), count(v) FROM ({every})").fetchone()
    if distinct != values:
        return None
    later = " ".join(f"WHEN {n} THEN {raised(column, n)}" for n in range(1, factor))
    return f"CASE {{copy}} WHEN 0 THEN {column} {later} END"


# Marks an email's local part may hold (RFC 5321's atoms), tried in turn: the added copy's
# number goes before the @ after the first mark no local part holds.
_LOCAL_MARKS = ("+", "_", "-")


def _hex_or_email(con: duckdb.DuckDBPyConnection, value: str, column: str, scan: str) -> str | None:
    """For a hash key written as hex digits of one length and case (a Data Vault hub's
    `md5(...)`, 16 to 64 digits): other digits of that length for each copy, an MD5 or a
    SHA-256 of the value and the copy's number. For an email: the copy's number in the
    local part, after a mark no local part holds, so the domain stays one. A suffix wrote
    `9e107d9d...#1` and `user7@example.com#1`, and a correct step checking that a hash key
    is 32 hex digits, or that an email ends in a domain, raised (unseen99). None for other
    text, which gets the suffix."""
    hexes, lettered, lower, upper, width, widths, emails, *held = con.execute(
        f"SELECT count(*) FILTER (WHERE regexp_full_match({value}, '[0-9a-fA-F]+')), "
        f"count(*) FILTER (WHERE regexp_matches({value}, '[a-fA-F]')), "
        f"count(*) FILTER (WHERE regexp_full_match({value}, '[0-9a-f]+')), "
        f"count(*) FILTER (WHERE regexp_full_match({value}, '[0-9A-F]+')), "
        f"max(length({value})), count(DISTINCT length({value})), "
        f"count(*) FILTER (WHERE regexp_full_match({value}, '[^@ ]+@[^@ ]+[.][^@ ]+')), "
        + ", ".join(
            f"count(*) FILTER (WHERE contains(split_part({value}, '@', 1), {sql.string(m)}))"
            for m in _LOCAL_MARKS
        )
        + f", count(*) {scan} WHERE {value} IS NOT NULL"
    ).fetchone()
    *held, rows = held
    # Digits alone are a number to a step, whatever their width: no letters are written in.
    one_case = rows in (lower, upper)
    if rows and hexes == rows and lettered and one_case and widths == 1 and 16 <= width <= 64:
        digest = "md5" if width <= 32 else "sha256"
        other = f"left({digest}({column} || '#' || {{copy}}), {width})"
        other = other if lower == rows else f"upper({other})"
        return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {other} END"
    mark = next((m for m, n in zip(_LOCAL_MARKS, held, strict=True) if not n), None)
    if rows and emails == rows and mark is not None:
        return (
            f"CASE WHEN {{copy}} = 0 THEN {column} ELSE split_part({column}, '@', 1) || "
            f"'{mark}' || {{copy}} || '@' || split_part({column}, '@', 2) END"
        )
    return None


_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _letter_code(
    con: duckdb.DuckDBPyConnection, value: str, column: str, scan: str, last: int
) -> str | None:
    """For a code written in letters of one case, with digits and separators or without
    (a currency `USD`, a country `DE`, a ticker `AAPL`, a booking reference `X7K2PQ`, a
    postcode `SW1A 1AA`): each letter moved along the alphabet by as many places in each
    copy, the fewest places at which no copy's code meets a code of the input, everything
    else as it was, so a code keeps its length and the kind of each character. A suffix
    wrote `USD#1`, and a correct step checking that a currency is three capital letters
    raised (a contract-only probe, unseen134, AMPLIFICATION_FAILED). None where a value
    has no letter to move or another character, or every move meets a code (26 single
    letters)."""
    upper, lower, rows = con.execute(
        f"SELECT count(*) FILTER (WHERE regexp_full_match({value}, "
        f"'[A-Z0-9 ._/-]*[A-Z][A-Z0-9 ._/-]*')), "
        f"count(*) FILTER (WHERE regexp_full_match({value}, "
        f"'[a-z0-9 ._/-]*[a-z][a-z0-9 ._/-]*')), count(*) "
        f"{scan} WHERE {value} IS NOT NULL"
    ).fetchone()
    if not rows or rows not in (upper, lower):
        return None
    letters = _LETTERS if upper == rows else _LETTERS.lower()
    twice = sql.string(letters * 2)
    # Every copy c moves by c * k places; k is the least with each copy's move short of a
    # whole turn and meeting no code of the input.
    (step,) = con.execute(
        f"WITH o AS (SELECT DISTINCT {value} AS v {scan} WHERE {value} IS NOT NULL) "
        f"SELECT min(k) FROM range(1, 26) r(k) WHERE {last} * k < 26 AND NOT EXISTS ("
        f"SELECT 1 FROM o, range(1, {last + 1}) c(c) WHERE translate(o.v, "
        f"{sql.string(letters)}, substr({twice}, c * k + 1, 26)) IN (SELECT v FROM o))"
    ).fetchone()
    if step is None:
        return None
    moved = (
        f"translate({column}, {sql.string(letters)}, substr({twice}, {{copy}} * {step} + 1, 26))"
    )
    return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {moved} END"


def _other_uuid(column: str) -> str:
    """Another UUID for each copy of a UUID (or text that reads back as one): a hash of the
    value and the copy's number, cast back to a UUID, so a step that parses it still can.
    Two copies meet with the odds of an MD5 collision."""
    return f"CAST(md5(CAST({column} AS VARCHAR) || '#' || {{copy}}) AS UUID)"


def _other_blob(con: duckdb.DuckDBPyConnection, keep, column: str, scan: str) -> str | None:
    """Another byte string for each copy of a BLOB key. Hash keys are BLOBs of one length
    (16 bytes of MD5, 20 of SHA-1, 32 of SHA-256), and a step may check that length: each
    copy holds MD5s of the value and the copy's number, cut to that length, so two meet with
    the odds of a collision of at least 8 bytes. A BLOB of other lengths keeps its bytes and
    gains a zero byte and the copy's number, which no value of the column ends in."""
    low, high, clash = con.execute(
        f"SELECT min(octet_length({keep.sql})), max(octet_length({keep.sql})), "
        f"count(*) FILTER (WHERE regexp_matches(hex({keep.sql}), '00(3[0-9])+$')) {scan}"
    ).fetchone()
    if low is None:
        return None
    if low == high and low >= 8:
        salted = f"hex({column}) || '#' || {{copy}}"
        parts = " || ".join(f"md5({salted} || ':{k}')" for k in range(-(-low // 16)))
        other = f"unhex(left({parts}, {2 * low}))"
    elif not clash:
        other = f"{column} || unhex('00') || CAST(CAST({{copy}} AS VARCHAR) AS BLOB)"
    else:
        return None
    return f"CASE WHEN {{copy}} = 0 THEN {column} ELSE {other} END"


def _signed_span(span: int, last: int, low: int, high: int, floor: int, ceiling: int) -> int | None:
    """How far each copy moves past a range of days, instants or periods, all in one unit:
    back by `span` where the last copy's least value stays at or above `floor`, else
    forward where its greatest stays at or below `ceiling`; None where neither fits. Back
    first: a record's dates lie in the past, and a copy in the future is one a correct
    step checking that no day is yet to come refuses (unseen135), where one further back
    is as plausible as the rows it copies."""
    if low - span * last >= floor:
        return -span
    if high + span * last <= ceiling:
        return span
    return None


def _date_span(con: duckdb.DuckDBPyConnection, value: str, scan: str, last: int) -> int | None:
    """Days from the least date to one past the greatest, signed as _signed_span moves
    them, the last copy's dates staying within four-digit years (a date past 9999 is
    written with five digits)."""
    low, high = con.execute(f"SELECT min({value}), max({value}) {scan}").fetchone()
    if low is None:
        return None
    span = (high - low).days + 1
    days = (low.toordinal(), high.toordinal(), _FIRST_DAY.toordinal(), _LAST_DAY.toordinal())
    return _signed_span(span, last, *days)
