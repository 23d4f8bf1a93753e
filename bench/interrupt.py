"""How quickly each way of stopping a running DuckDB query takes effect.

    python -m bench.interrupt [--seconds 1.0] [--json PATH]

--step-timeout stops a step's query through its connection first and signals the
main thread only afterwards (runner/interrupts.py). This measures why, on one query
that runs for tens of seconds unstopped, a `CREATE TABLE ... AS` of an aggregate over
`range`, executed as a step would through `execute`:

- setitimer: SIGALRM from `signal.setitimer`, sent to the process, whose Python
  handler raises;
- pthread_kill: the same handler, the signal sent to the main thread by a timer;
- interrupt: `DuckDBPyConnection.interrupt()` called from a timer thread.

Each is asked to stop the query `--seconds` after it starts; the figure is how long
the query took to come back, and how. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time

import duckdb

from bench.common import environment, write_document

QUERY = "CREATE OR REPLACE TABLE t AS SELECT sum(range) AS s FROM range(30000000000)"


class Stop(BaseException):
    pass


def _raise(_signum, _frame) -> None:
    raise Stop


def measure(how: str, after: float, threads: int) -> dict:
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    main = threading.main_thread().ident
    actions = {
        "setitimer": lambda: None,
        "pthread_kill": lambda: signal.pthread_kill(main, signal.SIGALRM),
        "interrupt": con.interrupt,
    }
    previous = signal.signal(signal.SIGALRM, _raise)
    timer = threading.Timer(after, actions[how])
    started = time.perf_counter()
    if how == "setitimer":
        signal.setitimer(signal.ITIMER_REAL, after)
    else:
        timer.start()
    try:
        con.execute(QUERY)
        ended = "completed"
    except BaseException as exc:  # what each way comes back as is part of the figure
        ended = type(exc).__name__
    seconds = time.perf_counter() - started
    signal.setitimer(signal.ITIMER_REAL, 0)
    if how != "setitimer":
        timer.cancel()
        timer.join()
    with contextlib.suppress(Stop):
        time.sleep(0.05)  # a signal still pending lands here, not in the next measurement
    signal.signal(signal.SIGALRM, previous)
    con.close()
    return {"how": how, "asked_after": after, "seconds": round(seconds, 2), "ended": ended}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.interrupt")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)
    rows = []
    for how in ("setitimer", "pthread_kill", "interrupt"):
        row = measure(how, args.seconds, args.threads)
        print(f"{how:>12}: came back after {row['seconds']:.2f}s ({row['ended']})", flush=True)
        rows.append(row)
    if args.json_path:
        document = {
            "schema": "twicerun.bench-interrupt/1",
            "written": time.strftime("%Y-%m-%d"),
            "command": " ".join(["python -m bench.interrupt", *(argv or sys.argv[1:])]),
            "environment": environment(args.threads),
            "query": QUERY,
            "measurements": rows,
        }
        write_document(args.json_path, document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
