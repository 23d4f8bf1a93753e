"""The verdicts room: questions asked of runs already recorded on disk.

`diff` and `localize` compare two recorded runs step by step (the ladder);
`reproduce` re-executes a step against its receipt; `audit` runs a step against
itself. This room decides the words from receipts and digests; executing a step
is the runner's job, and the CLI hands the outcome over.
"""
