"""The docs cover the CLI: a generated reference that cannot drift, and every command and
option documented (after sqlite-utils' tests/test_docs.py)."""

from __future__ import annotations

import importlib.util
import sys

import click
import pytest
from conftest import REPO


def _reference():
    spec = importlib.util.spec_from_file_location(
        "cli_reference", REPO / "scripts" / "cli_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["cli_reference"] = module
    spec.loader.exec_module(module)
    return module


REFERENCE = _reference()
COMMANDS = REFERENCE.commands()
PROSE = "\n".join(
    p.read_text(encoding="utf-8")
    for p in sorted((REPO / "docs").glob("*.md"))
    if p.name != "cli.md"
) + (REPO / "README.md").read_text(encoding="utf-8")


def test_the_cli_reference_in_docs_is_the_commands_own_help(capsys):
    code = REFERENCE.main(["--check", str(REPO / "docs" / "cli.md")])
    assert (code, capsys.readouterr().err) == (0, "")


def test_a_stale_reference_block_is_named(tmp_path, capsys):
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    edited = tmp_path / "cli.md"
    edited.write_text(page.replace("Show this message and exit.", "Hand edit.", 1), "utf-8")
    assert REFERENCE.main(["--check", str(edited)]) == 1
    assert "cli-twicerun is stale" in capsys.readouterr().err


def test_a_command_without_a_reference_block_is_refused(tmp_path, capsys):
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    start = page.index("<!-- twicerun:cli-post -->")
    end = page.index("<!-- /twicerun:cli-post -->") + len("<!-- /twicerun:cli-post -->")
    edited = tmp_path / "cli.md"
    edited.write_text(page[:start] + page[end:], "utf-8")
    assert REFERENCE.main(["--check", str(edited)]) == 2
    assert "no block for cli-post" in capsys.readouterr().err


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_and_option_explains_itself(path):
    command = COMMANDS[path]
    assert (command.help or "").strip(), f"twicerun {path} has no help text"
    silent = [
        p.opts[0]
        for p in command.params
        if isinstance(p, click.Option) and not (p.help or "").strip()
    ]
    assert silent == [], f"twicerun {path}: options without help: {silent}"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_is_named_in_the_prose_docs(path):
    assert f"twicerun {path}" in PROSE, f"no page outside docs/cli.md mentions `twicerun {path}`"


def test_every_verb_prints_its_exit_codes_from_the_vocabulary():
    from twicerun.cli.app import epilog
    from twicerun.vocabulary.exits import MEANINGS

    generated = {epilog(kind) for kind in MEANINGS}
    for path, command in COMMANDS.items():
        if not isinstance(command, click.Group):
            assert command.epilog in generated, f"twicerun {path}: exit codes typed by hand"


def test_the_hook_example_pins_this_version():
    """The pre-commit example in docs/eval.md pinned v0.7.1 four releases on: a reader
    copying it installed a hook older than the tables it checks."""
    import re

    from twicerun import __version__

    pins = re.findall(r"^\s+rev: v(\S+)$", PROSE, flags=re.M)
    assert pins == [__version__]
