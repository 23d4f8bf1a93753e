"""Generate, or check, the CLI reference in docs/cli.md from the commands' own `--help`.

    python scripts/cli_reference.py --check docs/cli.md    # exit 1 when a block is stale
    python scripts/cli_reference.py --update docs/cli.md

Each command's `--help`, at a fixed width of 80 columns, goes between
`<!-- twicerun:cli-COMMAND -->` markers (the same marker mechanism as the README's
tables), so the reference cannot drift from the code; tests/test_docs.py runs the check.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

import click  # noqa: E402

from twicerun.cli import cli  # noqa: E402
from twicerun.render.markers import MarkerError, find_blocks, stale, update  # noqa: E402

WIDTH = 80


def commands() -> dict[str, click.Command]:
    """Every command by its full name ("run", "baseline update"), groups included."""
    found: dict[str, click.Command] = {}

    def walk(group: click.Group, prefix: str) -> None:
        ctx = click.Context(group, info_name=prefix or "twicerun")
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            full = f"{prefix} {name}".strip()
            found[full] = command
            if isinstance(command, click.Group):
                walk(command, full)

    walk(cli, "")
    return found


def help_text(path: str) -> str:
    """`twicerun PATH --help` exactly as a user sees it in an 80-column terminal."""
    from click.testing import CliRunner

    outcome = CliRunner().invoke(
        cli, [*path.split(), "--help"], prog_name="twicerun", terminal_width=WIDTH
    )
    if outcome.exit_code != 0:
        raise RuntimeError(f"twicerun {path} --help failed: {outcome.output}")
    return outcome.output


def block_name(path: str) -> str:
    return "cli-" + (path.replace(" ", "-") or "twicerun")


def rendered() -> dict[str, str]:
    """Block name -> the Markdown that belongs between its markers."""
    return {
        block_name(path): f"```text\n{help_text(path).rstrip()}\n```" for path in ["", *commands()]
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", metavar="FILE")
    mode.add_argument("--update", metavar="FILE")
    args = parser.parse_args(argv)
    path = Path(args.check or args.update)
    text = path.read_text(encoding="utf-8")
    blocks = rendered()
    try:
        names = {b.name for b in find_blocks(text, str(path))}
        missing, unknown = sorted(set(blocks) - names), sorted(names - set(blocks))
        if missing or unknown:
            print(
                f"cli_reference: {path}: "
                + "; ".join(
                    part
                    for part in (
                        f"no block for {', '.join(missing)}" if missing else "",
                        f"a block for no command: {', '.join(unknown)}" if unknown else "",
                    )
                    if part
                ),
                file=sys.stderr,
            )
            return 2
        if args.check:
            diffs = stale(text, blocks, str(path))
            for name, diff in diffs.items():
                print(f"cli_reference: {path}: {name} is stale\n{diff}", file=sys.stderr)
            return 1 if diffs else 0
        new, changed = update(text, blocks, str(path))
    except MarkerError as exc:
        print(f"cli_reference: {exc}", file=sys.stderr)
        return 2
    if changed:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(new, encoding="utf-8")
        tmp.replace(path)
        print(f"{path}: rewrote {', '.join(changed)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
