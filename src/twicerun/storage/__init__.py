"""The storage room: the run directory, the `ctx` steps receive, atomic writes and receipts."""
