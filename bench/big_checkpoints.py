"""Big checkpoints for the benchmarks, written by real streaming queries (cached in bench/data/).

``join_1m``: an orders ⋈ payments inner join (RocksDB provider, changelog checkpointing,
8 partitions) over 40 micro-batches of 25,000 orders each: 1,000,000 order keys on the left,
payments for every other order on the right (matched), a 2 hour watermark and a ±2 hour time
range, so nothing is evicted during the 40 event-time minutes the data spans.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def spark_session():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(HERE.parent))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from statelens.spark_io.runtime.session import get_spark

    return get_spark()


def join_1m(batches: int = 40, per_batch: int = 25_000) -> Path:
    dest = DATA / f"join_{batches * per_batch}"
    if (dest / "commits" / str(batches - 1)).exists():
        return dest
    import pyarrow as pa
    import pyarrow.parquet as pq

    spark = spark_session()
    from pyspark.sql.functions import expr

    shutil.rmtree(dest, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="statelens-bench-") as tmp:
        for side in ("orders", "payments"):
            (Path(tmp) / side).mkdir()
        for b in range(batches):
            n = range(b * per_batch, (b + 1) * per_batch)
            t = [T0 + dt.timedelta(minutes=b, microseconds=i) for i in range(per_batch)]
            orders = pa.table({"order_id": [f"ord-{i}" for i in n], "amount": [float(i % 97) for i in n], "order_time": t})
            paid = [j for j in range(per_batch) if (b * per_batch + j) % 2 == 0]
            payments = pa.table({"order_id": [f"ord-{b * per_batch + j}" for j in paid], "payment_time": [t[j] for j in paid]})
            for side, table in (("orders", orders), ("payments", payments)):
                path = Path(tmp) / side / f"part-{b:05d}.parquet"
                pq.write_table(table, path)
                os.utime(path, (1_767_225_600 + b, 1_767_225_600 + b))
        conf = {
            "spark.sql.shuffle.partitions": "8",
            "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        }
        for k, v in conf.items():
            spark.conf.set(k, v)

        def stream(side: str, schema: str, time_col: str):  # type: ignore[no-untyped-def]
            reader = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
            return reader.parquet(f"{tmp}/{side}").withWatermark(time_col, "2 hours")

        o = stream("orders", "order_id STRING, amount DOUBLE, order_time TIMESTAMP", "order_time")
        p = stream("payments", "order_id STRING, payment_time TIMESTAMP", "payment_time")
        joined = o.alias("o").join(
            p.alias("p"),
            expr(
                "o.order_id = p.order_id AND o.order_time >= p.payment_time - INTERVAL 2 HOURS "
                "AND o.order_time <= p.payment_time + INTERVAL 2 HOURS"
            ),
        )
        q = joined.writeStream.format("noop").option("checkpointLocation", str(dest)).trigger(availableNow=True).start()
        q.awaitTermination()
        for k in conf:
            spark.conf.unset(k)
    return dest


def _aggregation(dest: Path, batches: int, per_batch: int, conf: dict[str, str]) -> Path:
    """Count and sum per key with no watermark over ever-new keys (``per_batch`` new keys a batch,
    one Parquet file each, in order), written by a streaming query with ``conf`` set for it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    spark = spark_session()
    shutil.rmtree(dest, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="statelens-bench-") as tmp:
        for b in range(batches):
            n = range(b * per_batch, (b + 1) * per_batch)
            path = Path(tmp) / f"part-{b:05d}.parquet"
            pq.write_table(pa.table({"user_id": [f"user-{i}" for i in n], "value": [i % 13 for i in n]}), path)
            os.utime(path, (1_767_225_600 + b, 1_767_225_600 + b))
        for k, v in conf.items():
            spark.conf.set(k, v)
        events = spark.readStream.schema("user_id STRING, value BIGINT").option("maxFilesPerTrigger", 1).parquet(tmp)
        counts = events.groupBy("user_id").agg({"value": "sum", "*": "count"})
        q = (
            counts.writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(dest))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        for k in conf:
            spark.conf.unset(k)
    return dest


def agg_1m(batches: int = 4, per_batch: int = 250_000) -> Path:
    """``agg_1m``: count per key with no watermark over ever-new keys: 1,000,000 state keys."""
    dest = DATA / f"agg_{batches * per_batch}"
    if (dest / "commits" / str(batches - 1)).exists():
        return dest
    return _aggregation(dest, batches, per_batch, {"spark.sql.shuffle.partitions": "8"})


HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def agg_files(batches: int = 64, per_batch: int = 2_000) -> Path:
    """``agg_files``: count and sum per key over ever-new keys on the HDFS store, 16 partitions, 64
    batches: over a thousand state files (a delta and its checksum per partition and batch, and
    the snapshots), 128,000 keys."""
    dest = DATA / f"agg_files_{batches}"
    if (dest / "commits" / str(batches - 1)).exists():
        return dest
    return _aggregation(dest, batches, per_batch, {"spark.sql.shuffle.partitions": "16"})


def agg_5m(provider: str = "rocksdb", batches: int = 20, per_batch: int = 250_000) -> Path:
    """``agg_5m_rocksdb`` / ``agg_5m_hdfs``: count and sum per key with no watermark over ever-new
    keys, 8 partitions, 20 batches of 250,000 new keys: 5,000,000 state keys. RocksDB with
    changelog checkpointing (a snapshot every 10 versions), HDFS with its deltas and snapshots."""
    dest = DATA / f"agg_{batches * per_batch // 1_000_000}m_{provider}"
    if (dest / "commits" / str(batches - 1)).exists():
        return dest
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--driver-memory 6g pyspark-shell")  # the HDFS provider holds 5M keys in the JVM
    conf = {
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB if provider == "rocksdb" else HDFS,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "10",
    }
    return _aggregation(dest, batches, per_batch, conf)


if __name__ == "__main__":
    print(join_1m())
    print(agg_1m())
    print(agg_5m("rocksdb"))
    print(agg_5m("hdfs"))
