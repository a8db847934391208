"""``statelens repartition``: the preview against Spark's real offline repartition.

Every store of every RocksDB sample with operator metadata is repartitioned for real by the pinned
PySpark (4.3: ``spark._streamingCheckpointManager.repartition``) on a copy, and Spark's State Data
Source counts the rows of each new partition: the preview must give the same count per partition.
The checkpoint PySpark 4.2 repartitioned (``compat/4.2.1/repartitioned``, 4 -> 3 after batch 5) is
checked the same way against Spark's reads of it (golden file). Where Spark refuses, the preview
names its error class as Spark raises it."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import golden
import pytest
from restart_errors import _conf as _confs  # the session's confs set for a block, then restored (unset if unset)
from test_cli import run_cli

from statelens.analysis.core.errors import InvalidInput
from statelens.spark_io.gather.repartition import repartition_preview
from statelens.spark_io.logs.checkpoint import read_checkpoint
from support import SAMPLES, tree_checksums

SAMPLES_ROCKSDB = [
    "join_rocksdb",
    "dedup_window_chain",
    "transform_with_state",
    "compat/4.3.0/join_state_format_3",
    "compat/4.3.0/rocksdb_no_changelog",
    "compat/4.3.0/tws_collections",
    "compat/4.3.0/checkpoint_v2",
    "compat/4.2.1/join_rocksdb",
    "compat/4.0.5/join_rocksdb",
]


def _spark_rows_per_partition(spark: Any, path: Path, operator_id: int, store: str, is_join: bool, is_tws: bool) -> Counter[int]:
    reader = spark.read.format("statestore").option("operatorId", operator_id)
    if is_join:
        reader = reader.option("joinSide", store)
    elif is_tws:
        reader = reader.option("stateVarName", store)
    else:
        reader = reader.option("storeName", store)
    rows = reader.load(str(path)).groupBy("partition_id").count().collect()
    return Counter({r["partition_id"]: r["count"] for r in rows})


@pytest.mark.parametrize("name", SAMPLES_ROCKSDB)
def test_the_preview_is_what_spark_repartition_does(spark: Any, tmp_path: Path, name: str) -> None:
    source = SAMPLES / name
    before = tree_checksums(source)
    info = read_checkpoint(str(source))
    now = info.partitions_at(info.last_committed) or info.operators[0].stores[0].num_partitions
    n = 3 if now != 3 else 5
    preview = repartition_preview(str(source), n)
    assert preview.spark_error_class is None and not preview.unknown
    assert tree_checksums(source) == before
    copy = tmp_path / "cp"
    shutil.copytree(source, copy)
    version = str(info.checkpoint_format_version)  # Spark refuses a session of another version
    assert (version == "2") == ("checkpointFormatVersion" in preview.command)
    with _confs(spark, {"spark.sql.streaming.stateStore.checkpointFormatVersion": version}):
        spark._streamingCheckpointManager.repartition(str(copy), n)
        after = read_checkpoint(str(copy))
        assert after.repartitions[-1].after == n
        for store in preview.stores:
            op = info.operator(store.operator_id)
            assert op is not None
            tws = "transformWithState" in op.operator_name
            truth = _spark_rows_per_partition(spark, copy, store.operator_id, store.store, op.is_join, tws)
            assert store.rows == [truth.get(p, 0) for p in range(n)], (store.operator_id, store.store)
            assert len(store.bytes) == n and (sum(store.bytes) > 0) == (sum(store.rows) > 0)


def test_join_state_format_4_is_warned_and_spark_damages_it(spark: Any, tmp_path: Path) -> None:
    """PySpark 4.3.0 repartitions join state format 4 without a word and leaves it unreadable: the
    preview says so before; the real repartition shows it."""
    name = "compat/4.3.0/join_state_format_4"
    preview = repartition_preview(str(SAMPLES / name), 3)
    assert preview.spark_error_class is None and any("format 4" in w for w in preview.warnings)
    assert [s.store for s in preview.stores] == ["left", "right"] and sum(preview.stores[0].rows) > 0
    copy = tmp_path / "cp"
    shutil.copytree(SAMPLES / name, copy)
    spark._streamingCheckpointManager.repartition(str(copy), 3)
    with pytest.raises(Exception, match=r"UnsafeRow|INTERNAL_ERROR"):
        spark.read.format("statestore").option("storeName", "left-keyWithTsToValues").load(str(copy)).collect()


def test_the_preview_is_what_spark_4_2_did() -> None:
    name = "compat/4.2.1/repartitioned"
    info = read_checkpoint(str(SAMPLES / name))
    (r,) = info.repartitions
    preview = repartition_preview(str(SAMPLES / name), r.after, batch=r.batch_id - 1)
    _, reads = golden.read(name)
    (state,) = [x for x in reads if x["read"] == "state"]
    rows = [json.loads(t) for t in state["rows"]]
    truth = Counter(x["partition_id"] for x in rows if x["_batch"] == r.batch_id)
    (store,) = preview.stores
    assert store.rows == [truth.get(p, 0) for p in range(r.after)] and sum(store.rows) > 0
    assert store.rows_before == [
        Counter(x["partition_id"] for x in rows if x["_batch"] == r.batch_id - 1).get(p, 0) for p in range(r.before)
    ]


@pytest.mark.parametrize(
    ("name", "partitions"),
    [("windowed_agg", 3), ("compat/3.5.9/join_rocksdb", 3), ("join_rocksdb", 4)],
)
def test_spark_refusals_are_named_as_spark_raises_them(spark: Any, tmp_path: Path, name: str, partitions: int) -> None:
    """HDFS-backed state, a checkpoint without operator metadata, the count it has: Spark's real refusal."""
    copy = tmp_path / "cp"
    shutil.copytree(SAMPLES / name, copy)
    with pytest.raises(Exception) as raised:
        spark._streamingCheckpointManager.repartition(str(copy), partitions)
    preview = repartition_preview(str(SAMPLES / name), partitions)
    assert preview.spark_error_class is not None and f"[{preview.spark_error_class}]" in str(raised.value)
    assert preview.stores  # the preview is still shown
    out = run_cli("repartition", str(SAMPLES / name), "--partitions", str(partitions), "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["spark_error_class"] == preview.spark_error_class and d["partitions"] == partitions
    assert [s["rows"] for s in d["stores"]] == [s.rows for s in preview.stores]


def test_a_hot_key_keeps_its_rows_together_whatever_the_count() -> None:
    preview = repartition_preview(str(SAMPLES / "hot_key_join"), 16)
    (left,) = [s for s in preview.stores if s.store == "left"]
    hot = left.hot_keys[0]
    assert hot["key"] == {"field0": "hot"} and hot["rows"] >= 1500
    assert left.rows[hot["to"]] >= hot["rows"] and preview.skew_after > 8


def test_bad_counts_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        repartition_preview(str(SAMPLES / "join_rocksdb"), 0)
    out = run_cli("repartition", str(SAMPLES / "join_rocksdb"), "--partitions", "0")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--partitions must be 1 or more" in out.stderr


REPARTITION_APP = """
import json, sys, time
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", sys.argv[2]).getOrCreate())
t = time.time()
spark._streamingCheckpointManager.repartition(sys.argv[1], 3)
print(json.dumps({"seconds": time.time() - t}))
spark.stop()
"""


@pytest.mark.jvm  # a Spark process
def test_the_doctor_names_a_repartition_and_its_duration_from_the_event_log(tmp_path: Path) -> None:
    """A real offline repartition in an application of its own, with its event log: the doctor names
    the batch, the counts and how long it ran (within the time the call took)."""
    import subprocess
    import sys

    copy, logs = tmp_path / "cp", tmp_path / "events"
    shutil.copytree(SAMPLES / "join_rocksdb", copy)
    logs.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", REPARTITION_APP, str(copy), str(logs)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    took = json.loads(out.stdout.strip().splitlines()[-1])["seconds"]
    d = json.loads(run_cli("doctor", str(copy), "--event-log", str(logs), "--json").stdout)
    (p,) = [p for p in d["problems"] if p["code"] == "repartitioned"]
    batch = read_checkpoint(str(copy)).repartitions[-1].batch_id
    assert p["details"]["batch"] == batch and (p["details"]["from"], p["details"]["to"]) == (4, 3)
    assert 0 < p["details"]["seconds"] <= took + 0.5 and p["details"]["seconds"] > took / 3
    without = json.loads(run_cli("doctor", str(copy), "--json").stdout)
    (q,) = [p for p in without["problems"] if p["code"] == "repartitioned"]
    assert q["details"]["seconds"] is None and " in " not in q["title"]
