"""What every bench records about the instrument it ran on."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any


def environment(threads: int) -> dict:
    from twicerun.runner.environment import stamp

    return asdict(stamp(threads))


def write_document(path: str, document: dict[str, Any]) -> None:
    """A bench's figures, written atomically (a bench interrupted leaves no half file)."""
    from twicerun.storage.atomic import write_json_atomic

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(path), document)


def write_artifact(
    path: str, document: dict[str, Any], tables: Callable[[str, dict[str, Any]], list[dict]]
) -> None:
    """The bench's figures and the tables that present them, written atomically together."""
    document["tables"] = tables(path, document)
    write_document(path, document)


def retable_option(parser) -> None:
    """`--retable PATH`, which every script and bench that writes an artifact takes."""
    parser.add_argument(
        "--retable",
        metavar="PATH",
        default=None,
        help="rebuild the tables of an existing artifact from its own figures, measuring nothing",
    )


def parse_measuring(
    parser: argparse.ArgumentParser,
    argv: list[str] | None,
    tables: Callable[[str, dict[str, Any]], list[dict]],
) -> argparse.Namespace | None:
    """`parser` with `--json PATH` (where the artifact goes) and `--retable PATH` added, parsed.
    None once `--retable` has rebuilt an artifact's tables: there is nothing to measure."""
    parser.add_argument("--json", dest="json_path", default=None)
    retable_option(parser)
    args = parser.parse_args(argv)
    if args.retable:
        retable(args.retable, tables)
        return None
    return args


def retable(path: str, tables: Callable[[str, dict[str, Any]], list[dict]]) -> None:
    """Rebuild an artifact's tables from its own figures, measuring nothing."""
    from twicerun.storage.atomic import read_json

    write_artifact(path, read_json(Path(path)), tables)


def print_tables(tables: Callable[[str, dict[str, Any]], list[dict]], document: dict) -> None:
    """A bench's tables on the terminal, as the artifact will carry them."""
    from twicerun.render.tables import Table

    for table in tables("", document):
        print(Table(**{k: table[k] for k in ("name", "stamp", "headers", "rows")}).text())


def bare_context(engine, threads: int, index: int, name: str, out_dir: Path, visible: dict):
    """A ctx of twicerun's own for one step, reading only `visible` and keeping no state:
    what a plain execution runs a step with, nothing compared or recorded around it."""
    return engine.context(
        threads,
        step_index=index,
        step_name=name,
        out_dir=out_dir,
        visible=visible,
        state_source=lambda _name: None,
        owners={},
    )
