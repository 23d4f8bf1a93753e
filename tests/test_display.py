"""Step names in wide characters line up with ASCII ones in every report that pads them."""

from __future__ import annotations

import unicodedata

from test_verdicts import record

from twicerun.display import columns, ljust, widest

# A step's name is a Python identifier, and Python allows these. One step moves on every
# call (a module counter, so one thread moves it too), the others never do.
PIPELINE = """
import itertools

_calls = itertools.count()


def 読み込み(ctx):
    ctx.write("src", f"SELECT range AS id, {next(_calls)} AS v FROM range(10)")


def total(ctx):
    ctx.read("src")
    ctx.write("tot", "SELECT count(*) AS n FROM src")


def 集計する手順(ctx):
    ctx.write("agg", "SELECT 1 AS s")


def moved(ctx):
    ctx.write("moved", f"SELECT {next(_calls)} AS v")
"""


def column_of(line: str, marker: str) -> int:
    """The terminal column at which `marker` starts in `line`."""
    return columns(line[: line.index(marker)])


def test_columns_count_what_a_terminal_shows():
    assert columns("total") == 5
    assert columns("集計") == 4  # wide: two columns each
    assert columns("ｔｏｔａｌ") == 10  # full-width Latin
    assert columns(unicodedata.normalize("NFD", "café")) == 4  # the accent is a combining mark
    assert widest(["ab", "集"]) == 2 and widest([]) == 0
    assert (
        ljust("集", 4) == "集  " and ljust("ab", 4) == "ab  " and ljust("長い名前", 2) == "長い名前"
    )


def test_the_run_report_lines_up_wide_step_names(write_pipeline, twicerun):
    path = write_pipeline(PIPELINE)
    out = twicerun("run", path, "--runs", "3").out
    steps = [line for line in out.splitlines() if " of 2  " in line and "  cause" not in line]
    steps += [line for line in out.splitlines() if " of 2  DIVERGENT" in line]
    assert len({line for line in steps}) == 4, out
    assert len({column_of(line, " of 2") for line in steps}) == 1, out
    quiet = [line for line in out.splitlines() if "  varied: " in line]
    assert len(quiet) == 2 and len({column_of(line, "varied:") for line in quiet}) == 1, out
    cause = [line for line in out.splitlines() if "PERSISTS_SINGLE_THREADED  2 of 2" in line]
    assert len(cause) == 2, out
    assert len({column_of(line, "PERSISTS_SINGLE_THREADED") for line in cause}) == 1, out


def test_diff_and_reproduce_line_up_wide_step_names(write_pipeline, twicerun, run_dir):
    path = write_pipeline(PIPELINE)
    a = record(twicerun, path, run_dir)
    b = record(twicerun, path, run_dir)
    out = twicerun("diff", a, b).out
    rungs = [line for line in out.splitlines() if line.startswith("   ")]
    rungs = [line for line in rungs if line.split()[0].isdigit()]
    assert len(rungs) == 4 and len({column_of(line, line.split()[2]) for line in rungs}) == 1, out
    out = twicerun("reproduce", a).out
    steps = [line for line in out.splitlines() if line[:4].strip().isdigit()]
    assert len(steps) == 4 and len({column_of(line, line.split()[2]) for line in steps}) == 1, out


def test_tables_read_back_as_text_line_up_wide_step_names():
    """`baseline compare --format text` and `report --format text` pad table cells."""
    from twicerun.render.plaintext import markdown_to_text
    from twicerun.render.tables import Table

    text = markdown_to_text(
        "| step | verdict |\n|---|---|\n| 集計する | unchanged |\n| total | new |\n"
    )
    lines = [line for line in text.splitlines() if line.strip()]
    assert len({column_of(line, line.split()[1]) for line in lines}) == 1, text
    table = Table("t", "stamp", ["step", "fired"], [["集計する", "1 of 4"], ["total", "0 of 4"]])
    lines = table.text().splitlines()[1:]
    assert len({column_of(line, line.split()[1]) for line in lines}) == 1, table.text()
