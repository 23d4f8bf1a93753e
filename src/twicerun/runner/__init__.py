"""The runner room: everything that executes steps.

`loop.py` runs the N runs under containment; `execute.py` runs one step once;
`records.py` holds the receipts and resolves reads; `settle_step.py` compares one
step of a later run with its reference; `bisect.py` and `stress.py` re-execute a
step as its own series (`series.py`); `scoring.py` and `rescore.py` turn findings
into a scored Result, live or from disk.
"""
