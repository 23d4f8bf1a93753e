"""The one quoting helper: whatever a path or a name holds, DuckDB reads back exactly it."""

from __future__ import annotations

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from twicerun import sql

TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30
)


@settings(max_examples=60, deadline=None)
@given(TEXT)
def test_a_string_literal_reads_back_as_itself(text):
    assert duckdb.connect().execute(f"SELECT {sql.string(text)}").fetchone()[0] == text


@settings(max_examples=60, deadline=None)
@given(TEXT.filter(lambda t: t.strip() != ""))
def test_an_identifier_names_exactly_its_column(name):
    relation = duckdb.sql(f"SELECT 1 AS {sql.identifier(name)}")
    assert relation.columns == [name]


def test_a_parquet_path_with_a_quote_in_it_is_read(tmp_path):
    path = tmp_path / "it's here.parquet"
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 42 AS x) TO {sql.string(path)} (FORMAT parquet)")
    assert con.execute(f"SELECT x FROM {sql.parquet(path)}").fetchone() == (42,)
    numbered = sql.parquet(path, file_row_number="true")
    assert con.execute(f"SELECT file_row_number FROM {numbered}").fetchone() == (0,)


@settings(max_examples=25, deadline=None)
@given(st.text(st.sampled_from("ab1[]*?{},'\" -_.é"), min_size=1, max_size=12))
def test_a_file_literal_reads_that_file_even_where_its_name_is_a_glob(tmp_path_factory, stem):
    """`part[1].csv` read through a plain string literal reads part1.csv where that exists.
    (Not a backslash: DuckDB's glob takes it for a separator, so no escape can hold it.)"""
    directory = tmp_path_factory.mktemp("files")
    target = directory / f"{stem}.csv"
    target.write_text("n\n1\n")
    # Decoys a glob reading of the name would match: its glob characters as plain letters.
    for decoy in {stem.translate(str.maketrans("[]*?", "1a1a")), "a1", "1"}:
        if decoy != stem and "/" not in decoy:
            (directory / f"{decoy}.csv").write_text("n\n2\n")
    con = duckdb.connect()
    assert con.execute(f"SELECT n FROM read_csv({sql.file(target)})").fetchall() == [(1,)]


def test_a_file_literal_with_a_backslash_is_left_as_written_which_reads_it(tmp_path):
    """Escaped, `?\\.csv` would read nothing: DuckDB's glob takes the backslash for a
    separator. As written, its glob matches nothing and DuckDB reads the file of that name."""
    target = tmp_path / "?\\.csv"
    target.write_text("n\n1\n")
    (tmp_path / "a.csv").write_text("n\n2\n")
    con = duckdb.connect()
    assert con.execute(f"SELECT n FROM read_csv({sql.file(target)})").fetchall() == [(1,)]
