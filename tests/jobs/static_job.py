"""A stream joined with a static table read from one file, as users write it: CSV orders (each with a
country) joined with ``spark.read.csv(".../countries.csv")`` (country -> region), orders per region
in 10-minute windows into a Parquet file sink, with the Spark event log. The region exists only in
the static table; the order ``ord-zz`` has a country the table does not hold.

    python static_job.py BASE

writes BASE/in/orders/part-0000N.csv, BASE/ref/countries.csv, BASE/cp, BASE/sink, BASE/logs.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path

base = Path(sys.argv[1])
orders, ref = base / "in" / "orders", base / "ref"
orders.mkdir(parents=True, exist_ok=True)
ref.mkdir(parents=True, exist_ok=True)
(base / "logs").mkdir(exist_ok=True)
(ref / "countries.csv").write_text("country,region\nDE,EMEA\nFR,EMEA\nUS,AMER\nJP,APAC\n")
countries = ["DE", "US", "JP", "FR"]
start = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
for n in range(3):  # a file a batch, 30 minutes apart: each batch closes the windows before it
    at = [(start + dt.timedelta(minutes=30 * n + i)).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(4)]
    rows = [f"ord-{n}-{i},{countries[(n + i) % 4]},{10 + i},{at[i]}" for i in range(4)]
    if n == 0:
        rows.append("ord-zz,ZZ,99,2026-11-01T00:01:00Z")  # a country the static table does not hold
    f = orders / f"part-{n:05d}.csv"
    f.write_text("order_id,country,amount,ts\n" + "\n".join(rows) + "\n")
    os.utime(f, (1_790_000_000 + n, 1_790_000_000 + n))

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

spark = (
    SparkSession.builder.master("local[2]")
    .appName("static-job")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.sql.session.timeZone", "UTC")
    .config("spark.eventLog.enabled", "true")
    .config("spark.eventLog.dir", f"file://{base / 'logs'}")
    .getOrCreate()
)
table = spark.read.option("header", "true").csv(str(ref / "countries.csv"))
stream = (
    spark.readStream.schema("order_id STRING, country STRING, amount LONG, ts TIMESTAMP")
    .option("header", "true")
    .option("maxFilesPerTrigger", "1")
    .csv(str(orders))
)
per_region = (
    stream.withWatermark("ts", "10 minutes")
    .join(table, "country")
    .groupBy(F.window("ts", "10 minutes"), "region")
    .agg(F.count("*").alias("orders"))
)
query = (
    per_region.writeStream.format("parquet")
    .option("path", str(base / "sink"))
    .option("checkpointLocation", str(base / "cp"))
    .outputMode("append")
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
spark.stop()
