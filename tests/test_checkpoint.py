"""The plain-Python checkpoint log reader: real samples, damaged copies, a 1,000-batch log."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from statelens.analysis.core.errors import CheckpointNotFound, CorruptCheckpoint, NotACheckpoint
from statelens.spark_io.logs.checkpoint import list_state_files, read_checkpoint, read_schema_file
from support import SAMPLE_NAMES, logged_batches, ms, sample, scenario


def expected_watermarks(name: str, delay_min: float, event_cols: dict[str, str]) -> list[int]:
    """Watermark of batch b = min over sources of (max event time seen in batches < b) - delay.

    ``event_cols`` maps each source to its event-time column; cancelled orders are filtered
    before the watermark in the join query, so they do not count.
    """
    s = scenario(name)
    out: list[int] = []
    seen: dict[str, int] = {}
    for b in range(len(s.batches) + 1):
        out.append(min(seen.values()) - int(delay_min * 60_000) if len(seen) == len(event_cols) else 0)
        if b < len(s.batches):
            for src, col in event_cols.items():
                times = [ms(r[col]) for r in s.batches[b].get(src, []) if r.get("status") != "cancelled"]
                if times:
                    seen[src] = max([*times, seen.get(src, times[0])])
    return out


def test_every_sample_reads_with_query_id_batches_and_operators() -> None:
    for name in SAMPLE_NAMES:
        info = read_checkpoint(sample(name))
        assert info.query_id and len(info.query_id) == 36, name
        assert info.batches and all(b.committed for b in info.batches), name
        assert [b.batch_id for b in info.batches] == list(range(len(info.batches))), name
        assert info.operators, name


def test_join_batches_and_watermarks_follow_the_input_data() -> None:
    s = scenario("join_hdfs")
    info = read_checkpoint(sample("join_hdfs"))
    # one batch per input file, plus the final no-data batch that applies the last watermark
    assert len(info.batches) == len(s.batches) + 1
    wm = expected_watermarks("join_hdfs", 2, {"orders": "order_time", "payments": "payment_time"})
    assert [b.watermark_ms for b in info.batches] == wm
    assert info.batches[1].watermark_ms == ms("2025-12-31T23:58:45+00:00")  # 00:00:45 - 2 min
    assert info.last_committed == 16 and info.uncommitted == []
    assert info.provider == "HDFSBackedStateStoreProvider"
    assert info.conf["spark.sql.shuffle.partitions"] == "4"
    assert info.conf["spark.sql.streaming.join.stateFormatVersion"] == "2"
    (op,) = info.operators
    assert op.operator_name == "symmetricHashJoin" and op.is_join and op.metadata_version == 1
    assert [st.store_name for st in op.stores] == [
        "left-keyToNumValues",
        "left-keyWithIndexToValue",
        "right-keyToNumValues",
        "right-keyWithIndexToValue",
    ]
    assert {st.num_partitions for st in op.stores} == {4}


def test_stuck_and_missing_watermarks() -> None:
    stuck = read_checkpoint(sample("stuck_watermark_dedup"))
    # constant event time 00:00 minus the 10 minute delay, from batch 1 on
    assert {b.watermark_ms for b in stuck.batches[1:]} == {ms("2025-12-31T23:50:00+00:00")}
    assert {b.watermark_ms for b in read_checkpoint(sample("unbounded_agg")).batches} == {0}


def test_windowed_agg_watermark_is_max_event_time_minus_ten_minutes() -> None:
    wm = expected_watermarks("windowed_agg", 10, {"events": "event_time"})
    assert [b.watermark_ms for b in read_checkpoint(sample("windowed_agg")).batches] == wm


def test_rocksdb_provider_is_read_from_the_captured_conf() -> None:
    info = read_checkpoint(sample("join_rocksdb"))
    assert info.provider == "RocksDBStateStoreProvider"
    # Spark does not capture the changelog flag in offsets/: its evidence is the .changelog files
    assert "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled" not in info.conf


def test_transform_with_state_operator_metadata_v2() -> None:
    (op,) = read_checkpoint(sample("transform_with_state")).operators
    assert op.metadata_version == 2
    assert op.operator_name == "transformWithStateInPandasExec"
    assert set(op.state_variables) == {"count", "per_kind", "recent", "$eventTimers_keyToTimestamp"}
    assert op.properties["timeMode"] == "EventTime"


def test_chained_operators_have_two_ids() -> None:
    ops = read_checkpoint(sample("chained_join_agg")).operators
    assert [(o.operator_id, o.operator_name) for o in ops] == [(0, "stateStoreSave"), (1, "symmetricHashJoin")]


def test_state_files_kinds_versions_and_sizes() -> None:
    files = list_state_files(sample("join_rocksdb"))
    kinds = {f.kind for f in files}
    assert {"changelog", "zip", "schema", "metadata"} <= kinds
    assert not any(f.path.endswith(".crc") for f in files)
    changelogs = [f for f in files if f.kind == "changelog"]
    # 4 stores x 4 partitions x 17 versions (batch N writes version N + 1)
    assert len(changelogs) == 4 * 4 * 17
    assert {f.version for f in changelogs} == set(range(1, 18))
    root = Path(sample("join_rocksdb"))
    assert all(f.size == os.path.getsize(root / f.path) for f in files)
    hdfs = list_state_files(sample("join_hdfs"))
    deltas = [f for f in hdfs if f.kind == "delta"]
    assert len(deltas) == 4 * 4 * 17 and {f.store_name for f in deltas} == {
        "left-keyToNumValues",
        "left-keyWithIndexToValue",
        "right-keyToNumValues",
        "right-keyWithIndexToValue",
    }
    agg = list_state_files(sample("unbounded_agg"))
    assert {f.store_name for f in agg if f.partition_id >= 0} == {"default"}


def test_schema_file_holds_key_and_value_schemas() -> None:
    path = Path(sample("join_hdfs")) / "state/0/0/left-keyWithIndexToValue/_metadata/schema"
    key, value = read_schema_file(path)[:2]
    assert [f["name"] for f in key["fields"]] == ["field0", "index"]
    assert [f["name"] for f in value["fields"]] == ["order_id", "customer_id", "amount", "status", "order_time", "matched"]


# --------------------------------------------------------------------------- bad input


def test_bad_paths_get_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(CheckpointNotFound, match="does not exist"):
        read_checkpoint(str(tmp_path / "nope"))
    f = tmp_path / "file.txt"
    f.write_text("x")
    with pytest.raises(NotACheckpoint, match="is a file"):
        read_checkpoint(str(f))
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotACheckpoint, match="empty folder"):
        read_checkpoint(str(tmp_path / "empty"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "data.parquet").write_text("x")
    with pytest.raises(NotACheckpoint, match="not a Structured Streaming checkpoint"):
        read_checkpoint(str(tmp_path / "other"))
    with pytest.raises(NotACheckpoint, match="open its parent"):
        read_checkpoint(sample("join_hdfs") + "/state")
    with pytest.raises(CheckpointNotFound, match="No checkpoint path"):
        read_checkpoint("  ")


@pytest.mark.parametrize(
    "folder,content,message",
    [
        ("offsets", b"", "does not start with a version line"),
        ("offsets", b'v1\n{"batchWatermarkMs":17', "not valid JSON"),
        ("offsets", b"v1", "truncated"),
        ("offsets", b"\x00\xff\xfe garbage", "not a text file"),
        ("offsets", b'v1\n{"batchWatermarkMs":"soon"}', "should be an integer"),
        ("commits", b'v1\n{"nextBatchWatermarkMs', "not valid JSON"),
        ("commits", b"garbage", "does not start with a version line"),
    ],
)
def test_corrupt_log_files_name_the_file(copy_sample, folder: str, content: bytes, message: str) -> None:  # type: ignore[no-untyped-def]
    """Any offset file; the last commit (the one commit whose content is read, as Spark does)."""
    cp = copy_sample("windowed_agg")
    name = "5" if folder == "offsets" else str(logged_batches(cp, folder)[-1])
    (cp / folder / name).write_bytes(content)
    with pytest.raises(CorruptCheckpoint, match=message) as e:
        read_checkpoint(str(cp))
    assert f"{folder}/{name}" in e.value.message


def test_uncommitted_batch_is_reported(copy_sample) -> None:  # type: ignore[no-untyped-def]
    cp = copy_sample("windowed_agg")
    (cp / "commits" / "12").unlink()
    info = read_checkpoint(str(cp))
    assert info.uncommitted == [12] and info.last_committed == 11


def test_checkpoint_without_state(copy_sample) -> None:  # type: ignore[no-untyped-def]
    import shutil

    cp = copy_sample("unbounded_agg")
    shutil.rmtree(cp / "state")
    info = read_checkpoint(str(cp))
    assert info.operators == [] and len(info.batches) == 12
    assert list_state_files(str(cp)) == []


def test_thousand_batch_log_reads_without_spark(tmp_path: Path) -> None:
    cp = tmp_path / "big"
    for d in ("offsets", "commits"):
        (cp / d).mkdir(parents=True)
    (cp / "metadata").write_text(json.dumps({"id": "00000000-0000-0000-0000-000000000001"}))
    for b in range(1000):
        meta = {
            "batchWatermarkMs": b * 1000,
            "batchTimestampMs": 1_700_000_000_000 + b,
            "conf": {"spark.sql.shuffle.partitions": "200"},
        }
        (cp / "offsets" / str(b)).write_text("v1\n" + json.dumps(meta) + '\n{"logOffset":1}')
        if b < 999:
            (cp / "commits" / str(b)).write_text(f'v1\n{{"nextBatchWatermarkMs":{(b + 1) * 1000}}}')
    info = read_checkpoint(str(cp))
    assert len(info.batches) == 1000 and info.uncommitted == [999] and info.last_committed == 998
    assert info.batches[500].watermark_ms == 500_000 and info.batches[998].next_watermark_ms == 999_000


@pytest.mark.jvm  # a Spark process
def test_operator_keys_from_schema_files_are_the_keys_spark_reads() -> None:
    """The Overview's operators at a glance (no JVM) against the key Spark's State Data Source
    reads, on every sample and operator: the same fields, nested fields included (a join's
    ``index`` counter is not part of its key)."""
    import pyarrow as pa

    from statelens.analysis.checkpoint.overview import operators_table
    from statelens.analysis.core.model import lookup_sources
    from statelens.spark_io.logs.checkpoint import read_key_fields
    from statelens.spark_io.readers.state_reader import read_state

    def ours(fields: list[dict]) -> list[tuple[str, list[str]]]:  # type: ignore[type-arg]
        if fields and fields[0]["name"] == "key" and isinstance(fields[0]["type"], dict):
            fields = fields[0]["type"]["fields"]  # transformWithState: the grouping key struct
        return [
            (f["name"], [c["name"] for c in f["type"]["fields"]] if isinstance(f["type"], dict) else [])
            for f in fields
            if f["name"] != "index"
        ]

    for name in SAMPLE_NAMES:
        info = read_checkpoint(sample(name))
        keys, problems = read_key_fields(info.path)
        assert problems == {}, name
        table = operators_table(info, keys, problems).to_pylist()
        for op, row in zip(info.operators, table, strict=True):
            _, src = lookup_sources(op)[0]
            key_type = read_state(info.path, src, limit=1)[0].schema.field("key").type
            spark = [
                (f.name, [c.name for c in f.type] if pa.types.is_struct(f.type) else []) for f in key_type if f.name != "index"
            ]
            assert ours(keys[op.operator_id]) == spark, (name, op.operator_id)
            assert row["kind"] == op.operator_name and row["partitions"] == op.stores[0].num_partitions


def test_a_damaged_schema_file_is_named_not_hidden(copy_sample) -> None:  # type: ignore[no-untyped-def]
    """The operators table says the key is unknown and why, instead of leaving it blank."""
    from statelens.analysis.checkpoint.overview import operators_table
    from statelens.spark_io.logs.checkpoint import read_key_fields

    cp = copy_sample("windowed_agg")
    (cp / "state" / "0" / "0" / "_metadata" / "schema").write_bytes(b"\x00\x01garbage")
    info = read_checkpoint(str(cp))
    keys, problems = read_key_fields(str(cp))
    assert keys == {} and "does not hold a key and a value schema" in problems[0]
    (row,) = operators_table(info, keys, problems).to_pylist()
    assert row["key"].startswith("unknown: state/0/0/_metadata/schema does not hold")


def test_file_uris_of_every_spelling_open_the_checkpoint(tmp_path: Path) -> None:
    """Spark's one-slash file:/data/x, file:///, file://localhost/ and a percent-encoded space."""
    import shutil
    import urllib.parse

    folder = tmp_path / "my checkpoints" / "windowed_agg"
    shutil.copytree(sample("windowed_agg"), folder)
    plain = read_checkpoint(str(folder))
    for uri in (f"file:{folder}", f"file://{folder}", f"file://localhost{folder}", "file://" + urllib.parse.quote(str(folder))):
        info = read_checkpoint(uri)
        assert info.path == plain.path and [b.batch_id for b in info.batches] == [b.batch_id for b in plain.batches], uri
