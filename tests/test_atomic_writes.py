"""Atomic writes: a reader polling an artifact's path sees nothing or the whole file."""

from __future__ import annotations

import threading
import time

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from twicerun.storage.atomic import atomic_path
from twicerun.storage.context import StepContext


def test_a_reader_polling_during_a_slow_write_never_sees_a_partial_file(tmp_path):
    final = tmp_path / "events.parquet"
    batches = 40
    rows_per_batch = 2_000
    seen: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def reader():
        while not done.is_set():
            if final.exists():
                try:
                    seen.append(pq.read_metadata(final).num_rows)
                except BaseException as exc:  # a partial file would land here
                    errors.append(exc)
            time.sleep(0.0005)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        schema = pa.schema([("n", pa.int64())])
        with atomic_path(final) as temporary, pq.ParquetWriter(temporary, schema) as writer:
            for b in range(batches):
                start = b * rows_per_batch
                writer.write_table(pa.table({"n": list(range(start, start + rows_per_batch))}))
                time.sleep(0.002)
                assert not final.exists()
        time.sleep(0.02)
    finally:
        done.set()
        thread.join()
    assert errors == []
    assert seen and set(seen) == {batches * rows_per_batch}


def test_ctx_write_puts_nothing_at_the_final_name_until_the_copy_is_complete(tmp_path):
    con = duckdb.connect()
    observed = []

    def state_source(name):
        return None

    ctx = StepContext(
        connection=con,
        threads=1,
        step_index=0,
        step_name="s",
        out_dir=tmp_path,
        visible={},
        state_source=state_source,
        owners={},
    )
    final = tmp_path / "big.parquet"

    schema = pa.schema([("n", pa.int64())])

    def batches():
        # DuckDB pulls these while it writes, so each check happens mid-write.
        for b in range(50):
            observed.append(final.exists())
            yield pa.record_batch([pa.array(range(b * 1000, (b + 1) * 1000))], schema=schema)

    ctx.write("big", pa.RecordBatchReader.from_batches(schema, batches()))
    assert observed and not any(observed)
    assert pq.read_metadata(final).num_rows == 50000
    assert [p.name for p in tmp_path.iterdir()] == ["big.parquet"]
