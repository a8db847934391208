"""The native reader equals Spark's State Data Source, on every sample.

For every store, join side, transformWithState variable and the registered timers of every
bundled sample and every compatibility sample (PySpark 3.4-4.3), the rows at every retained
committed batch are read with both engines and compared as multisets (partition ids included);
so is every change feed over the whole retained range (its rows carry their batch, so every
sub-range is covered). Spark is the truth: nothing here is computed by State Lens's code.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from analysis.errors import StateReadError
from analysis.model import CheckpointInfo, StateSource, sources_of
from spark_io.checkpoint import read_checkpoint
from spark_io.native.reader import NativeReader
from spark_io.native.stores import RocksPartition
from spark_io.state_reader import has_change_feed, state_frame, to_arrow
from support import COMPAT_NAMES, SAMPLE_NAMES, sample

ALL = SAMPLE_NAMES + [f"compat/{n}" for n in COMPAT_NAMES]
COMPARED: Counter[str] = Counter()


def _multiset(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps(r, sort_keys=True, default=repr) for r in rows)


def _spark_at_batches(info: CheckpointInfo, src: StateSource, batches: list[int]) -> pa.Table:
    """Spark's rows of a source at each batch, in one job (a union with the batch as a column)."""
    from pyspark.sql import functions as F

    frames = [state_frame(info.path, src, {"batchId": str(b)}).withColumn("_batch", F.lit(b)) for b in batches]
    df = frames[0]
    for f in frames[1:]:
        df = df.unionByName(f)
    return to_arrow(df, src.describe())


def _native_at_batches(reader: NativeReader, src: StateSource, batches: list[int]) -> pa.Table:
    tables = []
    for b in batches:
        t = reader.state(src, b)
        tables.append(t.append_column("_batch", pa.array([b] * t.num_rows, pa.int32())))
    return pa.concat_tables(tables)


def _both_ways(info: CheckpointInfo, src: StateSource, batches: list[int], monkeypatch: Any) -> list[tuple[str, pa.Table]]:
    """A RocksDB store's rows at each batch read both ways the native reader makes a version: from
    the snapshot before it and the changelogs after, and from every changelog since version 1."""
    if info.provider != "RocksDBStateStoreProvider":
        return []
    out = []
    ways = (("from snapshots", lambda self, version: None), ("from every changelog", RocksPartition._changelogs_since_start))
    for way, replay in ways:
        with monkeypatch.context() as m:
            m.setattr(RocksPartition, "_replay", replay)
            out.append((way, _native_at_batches(NativeReader(info), src, batches)))
    return out


def _assert_same(native: pa.Table, spark: pa.Table, what: str) -> None:
    assert native.column_names == spark.column_names, f"{what}: columns {native.column_names} != Spark's {spark.column_names}"
    n, s = _multiset(native.to_pylist()), _multiset(spark.to_pylist())
    only_native, only_spark = n - s, s - n
    assert not only_native and not only_spark, (
        f"{what}: {native.num_rows} native rows, {spark.num_rows} Spark rows; only native: {list(only_native)[:3]}; "
        f"only Spark: {list(only_spark)[:3]}"
    )


@pytest.mark.parametrize("name", ALL)
def test_every_store_at_every_batch_and_every_change_feed_equals_spark(name: str, spark: Any, monkeypatch: Any) -> None:
    info = read_checkpoint(sample(name))
    if not info.operators:
        pytest.skip("no state")
    reader = NativeReader(info)
    batches = [b.batch_id for b in info.committed_batches]
    for op in info.operators:
        for src in sources_of(op):
            what = f"{name}: {src.describe()}"
            spark_rows = _spark_at_batches(info, src, batches)
            _assert_same(_native_at_batches(reader, src, batches), spark_rows, f"{what} at batches {batches[0]}–{batches[-1]}")
            for way, native in _both_ways(info, src, batches, monkeypatch):
                _assert_same(native, spark_rows, f"{what} ({way}) at batches {batches[0]}–{batches[-1]}")
                COMPARED[f"RocksDB store batches {way}"] += len(batches)
            COMPARED["stores"] += 1
            COMPARED["store batches"] += len(batches)
            COMPARED["rows"] += spark_rows.num_rows
            if src.has_change_feed and has_change_feed(info, op.operator_id):
                feed = to_arrow(
                    state_frame(
                        info.path,
                        src,
                        {"readChangeFeed": "true", "changeStartBatchId": str(batches[0]), "changeEndBatchId": str(batches[-1])},
                    ),
                    what,
                )
                _assert_same(reader.changes(src, batches[0], batches[-1]), feed, f"{what} change feed")
                COMPARED["change feeds"] += 1
                COMPARED["change rows"] += feed.num_rows


def test_zz_report_what_was_compared() -> None:
    """Runs after the comparisons (same module, collected last): says how much was compared."""
    if not COMPARED:
        pytest.skip("the comparisons did not run")
    print(f"\nnative = Spark: {dict(COMPARED)}")
    assert COMPARED["stores"] > 0


def test_a_damaged_state_file_names_the_file_and_the_byte(copy_sample: Any) -> None:
    path = copy_sample("windowed_agg")
    delta = path / "state" / "0" / "0" / "3.delta"
    data = bytearray(delta.read_bytes())
    data[30:40] = b"\xff" * 10
    delta.write_bytes(bytes(data))
    info = read_checkpoint(str(path))
    with pytest.raises(StateReadError) as e:
        NativeReader(info).state(StateSource(0, store_name="default"), 2)  # version 3 = batch 2
    assert "state/0/0/3.delta" in e.value.message
    assert "byte" in e.value.message


def test_a_cut_state_file_is_an_error_not_fewer_rows(copy_sample: Any) -> None:
    path = copy_sample("join_hdfs")
    delta = path / "state" / "0" / "1" / "left-keyWithIndexToValue" / "5.delta"
    delta.write_bytes(delta.read_bytes()[:-12])
    info = read_checkpoint(str(path))
    with pytest.raises(StateReadError, match=r"left-keyWithIndexToValue/5\.delta"):
        NativeReader(info).state(StateSource(0, store_name="left-keyWithIndexToValue"), 4)


def test_a_missing_delta_is_named(copy_sample: Any) -> None:
    path = copy_sample("dedup")
    (path / "state" / "0" / "2" / "4.delta").unlink()
    info = read_checkpoint(str(path))
    with pytest.raises(StateReadError, match=r"state/0/2/4\.delta is missing"):
        NativeReader(info).changes(StateSource(0, store_name="default"), 0, 5)
