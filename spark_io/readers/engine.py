"""Which reader answers a state read: ``native`` (Spark's state files decoded in-process, no JVM)
or ``spark`` (the State Data Source).

``auto`` (the default; ``STATELENS_ENGINE``, ``--engine``, the app's sidebar) reads a local,
S3, ADLS or GCS checkpoint natively unless Spark was pointed somewhere on purpose (``--master``, ``--remote``,
``SPARK_REMOTE``), and hands the read to Spark when the native reader says it cannot decode
something (``NativeUnsupported``: another codec, Avro rows, a type it does not read). ``native``
never falls back: what it cannot read is the answer. ``spark`` always asks Spark.

Every table read here carries which engine answered (``engine_of``) and, after a fallback, why.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa

from statelens.analysis.core.arrow_numpy import pc
from statelens.analysis.core.errors import NativeUnsupported, option
from statelens.analysis.core.model import CheckpointInfo, StateSource, resolve_batch, validate_source
from statelens.analysis.core.state_access import key_text
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers import state_reader
from statelens.spark_io.readers.state_reader import RowFilter
from statelens.spark_io.runtime.engine_choice import (  # noqa: F401  (the choice is made there; callers ask engine.current() ...)
    ENGINES,
    NATIVE,
    SPARK,
    configure,
    current,
    reads_natively,
    spark_chosen_on_purpose,
)

if TYPE_CHECKING:
    from statelens.spark_io.readers.native.reader import NativeReader

_META_ENGINE = b"statelens.engine"
_META_WHY = b"statelens.fallback"
T = TypeVar("T")


ENGINE_CHOICE = '"auto" or "spark" (statelens.configure)'


def wants_native(info: CheckpointInfo) -> bool:
    """Whether a read of this checkpoint starts with the native reader."""
    engine = current()
    if engine == SPARK:
        return False
    if engine == NATIVE:
        if not reads_natively(info.path):
            raise NativeUnsupported(
                f"{info.path} is on storage only Spark reads (State Lens reads local folders, s3://, abfss:// and "
                f"gs:// itself): use {option('--engine', 'auto or spark', ENGINE_CHOICE)}"
            )
        return True
    return reads_natively(info.path) and not spark_chosen_on_purpose()


def native_reader(info: CheckpointInfo) -> NativeReader:
    from statelens.spark_io.readers.native.reader import NativeReader

    return NativeReader(info)


def one_question_per_process() -> None:
    """This process answers one question and exits (a CLI command): the native reader keeps only the
    small decoded state files its question reads twice (a whole query's walk and an operator's
    verdict), none larger than that budget (a 5M-key growth: 1.4 GB peak -> 0.9 GB, as fast)."""
    from statelens.spark_io.readers.native import stores

    stores.KEEP_BUDGET = stores.QUESTION_BUDGET


def warm_native_in_background() -> threading.Thread:
    """Import the native reader and load its compiled loops in a thread, for the app (about 1–2 s
    its first answer would otherwise wait)."""

    def warm() -> None:
        import pandas  # noqa: F401  (the app's tables need it anyway; pyarrow imports it on first use)

        from statelens.spark_io.readers.native import access, kernels  # noqa: F401  (access imports the whole reader)

        kernels.warm()

    t = threading.Thread(target=warm, name="statelens-native-warm-up", daemon=True)
    t.start()
    return t


def tagged(table: pa.Table, engine: str, why: str | None = None) -> pa.Table:
    meta = dict(table.schema.metadata or {})
    meta[_META_ENGINE] = engine.encode()
    if why:
        meta[_META_WHY] = why.encode()
    return table.replace_schema_metadata(meta)


def engine_of(table: pa.Table) -> str:
    return (table.schema.metadata or {}).get(_META_ENGINE, b"spark").decode()


def fallback_of(table: pa.Table) -> str | None:
    why = (table.schema.metadata or {}).get(_META_WHY)
    return why.decode() if why else None


def answer(
    info: CheckpointInfo, native: Callable[[], T], spark: Callable[[], T], only: str | None = None
) -> tuple[T, str, str | None]:
    """(result, engine, why Spark answered instead) of a read both engines can do; ``only`` names
    the engine to use whatever the choice (a cross-check)."""
    if only == SPARK:
        return spark(), SPARK, None
    if only == NATIVE or wants_native(info):
        try:
            return native(), NATIVE, None
        except NativeUnsupported as e:
            if current() == NATIVE or only == NATIVE:
                raise
            return spark(), SPARK, e.message
    return spark(), SPARK, None


def _key_filter(table: pa.Table, row_filter: RowFilter | None) -> pa.Table:
    """The rows whose key field, as Spark casts it to text, is one of the filter's keys."""
    if not row_filter or not row_filter.keys or table.num_rows == 0:
        return table
    key_type = table.schema.field("key").type
    field = row_filter.key_field or key_type[0].name
    values = pc.struct_field(table["key"], field)
    if pa.types.is_string(values.type):
        texts = values
    else:
        distinct = pc.unique(values)
        texts = pc.take(pa.array([key_text(v) for v in distinct.to_pylist()], pa.string()), pc.index_in(values, distinct))
    return table.filter(pc.is_in(texts, value_set=pa.array(list(row_filter.keys), pa.string())))


def _filtered(read: Callable[[tuple[int, ...] | None], pa.Table], row_filter: RowFilter | None, limit: int | None) -> pa.Table:
    """A native read with a row filter applied as Spark's reader applies it: the partitions read
    are the only ones decoded, keys filtered by their text, then the row limit."""
    parts = row_filter.partitions if row_filter and row_filter.partitions else None
    t = _key_filter(read(parts), row_filter)
    return t.slice(0, limit) if limit is not None else t


def read_state(
    path: str,
    source: StateSource,
    batch_id: int | None = None,
    info: CheckpointInfo | None = None,
    row_filter: RowFilter | None = None,
    limit: int | None = None,
    keys_only: bool = False,
) -> tuple[pa.Table, int]:
    """``state_reader.read_state`` by the chosen engine: (table, batch). ``keys_only``: the native
    reader may leave a store's values out (``key`` and ``partition_id``; Spark reads them all)."""
    info = info or read_checkpoint(path)
    validate_source(info, source)
    batch = resolve_batch(info, batch_id)

    def native() -> pa.Table:
        return _filtered(lambda parts: native_reader(info).state(source, batch, parts, keys_only=keys_only), row_filter, limit)

    def spark() -> pa.Table:
        return state_reader.read_state(path, source, batch, info=info, row_filter=row_filter, limit=limit)[0]

    table, engine, why = answer(info, native, spark)
    return tagged(table, engine, why), batch


def state_schema(info: CheckpointInfo, source: StateSource, changes: bool = False) -> pa.Schema | None:
    """The columns a native read of the store (``changes``: its change feed) gives, without reading
    it (None: not read natively)."""
    if not wants_native(info):
        return None
    try:
        return native_reader(info).schema(source, changes)
    except NativeUnsupported:
        return None


def spill_state(
    path: str, source: StateSource, batch: int, dest: str, info: CheckpointInfo | None = None, row_filter: RowFilter | None = None
) -> tuple[str, str, str | None]:
    """A store's rows at a batch written to Parquet files in ``dest`` (a local folder State Lens
    owns), by the chosen engine: natively one partition at a time (memory: one partition's rows),
    else by Spark's executors (``state_reader.spill_state``). (dest, engine, why Spark wrote them)."""
    info = info or read_checkpoint(path)
    validate_source(info, source)

    def native() -> str:
        import pyarrow.parquet as pq

        reader = native_reader(info)
        wanted = row_filter.partitions if row_filter and row_filter.partitions else range(reader.partitions(source, batch))
        os.makedirs(dest, exist_ok=True)
        schema = None
        for p in wanted:
            table = _key_filter(reader.state(source, batch, [p]), row_filter)
            schema = schema or table.schema
            pq.write_table(table, os.path.join(dest, f"part-{p:05d}.parquet"))
        if schema is None:  # no partition: an empty file keeps the table's columns
            pq.write_table(reader.state(source, batch, []), os.path.join(dest, "part-empty.parquet"))
        return dest

    return answer(info, native, lambda: state_reader.spill_state(path, source, batch, dest, info=info, row_filter=row_filter))


def read_changes(
    path: str,
    source: StateSource,
    start: int | None = None,
    end: int | None = None,
    info: CheckpointInfo | None = None,
    row_filter: RowFilter | None = None,
    limit: int | None = None,
) -> tuple[pa.Table, int, int]:
    """``state_reader.read_changes`` by the chosen engine: (table, start, end)."""
    info = info or read_checkpoint(path)
    validate_source(info, source)
    start_b, end_b = state_reader.change_range(info, source, start, end)

    def native() -> pa.Table:
        return _filtered(lambda parts: native_reader(info).changes(source, start_b, end_b, parts), row_filter, limit)

    def spark() -> pa.Table:
        return state_reader.read_changes(path, source, start_b, end_b, info=info, row_filter=row_filter, limit=limit)[0]

    table, engine, why = answer(info, native, spark)
    return tagged(table, engine, why), start_b, end_b


def read_state_metadata(path: str, info: CheckpointInfo | None = None, only: str | None = None) -> pa.Table:
    """Spark's ``state-metadata`` table by the chosen engine: from the operator metadata files
    natively (``checkpoint.state_metadata_table``), else through the State Data Source."""
    from statelens.spark_io.logs.checkpoint import state_metadata_table

    info = info or read_checkpoint(path)
    table, engine, why = answer(
        info, lambda: state_metadata_table(info.path), lambda: state_reader.read_state_metadata(path, info), only
    )
    return tagged(table, engine, why)
