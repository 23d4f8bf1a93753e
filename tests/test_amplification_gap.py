"""scripts/amplification_gap.py: every source asked on every pass, and counted honestly."""

from __future__ import annotations

import importlib.util
import json

from conftest import FIRST_PER_CUSTOMER, REPO


def load_script():
    spec = importlib.util.spec_from_file_location(
        "amplification_gap", REPO / "scripts" / "amplification_gap.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gap_counts_each_source_and_what_it_could_not_ask(write_pipeline, tmp_path, capsys):
    path = write_pipeline(FIRST_PER_CUSTOMER)
    out = tmp_path / "gap.json"
    code = load_script().main(
        [
            "--passes",
            "2",
            "--pipeline",
            str(path),
            "--step",
            "first_event",
            "--runs",
            "3",
            "--threads",
            "2",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    document = json.loads(out.read_text())
    assert document["schema"] == "twicerun.gap/1"
    sources = {s["source"]: s for s in document["sources"]}
    assert set(sources) == {
        "the loop",
        "tie collapse",
        "thread count",
        "row multiplication",
        "arrival order",
        "file order",
    }
    # It reads no list of files, so file order could not ask on any pass.
    assert sources["file order"]["could_not_ask"] == 2
    assert (sources["the loop"]["fired"], sources["the loop"]["compared"]) == (0, 4)
    assert sources["the loop"]["found_nothing"] == 2
    assert sources["arrival order"]["fired"] == 4 and sources["arrival order"]["rate"] == 1.0
    assert document["loop_quiet_passes"] == 2
    assert document["loop_quiet_passes_an_amplifier_caught"] == 2
    text = capsys.readouterr().out
    assert (
        "The loop found nothing on 2 of the passes where it compared anything; an amplifier fired on 2 of those."
        in text
    )


def test_an_unknown_step_is_refused_by_name(write_pipeline, capsys):
    path = write_pipeline(FIRST_PER_CUSTOMER)
    assert load_script().main(["--pipeline", str(path), "--step", "nope"]) == 2
    assert "has no step nope; its steps are events, first_event" in capsys.readouterr().err
