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
