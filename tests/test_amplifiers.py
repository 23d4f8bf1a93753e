"""Amplifier transforms map an input file to a stressed file and touch nothing else."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twicerun.compare.digest import bytes_digest, canonical_digest
from twicerun.runner.amplify.arrival_order import reorder
from twicerun.runner.amplify.base import Applied, Declined, column_facts
from twicerun.runner.amplify.row_multiplication import multiply_rows
from twicerun.runner.amplify.tie_collapse import (
    ROWS_PER_VALUE,
    Collapse,
    collapse_ties,
    dependent_units,
    kept_opposite,
    plan_collapse,
    planned,
)

CON = duckdb.connect()


def events(tmp_path: Path, rows: int = 2000, customers: int = 1000, name="events.parquet") -> Path:
    path = tmp_path / name
    CON.execute(
        f"COPY (SELECT range AS event_id, hash(range) % {customers} AS customer, "
        f"(range % 7)::DOUBLE AS amount FROM range({rows})) TO '{path}' (FORMAT parquet)"
    )
    return path


def rows_of(path: Path, order: str = "") -> list[tuple]:
    return CON.execute(f"SELECT * FROM read_parquet('{path}') {order}").fetchall()


def parquet_of(tmp_path: Path, name: str, select: str) -> Path:
    """The rows of `select` written to `name` in tmp_path."""
    path = tmp_path / name
    CON.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
    return path


def multiplied(tmp_path: Path, name: str, select: str) -> tuple[str, Path, Path]:
    """Row multiplication's detail on the rows of `select`, their file and its output."""
    source = parquet_of(tmp_path, f"{name}.parquet", select)
    target = tmp_path / f"{name}-out.parquet"
    outcome = multiply_rows(CON, source, target, artifact=name)
    assert isinstance(outcome, Applied), outcome
    return outcome.detail, source, target


# Tie collapse ---------------------------------------------------------------------------


def test_tie_collapse_raises_density_with_real_values_and_leaves_the_most_distinct_column(tmp_path):
    source = events(tmp_path)
    target = tmp_path / "out.parquet"
    outcome = collapse_ties(CON, source, target, artifact="events", rows_per_value=500)
    assert isinstance(outcome, Applied)
    assert "events.customer into 4 values" in outcome.detail
    before, after = rows_of(source), rows_of(target)
    assert len(after) == len(before)
    assert [r[0] for r in after] == [r[0] for r in before]  # ids intact and in the same order
    assert [r[2] for r in after] == [r[2] for r in before]  # floats are never tie columns
    customers_before = {r[1] for r in before}
    customers_after = {r[1] for r in after}
    assert customers_after <= customers_before  # only real values of the same column
    assert len(customers_after) == 4


def test_tie_collapse_never_folds_a_column_into_one_value(tmp_path):
    """A column of one value is a constant: a step keeping the first row per key could no
    longer show the order its rows came in. It was folded into 1 value below 500 rows."""
    source = events(tmp_path, rows=400, customers=40)
    target = tmp_path / "out.parquet"
    outcome = collapse_ties(CON, source, target, artifact="events")
    assert "events.customer into 2 values, from 10 to 200 rows per value" in outcome.detail
    customers = sorted({r[1] for r in rows_of(source)})
    assert {r[1] for r in rows_of(target)} == {customers[0], customers[-1]}


def test_tie_collapse_keeps_the_order_of_values_and_ties_the_extremes(tmp_path):
    """Runs of consecutive values each take one value, the least and the greatest among
    them, so a value never passes one it was below and a top N either way meets ties."""
    source = events(tmp_path, rows=2000, customers=50)
    target = tmp_path / "out.parquet"
    collapse_ties(CON, source, target, artifact="events")
    pairs = sorted({(b[1], a[1]) for b, a in zip(rows_of(source), rows_of(target), strict=True)})
    folded = [new for _, new in pairs]
    assert folded == sorted(folded)  # sorted by the old value, the new ones never go down
    assert folded[0] == pairs[0][0] and folded[-1] == pairs[-1][0]
    assert len(set(folded)) == 4


def test_tie_collapse_declines_when_the_column_is_already_dense(tmp_path):
    source = events(tmp_path, rows=2000, customers=2)
    outcome = collapse_ties(
        CON, source, tmp_path / "out.parquet", artifact="events", rows_per_value=500
    )
    assert outcome == Declined(
        "every column of events that could tie already has 1,000 or more rows per value, at or "
        "past the 500 this amplifier aims for"
    )
    assert not (tmp_path / "out.parquet").exists()


def test_tie_collapse_declines_when_only_the_most_distinct_column_is_exact(tmp_path):
    path = tmp_path / "ids.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "x": [0.5, 1.5, 2.5]}), path)
    outcome = collapse_ties(CON, path, tmp_path / "out.parquet", artifact="ids")
    assert outcome == Declined(
        "ids has no exact column besides its most distinct one (id), so nothing could tie"
    )


def customers(tmp_path: Path, rows: int = 3000) -> Path:
    """Two keys, the id first and the email second, and a region that repeats, which the
    score does not decide (with range % 5 it would: the score is range * 37 % 1000)."""
    path = tmp_path / "customers.parquet"
    CON.execute(
        f"COPY (SELECT range AS customer_id, 'user' || ((range * 7919) % 100003) || '@x.org' "
        f"AS email, (hash(range) % 5)::BIGINT AS region, (range * 37) % 1000 AS score "
        f"FROM range({rows})) "
        f"TO '{path}' (FORMAT parquet)"
    )
    return path


def test_tie_collapse_leaves_every_key_alone_not_only_the_first(tmp_path):
    """A sort on the email, a key as much as the id, is a correct tiebreak. Only the id, the
    first of the two, was kept: the email was folded into 6 values, and a step ranking
    customers by email fired under the joint probe."""
    source = customers(tmp_path)
    target = tmp_path / "out.parquet"
    outcome = collapse_ties(CON, source, target, artifact="customers")
    assert outcome == Applied("customers.score into 6 values, from 3 to 500 rows per value")
    before, after = rows_of(source), rows_of(target)
    assert [r[:3] for r in after] == [r[:3] for r in before]
    only_keys = tmp_path / "keys.parquet"
    CON.execute(f"COPY (SELECT email, customer_id FROM '{source}') TO '{only_keys}'")
    assert collapse_ties(CON, only_keys, tmp_path / "none.parquet", artifact="keys") == Declined(
        "keys has no exact column besides its keys (email, customer_id: each has a different "
        "value on every row, and is kept so), so nothing could tie"
    )


def daily_per_tier(tmp_path: Path) -> Path:
    """A total per (tier, day): neither column is a key alone, the pair is. The total is
    nearly unique, and a key together with either; it is a measure, not a key."""
    path = tmp_path / "daily.parquet"
    CON.execute(
        f"COPY (SELECT tier, DATE '2024-01-01' + d::INTEGER AS day, "
        f"(hash(tier * 1000 + d) % 100000)::BIGINT AS total "
        f"FROM range(4) t(tier), range(200) r(d)) TO '{path}' (FORMAT parquet)"
    )
    return path


def test_the_amplifiers_keep_a_two_column_key_a_key(tmp_path):
    """Tie collapse folded the tier and row multiplication repeated every (tier, day), so a
    running total by day within each tier, correct on any input where the pair is a key,
    came out STABLE_ON_THIS_INPUT. The nearly unique total is still folded."""
    source = daily_per_tier(tmp_path)
    (rows, columns) = column_facts(CON, source)
    assert {c.name: c.joint for c in columns} == {"tier": True, "day": True, "total": False}
    collapsed = tmp_path / "collapsed.parquet"
    outcome = collapse_ties(CON, source, collapsed, artifact="daily", rows_per_value=100)
    assert outcome == Applied("daily.total into 8 values, from 1 to 100 rows per value")
    doubled = tmp_path / "doubled.parquet"
    multiply_rows(CON, source, doubled, artifact="daily")
    for path, expected in ((collapsed, rows), (doubled, 2 * rows)):
        assert CON.execute(
            f"SELECT count(*), count(DISTINCT (tier, day)) FROM '{path}'"
        ).fetchone() == (expected, expected)
    pairs_only = tmp_path / "pairs.parquet"
    CON.execute(f"COPY (SELECT tier, day FROM '{source}') TO '{pairs_only}'")
    assert collapse_ties(CON, pairs_only, tmp_path / "none.parquet", artifact="d") == Declined(
        "d has no exact column besides its keys (tier, day: a key when taken two to five "
        "together; each is kept so), so nothing could tie"
    )


def test_the_amplifiers_keep_a_three_column_key_a_key(tmp_path):
    """Units sold per (store, product, day), with a revenue nearly unique: only the revenue
    was kept, the product folded, and a running total by day per store and product came
    out STABLE_ON_THIS_INPUT. No two of the three are a key; the three are."""
    source = tmp_path / "sales.parquet"
    CON.execute(
        f"COPY (SELECT s AS store, 'p' || p AS product, DATE '2024-01-01' + d::INTEGER AS day, "
        f"(hash(s * 100000 + p * 100 + d + 7) % 10000000)::BIGINT AS revenue "
        f"FROM range(10) a(s), range(50) b(p), range(30) c(d)) TO '{source}' (FORMAT parquet)"
    )
    assert_key_kept(
        tmp_path, source, ["store", "product", "day"],
        "sales.revenue into 30 values, from 1 to 500 rows per value",
    )  # fmt: skip


def assert_key_kept(tmp_path: Path, source: Path, key: list[str], folded: str) -> None:
    """`key` is found as a key of `source`, tie collapse folds only the measure (`folded`),
    and neither transform lets two rows share the key."""
    rows, columns = column_facts(CON, source)
    assert {c.name for c in columns if c.joint} == set(key)
    collapsed, doubled = tmp_path / "collapsed.parquet", tmp_path / "doubled.parquet"
    artifact = source.stem
    assert collapse_ties(CON, source, collapsed, artifact=artifact) == Applied(folded)
    multiply_rows(CON, source, doubled, artifact=artifact)
    for path, expected in ((collapsed, rows), (doubled, 2 * rows)):
        assert CON.execute(
            f"SELECT count(*), count(DISTINCT ({', '.join(key)})) FROM '{path}'"
        ).fetchone() == (expected, expected)


def test_the_amplifiers_keep_a_four_column_key_a_key(tmp_path):
    """Units per (store, product, channel, day): no three of the four are a key, so the
    search stopped at triples, folded the day and the channel, and a running total by day
    per store, product and channel, correct code, came out STABLE_ON_THIS_INPUT."""
    source = tmp_path / "facts.parquet"
    CON.execute(
        f"COPY (SELECT s AS store, p AS product, c AS channel, DATE '2024-01-01' + d::INTEGER "
        f"AS day, (hash(((s * 25 + p) * 3 + c) * 40 + d) % 1000)::INTEGER AS units "
        f"FROM range(8) a(s), range(25) b(p), range(3) e(c), range(40) f(d)) "
        f"TO '{source}' (FORMAT parquet)"
    )
    assert_key_kept(
        tmp_path, source, ["store", "product", "channel", "day"],
        "facts.units into 48 values, from 24 to 500 rows per value",
    )  # fmt: skip


class Traced:
    """CON, with every query run through `execute` noted in `queries`."""

    def __init__(self, queries: list[str]):
        self.queries = queries

    def execute(self, query, *args):
        self.queries.append(query)
        return CON.execute(query, *args)

    def sql(self, query, *args):
        return CON.sql(query, *args)


def test_a_four_column_key_is_looked_for_only_where_no_smaller_one_is(tmp_path):
    """A table with a key of two has its grain; sets of four are not counted there, which
    would cost every such input one more query for supersets of a grain it already has."""
    source = tmp_path / "daily.parquet"
    CON.execute(
        f"COPY (SELECT t AS tier, DATE '2024-01-01' + d::INTEGER AS day, "
        f"(hash(t, d) % 7)::INTEGER AS a, (hash(d, t) % 5)::INTEGER AS b "
        f"FROM range(30) x(t), range(40) y(d)) TO '{source}' (FORMAT parquet)"
    )
    queries: list[str] = []
    _, columns = column_facts(Traced(queries), source)
    assert {c.name for c in columns if c.joint} == {"tier", "day"}
    counted = [
        sets.count(",") + 1
        for q in queries
        for sets in re.findall(r"count\(DISTINCT \(([^()]*)\)\)", q)
    ]
    # The four columns together once (whether any set can be a key at all), then no set of
    # four again.
    assert counted.count(4) == 1, queries
    assert 2 in counted


class _UnhashableType:
    """A DuckDB column type as DuckDB 1.4.0 has it (1.4.5 and 2.0 made it hashable)."""

    __hash__ = None  # type: ignore[assignment]


def test_looking_for_keys_never_hashes_a_duckdb_type(tmp_path):
    """On DuckDB 1.4.0, which pyproject allows, every input with a key of two columns
    failed both amplifiers that look for keys ("unhashable type: DuckDBPyType"): the search
    for keys of three compared sets of column records, whose hash took in the type."""
    from dataclasses import replace

    from twicerun.compare.oracle import _Column
    from twicerun.runner.amplify.base import _key_sets

    source = tmp_path / "daily.parquet"
    CON.execute(
        f"COPY (SELECT t AS tier, DATE '2024-01-01' + d::INTEGER AS day, "
        f"(hash(t, d) % 7)::INTEGER AS a, (hash(d, t) % 5)::INTEGER AS b "
        f"FROM range(30) x(t), range(40) y(d)) TO '{source}' (FORMAT parquet)"
    )
    rows, columns = column_facts(CON, source)
    as_on_140 = [replace(c, type=_UnhashableType()) for c in columns]
    keys = _key_sets(CON, source, rows, as_on_140)
    assert {c.name for key in keys for c in key} == {"tier", "day"}
    column = as_on_140[0]
    assert hash(_Column(column.name, column.type, column.cls)) is not None


def test_columns_unique_together_by_chance_are_not_taken_for_a_key(tmp_path):
    """Three columns of random codes on 200 rows repeat no combination by chance alone: all
    three were kept as a key, so tie collapse folded nothing and a sort on any of them
    went unstressed."""
    source = tmp_path / "codes.parquet"
    CON.execute(
        f"COPY (SELECT hash(range) % 40 AS a, hash(range * 3) % 30 AS b, "
        f"hash(range * 7) % 25 AS c FROM range(200)) TO '{source}' (FORMAT parquet)"
    )
    assert CON.execute(f"SELECT count(DISTINCT (a, b, c)) FROM '{source}'").fetchone() == (200,)
    rows, columns = column_facts(CON, source)
    assert [c.name for c in columns if c.joint] == []
    plan = plan_collapse((rows, columns), artifact="codes", rows_per_value=50)
    # With no key at all, the most distinct column is spared, as before.
    assert {c.name for c in plan.chosen} == {"b", "c"}


def assert_kept_and_folded(
    source: Path, kept: set[str], folded: list[str], rows_per_value: int = ROWS_PER_VALUE
):
    """The columns of `source` kept whole as a key's are `kept`, tie collapse chooses to fold
    `folded`; the plan, for what the test does with it."""
    facts = column_facts(CON, source)
    assert {c.name for c in facts[1] if c.joint} == kept
    plan = plan_collapse(facts, artifact=source.stem, rows_per_value=rows_per_value)
    assert [c.name for c in plan.chosen] == folded
    return plan


def answers_under_the_joint_probe(tmp_path: Path, source: Path, plan, query: str) -> set:
    """The distinct answers of `query` (a `{}` for the file) over the joint probe's input
    for `plan`, in the three arrival orders its runs read: one answer, for a correct step."""
    joint = tmp_path / "joint.parquet"
    multiply_rows(CON, source, joint, artifact=source.stem, collapse=plan)
    answers = set()
    for variant in (1, 2, 3):
        reordered = tmp_path / f"order{variant}.parquet"
        reorder(CON, joint, reordered, artifact=source.stem, variant=variant)
        answers.add(tuple(CON.execute(query.format(reordered)).fetchall()))
    return answers


def test_a_repeated_event_id_is_kept_whole_with_the_file_that_tells_its_copies_apart(tmp_path):
    """An at-least-once feed: each file repeats a few events of the one before, and a line
    number makes (file, line) the key. The event id, nearly unique, was left out of the
    search for keys and folded, so the copies of an event met in one file, and a correct
    `DISTINCT ON (event_id) ... ORDER BY event_id, file DESC` came out STABLE_ON_THIS_INPUT."""
    source = parquet_of(
        tmp_path, "feed.parquet",
        "SELECT CASE WHEN f > 0 AND n % 25 = 0 THEN (f - 1) * 500 + n ELSE f * 500 + n END "
        "AS event_id, 'part-' || f || '.csv' AS file, n AS line, "
        "(hash(f * 500 + n) % 100000)::BIGINT AS amount FROM range(4) a(f), range(500) b(n)",
    )  # fmt: skip
    plan = assert_kept_and_folded(source, {"event_id", "file", "line"}, ["amount"], 100)
    latest = (
        "SELECT DISTINCT ON (event_id) event_id, amount FROM read_parquet('{}') "
        "ORDER BY event_id, file DESC"
    )
    assert len(answers_under_the_joint_probe(tmp_path, source, plan, latest)) == 1


def test_on_a_large_input_pairs_are_ruled_out_on_a_share_of_the_values_first(tmp_path):
    """Counting every pair on the whole input nearly doubled the time of counting values on
    bench.dependences' worst case. Pairs are now counted first on the rows of one value in
    64 of the nearly unique column, which holds every copy of those values; only a pair
    unique there is counted on the whole input, and a key still is."""
    source = parquet_of(
        tmp_path, "feed.parquet",
        "SELECT CASE WHEN f > 0 AND n % 25 = 0 THEN (f - 1) * 30000 + n ELSE f * 30000 + n END "
        "AS event_id, 'part-' || f AS file, (hash(f * 30000 + n) % 7)::INT AS shelf "
        "FROM range(4) a(f), range(30000) b(n)",
    )  # fmt: skip
    queries: list[str] = []
    _, columns = column_facts(Traced(queries), source)
    assert {c.name for c in columns if c.joint} == {"event_id", "file"}
    screened = [q for q in queries if 'hash("event_id") % 64 = 0' in q]
    assert len(screened) == 1 and '("event_id", "shelf")' in screened[0]
    whole = [q for q in queries if '("event_id", "file")' in q and q not in screened]
    assert len(whole) == 1 and '("event_id", "shelf")' not in whole[0]


def test_a_time_that_rises_with_the_version_within_each_entity_is_kept_whole(tmp_path):
    """A change feed keyed by (entity, version), its time repeating across entities but
    rising with the version within each: tie collapse folded the time, and a correct latest
    change per entity by time came out STABLE_ON_THIS_INPUT. A nearly unique payload,
    in no order within an entity, is still folded."""
    source = parquet_of(
        tmp_path, "changes.parquet",
        "SELECT e AS entity_id, v AS version, TIMESTAMP '2026-01-01' + "
        "INTERVAL ((e % 2000) * 37 + v * 1000) SECOND AS changed_at, "
        "(hash(e, v) % 100000)::BIGINT AS payload FROM range(3000) a(e), range(6) b(v)",
    )  # fmt: skip
    plan = assert_kept_and_folded(source, {"entity_id", "version", "changed_at"}, ["payload"])
    latest = (
        "SELECT entity_id, arg_max(payload, changed_at) FROM read_parquet('{}') "
        "GROUP BY entity_id ORDER BY entity_id"
    )
    assert len(answers_under_the_joint_probe(tmp_path, source, plan, latest)) == 1


def test_a_measure_whose_few_repeats_another_column_happens_to_tell_apart_is_still_folded(
    tmp_path,
):
    """Four repeats that a column of four values tells apart happen about one time in three
    by chance: that says nothing of design, so the measure is not taken for half of a key
    and a sort on it is still stressed. (Its values are hashed: an id rising with the slot
    in every region would be kept whole for that, as a change's time is.)"""
    source = parquet_of(
        tmp_path, "grid.parquet",
        "SELECT n % 4 AS region, n // 4 AS slot, "
        "hash(CASE WHEN n % 100 = 1 THEN n - 1 ELSE n END) % 1000000 AS code "
        "FROM range(400) t(n)",
    )  # fmt: skip
    assert CON.execute(f"SELECT count(DISTINCT (code, region)) FROM '{source}'").fetchone() == (
        400,
    )
    assert_kept_and_folded(source, {"region", "slot"}, ["code"], 50)


def users(tmp_path: Path) -> Path:
    """Events of 600 users: each user_id has one user_name and one credit limit (a float),
    and the channel depends on nothing."""
    path = tmp_path / "users.parquet"
    CON.execute(
        "COPY (SELECT range AS event_id, range % 600 AS user_id, "
        "'u-' || (range % 600) AS user_name, (range % 600) * 1.5 AS credit, "
        f"hash(range * 3) % 100 AS channel FROM range(3000)) TO '{path}' (FORMAT parquet)"
    )
    return path


def decided(path: Path) -> tuple:
    """Combinations of the three user columns, user_ids, channels; and how many of the
    combinations the input never held."""
    return CON.execute(
        f"SELECT count(DISTINCT (user_id, user_name, credit)), count(DISTINCT user_id), "
        f"count(DISTINCT channel) FROM '{path}'"
    ).fetchone()


def test_tie_collapse_keeps_a_row_s_columns_in_the_order_they_were(tmp_path):
    """Folded apart, each into values of its own, a stay's check-in could pass its
    check-out, and a correct step that refuses a stay ending before it starts raised on
    the stressed input: AMPLIFICATION_FAILED, exit 5 (unseen89). Columns of one family with
    one at most the other on every row are now folded as one, each row taking both from
    one row of the input; a column in no such order (the guest) is folded on its own."""
    source = parquet_of(
        tmp_path,
        "stays.parquet",
        "SELECT b AS stay_id, (hash(b) % 500)::INT AS guest, "
        "DATE '2026-01-01' + (hash(b * 3) % 300)::INT AS check_in, "
        "DATE '2026-01-01' + (hash(b * 3) % 300)::INT + (1 + hash(b * 5) % 14)::INT AS check_out "
        "FROM range(20000) t(b)",
    )
    target = tmp_path / "out.parquet"
    outcome = collapse_ties(CON, source, target, artifact="stays")
    assert outcome == Applied(
        "stays.guest into 40 values, from 40 to 500 rows per value; stays.check_out into 40 "
        "values, from 64 to 500 rows per value, check_in moved with it, each row taking both "
        "from one row (on every row of the input one is at most the other, and still is)"
    )
    assert CON.execute(
        "SELECT bool_and(check_in < check_out), count(DISTINCT check_out), count(DISTINCT guest) "
        f"FROM '{target}'"
    ).fetchone() == (True, 40, 40)
    (unknown,) = CON.execute(
        f"SELECT count(*) FROM (SELECT check_in, check_out FROM '{target}' "
        f"EXCEPT SELECT check_in, check_out FROM '{source}')"
    ).fetchone()
    assert unknown == 0  # every row's stay is one real stay


def test_a_column_in_order_with_a_key_is_left_as_it_is_and_moved_along_with_it(tmp_path):
    """A call's end after its unique start: tie collapse folded the end on its own, and
    row multiplication moved the start alone past its range, so in both a copy's call
    ended before it began, and a correct step refusing such a call raised,
    AMPLIFICATION_FAILED, exit 5 (unseen90). The end is now left unfolded beside the key,
    and moved by as much as the key in row multiplication's added copy."""
    source = parquet_of(
        tmp_path,
        "calls.parquet",
        "SELECT TIMESTAMP '2026-04-01' + INTERVAL (i * 37) SECOND AS started_at, "
        "TIMESTAMP '2026-04-01' + INTERVAL (i * 37 + 5 + hash(i) % 600) SECOND AS ended_at, "
        "(hash(i * 3) % 50)::INT AS agent, DATE '9999-12-31' AS open_until FROM range(20000) t(i)",
    )
    target = tmp_path / "out.parquet"
    assert collapse_ties(CON, source, target, artifact="calls") == Applied(
        "calls.agent into 40 values, from 400 to 500 rows per value; calls.ended_at left as it "
        "is (on every row it is at most or at least the key started_at, which is kept)"
    )
    assert multiply_rows(CON, source, target, artifact="calls") == Applied(
        "calls 20,000 rows to 40,000, started_at moved past its range in the added copy, "
        "ended_at moved by as much as the key it keeps an order with"
    )
    assert CON.execute(
        "SELECT bool_and(started_at <= ended_at), count(DISTINCT started_at), "
        f"min(ended_at - started_at) = INTERVAL 5 SECOND FROM '{target}'"
    ).fetchone() == (True, 40000, True)
    assert rows_of(source) == rows_of(target)[:20000]  # the first copy as it was


def test_a_number_in_order_with_a_numeric_key_moves_with_it(tmp_path):
    """A range's high after its unique low, both integers: row multiplication moved the low
    alone past its range, so in the added copy every range ended before it started, and a
    correct step refusing that raised, AMPLIFICATION_FAILED, exit 5 (unseen93). The high now
    moves by as much as the low. A key kept as a date of eight digits moves by whole days,
    by a different amount on each row, and its partner stays as it is rather than be carried
    to a day no parse accepts."""
    source = parquet_of(
        tmp_path,
        "ranges.parquet",
        "SELECT i * 10 AS start_no, (i * 10 + 49) // 50 * 50 AS end_no, "
        "(hash(i) % 7)::BIGINT AS kind FROM range(2000) t(i)",
    )
    target = tmp_path / "out.parquet"
    assert multiply_rows(CON, source, target, artifact="ranges") == Applied(
        "ranges 2,000 rows to 4,000, start_no moved past its range in the added copy, "
        "end_no moved by as much as the key it keeps an order with"
    )
    assert CON.execute(
        "SELECT bool_and(start_no <= end_no), count(DISTINCT start_no), "
        f"count(DISTINCT kind) FROM '{target}'"
    ).fetchone() == (True, 4000, 7)
    assert rows_of(source) == rows_of(target)[:2000]  # the first copy as it was

    days = parquet_of(
        tmp_path,
        "days.parquet",
        "SELECT strftime(DATE '2024-01-01' + i::INT, '%Y%m%d')::BIGINT AS day_key, "
        "strftime(DATE '2024-01-01' + (i + 3 - i % 3)::INT, '%Y%m%d')::BIGINT AS due_key "
        "FROM range(400) t(i)",
    )
    assert multiply_rows(CON, days, target, artifact="days") == Applied(
        "days 400 rows to 800, day_key moved past its range in the added copy"
    )
    assert CON.execute(
        f"SELECT count(*) FROM '{target}' WHERE try_strptime(due_key::VARCHAR, '%Y%m%d') IS NULL "
        f"OR try_strptime(day_key::VARCHAR, '%Y%m%d') IS NULL"
    ).fetchone() == (0,)


def test_a_table_keyed_by_a_part_of_the_calendar_is_left_as_written(tmp_path):
    """A table of months keyed by month_num, 1 to 12: row multiplication moved the key to 13
    to 24, and a correct `make_date(2026, month_num, 1)` raised, AMPLIFICATION_FAILED,
    exit 5 (unseen77); repeated, the key would make a correct lag by month fire. A key
    that fills such a range, every value once, is left as written and said. Ids 1 to 40
    fill none and still move, and a key of month and day moves neither member."""
    months = parquet_of(
        tmp_path,
        "months.parquet",
        "SELECT m AS month_num, monthname(make_date(2026, m::INT, 1)) AS month_name "
        "FROM range(1, 13) t(m)",
    )
    target = tmp_path / "out.parquet"
    assert multiply_rows(CON, months, target, artifact="months") == Declined(
        "months is keyed by month_num (the months of a year, 1 to 12), which no added copy "
        "could repeat and none could move past without leaving the calendar, so it is left "
        "as written"
    )
    ids = parquet_of(tmp_path, "ids.parquet", "SELECT range AS store_id FROM range(1, 41)")
    assert multiply_rows(CON, ids, target, artifact="stores") == Applied(
        "stores 40 rows to 80, store_id moved past its range in the added copy"
    )
    days = parquet_of(
        tmp_path,
        "days.parquet",
        "SELECT month(d)::INT AS m, day(d)::INT AS dd FROM range(DATE '2024-01-01', "
        "DATE '2025-01-01', INTERVAL 1 DAY) t(d)",
    )
    outcome = multiply_rows(CON, days, target, artifact="holidays")
    assert isinstance(outcome, Declined) and "m (the months of a year, 1 to 12)" in outcome.reason


def test_a_hash_key_in_hex_and_an_email_keep_their_form_in_the_added_copy(tmp_path):
    """A hub's hash key, `md5(...)` as 32 hex digits, and a customer's email were suffixed in
    row multiplication's added copy (`...#1`, `user7@example.com#1`), and a correct step
    checking that a hash key is 32 hex digits, or that an email ends in a domain, raised,
    AMPLIFICATION_FAILED, exit 5 (unseen99). The copy now holds other hex digits of the same
    length and case, and the email carries the copy's number before its @ after a mark no
    local part holds. Text of digits alone is a number, and moves as one."""
    source = parquet_of(
        tmp_path,
        "customers.parquet",
        "SELECT md5('C' || i) AS hk, upper(left(sha256('C' || i), 40)) AS hk40, "
        "'user+' || i || '@example.com' AS email, lpad(i::VARCHAR, 18, '0') AS account "
        "FROM range(3000) t(i)",
    )
    target = tmp_path / "out.parquet"
    assert multiply_rows(CON, source, target, artifact="customers") == Applied(
        "customers 3,000 rows to 6,000, hk, hk40, email and account moved past their ranges in "
        "the added copy"
    )
    assert (
        CON.execute(
            "SELECT count(DISTINCT hk), count(DISTINCT hk40), count(DISTINCT email), "
            "count(DISTINCT account), bool_and(regexp_full_match(hk, '[0-9a-f]{32}')), "
            "bool_and(regexp_full_match(hk40, '[0-9A-F]{40}')), "
            "bool_and(split_part(email, '@', 2) = 'example.com'), "
            "bool_and(regexp_full_match(account, '[0-9]{18}')) "
            f"FROM '{target}'"
        ).fetchone()
        == (6000,) * 4 + (True,) * 4
    )
    assert rows_of(source) == rows_of(target)[:3000]  # the first copy as it was


def test_a_code_in_letters_keeps_its_length_and_letters_in_the_added_copy(tmp_path):
    """A currency table keyed by ISO code: the added copy wrote `USD#1`, and a correct step
    checking that a currency is three capital letters raised, AMPLIFICATION_FAILED
    (unseen134). Each letter now moves along the alphabet, by the fewest places at which
    no moved code meets one of the input's (here one: `USD` becomes `VTE`), lower case
    as lower case, whatever the length, digits and separators as they were. Where every
    move meets a code (all 26 letters), the suffix is what is left."""
    currencies = parquet_of(
        tmp_path,
        "currencies.parquet",
        "SELECT * FROM (VALUES ('USD', 'en'), ('EUR', 'de'), ('GBP', 'cy'), ('JPY', 'ja'), "
        "('CHF', 'rm'), ('KWD', 'ar'), ('X', 'zz'), ('AAPL', 'qq')) t(code, lang)",
    )
    target = tmp_path / "out.parquet"
    assert multiply_rows(CON, currencies, target, artifact="currencies") == Applied(
        "currencies 8 rows to 16, code and lang moved past their ranges in the added copy"
    )
    assert rows_of(target)[8:] == [
        ("VTE", "fo"), ("FVS", "ef"), ("HCQ", "dz"), ("KQZ", "kb"), ("DIG", "sn"),
        ("LXE", "bs"), ("Y", "aa"), ("BBQM", "rr"),
    ]  # fmt: skip
    assert rows_of(currencies) == rows_of(target)[:8]  # the first copy as it was
    # A shift of one meets a code here (`AB` to `BC`); the least that meets none is taken.
    pairs = parquet_of(tmp_path, "pairs.parquet", "SELECT * FROM (VALUES ('AB'), ('BC')) t(c)")
    multiply_rows(CON, pairs, target, artifact="pairs")
    assert rows_of(target) == [("AB",), ("BC",), ("CD",), ("DE",)]
    letters = parquet_of(
        tmp_path, "letters.parquet", "SELECT chr(65 + range::INT) AS c FROM range(26)"
    )
    multiply_rows(CON, letters, target, artifact="letters")
    assert rows_of(target)[26] == ("A#1",)
    # Letters with digits and separators: a booking reference, a postcode.
    mixed = parquet_of(
        tmp_path,
        "mixed.parquet",
        "SELECT * FROM (VALUES ('X7K2PQ', 'SW1A 1AA'), ('A1B2C3', 'W1A 0AX')) t(pnr, postcode)",
    )
    multiply_rows(CON, mixed, target, artifact="mixed")
    assert rows_of(target)[2:] == [("Y7L2QR", "TX1B 1BB"), ("B1C2D3", "X1B 0BY")]


def test_a_key_that_is_a_day_or_an_instant_moves_back_before_its_range(tmp_path):
    """A daily table's added copy held the days after the last one, and a correct step
    checking that no day is yet to come raised, AMPLIFICATION_FAILED (unseen135). Days
    and instants, as themselves or written as text, now move back before the least by the
    span of the input, where the last copy stays at or after the year 1000, and forward
    only where it would not (days near the year 1000)."""
    source = parquet_of(
        tmp_path,
        "daily.parquet",
        "SELECT DATE '2026-01-01' + i::INT AS day, strftime(DATE '2026-01-01' + i::INT, "
        "'%Y-%m-%d') AS day_text, strftime(DATE '2026-01-01' + i::INT, '%Y%m%d')::INT AS "
        "day_key, TIMESTAMP '2026-01-01 08:00' + to_hours(i) AS seen_at, "
        "(TIMESTAMP '2026-01-01 08:00' + to_hours(i))::TIMESTAMPTZ AS seen_tz, "
        "(TIMESTAMP '2026-01-01 08:00' + to_hours(i))::TIMESTAMP_NS AS seen_ns, "
        "strftime(TIMESTAMP '2026-01-01 08:00' + to_hours(i), '%Y-%m-%d %H:%M') AS seen_text "
        "FROM range(300) t(i)",
    )
    target = tmp_path / "out.parquet"
    multiply_rows(CON, source, target, artifact="daily")
    added = (
        "SELECT max(day), max(CAST(day_text AS DATE)), max(strptime(day_key::VARCHAR, "
        "'%Y%m%d'))::DATE, max(seen_at), max(seen_tz)::TIMESTAMP, max(seen_ns)::TIMESTAMP, "
        "max(strptime(seen_text, '%Y-%m-%d %H:%M')) FROM (SELECT * FROM read_parquet('{}') "
        "LIMIT 300 OFFSET 300)"
    )
    # A timestamp moves by its span to the microsecond, text by whole units of its finest
    # part (hours here).
    day, instant = datetime.date(2025, 12, 31), datetime.datetime(2026, 1, 1, 7, 59, 59, 999999)
    assert CON.execute(added.format(target)).fetchone() == (
        (day,) * 3 + (instant,) * 3 + (datetime.datetime(2026, 1, 1, 7, 0),)
    )
    assert CON.execute(
        f"SELECT count(DISTINCT day), count(DISTINCT seen_text) FROM '{target}'"
    ).fetchone() == (600, 600)
    # A day's end, the next day, or 9999-12-31 for "open": the open end stays open in the
    # added copy, and every end still follows its start.
    history = parquet_of(
        tmp_path,
        "history.parquet",
        "SELECT DATE '2026-01-01' + i::INT AS valid_from, CASE WHEN i = 299 THEN "
        "DATE '9999-12-31' ELSE DATE '2026-01-02' + i::INT END AS valid_to FROM range(300) t(i)",
    )
    multiply_rows(CON, history, target, artifact="history")
    assert CON.execute(
        f"SELECT count(*) FILTER (WHERE valid_to = DATE '9999-12-31'), "
        f"bool_and(valid_from < valid_to) FROM '{target}'"
    ).fetchone() == (2, True)
    # Near the year 1000, forward.
    early = parquet_of(
        tmp_path, "early.parquet", "SELECT DATE '1000-01-01' + i::INT AS day FROM range(300) t(i)"
    )
    multiply_rows(CON, early, target, artifact="early")
    assert CON.execute(f"SELECT min(day) FROM '{target}'").fetchone() == (
        datetime.date(1000, 1, 1),
    )


def test_the_same_ids_in_two_inputs_move_alike(tmp_path):
    """Orders, and one payment each for most of them (order_id unique in payments too): each
    input's key moved by its own range, so a copy's payment named an order no copy held,
    and a correct step refusing orphaned payments raised, AMPLIFICATION_FAILED, exit 5
    (unseen100). Ids from 0 up now move by the first power of ten past the greatest."""
    orders = parquet_of(
        tmp_path,
        "orders.parquet",
        "SELECT i AS order_id FROM range(1, 20001) t(i) WHERE hash(i * 11) % 5 <> 0",
    )
    payments = parquet_of(
        tmp_path,
        "payments.parquet",
        "SELECT 900000 + i AS payment_id, i AS order_id FROM range(40, 19951) t(i) "
        "WHERE hash(i * 11) % 5 <> 0 AND hash(i * 7) % 10 <> 0",
    )
    for source, name in ((orders, "orders"), (payments, "payments")):
        multiply_rows(CON, source, tmp_path / f"{name}-x2.parquet", artifact=name)
    assert CON.execute(
        f"SELECT count(*), count(*) FILTER (WHERE o.order_id IS NULL) "
        f"FROM '{tmp_path / 'payments-x2.parquet'}' p "
        f"LEFT JOIN '{tmp_path / 'orders-x2.parquet'}' o USING (order_id)"
    ).fetchone() == (2 * len(rows_of(payments)), 0)


def test_tie_collapse_keeps_what_one_column_decides_in_another(tmp_path):
    """Folded apart, two users merged into one user_id kept their two names, and a correct
    `any_value(user_name) ... GROUP BY user_id` fired. A column the input ties to a folded
    one now moves with it, each row taking both from one row; the channel, tied to nothing,
    is folded on its own as before."""
    source = users(tmp_path)
    assert decided(source) == (600, 600, 100)
    target = tmp_path / "out.parquet"
    outcome = collapse_ties(CON, source, target, artifact="users", rows_per_value=50)
    assert outcome == Applied(
        "users.user_id into 60 values, from 5 to 50 rows per value, user_name and credit "
        "moved with it, each row taking all of them from one row (user_id decides them in "
        "the input, and still does); users.channel into 60 values, from 30 to 50 rows per value"
    )
    assert decided(target) == (60, 60, 60)
    (unknown,) = CON.execute(
        f"SELECT count(*) FROM (SELECT user_id, user_name, credit FROM '{target}' "
        f"EXCEPT SELECT user_id, user_name, credit FROM '{source}')"
    ).fetchone()
    assert unknown == 0  # every row's user columns are one real user's
    assert [r[0] for r in rows_of(target)] == list(range(3000))  # ids and order kept

    # The joint probe's input: the first copy as it was, the added one collapsed, and
    # still one name and one limit per user_id across both.
    facts = column_facts(CON, source)
    plan = plan_collapse(facts, artifact="users", rows_per_value=50)
    plan = dependent_units(CON, source, plan, facts, artifact="users")
    stacked = tmp_path / "stacked.parquet"
    multiply_rows(CON, source, stacked, artifact="users", facts=facts, collapse=plan)
    combinations, ids, _ = decided(stacked)
    assert combinations == ids == 600


def test_two_folded_columns_that_decide_one_column_fold_as_one(tmp_path):
    """A country that both the user and the city decide, though neither decides the other:
    folded apart, with the country moving with either, what the other decides would
    break. All three move as one, and each still decides what it did."""
    source = tmp_path / "geo.parquet"
    CON.execute(
        "COPY (SELECT range AS event_id, hash(range) % 400 AS user_id, "
        "12 * (hash(range * 7) % 12) + (hash(range) % 400) % 12 AS city, "
        f"(hash(range) % 400) % 12 AS country FROM range(3000)) TO '{source}' (FORMAT parquet)"
    )
    facts = column_facts(CON, source)
    assert {c.name: c.distinct for c in facts[1]}["city"] == 144
    target = tmp_path / "out.parquet"
    outcome = collapse_ties(CON, source, target, artifact="geo", rows_per_value=50)
    assert outcome == Applied(
        "geo.user_id into 60 values, from 8 to 50 rows per value, city and country moved "
        "with it, each row taking all of them from one row (they depend on one another "
        "in the input, and still do)"
    )
    (users, user_countries, cities, city_countries) = CON.execute(
        f"SELECT count(DISTINCT user_id), count(DISTINCT (user_id, country)), "
        f"count(DISTINCT city), count(DISTINCT (city, country)) FROM '{target}'"
    ).fetchone()
    assert users == user_countries == 60
    assert cities == city_countries


def folded_keeping(tmp_path, rows: str, by: list[str], decided: str) -> str:
    """Tie collapse of `rows` at 50 rows per value, checked to leave `decided` with one
    value per combination of `by`, as the input has it; what it says it did."""
    source = parquet_of(tmp_path, "input.parquet", rows)
    target = tmp_path / "out.parquet"
    outcome = collapse_ties(CON, source, target, artifact="sales", rows_per_value=50)
    combinations, with_it = CON.execute(
        f"SELECT count(DISTINCT ({', '.join(by)})), "
        f"count(DISTINCT ({', '.join(by)}, {decided})) FROM '{target}'"
    ).fetchone()
    assert combinations == with_it
    return outcome.detail


def test_a_column_two_columns_decide_together_folds_with_both(tmp_path):
    """A price per product and region: neither decides it alone, so it was folded apart
    from the product, merged products kept their prices within a region, and a correct
    `any_value(unit_price)` per product and region fired. The three move as one."""
    assert folded_keeping(
        tmp_path,
        "SELECT range AS sale_id, hash(range) % 300 AS product_id, "
        "['n', 's', 'e', 'w', 'c'][1 + (hash(range * 3) % 5)::INT] AS region, "
        "hash((hash(range) % 300) * 10 + hash(range * 3) % 5) % 5000 AS unit_price "
        "FROM range(6000)",
        ["product_id", "region"],
        "unit_price",
    ) == (
        "sales.unit_price into 120 values, from 5 to 50 rows per value, product_id and "
        "region moved with it, each row taking all of them from one row (they depend on "
        "one another in the input, and still do)"
    )


def test_a_column_three_columns_decide_together_folds_with_all_three(tmp_path):
    """A price per product, region and tier: no column decides it alone, nor the product
    with either of the others, so it was folded apart from the product, merged products
    kept their prices within a region and tier, and a correct `any_value(price)` per
    product, region and tier fired (/tmp/unseen47/fd3.py, a price list joined to sales).
    The four move as one."""
    assert folded_keeping(
        tmp_path,
        "SELECT range AS sale_id, range % 400 AS product_id, (range // 400) % 5 AS region, "
        "(range // 2000) % 4 AS tier, "
        "hash(range % 400, (range // 400) % 5, (range // 2000) % 4) % 5000 AS price "
        "FROM range(16000)",
        ["product_id", "region", "tier"],
        "price",
    ) == (
        "sales.price into 320 values, from 4 to 50 rows per value, product_id, region "
        "and tier moved with it, each row taking all of them from one row (they depend on "
        "one another in the input, and still do)"
    )


def test_a_column_two_folded_columns_decide_folds_with_both(tmp_path):
    """A negotiated price per customer and product, with too many of each for either to be
    a column of few values: the three were folded apart, merged customers and products kept
    their prices, and a correct `any_value(price)` per customer and product fired
    (/tmp/unseen47/fd_two_chosen.py). The three move as one."""
    detail = folded_keeping(
        tmp_path,
        "SELECT range AS sale_id, hash(range) % 1000 AS customer_id, "
        "hash(range * 7) % 800 AS product_id, "
        "hash(hash(range) % 1000, hash(range * 7) % 800) % 50000 AS price FROM range(20000)",
        ["customer_id", "product_id"],
        "price",
    )
    assert "customer_id and product_id moved with it" in detail


def test_a_pair_whose_values_never_repeat_decides_nothing(tmp_path):
    """All but five (group, day) pairs here are on one row, and the measure agrees on those
    five by chance: taken as a dependence, it would fold the measure with the group. A
    pair is read as deciding a column only where ten of its combinations or more repeat."""
    source = parquet_of(
        tmp_path,
        "unique_pairs.parquet",
        "SELECT range AS id, range % 1500 AS grp, "
        "CASE WHEN range BETWEEN 1500 AND 1504 THEN (range - 1500) % 7 ELSE range % 7 END AS day, "
        "CASE WHEN range BETWEEN 1500 AND 1504 THEN hash(range - 1500) ELSE hash(range) END % 900 "
        "AS measure FROM range(3000)",
    )
    outcome = collapse_ties(CON, source, tmp_path / "out.parquet", artifact="p", rows_per_value=50)
    assert outcome == Applied(
        "p.grp into 60 values, from 2 to 50 rows per value; "
        "p.measure into 60 values, from 3 to 50 rows per value"
    )


def test_row_multiplication_keeps_every_key_a_key(tmp_path):
    source = customers(tmp_path)
    for name, collapse in [
        ("rows", None),
        ("joint", plan_collapse(column_facts(CON, source), artifact="customers")),
    ]:
        target = tmp_path / f"{name}.parquet"
        multiply_rows(CON, source, target, artifact="customers", collapse=collapse)
        (rows, ids, emails, regions) = CON.execute(
            f"SELECT count(*), count(DISTINCT customer_id), count(DISTINCT email), "
            f"count(DISTINCT region) FROM '{target}'"
        ).fetchone()
        assert (rows, ids, emails, regions) == (6000, 6000, 6000, 5), name


def test_row_multiplication_moves_a_key_near_the_top_of_its_type_below_its_range(tmp_path):
    """Ids counted down from the largest BIGINT, and dates in the year 9999, could not move
    up past their range, and the added copy repeated them without a word: a key no
    longer, where the report said every key stayed one."""
    source = parquet_of(
        tmp_path,
        "top.parquet",
        "SELECT 9223372036854775807 - range AS big, DATE '9999-12-01' + range::INT AS d, "
        "range % 7 AS g FROM range(20)",
    )
    target = tmp_path / "out.parquet"
    outcome = multiply_rows(CON, source, target, artifact="top")
    assert outcome == Applied(
        "top 20 rows to 40, big and d moved past their ranges in the added copy"
    )
    assert CON.execute(
        f"SELECT count(DISTINCT big), count(DISTINCT d), min(d) >= DATE '1000-01-01' "
        f"FROM '{target}'"
    ).fetchone() == (40, 40, True)


def test_row_multiplication_keeps_a_hash_key_distinct_by_flipping_its_bits(tmp_path):
    """A hash spans nearly all of its type, so no shift fits beside it, and the added copy
    repeated it: a surrogate key made by hashing was a key no longer. The added copy's
    bits are flipped instead, where no flipped value meets an original."""
    source = parquet_of(
        tmp_path, "hashed.parquet", "SELECT hash(range) AS h, range % 7 AS g FROM range(1000)"
    )
    target = tmp_path / "out.parquet"
    multiply_rows(CON, source, target, artifact="hashed")
    assert CON.execute(
        f"SELECT count(DISTINCT h), typeof(any_value(h)) FROM '{target}'"
    ).fetchone() == (2000, "UBIGINT")
    assert rows_of(source) == rows_of(target)[:1000]  # the first copy as it was


def test_row_multiplication_says_which_key_it_could_not_move(tmp_path):
    """A BIGINT key from one end of its type to the other, holding each value's flipped
    partner too, has nowhere to go: the added copy repeats it, and the detail says so
    rather than pass it off as a key kept."""
    ends = "(VALUES ((-9223372036854775808)::BIGINT), (9223372036854775807::BIGINT)) t(k)"
    flipped = f"SELECT xor(k, 6148914691236517205), 2 FROM {ends}"
    source = parquet_of(
        tmp_path, "full.parquet", f"SELECT k, 1 AS g FROM {ends} UNION ALL {flipped}"
    )
    assert multiply_rows(CON, source, tmp_path / "out.parquet", artifact="full") == Applied(
        "full 4 rows to 8, k not moved (it spans too much of its type to move "
        "past, or is of a type, or text in a form, that does not move), so the added copy "
        "repeats it"
    )


def test_row_multiplication_keeps_a_float_key_distinct_with_the_next_float_up(tmp_path):
    """A score on no two rows alike was repeated by the added copy, so a correct
    `arg_max(id, score)` per group met ties the input never held. Each copy now takes the
    next float up, a DOUBLE and a FLOAT alike, and the first copy is as it was. Where the
    next float up is a value the column holds already, it is repeated, and said so."""
    source = parquet_of(
        tmp_path,
        "scores.parquet",
        "SELECT range AS id, (range * 0.731 + (hash(range) % 1000) * 1e-7)::DOUBLE AS score, "
        "(range / 3.0)::FLOAT AS ratio, range % 7 AS g FROM range(3000)",
    )
    target = tmp_path / "out.parquet"
    outcome = multiply_rows(CON, source, target, artifact="scores")
    assert outcome == Applied(
        "scores 3,000 rows to 6,000, id moved past its range in the added copy, "
        "score and ratio raised to the next float up in the added copy"
    )
    assert CON.execute(
        f"SELECT count(DISTINCT score), count(DISTINCT ratio), typeof(any_value(ratio)) "
        f"FROM '{target}'"
    ).fetchone() == (6000, 6000, "FLOAT")
    assert rows_of(source) == rows_of(target)[:3000]

    adjacent = parquet_of(
        tmp_path,
        "adjacent.parquet",
        "SELECT x AS score, 1 AS g FROM (VALUES (1.0::DOUBLE), "
        "(nextafter(1.0::DOUBLE, 2.0::DOUBLE)), (5.0::DOUBLE)) t(x)",
    )
    assert multiply_rows(CON, adjacent, tmp_path / "out2.parquet", artifact="adjacent") == Applied(
        "adjacent 3 rows to 6, score not moved (some of its values repeat or lie a float "
        "apart, so no next float up keeps the copies apart), so the added copy repeats it"
    )


def test_row_multiplication_repeats_a_json_key_rather_than_write_what_is_not_json(tmp_path):
    """A JSON column with a value per row is a key, and was suffixed like other text:
    `{"k": 0}#1` is no JSON, so writing the stressed input raised and row multiplication
    failed on a step that had done nothing wrong."""
    detail, _, target = multiplied(
        tmp_path,
        "docs",
        "SELECT i % 3 AS g, ('{\"k\": ' || i || '}')::JSON AS doc FROM range(6) t(i)",
    )
    assert detail == (
        "docs 6 rows to 12, doc not moved (it spans too much of its type to move "
        "past, or is of a type, or text in a form, that does not move), so the added copy "
        "repeats it"
    )
    assert CON.execute(
        f"SELECT count(*), bool_and(json_valid(doc)), any_value(typeof(doc)) "
        f"FROM read_parquet('{target}')"
    ).fetchone() == (12, True, "JSON")


def test_row_multiplication_moves_text_a_step_parses_only_in_forms_that_still_parse(tmp_path):
    """Text keys a step reads as another type were suffixed (`{"id": 7}#1`) or had their
    trailing number moved (`10:00:65`): a correct step that parsed them raised, and row
    multiplication failed on it (a JSON payload per session, unseen72). Timestamps written
    as DuckDB writes them, or in an ISO form every value shares, now move as timestamps, in
    whole units of their finest part, and are written back in that form; timestamps in a
    form of their own and JSON text are left as they are. (A time of day, and a timestamp
    with an offset, move too since 0.7.12: the tests below.)"""
    detail, source, target = multiplied(
        tmp_path,
        "texts",
        "SELECT i % 3 AS g, "
        "CAST(TIMESTAMP '2026-03-01' + INTERVAL (i * 7) SECOND AS VARCHAR) AS at_s, "
        "CAST(TIMESTAMP '2026-03-01' + INTERVAL (i * 70) MILLISECOND AS VARCHAR) AS at_ms, "
        "strftime(TIMESTAMP '2026-03-01' + INTERVAL (i * 7) SECOND, '%Y-%m-%dT%H:%M:%SZ') AS iso, "
        "strftime(TIMESTAMP '2026-03-01' + INTERVAL (i * 70) MILLISECOND, "
        "'%Y-%m-%dT%H:%M:%S.%gZ') AS iso_ms, "
        "strftime(TIMESTAMP '2026-03-01' + INTERVAL (i * 7) SECOND, '%Y%m%dT%H%M%SZ') AS compact, "
        "strftime(TIMESTAMP '2026-03-01' + INTERVAL (i * 7) SECOND, '%Y-%m-%d %H:%M:%S+01') AS zoned, "
        "strftime(TIMESTAMP '2026-03-01' + INTERVAL (i * 7) SECOND, '%H:%M:%S') AS clock, "
        "strftime(TIMESTAMP '2026-03-01' + INTERVAL (i * 7) MINUTE, '%Y-%m-%d %H:%M') AS at_min, "
        "strftime(TIMESTAMP '2026-03-01' + INTERVAL (i * 7) SECOND, '%m/%d/%Y %H:%M:%S') AS us_dt, "
        "strftime(TIMESTAMP '2026-03-01' + INTERVAL (i * 7) MINUTE, '%m/%d/%Y %I:%M %p') AS us_pm, "
        "'{\"id\": ' || i || '}' AS payload, 'ORD-' || lpad(i::VARCHAR, 5, '0') AS code, "
        "((i - 250)::DOUBLE / 100)::VARCHAR AS amount "
        "FROM range(500) t(i)",
    )
    assert detail == (
        "texts 500 rows to 1,000, at_s, at_ms, iso, iso_ms, compact, zoned, clock, at_min, us_dt, us_pm, "
        "code and amount moved past their ranges in the added copy, payload not moved (it spans too "
        "much of its type to move past, or is of a type, or text in a form, that does not "
        "move), so the added copy repeats it"
    )
    scan = f"FROM read_parquet('{target}')"
    assert (
        CON.execute(
            "SELECT count(DISTINCT at_s), count(DISTINCT at_ms), count(DISTINCT iso), "
            "count(DISTINCT iso_ms), count(DISTINCT compact), count(DISTINCT code), "
            "count(DISTINCT CAST(amount AS DECIMAL(9, 2))), "
            "bool_and(CAST(CAST(at_s AS TIMESTAMP) AS VARCHAR) = at_s), "
            "bool_and(CAST(CAST(at_ms AS TIMESTAMP) AS VARCHAR) = at_ms), "
            "bool_and(at_s NOT LIKE '%.%'), "
            "bool_and(strftime(strptime(iso, '%Y-%m-%dT%H:%M:%SZ'), '%Y-%m-%dT%H:%M:%SZ') = iso), "
            "bool_and(strftime(strptime(iso_ms, '%Y-%m-%dT%H:%M:%S.%gZ'), "
            "'%Y-%m-%dT%H:%M:%S.%gZ') = iso_ms), "
            "bool_and(strftime(strptime(compact, '%Y%m%dT%H%M%SZ'), '%Y%m%dT%H%M%SZ') = compact), "
            "bool_and(TRY_CAST(zoned AS TIMESTAMPTZ) IS NOT NULL), "
            f"bool_and(TRY_CAST(clock AS TIME) IS NOT NULL), bool_and(json_valid(payload)), "
            "count(DISTINCT clock), count(DISTINCT at_min), count(DISTINCT us_dt), count(DISTINCT us_pm), "
            "bool_and(strftime(strptime(us_pm, '%m/%d/%Y %I:%M %p'), '%m/%d/%Y %I:%M %p') = us_pm), "
            "bool_and(strftime(strptime(at_min, '%Y-%m-%d %H:%M'), '%Y-%m-%d %H:%M') = at_min), "
            "bool_and(strftime(strptime(us_dt, '%m/%d/%Y %H:%M:%S'), '%m/%d/%Y %H:%M:%S') = us_dt) "
            f"{scan}"
        ).fetchone()
        == (1000,) * 7 + (True,) * 9 + (1000,) * 4 + (True,) * 3
    )
    assert rows_of(source) == rows_of(target)[:500]  # the first copy as it was


def test_row_multiplication_moves_a_period_kept_as_text_by_whole_periods(tmp_path):
    """A month kept as text (`2024-03`, the key of a monthly table) ends in a number, and
    that number was moved past its range, to `2024-14`: a correct `CAST(month || '-01' AS
    DATE)` raised, and row multiplication failed on it, exit 5 (unseen83); an ISO week
    became `2024-W54`, a month kept as the integer 202403 became 202413. Months, ISO weeks,
    quarters and days written otherwise than ISO 8601 now move by whole periods past their
    range, written back in their own form; since 0.7.15 back before it, as days do."""
    detail, source, target = multiplied(
        tmp_path,
        "periods",
        "SELECT strftime(DATE '2023-01-01' + INTERVAL (i) MONTH, '%Y-%m') AS month, "
        "strftime(DATE '2023-01-01' + INTERVAL (i) MONTH, '%b %Y') AS month_name, "
        "strftime(DATE '2024-01-01' + INTERVAL (7 * i) DAY, '%G-W%V') AS week, "
        "strftime(DATE '2024-02-20' + i::INT, '%m/%d/%Y') AS us, "
        "strftime(DATE '2024-02-20' + i::INT, '%-m/%-d/%Y') AS unpadded, "
        "strftime(DATE '2024-02-20' + i::INT, '%d.%m.%Y') AS eu, "
        "strftime(DATE '2024-02-20' + i::INT, '%Y/%m/%d') AS slashed, "
        "(2015 + i // 4) || '-Q' || (i % 4 + 1) AS quarter, "
        "CAST(strftime(DATE '2021-01-01' + INTERVAL (i) MONTH, '%Y%m') AS INTEGER) AS ym_int, "
        "strftime(DATE '2021-01-01' + INTERVAL (i) MONTH, '%Y%m') AS ym_text, "
        "CAST(strftime(TIMESTAMP '2026-03-01' + INTERVAL (i * 5) HOUR, '%Y%m%d%H') AS BIGINT) "
        "AS ymdh, strftime(TIMESTAMP '2026-03-01' + INTERVAL (i * 5) HOUR, '%Y-%m-%d %H') AS hourly "
        "FROM range(40) t(i)",
    )
    assert detail == (
        "periods 40 rows to 80, month, month_name, week, us, unpadded, eu, slashed, quarter, "
        "ym_int, ym_text, ymdh and hourly "
        "moved past their ranges in the added copy"
    )
    assert CON.execute(
        "SELECT count(DISTINCT month), count(strptime(month_name, '%b %Y')), "
        "count(DISTINCT ymdh), count(strptime(CAST(ymdh AS VARCHAR), '%Y%m%d%H')), "
        "count(DISTINCT hourly), count(strptime(hourly, '%Y-%m-%d %H')), "
        "count(DISTINCT week), count(DISTINCT us), "
        "count(DISTINCT unpadded), count(DISTINCT eu), count(DISTINCT quarter), "
        "count(DISTINCT ym_int), count(DISTINCT ym_text), "
        "count(CAST(month || '-01' AS DATE)), count(strptime(week, '%G-W%V')), "
        "count(strptime(us, '%m/%d/%Y')), count(strptime(unpadded, '%-m/%-d/%Y')), "
        "count(strptime(eu, '%d.%m.%Y')), count(DISTINCT slashed), "
        "count(make_date(CAST(left(quarter, 4) AS INT), CAST(right(quarter, 1) AS INT) * 3, 1)), "
        "count(strptime(CAST(ym_int AS VARCHAR), '%Y%m')), count(strptime(ym_text, '%Y%m')), "
        "bool_and(strftime(strptime(unpadded, '%-m/%-d/%Y'), '%-m/%-d/%Y') = unpadded), "
        "bool_and(strftime(strptime(slashed, '%Y/%m/%d'), '%Y/%m/%d') = slashed), "
        "min(month), min(quarter), min(ym_int) "
        f"FROM read_parquet('{target}')"
    ).fetchone() == (80,) * 22 + (True, True, "2019-09", "2005-Q1", 201709)
    assert rows_of(source) == rows_of(target)[:40]  # the first copy as it was


def test_row_multiplication_moves_a_timestamp_with_its_offset_and_an_ipv4_address(tmp_path):
    """A timestamp written with its offset (`2026-03-01T10:00:05+00:00`, as Python's
    `isoformat()` writes an aware time) was repeated by the added copy beside a key that
    moved, so a correct row number ordered by it came out STABLE_ON_THIS_INPUT; an IPv4
    address had its last part moved past 255, and a step reading it as a byte raised
    (unseen84). The time before the offset now moves as other timestamps do, each value
    keeping its own offset, and an address moves as the 32-bit number it is."""
    detail, source, target = multiplied(
        tmp_path,
        "devices",
        "SELECT i AS device_id, "
        "strftime(TIMESTAMP '2026-03-01' + INTERVAL (i * 61) SECOND, '%Y-%m-%dT%H:%M:%S') "
        "|| ['+00:00', '-05:00', '+0530'][1 + i % 3] AS seen_at, "
        "CAST(TIMESTAMPTZ '2026-03-01 00:00:00+00' + INTERVAL (i) HOUR AS VARCHAR) AS duck_tz, "
        "'10.0.' || (i // 256) || '.' || (i % 256) AS ip FROM range(600) t(i)",
    )
    assert detail == (
        "devices 600 rows to 1,200, device_id, seen_at, duck_tz and ip moved past their ranges "
        "in the added copy"
    )
    assert CON.execute(
        "SELECT count(DISTINCT seen_at), count(DISTINCT duck_tz), count(DISTINCT ip), "
        "count(CAST(seen_at AS TIMESTAMPTZ)), count(CAST(duck_tz AS TIMESTAMPTZ)), "
        "count(CAST(split_part(ip, '.', 4) AS UTINYINT)), "
        "bool_and(regexp_extract(seen_at, '([+-][0-9:]+)$', 1) "
        "= ['+00:00', '-05:00', '+0530'][1 + file_row_number % 600 % 3]), "
        "bool_and(regexp_full_match(seen_at, '[0-9-]{10}T[0-9:]{8}[+-][0-9:]{4,5}')) "
        f"FROM read_parquet('{target}', file_row_number = true)"
    ).fetchone() == (1200,) * 6 + (True, True)
    assert rows_of(source) == rows_of(target)[:600]  # the first copy as it was


def test_row_multiplication_moves_a_time_of_day_round_the_clock(tmp_path):
    """A unique time of day (the slots of a day, a TIME or text) has nowhere past its range
    to go, so the added copy repeated it while the slot's id moved: a correct row number
    ordered by the time met a tie between each row and its copy, which differed in the id,
    and came out STABLE_ON_THIS_INPUT, exit 4, on correct code (unseen82). Each copy now
    moves on by the values' span, in whole units of their finest part, round past
    midnight, and text is written back in its form; a TIME spanning more than half the
    day moves by half its finest part instead. Text that fills the day has no room in its
    form; repeated, it made a correct row number by it fire (unseen98), so its input is now
    left as written, whatever else in it could move."""
    detail, source, target = multiplied(
        tmp_path,
        "slots",
        "SELECT i AS slot_id, TIME '20:00:00' + INTERVAL (i * 17) SECOND AS starts, "
        "CAST(TIME '20:00:00' + INTERVAL (i * 17) SECOND AS VARCHAR) AS at_text, "
        "strftime(TIMESTAMP '2026-01-01 08:00:00' + INTERVAL (i) MINUTE, '%H:%M') AS hhmm, "
        "strftime(TIMESTAMP '2026-01-01 08:00:00' + INTERVAL (i * 10) MILLISECOND, "
        "'%H:%M:%S.%g') AS at_ms, "
        "strftime(TIMESTAMP '2026-01-01 08:00:00' + INTERVAL (i) MINUTE, '%-I:%M %p') AS ampm, "
        "i % 7 AS load FROM range(600) t(i)",
    )
    assert detail == (
        "slots 600 rows to 1,200, slot_id, starts, at_text, hhmm, at_ms and ampm moved past their "
        "ranges in the added copy"
    )
    assert CON.execute(
        "SELECT count(DISTINCT starts), count(DISTINCT at_text), count(DISTINCT hhmm), "
        "count(DISTINCT at_ms), bool_and(CAST(CAST(at_text AS TIME) AS VARCHAR) = at_text), "
        "bool_and(strftime(strptime(hhmm, '%H:%M'), '%H:%M') = hhmm), "
        "bool_and(strftime(strptime(at_ms, '%H:%M:%S.%g'), '%H:%M:%S.%g') = at_ms), "
        "bool_and(starts = CAST(at_text AS TIME)), count(DISTINCT ampm), "
        "bool_and(strftime(strptime(ampm, '%-I:%M %p'), '%-I:%M %p') = ampm) "
        f"FROM read_parquet('{target}')"
    ).fetchone() == (1200,) * 4 + (True,) * 4 + (1200, True)
    assert rows_of(source) == rows_of(target)[:600]  # the first copy as it was
    # From 20:00 on, a span of 10,184 s: the copy of every slot from 21:10:16 on goes round
    # past midnight, and is a time of day all the same.
    assert CON.execute(
        f"SELECT count(*) FILTER (WHERE starts < TIME '20:00:00'), min(starts) "
        f"FROM read_parquet('{target}') WHERE slot_id >= 600"
    ).fetchone() == (352, datetime.time(0, 0))

    # Every minute of the day: a TIME takes the half minute; text in hours and minutes has
    # no half minute to take, in either form, and leaves its input as written.
    detail, _, target = multiplied(
        tmp_path,
        "minutes",
        "SELECT i AS minute_id, TIME '00:00:00' + INTERVAL (i) MINUTE AS starts "
        "FROM range(1440) t(i)",
    )
    assert detail == (
        "minutes 1,440 rows to 2,880, minute_id and starts moved past their ranges in the added "
        "copy"
    )
    assert CON.execute(
        "SELECT count(DISTINCT starts), count(*) FILTER (WHERE second(starts) = 30) "
        f"FROM read_parquet('{target}')"
    ).fetchone() == (2880, 1440)
    for form in ("%H:%M", "%-I:%M %p"):
        texts = parquet_of(
            tmp_path,
            "texts.parquet",
            f"SELECT i AS minute_id, strftime(TIMESTAMP '2026-01-01' + INTERVAL (i) MINUTE, "
            f"'{form}') AS hhmm FROM range(1440) t(i)",
        )
        assert multiply_rows(CON, texts, target, artifact="minutes") == Declined(
            "minutes is keyed by hhmm (times of day, 1,440 of them, with no room left in the day "
            "for a copy), which no added copy could repeat and none could move past without "
            "leaving the calendar, so it is left as written"
        )


def test_row_multiplication_moves_one_member_of_a_key_of_several_columns(tmp_path):
    """Every member of a key of year, month and day moved past its range, so the added
    copy held (2027, 13, 32) and a correct `make_date(y, m, dd)` raised: row
    multiplication failed on a step that had done nothing wrong (unseen75). One moved
    member keeps the key distinct: a date or the like first, else the one with the fewest
    values that can move, and a year moves by whole 400-year cycles, so 29 February still
    exists. Where that member cannot move (JSON text), the next one does."""
    detail, source, target = multiplied(
        tmp_path,
        "daily",
        "SELECT year(d)::INT AS y, month(d)::INT AS m, day(d)::INT AS dd, "
        "(hash(d) % 1000)::INT AS visits FROM (SELECT DATE '2024-01-01' + i::INT AS d "
        "FROM range(900) t(i))",
    )
    assert detail == "daily 900 rows to 1,800, y moved past its range in the added copy"
    assert CON.execute(
        "SELECT count(DISTINCT (y, m, dd)), count(make_date(y, m, dd)), min(y) FILTER "
        f"(WHERE y > 2026), bool_and(m BETWEEN 1 AND 12) FROM read_parquet('{target}')"
    ).fetchone() == (1800, 1800, 2424, True)
    assert rows_of(source) == rows_of(target)[:900]

    detail, _, target = multiplied(
        tmp_path,
        "tagged",
        "SELECT '{\"kind\": ' || (i % 3) || '}' AS tag, i // 3 AS n, i % 2 AS g "
        "FROM range(300) t(i)",
    )
    assert detail == "tagged 300 rows to 600, n moved past its range in the added copy"
    assert CON.execute(
        f"SELECT count(DISTINCT (tag, n)), bool_and(json_valid(tag)) FROM read_parquet('{target}')"
    ).fetchone() == (600, True)

    # A month beside a store, with fewer values than the stores: the store moves, since a
    # month moved past 12 is no month and `make_date` raised on it.
    detail, _, target = multiplied(
        tmp_path,
        "targets",
        "SELECT 'store ' || s AS store, m::INT AS month, (hash(s, m) % 900)::INT AS goal "
        "FROM range(1, 21) a(s), range(1, 13) b(m)",
    )
    assert detail == "targets 240 rows to 480, store moved past its range in the added copy"
    assert CON.execute(
        "SELECT count(DISTINCT (store, month)), count(make_date(2026, month, 1)) "
        f"FROM read_parquet('{target}')"
    ).fetchone() == (480, 480)

    # A date moves before a member with fewer values: an hour moved past 23 is no hour.
    detail, _, target = multiplied(
        tmp_path,
        "hourly",
        "SELECT DATE '2026-01-01' + (i // 24)::INT AS day, (i % 24)::INT AS hour "
        "FROM range(24 * 90) t(i)",
    )
    assert detail == "hourly 2,160 rows to 4,320, day moved past its range in the added copy"
    assert CON.execute(
        "SELECT count(DISTINCT (day, hour)), count(make_time(hour, 0, 0)) "
        f"FROM read_parquet('{target}')"
    ).fetchone() == (4320, 4320)


def test_row_multiplication_keeps_a_blob_key_distinct_and_a_hash_key_at_its_length(tmp_path):
    """A BLOB key (a Data Vault hash key, `unhex(md5(...))`) was repeated by the added copy,
    so a correct step relying on it met duplicates no production input holds."""
    source = parquet_of(
        tmp_path,
        "hubs.parquet",
        "SELECT unhex(md5(i::VARCHAR)) AS hash_key, unhex(sha256(i::VARCHAR)) AS sha_key, "
        "CAST(repeat('x', 1 + i) AS BLOB) AS code, i % 3 AS g FROM range(50) t(i)",
    )
    target = tmp_path / "out.parquet"
    assert multiply_rows(CON, source, target, artifact="hubs") == Applied(
        "hubs 50 rows to 100, hash_key, sha_key and code moved past their ranges in the added copy"
    )
    scan = f"FROM read_parquet('{target}')"
    assert CON.execute(
        f"SELECT count(*), count(DISTINCT hash_key), count(DISTINCT sha_key), "
        f"count(DISTINCT code), min(octet_length(hash_key)), max(octet_length(hash_key)), "
        f"min(octet_length(sha_key)), max(octet_length(sha_key)) {scan}"
    ).fetchone() == (100, 100, 100, 100, 16, 16, 32, 32)
    assert rows_of(source) == rows_of(target)[:50]  # the first copy as it was


def test_row_multiplication_keeps_keys_distinct_in_the_form_a_step_parses(tmp_path):
    """A string key that reads as an integer, an ISO date or a UUID moves as one, a date,
    a timestamp or a UUID moves as itself: with a suffix, a step casting the key raised on
    every added copy, which reads as the amplifier failing on correct code; and a UUID
    column was not moved at all, so it stopped being a key. A date key of eight digits,
    an integer or text, moved as an integer: 20240131 came out 20250234, which a step
    parsing it with strptime refused. A DECIMAL id, and a stamp in nanoseconds, were not
    moved, so their copies repeated them."""
    source = tmp_path / "keys.parquet"
    CON.execute(
        f"COPY (SELECT range AS id, (1000 + range)::VARCHAR AS code, "
        f"(DATE '2024-01-01' + range::INTEGER)::VARCHAR AS day_text, "
        f"DATE '2020-02-01' + range::INTEGER AS day, "
        f"TIMESTAMP '2024-01-01' + to_seconds(range) AS seen_at, "
        f"md5(range::VARCHAR)::UUID AS token, "
        f"md5('t' || range)::UUID::VARCHAR AS token_text, "
        f"upper(md5('T' || range)::UUID::VARCHAR) AS upper_token_text, "
        f"'u' || range AS handle, range % 3 AS grp, "
        # Both 'h0' and 'h0#1': a '#' suffix made the first's copy the second.
        f"CASE WHEN range % 2 = 0 THEN 'h' || range ELSE 'h' || (range - 1) || '#1' END AS tag, "
        # Digits with zeros in front, as codes are kept: room in the width, and none.
        f"lpad(range::VARCHAR, 5, '0') AS zip, lpad((range * 2)::VARCHAR, 3, '0') AS tight, "
        # A date as eight digits, as warehouses key days: 20240131 + 1 is no date.
        f"strftime(DATE '2024-01-01' + range::INTEGER, '%Y%m%d')::INTEGER AS day_key, "
        f"strftime(DATE '2023-06-01' + range::INTEGER, '%Y%m%d') AS day_key_text, "
        # Text ending in a number: one width, several widths, and several widths where
        # zeros in front would let `a07` and `a007` meet in a copy (so a suffix).
        f"'ORD-' || lpad(range::VARCHAR, 6, '0') AS order_ref, 'user_' || range AS user_ref, "
        f"CASE WHEN range % 2 = 0 THEN 'a' || lpad(range::VARCHAR, 4, '0') "
        f"ELSE 'a' || range END AS mixed, 'x' || range || 'y' AS wrapped, "
        f"'X' || range || 'y' AS cased, "
        # Ids as DECIMAL, as databases with one numeric type export them.
        f"(1000000 + range)::DECIMAL(18,0) AS account_no, (range / 4)::DECIMAL(10,2) AS tick, "
        f"make_timestamp_ns(1704067200000000000 + range * 7) AS stamp_ns "
        f"FROM range(400)) TO '{source}'"
    )
    target = tmp_path / "out.parquet"
    multiply_rows(CON, source, target, artifact="keys")
    columns = [
        "id", "code", "day_text", "day", "seen_at",
        "token", "token_text", "upper_token_text", "handle", "tag", "zip", "tight",
        "day_key", "day_key_text", "order_ref", "user_ref", "mixed", "wrapped", "cased",
        "account_no", "tick", "stamp_ns",
    ]  # fmt: skip
    distinct = CON.execute(
        f"SELECT count(*), {', '.join(f'count(DISTINCT {c})' for c in columns)} FROM '{target}'"
    ).fetchone()
    assert distinct == (800,) * (len(columns) + 1)
    # Each still reads in its form: none of these casts raises, and text keeps its case.
    CON.execute(
        f"SELECT CAST(code AS BIGINT), CAST(day_text AS DATE), CAST(token_text AS UUID), "
        f"CAST(upper_token_text AS UUID), CAST(zip AS INTEGER), CAST(tight AS INTEGER), "
        f"strptime(day_key::VARCHAR, '%Y%m%d'), strptime(day_key_text, '%Y%m%d'), "
        f"CAST(substr(order_ref, 5) AS INTEGER), CAST(split_part(user_ref, '_', 2) AS INTEGER) "
        f"FROM '{target}'"
    ).fetchall()
    # A zip code keeps its width where the width has room, and its zeros either way.
    assert CON.execute(
        f"SELECT bool_and(length(zip) = 5), min(zip), max(zip), "
        f"bool_and(regexp_full_match(tight, '[0-9]+')) FROM '{target}'"
    ).fetchone() == (True, "00000", "00799", True)
    assert CON.execute(
        f"SELECT bool_and(token_text = lower(token_text)), "
        f"bool_and(upper_token_text = upper(upper_token_text)) FROM '{target}'"
    ).fetchone() == (True, True)
    types = {r[0]: r[1] for r in CON.execute(f"DESCRIBE SELECT * FROM '{target}'").fetchall()}
    assert (types["day"], types["seen_at"], types["code"], types["token"]) == (
        "DATE", "TIMESTAMP", "VARCHAR", "UUID",
    )  # fmt: skip
    assert (types["day_key"], types["day_key_text"]) == ("INTEGER", "VARCHAR")
    assert (types["account_no"], types["tick"]) == ("DECIMAL(18,0)", "DECIMAL(10,2)")
    assert types["stamp_ns"] == "TIMESTAMP_NS"
    assert rows_of(target, "WHERE handle = 'u407'") != []  # the number moves past its range
    assert CON.execute(
        f"SELECT bool_and(length(order_ref) = 10), max(order_ref) FROM '{target}'"
    ).fetchone() == (True, "ORD-000799")
    # Letters of one case with digits move along the alphabet (since 0.7.15; they were
    # suffixed); other strings, letters of both cases here, get a suffix.
    assert rows_of(target, "WHERE wrapped = 'y7z'") != []
    assert rows_of(target, "WHERE mixed = 'b7'") != []
    assert rows_of(target, "WHERE cased = 'X7y#1'") != []
    assert CON.execute(f"SELECT count(DISTINCT grp) FROM '{target}'").fetchone() == (3,)


def test_tie_collapse_is_a_pure_function(tmp_path):
    source = events(tmp_path)
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    collapse_ties(CON, source, first, artifact="events", rows_per_value=500)
    collapse_ties(CON, source, second, artifact="events", rows_per_value=500)
    assert bytes_digest(first) == bytes_digest(second)


# Row multiplication -----------------------------------------------------------------------


def test_row_multiplication_doubles_the_rows_and_keeps_the_id_unique(tmp_path):
    source = events(tmp_path, rows=100)
    target = tmp_path / "out.parquet"
    assert multiply_rows(CON, source, target, artifact="events") == Applied(
        "events 100 rows to 200, event_id moved past its range in the added copy"
    )
    after = rows_of(target)
    assert len(after) == 200
    assert len({r[0] for r in after}) == 200
    assert sorted(r[1:] for r in after) == sorted(r[1:] for r in rows_of(source) * 2)
    assert pq.read_schema(target).names == pq.read_schema(source).names


def test_row_multiplication_is_a_pure_function(tmp_path):
    source = events(tmp_path)
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    multiply_rows(CON, source, first, artifact="events")
    multiply_rows(CON, source, second, artifact="events")
    assert bytes_digest(first) == bytes_digest(second)


def test_row_multiplication_writes_each_copy_whole_and_in_file_order(tmp_path):
    """The copies are stacked without a sort (UNION ALL keeps order); on several row
    groups and two threads, a lost order would show as rows out of place."""
    source = events(tmp_path, rows=300_000)
    target = tmp_path / "out.parquet"
    multiply_rows(CON, source, target, artifact="events")
    before = rows_of(source)
    # Ids 0 to 299,999 move by the first power of ten past them, as the same ids in
    # another input would.
    assert rows_of(target) == before + [(r[0] + 1_000_000, *r[1:]) for r in before]


def test_the_joint_copy_is_the_rows_then_their_collapsed_copy_in_one_pass(tmp_path):
    """The first copy is the input as it was, so a folded column cannot take away what
    reordering its rows would show; the second is tie collapse then row multiplication's
    second copy (the id shifted past its range). The joint copy used to be collapsed
    throughout."""
    source = events(tmp_path, rows=300_000)
    collapsed, twice = tmp_path / "collapsed.parquet", tmp_path / "twice.parquet"
    collapse_ties(CON, source, collapsed, artifact="events")
    multiply_rows(CON, collapsed, twice, artifact="events")
    plan = plan_collapse(column_facts(CON, source), artifact="events")
    joint = tmp_path / "joint.parquet"
    outcome = multiply_rows(CON, source, joint, artifact="events", collapse=plan)
    assert outcome == Applied(
        "events 300,000 rows to 600,000, event_id moved past its range in the added copy"
    )
    assert rows_of(joint) == rows_of(source) + rows_of(twice)[300_000:]


def test_the_facts_of_a_collapsed_input_are_derived_exactly(tmp_path):
    source = events(tmp_path, rows=300_000)
    facts = column_facts(CON, source)
    plan = plan_collapse(facts, artifact="events")
    collapsed = tmp_path / "collapsed.parquet"
    collapse_ties(CON, source, collapsed, artifact="events")
    assert plan.facts(facts) == column_facts(CON, collapsed)


@pytest.mark.parametrize("kind", ["DECIMAL(12,2)", "INTEGER", "BIGINT"])
def test_tie_collapse_keeps_a_value_and_its_negation_opposite(tmp_path, kind):
    """A ledger's two legs, +x and -x on one transaction: the usual fold sent them to
    values that no longer cancel, and a correct step checking that every transaction sums
    to zero raised (AMPLIFICATION_FAILED, exit 5). A column whose values come in opposite
    pairs is folded by absolute value, each row keeping its sign."""
    source = parquet_of(
        tmp_path,
        "entries.parquet",
        f"SELECT range AS entry_id, range // 2 AS txn_id, "
        f"(CASE WHEN range % 2 = 0 THEN 1 ELSE -1 END * (hash(range // 2) % 100000))::{kind} "
        f"AS amount, (hash(range) % 7)::{kind} AS fee FROM range(60000)",
    )
    target = tmp_path / "out.parquet"
    facts = column_facts(CON, source)
    plan = dependent_units(
        CON, source, plan_collapse(facts, artifact="entries"), facts, artifact="entries"
    )
    plan = kept_opposite(CON, source, plan, artifact="entries")
    outcome = collapse_ties(CON, source, target, artifact="entries", plan=plan)
    assert isinstance(outcome, Applied)
    assert (
        "entries.amount (its values come in opposite pairs: folded by absolute value, each "
        "row keeping its sign, so a value and its negation still cancel) into 121 values"
    ) in outcome.detail  # 60 each side of zero, and zero
    types = [(f.name, f.type) for f in pq.read_schema(target)]
    assert types == [(f.name, f.type) for f in pq.read_schema(source)]
    unbalanced = CON.execute(
        f"SELECT count(*) FROM (SELECT txn_id FROM read_parquet('{target}') "
        f"GROUP BY 1 HAVING sum(amount) <> 0)"
    ).fetchone()[0]
    assert unbalanced == 0
    before, after = rows_of(source, "ORDER BY entry_id"), rows_of(target, "ORDER BY entry_id")
    assert {r[2] for r in after} <= {r[2] for r in before}  # real values only
    assert all((a[2] < 0) == (b[2] < 0) for a, b in zip(after, before, strict=True))
    pairs = sorted({(b[2], a[2]) for b, a in zip(before, after, strict=True)})
    assert [new for _, new in pairs] == sorted(new for _, new in pairs)  # order kept
    assert plan.facts(facts) == column_facts(CON, target)
    # Without opposite pairs (every fee is at least zero) the usual fold is left as it was.
    assert "entries.fee (its values" not in outcome.detail


def test_tie_collapse_folds_as_usual_where_some_value_has_no_opposite(tmp_path):
    source = parquet_of(
        tmp_path,
        "pnl.parquet",
        "SELECT range AS id, (hash(range) % 20000)::INTEGER - 5000 AS pnl FROM range(30000)",
    )
    facts = column_facts(CON, source)
    plan = plan_collapse(facts, artifact="pnl")
    assert kept_opposite(CON, source, plan, artifact="pnl") == plan


TREE = (
    "WITH bfs AS (SELECT range AS k, CASE WHEN range = 0 THEN NULL ELSE (range - 1) // 4 END "
    "AS pk FROM range(3000)), lab AS (SELECT range AS k, (range * 7919) % 10007 AS label "
    "FROM range(3000)) SELECT a.label AS node_id, b.label AS parent_id, a.k // 40 AS kind "
    "FROM bfs JOIN lab a ON a.k = bfs.k LEFT JOIN lab b ON b.k = bfs.pk"
)


def _circular(path: Path) -> int:
    """Rows from which following parent_id up never reaches a root (64 steps at most)."""
    return CON.execute(
        f"WITH RECURSIVE n AS (SELECT * FROM read_parquet('{path}')), "
        f"w(start, node, depth) AS (SELECT node_id, parent_id, 0 FROM n UNION ALL "
        f"SELECT w.start, n.parent_id, w.depth + 1 FROM w JOIN n ON n.node_id = w.node "
        f"WHERE w.depth < 64) SELECT count(DISTINCT start) FILTER (WHERE depth = 64) FROM w"
    ).fetchone()[0]


def _both_folds(tmp_path: Path, source: Path, artifact: str, usual) -> tuple[Path, Path, object]:
    """The input folded by `usual` (a plan without the rule under test) and as tie collapse
    folds it now: both files, and the outcome of the second."""
    folded_apart, target = tmp_path / "usual.parquet", tmp_path / "out.parquet"
    collapse_ties(CON, source, folded_apart, artifact=artifact, plan=usual)
    return folded_apart, target, collapse_ties(CON, source, target, artifact=artifact)


def test_tie_collapse_leaves_a_column_that_links_rows_into_trees(tmp_path):
    """A node's parent_id among the node_ids: folded onto a few real ids, parents of
    parents came round to themselves, and a correct step walking up each node's ancestors
    with a recursive query never ended (here, 2,499 of 3,000 nodes were on or under a
    cycle)."""
    source = parquet_of(tmp_path, "nodes.parquet", TREE)
    facts = column_facts(CON, source)
    usual = plan_collapse(facts, artifact="nodes")
    folded_apart, target, outcome = _both_folds(tmp_path, source, "nodes", usual)
    assert _circular(folded_apart) > 0  # what the usual fold does to a tree
    assert isinstance(outcome, Applied)
    assert outcome.detail == (
        "nodes.kind into 6 values, from 40 to 500 rows per value; nodes.parent_id left as it "
        "is (it links each row to another's node_id, into trees, which folding it would remake)"
    )
    assert rows_of(target, "ORDER BY node_id") == [
        (n, p, k) for (n, p, _), (_, _, k) in zip(
            rows_of(source, "ORDER BY node_id"), rows_of(target, "ORDER BY node_id"), strict=True
        )
    ]  # fmt: skip
    assert _circular(target) == 0


# A forest of 20 trees: each node's depth is its parent's plus one, its code its parent's
# with a letter added, and its root_id its parent's; kind is none of these.
FOREST = (
    "WITH RECURSIVE t(k, pk, depth, root, code) AS ("
    "SELECT range, NULL::BIGINT, 0, range, (range % 5)::VARCHAR FROM range(20) UNION ALL "
    "SELECT c.k, t.k, t.depth + 1, t.root, t.code || 'a' FROM t "
    "JOIN (SELECT range AS k, (range - 20) // 2 AS pk FROM range(20, 3000)) c ON c.pk = t.k), "
    "lab AS (SELECT range AS k, (range * 7919) % 10007 AS label FROM range(3000)) "
    "SELECT a.label AS node_id, b.label AS parent_id, t.depth, r.label AS root_id, t.code, "
    "t.k // 40 AS kind FROM t JOIN lab a ON a.k = t.k LEFT JOIN lab b ON b.k = t.pk "
    "JOIN lab r ON r.k = t.root"
)


def _off_the_tree(path: Path) -> tuple[int, int, int]:
    """Nodes whose depth is not one below their parent's, whose code does not extend their
    parent's, whose root_id is not their parent's."""
    return CON.execute(
        f"WITH n AS (SELECT * FROM read_parquet('{path}')) SELECT "
        f"count(*) FILTER (WHERE c.depth <> p.depth + 1), "
        f"count(*) FILTER (WHERE c.code = p.code OR NOT starts_with(c.code, p.code)), "
        f"count(*) FILTER (WHERE c.root_id <> p.root_id) "
        f"FROM n c JOIN n p ON c.parent_id = p.node_id"
    ).fetchone()


def test_tie_collapse_leaves_what_a_tree_carries_from_parent_to_child(tmp_path):
    """A node's depth and its path follow from its parent's. With the parent link kept and
    they folded, a child's depth stopped being one below its parent's, and a correct step
    checking it raised (a contract-only probe, unseen129: AMPLIFICATION_FAILED). A column
    equal to the parent's (the root) folds as usual: equal values fold to equal values."""
    source = parquet_of(tmp_path, "forest.parquet", FOREST)
    facts = column_facts(CON, source)
    plan = plan_collapse(facts, artifact="forest")
    usual = Collapse(
        tuple(c for c in plan.chosen if c.name != "parent_id"), plan.buckets, plan.detail
    )
    folded_apart, target, outcome = _both_folds(tmp_path, source, "forest", usual)
    depth, code, root = _off_the_tree(folded_apart)
    assert depth > 1000 and code > 1000 and root == 0  # what the usual fold does
    assert isinstance(outcome, Applied)
    assert outcome.detail == (
        "forest.root_id into 6 values, from 150 to 500 rows per value; forest.kind into 6 "
        "values, from 40 to 500 rows per value; forest.parent_id left as it is (it links "
        "each row to another's node_id, into trees, which folding it would remake); "
        "forest.depth left as it is (on every row it follows from the parent's, one step on "
        "from it, which folding would break); forest.code left as it is (on every row it "
        "follows from the parent's, starting with it, which folding would break)"
    )
    assert _off_the_tree(target) == (0, 0, 0)
    kept = "SELECT node_id, parent_id, depth, code FROM read_parquet('{}') ORDER BY 1"
    assert (
        CON.execute(kept.format(target)).fetchall() == CON.execute(kept.format(source)).fetchall()
    )
    folded = "SELECT count(DISTINCT root_id), count(DISTINCT kind) FROM read_parquet('{}')"
    assert CON.execute(folded.format(target)).fetchone() == (6, 6)


def test_a_column_of_ids_that_only_falls_inside_a_key_is_folded_as_usual(tmp_path):
    # Products 0 to 999 beside updates numbered 0 to 4,999: inside the key, but with no
    # NULL (no roots), or with one whose links go round in circles, it is no tree.
    for select in [
        "SELECT range AS update_seq, hash(range) % 1000 AS product_id FROM range(5000)",
        "SELECT range AS update_seq, CASE WHEN range = 7 THEN NULL ELSE hash(range) % 1000 END "
        "AS product_id FROM range(5000)",
        # A store 1 to 50, NULL on a tenth of the sales: its walks end on NULLs as quickly as
        # a tree's, but on sales nobody points to, and 0.7.14 kept it whole as a tree.
        "SELECT range AS sale_id, CASE WHEN hash(range * 31 + 2) % 100 < 10 THEN NULL "
        "ELSE 1 + hash(range * 7 + 2) % 50 END AS store_id FROM range(20000)",
    ]:
        source = parquet_of(tmp_path, "updates.parquet", select)
        facts = column_facts(CON, source)
        assert planned(CON, source, facts, artifact="u") == plan_collapse(facts, artifact="u")


MOVES = (
    "WITH d AS (SELECT i AS item, s AS seq, ((hash(i * 1000 + s) % 21)::INT - 8) AS delta, "
    "(hash(i * 7 + s) % 40)::INT AS bin FROM range(300) a(i), range(40) b(s)), "
    "r AS (SELECT *, (1000 + sum(delta) OVER (PARTITION BY item ORDER BY seq "
    "ROWS UNBOUNDED PRECEDING))::BIGINT AS qty_after FROM d) "
    "SELECT item, seq, qty_after - delta AS qty_before, delta, qty_after, bin FROM r"
)


def _breaks(path: Path) -> int:
    """Movements whose opening quantity is not the closing one of the movement before."""
    return CON.execute(
        f"SELECT count(*) FROM (SELECT qty_before, lag(qty_after) OVER (PARTITION BY item "
        f"ORDER BY seq) AS prev FROM read_parquet('{path}')) WHERE prev <> qty_before"
    ).fetchone()[0]


def test_tie_collapse_leaves_a_running_quantity_carried_from_row_to_row(tmp_path):
    """Each stock movement opens with the quantity the one before closed with. Folded,
    each row took its three quantities from some other row, and a correct step checking
    the chain raised (11,159 breaks in 12,000 movements, AMPLIFICATION_FAILED)."""
    source = parquet_of(tmp_path, "moves.parquet", MOVES)
    facts = column_facts(CON, source)
    usual = dependent_units(
        CON, source, plan_collapse(facts, artifact="moves"), facts, artifact="moves"
    )
    folded_apart, target, outcome = _both_folds(tmp_path, source, "moves", usual)
    assert _breaks(folded_apart) > 10_000
    assert isinstance(outcome, Applied)
    assert outcome.detail == (
        "moves.bin into 24 values, from 300 to 500 rows per value; moves.qty_after left as it "
        "is, with qty_before and delta (on every row one column is another's value on the row "
        "before, in the input's order, a running quantity that folding would break)"
    )
    assert _breaks(target) == 0
    assert len({r[5] for r in rows_of(target)}) == 24  # the rest is folded as before
    plan = planned(CON, source, facts, artifact="moves")
    assert plan.facts(facts) == column_facts(CON, target)


def test_columns_named_as_the_amplifiers_own_are_stressed_like_any_others(tmp_path):
    """Tie collapse and arrival order failed (AMPLIFICATION_FAILED) on an artifact with a
    column called file_row_number: DuckDB refuses to add its row number under a name the
    file has. A column called copy met the joint probe's copy number. Renaming the columns
    must change nothing an amplifier writes."""
    source = events(tmp_path, rows=20_000)
    plain, named = tmp_path / "plain.parquet", tmp_path / "named.parquet"
    # Small row groups, so that reversing them and numbering rows across them is tested.
    for target, columns in [
        (plain, "*"),
        (named, "event_id AS file_row_number, customer AS copy, amount"),
    ]:
        CON.execute(
            f"COPY (SELECT {columns} FROM read_parquet('{source}')) TO '{target}' "
            f"(FORMAT parquet, ROW_GROUP_SIZE 2048)"
        )
    facts = column_facts(CON, plain)
    plan = plan_collapse(facts, artifact="events")
    named_plan = plan_collapse(column_facts(CON, named), artifact="events")
    stresses = {
        "ties": lambda src, out, p: collapse_ties(CON, src, out, artifact="events"),
        "joint": lambda src, out, p: multiply_rows(CON, src, out, artifact="events", collapse=p),
        **{
            f"order-{v}": lambda src, out, p, v=v: reorder(
                CON, src, out, artifact="events", variant=v
            )
            for v in (1, 2, 3)
        },
    }
    for kind, stress in stresses.items():
        a, b = tmp_path / f"{kind}-a.parquet", tmp_path / f"{kind}-b.parquet"
        said = stress(named, b, named_plan)
        renamed = said.detail.replace(".copy ", ".customer ").replace(
            "file_row_number moved", "event_id moved"
        )
        assert stress(plain, a, plan) == type(said)(renamed)
        assert rows_of(a) == rows_of(b), kind


def test_row_multiplication_moves_a_zoned_nanosecond_key_keeping_its_nanoseconds(tmp_path):
    # DuckDB 2's TIMESTAMPTZ_NS, which epoch_us does not take: such a key was refused.
    try:
        CON.execute("SELECT NULL::TIMESTAMPTZ_NS")
    except duckdb.Error:
        pytest.skip(f"DuckDB {duckdb.__version__} has no TIMESTAMPTZ_NS")
    source, target = tmp_path / "stamps.parquet", tmp_path / "out.parquet"
    CON.execute(
        f"COPY (SELECT make_timestamp_ns(1704067200000000000 + range * 7)::TIMESTAMPTZ_NS AS seen "
        f"FROM range(400)) TO '{source}'"
    )
    outcome = multiply_rows(CON, source, target, artifact="stamps")
    assert outcome == Applied("stamps 400 rows to 800, seen moved past its range in the added copy")
    assert CON.execute(
        f"SELECT count(DISTINCT seen), typeof(any_value(seen)) FROM '{target}'"
    ).fetchone() == (800, "TIMESTAMPTZ_NS")

    def nanoseconds(path):
        query = f"SELECT epoch_ns(seen) % 1000 AS ns FROM '{path}' ORDER BY ns"
        return [ns for (ns,) in CON.execute(query).fetchall()]

    assert nanoseconds(target) == sorted(nanoseconds(source) * 2)


def test_row_multiplication_declines_an_empty_input(tmp_path):
    source = events(tmp_path, rows=0)
    assert multiply_rows(CON, source, tmp_path / "out.parquet", artifact="events") == Declined(
        "events has no rows to multiply"
    )


# Arrival order ------------------------------------------------------------------------------


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(min_value=2, max_value=9))
def test_arrival_order_keeps_the_rows_and_changes_their_order(tmp_path, variant):
    source = events(tmp_path, rows=300_000, name=f"events-{variant}.parquet")
    target = tmp_path / f"v{variant}.parquet"
    outcome = reorder(CON, source, target, artifact="events", variant=variant)
    assert isinstance(outcome, Applied)
    assert canonical_digest(CON, target)[0] == canonical_digest(CON, source)[0]
    assert [r[0] for r in rows_of(target)] != [r[0] for r in rows_of(source)]


def test_arrival_order_variant_1_is_the_input_as_written(tmp_path):
    source = events(tmp_path, rows=50)
    target = tmp_path / "v1.parquet"
    reorder(CON, source, target, artifact="events", variant=1)
    assert rows_of(target) == rows_of(source)


def test_arrival_order_variant_2_reverses_the_row_groups(tmp_path):
    path = tmp_path / "groups.parquet"
    pq.write_table(pa.table({"n": list(range(10))}), path, row_group_size=4)
    target = tmp_path / "out.parquet"
    outcome = reorder(CON, path, target, artifact="groups", variant=2)
    assert outcome == Applied("groups: the same 10 rows, its 3 row groups in reverse")
    assert [r[0] for r in rows_of(target)] == [8, 9, 4, 5, 6, 7, 0, 1, 2, 3]


@pytest.mark.parametrize(
    "groups, expected",
    [
        (((0, 2), (2, 7), (7, 10)), [7, 8, 9, 2, 3, 4, 5, 6, 0, 1]),
        (((0, 3), (3, 6), (6, 10)), [6, 7, 8, 9, 3, 4, 5, 0, 1, 2]),  # a longer last group
    ],
)
def test_arrival_order_variant_2_reverses_row_groups_of_unequal_sizes(tmp_path, groups, expected):
    path = tmp_path / "uneven.parquet"
    schema = pa.schema([("n", pa.int64())])
    with pq.ParquetWriter(path, schema) as writer:
        for lo, hi in groups:
            writer.write_table(pa.table({"n": list(range(lo, hi))}, schema=schema))
    target = tmp_path / "out.parquet"
    outcome = reorder(CON, path, target, artifact="uneven", variant=2)
    assert outcome == Applied("uneven: the same 10 rows, its 3 row groups in reverse")
    assert [r[0] for r in rows_of(target)] == expected


def test_arrival_order_declines_a_single_row(tmp_path):
    path = tmp_path / "one.parquet"
    pq.write_table(pa.table({"n": [1]}), path)
    assert reorder(CON, path, tmp_path / "o.parquet", artifact="one", variant=3) == Declined(
        "one has 1 row, so no other order"
    )


@pytest.mark.parametrize("variant", [2, 3, 4])
def test_arrival_order_is_a_pure_function(tmp_path, variant):
    source = events(tmp_path, rows=1000)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    reorder(CON, source, a, artifact="events", variant=variant)
    reorder(CON, source, b, artifact="events", variant=variant)
    assert bytes_digest(a) == bytes_digest(b)


def test_an_amplified_input_that_fails_to_write_leaves_no_file(tmp_path):
    import duckdb

    from twicerun.runner.amplify.base import copy_ordered

    target = tmp_path / "amplified.parquet"
    con = duckdb.connect()
    with pytest.raises(duckdb.Error):
        copy_ordered(con, "SELECT error('stop') AS v FROM range(10) ORDER BY 1", target)
    assert list(tmp_path.iterdir()) == []


def test_tie_collapse_declining_a_small_input_does_not_claim_it_is_past_the_target(tmp_path):
    # Three rows whose other column holds one value: nothing to fold, yet only 3 rows per
    # value, which the decline used to call "at or past the 500 this amplifier aims for".
    path = tmp_path / "small.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "shop": ["a", "a", "a"]}), path)
    outcome = collapse_ties(CON, path, tmp_path / "out.parquet", artifact="small")
    assert outcome == Declined(
        "every column of small that could tie has 1 value or fewer across its 3 rows, no "
        "more than folding would leave (one value per 500 rows, and never fewer than 2), so "
        "there is nothing to fold"
    )
    assert not (tmp_path / "out.parquet").exists()


@pytest.mark.parametrize(
    ("rows", "artifact", "rows_per_value", "dense", "said"),
    [
        # A list can tie as well as an integer can; the decline said every column that could
        # tie was already dense when the list columns, never folded, were not.
        pytest.param(
            "range AS id, [range % 30] AS tags, range % 2 AS flag FROM range(2000)",
            "events",
            500,
            "1,000",
            " (tags: lists, structs and maps are not folded)",
            id="nested",
        ),
        # (user, minute) is a key, so both are kept, and the decline said every column had
        # 1,000 rows per value, which reads as false of a minute with 50.
        pytest.param(
            "range % 40 AS user_id, range // 40 AS minute, range % 2 AS flag FROM range(2000)",
            "visits",
            500,
            "1,000",
            "; user_id and minute, a key when taken together, are kept as they are",
            id="joint key",
        ),
        # No column is unique, so the most distinct (200 rows per store) is kept for a
        # tiebreak, beside a decline that said every column had 300 or more.
        pytest.param(
            "range % 3 AS store, range % 2 AS channel FROM range(600)",
            "sales",
            100,
            "300",
            "; store, the most distinct column, is kept as it is, so that a tiebreak on it "
            "still works",
            id="most distinct",
        ),
    ],
)
def test_a_decline_names_what_it_leaves_unfolded(
    tmp_path, rows, artifact, rows_per_value, dense, said
):
    path = tmp_path / "in.parquet"
    CON.execute(f"COPY (SELECT {rows}) TO '{path}' (FORMAT parquet)")
    outcome = collapse_ties(
        CON, path, tmp_path / "out.parquet", artifact=artifact, rows_per_value=rows_per_value
    )
    assert outcome == Declined(
        f"every column of {artifact} that could tie already has {dense} or more rows per value, "
        f"at or past the {rows_per_value} this amplifier aims for{said}"
    )


def test_tie_collapse_names_a_column_with_a_space_in_quotes(tmp_path):
    """Every other sentence names `tot al` as "tot al", so it cannot be read as two words;
    tie collapse printed it bare, in the same block as row multiplication's quoted one."""
    path = tmp_path / "odd.parquet"
    CON.execute(
        f'COPY (SELECT range AS "row id", range % 100 AS "the score", [range % 3] AS "a list" '
        f"FROM range(3000)) TO '{path}' (FORMAT parquet)"
    )
    outcome = collapse_ties(CON, path, tmp_path / "out.parquet", artifact="odd")
    assert outcome == Applied('odd."the score" into 6 values, from 30 to 500 rows per value')
    keys = tmp_path / "keys.parquet"
    CON.execute(
        f'COPY (SELECT "row id", "row id" * 2 AS "x.y", "a list" FROM \'{path}\') '
        f"TO '{keys}' (FORMAT parquet)"
    )
    assert collapse_ties(CON, keys, tmp_path / "none.parquet", artifact="keys") == Declined(
        'keys has no exact column besides its keys ("row id", "x.y": each has a different '
        'value on every row, and is kept so), so nothing could tie ("a list": lists, structs '
        "and maps are not folded)"
    )


def test_the_amplifiers_keep_a_five_column_key_a_key(tmp_path):
    """Units per (store, product, channel, region, day): no four of the five are a key, so
    the search stopped at sets of four and folded the key's columns, and a running total
    by day per store, product, channel and region, correct code, could fire."""
    source = tmp_path / "regional.parquet"
    CON.execute(
        f"COPY (SELECT s AS store, p AS product, c AS channel, r AS region, "
        f"DATE '2024-01-01' + d::INTEGER AS day, "
        f"(hash(s, p, c, r, d) % 1000)::INTEGER AS units "
        f"FROM range(6) a(s), range(10) b(p), range(3) e(c), range(4) g(r), range(20) f(d)) "
        f"TO '{source}' (FORMAT parquet)"
    )
    assert_key_kept(
        tmp_path, source, ["store", "product", "channel", "region", "day"],
        "regional.units into 29 values, from 14 to 497 rows per value",
    )  # fmt: skip
