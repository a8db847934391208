"""A team's real streaming query, with values marked so they can be searched for anywhere another
team should never see them: CSV orders (every order id and customer holds MARK) -> a 10-minute
watermark -> orders and amounts per customer in 5-minute windows -> a Parquet file sink, on the
HDFS state store, with its Spark event log. Three input files, one per batch.

    python tenant_job.py BASE MARK

writes BASE/inputs/orders/part-0000N.csv, BASE/orders (the checkpoint), BASE/sink, BASE/logs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

base, mark = Path(sys.argv[1]), sys.argv[2]
inputs = base / "inputs" / "orders"
inputs.mkdir(parents=True, exist_ok=True)
(base / "logs").mkdir(parents=True, exist_ok=True)
for n, minute in enumerate((0, 20, 40)):
    rows = [f"{mark}-ord-{n}-{i},{mark}-cust-{i % 3},{10 * (i + 1)},2026-11-01T00:{minute + i:02d}:00Z" for i in range(4)]
    f = inputs / f"part-{n:05d}.csv"
    f.write_text("order_id,customer,amount,ts\n" + "\n".join(rows) + "\n")
    os.utime(f, (1_790_000_000 + n, 1_790_000_000 + n))  # the file source reads in modification order

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

spark = (
    SparkSession.builder.master("local[2]")
    .appName("tenant-" + mark)
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "4")
    .config("spark.sql.session.timeZone", "UTC")
    .config("spark.eventLog.enabled", "true")
    .config("spark.eventLog.dir", f"file://{base / 'logs'}")
    .getOrCreate()
)
orders = (
    spark.readStream.schema("order_id STRING, customer STRING, amount LONG, ts TIMESTAMP")
    .option("header", "true")
    .option("maxFilesPerTrigger", "1")
    .csv(str(inputs))
)
totals = (
    orders.withWatermark("ts", "10 minutes")
    .groupBy(F.window("ts", "5 minutes"), "customer")
    .agg(F.count("*").alias("orders"), F.sum("amount").alias("amount"))
)
query = (
    totals.writeStream.format("parquet")
    .option("path", str(base / "sink"))
    .option("checkpointLocation", str(base / "orders"))
    .outputMode("append")
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
spark.stop()
