"""Inputs written from other inputs of the same step: recomputed from the stressed copies.

A step that reads `orders` and `control` (a count and a total of `orders` that an earlier
step wrote) and checks that the two agree is correct. Row multiplication doubled the rows of
each on its own, `control`'s one row included, so what one says of the other no longer
held, the check raised, and the step was AMPLIFICATION_FAILED (exit 5) on correct code
(unseen142); tie collapse, which changes values, can break the same agreement. Where an input
was written, through ctx.read alone, from another input the step reads (or from the files it
reads through ctx.source), the steps in between are executed again, once, on the stressed
copy, and what they write stands in for the input, as the pipeline itself would have made it
from stressed rows.

Only the transforms that change what the rows hold (row multiplication, tie collapse, and
the joint probe's copy that does both) need this: reordering keeps every input's rows, so
what one says of another still holds.
"""

from __future__ import annotations

import json
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, field

from twicerun.errors import BadInput, StepCrashed
from twicerun.pipeline import Step
from twicerun.runner.execute import execute_step
from twicerun.storage.context import ArtifactRef
from twicerun.storage.layout import LOOP, RunAddress
from twicerun.storage.source_files import SOURCE_COPY


@dataclass(frozen=True)
class Derived:
    """The inputs of one step that other inputs of it decide: `targets[name]` is the inputs
    it was written from and the steps that wrote it from them, and `chain` every such step,
    in order. `aliases[i]` maps the key under which step `i` of the chain finds a stressed
    source's copy to the key the step being amplified has it under (the same files, read
    the same way, under another view name)."""

    targets: dict[str, tuple[list[str], list[int]]]
    chain: list[int]
    aliases: dict[int, dict[str, str]] = field(default_factory=dict)


def _signature(source) -> tuple:
    """What makes two ctx.source calls read the same rows: the reader, the files by path
    and bytes, and the options."""
    return (
        source.reader,
        tuple((f.path, f.digest) for f in source.files),
        json.dumps(source.options, sort_keys=True, default=str),
    )


def derived_inputs(records, step_index: int, read: list[str], sources=()) -> Derived | None:
    """Which of `read` (what step `step_index` read through ctx.read in the loop's run 1)
    were written, through ctx.read alone, from others of `read`, or from files the step
    also reads through ctx.source (`sources`, its SourceRecords, whose stressed copies are
    keyed SOURCE_COPY + name); None when none were.

    A chain with a step that did not run to the end in run 1 is left out. A step of the
    chain that reads state (ctx.state) starts from its `initial` rows, as every run of an
    amplifier does."""
    if len(set(read)) + len(sources) < 2:
        return None  # one input has no other to be written from; most steps read one
    loop = RunAddress(LOOP, 1)
    owners = records.owners(loop)
    wanted = set(read)
    by_signature = {_signature(source): SOURCE_COPY + source.name for source in sources}
    aliases: dict[int, dict[str, str]] = {}

    def same_files(index: int, receipt) -> set[str]:
        """The keys of this step's sources among the stressed step's, by what they read."""
        found = set()
        for source in receipt.sources:
            key = by_signature.get(_signature(source))
            if key is not None:
                found.add(key)
                aliases.setdefault(index, {})[SOURCE_COPY + source.name] = key
        return found

    def producer(name: str) -> int | None:
        owner = owners.get(name)
        return owner[0] if owner is not None and owner[0] < step_index else None

    # For every step upstream: the inputs of `read` it depends on, through ctx.read.
    depends: dict[int, set[str]] = {}
    blocked: set[int] = set()

    def roots_of(index: int) -> set[str]:
        if index in depends:
            return depends[index]
        depends[index] = set()  # a cycle cannot happen (steps read earlier steps), but stop
        receipt = records.get(loop, index)
        if receipt is None or receipt.outcome != "ok":
            blocked.add(index)
            return depends[index]
        found: set[str] = same_files(index, receipt)
        for r in receipt.reads:
            if r.via != "read":
                continue  # its own state: the initial rows, as in every amplifier's run
            if r.name in wanted:
                found.add(r.name)
            upstream = producer(r.name)
            if upstream is not None:
                found |= roots_of(upstream)
                if upstream in blocked:
                    blocked.add(index)
        depends[index] = found
        return found

    targets: dict[str, tuple[list[str], list[int]]] = {}
    for name in read:
        index = producer(name)
        if index is None:
            continue
        roots = sorted(roots_of(index) - {name})
        if not roots or index in blocked:
            continue
        targets[name] = (
            roots,
            sorted(_between(records, loop, index, set(roots), producer, aliases)),
        )
    if not targets:
        return None
    chain = sorted({i for _, chain in targets.values() for i in chain})
    return Derived(targets, chain, {i: aliases[i] for i in chain if i in aliases})


def _between(records, loop: RunAddress, index: int, roots: set[str], producer, aliases) -> set[int]:
    """The steps from `roots` down to step `index`: `index` and every step upstream of it
    that read one of `roots` (a source, by the files `aliases` matched), or what such a
    step wrote."""
    found: set[int] = set()
    # Each step once: steps that each read the two before them would otherwise be walked
    # once per path through them, which doubles with every step.
    seen: dict[int, bool] = {}

    def walk(i: int) -> bool:
        if i in seen:
            return seen[i]
        seen[i] = False
        receipt = records.get(loop, i)
        on_path = bool(set(aliases.get(i, {}).values()) & roots)
        for r in receipt.reads:
            if r.via != "read":
                continue  # its own state, which it wrote itself
            if r.name in roots:
                on_path = True
            upstream = producer(r.name)
            if upstream is not None and walk(upstream):
                on_path = True
        if on_path:
            found.add(i)
        seen[i] = on_path
        return on_path

    walk(index)
    return found


def recompute(
    bench,
    steps: Mapping[int, Step],
    derived: Derived,
    stressed: Mapping[str, ArtifactRef],
    label: str,
    threads: int,
) -> dict[str, ArtifactRef] | str:
    """Each target of `derived`, written again by its chain from the `stressed` copies of
    its roots (a root left as it was reads as the loop's run 1 did); or, when a step of the
    chain raised on them, what it raised, for the caller to stress the input as before."""
    records = bench.records
    loop = RunAddress(LOOP, 1)
    address = RunAddress(label, 1)
    made: dict[str, ArtifactRef] = {}
    for index in derived.chain:
        step = steps[index]
        try:
            receipt = execute_step(
                invocation=bench.invocation,
                step=step,
                address=address,
                threads=threads,
                visible=ChainMap(
                    made,
                    dict(stressed),
                    # The copy of a source the step reads under a name of its own.
                    {
                        own: stressed[key]
                        for own, key in derived.aliases.get(index, {}).items()
                        if key in stressed
                    },
                    records.visible(loop, index),
                ),
                state_source=lambda _name: None,  # the initial rows
                owners=records.owners(loop),
                reference=records.get(loop, index),
                digest_connection=bench.con,
                connections=bench.connections,
                timeout=bench.timeout,
            )
        except StepCrashed as exc:
            return f"step {index} {step.name} raised on them: {exc.said}"
        except BadInput as exc:  # a series reports these as its error; so does this
            return f"step {index} {step.name} could not run on them: {exc}"
        records.add(address, receipt)
        for record in receipt.artifacts:
            ref = records.ref(address, index, record.name)
            if ref is not None:
                made[record.name] = ref
    return {name: made[name] for name in derived.targets if name in made}


def said(derived: Derived, steps: Mapping[int, Step], recomputed: list[str]) -> str:
    """The detail's clause for the inputs recomputed rather than stressed on their own."""
    parts = []
    for name in recomputed:
        roots, chain = derived.targets[name]
        by = ", ".join(f"step {i} {steps[i].name}" for i in chain)
        parts.append(f"{name} written again from the stressed {' and '.join(roots)} by {by}")
    return "; ".join(parts)
