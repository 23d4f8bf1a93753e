"""`audit`: a step run twice more on the same inputs, and whether it repeated itself.

Bytes and meaning are compared apart: a step that writes the same rows in
another order (or another row-group layout) computed the same answer, and a
verdict of "not reproducible" for it would make the audit useless. So each
artifact is hashed as bytes and in canonical form, and the verdict is:

- canonical forms differ: not reproducible;
- bytes equal, no seed declared and nothing drawn unseeded: deterministic;
- otherwise (bytes differ, a seed was held, or a draw was not): reproducible.

A seeded step is never "deterministic": its bytes matched because its seed was
held, and moving the seed moves them. Nor is a step that drew from the process's
random generators without seeding them: nothing held its bytes still. The
report's wording follows the same facts, never the word alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from twicerun.display import ljust, some, unseeded_draw, unseeded_generator, widest
from twicerun.findings import ArtifactFindings
from twicerun.verdicts.explain import describe
from twicerun.vocabulary.audit import Repeatability


def verdict(bytes_equal: bool, canonical_equal: bool, seed_declared: bool) -> Repeatability:
    if not canonical_equal:
        return Repeatability.NOT_REPRODUCIBLE
    # `and not seed_declared` is the whole point: do not simplify it away. A seeded step
    # with equal bytes held its seed; it did not show that it cannot change.
    if bytes_equal and not seed_declared:
        return Repeatability.DETERMINISTIC
    return Repeatability.REPRODUCIBLE


@dataclass(frozen=True)
class ArtifactAudit:
    name: str
    verdict: Repeatability
    bytes: tuple[str, str]
    canonical: tuple[str, str]


# Artifacts of a step described one by one: a step writing 300 printed 600 lines.
AUDIT_SHOWN = 5


def _the_rest(rest: list[ArtifactAudit]) -> str:
    """One line for a step's artifacts past AUDIT_SHOWN: how many came out each way."""
    same = [a for a in rest if a.bytes[0] == a.bytes[1]]
    rows = [a for a in rest if a not in same and a.canonical[0] == a.canonical[1]]
    moved = [a.name for a in rest if a not in same and a not in rows]
    kinds = [
        f"{len(same):,} with identical bytes both times" if same else "",
        f"{len(rows):,} whose bytes differ and rows do not" if rows else "",
        f"{len(moved):,} whose rows differ ({some(moved, 3)})" if moved else "",
    ]
    return f"and {len(rest):,} more artifacts: " + "; ".join(k for k in kinds if k)


@dataclass(frozen=True)
class StepAudit:
    index: int
    name: str
    seed: str | None  # the declared seed parameter
    seed_value: int | None
    seconds: tuple[float, float]
    artifacts: list[ArtifactAudit] = field(default_factory=list)
    # Its own earlier output, read through ctx.state. Both audit runs start it from its
    # initial rows, so what it does on top of an earlier output is not what they test.
    state: tuple[str, ...] = ()
    # The process-wide random generators it drew from without seeding them (the two runs
    # left them in different states), as "Python's random module"; None where it did not.
    drew: str | None = None
    # Its first query that drew at random with nothing in the step seeding it (random(), a
    # uuid function, a sample without a seed); "" where none did. Like `drew`.
    draws: str = ""
    # Per audit run, what it raised where the other run wrote ("" where it wrote).
    raised: tuple[str, str] = ("", "")
    # What the steps made on DuckDB's default connection (duckdb.sql()), which is the
    # process's, since the pipeline was imported, when this step's code runs SQL there:
    # the first audit run found those, and the second, in a process of its own, did not.
    default_connection: tuple[str, ...] = ()
    # What it read past ctx (a value of its file, an environment variable, a file) that its
    # second run did not find as its first did, as runner/past_ctx.py names each.
    moved_past_ctx: tuple[str, ...] = ()
    # What the steps made, while the audit ran, on connections the pipeline keeps that
    # this step's code reaches (CON = duckdb.connect() at the top of the file), by place:
    # each process has its own, filled by its own runs of the steps.
    kept_connections: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # How the two runs' rows differ, in the oracle's one line, by artifact.
    how: tuple[tuple[str, str], ...] = ()

    @property
    def verdict(self) -> Repeatability:
        # Raising once and writing once is not repeating itself, whatever it wrote.
        if any(self.raised):
            return Repeatability.NOT_REPRODUCIBLE
        # The worst over its artifacts: one artifact that moved is a step that moved.
        return max((a.verdict for a in self.artifacts), default=Repeatability.DETERMINISTIC)

    def lines(
        self,
        threads: int | None = None,
        index_width: int = 1,
        width: int = 0,
        spark: bool = False,
        fresh_process: bool = False,
    ) -> list[str]:
        """The step's verdict line and one row per artifact; the widths line the columns up
        across the steps of one report. On `spark`, parallelism is partitions; with
        `fresh_process`, the second run was in another Python process."""
        out = [
            f"{self.verdict!s:<17} {self.index:>{index_width}} {self.name}  "
            f"({self.seconds[0]:.2f}s and {self.seconds[1]:.2f}s)"
        ]
        # Past AUDIT_SHOWN artifacts, the worst come first and the rest are counted.
        shown = self.artifacts
        if len(shown) > AUDIT_SHOWN:
            shown = sorted(shown, key=lambda a: -a.verdict.rank)[:AUDIT_SHOWN]
        width = max(width, widest(a.name for a in shown))
        for a in shown:

            def row(label: str, text: str, name: str = "") -> str:
                return f"    {ljust(name, width)}  {label:<26}  {text}"

            if a.bytes[0] == a.bytes[1]:
                out.append(row("identical bytes both times", a.bytes[0][:12], a.name))
                out.append(row("canonical form", a.canonical[0][:12]))
                if self.drew or self.draws:
                    # Before a held seed: a draw nothing seeds is not held by it (setseed()
                    # does not reach a SAMPLE), and "because the seed was held" said it was.
                    source = self.drew or f"random in its SQL ({self.draws})"
                    out.append(
                        f"    {'':<{width}}  though it {unseeded_generator(source)}, so nothing "
                        f"held it still: the runs agreed, not because the step cannot change"
                        + (
                            f" (`{self.seed}` was held at {self.seed_value}, and that draw "
                            f"does not take it)"
                            if self.seed is not None
                            else ""
                        )
                    )
                elif self.seed is not None:
                    out.append(
                        f"    {'':<{width}}  because `{self.seed}` was held at {self.seed_value}, "
                        f"not because the step cannot change"
                    )
            elif a.canonical[0] == a.canonical[1]:
                out.append(
                    row("the bytes differ", f"{a.bytes[0][:12]} / {a.bytes[1][:12]}", a.name)
                )
                out.append(row("the rows do not", a.canonical[0][:12]))
            else:
                pair = f"{a.canonical[0][:12] or '(none)'} / {a.canonical[1][:12] or '(none)'}"
                out.append(row("the rows differ", pair, a.name))
                how = dict(self.how).get(a.name)
                if how:
                    out.append(f"    {'':<{width}}  {how}")
                if self.seed is not None:
                    out.append(f"    {'':<{width}}  {self._moved_anyway(threads, spark)}")
                if self.drew:
                    out.append(
                        f"    {'':<{width}}  it {unseeded_generator(self.drew)}, which moves its "
                        f"numbers at any thread count"
                    )
                if self.draws:
                    out.append(f"    {'':<{width}}  {unseeded_draw(self.draws)}")
        if len(self.artifacts) > len(shown):
            out.append(f"    {_the_rest([a for a in self.artifacts if a not in shown])}")
        if any(self.raised):
            second = "the second run" + (" (in another Python process)" if fresh_process else "")
            which, other = ("the first run", second) if self.raised[0] else (second, "the first")
            error = self.raised[0] or self.raised[1]
            out.append(f"    {which} raised, where {other} wrote its artifacts: {error}")
        elif not self.artifacts:
            out.append("    it wrote no artifact, so there was nothing to compare")
        if self.default_connection and self.verdict is Repeatability.NOT_REPRODUCIBLE:
            found = (
                "the first run found it as the ordinary run before it left it, and the second, "
                "in a process of its own, as the pipeline's import left it"
                if fresh_process
                else "both runs were in this one, and each found it as the executions before "
                "it left it"
            )
            out.append(
                f"    its code runs SQL on DuckDB's default connection (duckdb.sql() and the "
                f"like), which is the process's, and the steps have made "
                f"{some(list(self.default_connection))} there since the pipeline was imported: "
                f"{found}; ctx.sql runs on the step's own connection, which starts empty every "
                f"time"
            )
        if self.kept_connections and self.verdict is Repeatability.NOT_REPRODUCIBLE:
            each = (
                "each of its two runs, the second in a process of its own, found it as the "
                "executions before it in its own process left it"
                if fresh_process
                else "each of its two runs found it as the executions before it left it"
            )
            for where, labels in self.kept_connections:
                out.append(
                    f"    its code runs SQL on {where}, which outlives the step, and the "
                    f"steps made {some(list(labels))} there while the audit ran: {each}; "
                    f"ctx.sql runs on the step's own connection, which starts empty every time"
                )
        if self.moved_past_ctx and self.verdict is Repeatability.NOT_REPRODUCIBLE:
            out.append(
                f"    it reads {some(list(self.moved_past_ctx))}, which its second run did not "
                f"find as its first did: what another step changes there reaches it past ctx, "
                f"so the difference may come from there (hand the rows over with ctx.write "
                f"and ctx.read)"
            )
        if self.state:
            names = ", ".join(self.state)
            out.append(
                f"    it reads its own earlier output through ctx.state ({names}), and both "
                f"audit runs started it from the initial rows; what a rerun does on top of "
                f"an earlier output (an append that repeats rows) is `twicerun run`'s to show"
            )
        return out

    def _moved_anyway(self, threads: int | None, spark: bool = False) -> str:
        held = f"`{self.seed}` was held at {self.seed_value} and the result moved anyway"
        if threads == 1:
            return f"{held}: the seed does not control this step"
        # With several threads, a seeded draw can still land on rows in another order
        # (setseed + random() does), so the seed may hold the step still at one thread.
        if spark:
            at = f"partitions={threads}" if threads else "this partition count"
            why = "`--threads 1` runs it as one task and shows whether the partitions are why"
        else:
            at = f"threads={threads}" if threads else "this thread count"
            why = "`--threads 1` shows whether the threads are why"
        return f"{held} at {at}: the seed does not hold it still there ({why})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "verdict": str(self.verdict),
            "seed": self.seed,
            "seed_value": self.seed_value,
            "seconds": list(self.seconds),
            "state": list(self.state),
            "drew_unseeded": self.drew,
            "draws_in_sql": self.draws or None,
            "raised": list(self.raised),
            "default_connection": list(self.default_connection),
            "moved_past_ctx": list(self.moved_past_ctx),
            "kept_connections": {where: list(labels) for where, labels in self.kept_connections},
            "artifacts": [
                {
                    "name": a.name,
                    "verdict": str(a.verdict),
                    "bytes": list(a.bytes),
                    "canonical": list(a.canonical),
                    "how": dict(self.how).get(a.name),
                }
                for a in self.artifacts
            ],
        }


def audit_step(
    index: int,
    name: str,
    seed: str | None,
    seed_value: int | None,
    runs: tuple[tuple[float, dict[str, str], dict[str, str]], ...],
    state: tuple[str, ...] = (),
    drew: str | None = None,
    draws: str = "",
    raised: tuple[str, str] = ("", ""),
    default_connection: tuple[str, ...] = (),
    reached: tuple[dict[str, str], dict[str, str]] = ({}, {}),
    kept_connections: tuple[tuple[str, tuple[str, ...]], ...] = (),
    findings: Mapping[str, ArtifactFindings] | None = None,
) -> StepAudit:
    """The step's verdict from its two audit runs: (seconds, bytes by name, canonical by name).
    `state` names what it read through ctx.state; `drew`, the random generators it drew
    from unseeded. Like a held seed, that draw is why equal bytes do not make it
    deterministic: they matched by chance. `default_connection` names what the steps made
    on DuckDB's default connection, where this step's code runs SQL, before its runs;
    `reached`, what each run read past ctx (runner/past_ctx.py); `findings`, the oracle's
    for each artifact whose rows differed."""
    (s1, b1, c1), (s2, b2, c2) = runs
    artifacts = []
    for artifact in sorted(set(b1) | set(b2)):
        if artifact not in b1 or artifact not in b2:
            found = Repeatability.NOT_REPRODUCIBLE
            pair_b = (b1.get(artifact, ""), b2.get(artifact, ""))
            pair_c = (c1.get(artifact, ""), c2.get(artifact, ""))
        else:
            pair_b, pair_c = (b1[artifact], b2[artifact]), (c1[artifact], c2[artifact])
            found = verdict(
                pair_b[0] == pair_b[1],
                pair_c[0] == pair_c[1],
                seed is not None or bool(drew) or bool(draws),
            )
        artifacts.append(ArtifactAudit(artifact, found, pair_b, pair_c))
    return StepAudit(
        index,
        name,
        seed,
        seed_value,
        (s1, s2),
        artifacts,
        tuple(state),
        drew,
        draws,
        raised,
        default_connection,
        tuple(
            sorted(
                n
                for n in reached[0].keys() | reached[1].keys()
                if reached[0].get(n) != reached[1].get(n)
            )
        ),
        kept_connections,
        tuple(
            (name, describe(f, ("in the first run", "in the second run")))
            for name, f in sorted((findings or {}).items())
        ),
    )


@dataclass(frozen=True)
class AuditReport:
    pipeline: str
    steps: list[StepAudit]
    seconds: float
    # The instrument: a verdict holds at this thread count on this DuckDB, not beyond.
    threads: int | None = None
    duckdb: str | None = None
    # The step that stopped the audit (it raised, or ran past --step-timeout), as "step N
    # name", when one did: the verdicts are then for the steps audited before it, and the
    # command exits 3.
    stopped_at: str | None = None
    schema: str = "twicerun.audit/1"
    # The engine the steps ran on, named in full, when it is not DuckDB (Spark: its version,
    # master and partitions); None on DuckDB, which `threads` and `duckdb` name.
    engine: str | None = None
    # Whether each step's second run was in another Python process, under a string hash
    # seed of its own (runner/fresh_process.py); on Spark both run in this one.
    fresh_process: bool = False

    @property
    def verdict(self) -> Repeatability:
        # The worst over steps, not the commonest: one step that moves is what an audit is for.
        return max((s.verdict for s in self.steps), default=Repeatability.DETERMINISTIC)

    def lines(self) -> list[str]:
        out = []
        index_width = max((len(str(s.index)) for s in self.steps), default=1)
        width = widest(a.name for s in self.steps for a in s.artifacts)
        for s in self.steps:
            out += s.lines(
                self.threads,
                index_width,
                width,
                spark=self.engine is not None,
                fresh_process=self.fresh_process,
            )
        at = f" at threads={self.threads}" if self.threads else ""
        on = f" on DuckDB {self.duckdb}" if self.duckdb else ""
        if self.engine:
            at, on = "", f" on {self.engine}"
        # The verdict is from two runs of each step; said here, since a step that changes
        # its answer now and then can repeat itself twice and be called deterministic. And
        # where they ran: a step that iterates over a set of strings repeats itself under
        # one string hash seed and may not in tomorrow's process.
        parts = [
            f"{len(self.steps)} step{'s' if len(self.steps) != 1 else ''} audited",
            "two runs each, the second in another Python process (another string hash seed)"
            if self.fresh_process
            else "two runs each in one Python process (one string hash seed)",
            f"{at}{on}".strip(),
            f"in {self.seconds:.1f}s",
        ]
        said = ", ".join(p for p in parts if p)
        if self.stopped_at and not self.steps:
            # No step was audited, so there is no verdict to give; "deterministic" was.
            out.append(
                f"{self.pipeline}: no verdict, since {self.stopped_at} stopped the audit "
                f"before any step was audited ({said})"
            )
        elif self.stopped_at:
            out.append(
                f"{self.pipeline}: {self.verdict} for the steps above, audited before "
                f"{self.stopped_at} stopped the audit ({said})"
            )
        else:
            out.append(f"{self.pipeline}: {self.verdict} ({said})")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "pipeline": self.pipeline,
            "verdict": None if self.stopped_at and not self.steps else str(self.verdict),
            "seconds": self.seconds,
            "threads": self.threads,
            "duckdb": self.duckdb,
            "engine": self.engine,
            "stopped_at": self.stopped_at,
            "fresh_process": self.fresh_process,
            "steps": [s.to_dict() for s in self.steps],
        }
