"""A feature table of 400 DOUBLE columns: what twicerun costs on a wide artifact.

Used by bench/loop.py (`--pipeline bench/pipelines/wide.py`). The first step writes
20,000 rows of an id, a group and 400 measures; the second sums every measure per group,
which drifts in the last bits from run to run (a parallel float sum); the third scales
each row's measures, which is exact and stays quiet. Wide tables make the tool's
per-column work (drift per float column, distinct counts per column, the report's
lines) show, where the reference pipeline's few columns hide it.
"""

COLUMNS = 400


def features(ctx):
    measures = ", ".join(
        f"((hash(i * {k + 3}) % 1000003) / 7.0)::DOUBLE AS m{k}" for k in range(COLUMNS)
    )
    ctx.write("features", f"SELECT i AS id, i % 50 AS segment, {measures} FROM range(20000) t(i)")


def segment_totals(ctx):
    ctx.read("features")
    sums = ", ".join(f"sum(m{k}) AS m{k}" for k in range(COLUMNS))
    ctx.write("segment_totals", f"SELECT segment, {sums} FROM features GROUP BY segment")


def scaled(ctx):
    ctx.read("features")
    scaled = ", ".join(f"m{k} * 2 AS m{k}" for k in range(COLUMNS))
    ctx.write("scaled", f"SELECT id, {scaled} FROM features")
