"""Checking `--key ARTIFACT=COL,...` as early as anything can be known, so a typo is cheap.

Three moments, earliest first:

1. Before anything runs, the artifact names: every `ctx.write("name", ...)` with
   a literal name in the steps' source is read statically. If every write in
   the pipeline has a literal name, a --key naming none of them is refused
   before a single step executes.
2. Before anything runs, the columns: if an earlier completed invocation of
   the same pipeline file is in the run directory, its receipts give each
   artifact's schema, and a column that is missing or not exact is refused.
3. Otherwise, in run 1: right after the step that writes the artifact, against
   its real schema; and at the end of run 1 for an artifact nobody wrote.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import duckdb

from twicerun.compare.columns import classify
from twicerun.compare.oracle import check_key
from twicerun.errors import UsageError
from twicerun.pipeline import Pipeline
from twicerun.pipeline.writes import literal_writes
from twicerun.storage.layout import COMPLETED, LOOP, RunAddress, invocations_with
from twicerun.storage.receipts import ArtifactRecord


def parse_keys(values: Iterable[str]) -> dict[str, list[str]]:
    """`ARTIFACT=COL[,COL...]` flags into a mapping, refusing malformed ones. A column may be
    written in SQL's double quotes, as the report shows a name that is not one word, so that
    one holding a comma can be named (`--key 'a="amount, usd",id'`)."""
    keys: dict[str, list[str]] = {}
    for value in values:
        artifact, sep, columns = value.partition("=")
        names = _columns(value, columns)
        if not sep or not artifact.strip() or not names:
            raise UsageError(
                f"--key {value!r}: write ARTIFACT=COLUMN[,COLUMN...], "
                f"as in --key customer_keys=event_id,customer"
            )
        if artifact in keys:
            raise UsageError(f"--key names {artifact} twice; give all its columns in one flag")
        keys[artifact.strip()] = names
    return keys


def _columns(value: str, text: str) -> list[str]:
    """The names in `a, "b, c", d`: bare ones stripped, quoted ones exactly as quoted."""
    names: list[str] = []
    rest = text.lstrip()
    while rest:
        if rest.startswith('"'):
            name, rest = _quoted(value, rest)
            if rest and not rest.startswith(","):
                raise UsageError(
                    f"--key {value!r}: a quoted column name is followed by {rest.split(',')[0]!r}; "
                    f"put a comma between columns"
                )
            names.append(name)
            rest = rest[1:]  # the comma, if any
        else:
            name, _, rest = rest.partition(",")
            if name.strip():
                names.append(name.strip())
        rest = rest.lstrip()
    return names


def _quoted(value: str, text: str) -> tuple[str, str]:
    """The name a double-quoted identifier at the start of `text` holds, and what follows it."""
    end = 1
    while (end := text.find('"', end)) != -1:
        if text[end + 1 : end + 2] != '"':
            return text[1:end].replace('""', '"'), text[end + 1 :].lstrip()
        end += 2
    raise UsageError(
        f"--key {value!r}: a quoted column name has no closing double quote; "
        f'write a double quote inside one twice, as in "say ""hi"""'
    )


def written_names(pipeline: Pipeline) -> set[str] | None:
    """Artifact names the steps write, read from their source; None if any name is not literal."""
    writes = literal_writes(pipeline)
    return set(writes.by_name) if writes.complete else None


def _classes(schema: Sequence[Sequence[str]]):
    return [(name, classify(name, duckdb.sqltype(type_text)).cls) for name, type_text in schema]


class KeyChecker:
    def __init__(self, pipeline: Pipeline, keys: Mapping[str, Sequence[str]], run_dir: Path):
        self.pipeline = pipeline
        self.keys = {k: list(v) for k, v in keys.items()}
        self.run_dir = Path(run_dir)
        self._seen: set[str] = set()

    def check_before_running(self) -> None:
        if not self.keys:
            return
        names = written_names(self.pipeline)
        if names is not None:
            for artifact in self.keys:
                if artifact not in names:
                    raise UsageError(
                        f"--key {artifact}=...: no step of {self.pipeline.path} writes an artifact "
                        f"called {artifact}; it writes {', '.join(sorted(names)) or 'nothing'}"
                    )
        schemas = self._earlier_schemas()
        for artifact, columns in self.keys.items():
            if artifact in schemas:
                check_key(artifact, _classes(schemas[artifact]), columns)

    def check_written(self, records: Iterable[ArtifactRecord]) -> None:
        for record in records:
            if record.name in self.keys:
                self._seen.add(record.name)
                check_key(record.name, _classes(record.schema), self.keys[record.name])

    def check_all_written(self) -> None:
        missing = [a for a in self.keys if a not in self._seen]
        if missing:
            raise UsageError(
                f"--key {missing[0]}=...: no step wrote an artifact called {missing[0]} in run 1"
            )

    def _earlier_schemas(self) -> dict[str, list[list[str]]]:
        """Artifact schemas from the newest completed invocation of this same pipeline file."""
        target = str(self.pipeline.path.resolve())
        for invocation, manifest in reversed(invocations_with(self.run_dir, COMPLETED)):
            if manifest.get("pipeline_resolved") != target:
                continue
            schemas: dict[str, list[list[str]]] = {}
            try:
                for receipt in invocation.receipts(RunAddress(LOOP, 1)):
                    for record in receipt.artifacts:
                        schemas[record.name] = record.schema
            except (OSError, ValueError, TypeError, KeyError, AttributeError):
                # An early check, never a reason to refuse: a damaged earlier
                # invocation only means the check waits for run 1 of this one.
                continue
            return schemas
        return {}
