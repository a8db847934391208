"""``SparkState``: what 'why is key X missing' needs, read through Spark's State Data Source (the
``analysis.state_access.StateAccess`` the diagnoses ask; the native reader's is
``native.access.NativeState``).

Keys never become SQL text: they are bound as literals through Spark's Column API (``isin``), so
quotes, backslashes or SQL fragments are just characters of a key. Filters run inside Spark; only
matching rows (and near-miss keys) come back.
"""

from __future__ import annotations

from typing import Any

from statelens.analysis.core.key_columns import columns_equal_to_key
from statelens.analysis.core.model import JOIN_ROW_FIELDS, CheckpointInfo, StateSource, operator_of
from statelens.analysis.core.near_miss import NearSeen, digits, normalize
from statelens.analysis.core.state_access import WINDOW_KEYS, KeyQuery, near_seen
from statelens.spark_io.readers.state_reader import change_frame, has_change_feed, state_frame, to_arrow
from statelens.spark_io.runtime import engine_choice

KEY_COLUMN_ROWS = 10_000  # rows a join side's key columns are checked on, through Spark


def _key_filter(key_field: str, keys: list[str], near: bool, typed: list[Any] | None = None) -> tuple[Any, Any]:
    """(the key field as text, the condition): exact text, or the typed value, or (near) look-alikes."""
    from pyspark.sql import functions as F

    raw = F.col("key").getField(key_field)
    k = raw.cast("string")
    cond = k.isin(keys)
    if typed:
        cond = cond | raw.isin(typed)
    if near:
        norms = sorted({normalize(x) for x in keys if normalize(x)})
        digit_keys = sorted({digits(x) for x in keys if len(digits(x)) >= 2})
        if norms:
            cond = cond | F.lower(F.regexp_replace(k, "[^0-9A-Za-z]", "")).isin(norms)
        if digit_keys:
            cond = cond | F.regexp_replace(k, "[^0-9]", "").isin(digit_keys)
    return k, cond


class SparkState:
    """StateAccess over one checkpoint with Spark's State Data Source (filters run in Spark)."""

    engine = engine_choice.SPARK

    def __init__(self, info: CheckpointInfo, prune: bool = True) -> None:
        self.info = info
        self.prune = prune  # read only the keys' partitions where that can be computed
        self._snapshots: dict[tuple[int, str, int], list[int]] | None = None
        self._placed: dict[tuple[str, tuple[Any, ...], int], list[int]] = {}  # the keys' partitions, once per batch count

    def _frame(self, source: StateSource, opts: dict[str, str], what: str) -> Any:
        return state_frame(self.info.path, source, opts, what)

    def _state(self, source: StateSource, batch: int) -> Any:
        return self._frame(source, {"batchId": str(batch)}, f"{source.describe()} at batch {batch}")

    def key_fields(self, source: StateSource, batch: int) -> list[tuple[str, str]]:
        from pyspark.sql.types import StructType

        key_type = self._state(source, batch).schema["key"].dataType
        if not isinstance(key_type, StructType):
            return []
        return [
            (f.name, f.dataType.simpleString())
            for f in key_type.fields
            if f.name not in JOIN_ROW_FIELDS and not isinstance(f.dataType, StructType)
        ]

    def windowed(self, source: StateSource, batch: int) -> bool:
        from pyspark.sql.types import StructType

        key_type = self._state(source, batch).schema["key"].dataType
        return isinstance(key_type, StructType) and any(
            f.name in WINDOW_KEYS and isinstance(f.dataType, StructType) for f in key_type.fields
        )

    def value_fields(self, source: StateSource, batch: int) -> list[str]:
        from pyspark.sql.types import StructType

        df = self._state(source, batch)
        t = df.schema["value"].dataType if "value" in df.columns else None
        return t.fieldNames() if isinstance(t, StructType) else []

    def key_columns(self, source: StateSource, batch: int, keys: tuple[str, ...] = ()) -> dict[str, str]:
        """Checked on the first rows Spark returns (a full scan would cost the answer a pass)."""
        df = self._state(source, batch)
        if "value" not in df.columns:
            return {}
        what = f"{source.describe()} at batch {batch}"
        return columns_equal_to_key(to_arrow(df.select("key", "value").limit(KEY_COLUMN_ROWS), what))

    def _matching(self, df: Any, query: KeyQuery, what: str) -> list[dict[str, Any]]:
        from pyspark.sql import functions as F

        _, cond = _key_filter(query.key_field, list(query.keys), near=False, typed=[v for _, v in query.typed])
        return to_arrow(df.where(cond).withColumn("_raw", F.col("key").getField(query.key_field)), what).to_pylist()

    def rows(self, source: StateSource, batch: int, query: KeyQuery) -> list[dict[str, Any]]:
        what = f"{source.describe()} at batch {batch}"
        full = self._state(source, batch)
        return self._matching(self._partitions_frame(source, batch, query, full) or full, query, what)

    def _partitions_frame(self, source: StateSource, batch: int, query: KeyQuery, full: Any) -> Any | None:
        """Only the partitions that can hold the keys, or None (then every partition is read: also
        when the keys are in every one).

        Spark hash-partitions state by the key columns: partition = pmod(hash(key), numPartitions),
        with Spark's own Murmur3 ``hash``. That is computable when the key is the one field the user
        typed; each partition is then read from its latest snapshot at or before the batch
        (``snapshotStartBatchId`` + ``snapshotPartitionId``) and the deltas after it."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        if not self.prune or not source.store_name or self.info.checkpoint_format_version != 1:
            return None
        key_type = full.schema["key"].dataType
        fields = [f for f in key_type.fields if f.name not in JOIN_ROW_FIELDS] if isinstance(key_type, StructType) else []
        if len(fields) != 1 or fields[0].name != query.key_field:
            return None
        spark_type = fields[0].dataType.simpleString()
        typed = dict(query.typed)
        values = [k if spark_type == "string" else typed.get(k) for k in query.keys]
        store = next((s for s in operator_of(self.info, source.operator_id).stores if s.store_name == source.store_name), None)
        n = self.info.partitions_at(batch) or (store.num_partitions if store else 0)
        if not n or any(v is None for v in values):
            return None
        placed = (spark_type, tuple(values), n)
        if placed not in self._placed:  # a history asks the same keys at every batch: one Spark job
            hashed = full.sparkSession.range(1).select(
                *[F.pmod(F.hash(F.lit(v).cast(spark_type)), F.lit(n)).alias(f"p{i}") for i, v in enumerate(values)]
            )
            self._placed[placed] = sorted(set(to_arrow(hashed, "the keys' partitions").to_pylist()[0].values()))
        partitions = self._placed[placed]
        if len(partitions) >= n:
            return None  # the keys are in every partition: the plain read is the same rows in one frame
        frames = []
        for p in partitions:
            snapshot = self._latest_snapshot(source, p, batch + 1)
            if snapshot is None:
                return None
            opts = {"batchId": str(batch), "snapshotStartBatchId": str(snapshot - 1), "snapshotPartitionId": str(p)}
            frames.append(self._frame(source, opts, f"{source.describe()} partition {p} at batch {batch}"))
        out = frames[0]
        for f in frames[1:]:
            out = out.unionByName(f)
        return out

    def _latest_snapshot(self, source: StateSource, partition: int, version: int) -> int | None:
        """The newest snapshot version (.snapshot / .zip) at or below ``version`` for one store partition."""
        if self._snapshots is None:
            from statelens.spark_io.logs.checkpoint import list_state_files

            self._snapshots = {}
            for f in list_state_files(self.info.path):
                if f.kind in ("snapshot", "zip") and f.version is not None:
                    self._snapshots.setdefault((f.operator_id, f.store_name, f.partition_id), []).append(f.version)
        folder = operator_of(self.info, source.operator_id).folder_of(source.store_name)
        found = [v for v in self._snapshots.get((source.operator_id, folder, partition), []) if v <= version]
        return max(found) if found else None

    def _feed(self, source: StateSource, start: int, end: int) -> tuple[Any, str]:
        what = f"the change feed of {source.describe()} for batches {start}–{end}"
        return change_frame(self.info, source, start, end, what), what

    def changes(self, source: StateSource, start: int, end: int, query: KeyQuery) -> list[dict[str, Any]]:
        df, what = self._feed(source, start, end)
        return self._matching(df, query, what)

    def near_keys(self, source: StateSource, batch: int, key_field: str, keys: list[str]) -> list[str]:
        k, cond = _key_filter(key_field, keys, near=True)
        df = self._state(source, batch).where(cond).select(k.alias("_key")).distinct()
        return [r["_key"] for r in to_arrow(df, source.describe()).to_pylist() if r["_key"]]

    def near_history(self, source: StateSource, start: int, end: int, key_field: str, keys: list[str]) -> list[NearSeen]:
        k, cond = _key_filter(key_field, keys, near=True)
        df, what = self._feed(source, start, end)
        rows = to_arrow(df.where(cond).select("batch_id", "change_type", k.alias("_key")), what).to_pylist()
        return near_seen(((r["batch_id"], r["change_type"], r["_key"]) for r in rows), keys)

    def eviction_horizon(self, source: StateSource, start: int, end: int, watermarks: dict[int, int]) -> tuple[int, int] | None:
        """``why_missing.eviction_horizon`` computed inside Spark: for every delete, the event time of the
        row's previous update (a window over the key), against the watermarks of its batch and the one
        before; only the tightest bounds come back."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        df, what = self._feed(source, start, end)
        value_type = df.schema["value"].dataType
        time_field = next((f.name for f in value_type.fields if f.dataType.typeName().startswith("timestamp")), None)
        if time_field is None or not watermarks:
            return None
        spark = df.sparkSession
        marks = spark.createDataFrame(
            [(b, w, watermarks.get(b - 1, 0)) for b, w in watermarks.items()], "batch_id LONG, wm LONG, wm_prev LONG"
        )
        w = Window.partitionBy("k").orderBy("batch_id", "d")
        rows = (
            df.select(
                F.xxhash64(F.to_json("key")).alias("k"),
                F.col("batch_id").cast("long").alias("batch_id"),
                (F.col("change_type") == "delete").cast("int").alias("d"),
                F.unix_millis(F.col("value").getField(time_field)).alias("t"),
            )
            .withColumn("prev_t", F.lag("t").over(w))
            .withColumn("prev_d", F.lag("d").over(w))
            .where("d = 1 AND prev_d = 0 AND prev_t IS NOT NULL")
            .join(marks, "batch_id")
            .agg(F.max(F.col("wm_prev") - F.col("prev_t")).alias("lo"), F.min(F.col("wm") - F.col("prev_t")).alias("hi"))
        )
        (r,) = to_arrow(rows, what).to_pylist()
        if r["lo"] is None or r["hi"] is None or r["lo"] > r["hi"]:
            return None
        return int(r["lo"]), int(r["hi"])

    def has_change_feed(self, operator_id: int) -> bool:
        return has_change_feed(self.info, operator_id)
