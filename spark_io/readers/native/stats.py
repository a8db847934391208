"""``NativeStats``: the figures health needs (``spark_io.readers.spark_stats.StateStats``) from the native
reader's Arrow tables, reduced in DuckDB: rows per partition, the hottest keys, stable key ids
(DuckDB's ``hash`` of the key, equal for equal keys in every read), eviction aggregates."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from statelens.analysis.core.arrow_numpy import cast, kernel, numpy_filled, numpy_of, struct_field
from statelens.analysis.core.model import JOIN_ROW_FIELDS, CheckpointInfo, StateSource
from statelens.spark_io.readers.native.reader import NativeReader, StateRead
from statelens.spark_io.readers.spark_stats import EvictionStats


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def spark_json(value: Any) -> Any:
    """A value as Spark's ``to_json`` writes it: timestamps ``yyyy-MM-dd'T'HH:mm:ss.SSSXXX`` (UTC),
    dates ``yyyy-MM-dd``, null struct fields left out."""
    if isinstance(value, dict):
        return {k: spark_json(v) for k, v in value.items() if v is not None}
    if isinstance(value, dt.datetime):
        v = value.astimezone(dt.UTC) if value.tzinfo else value
        text = v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}"
        return text + ("Z" if value.tzinfo else "")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode()
    return value


def _signed(column: pa.ChunkedArray) -> np.ndarray:
    """DuckDB's unsigned 64-bit hashes as int64 (the same bits)."""
    return numpy_of(column).astype(np.uint64).view(np.int64)


class NativeStats:
    engine = "native"

    def __init__(self, info: CheckpointInfo, reader: NativeReader | None = None) -> None:
        self.info = info
        self.reader = reader or NativeReader(info)
        self._con: Any = None
        self._lock = threading.Lock()
        self._eviction_at: dict[StateSource, int] = {}  # the batch whose eviction figures will be asked

    def _sql(self, table: pa.Table, sql: str) -> pa.Table:
        with self._lock:  # DuckDB is opened by the first figure that needs it (growth needs none: 60-100 ms)
            if self._con is None:
                import duckdb

                self._con = duckdb.connect(":memory:")
        con = self._con.cursor()  # a connection of its own: partitions are reduced in parallel
        try:
            con.register("t", table)
            return con.sql(sql).to_arrow_table()
        finally:
            con.close()

    def _per_partition(
        self, src: StateSource, batches: range, read: Callable[[list[int]], tuple[np.ndarray, ...]]
    ) -> tuple[np.ndarray, ...]:
        """``read`` partition by partition, a core each, joined: one partition's rows decoded at a
        time per core, not the whole store's."""
        n = max(self.reader.partitions(src, b) for b in batches)
        pieces = self.reader.decode_each(read, [[p] for p in range(n)]) or [read([])]
        return tuple(np.concatenate(cols) for cols in zip(*pieces, strict=True))

    @staticmethod
    def _identity(table: pa.Table) -> str:
        """What tells two rows apart as one state entry: the key, a map state's user key, a list
        state's element and its occurrence (a list may hold one element twice)."""
        if "list_element" in table.column_names:
            return "hash(key, list_element, row_number() OVER (PARTITION BY key, list_element))"
        cols = ["key"] + (["user_map_key"] if "user_map_key" in table.column_names else [])
        return "hash(" + ", ".join(cols) + ")"

    def skew_counts(self, src: StateSource, batch: int) -> tuple[dict[int, int], list[tuple[str, int]]]:
        t = self.reader.state(src, batch, keys_only=True)  # rows per partition and per key: no value is decoded
        parts = np.bincount(numpy_of(t["partition_id"]), minlength=0) if t.num_rows else np.zeros(0, np.int64)
        per_part = {int(p): int(n) for p, n in enumerate(parts) if n}
        fields = [f.name for f in t.schema.field("key").type if f.name not in JOIN_ROW_FIELDS]
        key = "struct_pack(" + ", ".join(f"{_q(f)} := key.{_q(f)}" for f in fields) + ")"
        top = self._sql(t, f"SELECT {key} AS k, count(*) AS n FROM t GROUP BY 1 ORDER BY n DESC, k ASC NULLS FIRST LIMIT 10")
        return per_part, [
            (json.dumps(spark_json(r["k"]), ensure_ascii=False, separators=(",", ":")), int(r["n"])) for r in top.to_pylist()
        ]

    def key_ids(self, src: StateSource, batch: int) -> tuple[np.ndarray, np.ndarray]:
        stored = self.reader.key_ids(src, batch)  # a plain store: its keys' bytes, not decoded
        if stored is not None:
            return stored

        def read(parts: list[int]) -> tuple[np.ndarray, ...]:
            t = self.reader.state(src, batch, parts, keys_only=True)
            ids = self._sql(t, f"SELECT {self._identity(t)} AS k, partition_id FROM t")
            return _signed(ids["k"]), numpy_of(ids["partition_id"]).astype(np.int64)

        keys, parts = self._per_partition(src, range(batch, batch + 1), read)
        return keys, parts

    def expect_eviction(self, src: StateSource, batch: int) -> None:
        self._eviction_at[src] = batch

    def change_ids(self, src: StateSource, start: int, end: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        # the eviction figures' read of the state at the end, made from the same records as they are walked
        then = self._eviction_read(src) if self._eviction_at.get(src) == end else None
        stored = self.reader.change_key_ids(src, start, end, state=then)
        if stored is not None:
            return stored

        def read(parts: list[int]) -> tuple[np.ndarray, ...]:
            t = self.reader.changes(src, start, end, parts, keys_only=True)
            ids = self._sql(
                t,
                f"SELECT batch_id, CAST(change_type = 'delete' AS BIGINT) AS d, {self._identity(t)} AS k, partition_id FROM t",
            )
            return (
                numpy_of(ids["batch_id"]).astype(np.int64),
                numpy_of(ids["d"]).astype(np.int64),
                _signed(ids["k"]),
                numpy_of(ids["partition_id"]).astype(np.int64),
            )

        batch_ids, deletes, keys, parts = self._per_partition(src, range(start, end + 1), read)
        return batch_ids, deletes, keys, parts

    def _eviction_read(self, src: StateSource) -> StateRead:
        """What ``eviction`` decodes: the value's event times, windows and timeout, the key's times and
        windows (a key without them: none of its fields)."""
        schema = self.reader.schema(src)
        value_type = schema.field("value").type if "value" in schema.names else None
        needed = None
        if value_type is not None and pa.types.is_struct(value_type):
            needed = frozenset(
                f.name for f in value_type if pa.types.is_timestamp(f.type) or f.name == "timeoutTimestamp" or _has_end(f.type)
            )
        key_type = schema.field("key").type
        key_needed = None
        if pa.types.is_struct(key_type):
            key_needed = frozenset(f.name for f in key_type if pa.types.is_timestamp(f.type) or _has_end(f.type))
        return StateRead(needed == frozenset(), needed or None, key_needed)

    def eviction(self, src: StateSource, batch: int, watermark_ms: int | None) -> EvictionStats:
        read = self._eviction_read(src)
        t = self.reader.made_state(src, batch, read)
        if t is None:
            t = self.reader.state(
                src, batch, keys_only=read.keys_only, value_fields=read.value_fields, key_fields=read.key_fields
            )

        def times(col: str) -> list[Any]:
            if col not in t.column_names or not pa.types.is_struct(t.schema.field(col).type):
                return []
            struct = t[col]
            out = [struct_field(struct, f.name) for f in struct.type if pa.types.is_timestamp(f.type)]
            out += [struct_field(struct_field(struct, f.name), "end") for f in struct.type if _has_end(f.type)]
            return out

        key_times, value_times = times("key"), times("value")
        out = EvictionStats(key_has_event_time=bool(key_times))
        event = next(iter(value_times or key_times), None)
        # times as epoch numbers (``as_py`` of a zoned time, or a compute call with a Python number,
        # imports pandas: 0.4 s of a process)
        if event is not None and t.num_rows:
            ms, valid = _epoch_ms(event)
            out.oldest_ms = int(ms[valid].min()) if valid.any() else None
        ends = [c for c in times("key")[len([f for f in t.schema.field("key").type if pa.types.is_timestamp(f.type)]) :]]
        if watermark_ms is not None and ends and t.num_rows:
            ms, valid = _epoch_ms(ends[0])
            out.windows_past = int((valid & (ms <= watermark_ms)).sum())
        value_type = t.schema.field("value").type if "value" in t.column_names else None
        if value_type is not None and pa.types.is_struct(value_type) and "timeoutTimestamp" in [f.name for f in value_type]:
            timeout = kernel("max", struct_field(t["value"], "timeoutTimestamp")).as_py() if t.num_rows else None
            out.timeout_set = bool((timeout or 0) > 0)
        return out


def _has_end(t: pa.DataType) -> bool:
    """A window's struct: an ``end`` that is a time (a user's state may hold an ``end`` of any type)."""
    return pa.types.is_struct(t) and any(c.name == "end" and pa.types.is_timestamp(c.type) for c in t)


def _epoch_ms(times: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Timestamps as epoch milliseconds, whatever their unit and zone, and where they are not null."""
    raw = cast(cast(times, pa.timestamp(times.type.unit)), pa.int64())
    values = numpy_filled(raw, 0)
    valid = numpy_of(raw.is_valid()) if raw.null_count else np.ones(len(values), np.bool_)
    scale = {"s": -1000, "ms": 1, "us": 1000, "ns": 1_000_000}[times.type.unit]
    return (values * -scale if scale < 0 else values // scale), valid
