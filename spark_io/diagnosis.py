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
from spark_io.checkpoint import CheckpointInfo, OperatorInfo, read_checkpoint
from spark_io.errors import InvalidInput, StateReadError, UnknownOperator
from spark_io.state_reader import (
    StateSource,
    default_operator,
    operator_of,
    resolve_batch,
    sources_of,
    state_frame,
    to_arrow,
    validate_source,
)
from spark_io.workspace import table_name


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


def lookup_sources(op: OperatorInfo) -> list[tuple[str, StateSource]]:
    """(name, source) of every store a diagnosis reads for this operator."""
    if op.is_join:
        return [(side, StateSource(op.operator_id, store_name=f"{side}-keyWithIndexToValue")) for side in ("left", "right")]
    if wm.operator_kind(op.operator_name) == wm.TWS:
        return [("timers" if s.timers else str(s.state_var), s) for s in sources_of(op)]
    return [("state", StateSource(op.operator_id, store_name=op.stores[0].store_name if op.stores else None))]


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


def key_fields_of(info: CheckpointInfo, operator_id: int) -> list[str]:
    """The key fields a user can match for an operator, the default one first."""
    _, src = lookup_sources(operator_of(info, operator_id))[0]
    df = state_frame(info.path, src, {"batchId": str(resolve_batch(info, None))})
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
    op = default_operator(info) if operator_id is None else operator_of(info, operator_id)
    kind = wm.operator_kind(op.operator_name)
    batch = resolve_batch(info, batch_id)
    sources = lookup_sources(op)
    if not sources:
        raise UnknownOperator(f"Operator {op.operator_id} ({op.operator_name}) has no readable state.")
    for _, src in sources:
        validate_source(info, src)
    state_dfs = {name: state_frame(info.path, src, {"batchId": str(batch)}) for name, src in sources}
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
    names = [name for name, _ in sources]
    lookups: dict[str, dict[str, wm.StoreLookup]] = {
        key: {name: wm.StoreLookup(name, table_name(src)) for name, src in sources} for key in keys
    }

    # 1. the state at the batch: one filtered scan per store
    for name, src in sources:
        k, cond = _key_filter(key_field, keys, near=False)
        found = _rows(state_dfs[name].where(cond).withColumn("_key", k), f"{src.describe()} at batch {batch}")
        for key in keys:
            lookups[key][name].rows = [_without_key(r) for r in found if r["_key"] == key]

    # 2. history from the change feed
    history = _read_history(info, sources, lookups, keys, key_field, kind, first, batch)

    ctx = wm.Context(kind, op.operator_id, op.operator_name, batch, watermarks, key_field, history, first_batch=first)

    def run_all() -> list[wm.KeyDiagnosis]:
        return [wm.diagnose(key, ctx, [lookups[key][n] for n in names]) for key in keys]

    results = run_all()
    # 3. near-miss keys, only for keys that are waiting or were never seen: a malformed key is the usual cause
    suspicious = [r.key for r in results if r.verdict in (wm.WAITING_OTHER_SIDE, wm.NEVER_IN_STATE)]
    if suspicious:
        for name, src in sources:
            k, cond = _key_filter(key_field, suspicious, near=True)
            found = _rows(state_dfs[name].where(cond).select(k.alias("_key")).distinct(), src.describe())
            for key in suspicious:
                lookups[key][name].near = sorted({r["_key"] for r in found if r["_key"] and wm.near_miss_reason(key, r["_key"])})
    # 4. joins: for keys waiting on one side, when the watermark evicts them (from this side's observed evictions)
    waiting_sides = {r.side for r in results if r.verdict == wm.WAITING_OTHER_SIDE and r.side}
    if kind == wm.JOIN and history is not None and any(watermarks.values()):
        for side in waiting_sides:
            horizon = _eviction_horizon(info, dict(sources)[side], first, batch, watermarks)
            if horizon:
                ctx.eviction_horizon[side] = horizon
    if suspicious or waiting_sides:
        results = run_all()
    return WhyMissingReport(
        info.path, op.operator_id, op.operator_name, kind, batch, key_field, fields, history, watermarks, results
    )


def _rows(df: Any, what: str) -> list[dict[str, Any]]:
    return to_arrow(df, what).to_pylist()


def _without_key(row: dict[str, Any]) -> dict[str, Any]:
    return {c: v for c, v in row.items() if c != "_key"}


def _read_changes(
    info: CheckpointInfo, src: StateSource, key_field: str, keys: list[str], start: int, end: int
) -> list[dict[str, Any]]:
    k, cond = _key_filter(key_field, keys, near=False)
    opts = {"readChangeFeed": "true", "changeStartBatchId": str(start), "changeEndBatchId": str(end)}
    return _rows(state_frame(info.path, src, opts).where(cond).withColumn("_key", k), f"the change feed of {src.describe()}")


def _window_explains(rows: list[dict[str, Any]], changes: list[dict[str, Any]]) -> bool:
    """Whether a window of join changes explains every row now in state: each (key, index) has an
    update in it and, if the row is matched, the update that marked it matched."""
    flags: dict[str, list[bool]] = {}
    for c in changes:
        if c["change_type"] == "update":
            flags.setdefault(json.dumps(wm.jsonable(c["key"]), sort_keys=True), []).append(
                bool((c.get("value") or {}).get("matched"))
            )
    for r in rows:
        seen = flags.get(json.dumps(wm.jsonable(r["key"]), sort_keys=True))
        if not seen or ((r.get("value") or {}).get("matched") and not any(seen)):
            return False
    return True


def _read_history(
    info: CheckpointInfo,
    sources: list[tuple[str, StateSource]],
    lookups: dict[str, dict[str, wm.StoreLookup]],
    keys: list[str],
    key_field: str,
    kind: str,
    first: int,
    batch: int,
) -> tuple[int, int] | None:
    """Fill each lookup's ``changes``; return the batch range searched (None: no change feed).

    Keys not in state need every retained batch (was it ever there?). Join keys in state only need
    the batches that explain their rows (when they were written and when they matched): the change
    feed is searched backwards in growing windows (3, 9, 27 ... batches) until it does, so a recent
    key costs a few batches of changes instead of the whole history. Other operators read it all.
    """
    with_history = [(n, s) for n, s in sources if s.has_change_feed]
    if not with_history:
        return None
    in_state = {key for key in keys if any(lk.rows for lk in lookups[key].values())}
    need_all = kind != wm.JOIN or len(in_state) < len(keys)
    size, start = 3, batch
    while True:
        start = first if need_all else max(first, batch - size + 1)
        try:
            for name, src in with_history:
                changes = _read_changes(info, src, key_field, keys, start, batch)
                for key in keys:
                    lookups[key][name].changes = [_without_key(r) for r in changes if r["_key"] == key]
                    lookups[key][name].changes_table = f"{table_name(src)}_changes"
        except StateReadError:
            for key in keys:  # e.g. RocksDB without changelog checkpointing: there is no change feed
                for lk in lookups[key].values():
                    lk.changes, lk.changes_table = None, None
            return None
        if start == first or all(_window_explains(lk.rows, lk.changes or []) for key in in_state for lk in lookups[key].values()):
            return start, batch
        size *= 3


def _eviction_horizon(
    info: CheckpointInfo, source: StateSource, start: int, end: int, watermarks: dict[int, int]
) -> tuple[int, int] | None:
    """Observed eviction delay of one join side (see ``why_missing.eviction_horizon``)."""
    from pyspark.sql import functions as F

    opts = {"readChangeFeed": "true", "changeStartBatchId": str(start), "changeEndBatchId": str(end)}
    df = state_frame(info.path, source, opts)
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
    rows = _rows(slim, f"the change feed of {source.describe()}")
    for r in rows:
        r["key"] = json.loads(r["key"])
    return wm.eviction_horizon(rows, watermarks)
