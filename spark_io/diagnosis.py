"""``SparkState``: what 'why is key X missing' needs, read through Spark's State Data Source.

It implements ``analysis.state_access.StateAccess``; the diagnosis itself is
``analysis.diagnose.why_missing``. Keys never become SQL text: they are bound as literals
through Spark's Column API (``isin``), so quotes, backslashes or SQL fragments are just
characters of a key. Filters run inside Spark; only matching rows (and near-miss keys) come back.
"""

from __future__ import annotations

import json
from typing import Any

from analysis import diagnose
from analysis import why_missing as wm
from analysis.diagnose import WhyMissingReport, lookup_sources, ordered_key_fields
from analysis.model import CheckpointInfo, StateSource, operator_of, resolve_batch
from analysis.state_access import KeyQuery
from spark_io.checkpoint import read_checkpoint
from spark_io.state_reader import has_change_feed, state_frame, to_arrow

__all__ = ["SparkState", "WhyMissingReport", "key_fields_of", "lookup_sources", "why_missing"]


def _key_filter(key_field: str, keys: list[str], near: bool, typed: list[Any] | None = None) -> tuple[Any, Any]:
    """(the key field as text, the condition): exact text, or the typed value, or (near) look-alikes."""
    from pyspark.sql import functions as F

    raw = F.col("key").getField(key_field)
    k = raw.cast("string")
    cond = k.isin(keys)
    if typed:
        cond = cond | raw.isin(typed)
    if near:
        norms = sorted({wm.normalize(x) for x in keys if wm.normalize(x)})
        digit_keys = sorted({wm.digits(x) for x in keys if len(wm.digits(x)) >= 2})
        if norms:
            cond = cond | F.lower(F.regexp_replace(k, "[^0-9A-Za-z]", "")).isin(norms)
        if digit_keys:
            cond = cond | F.regexp_replace(k, "[^0-9]", "").isin(digit_keys)
    return k, cond


class SparkState:
    """StateAccess over one checkpoint with Spark's State Data Source (filters run in Spark)."""

    def __init__(self, info: CheckpointInfo) -> None:
        self.info = info

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
            if f.name != "index" and not isinstance(f.dataType, StructType)
        ]

    def value_fields(self, source: StateSource, batch: int) -> list[str]:
        from pyspark.sql.types import StructType

        df = self._state(source, batch)
        t = df.schema["value"].dataType if "value" in df.columns else None
        return t.fieldNames() if isinstance(t, StructType) else []

    def _matching(self, df: Any, query: KeyQuery, what: str) -> list[dict[str, Any]]:
        from pyspark.sql import functions as F

        _, cond = _key_filter(query.key_field, list(query.keys), near=False, typed=[v for _, v in query.typed])
        return to_arrow(df.where(cond).withColumn("_raw", F.col("key").getField(query.key_field)), what).to_pylist()

    def rows(self, source: StateSource, batch: int, query: KeyQuery) -> list[dict[str, Any]]:
        return self._matching(self._state(source, batch), query, f"{source.describe()} at batch {batch}")

    def _feed(self, source: StateSource, start: int, end: int) -> tuple[Any, str]:
        what = f"the change feed of {source.describe()} for batches {start}–{end}"
        opts = {"readChangeFeed": "true", "changeStartBatchId": str(start), "changeEndBatchId": str(end)}
        return self._frame(source, opts, what), what

    def changes(self, source: StateSource, start: int, end: int, query: KeyQuery) -> list[dict[str, Any]]:
        df, what = self._feed(source, start, end)
        return self._matching(df, query, what)

    def near_keys(self, source: StateSource, batch: int, key_field: str, keys: list[str]) -> list[str]:
        k, cond = _key_filter(key_field, keys, near=True)
        df = self._state(source, batch).where(cond).select(k.alias("_key")).distinct()
        return [r["_key"] for r in to_arrow(df, source.describe()).to_pylist() if r["_key"]]

    def eviction_feed(self, source: StateSource, start: int, end: int) -> list[dict[str, Any]]:
        """The side's change feed slimmed in Spark to batch, change type, key and the value's event time."""
        from pyspark.sql import functions as F

        df, what = self._feed(source, start, end)
        value_type = df.schema["value"].dataType
        time_field = next((f.name for f in value_type.fields if f.dataType.typeName().startswith("timestamp")), None)
        if time_field is None:
            return []
        slim = df.select(
            "batch_id",
            "change_type",
            F.to_json("key").alias("key"),
            F.struct(F.col("value").getField(time_field).alias(time_field)).alias("value"),
        )
        rows = to_arrow(slim, what).to_pylist()
        for r in rows:
            r["key"] = json.loads(r["key"])
        return rows

    def has_change_feed(self, operator_id: int) -> bool:
        return has_change_feed(self.info, operator_id)


def key_fields_of(info: CheckpointInfo, operator_id: int) -> list[str]:
    """The key fields a user can match for an operator, the default one first."""
    _, src = lookup_sources(operator_of(info, operator_id))[0]
    return ordered_key_fields(SparkState(info).key_fields(src, resolve_batch(info, None)))


def why_missing(
    path: str,
    keys: list[str],
    operator_id: int | None = None,
    batch_id: int | None = None,
    key_field: str | None = None,
    info: CheckpointInfo | None = None,
    join_type: str | None = None,
) -> WhyMissingReport:
    """Why-missing on a checkpoint, reading through Spark."""
    info = info or read_checkpoint(path)
    return diagnose.why_missing(SparkState(info), info, keys, operator_id, batch_id, key_field, join_type)
