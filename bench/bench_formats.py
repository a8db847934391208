"""Avro-encoded and row-checksummed state against the same state in plain UnsafeRows (issue: decode
within 1.5x). Four checkpoints written by real queries over the same input (cached in bench/data/):

* ``fmt_agg_plain`` / ``fmt_agg_checksums``: count and sum per key, RocksDB, 200,000 keys, without
  and with ``spark.sql.streaming.stateStore.rowChecksum.enabled``;
* ``fmt_tws_plain`` / ``fmt_tws_avro``: transformWithStateInPandas keeping a value state per key,
  100,000 keys, ``encodingFormat`` unsaferow and avro.

Each read is a cold ``NativeReader`` reading the whole store at the last batch (the path the app's
Load takes); medians of 5, in one run, with the ratio to the plain twin.

    python bench/bench_formats.py
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from big_checkpoints import DATA, ROCKSDB, spark_session  # noqa: E402
from timing import median_seconds  # noqa: E402

AGG_KEYS = 200_000
TWS_KEYS = 100_000


def _inputs(tmp: str, keys: int, batches: int = 4) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    per = keys // batches
    for b in range(batches):
        n = range(b * per, (b + 1) * per)
        path = Path(tmp) / f"part-{b:05d}.parquet"
        pq.write_table(pa.table({"user_id": [f"user-{i}" for i in n], "value": [i % 13 for i in n]}), path)
        os.utime(path, (1_767_225_600 + b, 1_767_225_600 + b))


def _run(dest: Path, keys: int, conf: dict[str, str], build: Any) -> Path:
    if (dest / "commits" / "3").exists():
        return dest
    spark = spark_session()
    shutil.rmtree(dest, ignore_errors=True)
    base = {"spark.sql.shuffle.partitions": "8", "spark.sql.streaming.stateStore.providerClass": ROCKSDB}
    with tempfile.TemporaryDirectory(prefix="statelens-bench-") as tmp:
        _inputs(tmp, keys)
        for k, v in {**base, **conf}.items():
            spark.conf.set(k, v)
        events = spark.readStream.schema("user_id STRING, value BIGINT").option("maxFilesPerTrigger", 1).parquet(tmp)
        q = build(events).writeStream.format("noop").outputMode("update").option("checkpointLocation", str(dest))
        q.trigger(availableNow=True).start().awaitTermination()
        for k in {**base, **conf}:
            spark.conf.unset(k)
    return dest


def _agg(events: Any) -> Any:
    return events.groupBy("user_id").agg({"value": "sum", "*": "count"})


def _tws(events: Any) -> Any:
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
    from pyspark.sql.types import LongType, StructField, StructType

    class Total(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            self.total = handle.getValueState("total", StructType([StructField("n", LongType())]))

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
            n = self.total.get()[0] if self.total.exists() else 0
            n += sum(len(p) for p in rows)
            self.total.update((n,))
            yield pd.DataFrame({"user_id": [key[0]], "n": [n]})

        def close(self) -> None:
            pass

    return events.groupBy("user_id").transformWithStateInPandas(Total(), "user_id STRING, n LONG", "update", "None")


def main() -> int:
    from statelens.analysis.core.model import StateSource
    from statelens.spark_io.logs.checkpoint import read_checkpoint
    from statelens.spark_io.readers.native.reader import NativeReader

    pairs = [
        (
            "aggregation, row checksums",
            _run(DATA / "fmt_agg_plain", AGG_KEYS, {}, _agg),
            _run(DATA / "fmt_agg_checksums", AGG_KEYS, {"spark.sql.streaming.stateStore.rowChecksum.enabled": "true"}, _agg),
            StateSource(0),
        ),
        (
            "transformWithState value state, Avro",
            _run(DATA / "fmt_tws_plain", TWS_KEYS, {}, _tws),
            _run(DATA / "fmt_tws_avro", TWS_KEYS, {"spark.sql.streaming.stateStore.encodingFormat": "avro"}, _tws),
            StateSource(0, state_var="total"),
        ),
    ]
    print(f"{'what':40} {'plain s':>8} {'format s':>9} {'ratio':>6} rows")
    for what, plain, other, src in pairs:
        infos = [read_checkpoint(str(p)) for p in (plain, other)]
        last = infos[0].committed_batches[-1].batch_id
        rows = [NativeReader(i).state(src, last).num_rows for i in infos]
        assert rows[0] == rows[1], rows
        t_plain, t_other = (median_seconds(lambda i=i, s=src, b=last: NativeReader(i).state(s, b), 5) for i in infos)
        print(f"{what:40} {t_plain:8.3f} {t_other:9.3f} {t_other / t_plain:6.2f} {rows[0]:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
