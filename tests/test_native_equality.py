"""The native reader equals Spark's State Data Source, on every sample.

For every store, join side, transformWithState variable and the registered timers of every
bundled sample and every compatibility sample (PySpark 3.4-4.3), the rows at every retained
committed batch, every change feed over the whole retained range (its rows carry their batch, so
every sub-range is covered) and the ``state-metadata`` table are compared as multisets (partition
ids included) with Spark's reads of them. Spark's reads of every sample are kept as golden files
by the sample generator (``sample_checkpoints/golden.py``, read by the pinned PySpark); a sample
per Spark version and per state format is read through Spark live here as well (its change feeds
over every batch, its state at the first, a middle and the last batch, and at every batch where
there is no change feed), and its golden file must equal that live read. Spark is the truth:
nothing here is computed by State Lens's code.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import golden
import pyarrow as pa
import pytest

from statelens.analysis.core.errors import StateReadError
from statelens.analysis.core.model import CheckpointInfo, StateSource, sources_of
from statelens.spark_io.logs.checkpoint import read_checkpoint, state_metadata_table
from statelens.spark_io.readers.native.reader import NativeReader
from statelens.spark_io.readers.native.stores import RocksPartition
from statelens.spark_io.readers.state_reader import has_change_feed
from support import COMPAT_NAMES, SAMPLE_NAMES, SAMPLES, sample

ALL = SAMPLE_NAMES + [f"compat/{n}" for n in COMPAT_NAMES]
# read through Spark live too: one sample per Spark version, and one per provider and state format
LIVE = [
    "transform_with_state",
    "dedup_window_chain",
    "compat/3.4.4/join_hdfs",
    "compat/3.5.9/join_state_format_1",
    "compat/3.5.9/agg_state_format_1",
    "compat/4.0.5/tws_collections",
    "compat/4.1.4/windowed_agg",
    "compat/4.2.1/windowed_agg",
    "compat/4.3.0/join_state_format_3",
    "compat/4.3.0/join_state_format_4",
    "compat/4.3.0/rocksdb_no_changelog",
    "compat/4.3.0/checkpoint_v2",
    "compat/4.3.0/tws_collections",
]
COMPARED: Counter[str] = Counter()


def _multiset(rows: list[str]) -> Counter[str]:
    return Counter(rows)


def _rows(table: pa.Table) -> list[str]:
    return [golden.row_text(r) for r in table.to_pylist()]


def _native_at_batches(reader: NativeReader, src: StateSource, batches: list[int]) -> pa.Table:
    tables = []
    for b in batches:
        t = reader.state(src, b)
        tables.append(t.append_column("_batch", pa.array([b] * t.num_rows, pa.int32())))
    return pa.concat_tables(tables)


def _both_ways(info: CheckpointInfo, src: StateSource, batches: list[int], monkeypatch: Any) -> list[tuple[str, pa.Table]]:
    """A RocksDB store's rows at each batch read both ways the native reader makes a version: from
    the snapshot before it and the changelogs after, and from every changelog since version 1.
    Without changelogs in checkpoint format v1 both ways are the reader's own way (a version is its
    snapshot; format v2 never replays from version 1): nothing else to compare."""
    if info.provider != "RocksDBStateStoreProvider":
        return []
    if info.checkpoint_format_version != 1 or not any((Path(info.path) / "state").rglob("*.changelog")):
        return []
    out = []
    ways = (("from snapshots", lambda self, version: None), ("from every changelog", RocksPartition._changelogs_since_start))
    for way, replay in ways:
        with monkeypatch.context() as m:
            m.setattr(RocksPartition, "_replay", replay)
            out.append((way, _native_at_batches(NativeReader(info), src, batches)))
    return out


def _assert_same(native: list[str], spark: list[str], what: str) -> None:
    n, s = _multiset(native), _multiset(spark)
    only_native, only_spark = n - s, s - n
    assert not only_native and not only_spark, (
        f"{what}: {len(native)} native rows, {len(spark)} Spark rows; only native: {list(only_native)[:3]}; "
        f"only Spark: {list(only_spark)[:3]}"
    )


def native_reads(name: str, monkeypatch: Any) -> tuple[list[dict[str, Any]], list[tuple[str, str, list[str]]]]:
    """Every read of a sample by the native reader, as the golden file lists Spark's; and the RocksDB
    stores' rows read the other ways (way, source, rows)."""
    info = read_checkpoint(sample(name))
    reader = NativeReader(info)
    batches = [b.batch_id for b in info.committed_batches]
    reads: list[dict[str, Any]] = [{"read": "state-metadata", "rows": _rows(state_metadata_table(info.path))}]
    others: list[tuple[str, str, list[str]]] = []
    for op in info.operators:
        for src in sources_of(op):
            reads.append(
                {
                    "read": "state",
                    "source": src.describe(),
                    "batches": batches,
                    "rows": _rows(_native_at_batches(reader, src, batches)),
                }
            )
            for way, table in _both_ways(info, src, batches, monkeypatch):
                others.append((way, src.describe(), _rows(table)))
            if src.has_change_feed and has_change_feed(info, op.operator_id):
                feed = reader.changes(src, batches[0], batches[-1])
                reads.append(
                    {"read": "changes", "source": src.describe(), "batches": [batches[0], batches[-1]], "rows": _rows(feed)}
                )
    return reads, others


def _compare(
    name: str, theirs: list[dict[str, Any]], mine: list[dict[str, Any]], others: list[tuple[str, str, list[str]]], who: str
) -> None:
    def key(r: dict[str, Any]) -> tuple[str, str]:
        return (r["read"], r.get("source", ""))

    assert sorted(map(key, mine)) == sorted(map(key, theirs)), f"{name}: the reads differ from {who}'s"
    by_key = {key(r): r for r in theirs}
    for r in mine:
        t = by_key[key(r)]
        assert r.get("batches") == t.get("batches"), f"{name} {key(r)}: batches {r.get('batches')} != {who}'s {t.get('batches')}"
        _assert_same(r["rows"], t["rows"], f"{name}: {r.get('source', '')} {r['read']} vs {who}")
        COMPARED[r["read"]] += 1
        COMPARED[f"{r['read']} rows"] += len(t["rows"])
    for way, source, rows in others:
        _assert_same(rows, by_key[("state", source)]["rows"], f"{name}: {source} ({way}) vs {who}")
        COMPARED[f"RocksDB store reads {way}"] += 1


@pytest.mark.parametrize("name", ALL)
def test_every_read_of_every_sample_equals_sparks(name: str, monkeypatch: Any) -> None:
    """Against Spark's reads kept in the golden file (written by the generator with the pinned PySpark)."""
    header, theirs = golden.read(name)
    assert header["fingerprint"] == golden.fingerprint(SAMPLES / name), (
        f"{name} changed since its golden file was written: run `make golden` (python sample_checkpoints/generate.py --golden {name})"
    )
    mine, others = native_reads(name, monkeypatch)
    _compare(name, theirs, mine, others, f"Spark {header['spark']} (golden)")


def _live_batches(info: CheckpointInfo, src: StateSource, batches: list[int]) -> list[int]:
    """The batches a live read covers: the first, a middle and the last batch's state (with a change
    feed, read live over every batch, they give every batch's). The state at every batch, each store
    with a feed or not, is compared with the golden file (``test_every_read_of_every_sample_equals_sparks``);
    this live read proves the golden file is what this Spark reads. Every batch of a RocksDB store
    without changelogs (a snapshot each) was 59 CPU s of ``compat/4.3.0/rocksdb_no_changelog``."""
    return sorted({batches[0], batches[len(batches) // 2], batches[-1]})


def _rows_at(rows: list[str], batches: list[int]) -> list[str]:
    """A store's state rows at the given batches only (each row carries its batch)."""
    keep = set(batches)
    return [x for x in rows if json.loads(x)["_batch"] in keep]


def _at_batches(reads: list[dict[str, Any]], chosen: dict[str, list[int]]) -> list[dict[str, Any]]:
    """The reads with each store's state rows at the chosen batches only."""
    return [
        {**r, "batches": chosen[r["source"]], "rows": _rows_at(r["rows"], chosen[r["source"]])} if r["read"] == "state" else r
        for r in reads
    ]


@pytest.mark.parametrize("name", LIVE)
def test_live_spark_reads_equal_the_native_reader_and_the_golden_file(name: str, spark: Any, monkeypatch: Any) -> None:
    live = golden.spark_reads(name, at=_live_batches)
    chosen = {r["source"]: r["batches"] for r in live if r["read"] == "state"}
    mine, others = native_reads(name, monkeypatch)
    kept_others = [(way, source, _rows_at(rows, chosen[source])) for way, source, rows in others]
    _compare(name, live, _at_batches(mine, chosen), kept_others, "Spark (live)")
    _, kept = golden.read(name)
    _compare(name, live, _at_batches(kept, chosen), [], "Spark (live) against the golden file")


def test_every_sample_has_a_golden_file() -> None:
    assert sorted(golden.sample_names()) == sorted(ALL)
    missing = [n for n in ALL if not golden.golden_path(n).is_file()]
    assert not missing, f"no golden file for {missing}: run `make golden`"


def test_zz_report_what_was_compared() -> None:
    """Runs after the comparisons (same module, collected last): says how much was compared."""
    if not COMPARED:
        pytest.skip("the comparisons did not run")
    print(f"\nnative = Spark: {dict(COMPARED)}")
    assert COMPARED["state"] > 0


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
