"""Thirty tiny steps: the fixed cost of one step execution, with almost nothing inside it.

Used by bench/loop.py to measure twicerun's own cost per execution. Each step reads the
previous step's artifact (the first reads nothing) and writes a few hundred rows, so
every guarantee is exercised: a fresh catalog, a read, a write, digests and a receipt.
"""


def step_00(ctx):
    ctx.write("t00", "SELECT range AS n, range % 7 AS k FROM range(200)")


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


def step_10(ctx):
    ctx.read("t09")
    ctx.write("t10", "SELECT n + 1 AS n, k FROM t09")


def step_11(ctx):
    ctx.read("t10")
    ctx.write("t11", "SELECT n + 1 AS n, k FROM t10")


def step_12(ctx):
    ctx.read("t11")
    ctx.write("t12", "SELECT n + 1 AS n, k FROM t11")


def step_13(ctx):
    ctx.read("t12")
    ctx.write("t13", "SELECT n + 1 AS n, k FROM t12")


def step_14(ctx):
    ctx.read("t13")
    ctx.write("t14", "SELECT n + 1 AS n, k FROM t13")


def step_15(ctx):
    ctx.read("t14")
    ctx.write("t15", "SELECT n + 1 AS n, k FROM t14")


def step_16(ctx):
    ctx.read("t15")
    ctx.write("t16", "SELECT n + 1 AS n, k FROM t15")


def step_17(ctx):
    ctx.read("t16")
    ctx.write("t17", "SELECT n + 1 AS n, k FROM t16")


def step_18(ctx):
    ctx.read("t17")
    ctx.write("t18", "SELECT n + 1 AS n, k FROM t17")


def step_19(ctx):
    ctx.read("t18")
    ctx.write("t19", "SELECT n + 1 AS n, k FROM t18")


def step_20(ctx):
    ctx.read("t19")
    ctx.write("t20", "SELECT n + 1 AS n, k FROM t19")


def step_21(ctx):
    ctx.read("t20")
    ctx.write("t21", "SELECT n + 1 AS n, k FROM t20")


def step_22(ctx):
    ctx.read("t21")
    ctx.write("t22", "SELECT n + 1 AS n, k FROM t21")


def step_23(ctx):
    ctx.read("t22")
    ctx.write("t23", "SELECT n + 1 AS n, k FROM t22")


def step_24(ctx):
    ctx.read("t23")
    ctx.write("t24", "SELECT n + 1 AS n, k FROM t23")


def step_25(ctx):
    ctx.read("t24")
    ctx.write("t25", "SELECT n + 1 AS n, k FROM t24")


def step_26(ctx):
    ctx.read("t25")
    ctx.write("t26", "SELECT n + 1 AS n, k FROM t25")


def step_27(ctx):
    ctx.read("t26")
    ctx.write("t27", "SELECT n + 1 AS n, k FROM t26")


def step_28(ctx):
    ctx.read("t27")
    ctx.write("t28", "SELECT n + 1 AS n, k FROM t27")


def step_29(ctx):
    ctx.read("t28")
    ctx.write("t29", "SELECT n + 1 AS n, k FROM t28")
