"""Reads state through Spark's State Data Source and returns Arrow tables.

``state-metadata`` for the operators and stores; ``statestore`` for any operator, store,
join side or transformWithState variable at any retained batch; its change feed over a
batch range. Inputs are checked against the checkpoint's own log (``checkpoint.py``)
before Spark is asked, so a wrong operator, store or batch gets a precise message; Spark
errors are wrapped into ``StateReadError``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from statelens.analysis.core.errors import BatchOutOfRange, StateLensError, StateReadError, UnknownStore
from statelens.analysis.core.model import (
    JOIN_V4_ROWS,
    CheckpointInfo,
    StateSource,
    operator_of,
    require_state,
    resolve_batch,
    validate_source,
)
from statelens.spark_io.logs.checkpoint import read_checkpoint, reader_conf
from statelens.spark_io.logs.overlay import read_location
from statelens.spark_io.runtime import scratch, session
from statelens.spark_io.runtime.session import spark_message
from statelens.spark_io.storage.gate import vet_tree

_FEEDS: dict[tuple[str, int], bool] = {}


def has_change_feed(info: CheckpointInfo, operator_id: int) -> bool:
    """Whether the operator's stores have a change feed: always on HDFS (deltas); on RocksDB only
    with changelog checkpointing (.changelog files), which Spark does not record in the conf."""
    if "RocksDB" not in info.provider:
        return True
    cache_key = (info.path, operator_id)
    if cache_key not in _FEEDS:
        from statelens.spark_io.logs.checkpoint import first_partition_kinds, list_state_files

        kinds = first_partition_kinds(info.path, operator_id)  # a listing or two; the whole tree when it holds none
        _FEEDS[cache_key] = (
            "changelog" in kinds
            if kinds
            else any(f.kind == "changelog" for f in list_state_files(info.path) if f.operator_id == operator_id)
        )
    return _FEEDS[cache_key]


@dataclass(frozen=True)
class RowFilter:
    """Rows to keep, applied inside Spark before anything is collected."""

    partitions: tuple[int, ...] = ()
    key_field: str | None = None
    keys: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.partitions or self.keys)

    def apply(self, df: Any) -> Any:
        from pyspark.sql import functions as F

        if self.partitions:
            df = df.where(F.col("partition_id").isin(list(self.partitions)))
        if self.keys:
            field = self.key_field or df.schema["key"].dataType.fieldNames()[0]
            df = df.where(F.col("key").getField(field).cast("string").isin(list(self.keys)))
        return df

    def describe(self) -> str:
        parts = []
        if self.partitions:
            parts.append(f"partitions {', '.join(map(str, self.partitions))}")
        if self.keys:
            parts.append(f"{len(self.keys)} key(s) of {self.key_field or 'the first key field'}")
        return " and ".join(parts) or "no filter"


def _frame(options: dict[str, str], fmt: str, path: str, what: str, row_filter: RowFilter | None) -> Any:
    """Every read of the State Data Source goes through here: with the confs the checkpoint needs
    (format version 2), from an overlay when the checkpoint was moved, as nullable Arrow-safe columns.
    Spark follows links itself: every link in a local checkpoint must stay inside the bounds first."""
    vet_tree(path)
    try:
        spark = session.spark_for(reader_conf(path))
        reader = spark.read.format(fmt)
        for k, v in options.items():
            reader = reader.option(k, v)
        df = readable(reader.load(read_location(path)))
        return row_filter.apply(df) if row_filter else df
    except StateLensError:
        raise
    except Exception as e:
        raise StateReadError(f"Spark could not read {what}: {spark_message(e)}") from e


def _nullable(t: Any) -> Any:
    """The same Spark type with every nested field nullable and repeated field names numbered."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(t, StructType):
        seen: dict[str, int] = {}
        fields = []
        for f in t.fields:
            n = seen.get(f.name, 0)
            seen[f.name] = n + 1
            fields.append(StructField(f.name if n == 0 else f"{f.name}_{n}", _nullable(f.dataType), True))
        return StructType(fields)
    if isinstance(t, ArrayType):
        return ArrayType(_nullable(t.elementType), True)
    if isinstance(t, MapType):
        return MapType(_nullable(t.keyType), _nullable(t.valueType), True)
    return t


def readable(df: Any) -> Any:
    """Checkpoints written by Spark 3.4-4.2 declare value fields non-nullable, yet their change feeds
    carry null values on delete rows, which Arrow refuses; keys grouped by aliased expressions repeat
    the field name ``_groupingexpression``, which Arrow refuses too. Cast such columns to their
    nullable, uniquely named twin (Spark casts structs by position)."""
    from pyspark.sql import functions as F

    cols = []
    changed = False
    for f in df.schema.fields:
        t = _nullable(f.dataType)
        if t != f.dataType:
            changed = True
            cols.append(F.col(f.name).cast(t).alias(f.name))
        else:
            cols.append(F.col(f.name))
    return df.select(*cols) if changed else df


def state_frame(
    path: str, source: StateSource, extra: dict[str, str], what: str | None = None, row_filter: RowFilter | None = None
) -> Any:
    """A lazy statestore DataFrame for a source with extra options (batchId, readChangeFeed ...)."""
    what = what or source.describe()
    v4 = _v4_join_rows(path, source)
    if v4 is None:
        return _frame({**source.options(), **extra}, "statestore", path, what, row_filter)
    return _join_side_of(
        _frame({"operatorId": str(source.operator_id), "storeName": v4, **extra}, "statestore", path, what, None), row_filter
    )


def change_frame(
    info: CheckpointInfo, source: StateSource, start: int, end: int, what: str | None = None, row_filter: RowFilter | None = None
) -> Any:
    """A lazy change feed DataFrame over batches ``start``..``end``. Spark's reader fails across an
    offline repartition batch (its version has no change log; it changes no row): one read per piece
    around such batches, unioned."""
    what = what or f"the change feed of {source.describe()} for batches {start}–{end}"
    pieces = info.feed_segments(start, end)
    if not pieces:
        raise BatchOutOfRange(
            f"Batches {start}–{end} are offline state repartitions: they changed no row and have no change feed. "
            "Read the change feed of the batches around them."
        )
    frames = [
        state_frame(
            info.path,
            source,
            {"readChangeFeed": "true", "changeStartBatchId": str(lo), "changeEndBatchId": str(hi)},
            what,
            row_filter,
        )
        for lo, hi in pieces
    ]
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def _v4_join_rows(path: str, source: StateSource) -> str | None:
    """A join side of join state format 4 is read from its keyWithTsToValues store: Spark 4.3's
    ``joinSide`` view of format 4 shows the event-time postfix as a key field and no ``matched``
    (see the README); the store holds both. None for every other source."""
    if not source.join_side:
        return None
    op = read_checkpoint(path).operator(source.operator_id)
    store = op.join_rows_store(source.join_side) if op else None
    return store if store and store.endswith(JOIN_V4_ROWS) else None


def _join_side_of(df: Any, row_filter: RowFilter | None) -> Any:
    """A keyWithTsToValues read as a join side: the join key without the event time, the row without ``matched``."""
    from pyspark.sql import functions as F

    df = df.select(
        F.col("key").dropFields("__event_time").alias("key"), F.col("value").dropFields("matched").alias("value"), "partition_id"
    )
    return row_filter.apply(df) if row_filter else df


def to_arrow(df: Any, what: str) -> pa.Table:
    """Collect a DataFrame as Arrow, with Spark's errors wrapped into StateReadError."""
    try:
        return df.toArrow()
    except StateLensError:
        raise
    except Exception as e:
        raise StateReadError(f"Spark could not read {what}: {spark_message(e)}") from e


def _load(
    options: dict[str, str], fmt: str, path: str, what: str, row_filter: RowFilter | None = None, limit: int | None = None
) -> pa.Table:
    df = _frame(options, fmt, path, what, row_filter)
    return to_arrow(df.limit(limit) if limit is not None else df, what)


def read_state_metadata(path: str, info: CheckpointInfo | None = None) -> pa.Table:
    info = info or read_checkpoint(path)
    require_state(info)
    return _load({}, "state-metadata", info.path, "the state metadata")


def read_state(
    path: str,
    source: StateSource,
    batch_id: int | None = None,
    info: CheckpointInfo | None = None,
    row_filter: RowFilter | None = None,
    limit: int | None = None,
) -> tuple[pa.Table, int]:
    """Rows of one store / join side / state variable at a batch (default: last committed),
    optionally filtered in Spark and capped at ``limit`` rows."""
    info = info or read_checkpoint(path)
    validate_source(info, source)
    batch = resolve_batch(info, batch_id)
    what = f"{source.describe()} at batch {batch}"
    try:
        if limit is None and row_filter is None and not _fits_in_driver(info, source, batch, what):
            return _through_parquet(info, source, batch), batch
        df = state_frame(info.path, source, {"batchId": str(batch)}, what, row_filter)
        return to_arrow(df.limit(limit) if limit is not None else df, what), batch
    except StateReadError as e:
        raise StateReadError(_with_files(e, info, source, batch)) from e.__cause__


# decoded rows take several times the bytes of their lz4-compressed state files
EXPANSION = float(os.environ.get("STATELENS_STATE_EXPANSION", "6"))


def driver_limit() -> tuple[int, str]:
    return session.driver_limit()


def _fits_in_driver(info: CheckpointInfo, source: StateSource, batch: int, what: str) -> bool:
    """Whether the read's rows, estimated from the state files it is made from, fit in the driver;
    if not, local Spark writes them to Parquet instead, and a cluster or Connect says so."""
    from statelens.analysis.checkpoint.restart import load_cost
    from statelens.spark_io.logs.checkpoint import list_state_files

    op = operator_of(info, source.operator_id)
    folder = op.folder_of(source.store_name or (op.join_rows_store(source.join_side) if source.join_side else None))
    files = [f for f in list_state_files(info.path) if f.operator_id == source.operator_id and f.store_name == folder]
    estimate = int(sum(c.bytes for c in load_cost(files, batch + 1, info.partitions_at(batch))) * EXPANSION)
    limit, why = driver_limit()
    if estimate <= limit:
        return True
    if session.target().remote or (session.target().master or "local").split("[")[0] != "local":
        raise StateReadError(
            f"{what} would bring about {estimate / 2**20:,.0f} MiB of rows to the driver, more than it takes ({why}): "
            "filter the read by key or partition, or give the driver more (spark.driver.maxResultSize, spark.driver.memory)."
        )
    return False


def _through_parquet(info: CheckpointInfo, source: StateSource, batch: int) -> pa.Table:
    """The rows written to Parquet by Spark's executors, then read here: nothing passes the driver."""
    import shutil
    import tempfile

    import pyarrow.parquet as pq

    dest = tempfile.mkdtemp(prefix="spill-", dir=scratch.session_dir())
    try:
        spill_state(info.path, source, batch, dest, info=info)
        return pq.read_table(dest)
    finally:
        shutil.rmtree(dest, ignore_errors=True)


_CAUSE = re.compile(r"Caused by: ([\w.$]+(?:Exception|Error)): ([^\n]+)")


def _with_files(e: StateReadError, info: CheckpointInfo, source: StateSource, batch: int) -> str:
    """Spark's state-loading errors rarely name a file: add the root cause and the files the read
    needed (the newest snapshot at or below the batch's version and the deltas/changelogs after it)."""
    if "CANNOT_LOAD_STATE_STORE" not in e.message or "does not exist" in e.message:
        return e.message
    causes = _CAUSE.findall(str(e.__cause__ or ""))
    cause = f" Cause: {causes[-1][0].rsplit('.', 1)[-1]}: {causes[-1][1].strip()}." if causes else ""
    from statelens.spark_io.logs.checkpoint import list_state_files

    store = source.store_name or "default"
    version = batch + 1
    versioned = [
        (f, f.version)
        for f in list_state_files(info.path)
        if f.operator_id == source.operator_id and f.store_name == store and f.version is not None
    ]
    base = max((v for f, v in versioned if f.kind in ("snapshot", "zip") and v <= version), default=0)
    needed = sorted(
        {
            re.sub(r"^(state/\d+/)\d+/", r"\1*/", f.path)
            for f, v in versioned
            if (f.kind in ("snapshot", "zip") and v == base) or (f.kind in ("delta", "changelog") and base < v <= version)
        },
        key=lambda p: (len(p), p),
    )
    shown = ", ".join(needed[-6:]) + (f" and {len(needed) - 6} more" if len(needed) > 6 else "")
    return (
        f"{e.message}{cause} Reading batch {batch} needs these state files: {shown}; one of them is damaged or "
        "unreadable (an earlier batch may still read)."
    )


def spill_state(
    path: str, source: StateSource, batch: int, dest: str, info: CheckpointInfo | None = None, row_filter: RowFilter | None = None
) -> str:
    """Write a store's rows at a batch to Parquet files in ``dest`` (a local folder) with Spark.

    Needs local Spark: a cluster or Connect server would write on its own file system.
    """
    info = info or read_checkpoint(path)
    validate_source(info, source)
    if session.target().remote or (session.target().master or "local").split("[")[0] != "local":
        raise StateReadError("Spilling to Parquet needs local Spark (a cluster writes on its own disks): use a filter instead.")
    what = f"{source.describe()} at batch {batch}"
    df = state_frame(info.path, source, {"batchId": str(batch)}, what, row_filter)
    try:
        # timestamps as Parquet's UTC microseconds, the type Spark's own toArrow gives (not INT96)
        df.sparkSession.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        df.write.mode("overwrite").parquet(dest)
    except Exception as e:
        raise StateReadError(f"Spark could not spill {what} to Parquet: {spark_message(e)}") from e
    return dest


def change_range(info: CheckpointInfo, source: StateSource, start: int | None, end: int | None) -> tuple[int, int]:
    """The batches a change feed read covers (default: every retained committed batch), after
    checking that the source has a change feed."""
    if not source.has_change_feed:
        raise UnknownStore(
            f"{source.describe()} has no change feed (Spark reads change feeds per store): "
            "pick a store such as left-keyWithIndexToValue instead."
        )
    if not has_change_feed(info, source.operator_id):
        raise UnknownStore(
            f"Operator {source.operator_id} has no change feed: this checkpoint uses RocksDB without changelog "
            "checkpointing, which writes whole snapshots and no per-batch changes. Read the state at a batch "
            "instead (growth and why-missing compare batches themselves); new checkpoints get a change feed with "
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled=true."
        )
    end_b = resolve_batch(info, end)
    committed = [b.batch_id for b in info.committed_batches]
    start_b = committed[0] if start is None else resolve_batch(info, start)
    if start_b > end_b:
        raise BatchOutOfRange(f"The change feed range is empty: start batch {start_b} is after end batch {end_b}.")
    return start_b, end_b


def read_changes(
    path: str,
    source: StateSource,
    start: int | None = None,
    end: int | None = None,
    info: CheckpointInfo | None = None,
    row_filter: RowFilter | None = None,
    limit: int | None = None,
) -> tuple[pa.Table, int, int]:
    """The change feed (``batch_id``, ``change_type`` update/delete, key, value) over batches."""
    info = info or read_checkpoint(path)
    validate_source(info, source)
    start_b, end_b = change_range(info, source, start, end)
    what = f"the change feed of {source.describe()} for batches {start_b}–{end_b}"
    df = change_frame(info, source, start_b, end_b, what, row_filter)
    return to_arrow(df.limit(limit) if limit is not None else df, what), start_b, end_b
