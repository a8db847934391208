# spark: the pipeline's session, which spark-pipelines gives each file
# ruff: noqa: F821
from pyspark import pipelines as dp


@dp.table(format="parquet")
def silver():
    return spark.readStream.table("bronze_watermarked").where("amount > 0").dropDuplicatesWithinWatermark(["order_id"])
