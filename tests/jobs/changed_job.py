"""A streaming job as users write them, in versions: each ``--change`` is one way users change it.

    python tests/jobs/changed_job.py --query windowed_agg --change key_added \\
        --input IN --checkpoint CP --output OUT [--sink files|foreach_batch]

Its sink is a file sink (parquet under OUT) or a ``foreachBatch`` function that writes a marker
file per batch under OUT: either way, what the job wrote is visible. ``tests/test_preflight.py``
imports it to run the first version and real restarts in the suite's session, and runs it as a
command under ``statelens preflight``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

EVENTS = "event_id STRING, user_id STRING, kind STRING, value BIGINT, event_time TIMESTAMP"
ORDERS = "order_id STRING, customer_id STRING, amount DOUBLE, status STRING, order_time TIMESTAMP"
PAYMENTS = "payment_id STRING, order_id STRING, payment_amount DOUBLE, payment_time TIMESTAMP"
SOURCES = {"events": EVENTS, "orders": ORDERS, "payments": PAYMENTS}
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def _ts(minutes: float) -> str:
    import datetime as dt

    return (dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def input_batch(b: int, per_batch: int = 12) -> dict[str, list[dict[str, Any]]]:
    """Batch ``b``'s rows of every source: events 4 minutes apart per batch, orders and their payments."""
    kinds = ["click", "view", "buy"]
    events, orders, payments = [], [], []
    for i in range(per_batch):
        n = b * per_batch + i
        t = _ts(b * 4 + i * 0.3)
        events.append(
            {"event_id": f"ev-{n}", "user_id": f"user-{n % 5}", "kind": kinds[n % 3], "value": n % 7 + 1, "event_time": t}
        )
        orders.append({"order_id": f"ord-{n}", "customer_id": f"c-{n % 4}", "amount": 10.0 + n, "status": "new", "order_time": t})
        if n % 3:
            payments.append(
                {
                    "payment_id": f"pay-{n}",
                    "order_id": f"ord-{n}",
                    "payment_amount": 10.0 + n,
                    "payment_time": _ts(b * 4 + i * 0.3 + 1),
                }
            )
    return {"events": events, "orders": orders, "payments": payments}


def write_input(root: Path, b: int) -> None:
    """Batch ``b``'s files under ``root/<source>/``, with modification times in batch order."""
    for source, rows in input_batch(b).items():
        folder = root / source
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"part-{b:05d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_767_225_600 + b, 1_767_225_600 + b))


# --------------------------------------------------------------------------- the queries and their changes


def _windowed_agg(s: dict[str, Any], change: str) -> Any:
    from pyspark.sql import functions as F

    events = s["events"]
    if change == "filter_first":  # a where before the watermark, as the source is read
        events = events.where(F.col("kind") != "view")
    if change == "dedup_in_front":
        events = events.withWatermark("event_time", "10 minutes").dropDuplicates(["event_id", "event_time"])
    delay = "2 minutes" if change == "watermark_delay" else "10 minutes"
    size = "10 minutes" if change == "window_size" else "5 minutes"
    if change != "dedup_in_front":
        events = events.withWatermark("event_time", delay)
    if change == "filter_added":
        events = events.where(F.col("kind") != "view")
    if change == "value_filter":  # a numeric condition after the watermark, as a new user added it
        events = events.where(F.col("value") > 5)
    if change == "key_renamed":
        events = events.withColumnRenamed("user_id", "uid")
    user = F.col("uid") if change == "key_renamed" else F.col("user_id")
    keys = [F.window("event_time", size), user] + ([F.col("kind")] if change == "key_added" else [])
    aggs = [F.count("*").alias("events")]
    aggs.append(
        F.avg("value").alias("total_value") if change == "aggregate_type_changed" else F.sum("value").alias("total_value")
    )
    if change == "aggregate_added":
        aggs.append(F.max("value").alias("top"))
    return events.groupBy(*keys).agg(*aggs)


def _windowed_flat(s: dict[str, Any], change: str) -> Any:
    """The windowed aggregation as a file sink's users write it: the window flattened into
    ``window_start``/``window_end`` columns (timestamps Spark writes to Parquet as INT96)."""
    from pyspark.sql import functions as F

    counts = _windowed_agg(s, change)
    return counts.select(
        F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"), *counts.columns[1:]
    )


def _dedup(s: dict[str, Any], change: str) -> Any:
    columns = ["event_id", "event_time"] + (["user_id"] if change == "columns_changed" else [])
    return s["events"].withWatermark("event_time", "10 minutes").dropDuplicates(columns)


def _join(s: dict[str, Any], change: str) -> Any:
    from pyspark.sql import functions as F

    orders = s["orders"].where(F.col("status") != "cancelled").withWatermark("order_time", "2 minutes")
    payments = s["payments"].withWatermark("payment_time", "2 minutes")
    bound = "10 MINUTES" if change == "time_bound" else "5 MINUTES"
    keys = "o.order_id = p.order_id" + (" AND o.amount = p.payment_amount" if change == "key_added" else "")
    condition = (
        f"{keys} AND o.order_time >= p.payment_time - INTERVAL {bound} AND o.order_time <= p.payment_time + INTERVAL {bound}"
    )
    how = "left_outer" if change == "join_type" else "inner"
    joined = orders.alias("o").join(payments.alias("p"), F.expr(condition), how)
    return joined.select("o.*", "p.payment_id", "p.payment_amount", "p.payment_time")


def _session(s: dict[str, Any], change: str) -> Any:
    from pyspark.sql import functions as F

    events = s["events"].withWatermark("event_time", "30 minutes")
    if change == "filter_added":
        events = events.where(F.col("kind") != "view")
    aggs = [F.count("*").alias("event_count" if change == "aggregate_renamed" else "events")]
    aggs += [F.sum("value").alias("total")] if change == "aggregate_added" else []
    return events.groupBy(F.col("user_id"), F.session_window("event_time", "15 minutes")).agg(*aggs)


def _pandas_state(s: dict[str, Any], change: str) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    widened = change == "state_field_added"

    def count_user(key: tuple[Any, ...], pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        import pandas as pd

        if state.hasTimedOut:
            state.remove()
            return
        got = state.get if state.exists else None
        count = int(got[0]) if got else 0
        for pdf in pdfs:
            count += len(pdf)
        state.update((count, 0, 0) if widened else ((float(count), 0) if change == "state_type_changed" else (count, 0)))
        if change == "timeout_changed":
            state.setTimeoutDuration(60_000)
        else:
            state.setTimeoutTimestamp(state.getCurrentWatermarkMs() + 600_000)
        yield pd.DataFrame({"user_id": [key[0]], "events": [count]})

    state_type = {
        "state_field_added": "events LONG, last_event_ms LONG, extra LONG",
        "state_type_changed": "events DOUBLE, last_event_ms LONG",
    }.get(change, "events LONG, last_event_ms LONG")
    timeout = GroupStateTimeout.ProcessingTimeTimeout if change == "timeout_changed" else GroupStateTimeout.EventTimeTimeout
    return (
        s["events"]
        .withWatermark("event_time", "5 minutes")
        .groupBy("user_id")
        .applyInPandasWithState(count_user, "user_id STRING, events LONG", state_type, "update", timeout)
    )


def _tws(s: dict[str, Any], change: str) -> Any:
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    count_type = DoubleType() if change == "variable_type_changed" else LongType()
    count_fields = [StructField("n", count_type)]
    if change == "avro_field_added":
        count_fields.append(StructField("last_kind", StringType(), True))
    if change == "avro_field_renamed":
        count_fields = [StructField("total", count_type)]

    class Counter(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            self.count = handle.getValueState("count", StructType(count_fields))
            if change == "variable_added":
                self.seen = handle.getValueState("seen", StructType([StructField("last", StringType())]))

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
            n = self.count.get()[0] if self.count.exists() else 0
            for pdf in rows:
                n += len(pdf)
            value: tuple[Any, ...] = (n,) if len(count_fields) == 1 else (n, "x")
            self.count.update(value)
            yield pd.DataFrame({"user_id": [key[0]], "events": [int(n)]})

        def close(self) -> None:
            pass

    return (
        s["events"]
        .withWatermark("event_time", "5 minutes")
        .groupBy("user_id")
        .transformWithStateInPandas(
            statefulProcessor=Counter(),
            outputStructType="user_id STRING, events LONG",
            outputMode="Update",
            timeMode="ProcessingTime" if change == "time_mode" else "None",
        )
    )


QUERIES: dict[str, tuple[Callable[[dict[str, Any], str], Any], list[str], str]] = {
    # query -> (build, its sources, output mode)
    "windowed_agg": (_windowed_agg, ["events"], "update"),
    "windowed_flat": (_windowed_flat, ["events"], "append"),
    "dedup": (_dedup, ["events"], "append"),
    "join": (_join, ["orders", "payments"], "append"),
    "session": (_session, ["events"], "append"),
    "pandas_state": (_pandas_state, ["events"], "update"),
    "tws": (_tws, ["events"], "update"),
    "tws_avro": (_tws, ["events"], "update"),  # its state encoded in Avro from the first run
}


def confs(query: str, change: str) -> dict[str, str]:
    """The session confs the job runs with."""
    out = {"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.stateStore.providerClass": HDFS}
    if query.startswith("tws"):
        out["spark.sql.streaming.stateStore.providerClass"] = ROCKSDB
    if query == "tws_avro":
        out["spark.sql.streaming.stateStore.encodingFormat"] = "avro"
    if change == "shuffle_partitions":
        out["spark.sql.shuffle.partitions"] = "5"
    return out


def build(spark: Any, query: str, change: str, inputs: Path) -> tuple[Any, str]:
    fn, sources, mode = QUERIES[query]
    streams = {
        name: spark.readStream.schema(SOURCES[name]).option("maxFilesPerTrigger", 1).json(str(inputs / name)) for name in sources
    }
    return fn(streams, change), mode


def start(spark: Any, query: str, change: str, inputs: Path, checkpoint: Path, output: Path, sink: str = "files") -> Any:
    df, mode = build(spark, query, change, inputs)
    writer = df.writeStream.outputMode(mode).option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    if sink == "foreach_batch":

        def each(batch_df: Any, batch_id: int) -> None:
            output.mkdir(parents=True, exist_ok=True)
            (output / f"batch-{batch_id}").write_text(str(batch_df.count()))

        return writer.foreachBatch(each).start()
    if mode != "append":
        return writer.format("memory").queryName(f"out_{query}_{abs(hash(str(output))) % 10_000}").start()
    return writer.format("parquet").option("path", str(output)).start()


def session(name: str, conf: dict[str, str], event_log: str | None = None) -> Any:
    """The job's Spark session: its confs, and its event log written into ``event_log`` if given."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName(name)
    builder = builder.config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
    for k, v in conf.items():
        builder = builder.config(k, v)
    if event_log:
        builder = builder.config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", event_log)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--query", choices=sorted(QUERIES), required=True)
    ap.add_argument("--change", default="none")
    ap.add_argument("--input", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--sink", default="files", choices=["files", "foreach_batch"])
    ap.add_argument("--event-log", default=None, help="write the application's Spark event log into this folder")
    args = ap.parse_args(argv)
    spark = session(f"changed-job-{args.query}-{args.change}", confs(args.query, args.change), args.event_log)
    # a table the job creates before it starts: a write preflight must not make
    spark.range(1).write.mode("overwrite").parquet(str(Path(args.output) / "_job_setup"))
    q = start(spark, args.query, args.change, Path(args.input), Path(args.checkpoint), Path(args.output), args.sink)
    q.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
