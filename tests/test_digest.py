"""The canonical digest: rows as a multiset, floats by their exact bits, schema included."""

from __future__ import annotations

import math
import struct
import tempfile
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twicerun.compare.digest import bytes_digest, canonical_digest, digests
from twicerun.errors import UnsupportedColumn

CON = duckdb.connect()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

rows = st.lists(
    st.tuples(
        st.integers(min_value=-(2**40), max_value=2**40),
        st.text(max_size=5),
        st.floats(allow_nan=False, allow_infinity=True),
    ),
    min_size=1,
    max_size=30,
)


def digest_of(table: pa.Table) -> str:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.parquet"
        pq.write_table(table, path)
        return canonical_digest(CON, path)[0]


def table(data, names=("k", "s", "x")) -> pa.Table:
    columns = list(zip(*data, strict=True)) if data else [[] for _ in names]
    return pa.table(
        {
            names[0]: pa.array(columns[0], pa.int64()),
            names[1]: pa.array(columns[1], pa.string()),
            names[2]: pa.array(columns[2], pa.float64()),
        }
    )


def next_up(x: float) -> float:
    return math.nextafter(x, math.inf)


@SETTINGS
@given(rows, st.randoms())
def test_row_order_is_ignored(data, rnd):
    shuffled = list(data)
    rnd.shuffle(shuffled)
    assert digest_of(table(data)) == digest_of(table(shuffled))


@SETTINGS
@given(rows, st.data())
def test_a_duplicated_row_changes_the_digest(data, draw):
    i = draw.draw(st.integers(0, len(data) - 1))
    assert digest_of(table(data)) != digest_of(table([*data, data[i]]))


def test_duplicates_are_counted_not_collapsed():
    a = [(1, "a", 1.0), (1, "a", 1.0), (2, "b", 2.0)]
    b = [(1, "a", 1.0), (2, "b", 2.0), (2, "b", 2.0)]
    assert digest_of(table(a)) != digest_of(table(b))


@SETTINGS
@given(rows, st.data())
def test_a_one_ulp_change_is_detected(data, draw):
    i = draw.draw(st.integers(0, len(data) - 1))
    k, s, x = data[i]
    moved = next_up(x)
    if moved == x or math.isinf(x):
        return
    changed = list(data)
    changed[i] = (k, s, moved)
    assert digest_of(table(data)) != digest_of(table(changed))


def test_negative_zero_is_not_zero():
    assert digest_of(table([(1, "a", 0.0)])) != digest_of(table([(1, "a", -0.0)]))


def test_nan_payloads_are_folded_into_one_nan():
    quiet = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000000))[0]
    payload = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000123))[0]
    negative = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]
    digests_ = {digest_of(table([(1, "a", v)])) for v in (quiet, payload, negative)}
    assert len(digests_) == 1
    assert digest_of(table([(1, "a", quiet)])) != digest_of(table([(1, "a", 1.0)]))


def test_a_renamed_column_changes_the_digest():
    data = [(1, "a", 1.5)]
    assert digest_of(table(data)) != digest_of(table(data, names=("k", "s", "y")))


def test_a_retyped_column_changes_the_digest():
    a = pa.table({"k": pa.array([1, 2], pa.int64())})
    b = pa.table({"k": pa.array([1, 2], pa.int32())})
    assert digest_of(a) != digest_of(b)


def test_reordered_columns_change_the_digest():
    a = pa.table({"k": [1], "s": ["a"]})
    b = pa.table({"s": ["a"], "k": [1]})
    assert digest_of(a) != digest_of(b)


def test_the_empty_table_has_a_digest_that_differs_from_one_row():
    empty = pa.table({"k": pa.array([], pa.int64())})
    one = pa.table({"k": pa.array([0], pa.int64())})
    assert digest_of(empty) != digest_of(one)


def test_nulls_and_values_differ():
    assert digest_of(pa.table({"k": pa.array([None], pa.int64())})) != digest_of(
        pa.table({"k": pa.array([0], pa.int64())})
    )


def test_floats_inside_lists_and_structs_are_compared_by_bits():
    zero = pa.table({"l": [[0.0, 1.0]], "st": [{"a": 0.0}]})
    negative_in_list = pa.table({"l": [[-0.0, 1.0]], "st": [{"a": 0.0}]})
    negative_in_struct = pa.table({"l": [[0.0, 1.0]], "st": [{"a": -0.0}]})
    assert len({digest_of(zero), digest_of(negative_in_list), digest_of(negative_in_struct)}) == 3


def test_list_order_is_part_of_the_value():
    assert digest_of(pa.table({"l": [[1, 2]]})) != digest_of(pa.table({"l": [[2, 1]]}))


def test_maps_with_float_values_are_digested(tmp_path):
    path = tmp_path / "m.parquet"
    CON.execute(
        f"COPY (SELECT map([1, 2], [0.5::DOUBLE, '-0.0'::DOUBLE]) AS m) TO '{path}' (FORMAT parquet)"
    )
    other = tmp_path / "n.parquet"
    CON.execute(
        f"COPY (SELECT map([1, 2], [0.5::DOUBLE, 0.0::DOUBLE]) AS m) TO '{other}' (FORMAT parquet)"
    )
    assert canonical_digest(CON, path)[0] != canonical_digest(CON, other)[0]


def test_the_row_count_and_schema_come_back_with_the_digest(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(table([(1, "a", 1.0), (2, "b", 2.0)]), path)
    _, count, schema = canonical_digest(CON, path)
    assert count == 2
    assert schema == [["k", "BIGINT"], ["s", "VARCHAR"], ["x", "DOUBLE"]]


def test_equal_bytes_reuse_a_known_canonical_digest_without_reading_rows(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(table([(1, "a", 1.0)]), path)
    known = digests(CON, path)
    marker = type(known)(known.bytes_digest, "sentinel-not-recomputed", 7, [["z", "X"]])
    assert digests(CON, path, known=marker).canonical_digest == "sentinel-not-recomputed"
    assert bytes_digest(path) == known.bytes_digest


def test_an_unknown_type_is_refused_with_its_name(tmp_path, monkeypatch):
    from twicerun.compare import columns

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"k": [1]}), path)
    monkeypatch.setattr(columns, "EXACT_IDS", columns.EXACT_IDS - {"bigint"})
    with pytest.raises(UnsupportedColumn) as info:
        canonical_digest(CON, path)
    assert str(info.value).startswith(
        "column k has type BIGINT, which twicerun does not know how to compare"
    )


def test_every_type_duckdb_stores_in_an_artifact_is_compared(tmp_path):
    """DuckDB 2 added TIMESTAMPTZ_NS (what pandas' and pyarrow's zoned nanosecond stamps
    become), GEOMETRY and VARIANT; an artifact holding one was refused with exit 2, so a
    pipeline writing a DataFrame of zoned timestamps could not be run at all."""
    probe = duckdb.connect()
    names = [
        row[0] for row in probe.sql("SELECT DISTINCT logical_type FROM duckdb_types()").fetchall()
    ]
    written = 0
    for name in names:
        try:
            query = f"SELECT NULL::{name} AS v"
            probe.execute(f"COPY ({query}) TO '{tmp_path / 'one.parquet'}' (FORMAT parquet)")
        except duckdb.Error:
            continue  # a type that needs arguments (DECIMAL(p,s), ENUM) or cannot be stored
        canonical_digest(CON, tmp_path / "one.parquet")  # raises for a type not compared
        written += 1
    assert written >= 25, names
    stamps = pa.table({"at": pa.array([1, 2], pa.timestamp("ns", tz="Europe/Paris"))})
    pq.write_table(stamps, tmp_path / "zoned.parquet")
    assert canonical_digest(CON, tmp_path / "zoned.parquet")[1] == 2


def test_two_canonical_digests_never_computed_do_not_settle_a_pair():
    # Canonical digests are computed lazily; two empty ones are not two equal ones.
    from twicerun.compare.pair import Side, settle

    def side(b):
        return Side("t", None, b, "", 1, [["n", "BIGINT"]])

    outcome = settle(side("aa"), side("bb"), oracle=lambda ref, later: {"classes": ["ROW_EXTRA"]})
    assert (outcome.differs, outcome.settled_by) == (True, "oracle")
