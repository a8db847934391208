"""``SparkStats``: the figures health needs from state, reduced inside Spark (only counts, key ids
and a few aggregates come back). ``spark_io.readers.native.stats.NativeStats`` gives the same figures from
the native reader; ``spark_io.gather.checkup`` asks whichever the engine choice picks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from statelens.analysis.core.model import JOIN_ROW_FIELDS, CheckpointInfo, StateSource
from statelens.spark_io.readers.state_reader import change_frame, state_frame, to_arrow
from statelens.spark_io.runtime import session


@dataclass
class EvictionStats:
    key_has_event_time: bool = False
    oldest_ms: int | None = None  # the oldest event time in state (the value's, else the key's)
    windows_past: int = 0  # windows whose end the watermark has passed (when asked)
    timeout_set: bool = False  # a group state timeout is set


class StateStats(Protocol):
    def skew_counts(self, src: StateSource, batch: int) -> tuple[dict[int, int], list[tuple[str, int]]]:
        """Rows per partition, and the ten keys with most rows (key as Spark's to_json, a join's
        index left out), most first, ties by the key's values."""
        ...

    def key_ids(self, src: StateSource, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """(key id, partition) of every row at the batch; a key id is the same for equal keys."""
        ...

    def change_ids(self, src: StateSource, start: int, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(batch, is delete, key id, partition) of every change-feed row, in feed order."""
        ...

    def expect_eviction(self, src: StateSource, batch: int) -> None:
        """``eviction`` of ``src`` at ``batch`` will be asked after ``change_ids``: a reader that can make
        that state from the feed's records as it walks them may (the answer is the same)."""
        ...

    def eviction(self, src: StateSource, batch: int, watermark_ms: int | None) -> EvictionStats: ...


def _identity(columns: list[str]) -> list[Any]:
    """What tells two rows apart as one state entry: the key, a map state's user key, a list
    state's element and its occurrence (a list may hold one element twice)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if "list_element" in columns:
        row = [F.to_json("key"), F.to_json("list_element")]
        return [*row, F.row_number().over(Window.partitionBy(*row).orderBy(F.lit(1)))]
    return [F.to_json("key")] + ([F.to_json("user_map_key")] if "user_map_key" in columns else [])


class SparkStats:
    engine = "spark"

    def __init__(self, info: CheckpointInfo) -> None:
        self.info = info
        session.get_spark()  # column expressions need a session

    def _state(self, src: StateSource, batch: int) -> Any:
        return state_frame(self.info.path, src, {"batchId": str(batch)}, f"{src.describe()} at batch {batch}")

    def skew_counts(self, src: StateSource, batch: int) -> tuple[dict[int, int], list[tuple[str, int]]]:
        from pyspark.sql import functions as F

        df = self._state(src, batch)
        what = f"{src.describe()} at batch {batch}"
        per_part = to_arrow(df.groupBy("partition_id").count(), what).to_pylist()
        key = F.col("key")
        extra = [f for f in getattr(df.schema["key"].dataType, "fieldNames", lambda: [])() if f in JOIN_ROW_FIELDS]
        if extra:
            key = key.dropFields(*extra)  # a join key holds one row per index or event time: count rows per join key
        counted = df.groupBy(key.alias("k")).count().orderBy(F.desc("count"), F.col("k").asc_nulls_first()).limit(10)
        top = to_arrow(counted.select(F.to_json("k").alias("key"), "count"), what).to_pylist()
        return {r["partition_id"]: r["count"] for r in per_part}, [(r["key"], r["count"]) for r in top]

    def key_ids(self, src: StateSource, batch: int) -> tuple[np.ndarray, np.ndarray]:
        from pyspark.sql import functions as F

        df = self._state(src, batch)
        t = to_arrow(df.select(F.xxhash64(*_identity(df.columns)).alias("k"), "partition_id"), src.describe())
        return t.column("k").to_numpy(), t.column("partition_id").to_numpy().astype(np.int64)

    def expect_eviction(self, src: StateSource, batch: int) -> None:
        pass  # Spark reads each state as asked

    def change_ids(self, src: StateSource, start: int, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        from pyspark.sql import functions as F

        what = f"the change feed of {src.describe()}"
        feed = change_frame(self.info, src, start, end, what)
        slim = feed.select(
            "batch_id",
            (F.col("change_type") == "delete").alias("d"),
            F.xxhash64(*_identity(feed.columns)).alias("k"),
            "partition_id",
        )
        t = to_arrow(slim, what)
        return (
            t.column("batch_id").to_numpy().astype(np.int64),
            t.column("d").to_numpy(zero_copy_only=False).astype(np.int64),
            t.column("k").to_numpy(),
            t.column("partition_id").to_numpy().astype(np.int64),
        )

    def eviction(self, src: StateSource, batch: int, watermark_ms: int | None) -> EvictionStats:
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType, TimestampNTZType, TimestampType

        df = self._state(src, batch)

        def times(struct_col: str) -> list[str]:
            t = df.schema[struct_col].dataType if struct_col in df.columns else None
            if not isinstance(t, StructType):
                return []
            out = [f"{struct_col}.{f.name}" for f in t.fields if isinstance(f.dataType, (TimestampType, TimestampNTZType))]
            out += [
                f"{struct_col}.{f.name}.end"
                for f in t.fields
                if isinstance(f.dataType, StructType) and "end" in f.dataType.fieldNames()
            ]
            return out

        key_times, value_times = times("key"), times("value")
        out = EvictionStats(key_has_event_time=bool(key_times))
        aggs = []
        event_col = next(iter(value_times or key_times), None)
        if event_col:
            aggs.append(F.min(F.col(event_col)).alias("oldest"))
        window_end = next((c for c in key_times if c.endswith(".end")), None)
        if watermark_ms is not None and window_end:
            aggs.append(F.sum((F.unix_millis(F.col(window_end)) <= F.lit(watermark_ms)).cast("int")).alias("past"))
        value_type = df.schema["value"].dataType if "value" in df.columns else None
        if isinstance(value_type, StructType) and "timeoutTimestamp" in value_type.fieldNames():
            aggs.append(F.max("value.timeoutTimestamp").alias("timeout"))
        if aggs:
            from statelens.analysis.core.key_format import to_ms

            row = to_arrow(df.agg(*aggs), f"{src.describe()} at batch {batch}").to_pylist()[0]
            oldest = row.get("oldest")
            out.oldest_ms = to_ms(oldest) if oldest is not None else None
            out.windows_past = int(row.get("past") or 0)
            out.timeout_set = bool((row.get("timeout") or 0) > 0)
        return out
