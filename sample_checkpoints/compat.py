"""Compatibility samples: real checkpoints written by other PySpark versions and configurations.

A developer tool, not part of the install, the app or CI. ``generate.py --spark VERSION``
(or ``all``) creates a virtual environment per PySpark version under
``~/.cache/statelens-compat/<version>`` and runs this module there as a worker::

    <venv>/bin/python sample_checkpoints/compat.py worker OUT_DIR SCENARIO ...

Each scenario leaves ``compat/<version>/<scenario>/`` (the checkpoint) and
``compat/<version>/truth/<scenario>.json``: what really happened, read off that version's
own Spark: the rows the query emitted (with their batch ids) and, for every committed batch,
the keys of every store as Spark's State Data Source reads them (Spark 3.x has no such
reader: those reads are made afterwards by the project's pinned PySpark, and the truth file
says so in ``state_read_by``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
COMPAT = HERE / "compat"
VENVS = Path(os.environ.get("STATELENS_COMPAT_VENVS", Path.home() / ".cache" / "statelens-compat"))
VERSIONS = ["3.4.4", "3.5.9", "4.0.5", "4.1.4", "4.2.1", "4.3.0"]
# what each version's venv gets besides pyspark: the last releases those lines were tested with
PINS = {
    "3": ["pandas==1.5.3", "numpy==1.26.4", "pyarrow==12.0.1"],
    "4.0": ["pandas==2.2.3", "numpy==1.26.4", "pyarrow==17.0.0"],
    "4.1": ["pandas==2.2.3", "numpy==1.26.4", "pyarrow==17.0.0"],
    "4.2": ["pandas==2.2.3", "numpy==1.26.4", "pyarrow==19.0.1"],  # 4.2 needs pyarrow >= 18
}

if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import generate as g  # noqa: E402  (data and queries of the bundled samples)

Rows = list[dict[str, Any]]


def vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".")[:2])


# --------------------------------------------------------------------------- queries


def join(how: str) -> Callable[[Any, dict[str, Any]], Any]:
    """orders ⋈ payments (the State Reader blog's join) with any join type."""

    def build(_spark: Any, s: dict[str, Any]) -> Any:
        from pyspark.sql.functions import col, expr

        orders = s["orders"].where(col("status") != "cancelled").withWatermark("order_time", "2 minutes")
        payments = s["payments"].withWatermark("payment_time", "2 minutes")
        joined = orders.alias("o").join(
            payments.alias("p"),
            expr(
                "o.order_id = p.order_id AND "
                "o.order_time >= p.payment_time - INTERVAL 5 MINUTES AND "
                "o.order_time <= p.payment_time + INTERVAL 5 MINUTES"
            ),
            how,
        )
        return joined.select(
            col("o.order_id").alias("order_id"), "o.order_time", "p.payment_id", col("p.order_id").alias("paid_order_id")
        )

    return build


def complete_agg(watermark: bool) -> Callable[[Any, dict[str, Any]], Any]:
    def build(_spark: Any, s: dict[str, Any]) -> Any:
        from pyspark.sql.functions import col, count, window

        ev = s["events"].withWatermark("event_time", "10 minutes") if watermark else s["events"]
        return ev.groupBy(window(col("event_time"), "5 minutes"), col("user_id")).agg(count("*").alias("events"))

    return build


def composite_keys(_spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.functions import col, count, to_date, window

    ev = s["events"].withWatermark("event_time", "10 minutes")
    return ev.groupBy(
        window(col("event_time"), "5 minutes"),
        col("user_id"),
        to_date(col("event_time")).alias("day"),
        (col("value") % 3).cast("int").alias("bucket"),
        (col("value") * 1000000000).cast("long").alias("big"),
        (col("value") / 2).cast("double").alias("score"),
    ).agg(count("*").alias("events"))


def dedup_no_event_time(_spark: Any, s: dict[str, Any]) -> Any:
    return s["events"].withWatermark("event_time", "10 minutes").dropDuplicates(["event_id"])


def dedup_then_window(_spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.functions import col, count, window

    deduped = s["events"].withWatermark("event_time", "10 minutes").dropDuplicates(["event_id", "event_time"])
    return deduped.groupBy(window(col("event_time"), "5 minutes"), col("user_id")).agg(count("*").alias("events"))


def processing_time_timeout(_spark: Any, s: dict[str, Any]) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    def count_user(key: tuple[Any, ...], pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd

        if state.hasTimedOut:
            state.remove()
            yield pd.DataFrame({"user_id": [key[0]], "events": [0], "status": ["expired"]})
            return
        n = state.get[0] if state.exists else 0
        for pdf in pdfs:
            n += len(pdf)
        state.update((n,))
        state.setTimeoutDuration(60 * 60 * 1000)  # one hour of processing time
        yield pd.DataFrame({"user_id": [key[0]], "events": [n], "status": ["active"]})

    return (
        s["events"]
        .groupBy("user_id")
        .applyInPandasWithState(
            count_user,
            outputStructType="user_id STRING, events LONG, status STRING",
            stateStructType="events LONG",
            outputMode="update",
            timeoutConf=GroupStateTimeout.ProcessingTimeTimeout,
        )
    )


def _per_user(s: dict[str, Any], processor: Any) -> Any:
    """The events per user through a transformWithStateInPandas processor (processing time)."""
    return (
        s["events"]
        .groupBy("user_id")
        .transformWithStateInPandas(
            statefulProcessor=processor,
            outputStructType="user_id STRING, events LONG",
            outputMode="Update",
            timeMode="ProcessingTime",
        )
    )


def tws_ttl(_spark: Any, s: dict[str, Any]) -> Any:
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
    from pyspark.sql.types import LongType, StructField, StructType

    class CountWithTTL(StatefulProcessor):
        """A count per user kept with a 30 minute TTL (processing time)."""

        def init(self, handle: StatefulProcessorHandle) -> None:
            self.count = handle.getValueState("count", StructType([StructField("n", LongType())]), ttlDurationMs=30 * 60 * 1000)

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
            n = self.count.get()[0] if self.count.exists() else 0
            for pdf in rows:
                n += len(pdf)
            self.count.update((n,))
            yield pd.DataFrame({"user_id": [key[0]], "events": [n]})

        def close(self) -> None:
            pass

    return _per_user(s, CountWithTTL())


def tws_collections(_spark: Any, s: dict[str, Any]) -> Any:
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    class Collections(StatefulProcessor):
        """Per user: a value state ``total`` (events seen), a list state ``events`` (every event id,
        the oldest dropped past 5), a map state ``per_kind`` kept with a 30 minute TTL, and a
        processing-time timer that clears the list."""

        def init(self, handle: StatefulProcessorHandle) -> None:
            self.handle = handle
            self.total = handle.getValueState("total", StructType([StructField("n", LongType())]))
            self.events = handle.getListState("events", StructType([StructField("event_id", StringType())]))
            self.per_kind = handle.getMapState(
                "per_kind",
                StructType([StructField("kind", StringType())]),
                StructType([StructField("n", LongType())]),
                ttlDurationMs=30 * 60 * 1000,
            )

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
            n = self.total.get()[0] if self.total.exists() else 0
            kept = [e[0] for e in self.events.get()] if self.events.exists() else []
            for pdf in rows:
                n += len(pdf)
                for event_id, kind in zip(pdf["event_id"], pdf["kind"], strict=True):
                    kept.append(event_id)
                    prev = self.per_kind.getValue((kind,))[0] if self.per_kind.containsKey((kind,)) else 0
                    self.per_kind.updateValue((kind,), (prev + 1,))
            self.total.update((n,))
            self.events.put([(e,) for e in kept[-5:]])
            self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + 60 * 60 * 1000)
            yield pd.DataFrame({"user_id": [key[0]], "events": [n]})

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
            self.events.clear()
            yield pd.DataFrame({"user_id": [key[0]], "events": [0]})

        def close(self) -> None:
            pass

    return _per_user(s, Collections())


def odd_key_batches() -> list[dict[str, Rows]]:
    """Events whose user ids hold quotes, backslashes and non-ASCII characters."""
    users = ["o'brien", 'say "hi"', "back\\slash", "zoë", "東京", "plain"]
    out = []
    for b in range(6):
        rows = [
            {
                "event_id": f"ev-{b}-{i}",
                "user_id": users[(b + i) % len(users)],
                "kind": "view",
                "value": i + 1,
                "event_time": g.ts(b * 3, 11 * i),
            }
            for i in range(4)
        ]
        out.append({"events": rows})
    return out


# --------------------------------------------------------------------------- scenarios


@dataclass
class Compat:
    name: str
    description: str
    schemas: dict[str, str]
    batches: list[dict[str, Rows]]
    build: Callable[[Any, dict[str, Any]], Any]
    kind: str  # join | aggregation | dedup | group_state | transform_with_state
    output_mode: str = "append"
    conf: dict[str, str] = field(default_factory=dict)
    versions: tuple[str, ...] = ("4.3.0",)
    min_version: str = "3.4"
    why_not_before: str = ""
    join_type: str | None = None
    stop_after: int | None = None  # stop after this many batches and restart on the rest
    repartition_to: int | None = None  # between the two runs, repartition the state offline (Spark 4.2+)
    fail_at: int | None = None  # the sink fails in this batch: its offsets stay uncommitted
    operators: tuple[int, ...] = (0,)
    state_vars: tuple[str, ...] = ("count",)  # transformWithState: the state variables the truth reads


HDFS = {**g.SMALL, "spark.sql.streaming.stateStore.providerClass": g.HDFS}
ROCKS = {**g.SMALL, **g.ROCKS}
ROCKS_PLAIN = {**g.SMALL, "spark.sql.streaming.stateStore.providerClass": g.ROCKSDB}
JOIN_SCHEMAS = {"orders": g.ORDERS, "payments": g.PAYMENTS}
EVENTS = {"events": g.EVENTS}


def compat_scenarios() -> list[Compat]:
    op = g.orders_payments_batches(n_batches=10, per_batch=10)
    ev = g.event_batches(10, 8, 3)
    every = tuple(VERSIONS)
    return [
        Compat("join_hdfs", "orders ⋈ payments inner join, HDFS provider.", JOIN_SCHEMAS, op, join("inner"), "join",
               conf=HDFS, versions=every, join_type="inner"),
        Compat("join_rocksdb", "The same join on RocksDB with changelog checkpointing.", JOIN_SCHEMAS, op, join("inner"),
               "join", conf=ROCKS, versions=every, join_type="inner", min_version="3.5",
               why_not_before="RocksDB changelog checkpointing arrived in Spark 3.5"),
        Compat("windowed_agg", "Counts per user in 5-minute windows, 10 minute watermark, append.", EVENTS, ev,
               g.windowed_agg, "aggregation", conf=g.SMALL, versions=every),
        Compat("dedup", "dropDuplicates(event_id, event_time) with a 10 minute watermark.", EVENTS,
               g.event_batches(10, 8, 3, id_fn=g.dedup_ids), g.dedup, "dedup", conf=g.SMALL, versions=every),
        Compat("apply_in_pandas_with_state", "applyInPandasWithState with an event-time timeout.", EVENTS,
               g.event_batches(10, 6, 4, users=4, idle_after={"user-3": 3}), g.apply_in_pandas_with_state,
               "group_state", output_mode="update", conf=g.SMALL, versions=every),
        # configurations
        Compat("left_outer_join", "LEFT OUTER join: unmatched orders are emitted null-padded when evicted.",
               JOIN_SCHEMAS, op, join("left_outer"), "join", conf=HDFS, versions=("3.5.9", "4.3.0"), join_type="left_outer"),
        Compat("right_outer_join", "RIGHT OUTER join: unmatched payments are emitted null-padded when evicted.",
               JOIN_SCHEMAS, op, join("right_outer"), "join", conf=HDFS, join_type="right_outer"),
        Compat("full_outer_join", "FULL OUTER join: unmatched rows of both sides are emitted null-padded.",
               JOIN_SCHEMAS, op, join("full_outer"), "join", conf=ROCKS, join_type="full_outer"),
        Compat("join_state_format_1", "Inner join with join state format 1 (no matched flag), written by 3.5.",
               JOIN_SCHEMAS, op, join("inner"), "join",
               conf={**HDFS, "spark.sql.streaming.join.stateFormatVersion": "1"}, versions=("3.5.9",), join_type="inner"),
        Compat("agg_state_format_1", "Windowed aggregation with aggregation state format 1, written by 3.5.", EVENTS, ev,
               g.windowed_agg, "aggregation",
               conf={**g.SMALL, "spark.sql.streaming.aggregation.stateFormatVersion": "1"}, versions=("3.5.9",)),
        Compat("join_state_format_3", "Inner join with join state format 3: the four stores as virtual column "
               "families of one RocksDB store, default.", JOIN_SCHEMAS, op, join("inner"), "join",
               conf={**ROCKS, "spark.sql.streaming.join.stateFormatVersion": "3"}, join_type="inner"),
        Compat("rocksdb_no_changelog", "Inner join on RocksDB without changelog checkpointing: no change feed.",
               JOIN_SCHEMAS, op, join("inner"), "join", conf=ROCKS_PLAIN, join_type="inner"),
        Compat("checkpoint_v2", "Windowed aggregation on RocksDB with checkpoint format version 2, restarted once.",
               EVENTS, ev, g.windowed_agg, "aggregation",
               conf={**ROCKS, "spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}, stop_after=5,
               versions=("4.1.4", "4.3.0")),  # 4.1: the first with .crc sidecars
        Compat("restarted", "Inner join stopped after 5 batches and restarted on the same checkpoint.", JOIN_SCHEMAS, op,
               join("inner"), "join", conf=HDFS, join_type="inner", stop_after=5),
        Compat("purged", "Inner join with minBatchesToRetain=3: old batches and their state files are purged.",
               JOIN_SCHEMAS, op, join("inner"), "join",
               conf={**HDFS, "spark.sql.streaming.minBatchesToRetain": "3",
                     "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2"}, join_type="inner"),
        Compat("uncommitted", "Windowed aggregation whose sink fails in batch 7: offsets 7 without a commit.", EVENTS, ev,
               g.windowed_agg, "aggregation", conf=g.SMALL, fail_at=7),
        Compat("composite_keys", "Aggregation keyed by window, string (quotes, non-ASCII), date, int, long and double.",
               EVENTS, odd_key_batches(), composite_keys, "aggregation", conf=g.SMALL),
        Compat("complete_mode", "Windowed count in complete mode with a watermark: windows are never evicted.", EVENTS,
               ev, complete_agg(True), "aggregation", output_mode="complete", conf=g.SMALL),
        Compat("complete_no_watermark", "Windowed count in complete mode without a watermark.", EVENTS, ev,
               complete_agg(False), "aggregation", output_mode="complete", conf=g.SMALL),
        Compat("processing_time_timeout", "applyInPandasWithState with a processing-time timeout and no watermark.",
               EVENTS, g.event_batches(6, 6, 4, users=4), processing_time_timeout, "group_state",
               output_mode="update",
               # a processing-time timeout asks for a batch without data every time: AvailableNow would never end
               conf={**g.SMALL, "spark.sql.streaming.noDataMicroBatches.enabled": "false"}),
        Compat("dedup_no_event_time", "dropDuplicates(event_id) with a watermark whose key lacks the event time: never evicted.",
               EVENTS, g.event_batches(10, 8, 3, id_fn=g.dedup_ids), dedup_no_event_time, "dedup", conf=g.SMALL),
        Compat("dedup_then_window", "Two stateful operators: dropDuplicates, then a windowed count.", EVENTS,
               g.event_batches(10, 8, 3, id_fn=g.dedup_ids), dedup_then_window, "dedup", conf=g.SMALL, operators=(0, 1)),
        Compat("tws_ttl", "transformWithStateInPandas with a value state under a 30 minute TTL.", EVENTS,
               g.event_batches(6, 6, 4, users=4), tws_ttl, "transform_with_state", output_mode="update",
               conf={**ROCKS, "spark.sql.streaming.noDataMicroBatches.enabled": "false"},  # as for processing-time timeouts
               min_version="4.0", why_not_before="transformWithState arrived in Spark 4.0"),
        Compat("tws_collections", "transformWithStateInPandas with a value, a list and a map state (30 minute TTL) "
               "and processing-time timers.", EVENTS, g.event_batches(6, 6, 4, users=4), tws_collections,
               "transform_with_state", output_mode="update",
               conf={**ROCKS, "spark.sql.streaming.noDataMicroBatches.enabled": "false"},
               versions=("4.0.5", "4.3.0"), min_version="4.0", why_not_before="transformWithState arrived in Spark 4.0",
               state_vars=("total", "events", "per_kind")),
        # formats Spark 4.1-4.3 write
        Compat("join_state_format_4", "Inner join with join state format 4: keyWithTsToValues and tsWithKey column "
               "families of one RocksDB store, default.", JOIN_SCHEMAS, op, join("inner"), "join",
               conf={**ROCKS, "spark.sql.streaming.join.stateFormatVersion": "4"}, join_type="inner",
               min_version="4.3", why_not_before="join state format 4 arrived in Spark 4.3"),
        Compat("left_outer_join_format_4", "LEFT OUTER join with join state format 4.", JOIN_SCHEMAS, op,
               join("left_outer"), "join", conf={**ROCKS, "spark.sql.streaming.join.stateFormatVersion": "4"},
               join_type="left_outer", min_version="4.3", why_not_before="join state format 4 arrived in Spark 4.3"),
        Compat("tws_avro", "transformWithStateInPandas (value, list, map with TTL, timers) with Avro-encoded state.",
               EVENTS, g.event_batches(6, 6, 4, users=4), tws_collections, "transform_with_state",
               output_mode="update",
               conf={**ROCKS, "spark.sql.streaming.noDataMicroBatches.enabled": "false",
                     "spark.sql.streaming.stateStore.encodingFormat": "avro"},
               min_version="4.0", why_not_before="transformWithState arrived in Spark 4.0",
               state_vars=("total", "events", "per_kind")),
        Compat("row_checksum_hdfs", "Windowed aggregation on HDFS with row checksums (CRC32C of key and value).",
               EVENTS, ev, g.windowed_agg, "aggregation",
               conf={**HDFS, "spark.sql.streaming.stateStore.rowChecksum.enabled": "true"},
               versions=("4.1.4", "4.3.0"), min_version="4.1", why_not_before="row checksums arrived in Spark 4.1"),
        Compat("row_checksum_rocksdb", "Inner join (format 4) on RocksDB with row checksums.", JOIN_SCHEMAS, op,
               join("inner"), "join",
               conf={**ROCKS, "spark.sql.streaming.join.stateFormatVersion": "4",
                     "spark.sql.streaming.stateStore.rowChecksum.enabled": "true"}, join_type="inner",
               min_version="4.3", why_not_before="join state format 4 arrived in Spark 4.3"),
        Compat("repartitioned", "Windowed aggregation on RocksDB, 4 state partitions repartitioned offline to 3 "
               "after 5 batches, then run on.", EVENTS, ev, g.windowed_agg, "aggregation", conf=ROCKS,
               stop_after=5, repartition_to=3, versions=("4.2.1", "4.3.0"), min_version="4.2",
               why_not_before="offline state repartitioning arrived in Spark 4.2"),
        Compat("offset_log_v2", "Windowed aggregation with offset log format 2 (sources by name).", EVENTS, ev,
               g.windowed_agg, "aggregation", conf={**g.SMALL, "spark.sql.streaming.offsetLog.formatVersion": "2"},
               versions=("4.2.1", "4.3.0"), min_version="4.2", why_not_before="offset log format 2 arrived in Spark 4.2"),
    ]  # fmt: skip


def plan(version: str) -> tuple[list[Compat], list[tuple[str, str]]]:
    """The scenarios a version runs, and the skipped ones with the reason."""
    run, skipped = [], []
    for s in compat_scenarios():
        if version not in s.versions:
            continue
        if vtuple(version) < vtuple(s.min_version):
            skipped.append((s.name, s.why_not_before))
        else:
            run.append(s)
    return run, skipped


# --------------------------------------------------------------------------- truth


def state_reads(s: Compat) -> list[tuple[str, dict[str, str]]]:
    """(label, statestore options) of every store the truth records."""
    out = []
    for op in s.operators:
        if s.kind == "join":
            # format 4 keeps a side's rows in keyWithTsToValues (Spark's joinSide view of it loses `matched`)
            store = (
                "keyWithTsToValues" if s.conf.get("spark.sql.streaming.join.stateFormatVersion") == "4" else "keyWithIndexToValue"
            )
            for side in ("left", "right"):
                out.append((side, {"operatorId": str(op), "storeName": f"{side}-{store}"}))
        elif s.kind == "transform_with_state":
            out += [(f"{op}:{v}", {"operatorId": str(op), "stateVarName": v}) for v in s.state_vars]
        else:
            out.append((str(op), {"operatorId": str(op)}))
    return out


def read_truth_state(spark: Any, checkpoint: str, s: Compat, batches: list[int]) -> dict[str, dict[str, list[Any]]]:
    """For every committed batch: each store's keys (JSON, join index dropped) and the join's matched flag."""
    from pyspark.sql import functions as F

    out: dict[str, dict[str, list[Any]]] = {}
    for label, opts in state_reads(s):
        per_batch: dict[str, list[Any]] = {}
        for b in batches:
            reader = spark.read.format("statestore").option("batchId", str(b))
            for k, v in opts.items():
                reader = reader.option(k, v)
            df = reader.load(checkpoint)
            value_fields = df.schema["value"].dataType.fieldNames() if "value" in df.columns else []
            matched = F.col("value.matched") if "matched" in value_fields else F.lit(None)
            rows = df.select(F.to_json("key").alias("k"), matched.alias("m"), "partition_id").collect()
            entries = []
            for r in rows:
                key = json.loads(r["k"])
                key.pop("index", None)
                entries.append([json.dumps(key, sort_keys=True, ensure_ascii=False), r["m"], r["partition_id"]])
            per_batch[str(b)] = sorted(entries, key=lambda e: (e[0], str(e[1]), e[2]))
        out[label] = per_batch
    return out


# --------------------------------------------------------------------------- worker (runs in the version's venv)


def _write_inputs(root: Path, s: Compat, upto: int | None = None) -> None:
    base_mtime = 1_767_225_600
    for source in s.schemas:
        folder = root / source
        folder.mkdir(parents=True, exist_ok=True)
        for i, batch in enumerate(s.batches[:upto]):
            path = folder / f"part-{i:05d}.json"
            if path.exists():
                continue
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in batch.get(source, [])))
            os.utime(path, (base_mtime + i, base_mtime + i))


def run_scenario(spark: Any, s: Compat, out: Path, version: str) -> None:
    dest = out / s.name
    if dest.exists():
        shutil.rmtree(dest)
    for k in [
        *list(g.ROCKS | g.SMALL),
        "spark.sql.streaming.stateStore.providerClass",
        "spark.sql.streaming.join.stateFormatVersion",
        "spark.sql.streaming.aggregation.stateFormatVersion",
        "spark.sql.streaming.stateStore.checkpointFormatVersion",
        "spark.sql.streaming.minBatchesToRetain",
        "spark.sql.streaming.noDataMicroBatches.enabled",
        "spark.sql.streaming.stateStore.encodingFormat",
        "spark.sql.streaming.stateStore.rowChecksum.enabled",
        "spark.sql.streaming.offsetLog.formatVersion",
    ]:
        spark.conf.unset(k)
    for k, v in s.conf.items():
        spark.conf.set(k, v)
    emitted: list[dict[str, Any]] = []

    def collect(batch_df: Any, batch_id: int) -> None:
        if s.fail_at is not None and batch_id == s.fail_at:
            raise RuntimeError(f"the sink fails in batch {batch_id} (on purpose)")
        for row in batch_df.collect():
            emitted.append({"batch_id": batch_id, **row.asDict(recursive=True)})

    with tempfile.TemporaryDirectory(prefix=f"statelens-compat-{s.name}-") as tmp:
        inputs = Path(tmp) / "in"
        parts = [s.stop_after, None] if s.stop_after else [None]
        for upto in parts:
            _write_inputs(inputs, s, upto)
            streams = {
                src: spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).json(str(inputs / src))
                for src, ddl in s.schemas.items()
            }
            query = (
                s.build(spark, streams)
                .writeStream.outputMode(s.output_mode)
                .foreachBatch(collect)
                .option("checkpointLocation", str(dest))
                .trigger(availableNow=True)
                .start()
            )
            try:
                query.awaitTermination()
            except Exception as e:  # the uncommitted scenario's sink fails on purpose
                if s.fail_at is None:
                    raise
                print(f"{s.name}: stopped as planned ({str(e).splitlines()[0][:80]})", flush=True)
            if query.exception() and s.fail_at is None:
                raise RuntimeError(str(query.exception()))
            if upto is not None and s.repartition_to:
                spark._streamingCheckpointManager.repartition(str(dest), s.repartition_to)
                print(f"{s.name}: state repartitioned to {s.repartition_to} partitions", flush=True)
    committed = sorted(int(p.name) for p in (dest / "commits").iterdir() if p.name.isdigit())
    truth: dict[str, Any] = {
        "scenario": s.name,
        "description": s.description,
        "spark_version": version,
        "kind": s.kind,
        "output_mode": s.output_mode,
        "join_type": s.join_type,
        "conf": s.conf,
        "committed_batches": committed,
        "emitted": sorted(emitted, key=lambda r: json.dumps(r, sort_keys=True, default=g.json_default)),
    }
    if vtuple(version) >= (4, 0):
        truth["state"] = read_truth_state(spark, str(dest), s, committed)
        truth["state_read_by"] = version
    (out / "truth").mkdir(exist_ok=True)
    (out / "truth" / f"{s.name}.json").write_text(
        json.dumps(truth, indent=1, sort_keys=True, default=g.json_default, ensure_ascii=False) + "\n"
    )
    print(f"{s.name}: {len(committed)} committed batches, {len(emitted)} output rows", flush=True)


def spark_session(app: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.stateStore.maintenanceInterval", "200ms")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def worker(out: Path, names: list[str]) -> int:
    import pyspark

    version = pyspark.__version__
    chosen, _ = plan(version)
    spark = spark_session(f"statelens-compat-{version}")
    for s in chosen:
        if not names or s.name in names:
            run_scenario(spark, s, out, version)
    spark.stop()
    return 0


def add_state_truth(out: Path) -> int:
    """Spark 3.x has no State Data Source: read each sample's state with the pinned PySpark."""
    import pyspark

    spark = spark_session("statelens-compat-truth")
    spark.conf.set("spark.sql.streaming.stateStore.checkpointFormatVersion", "1")
    by_name = {s.name: s for s in compat_scenarios()}
    for tf in sorted((out / "truth").glob("*.json")):
        truth = json.loads(tf.read_text())
        if "state" in truth:
            continue
        s = by_name[truth["scenario"]]
        truth["state"] = read_truth_state(spark, str(out / s.name), s, truth["committed_batches"])
        truth["state_read_by"] = pyspark.__version__
        tf.write_text(json.dumps(truth, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        print(f"{tf.stem}: state read by {pyspark.__version__}", flush=True)
    spark.stop()
    return 0


# --------------------------------------------------------------------------- driver (project venv)


def venv_python(version: str) -> Path:
    """The Python of the version's venv (created on first use); 4.3.0 is the project's own."""
    import pyspark

    if version == pyspark.__version__:
        return Path(sys.executable)
    venv = VENVS / version
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        extra = "[connect]" if vtuple(version) >= (4, 0) else ""  # Python stateful processors need grpc
        pins = PINS.get(version[:3]) or PINS[version[0]]
        subprocess.run([str(py), "-m", "pip", "install", "-q", f"pyspark{extra}=={version}", *pins], check=True)
    return py


def generate(version: str, names: list[str]) -> None:
    out = COMPAT / version
    out.mkdir(parents=True, exist_ok=True)
    py = venv_python(version)
    subprocess.run([str(py), __file__, "worker", str(out), *names], check=True)
    if vtuple(version) < (4, 0):
        subprocess.run([sys.executable, __file__, "add-state-truth", str(out)], check=True)


def readme_rows() -> list[str]:
    lines = ["| version | scenario | what it shows |", "|---|---|---|"]
    skipped: list[str] = []
    for v in VERSIONS:
        run, skip = plan(v)
        lines += [f"| {v} | `{s.name}` | {s.description} |" for s in run]
        skipped += [f"- {v} `{n}`: skipped, {why}." for n, why in skip]
    return [*lines, "", *skipped]


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd == "worker":
        sys.exit(worker(Path(args[0]), args[1:]))
    if cmd == "add-state-truth":
        sys.exit(add_state_truth(Path(args[0])))
    sys.exit(f"unknown command {cmd}")
