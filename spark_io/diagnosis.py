"""Reads what 'why is key X missing' needs, then asks ``analysis.why_missing`` for the verdicts.

Keys never become SQL text: they are bound as literals through Spark's Column API
(``isin``), so quotes, backslashes or SQL fragments are just characters of a key. Filters
run inside Spark; only the matching rows (and near-miss keys) come back to Python.

Reads per store: the state at the batch (exact matches and near misses in one scan); the
change feed only where it is needed: for a key found in state, the batches around its event
time (where it entered and matched); for a key not in state, every retained batch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from analysis import why_missing as wm
from spark_io import session
from spark_io.checkpoint import CheckpointInfo, OperatorInfo, read_checkpoint
from spark_io.errors import StateLensError, StateReadError, UnknownOperator
from spark_io.state_reader import (
    StateSource,
    _operator,
    _spark_message,
    resolve_batch,
    sources_of,
    validate_source,
)
from spark_io.workspace import table_name


class InvalidInput(StateLensError):
    title = "Invalid input"


@dataclass
class WhyMissingReport:
    checkpoint: str
    operator_id: int
    operator_name: str
    kind: str
    batch: int
    key_field: str
    key_fields: list[str]
    history: tuple[int, int] | None
    watermarks: dict[int, int]
    results: list[wm.KeyDiagnosis] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "operator_id": self.operator_id,
            "operator_name": self.operator_name,
            "batch_id": self.batch,
            "key_field": self.key_field,
            "results": [r.to_dict() for r in self.results],
        }


def default_operator(info: CheckpointInfo) -> OperatorInfo:
    """The operator a diagnosis starts on: the join if there is one, else the first."""
    if not info.operators:
        _operator(info, 0)  # raises NoState
    return next((o for o in info.operators if o.is_join), info.operators[0])


def lookup_sources(op: OperatorInfo) -> list[tuple[str, StateSource]]:
    """(name, source) of every store a diagnosis reads for this operator."""
    if op.is_join:
        return [(side, StateSource(op.operator_id, store_name=f"{side}-keyWithIndexToValue")) for side in ("left", "right")]
    if wm.operator_kind(op.operator_name) == wm.TWS:
        return [("timers" if s.timers else str(s.state_var), s) for s in sources_of(op)]
    return [("state", StateSource(op.operator_id, store_name=op.stores[0].store_name if op.stores else None))]


def _reader(info: CheckpointInfo, source: StateSource, extra: dict[str, str]) -> Any:
    r = session.get_spark().read.format("statestore")
    for k, v in {**source.options(), **extra}.items():
        r = r.option(k, v)
    return r.load(info.path)


def key_fields(df: Any) -> list[str]:
    """Fields of the key struct a user can match against (simple types; not the join's index)."""
    from pyspark.sql.types import StructType

    key_type = df.schema["key"].dataType
    if not isinstance(key_type, StructType):
        return []
    return [f.name for f in key_type.fields if f.name != "index" and not isinstance(f.dataType, StructType)]


def _non_time_first(df: Any, fields: list[str]) -> str:
    from pyspark.sql.types import TimestampNTZType, TimestampType

    key_type = df.schema["key"].dataType
    for name in fields:
        if not isinstance(key_type[name].dataType, (TimestampType, TimestampNTZType)):
            return name
    return fields[0]


def _key_filter(key_field: str, keys: list[str], near: bool) -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    k = F.col("key").getField(key_field).cast("string")
    cond = k.isin(keys)
    if near:
        norms = sorted({wm.normalize(x) for x in keys if wm.normalize(x)})
        digit_keys = sorted({wm.digits(x) for x in keys if len(wm.digits(x)) >= 2})
        if norms:
            cond = cond | F.lower(F.regexp_replace(k, "[^0-9A-Za-z]", "")).isin(norms)
        if digit_keys:
            cond = cond | F.regexp_replace(k, "[^0-9]", "").isin(digit_keys)
    return k, cond


def _collect(df: Any, what: str) -> list[dict[str, Any]]:
    try:
        return df.toArrow().to_pylist()
    except Exception as e:
        raise StateReadError(f"Spark could not read {what}: {_spark_message(e)}") from e


def _history_window(rows: list[dict[str, Any]], info: CheckpointInfo, batch: int, first: int) -> int:
    """Oldest batch whose change feed can hold a key's entry into state, given its rows' event times.

    A row with event time T enters state in a batch whose watermark is <= T (later it is late data).
    The window starts two batches before the last such batch; no timestamps: the whole history.
    """
    times = [t for r in rows for _, t in [wm.event_time_ms(r.get("value"))] if t is not None]
    if not times:
        return first
    t = min(times)
    candidates = [b.batch_id for b in info.batches if b.watermark_ms <= t and first <= b.batch_id <= batch]
    return max(first, (max(candidates) if candidates else first) - 2)


def key_fields_of(info: CheckpointInfo, operator_id: int) -> list[str]:
    """The key fields a user can match for an operator, the default one first."""
    _, src = lookup_sources(_operator(info, operator_id))[0]
    df = _reader(info, src, {"batchId": str(resolve_batch(info, None))})
    fields = key_fields(df)
    if not fields:
        return []
    first = _non_time_first(df, fields)
    return [first, *(f for f in fields if f != first)]


def why_missing(
    path: str,
    keys: list[str],
    operator_id: int | None = None,
    batch_id: int | None = None,
    key_field: str | None = None,
    info: CheckpointInfo | None = None,
) -> WhyMissingReport:
    keys = [k for k in dict.fromkeys(keys)]
    if not keys or not all(isinstance(k, str) for k in keys):
        raise InvalidInput("Give at least one key (one per line in the app, or as arguments to the CLI).")
    info = info or read_checkpoint(path)
    op = default_operator(info) if operator_id is None else _operator(info, operator_id)
    kind = wm.operator_kind(op.operator_name)
    batch = resolve_batch(info, batch_id)
    sources = lookup_sources(op)
    if not sources:
        raise UnknownOperator(f"Operator {op.operator_id} ({op.operator_name}) has no readable state.")
    for _, src in sources:
        validate_source(info, src)
    state_dfs = {name: _reader(info, src, {"batchId": str(batch)}) for name, src in sources}
    fields = key_fields(next(iter(state_dfs.values())))
    if not fields:
        raise InvalidInput(f"Operator {op.operator_id} ({op.operator_name}) has no key fields to match.")
    if key_field is None:
        key_field = _non_time_first(next(iter(state_dfs.values())), fields)
    elif key_field not in fields:
        raise InvalidInput(f"The key has no field '{key_field}'. Its fields are: {', '.join(fields)}.")

    committed = [b.batch_id for b in info.committed_batches]
    first = committed[0]
    watermarks = {b.batch_id: b.watermark_ms for b in info.batches}

    # 1. the state at the batch: exact rows and near misses, one scan per store
    lookups: dict[str, dict[str, wm.StoreLookup]] = {k: {} for k in keys}
    for name, src in sources:
        k, cond = _key_filter(key_field, keys, near=True)
        found = _collect(state_dfs[name].where(cond).withColumn("_key", k), f"{src.describe()} at batch {batch}")
        for key in keys:
            lookups[key][name] = wm.StoreLookup(
                name,
                table_name(src),
                rows=[{c: v for c, v in r.items() if c != "_key"} for r in found if r["_key"] == key],
                near=sorted({r["_key"] for r in found if r["_key"] is not None and r["_key"] != key}),
                changes_table=f"{table_name(src)}_changes" if src.has_change_feed else None,
            )

    # 2. history from the change feed: around the event time for keys in state, all of it otherwise
    start = batch
    for key in keys:
        rows = [r for lk in lookups[key].values() for r in lk.rows]
        start = min(start, _history_window(rows, info, batch, first) if rows else first)
    history = None
    for name, src in sources:
        if not src.has_change_feed:
            continue
        history = (start, batch)
        k, cond = _key_filter(key_field, keys, near=False)
        opts = {"readChangeFeed": "true", "changeStartBatchId": str(start), "changeEndBatchId": str(batch)}
        try:
            changes = _collect(_reader(info, src, opts).where(cond).withColumn("_key", k), f"the change feed of {src.describe()}")
        except StateReadError:
            history = None  # e.g. RocksDB without changelog checkpointing: no change feed
            break
        for key in keys:
            lookups[key][name].changes = [{c: v for c, v in r.items() if c != "_key"} for r in changes if r["_key"] == key]

    ctx = wm.Context(kind, op.operator_id, op.operator_name, batch, watermarks, key_field, history)
    names = [name for name, _ in sources]
    results = [wm.diagnose(key, ctx, [lookups[key][n] for n in names]) for key in keys]

    # 3. joins: for keys waiting on one side, estimate when the watermark evicts them
    waiting_sides = {r.side for r in results if r.verdict == wm.WAITING_OTHER_SIDE and r.side}
    if kind == wm.JOIN and waiting_sides and history is not None:
        for side in waiting_sides:
            horizon = _eviction_horizon(info, dict(sources)[side], first, batch, watermarks)
            if horizon:
                ctx.eviction_horizon[side] = horizon
        results = [
            wm.diagnose(key, ctx, [lookups[key][n] for n in names]) if r.verdict == wm.WAITING_OTHER_SIDE else r
            for key, r in zip(keys, results, strict=True)
        ]
    return WhyMissingReport(
        info.path, op.operator_id, op.operator_name, kind, batch, key_field, fields, history, watermarks, results
    )


def _eviction_horizon(
    info: CheckpointInfo, source: StateSource, start: int, end: int, watermarks: dict[int, int]
) -> tuple[int, int] | None:
    """Observed eviction delay of one join side (see ``why_missing.eviction_horizon``)."""
    from pyspark.sql import functions as F

    opts = {"readChangeFeed": "true", "changeStartBatchId": str(start), "changeEndBatchId": str(end)}
    df = _reader(info, source, opts)
    value_type = df.schema["value"].dataType
    time_field = next((f.name for f in value_type.fields if f.dataType.typeName().startswith("timestamp")), None)
    if time_field is None:
        return None
    slim = df.select(
        "batch_id",
        "change_type",
        F.to_json("key").alias("key"),
        F.struct(F.col("value").getField(time_field).alias(time_field)).alias("value"),
    )
    rows = _collect(slim, f"the change feed of {source.describe()}")
    for r in rows:
        r["key"] = json.loads(r["key"])
    return wm.eviction_horizon(rows, watermarks)
