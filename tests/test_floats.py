"""ulp and relative distance in SQL, checked against Python's struct on the edge cases."""

from __future__ import annotations

import math
import struct

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twicerun.compare import floats

CON = duckdb.connect()


def from_bits(pattern: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", pattern))[0]


def python_ulps(a: float, b: float) -> int | None:
    """The reference definition: bits as signed, negatives reflected about INT_MIN."""
    if math.isnan(a) or math.isnan(b):
        return None

    def line(x: float) -> int:
        (i,) = struct.unpack("<q", struct.pack("<d", x))
        return -(2**63) - i if i < 0 else i

    return abs(line(a) - line(b))


def python_ulps32(a: float, b: float) -> int | None:
    if math.isnan(a) or math.isnan(b):
        return None

    def line(x: float) -> int:
        (i,) = struct.unpack("<i", struct.pack("<f", x))
        return -(2**31) - i if i < 0 else i

    return abs(line(a) - line(b))


def sql_ulps(a: float, b: float, type_id: str = "double") -> int | None:
    sql_type = "DOUBLE" if type_id == "double" else "FLOAT"
    expr = floats.ulps(f"$1::{sql_type}", f"$2::{sql_type}", type_id)
    (value,) = CON.execute(f"SELECT {expr}", [a, b]).fetchone()
    return None if value is None else int(value)


MIN_SUB = from_bits(1)
MAX = from_bits(0x7FEFFFFFFFFFFFFF)
INF = math.inf
NAN = math.nan

EDGES = [
    (0.0, -0.0),
    (0.0, MIN_SUB),
    (-MIN_SUB, MIN_SUB),
    (-0.0, -MIN_SUB),
    (
        from_bits(0x000FFFFFFFFFFFFF),
        from_bits(0x0010000000000000),
    ),  # largest subnormal, smallest normal
    (1.0, math.nextafter(1.0, 2.0)),
    (1.0, math.nextafter(1.0, 0.0)),
    (-1.0, 1.0),
    (-1.5, 2.5),
    (MAX, INF),
    (-INF, INF),
    (-MAX, MAX),
    (1e300, -1e-300),
    (NAN, 1.0),
    (1.0, NAN),
    (NAN, NAN),
    (0.1 + 0.2, 0.3),
]


@pytest.mark.parametrize(("a", "b"), EDGES)
def test_sql_ulps_match_struct_on_the_edge_cases(a, b):
    assert sql_ulps(a, b) == python_ulps(a, b)


def test_signed_zeros_are_zero_ulps_apart_but_have_different_bits():
    assert sql_ulps(0.0, -0.0) == 0
    (moved,) = CON.execute(
        f"SELECT {floats.moved('0.0::DOUBLE', chr(39) + '-0.0' + chr(39) + '::DOUBLE', 'double')}"
    ).fetchone()
    assert moved is True


def test_values_straddling_zero_count_both_halves():
    assert sql_ulps(-MIN_SUB, MIN_SUB) == 2
    assert sql_ulps(-1.0, 1.0) == 2 * struct.unpack("<q", struct.pack("<d", 1.0))[0]


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False), st.floats(allow_nan=False))
def test_sql_ulps_match_struct_on_any_pair(a, b):
    assert sql_ulps(a, b) == python_ulps(a, b)


@settings(max_examples=200, deadline=None)
@given(st.floats(width=32, allow_nan=False), st.floats(width=32, allow_nan=False))
def test_float32_ulps_match_struct(a, b):
    assert sql_ulps(a, b, "float") == python_ulps32(a, b)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (1.0, 1.0, 0.0),
        (0.0, -0.0, 0.0),
        (2.0, 1.0, 0.5),
        (-1.0, 1.0, 2.0),
        (1.0, INF, INF),
        (INF, -INF, INF),
        (INF, INF, 0.0),
        (NAN, 1.0, None),
    ],
)
def test_relative_difference(a, b, expected):
    (value,) = CON.execute(
        f"SELECT {floats.relative('$1::DOUBLE', '$2::DOUBLE')}", [a, b]
    ).fetchone()
    assert value == expected


def test_nan_payloads_do_not_move():
    quiet = from_bits(0x7FF8000000000000)
    other = from_bits(0x7FF8000000000ABC)
    (value,) = CON.execute(
        f"SELECT {floats.moved('$1::DOUBLE', '$2::DOUBLE', 'double')}", [quiet, other]
    ).fetchone()
    assert value is False


def sql_bits(a: float, type_id: str = "double") -> int | None:
    sql_type = "DOUBLE" if type_id == "double" else "FLOAT"
    (value,) = CON.execute(f"SELECT {floats.bits(f'$1::{sql_type}', type_id)}", [a]).fetchone()
    return value


@pytest.mark.parametrize(("a", "b"), EDGES)
def test_ulps_apart_on_bits_matches_sql_ulps_on_the_edge_cases(a, b):
    """The exact pairing measures rows in Python from the bits SQL gave them; it must count
    as `ulps()` does, NaN against a number included (None); two NaNs are one value to the
    oracle, not a move, so 0 where `ulps()` has no figure."""
    expected = 0 if sql_bits(a) == sql_bits(b) else sql_ulps(a, b)
    assert floats.ulps_apart(sql_bits(a), sql_bits(b), "double") == expected


@settings(max_examples=200, deadline=None)
@given(st.floats(width=32), st.floats(width=32))
def test_ulps_apart_on_float32_bits_matches_sql_ulps(a, b):
    x, y = sql_bits(a, "float"), sql_bits(b, "float")
    assert floats.ulps_apart(x, y, "float") == (0 if x == y else sql_ulps(a, b, "float"))
