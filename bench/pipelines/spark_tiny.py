"""Ten tiny steps on Spark: the fixed cost of one step execution there, with almost nothing
inside it (bench/loop.py; the DuckDB counterpart is tiny.py)."""

ENGINE = "spark"


def step_00(ctx):
    ctx.write("t00", "SELECT id AS n, id % 7 AS k FROM range(200)")


def step_01(ctx):
    ctx.read("t00")
    ctx.write("t01", "SELECT n + 1 AS n, k FROM t00")


def step_02(ctx):
    ctx.read("t01")
    ctx.write("t02", "SELECT n + 1 AS n, k FROM t01")


def step_03(ctx):
    ctx.read("t02")
    ctx.write("t03", "SELECT n + 1 AS n, k FROM t02")


def step_04(ctx):
    ctx.read("t03")
    ctx.write("t04", "SELECT n + 1 AS n, k FROM t03")


def step_05(ctx):
    ctx.read("t04")
    ctx.write("t05", "SELECT n + 1 AS n, k FROM t04")


def step_06(ctx):
    ctx.read("t05")
    ctx.write("t06", "SELECT n + 1 AS n, k FROM t05")


def step_07(ctx):
    ctx.read("t06")
    ctx.write("t07", "SELECT n + 1 AS n, k FROM t06")


def step_08(ctx):
    ctx.read("t07")
    ctx.write("t08", "SELECT n + 1 AS n, k FROM t07")


def step_09(ctx):
    ctx.read("t08")
    ctx.write("t09", "SELECT n + 1 AS n, k FROM t08")
