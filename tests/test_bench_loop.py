"""The loop bench's own arithmetic: what it counts as disk, and what it divides by."""

from __future__ import annotations

import pytest
from conftest import REPO


@pytest.fixture
def bench_loop(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    from bench import loop

    return loop


def test_disk_is_counted_in_all_and_for_the_parquet_artifacts_alone(bench_loop, tmp_path):
    step = tmp_path / "loop" / "1" / "00-make"
    step.mkdir(parents=True)
    (step / "orders.parquet").write_bytes(b"p" * 300)
    (step / "receipt.json").write_bytes(b"r" * 50)
    (tmp_path / "result.json").write_bytes(b"j" * 7)
    assert bench_loop._tree_bytes(tmp_path) == (357, 300)


def test_the_amplified_inputs_are_told_apart_in_the_same_walk_that_counts_the_whole(
    bench_loop, tmp_path, monkeypatch
):
    """The inputs were counted in a second walk, after the whole: an input deleted between
    the two was in the whole and not among the inputs, and counted as the runs' disk."""
    invocation = tmp_path / "20261206-000000-abcd"
    (invocation / "loop" / "1").mkdir(parents=True)
    (invocation / "loop" / "1" / "a.parquet").write_bytes(b"p" * 100)
    (invocation / "amplified").mkdir()
    (invocation / "amplified" / "a-tie.parquet").write_bytes(b"t" * 40)
    (invocation / "amplified" / "note.json").write_bytes(b"j" * 2)
    walks = []
    real = bench_loop.os.walk

    def walk(root, *args, **kwargs):
        walks.append(root)
        return real(root, *args, **kwargs)

    monkeypatch.setattr(bench_loop.os, "walk", walk)
    assert bench_loop._tree_split(tmp_path) == (142, 140, 42, 40)
    assert walks == [tmp_path]


def test_the_peak_disk_cell_says_both_and_an_older_artifact_keeps_its_cell(bench_loop):
    older = {"peak_disk_bytes": 3 * 2**20, "one_run_bytes": 2**20}
    assert bench_loop._peak_disk(older) == "3 MiB (3.0 runs' worth)"
    newer = {
        **older,
        "one_run_parquet_bytes": 2**19,
        "peak_parquet_bytes": 2**19,
        "peak_parquet_without_amplified_bytes": 2**19,
    }
    assert bench_loop._peak_disk(newer) == (
        "3 MiB (3.0 runs' worth; the Parquet alone 1.0, 1.0 without amplified inputs)"
    )
    # The tiny pipeline's invocation peaks at about 300 KB, which read "0 MiB".
    small = {"peak_disk_bytes": 302_615, "one_run_bytes": 76_065}
    assert bench_loop._peak_disk(small) == "296 KiB (4.0 runs' worth)"


def test_both_codes_of_a_repetition_are_divided_by_the_fastest_plain(bench_loop):
    after, before = {"wall": 6.0, "plain_wall": 0.9}, {"wall": 7.0, "plain_wall": 0.4}
    bench_loop.share_denominator([after, before], [0.7, 0.5, 0.6])
    assert after["plain_wall"] == before["plain_wall"] == 0.5
    assert after["plain_walls"] == before["plain_walls"] == [0.7, 0.5, 0.6]
    after["plain_walls"].append(1.0)  # each row keeps a list of its own
    assert before["plain_walls"] == [0.7, 0.5, 0.6]


def test_the_cost_rows_series_add_up_to_the_total_beside_them(bench_loop):
    def invocation(bisect: int) -> dict:
        return {
            "executions": {"loop": 40, "bisect": bisect, "threads": 3},
            "wall": 7.0,
            "steps": 4.0,
            "plain_wall": 0.5,
        }

    # The bisect stops at different counts in different invocations.
    row = bench_loop._cost_row([invocation(21), invocation(17), invocation(19)])
    assert row[0] == "62 (loop 40, bisect 19, threads 3)"


def test_the_cost_row_shows_what_the_step_executions_alone_cost_beside_the_multiplier(bench_loop):
    runs = [
        {"executions": {"loop": 40}, "wall": w, "steps": s, "plain_wall": 0.5}
        for w, s in ((7.0, 4.0), (6.0, 4.5), (6.5, 3.5))
    ]
    row = bench_loop._cost_row(runs)
    # wall over plain: 14, 12, 13; steps over plain: 8, 9, 7.
    assert row[-2:] == ["13.0x (12.0x to 14.0x)", "8.0x (7.0x to 9.0x)"]
