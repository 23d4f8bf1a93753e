"""What steps leave on DuckDB's default connection, which is the process's and not a step's.

`duckdb.sql()` and its kin run on one connection per process, made the first time it is
asked for. A pipeline run once per process never meets what an earlier run left there;
twicerun runs every run of an invocation in one process, so a table one execution made
there is still there for the next. A step that makes one then raises in run 2 ("already
exists"), or, making it only if it is missing and inserting into it, changes its answer
run by run. A connection the pipeline keeps (`CON = duckdb.connect()` at module level)
outlives its steps the same way. Here are the facts the reports name; each report words
them its own way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import duckdb

# Objects a pipeline can make, by kind (DuckDB's own are `internal`), each with the
# catalog's identity of it, which a CREATE OR REPLACE changes and an INSERT does not.
_MADE = """
SELECT 'table ' || table_name, table_oid FROM duckdb_tables() WHERE NOT internal
UNION ALL SELECT 'view ' || view_name, view_oid FROM duckdb_views() WHERE NOT internal
UNION ALL SELECT 'sequence ' || sequence_name, sequence_oid FROM duckdb_sequences()
UNION ALL SELECT 'macro ' || function_name, function_oid FROM duckdb_functions()
    WHERE function_type IN ('macro', 'table_macro') AND NOT internal
UNION ALL SELECT 'type ' || type_name, type_oid FROM duckdb_types() WHERE NOT internal
"""


def holds() -> frozenset[str]:
    """The objects on the default connection now, each as "table name" and the like. Asked
    on the connection itself, not a cursor, since a cursor does not see its temporary
    tables; empty when it cannot be read (a result the pipeline left open there)."""
    return frozenset(label for label, _ in identities())


def identities(con: duckdb.DuckDBPyConnection | None = None) -> frozenset[tuple[str, int]]:
    """Each object on `con` (the default connection when None) as ("table name", its
    catalog oid): the same pair later means the object was not made again in between."""
    try:
        on = con if con is not None else duckdb.default_connection()
        rows = on.execute(_MADE).fetchall()
    except duckdb.Error:
        return frozenset()
    return frozenset((label, int(oid)) for label, oid in rows)


def outliving(step: Any) -> list[tuple[str, Any]]:
    """The connections a step's code reaches that outlive it, each as the report names it:
    the default connection, where its code runs SQL there, and those the pipeline keeps,
    by the names that hold them (None stands for the default connection)."""
    found: list[tuple[str, Any]] = []
    if step.uses_duckdb_module:
        found.append(("DuckDB's default connection (duckdb.sql() and the like)", None))
    for con, names in step.connections_kept_named():
        found.append((f"the connection the pipeline keeps as {', '.join(names)}", con))
    return found


def holding(places: list[tuple[str, Any]]) -> frozenset[tuple[str, str, int]]:
    """Every object on each of `places` (from `outliving`), as (place, label, oid)."""
    return frozenset((where, label, oid) for where, con in places for label, oid in identities(con))


def made_since(before: frozenset[str]) -> list[str]:
    """What is on the default connection now and was not in `before` (what it held as the
    pipeline was imported), sorted: what the steps made there."""
    return sorted(holds() - before)


def already_exists(exc: BaseException) -> bool:
    """Whether DuckDB refused to make an object because one of its name was there."""
    return isinstance(exc, duckdb.CatalogException) and "already exists" in str(exc)


@contextlib.contextmanager
def queries_on(places: list[tuple[str, Any]]) -> Iterator[dict[str, list[str]]]:
    """While the block runs, DuckDB's query log on each of `places`; after it, by place,
    the text of every query that ran there. A place whose database already logs (the
    pipeline's own logging), or cannot, is left alone and missing from the result, for
    the caller to fall back on what the step's code says."""
    logging: dict[str, Any] = {}
    for where, con in places:
        # Through a cursor: the log is the database's, and a result the pipeline left
        # pending on its own connection stays pending.
        on = None
        try:
            on = (con if con is not None else duckdb.default_connection()).cursor()
            (already,) = on.execute("SELECT current_setting('enable_logging')").fetchone()
            if not already:
                on.execute("CALL enable_logging('QueryLog')")
                logging[where], on = on, None
        except duckdb.Error:
            pass
        finally:
            if on is not None:
                on.close()
    found: dict[str, list[str]] = {}
    try:
        yield found
    finally:
        for where, on in logging.items():
            try:
                rows = on.execute(
                    "SELECT message FROM duckdb_logs WHERE type = 'QueryLog'"
                ).fetchall()
                on.execute("CALL disable_logging()")
                on.execute("CALL truncate_duckdb_logs()")
                found[where] = [str(message) for (message,) in rows]
            except duckdb.Error:
                continue
            finally:
                on.close()
