# spark: the pipeline's session, which spark-pipelines gives each file
# ruff: noqa: F821
from pyspark import pipelines as dp


@dp.table(format="parquet")
def bronze():
    return (
        spark.readStream.format("json")
        .schema("order_id STRING, customer STRING, amount DOUBLE, ts TIMESTAMP")
        .load("/tmp/statelens-sdp/orders/inputs/orders")
    )
