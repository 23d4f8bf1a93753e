"""What every bench records about the instrument it ran on."""

from __future__ import annotations


def environment(threads: int) -> dict:
    from twicerun.runner.environment import stamp

    env = stamp(threads)
    return {
        "duckdb": env.duckdb,
        "threads": env.threads,
        "platform": env.platform,
        "python": env.python,
        "twicerun": env.twicerun,
    }
