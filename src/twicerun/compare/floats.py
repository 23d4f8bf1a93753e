"""Distances between two floats, computed in DuckDB from their IEEE-754 bits.

ulp distance: the bits of a float read as a signed integer are monotone in the
float's value for non-negative floats and reversed for negative ones. Mapping
a negative pattern b to (INT_MIN - b) makes the whole line monotone, with
-0.0 and +0.0 both at 0, so the distance between two floats in units in the
last place is the absolute difference of their mapped integers. The
difference is taken in HUGEINT, since it can exceed the range of BIGINT.
Infinities are the patterns just past the largest finite value, so they sit
one ulp beyond it. A NaN has no place on the line: a pair with exactly one
NaN has no ulp distance (NULL), and two NaNs are the same value.

relative difference: |a - b| / max(|a|, |b|), 0 when a = b (so for ±0), +inf
where one side is infinite and the other is not the same infinity, and NULL
where either side is NaN.

`tests/test_floats.py` checks both against Python's `struct` on the edge
cases: signed zeros, subnormals, infinities, NaN, values straddling zero.
"""

from __future__ import annotations

import struct

# The one NaN every NaN is encoded as: payloads are not distinguished.
CANONICAL_NAN = {"double": 9221120237041090560, "float": 2143289344}

_WIDTH = {
    "double": ("BIGINT", "-9223372036854775808::HUGEINT"),
    "float": ("INTEGER", "-2147483648::BIGINT"),
}
# Half the gap between 1 and the next float: the relative error of one rounding.
UNIT_ROUNDOFF = {"double": 2.0**-53, "float": 2.0**-24}


def bits(expr: str, type_id: str) -> str:
    """The raw bits as a signed integer, every NaN folded into one pattern."""
    cast, _ = _WIDTH[type_id]
    return f"(CASE WHEN isnan({expr}) THEN {CANONICAL_NAN[type_id]} ELSE ({expr})::BIT::{cast} END)"


def bits_list(expr: str, type_id: str) -> str:
    """A list of floats as the list of their bits: DuckDB drops the sign of -0.0 when an
    aggregate such as any_value() carries a list of doubles, and keeps it in integers."""
    return f"list_transform({expr}, lambda __twicerun_f: {bits('__twicerun_f', type_id)})"


def float_of_bits(expr: str, type_id: str) -> str:
    """The float whose bits `bits()` gave, in SQL: the inverse of `bits`, sign included."""
    return f"(({expr})::BIT)::{'DOUBLE' if type_id == 'double' else 'FLOAT'}"


def from_bits(value: int | None, type_id: str) -> float | None:
    """The float whose bits `bits()` gave, sign of zero included."""
    if value is None:
        return None
    if type_id == "double":
        return struct.unpack("<d", struct.pack("<q", int(value)))[0]
    return struct.unpack("<f", struct.pack("<i", int(value)))[0]


def ulps_apart(a: int | None, b: int | None, type_id: str) -> int | None:
    """`ulps()` in Python, on two floats' bits as `bits()` gives them: None where exactly
    one is NaN or NULL, and 0 for equal bits, two NaNs and two NULLs included (where
    `ulps()` has no figure, since they are no move); -0.0 and 0.0 are 0 apart."""
    if a == b:
        return 0
    nan = CANONICAL_NAN[type_id]
    if a is None or b is None or a == nan or b == nan:
        return None
    lowest = -(2**63) if type_id == "double" else -(2**31)

    def line(v: int) -> int:
        return lowest - v if v < 0 else v

    return abs(line(a) - line(b))


def ordered(expr: str, type_id: str) -> str:
    """The bits mapped onto a monotone integer line; -0.0 and 0.0 both map to 0."""
    _, minimum = _WIDTH[type_id]
    wide = "HUGEINT" if type_id == "double" else "BIGINT"
    b = f"(({expr})::BIT::{_WIDTH[type_id][0]})"
    return f"(CASE WHEN {b} < 0 THEN {minimum} - {b} ELSE {b}::{wide} END)"


def moved(a: str, b: str, type_id: str) -> str:
    """True when two floats differ in their bits (NaNs equal to each other, NULL to NULL)."""
    return f"({bits(a, type_id)} IS DISTINCT FROM {bits(b, type_id)})"


def ulps(a: str, b: str, type_id: str) -> str:
    """Units in the last place between two floats; NULL when exactly one is NaN or NULL."""
    return (
        f"(CASE WHEN isnan({a}) OR isnan({b}) THEN NULL "
        f"ELSE abs({ordered(a, type_id)}::HUGEINT - {ordered(b, type_id)}::HUGEINT) END)"
    )


def relative(a: str, b: str) -> str:
    """|a - b| / max(|a|, |b|); 0 when equal; +inf when one side is an infinity the other
    is not; NULL when either is NaN or NULL."""
    # An infinity on one side is infinitely far: NULL there left the move out of the
    # column's largest figure, and a tolerance then passed 1.7e308 turning into +inf.
    return (
        f"(CASE WHEN isnan({a}) OR isnan({b}) THEN NULL "
        f"WHEN {a} = {b} THEN 0.0 "
        f"WHEN isinf({a}) OR isinf({b}) THEN 'inf'::DOUBLE "
        f"ELSE abs(({a})::DOUBLE - ({b})::DOUBLE) / greatest(abs(({a})::DOUBLE), abs(({b})::DOUBLE)) END)"
    )
