"""The two digests of an artifact, and what each can settle.

bytes: SHA-256 of the Parquet file as written. Equal bytes prove sameness.
Every artifact gets this one.

canonical: the rows as a multiset, computed in one pass in DuckDB. Each row
is hashed over a type-aware encoding (floats by their exact bits, so -0.0 and
0.0 differ; every NaN folded into one), and that hash hashed again; the
digest is SHA-256 over the schema (names, types, order), the row count and
the two 128-bit sums of those hashes. Summing makes row order irrelevant and
counts a duplicated row twice. It costs a pass over the rows, so the runner
computes it only for a pair whose bytes differ.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import duckdb

from twicerun import sql
from twicerun.compare.columns import canonical_expr, classify

_SALT = "'twicerun/canonical/2'"


@dataclass(frozen=True)
class Digests:
    """Both digests of one artifact, with the row count and schema read along the way."""

    bytes_digest: str
    canonical_digest: str
    rows: int
    schema: list[list[str]]


def bytes_digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def canonical_digest(
    con: duckdb.DuckDBPyConnection, path: Path
) -> tuple[str, int, list[list[str]]]:
    """The canonical digest, row count and schema of one Parquet artifact."""
    relation = con.sql(f"SELECT * FROM {sql.parquet(path)}")
    columns = [classify(n, t) for n, t in zip(relation.columns, relation.types, strict=True)]
    schema = [[c.name, c.type] for c in columns]
    encoded = [
        canonical_expr(sql.identifier(n), t)
        for n, t in zip(relation.columns, relation.types, strict=True)
    ]
    row = ", ".join(encoded)
    # The second sum hashes the row hash again instead of the row: a second,
    # differently mixed multiset sum for a third of the cost of rehashing every column.
    query = (
        f"SELECT count(*), coalesce(sum(h::HUGEINT), 0), coalesce(sum(hash(h, {_SALT})::HUGEINT), 0) "
        f"FROM (SELECT hash({row}) AS h FROM {sql.parquet(path)})"
    )
    count, first, second = con.execute(query).fetchone()
    material = json.dumps([schema, int(count), str(first), str(second)], separators=(",", ":"))
    return hashlib.sha256(material.encode()).hexdigest(), int(count), schema


NOT_COMPUTED = ""


def shape(con: duckdb.DuckDBPyConnection, path: Path) -> tuple[int, list[list[str]]]:
    """Row count and schema from the Parquet footer, without reading rows."""
    relation = con.sql(f"SELECT * FROM {sql.parquet(path)}")
    schema = [
        [c.name, c.type]
        for c in (classify(n, t) for n, t in zip(relation.columns, relation.types, strict=True))
    ]
    # The footer's row count, read without a second query through DuckDB (pyarrow is
    # imported here so that a CLI command that never digests does not pay for it).
    import pyarrow.parquet as pq

    return pq.read_metadata(path).num_rows, schema


def digests(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    *,
    known: Digests | None = None,
    canonical: bool = True,
) -> Digests:
    """Both digests; when `known` has the same bytes, its canonical digest is reused unread.

    With `canonical=False` the canonical digest is left NOT_COMPUTED, for a caller
    that computes it only if a comparison ever needs it.
    """
    b = bytes_digest(path)
    if known is not None and known.bytes_digest == b:
        return Digests(b, known.canonical_digest, known.rows, known.schema)
    if not canonical:
        rows, schema = shape(con, path)
        return Digests(b, NOT_COMPUTED, rows, schema)
    c, rows, schema = canonical_digest(con, path)
    return Digests(b, c, rows, schema)
