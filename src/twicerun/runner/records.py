"""The receipts of one invocation, held in memory, and what they resolve artifacts to.

Every read a step makes goes through here, so containment, state and the
pruning of artifacts identical to run 1 are decided in one place.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping
from dataclasses import replace

from twicerun.compare.digest import canonical_digest
from twicerun.compare.pair import Side, same_rows
from twicerun.storage.context import ArtifactRef
from twicerun.storage.janitor import Janitor, remove_now
from twicerun.storage.layout import Invocation, RunAddress, follow
from twicerun.storage.receipts import Receipt, save_receipt


class Records:
    def __init__(
        self, invocation: Invocation, reference: RunAddress, janitor: Janitor | None = None
    ):
        self.invocation = invocation
        self.reference = reference
        self.janitor = janitor
        self._receipts: dict[tuple[RunAddress, int], Receipt] = {}
        self._unsaved: set[tuple[RunAddress, int]] = set()
        # Per run: artifact name -> (step index, step name), in the order first written.
        # Kept as receipts arrive, so no execution rescans every receipt before it.
        self._written: dict[RunAddress, dict[str, tuple[int, str]]] = {}

    def add(self, address: RunAddress, receipt: Receipt, saved: bool = True) -> None:
        """`saved=False` for a receipt not yet on disk; `flush` writes it, unless pruning
        or a discard rewrites it first (which writes it then)."""
        key = (address, receipt.step_index)
        self._receipts[key] = receipt
        written = self._written.setdefault(address, {})
        for record in receipt.artifacts:
            written.setdefault(record.name, (receipt.step_index, receipt.step_name))
        if saved:
            self._unsaved.discard(key)
        else:
            self._unsaved.add(key)

    def _save(self, address: RunAddress, index: int, receipt: Receipt) -> None:
        """Record a changed receipt: written now, or, if the first version is still held
        back, held back with it (so `flush` writes the execution's receipt once)."""
        if (address, index) in self._unsaved:
            self.add(address, receipt, saved=False)
            return
        save_receipt(self.invocation.step_dir(address, index, receipt.step_name), receipt)
        self.add(address, receipt)

    def flush(self, address: RunAddress, index: int) -> None:
        """Write the receipt of (address, index) if it is still held back.

        A later run's copy is compared and, most often, pruned at once, and pruning
        rewrites its receipt; held back until then, the receipt is written once, not
        twice, on the loop's own path (writing it on a helper thread beside the next
        step instead was measured to hide a race: docs/runs.md)."""
        key = (address, index)
        if key in self._unsaved:
            receipt = self._receipts[key]
            save_receipt(self.invocation.step_dir(address, index, receipt.step_name), receipt)
            self._unsaved.discard(key)

    def step_seconds(self) -> float:
        """Seconds spent inside step executions, across the loop and every series."""
        return sum(r.seconds for r in self._receipts.values())

    def get(self, address: RunAddress, index: int) -> Receipt | None:
        return self._receipts.get((address, index))

    def ref(self, address: RunAddress, index: int, name: str) -> ArtifactRef | None:
        """Where (address, step, name) lives, following a pruned copy to run 1's."""
        found = follow(self.get, address, index, name)
        if found is None or not found[2].kept:
            return None  # discarded after it was compared: its findings remain
        address, receipt, record = found
        return ArtifactRef(
            name=name,
            run=str(address),
            step_index=index,
            step_name=receipt.step_name,
            path=self.invocation.absolute(record.file),
            rows=record.rows,
            canonical_digest=record.canonical_digest,
        )

    def visible(self, address: RunAddress, before: int) -> Mapping[str, ArtifactRef]:
        """The artifacts of steps 0..before-1 in `address`, as a step there may read them.

        Resolved when a step reads one, not ahead: resolving every earlier step's
        artifacts for every execution made a pipeline's bookkeeping grow with the square
        of its length."""
        return Visible(self, address, before)

    def written(self, address: RunAddress) -> Mapping[str, tuple[int, str]]:
        """Artifact name -> (step index, step name) for every artifact written in `address`."""
        return self._written.get(address, {})

    def owners(self, *addresses: RunAddress) -> dict[str, tuple[int, str]]:
        found: dict[str, tuple[int, str]] = {}
        for address in addresses:
            for name, owner in self.written(address).items():
                found.setdefault(name, owner)
        return found

    def discard(self, address: RunAddress, index: int) -> None:
        """Delete a compared copy that differed; its receipt and findings stay."""
        receipt = self.get(address, index)
        if receipt is None or not any(r.kept for r in receipt.artifacts):
            return
        doomed = [self.invocation.absolute(r.file) for r in receipt.artifacts if r.kept]
        updated = replace(
            receipt,
            artifacts=[
                replace(r, kept=False, same_as=None) if r.kept else r for r in receipt.artifacts
            ],
        )
        self._save(address, index, updated)
        for path in doomed:
            if self.janitor is not None:
                self.janitor.remove(path)
            else:
                remove_now(path)

    def input_columns(self, address: RunAddress, index: int) -> set[str]:
        """Every column of every artifact this execution read, through ctx.read or ctx.state,
        and of every list of files it read through ctx.source."""
        receipt = self.get(address, index)
        columns: set[str] = set()
        if receipt is None:
            return columns
        for source in receipt.sources:
            columns.update(source.columns)
        for read in receipt.reads:
            if read.run is None or read.step_index is None:
                continue
            try:
                address = RunAddress.parse(read.run)
            except ValueError:
                # A stressed copy made by an amplifier: same columns as the reference's.
                address = self.reference
            source = self.get(address, read.step_index)
            record = source.artifact(read.name) if source else None
            if record is not None:
                columns.update(name for name, _ in record.schema)
        return columns

    def ensure_canonical(
        self, con, address: RunAddress, index: int, names: Collection[str]
    ) -> None:
        """Compute the canonical digests of `names` that this receipt left out.

        Digests are computed lazily: only an artifact whose bytes differ from another
        copy's ever needs one.
        """
        receipt = self.get(address, index)
        wanted = {
            r.name
            for r in (receipt.artifacts if receipt else [])
            if not r.canonical_digest and r.name in names
        }
        if receipt is None or not wanted:
            return
        records = []
        for record in receipt.artifacts:
            if record.name in wanted:
                ref = self.ref(address, index, record.name)
                digest, _, _ = canonical_digest(con, ref.path)
                record = replace(record, canonical_digest=digest)
            records.append(record)
        updated = replace(receipt, artifacts=records)
        self._save(address, index, updated)

    def bytes_differ(self, reference: RunAddress, address: RunAddress, index: int) -> list[str]:
        """The artifacts both executions wrote whose bytes differ: the ones worth reading."""
        ref = self.get(reference, index)
        receipt = self.get(address, index)
        if ref is None or receipt is None:
            return []
        return [
            r.name
            for r in receipt.artifacts
            if (prior := ref.artifact(r.name)) is not None and prior.bytes_digest != r.bytes_digest
        ]

    def sides(self, address: RunAddress, index: int) -> dict[str, Side]:
        receipt = self.get(address, index)
        if receipt is None:
            return {}
        sides = {}
        for record in receipt.artifacts:
            ref = self.ref(address, index, record.name)
            sides[record.name] = Side(
                name=record.name,
                path=ref.path if ref else None,
                bytes_digest=record.bytes_digest,
                canonical_digest=record.canonical_digest,
                rows=record.rows,
                schema=record.schema,
            )
        return sides

    def prune_identical(
        self, address: RunAddress, index: int, against: RunAddress | None = None
    ) -> int:
        """Delete this receipt's artifacts whose canonical digest equals the reference's.

        `against` is the run compared with (run 1 of the loop by default, run 1 of
        a series for the bisect and the amplifiers). Returns the bytes freed.
        Readers of a pruned artifact are sent to that run's copy, which holds
        the same rows.
        """
        against = against or self.reference
        receipt = self.get(address, index)
        reference = self.get(against, index)
        if receipt is None or reference is None or address == against:
            return 0
        doomed = []
        records = []
        for record in receipt.artifacts:
            prior = reference.artifact(record.name)
            if record.kept and prior is not None and same_rows(prior, record):
                doomed.append(self.invocation.absolute(record.file))
                record = replace(record, kept=False, same_as=str(against))
            records.append(record)
        if not doomed:
            return 0
        # The receipt first: a crash between the two leaves a file nobody needs,
        # never a receipt pointing at a file that is gone. (A receipt still held back
        # is written after the deletion, by `flush`: until then there is none at all.)
        updated = replace(receipt, artifacts=records)
        self._save(address, index, updated)
        freed = 0
        for path in doomed:
            with contextlib.suppress(FileNotFoundError):
                freed += path.stat().st_size
            if self.janitor is not None:
                self.janitor.remove(path)
            else:
                remove_now(path)
        return freed


class Visible(Mapping[str, ArtifactRef]):
    """What `Records.visible` returns: a read-only view, each artifact resolved on use."""

    def __init__(self, records: Records, address: RunAddress, before: int):
        self._records = records
        self._address = address
        self._before = before

    def __getitem__(self, name: str) -> ArtifactRef:
        owner = self._records.written(self._address).get(name)
        if owner is None or owner[0] >= self._before:
            raise KeyError(name)
        ref = self._records.ref(self._address, owner[0], name)
        if ref is None:
            raise KeyError(name)
        return ref

    def __iter__(self) -> Iterator[str]:
        for name, (index, _) in list(self._records.written(self._address).items()):
            if index < self._before and self._records.ref(self._address, index, name) is not None:
                yield name

    def __len__(self) -> int:
        return sum(1 for _ in self)
