"""How a Result's instrument is named: which engine ran the steps, at what parallelism.

On DuckDB the parallelism is threads; on Spark it is partitions (shuffle partitions,
and the partitions each artifact is read into), and one partition is one task.
"""

from __future__ import annotations

from typing import Any

from twicerun.render.markdown import code


def _get(env: Any, key: str, default: Any = None) -> Any:
    return env.get(key, default) if isinstance(env, dict) else getattr(env, key, default)


def is_spark(env: Any) -> bool:
    return _get(env, "engine", "duckdb") == "spark"


def at(env: Any, n: int) -> str:
    """`threads=n`, or on Spark `partitions=n`."""
    return f"partitions={n}" if is_spark(env) else f"threads={n}"


def one(env: Any) -> str:
    """What the bisect runs at: one thread, or on Spark one task."""
    return "one task (partitions=1)" if is_spark(env) else "threads=1"


def single(env: Any) -> str:
    """The words for one unit of parallelism: one thread, or on Spark one task."""
    return "one task" if is_spark(env) else "one thread"


def engine(env: Any, markdown: bool = False) -> str:
    """The engine and its version, with DuckDB named as what compares, on Spark."""
    if is_spark(env):
        master = _get(env, "spark_master")
        return (
            f"Spark {_get(env, 'spark')} on {code(master) if markdown else master} at "
            f"partitions={_get(env, 'threads')}, compared by DuckDB {_get(env, 'duckdb')}"
        )
    return f"DuckDB {_get(env, 'duckdb')} at threads={_get(env, 'threads')}"
