"""`twicerun report`: tables from artifacts, and the marker blocks of a Markdown file."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path

import click

from twicerun.cli.app import cli, epilog
from twicerun.errors import UsageError
from twicerun.render.markers import MarkerError, find_blocks, stale, update
from twicerun.render.tables import BUILDERS, Artifact, render_tables, renders
from twicerun.storage.atomic import write_bytes_atomic
from twicerun.storage.layout import COMPLETED, RESULT_NAME, invocations_with
from twicerun.typed import schema_said
from twicerun.vocabulary.exits import ReportExit

REPORT_EXIT_CODES = epilog(ReportExit)


def _read_text(path: Path) -> str:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from exc


def _only_some(loaded: Sequence[Artifact], in_file: set[str], target: Path, verb: str) -> str:
    """For a file that holds some of the tables (a doc beside the README): the command
    that checks it against just the artifacts rendering those, which the newest of every
    kind in results/ are not."""
    sources = [a.path for a in loaded if in_file & set(render_tables([a]))]
    command = " ".join(
        ["twicerun report", *map(shlex.quote, sources), f"--{verb}", shlex.quote(str(target))]
    )
    return f"if it is meant to hold only the tables it has, name the artifacts that render them (`{command}`); otherwise "


def _load_artifacts(paths: Sequence[str], results: Path) -> list[Artifact]:
    if not paths:
        newest: dict[str, tuple[str, str, Artifact]] = {}
        for candidate in sorted(results.glob("*.json")):
            try:
                document = json.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                # Skipping it would let --check pass on a README whose source is broken.
                raise UsageError(
                    f"{candidate} is not a readable JSON artifact ({exc}); fix or remove it"
                ) from exc
            schema = document.get("schema") if isinstance(document, dict) else None
            if not renders(document):
                raise UsageError(
                    f"{candidate} has {schema_said(document)}, which renders no table; move it out "
                    f"of {results}/ or name the artifacts to render"
                )
            # One of each kind, and for Results one per pipeline: the newest.
            kind = f"{schema} {document.get('pipeline', '')}"
            key = (str(document.get("written", document.get("started", ""))), candidate.name)
            if kind not in newest or key > newest[kind][:2]:
                newest[kind] = (*key, Artifact(str(candidate), document))
        return [a for _, _, a in newest.values()]
    artifacts = []
    for given in paths:
        path = _artifact_in(Path(given))
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise UsageError(
                f"{path} is not JSON ({exc}); give the artifact a script wrote"
            ) from exc
        if not renders(document):
            known = ", ".join(sorted(BUILDERS))
            raise UsageError(
                f"{path} has {schema_said(document)} and carries no tables, so nothing renders it; "
                f"known: {known}, or any artifact with a `tables` list"
            )
        artifacts.append(Artifact(str(path), document))
    return artifacts


def _artifact_in(path: Path) -> Path:
    """A named artifact; an invocation directory, as `twicerun run` prints it, names its
    Result, and a run directory its newest completed invocation's, as for judge and diff."""
    if not path.is_dir():
        return path
    if (path / RESULT_NAME).is_file():
        return path / RESULT_NAME
    completed = invocations_with(path, COMPLETED)
    if completed:
        return completed[-1][0].result_path
    raise UsageError(
        f"{path} is a directory and holds no {RESULT_NAME}; name the JSON artifacts to render, "
        f"or give the directory with --results to render the newest of each kind in it"
    )


def _between_markers(rendered: dict[str, str]) -> str:
    """Each table inside its marker pair, exactly as --update writes it into a file: the
    output pasted into a README is a block that --check accepts."""
    empty = "\n".join(f"<!-- twicerun:{n} -->\n<!-- /twicerun:{n} -->\n" for n in rendered)
    text, _ = update(empty, rendered)
    return text


@cli.command(epilog=REPORT_EXIT_CODES)
@click.argument("artifacts", nargs=-1, type=click.Path(exists=True))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["md", "text", "json"]),
    default="md",
    show_default=True,
    help="How to print the tables: md prints each inside its marker pair, ready to paste "
    "into a README (ignored with --check and --update, which write Markdown).",
)
@click.option("--table", "names", multiple=True, help="Print only this table (repeatable).")
@click.option(
    "--update",
    "update_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Rewrite the blocks of this Markdown file whose content changed.",
)
@click.option(
    "--check",
    "check_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Change nothing; fail if a block of this Markdown file is stale.",
)
@click.option(
    "--results",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results"),
    show_default=True,
    help="Where to find artifacts when none are named: the newest of each kind is used.",
)
def report(
    artifacts: tuple[str, ...],
    fmt: str,
    names: tuple[str, ...],
    update_path: Path | None,
    check_path: Path | None,
    results: Path,
) -> int:
    """Render named tables from Result documents and eval artifacts.

    An ARTIFACT is a JSON file a script or `twicerun run --json` wrote, or the
    invocation directory `twicerun run` printed, which stands for its Result (a run
    directory such as .twicerun: its newest completed invocation's).

    In a Markdown file, a table NAME lives between `<!-- twicerun:NAME -->` and
    `<!-- /twicerun:NAME -->`, each on its own line. --update fills those blocks;
    --check fails when one no longer matches what the artifacts render, so a
    figure edited by hand, or left behind by a newer artifact, fails the build.
    """
    if update_path and check_path:
        raise UsageError("--update and --check: give one; --check never writes")
    loaded = _load_artifacts(artifacts, results)
    if not loaded:
        raise UsageError(f"no artifacts: name them, or put the JSON a script wrote in {results}/")
    tables = render_tables(loaded)
    target = update_path or check_path
    if target is None:
        unknown = [n for n in names if n not in tables]
        if unknown:
            raise UsageError(
                f"no table called {', '.join(unknown)}; these render: {', '.join(tables)}"
            )
        chosen = [tables[n] for n in names] if names else list(tables.values())
        if fmt == "json":
            click.echo(json.dumps([t.json() for t in chosen], indent=2))
        elif fmt == "md":
            click.echo(_between_markers({t.name: t.markdown() for t in chosen}), nl=False)
        else:
            click.echo("\n".join(t.text() for t in chosen), nl=False)
        return ReportExit.RENDERED
    text = _read_text(target)
    try:
        blocks = find_blocks(text, str(target))
    except MarkerError as exc:
        raise UsageError(str(exc)) from exc
    in_file = {b.name for b in blocks}
    lost = sorted(set(tables) - in_file)
    orphaned = sorted(in_file - set(tables))
    if lost or orphaned:
        lines = []
        if orphaned:
            lines.append(
                f"{target}: no artifact renders {', '.join(orphaned)}; remove those marker pairs or name the artifact that renders them"
            )
        if lost:
            # The exact lines to paste, so nobody has to guess how a name is spelled.
            pairs = " ".join(f"<!-- twicerun:{n} --> <!-- /twicerun:{n} -->" for n in lost)
            verb = "update" if update_path else "check"
            some = (
                ""
                if artifacts or not in_file or orphaned
                else _only_some(loaded, in_file, target, verb)
            )
            lines.append(
                f"{target}: the artifacts render {', '.join(lost)}, which the file has no marker pair for; "
                f"{some}put each pair, each marker on a line of its own, where its table should go: {pairs}"
            )
        raise UsageError("\n".join(lines))
    rendered = {name: t.markdown() for name, t in tables.items()}
    if check_path:
        old = stale(text, rendered, str(target), blocks)
        for name, diff in old.items():
            click.echo(
                f"{target}: twicerun:{name} is stale; run `twicerun report --update {target}`",
                err=True,
            )
            click.echo(diff, err=True, nl=False)
        return ReportExit.STALE if old else ReportExit.RENDERED
    new_text, changed = update(text, rendered, str(target), blocks)
    if changed:
        try:
            write_bytes_atomic(target, new_text.encode("utf-8"), keep_mode=True)
        except OSError as exc:
            raise UsageError(
                f"{target} could not be rewritten ({exc.strerror or exc}); it is unchanged"
            ) from exc
        click.echo(f"{target}: rewrote {', '.join(changed)}")
    return ReportExit.RENDERED
