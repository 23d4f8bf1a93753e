"""The oracle: properties that must hold on any table, and the cases the report relies on."""

from __future__ import annotations

import itertools
import math
import struct
import tempfile
import textwrap
from dataclasses import replace
from pathlib import Path
from unittest.mock import patch

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from twicerun.compare.matching import least_furthest
from twicerun.compare.oracle import ReferenceCache, compare_artifacts
from twicerun.findings import Attribution
from twicerun.render.evidence import attribution_line

CON = duckdb.connect()
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

rows = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=50),
        st.sampled_from(["a", "b", "c"]),
        st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_subnormal=False),
    ),
    min_size=1,
    max_size=40,
)


def table(data) -> pa.Table:
    k, s, x = (list(c) for c in zip(*data, strict=True)) if data else ([], [], [])
    return pa.table(
        {
            "k": pa.array(k, pa.int64()),
            "s": pa.array(s, pa.string()),
            "x": pa.array(x, pa.float64()),
        }
    )


def measure(reference: pa.Table | None, later: pa.Table | None, **kwargs):
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for label, t in (("r", reference), ("l", later)):
            if t is None:
                paths.append(None)
                continue
            path = Path(d) / f"{label}.parquet"
            pq.write_table(t, path)
            paths.append(path)
        return compare_artifacts(CON, "t", paths[0], paths[1], **kwargs)


# Each run of a pipeline below draws the next number, so run 2 writes what run 1 did not.
COUNTER = "import itertools\n\n_runs = itertools.count()\n\n\n"


@pytest.fixture
def reported(write_pipeline, twicerun):
    """The report of two runs, amplifiers off, of `steps`, which move with `next(_runs)`."""

    def run(steps: str, name: str = "pipeline.py") -> str:
        path = write_pipeline(COUNTER + textwrap.dedent(steps).lstrip(), name)
        return twicerun("run", path, "--runs", "2", "--no-amplify").out

    return run


def no_finding(f) -> bool:
    return f.classes == [] and f.unmatched == 0 and all(d.moved == 0 for d in f.drift)


# Properties ---------------------------------------------------------------------------


@SETTINGS
@given(rows)
def test_identical_tables_give_no_finding(data):
    assert no_finding(measure(table(data), table(data)))


@SETTINGS
@given(rows, st.randoms())
def test_any_permutation_of_rows_gives_no_finding(data, rnd):
    shuffled = list(data)
    rnd.shuffle(shuffled)
    assert no_finding(measure(table(data), table(shuffled)))


@SETTINGS
@given(rows, st.data())
def test_duplicating_one_row_gives_exactly_one_multiplicity_row(data, draw):
    i = draw.draw(st.integers(0, len(data) - 1))
    f = measure(table(data), table([*data, data[i]]))
    assert f.classes == ["MULTIPLICITY"]
    assert (f.multiplicity_extra, f.multiplicity_missing, f.missing, f.extra) == (1, 0, 0, 0)


@SETTINGS
@given(rows, st.data())
def test_changing_one_float_by_one_ulp_gives_one_drift_of_one_ulp(data, draw):
    i = draw.draw(st.integers(0, len(data) - 1))
    k, s, x = data[i]
    # Keep the changed row's key unique, so sorted pairing has exactly one candidate.
    data = [row for j, row in enumerate(data) if j == i or row[:2] != (k, s)]
    i = data.index((k, s, x))
    moved = math.nextafter(x, math.inf)
    changed = list(data)
    changed[i] = (k, s, moved)
    f = measure(table(data), table(changed))
    assert f.classes == ["VALUE_DRIFT"]
    (drift,) = f.drift
    assert (drift.column, drift.moved, drift.max_ulps) == ("x", 1, 1)
    assert (drift.reference_value, drift.later_value) == (x, moved)


@SETTINGS
@given(rows, st.data())
def test_changing_one_exact_value_gives_one_missing_and_one_extra_row(data, draw):
    # One row per key, so the changed row leaves a group empty rather than smaller.
    data = list({row[:2]: row for row in data}.values())
    i = draw.draw(st.integers(0, len(data) - 1))
    changed = list(data)
    _, s, x = changed[i]
    changed[i] = (max(r[0] for r in data) + 1, s, x)  # a key no other row has
    f = measure(table(data), table(changed))
    assert f.classes == ["ROW_MISSING", "ROW_EXTRA"]
    assert (f.missing, f.extra, f.multiplicity_missing, f.multiplicity_extra) == (1, 1, 0, 0)


@SETTINGS
@given(rows)
def test_adding_a_column_gives_schema(data):
    later = table(data).append_column("added", pa.array([1] * len(data), pa.int32()))
    f = measure(table(data), later)
    assert "SCHEMA" in f.classes
    assert f.schema.added == [["added", "INTEGER"]]


# Cases --------------------------------------------------------------------------------


def test_a_dropped_and_a_retyped_column_are_named():
    ref = pa.table({"k": pa.array([1], pa.int64()), "gone": ["x"], "n": pa.array([1], pa.int32())})
    later = pa.table({"k": pa.array([1], pa.int64()), "n": pa.array([1], pa.int64())})
    f = measure(ref, later)
    assert f.classes == ["SCHEMA"]
    assert f.schema.dropped == [["gone", "VARCHAR"]]
    assert f.schema.retyped == [["n", "INTEGER", "BIGINT"]]


def test_an_artifact_written_by_one_run_only_is_all_missing_or_all_extra():
    t = table([(1, "a", 1.0), (2, "b", 2.0)])
    missing = measure(t, None)
    assert (missing.presence, missing.classes, missing.missing) == (
        "reference only",
        ["ROW_MISSING"],
        2,
    )
    extra = measure(None, t)
    assert (extra.presence, extra.classes, extra.extra) == ("later only", ["ROW_EXTRA"], 2)


def test_an_artifact_with_no_exact_column_is_matched_on_no_key():
    ref = pa.table({"x": [1.0, 2.0, 3.0]})
    later = pa.table({"x": [3.0, 1.0, math.nextafter(2.0, 3.0)]})
    f = measure(ref, later)
    assert f.key == [] and f.keyless
    assert f.classes == ["VALUE_DRIFT"]
    assert (f.drift[0].moved, f.drift[0].max_ulps) == (1, 1)


def test_within_a_key_group_rows_pair_sorted_to_sorted():
    ref = pa.table({"g": [1, 1, 1], "x": [1.0, 2.0, 3.0]})
    later = pa.table({"g": [1, 1, 1], "x": [3.0, math.nextafter(1.0, 2.0), 2.0]})
    f = measure(ref, later)
    assert (f.drift[0].moved, f.drift[0].max_ulps, f.paired) == (1, 1, 3)


def test_a_null_against_a_value_is_a_move_no_ulp_count_describes():
    ref = pa.table({"g": [1], "x": pa.array([1.5], pa.float64())})
    later = pa.table({"g": [1], "x": pa.array([None], pa.float64())})
    (drift,) = measure(ref, later).drift
    assert (drift.moved, drift.incomparable, drift.max_ulps) == (1, 1, None)


def test_drift_is_measured_in_float32_units_for_a_float_column():
    ref = pa.table({"g": [1], "x": pa.array([1.0], pa.float32())})
    later = pa.table({"g": [1], "x": pa.array([1.0000001192092896], pa.float32())})
    (drift,) = measure(ref, later).drift
    assert (drift.type, drift.max_ulps) == ("float", 1)


def test_the_reference_cache_gives_the_same_findings():
    ref = table([(1, "a", 1.0), (2, "b", 2.0), (2, "b", 2.0)])
    later = table([(1, "a", 1.0), (2, "b", 2.0), (3, "c", 2.0)])
    with tempfile.TemporaryDirectory() as d:
        ref_path, later_path = Path(d) / "r.parquet", Path(d) / "l.parquet"
        pq.write_table(ref, ref_path)
        pq.write_table(later, later_path)
        cache = ReferenceCache(CON)
        cached = [compare_artifacts(CON, "t", ref_path, later_path, cache=cache) for _ in range(2)]
        cache.clear()
        plain = compare_artifacts(CON, "t", ref_path, later_path)
    assert cached[0] == cached[1] == plain


exact_rows = st.lists(
    st.tuples(st.one_of(st.none(), st.integers(0, 6)), st.sampled_from(["a", "b", None])),
    max_size=30,
)


def exact_table(data) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([r[0] for r in data], pa.int64()),
            "s": pa.array([r[1] for r in data], pa.string()),
        }
    )


@SETTINGS
@given(exact_rows, exact_rows, st.data())
def test_grouping_in_place_and_grouping_every_row_give_the_same_findings(ref, extra, draw):
    # The later side: the reference with some rows edited, dropped or repeated, some
    # new rows, and a stretch moved, so both positional matches and residue occur.
    later = list(ref)
    for _ in range(draw.draw(st.integers(0, 4))):
        if later:
            later[draw.draw(st.integers(0, len(later) - 1))] = draw.draw(
                exact_rows.map(lambda rows: rows[0] if rows else (None, None))
            )
    if later and draw.draw(st.booleans()):
        del later[draw.draw(st.integers(0, len(later) - 1))]
    if later and draw.draw(st.booleans()):
        later.append(later[draw.draw(st.integers(0, len(later) - 1))])
    later += extra[: draw.draw(st.integers(0, len(extra)))]
    if draw.draw(st.booleans()):
        cut = draw.draw(st.integers(0, len(later)))
        later = later[cut:] + later[:cut]
    # Attribution is part of the findings compared; so is matching on a --key subset.
    kwargs = dict(input_columns={"k"}, key=["k"] if draw.draw(st.booleans()) else None)
    in_place = measure(exact_table(ref), exact_table(later), in_place=True, **kwargs)
    every_row = measure(exact_table(ref), exact_table(later), in_place=False, **kwargs)
    assert in_place == every_row


def test_the_sample_sends_a_shuffled_artifact_to_full_grouping_and_an_edited_one_in_place(
    tmp_path,
):
    from twicerun.compare.oracle import _mostly_in_place

    rows = 20_000
    CON.execute(
        f"COPY (SELECT i AS id, i % 7 AS v FROM range({rows}) t(i)) TO '{tmp_path / 'r.parquet'}'"
    )
    CON.execute(
        f"COPY (SELECT i AS id, CASE WHEN i % 100 = 0 THEN -1 ELSE i % 7 END AS v "
        f"FROM range({rows}) t(i)) TO '{tmp_path / 'edited.parquet'}'"
    )
    CON.execute(
        f"COPY (SELECT i AS id, i % 7 AS v FROM range({rows}) t(i) ORDER BY hash(i)) "
        f"TO '{tmp_path / 'shuffled.parquet'}'"
    )
    key = ['"id"', '"v"']
    assert _mostly_in_place(CON, tmp_path / "r.parquet", tmp_path / "edited.parquet", key)
    assert not _mostly_in_place(CON, tmp_path / "r.parquet", tmp_path / "shuffled.parquet", key)
    for name in ("edited", "shuffled"):
        found = [
            compare_artifacts(
                CON, "t", tmp_path / "r.parquet", tmp_path / f"{name}.parquet", in_place=choice
            )
            for choice in (None, True, False)
        ]
        assert found[0] == found[1] == found[2]
        assert (found[0].missing, found[0].extra) == ((200, 200) if name == "edited" else (0, 0))


# Attribution --------------------------------------------------------------------------


def test_attribution_names_the_column_whose_removal_pairs_the_rows():
    ref = pa.table({"product": [1, 2, 3], "price": [10, 20, 30]})
    later = pa.table({"product": [1, 2, 3], "price": [10, 25, 30]})
    a = measure(ref, later).attribution
    assert (a.column, a.before, a.after, a.chosen_by) == (
        "price",
        2,
        {"product": 2, "price": 0},
        "counts",
    )


def test_rows_paired_by_dropping_a_column_say_which_floats_differ_on_them_too():
    """A row_number() keeping one version per customer, over tied versions, picks another
    version: its name and its balance both differ, and "dropping name pairs every row" read
    as if only the name had changed."""
    ref = pa.table({"cust": [1, 2, 3], "name": ["a", "b", "c"], "bal": [1.5, 2.5, 3.5]})
    other_version = pa.table({"cust": [1, 2, 3], "name": ["a", "x", "c"], "bal": [1.5, 9.0, 3.5]})
    renamed = pa.table({"cust": [1, 2, 3], "name": ["a", "x", "c"], "bal": [1.5, 2.5, 3.5]})
    a = measure(ref, other_version).attribution
    assert (a.column, a.after["name"], a.floats_differ) == ("name", 0, ["bal"])
    assert attribution_line(a) == (
        "dropping name from the key pairs every row; bal differs on those rows too"
    )
    # The same row with its name changed keeps its float.
    a = measure(ref, renamed).attribution
    assert (a.column, a.floats_differ) == ("name", [])
    assert attribution_line(a) == "dropping name from the key pairs every row"
    # Only the floats that differ are named, each under its own name.
    two = ref.append_column("rate", pa.array([0.1, 0.2, 0.3]))
    moved = other_version.append_column("rate", pa.array([0.1, 0.2, 0.3]))
    assert measure(two, moved).attribution.floats_differ == ["bal"]


def test_the_loop_says_which_floats_differ_on_rows_a_column_pairs(reported):
    # Through the loop, whose attribution is computed after its comparisons, from the
    # worst one's kept tables.
    out = reported(
        """
        def latest(ctx):
            pick = "DESC" if next(_runs) else "ASC"
            ctx.write(
                "latest",
                f"SELECT cust, arg_max(name, v) AS name, arg_max(bal, v) AS bal FROM "
                f"(SELECT range % 3 AS cust, 'n' || range AS name, (range * 1.5)::DOUBLE AS bal, "
                f"CASE WHEN '{pick}' = 'ASC' THEN range ELSE -range END AS v FROM range(9)) "
                f"GROUP BY cust",
            )
        """
    )
    assert (
        "        latest: 3 of 3 reference rows and 3 of 3 later rows found no partner\n"
        "        dropping name from the key pairs every row; bal differs on those rows too\n"
    ) in out


def test_a_tie_goes_to_the_column_the_step_invented():
    # event and surrogate are a bijection whose pairing moved: dropping either pairs every row.
    ref = pa.table({"event": [1, 2], "cust": [7, 7], "surrogate": [1, 2]})
    later = pa.table({"event": [1, 2], "cust": [7, 7], "surrogate": [2, 1]})
    a = measure(ref, later, input_columns={"event", "cust"}).attribution
    assert (a.column, a.chosen_by, sorted(a.tied)) == (
        "surrogate",
        "invented",
        ["event", "surrogate"],
    )


def test_a_tie_the_inputs_cannot_break_is_said_to_be_undecided():
    ref = pa.table({"event": [1, 2], "cust": [7, 7], "surrogate": [1, 2]})
    later = pa.table({"event": [1, 2], "cust": [7, 7], "surrogate": [2, 1]})
    a = measure(ref, later, input_columns={"event", "cust", "surrogate"}).attribution
    assert (a.column, a.chosen_by) == (None, "undecided")


def test_a_tie_between_columns_the_step_invented_is_not_said_to_be_between_inputs(reported):
    # The report said "neither is a column the step invented" of two columns the step
    # had made up itself (a position and a name from a Python set), which sent a reader
    # to the inputs. The sentence now says which of the tied columns were invented.
    out = reported(
        """
        import pyarrow as pa

        def invent(ctx):
            names = ["a", "b", "c"] if next(_runs) == 0 else ["b", "a", "c"]
            ctx.write("t", pa.table({"pos": [0, 1, 2], "name": names}))
        """
    )
    assert (
        "        dropping either pos or name from the key pairs every row, and both are "
        "columns the step invented, so the counts could not choose between them\n"
    ) in out
    assert "neither" not in out
    out = reported(
        """
        import pyarrow as pa

        def given(ctx):
            ctx.write("g", "SELECT range AS pos, range AS name, 7 AS cust FROM range(3)")

        def permute(ctx):
            ctx.read("g")
            swap = "CASE pos WHEN 0 THEN 1 WHEN 1 THEN 0 ELSE pos END" if next(_runs) else "pos"
            ctx.write("t", f"SELECT {swap} AS pos, name, cust FROM g")
        """,
        name="given.py",
    )
    assert (
        "        dropping either pos or name from the key pairs every row, and neither is a "
        "column the step invented, so the counts could not choose between them\n"
    ) in out
    # Three tied, two of them invented: those two are named, and the count is said.
    three = Attribution(
        None, 6, {"e": 2, "s": 2, "u": 2, "c": 6}, ["e", "s", "u"], "undecided", ["s", "u"]
    )
    assert attribution_line(three) == (
        "dropping any one of e, s or u from the key leaves 2 of 6 unmatched rows, and s and u "
        "are both columns the step invented, so the counts could not choose between them"
    )


def test_rows_no_single_column_explains_are_said_to_be_so_in_the_report(reported):
    # The oracle found no one column to blame and the report said nothing, leaving a
    # reader to look for one. Here every later run moves two columns of every row.
    out = reported(
        """
        def two_columns(ctx):
            i = next(_runs)
            ctx.write("t", f"SELECT range AS id, range + {i} AS a, range * 2 + {i} AS b FROM range(4)")
        """
    )
    # id agrees on every row, so the two columns that moved are named together.
    assert (
        "        t: 4 of 4 reference rows and 4 of 4 later rows found no partner\n"
        "        dropping a and b together from the key pairs every row, though no one of them "
        "does alone\n"
    ) in out
    a = measure(
        pa.table({"id": [1], "a": [1], "b": [1]}), pa.table({"id": [1], "a": [2], "b": [2]})
    ).attribution
    assert (a.chosen_by, a.tied, a.before, a.after) == (
        "together",
        ["a", "b"],
        2,
        {"id": 2, "a": 2, "b": 2},
    )
    # Other rows altogether: no column agrees, and no column is named.
    a = measure(
        pa.table({"id": [1], "a": [1], "b": [1]}), pa.table({"id": [2], "a": [2], "b": [2]})
    ).attribution
    assert (a.chosen_by, a.tied, a.column) == ("none", [], None)
    assert attribution_line(a) == (
        "dropping any one of the 3 key columns leaves both unmatched rows unmatched, "
        "so no single column explains them"
    )
    out = reported(
        """
        def other_rows(ctx):
            i = next(_runs) * 10
            ctx.write("t", f"SELECT range + {i} AS id, range + {i} AS a FROM range(4)")
        """,
        name="other.py",
    )
    assert (
        "dropping any one of the 2 key columns leaves all 8 unmatched rows unmatched, "
        "so no single column explains them\n"
    ) in out
    # Rows that only repeat are a count, not columns: nothing is said of columns there.
    out = reported(
        """
        def doubles(ctx):
            copies = 1 + next(_runs)
            ctx.write("t", f"SELECT i AS id, i * 2 AS a FROM range(4) r(i), range({copies}) c(j)")
        """,
        name="doubled.py",
    )
    assert "        t: 4 rows of run 2 repeat rows that run 1 has fewer times" in out
    assert "no single column" not in out


def test_many_columns_moved_together_are_said_by_the_ones_that_did_not(reported):
    out = reported(
        """
        def wide(ctx):
            i = next(_runs)
            moved = ", ".join(f"range * {k} + {i} AS c{k}" for k in range(1, 7))
            ctx.write("t", f"SELECT range AS id, {moved} FROM range(3)")
        """
    )
    assert (
        "        dropping every key column but id together from the key pairs every row, though "
        "no one of them does alone\n"
    ) in out


def test_a_column_whose_values_only_changed_rows_is_named_with_the_others_that_moved(reported):
    """`first(c), first(s)` per group: `c` takes few values, so its values, counted alone,
    can come out the same in both runs though rows hold other ones; each of `g` and `c`
    then paired every row alone, the two together did not, and the report said no single
    column explained the rows, where dropping `c` and `s` pairs them all on `g`."""
    ref = pa.table({"g": [1, 2, 3], "c": ["red", "blue", "red"], "s": ["x1", "x2", "x3"]})
    later = pa.table({"g": [1, 2, 3], "c": ["red", "red", "blue"], "s": ["y1", "y2", "y3"]})
    a = measure(ref, later).attribution
    assert (a.chosen_by, a.tied, a.column) == ("together", ["c", "s"], None)
    assert attribution_line(a) == (
        "dropping c and s together from the key pairs every row, though no one of them does alone"
    )
    # Most distinct values first: `g` before `c`, which pairs every row alone but not
    # with `g`.
    later = pa.table({"g": [1, 2, 3], "c": ["red", "red", "blue"], "s": ["x1", "x2", "x3"]})
    a = measure(ref, later).attribution
    assert (a.chosen_by, a.column) == ("counts", "c")
    out = reported(
        """
        def firsts(ctx):
            flip = next(_runs)
            colour = "CASE g WHEN 0 THEN 'blue' WHEN 1 THEN 'red' ELSE 'red' END"
            moved = "CASE g WHEN 0 THEN 'red' WHEN 1 THEN 'blue' ELSE 'red' END"
            ctx.write(
                "t",
                f"SELECT g, {moved if flip else colour} AS c, 'v' || (g + {flip} * 10) AS s "
                f"FROM range(3) r(g)",
            )
        """
    )
    assert (
        "        t: 3 of 3 reference rows and 3 of 3 later rows found no partner\n"
        "        dropping c and s together from the key pairs every row, though no one of them "
        "does alone\n"
    ) in out


def test_a_list_whose_elements_came_back_in_another_order_is_said_to_be_so():
    ref = pa.table({"g": [1, 2], "ids": [[1, 2, 3], [4, 5]]})
    moved = pa.table({"g": [1, 2], "ids": [[3, 1, 2], [4, 5]]})
    other = pa.table({"g": [1, 2], "ids": [[1, 2, 4], [4, 5]]})
    a = measure(ref, moved).attribution
    assert (a.column, a.chosen_by, a.reordered) == ("ids", "counts", ["ids"])
    # Another element is not another order.
    a = measure(ref, other).attribution
    assert (a.column, a.chosen_by, a.reordered) == ("ids", "counts", [])
    # A list that is the whole key is reordered all the same.
    a = measure(ref.select(["ids"]), moved.select(["ids"])).attribution
    assert (a.column, a.reordered) == ("ids", ["ids"])


def test_a_key_of_one_column_is_not_said_to_pair_once_dropped(reported):
    """With one key column, dropping it leaves no key, so every row pairs whenever the
    counts agree; "dropping id from the key pairs every row" named it as an explanation."""
    out = reported(
        """
        def ids(ctx):
            ctx.write("t", f"SELECT range + {next(_runs)} AS id FROM range(4)")


        def lists(ctx):
            order = "DESC" if next(_runs) > 1 else "ASC"
            ctx.write("l", f"SELECT list(range ORDER BY range {order}) AS ids FROM range(4)")
        """
    )
    assert "        t: 2 of 4 reference rows and 2 of 4 later rows found no partner\n  1 " in out
    assert "dropping" not in out
    # One row is one row, not "1 of 1 reference rows".
    assert (
        "        l: 1 of 1 reference row and 1 of 1 later row found no partner\n"
        "        ids holds the same elements in another order\n"
    ) in out


def test_two_columns_built_without_order_by_are_named_together(reported):
    """list() and string_agg() in one GROUP BY, both without ORDER BY: every row moves in
    two columns, and the report said only that no single column explained it."""
    out = reported(
        """
        def collect(ctx):
            order = "DESC" if next(_runs) else "ASC"
            ctx.write(
                "lists",
                f"SELECT g, list(id ORDER BY id {order}) AS ids, "
                f"string_agg(id::VARCHAR, ',' ORDER BY id {order}) AS s "
                f"FROM (SELECT range AS id, range % 3 AS g FROM range(12)) GROUP BY g",
            )
        """
    )
    assert (
        "        lists: 3 of 3 reference rows and 3 of 3 later rows found no partner\n"
        "        dropping ids and s together from the key pairs every row, though no one of them "
        "does alone; ids holds the same elements in another order\n"
    ) in out


# Nested -------------------------------------------------------------------------------


def test_float_drift_inside_a_list_a_struct_and_a_map_is_value_drift(tmp_path):
    up = math.nextafter(2.0, 3.0)
    ref = tmp_path / "r.parquet"
    later = tmp_path / "l.parquet"
    CON.execute(
        f"COPY (SELECT 1 AS id, [1.0::DOUBLE, 2.0] AS l, {{'a': 'x', 'v': 2.0::DOUBLE}} AS s, "
        f"map(['k'], [2.0::DOUBLE]) AS m) TO '{ref}' (FORMAT parquet)"
    )
    CON.execute(
        f"COPY (SELECT 1 AS id, [1.0::DOUBLE, {up!r}] AS l, {{'a': 'x', 'v': {up!r}::DOUBLE}} AS s, "
        f"map(['k'], [{up!r}::DOUBLE]) AS m) TO '{later}' (FORMAT parquet)"
    )
    f = compare_artifacts(CON, "t", ref, later)
    assert f.classes == ["VALUE_DRIFT"]
    by_path = {d.column: (d.unit, d.moved, d.max_ulps) for d in f.drift}
    assert by_path == {
        "l[]": ("values", 1, 1),
        "s.v": ("rows", 1, 1),
        "m.value[]": ("values", 1, 1),
    }


def test_a_reordered_list_of_floats_is_a_difference(tmp_path):
    ref, later = tmp_path / "r.parquet", tmp_path / "l.parquet"
    CON.execute(f"COPY (SELECT 1 AS id, [1.0::DOUBLE, 2.0] AS l) TO '{ref}' (FORMAT parquet)")
    CON.execute(f"COPY (SELECT 1 AS id, [2.0::DOUBLE, 1.0] AS l) TO '{later}' (FORMAT parquet)")
    f = compare_artifacts(CON, "t", ref, later)
    assert f.classes == ["VALUE_DRIFT"]
    assert f.drift[0].moved == 2
    # The moved values are the same values in another order, and the findings say so.
    assert (f.drift[0].lists_moved, f.drift[0].lists_reordered) == (1, 1)


@pytest.mark.parametrize(
    "kind",
    [pa.list_(pa.float64()), pa.list_(pa.float32()), pa.list_(pa.list_(pa.float64()))],
    ids=["list", "list-of-float", "nested-list"],
)
def test_a_zero_whose_sign_flipped_inside_a_list_is_drift_as_in_a_column(kind):
    # The digests told the two apart and the oracle found nothing: DuckDB's any_value()
    # dropped the sign of -0.0 from a list of floats before it was measured.
    def value(zero):
        return [[zero, 1.0]] if kind.value_type in (pa.float64(), pa.float32()) else [[[zero]]]

    f = measure(
        pa.table({"id": [0], "l": pa.array(value(0.0), kind)}),
        pa.table({"id": [0], "l": pa.array(value(-0.0), kind)}),
    )
    assert f.classes == ["VALUE_DRIFT"]
    (drift,) = f.drift
    assert (drift.moved, drift.max_ulps, drift.later_value) == (1, 0, -0.0)
    assert math.copysign(1.0, drift.later_value) == -1.0


def test_only_lists_holding_the_same_bits_count_as_reordered(tmp_path):
    up = math.nextafter(2.0, 3.0)
    # 1 reordered; 2 one ulp off and reordered; 3 reordered with a repeated value;
    # 4 one value repeated instead of another; 5 unchanged; 6 a zero's sign flipped and
    # reordered (written by pyarrow: DuckDB drops the sign of -0.0 in a list literal).
    ref = [[1.0, 2.0], [1.0, 2.0], [1.0, 1.0, 2.0], [1.0, 1.0, 2.0], [7.0], [0.0, 1.0]]
    later = [[2.0, 1.0], [up, 1.0], [1.0, 2.0, 1.0], [1.0, 2.0, 2.0], [7.0], [1.0, -0.0]]
    (drift,) = measure(
        pa.table({"id": list(range(6)), "l": pa.array(ref, pa.list_(pa.float64()))}),
        pa.table({"id": list(range(6)), "l": pa.array(later, pa.list_(pa.float64()))}),
    ).drift
    assert (drift.lists_moved, drift.lists_reordered) == (5, 2)


def test_an_exact_field_inside_a_float_struct_is_part_of_the_key(tmp_path):
    ref, later = tmp_path / "r.parquet", tmp_path / "l.parquet"
    CON.execute(f"COPY (SELECT {{'a': 'x', 'v': 1.0::DOUBLE}} AS s) TO '{ref}' (FORMAT parquet)")
    CON.execute(f"COPY (SELECT {{'a': 'y', 'v': 1.0::DOUBLE}} AS s) TO '{later}' (FORMAT parquet)")
    f = compare_artifacts(CON, "t", ref, later)
    assert f.classes == ["ROW_MISSING", "ROW_EXTRA"]


def test_a_reordered_list_of_integers_is_a_missing_and_an_extra_row(tmp_path):
    ref, later = tmp_path / "r.parquet", tmp_path / "l.parquet"
    CON.execute(f"COPY (SELECT 1 AS g, [1, 2] AS l) TO '{ref}' (FORMAT parquet)")
    CON.execute(f"COPY (SELECT 1 AS g, [2, 1] AS l) TO '{later}' (FORMAT parquet)")
    f = compare_artifacts(CON, "t", ref, later)
    assert f.classes == ["ROW_MISSING", "ROW_EXTRA"]
    assert f.attribution.column == "l"


@pytest.mark.parametrize(
    "expr",
    [
        "[1.0::DOUBLE, NULL]",
        "[[1.5::DOUBLE], [2.5]]",
        "union_value(d := 1.5::DOUBLE)::UNION(d DOUBLE, s VARCHAR)",
        "[1.5::DOUBLE, 2.5]::DOUBLE[2]",
        "map([1.5::DOUBLE], ['v'])",
    ],
)
def test_every_nested_shape_compares_equal_to_itself(tmp_path, expr):
    ref, later = tmp_path / "r.parquet", tmp_path / "l.parquet"
    for path in (ref, later):
        CON.execute(f"COPY (SELECT {expr} AS v, 1 AS id) TO '{path}' (FORMAT parquet)")
    assert no_finding(compare_artifacts(CON, "t", ref, later))


def test_columns_named_like_the_oracles_own_aliases_are_compared_as_data(tmp_path):
    names = ["rp", "lp", "r0", "l0", "k0", "n"]
    ref = pa.table({name: [1, 2, 3, 3] for name in names})
    later = pa.table({name: [1, 2, 3, 4] for name in names})
    pq.write_table(ref, tmp_path / "r.parquet")
    pq.write_table(later, tmp_path / "l.parquet")
    found = [
        compare_artifacts(CON, "t", tmp_path / "r.parquet", tmp_path / "l.parquet", in_place=c)
        for c in (True, False)
    ]
    assert found[0] == found[1]
    assert (found[0].multiplicity_missing, found[0].extra) == (1, 1)


grouped_rows = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=3),
        st.sampled_from(["a", "b"]),
        st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_subnormal=False),
    ),
    min_size=1,
    max_size=40,
)


@SETTINGS
@given(grouped_rows, st.randoms())
def test_every_float_moved_one_ulp_pairs_each_row_with_its_own_copy(data, rnd):
    """Few keys, so most groups hold several rows: they are paired sorted to sorted, and a
    pairing that sorted the two sides differently would show distances far past one ulp.
    A group of one row on a side is paired without a sort.

    Rows identical on both sides pair first (docs/comparison.md), so a row moved onto
    another row's old value is that row, unmoved: that case is pinned on its own below."""
    moved = [(k, s, math.nextafter(x, math.inf)) for k, s, x in data]
    assume(not {(k, s, x) for k, s, x in moved} & {(k, s, x) for k, s, x in data})
    rnd.shuffle(moved)
    f = measure(table(data), table(moved))
    assert f.unmatched == 0
    assert f.classes in (["VALUE_DRIFT"], [])
    (drift,) = f.drift
    assert drift.max_ulps in (1, None)


@SETTINGS
@given(rows, st.data())
def test_pairing_by_key_alone_and_by_number_give_the_same_findings(data, draw):
    """Where no key group has two rows left over on a side, leftovers pair by key alone;
    numbering them within their group, as groups with several leftovers need, must give
    the same findings. The later side drifts, loses and repeats rows, so both paths and
    every kind of difference are exercised."""
    later = []
    for k, s, x in data:
        roll = draw.draw(st.integers(0, 9))
        if roll == 0:
            continue
        moved = math.nextafter(x, math.inf) if roll < 5 else x
        later.append((k, s, moved))
        if roll == 9:
            later.append((k, s, x * 2))
    later += draw.draw(rows)[: draw.draw(st.integers(0, 3))]
    draw.draw(st.randoms()).shuffle(later)
    kwargs = dict(input_columns={"k"}, key=["k"] if draw.draw(st.booleans()) else None)
    by_key = measure(table(data), table(later), **kwargs)
    with patch("twicerun.compare.oracle._one_left_each", return_value=False):
        numbered = measure(table(data), table(later), **kwargs)
    assert by_key == numbered


def test_a_row_moved_onto_another_rows_old_value_pairs_with_it_first():
    """Found by the property test above: 999999.9999999999 moved up one ulp is 1e6, the
    other row's old value. Identical rows pair first, as they cannot have drifted, so one
    row is unmoved and the other moved two ulps, where sorted-to-sorted would say both
    moved one: the data cannot tell the two stories apart, and this one moves fewer rows."""
    below = math.nextafter(1e6, 0)
    f = measure(
        table([(0, "a", 1e6), (0, "a", below)]),
        table([(0, "a", math.nextafter(1e6, math.inf)), (0, "a", 1e6)]),
    )
    (drift,) = f.drift
    assert (f.unmatched, drift.moved, drift.compared, drift.max_ulps) == (0, 1, 2, 2)


def test_the_pair_shown_is_the_same_every_time():
    """Every pair moved by one ulp ties for the furthest: the pair shown was whichever the
    aggregate met first, so two comparisons of the same files could show two. Its bits
    now break the tie: the largest value, here."""
    values = [float(v) + 0.5 for v in range(1, 200_001)]
    ref = pa.table({"k": pa.array(range(len(values)), pa.int64()), "x": values})
    later = pa.table(
        {"k": pa.array(range(len(values)), pa.int64()), "x": [math.nextafter(v, 0) for v in values]}
    )
    shown = {
        (d.reference_value, d.later_value)
        for f in (measure(ref, later) for _ in range(3))
        for d in f.drift
    }
    assert shown == {(values[-1], math.nextafter(values[-1], 0))}


def test_the_sign_of_a_nan_does_not_change_how_rows_pair():
    """Two NaNs are the same value to the oracle, whatever their sign bits, and x86 gives
    0/0 a sign that depends on how it was computed. Rows used to be sorted for pairing
    by the raw bits of their floats, a negative NaN first and a positive one last, so a
    NaN whose sign flipped between runs paired its row with another row of its group."""
    negative_nan = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000001))[0]
    ref = pa.table({"k": [1, 1], "x": [negative_nan, 5.0], "y": [1.0, 3.0]})
    later = pa.table(
        {
            "k": [1, 1],
            "x": [math.nan, math.nextafter(5.0, math.inf)],
            "y": [math.nextafter(1.0, math.inf), 3.0],
        }
    )
    f = measure(ref, later)
    assert f.unmatched == 0
    drift = {d.column: (d.moved, d.max_ulps, d.incomparable) for d in f.drift}
    assert drift == {"x": (1, 1, 0), "y": (1, 1, 0)}


def test_a_move_to_an_infinity_is_infinitely_far_not_another_pairs_figure(reported):
    # The furthest pair was +inf against -inf, and the line beside it printed "0 relative",
    # the relative figure of another pair (0.0 against -0.0); `diff` printed "None relative"
    # for 1.0 against +inf. Moving to an infinity is infinitely far in relative terms.
    from twicerun.verdicts.explain import describe

    out = reported(
        """
        def flip(ctx):
            signs = ("", "") if next(_runs) == 0 else ("-", "-")
            ctx.write(
                "t",
                f"SELECT * FROM (VALUES (1, {signs[0]}0.0::DOUBLE), (2, '{signs[1]}inf'::DOUBLE)) v(id, x)",
            )
        """
    )
    assert (
        "        furthest move in this comparison: x, 18,437,736,874,454,810,624 ulps and "
        "infinitely far in relative terms, +inf against -inf\n"
    ) in out
    f = measure(pa.table({"id": [1], "x": [1.0]}), pa.table({"id": [1], "x": [math.inf]}))
    assert describe(f) == (
        "t: VALUE_DRIFT; 1 float value moved, furthest in x: 4,611,686,018,427,387,904 ulps, "
        "infinitely far in relative terms"
    )


def test_no_tolerance_lets_a_float_overflow_to_infinity_through(write_pipeline, twicerun):
    # The move to +inf had no relative figure, so the column's largest was the other
    # pair's 2.2e-16, and --tolerance-rel 0.01 tolerated 1.7e308 becoming +inf.
    path = write_pipeline(
        COUNTER
        + textwrap.dedent(
            """
            def overflow(ctx):
                later = next(_runs) == 1
                big = "'inf'::DOUBLE" if later else "1.7e308::DOUBLE"
                tiny = "1.0000000000000002::DOUBLE" if later else "1.0::DOUBLE"
                ctx.write("t", f"SELECT * FROM (VALUES (1, {big}), (2, {tiny})) v(id, x)")
            """
        )
    )
    for flags in (["--tolerance-rel", "0.01"], ["--tolerance-ulps", "10000000000000000"]):
        outcome = twicerun("run", path, "--runs", "2", "--no-amplify", *flags, "--json", "-")
        (step,) = outcome.json()["steps"]
        assert (outcome.code, step["status"], step["tolerated"]) == (1, "DIVERGENT", 0), flags


def test_an_artifact_written_empty_on_one_side_is_said_plainly(reported):
    # It read "0 of 0 reference rows and 3 of 3 later rows found no partner".
    out = reported(
        """
        def fills(ctx):
            ctx.write("e", f"SELECT range AS id FROM range({3 * next(_runs)})")
        """
    )
    assert "        e: run 1 wrote no rows to it and run 2 wrote 3 rows, all of them extra\n" in out
    out = reported(
        """
        def empties(ctx):
            ctx.write("e", f"SELECT range AS id FROM range({1 - next(_runs)})")
        """,
        name="empties.py",
    )
    assert (
        "        e: run 2 wrote no rows to it and run 1 wrote 1 row, which is missing there\n"
    ) in out


def test_columns_that_pair_every_row_together_beat_one_that_pairs_some():
    """Two columns moved on every row and `id` on none; dropping `id` paired two rows by
    chance, and the report blamed `id`, the one column the step never changed."""
    ref = pa.table({"id": [0, 1, 2, 3], "a": [0, 1, 0, 1], "b": [0, 0, 1, 1]})
    later = pa.table({"id": [0, 1, 2, 3], "a": [1, 0, 2, 3], "b": [1, 0, 2, 3]})
    a = measure(ref, later).attribution
    assert (a.chosen_by, a.tied, a.column, a.before, a.after) == (
        "together",
        ["a", "b"],
        None,
        8,
        {"id": 4, "a": 6, "b": 8},
    )
    assert attribution_line(a) == (
        "dropping a and b together from the key pairs every row, though no one of them does alone"
    )


def _numbered(g, rn, v) -> pa.Table:
    return pa.table({"g": pa.array(g, pa.int64()), "rn": pa.array(rn, pa.int64()), "v": v})


def test_rows_handed_each_others_floats_are_named_as_the_same_rows():
    """A row_number() over tied rows hands the numbers to other rows; with a float beside
    them, every row paired on (g, rn) and the float "drifted" by whole values, which read
    as a sum added in another order."""
    from twicerun.render.evidence import evidence
    from twicerun.result import ArtifactOutcome, Comparison
    from twicerun.verdicts.explain import describe
    from twicerun.vocabulary.loop import Presence, SettledBy

    ref = _numbered([1, 1, 1, 2], [1, 2, 3, 1], [0.5, 0.25, 0.125, 4.0])
    later = _numbered([1, 1, 1, 2], [1, 2, 3, 1], [0.25, 0.5, 0.125, 4.0])
    f = measure(ref, later)
    assert (f.classes, f.unmatched, f.drift[0].moved) == (["VALUE_DRIFT"], 0, 2)
    assert (f.reassigned, f.reassigned_together) == (["rn"], False)
    outcome = ArtifactOutcome("t", Presence.BOTH, SettledBy.ORACLE, True, 4, 4, findings=f)
    lines = evidence([Comparison(run=2, fired=True, artifacts=[outcome])])
    assert lines[-1] == (
        "t: every row pairs with the same floats to the bit once rn is dropped from the key: "
        "the same rows with rn handed to other ones (as row_number() over tied rows does), so "
        "no float moved by being added in another order"
    )
    assert describe(f).endswith(
        "; every row pairs with the same floats once rn is left out: the same rows"
    )
    # Drift is not that: one value moved by one ulp leaves nothing for a key column to explain.
    drifted = _numbered([1, 1, 1, 2], [1, 2, 3, 1], [0.5, 0.25, math.nextafter(0.125, 1), 4.0])
    assert measure(ref, drifted).reassigned == []
    # Nor is a float that another row's value replaced: the values are not the same ones.
    replaced = _numbered([1, 1, 1, 2], [1, 2, 3, 1], [0.25, 0.25, 0.125, 4.0])
    assert measure(ref, replaced).reassigned == []


def test_rows_that_pair_on_a_handed_out_number_by_chance_are_named_as_the_same_rows():
    """`row_number() OVER ()` over rows that arrive in another order: most rows find no
    partner, and the few whose group and number happen to coincide paired with another
    row's float, which read as drift of whole values (the second class beside the rows
    that went missing) with nothing to say that the floats are the same ones. Dropping the
    number pairs every row with the same floats, and the explanation now says so, as it
    does where every row paired."""
    from twicerun.verdicts.explain import describe

    ref = pa.table({"g": [1, 1, 2, 2], "v": [0.5, 0.25, 4.0, 8.0], "seq": [1, 2, 3, 4]})
    later = pa.table({"g": [1, 2, 1, 2], "v": [0.25, 4.0, 0.5, 8.0], "seq": [1, 2, 3, 4]})
    # Dropping g pairs the rows too (seq alone is a key); seq is the column no input has.
    f = measure(ref, later, input_columns=["g", "v"])
    assert (f.missing, f.extra, f.paired, f.drift[0].moved) == (2, 2, 2, 1)
    assert (f.attribution.column, f.attribution.floats_differ) == ("seq", [])
    assert (f.reassigned, f.reassigned_together) == (["seq"], False)
    assert describe(f).endswith(
        "; every row pairs with the same floats once seq is left out: the same rows"
    )
    # A float that moved as well is drift the number does not explain.
    moved = later.set_column(1, "v", pa.array([0.25, 4.0, 0.5, math.nextafter(8.0, 9)]))
    f = measure(ref, moved, input_columns=["g", "v"])
    assert (f.attribution.column, f.attribution.floats_differ) == ("seq", ["v"])
    assert f.reassigned == []


def test_a_series_says_so_of_the_comparison_it_attributed(write_pipeline, twicerun):
    """The loop and each series attribute one comparison, the worst, and that one's rows
    paired by chance on (g, seq) too: the report said the step's kinds were ROW_MISSING
    ROW_EXTRA VALUE_DRIFT and nothing of the floats being the same ones."""
    path = write_pipeline(
        """
        def base(ctx):
            ctx.write("t", "SELECT (i % 3)::INT AS g, (i * 0.5)::DOUBLE AS v FROM range(130000) t(i)")

        def numbered(ctx):
            ctx.read("t")
            ctx.write("n", "SELECT g, v, row_number() OVER () AS seq FROM t")
        """
    )
    without = ["--without", "tie-collapse", "--without", "row-multiplication"]
    outcome = twicerun(
        "run", path, "--runs", "3", "--amplify", *without, "--without", "thread-count"
    )
    assert (
        "numbered  0 of 2  STABLE_ON_THIS_INPUT  ROW_MISSING ROW_EXTRA VALUE_DRIFT" in outcome.out
    )
    assert (
        "comparisons that moved, every row pairs with the same floats to the bit once seq is "
        "dropped from the key: the same rows with seq handed to other ones"
    ) in outcome.out


def test_rows_handed_floats_across_two_key_columns_name_both():
    # Only dropping both pairs the floats: g and rn moved together.
    from twicerun.render.evidence import evidence
    from twicerun.result import ArtifactOutcome, Comparison
    from twicerun.vocabulary.loop import Presence, SettledBy

    def said(*findings) -> str:
        comparisons = [
            Comparison(
                run=k + 2,
                fired=True,
                artifacts=[ArtifactOutcome("t", Presence.BOTH, SettledBy.ORACLE, True, findings=f)],
            )
            for k, f in enumerate(findings)
        ]
        return evidence(comparisons)[-1]

    ref = _numbered([1, 2], [1, 2], [0.5, 0.25])
    together = measure(ref, _numbered([1, 2], [1, 2], [0.25, 0.5]))
    assert (together.reassigned, together.reassigned_together) == (["g", "rn"], True)
    drifted = measure(ref, _numbered([1, 2], [1, 2], [0.5, math.nextafter(0.25, 1)]))
    assert said(together, drifted) == (
        "t: in 1 of the 2 comparisons that moved, every row pairs with the same floats to the "
        "bit once g and rn are dropped from the key together: the same rows with g and rn "
        "handed to other ones (as row_number() over tied rows does), so no float moved by "
        "being added in another order"
    )
    # A key of many columns is named as a whole.
    wide = replace(together, key=list("abcdef"), reassigned=list("abcdef"))
    assert said(wide).startswith(
        "t: every row pairs with the same floats to the bit once the whole key is dropped: "
        "the same rows with all 6 key columns handed to other ones"
    )
    # Either one dropped on its own pairs every row here.
    ref = _numbered([1, 1, 2, 2], [1, 2, 1, 2], [0.5, 0.25, 0.25, 0.5])
    either = measure(ref, _numbered([1, 1, 2, 2], [1, 2, 1, 2], [0.25, 0.5, 0.5, 0.25]))
    assert (either.reassigned, either.reassigned_together) == (["g", "rn"], False)
    assert said(either, either).startswith(
        "t: in every comparison that moved, every row pairs with the same floats to the bit "
        "once any one of g or rn is dropped from the key: the same rows with g or rn handed"
    )


def _up(x: float, n: int) -> float:
    for _ in range(n):
        x = math.nextafter(x, math.inf)
    return x


def _furthest_after_drift(ref: dict[str, list[float]], rnd, least: int, most: int) -> int:
    """The furthest move in ulps the oracle reports once every value of `ref` moved up by
    `least` to `most` ulps and the rows came back shuffled."""
    order = list(range(len(next(iter(ref.values())))))
    rnd.shuffle(order)
    later = {
        name: [_up(values[i], rnd.randint(least, most)) for i in order]
        for name, values in ref.items()
    }
    return max((d.max_ulps or 0) for d in measure(pa.table(ref), pa.table(later)).drift)


@pytest.mark.parametrize("keyed", [False, True])
def test_rows_whose_first_float_swapped_order_pair_by_the_column_that_kept_it(keyed):
    """Found by a pipeline that grouped floats and kept no label: two groups' sums were
    two ulps apart, drift swapped their order, and rows paired sorted by the first float
    column alone handed each row the other's average, a move of 501 billion ulps that a
    --tolerance-rel then refused. Ordered by the average, every row pairs with its own
    copy and the sums moved by three ulps and one."""
    s0 = 116042.61428571488
    ref = {"s": [s0, _up(s0, 2)], "a": [6.856892149124831, 6.8573378649431564]}
    later = {"s": [_up(s0, 3), _up(s0, 1)], "a": ref["a"]}
    if keyed:
        ref, later = {"g": [1, 1], **ref}, {"g": [1, 1], **later}
    f = measure(pa.table(ref), pa.table(later))
    assert f.keyless is not keyed
    drift = {d.column: (d.moved, d.max_ulps) for d in f.drift}
    assert drift == {"s": (2, 3), "a": (0, None)}


def test_drift_that_keeps_every_columns_order_is_paired_once():
    """No pairing moves the leading column less than sorting by it does, so when no other
    column moved further, the other orderings are not tried: they cost a pairing and a
    measurement each, on every comparison of a drifting artifact without a key."""
    import twicerun.compare.oracle as oracle

    values = [float(v) * 1.25 for v in range(1, 50)]
    ref = pa.table({"x": values, "y": [v * 3 for v in values], "z": [-v for v in values]})
    later = pa.table({c: [math.nextafter(v, math.inf) for v in ref[c].to_pylist()] for c in "xyz"})
    with patch.object(oracle, "_scalar_drifts", wraps=oracle._scalar_drifts) as measured:
        f = measure(ref, later)
    assert {d.column: (d.moved, d.max_ulps) for d in f.drift} == {c: (49, 1) for c in "xyz"}
    assert measured.call_count == 1


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6)), min_size=2, max_size=30),
    st.randoms(use_true_random=False),
)
def test_near_ties_in_the_first_float_column_do_not_make_drift_look_larger(cluster, rnd):
    """Every value moved by at most three ulps and the rows came back in another order.
    The first float column clusters a few ulps apart; the others hold values far apart
    (when every column ties within a few ulps on the same rows, no one ordering pairs them:
    docs/comparison.md says so). However drift reorders the cluster, the pairing reported
    moves no value further than it moved."""
    n = len(cluster)
    spread = rnd.sample(range(1, 10 * n), n)
    ref = {
        "a": [_up(1000.0 * (1 + c), k) for c, k in cluster],
        "b": [0.5 * v for v in spread],
        "c": [-0.25 * v for v in reversed(spread)],
    }
    assert _furthest_after_drift(ref, rnd, 0, 3) <= 3


@SETTINGS
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 1), st.integers(0, 1)), min_size=2, max_size=30
    ),
    st.randoms(use_true_random=False),
)
def test_rows_alike_in_every_float_column_pair_with_the_least_furthest_move(rows, rnd):
    """The rows hypothesis built at once against the orderings: every column holds a few
    values, so rows sit in clusters alike in all three, and every value moved by one to
    three ulps. No single column's order pairs such rows, and the one sorted by handed
    rows of one cluster the values of another (4.5e15 ulps reported for three). For so few
    rows the pairing whose furthest move is least is found outright, and no pairing can
    report less than what drift moved, nor need more."""
    ref = {
        "a": [1000.0 * (1 + x) for x, _, _ in rows],
        "b": [1.0 + y for _, y, _ in rows],
        "c": [-1.0 - z for _, _, z in rows],
    }
    assert _furthest_after_drift(ref, rnd, 1, 3) <= 3


@SETTINGS
@given(
    st.integers(0, 6).flatmap(
        lambda n: st.lists(
            st.lists(st.integers(0, 20), min_size=n, max_size=n), min_size=n, max_size=n
        )
    )
)
def test_the_exact_pairing_has_the_least_furthest_distance_of_any(matrix):
    """Checked against every permutation, on small tables of distances."""
    n = len(matrix)
    rows = list(range(n))
    pairing = least_furthest(rows, rows, lambda i, j: matrix[i][j])
    assert sorted(pairing) == rows
    furthest = max((matrix[i][pairing[i]] for i in rows), default=0)
    assert furthest == min(
        max((matrix[i][p[i]] for i in rows), default=0) for p in itertools.permutations(rows)
    )
