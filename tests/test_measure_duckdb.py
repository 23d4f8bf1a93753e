"""scripts/measure_duckdb.py: the premise holds here, and a broken invariant is named."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from conftest import REPO


def load():
    spec = importlib.util.spec_from_file_location(
        "measure_duckdb", REPO / "scripts" / "measure_duckdb.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def test_a_broken_invariant_is_named_and_the_exit_code_says_so(capsys):
    script = load()

    def measure(directory, threads):
        return [
            script.Invariant(
                "count() never moves, at one thread or several", True, "0 groups differed"
            ),
            script.Invariant(
                "the same sum at threads=1 never disagrees", False, "3 of 1,000 groups differed"
            ),
        ]

    assert script.main([], measure_fn=measure) == 1
    captured = capsys.readouterr()
    assert (
        "BROKE  the same sum at threads=1 never disagrees: 3 of 1,000 groups differed"
        in captured.out
    )
    assert captured.err == (
        "measure_duckdb: 1 invariant broke: the same sum at threads=1 never disagrees\n"
    )


@pytest.mark.slow
def test_every_invariant_holds_on_this_machine(capsys):
    assert load().main([]) == 0, capsys.readouterr().out
