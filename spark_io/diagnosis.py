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
    has_change_feed,
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
    inferred_from: str | None = None  # the operator kind was inferred (no operator metadata)
    join_type: str | None = None
    history_method: str | None = None  # "change feed" | "state per batch"; None: no history searched
    history_error: str | None = None  # the history read that failed, with Spark's reason

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "operator_id": self.operator_id,
            "operator_name": self.operator_name,
            "operator_inferred_from": self.inferred_from,
            "batch_id": self.batch,
            "key_field": self.key_field,
            "join_type": self.join_type,
            "history": {
                "batches": list(self.history) if self.history else None,
                "method": self.history_method,
                "error": self.history_error,
            },
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


def typed_values(key_type: Any, key_field: str, keys: list[str]) -> tuple[str, dict[str, Any]]:
    """How keys are compared with the field (by its type), and each key's typed value where it parses."""
    import datetime as dt
    import decimal

    from pyspark.sql import types as T

    t = key_type[key_field].dataType
    parse: Any = None
    how = "as text"
    if isinstance(t, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        parse, how = (lambda x: int(float(x)) if float(x).is_integer() else None), f"as a number ({t.simpleString()})"
    elif isinstance(t, (T.FloatType, T.DoubleType)):
        parse, how = float, f"as a number ({t.simpleString()})"
    elif isinstance(t, T.DecimalType):
        parse, how = decimal.Decimal, f"as a number ({t.simpleString()})"
    elif isinstance(t, T.DateType):
        parse, how = dt.date.fromisoformat, "as a date"
    elif isinstance(t, (T.TimestampType, T.TimestampNTZType)):

        def parse(x: str) -> dt.datetime:
            v = dt.datetime.fromisoformat(x.replace("Z", "+00:00"))
            return v if v.tzinfo else v.replace(tzinfo=dt.UTC)

        how = "as a timestamp (UTC when no offset is given)"
    elif isinstance(t, T.BooleanType):
        parse, how = (lambda x: {"true": True, "false": False}.get(x.lower())), "as a boolean"
    values: dict[str, Any] = {}
    if parse is not None:
        for k in keys:
            try:
                v = parse(k.strip())
            except (ValueError, ArithmeticError):
                continue
            if v is not None:
                values[k] = v
    return how, values


def _key_filter(key_field: str, keys: list[str], near: bool, typed: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """(the key field as text, the condition): exact text, or the typed value, or (near) look-alikes."""
    from pyspark.sql import functions as F

    raw = F.col("key").getField(key_field)
    k = raw.cast("string")
    cond = k.isin(keys)
    if typed:
        cond = cond | raw.isin(list(typed.values()))
    if near:
        norms = sorted({wm.normalize(x) for x in keys if wm.normalize(x)})
        digit_keys = sorted({wm.digits(x) for x in keys if len(wm.digits(x)) >= 2})
        if norms:
            cond = cond | F.lower(F.regexp_replace(k, "[^0-9A-Za-z]", "")).isin(norms)
        if digit_keys:
            cond = cond | F.regexp_replace(k, "[^0-9]", "").isin(digit_keys)
    return k, cond


def _owner(found_key: Any, keys: list[str], typed: dict[str, Any]) -> list[str]:
    """Which of the user's keys a row's key field value answers (by text or by typed value)."""
    text = found_key if isinstance(found_key, str) else None
    return [k for k in keys if k == text or (k in typed and typed[k] == found_key)]


def key_fields_of(info: CheckpointInfo, operator_id: int) -> list[str]:
    """The key fields a user can match for an operator, the default one first."""
    _, src = lookup_sources(operator_of(info, operator_id))[0]
    df = state_frame(info.path, src, {"batchId": str(resolve_batch(info, None))})
    fields = key_fields(df)
    if not fields:
        return []
    first = _non_time_first(df, fields)
    return [first, *(f for f in fields if f != first)]


MAX_STATE_BATCHES = 30  # history without a change feed: the state at this many retained batches, newest first


def why_missing(
    path: str,
    keys: list[str],
    operator_id: int | None = None,
    batch_id: int | None = None,
    key_field: str | None = None,
    info: CheckpointInfo | None = None,
    join_type: str | None = None,
) -> WhyMissingReport:
    keys = [k for k in dict.fromkeys(keys)]
    if not keys or not all(isinstance(k, str) for k in keys):
        raise InvalidInput("Give at least one key (one per line in the app, or as arguments to the CLI).")
    if join_type is not None and join_type not in wm.JOIN_TYPES:
        raise InvalidInput(f"Unknown join type '{join_type}': use one of {', '.join(wm.JOIN_TYPES)}.")
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
    first_df = next(iter(state_dfs.values()))
    fields = key_fields(first_df)
    if not fields:
        raise InvalidInput(f"Operator {op.operator_id} ({op.operator_name}) has no key fields to match.")
    if key_field is None:
        key_field = _non_time_first(first_df, fields)
    elif key_field not in fields:
        raise InvalidInput(f"The key has no field '{key_field}'. Its fields are: {', '.join(fields)}.")
    matched_as, typed = typed_values(first_df.schema["key"].dataType, key_field, keys)

    committed = [b.batch_id for b in info.committed_batches]
    first = committed[0]
    watermarks = {b.batch_id: b.watermark_ms for b in info.batches}
    names = [name for name, _ in sources]
    lookups: dict[str, dict[str, wm.StoreLookup]] = {
        key: {name: wm.StoreLookup(name, table_name(src)) for name, src in sources} for key in keys
    }
    value_type = first_df.schema["value"].dataType if "value" in first_df.columns else None
    join_format = 2 if kind != wm.JOIN or (value_type is not None and "matched" in value_type.fieldNames()) else 1

    # 1. the state at the batch: one filtered scan per store
    for name, src in sources:
        found = _matching(state_dfs[name], key_field, keys, typed, f"{src.describe()} at batch {batch}")
        for key in keys:
            lookups[key][name].rows = [_without_key(r) for r in found if key in _owner(r["_raw"], keys, typed)]

    ctx = wm.Context(
        kind,
        op.operator_id,
        op.operator_name,
        batch,
        watermarks,
        key_field,
        first_batch=first,
        join_type=join_type,
        join_format=join_format,
        batch_times={b.batch_id: b.timestamp_ms for b in info.batches},
        single_operator=len(info.operators) == 1,
    )
    # 2. history: the change feed, or the state batch by batch where there is none
    _read_history(info, op, sources, lookups, keys, key_field, typed, ctx, committed)

    def run_all() -> list[wm.KeyDiagnosis]:
        out = [wm.diagnose(key, ctx, [lookups[key][n] for n in names]) for key in keys]
        for d in out:
            d.matched_as = matched_as if d.key in typed else "as text"
            for note in ctx.notes:
                d.explanation += f" {note}"
        return out

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
    waiting_sides = {r.side for r in results if r.verdict in (wm.WAITING_OTHER_SIDE, wm.CONDITION_NOT_MET) and r.side}
    if kind == wm.JOIN and ctx.history_method == "change feed" and not ctx.history_error and any(watermarks.values()):
        for side in waiting_sides:
            try:
                horizon = _eviction_horizon(info, dict(sources)[side], first, batch, watermarks)
            except StateReadError as e:
                ctx.notes.append(
                    f"(The eviction estimate needs the {side} side's change feed, which could not be read: {e.message})"
                )
                continue
            if horizon:
                ctx.eviction_horizon[side] = horizon
    if suspicious or waiting_sides:
        results = run_all()
    return WhyMissingReport(
        info.path,
        op.operator_id,
        op.operator_name,
        kind,
        batch,
        key_field,
        fields,
        ctx.history,
        watermarks,
        results,
        inferred_from=op.inferred_from,
        join_type=join_type,
        history_method=ctx.history_method if ctx.history else None,
        history_error=ctx.history_error,
    )


def _matching(df: Any, key_field: str, keys: list[str], typed: dict[str, Any], what: str) -> list[dict[str, Any]]:
    """Rows whose key field is one of the keys (by text or typed value), with ``_raw`` (the field's value)."""
    from pyspark.sql import functions as F

    k, cond = _key_filter(key_field, keys, near=False, typed=typed)
    return _rows(df.where(cond).withColumn("_raw", F.col("key").getField(key_field)).withColumn("_key", k), what)


def _rows(df: Any, what: str) -> list[dict[str, Any]]:
    return to_arrow(df, what).to_pylist()


def _without_key(row: dict[str, Any]) -> dict[str, Any]:
    return {c: v for c, v in row.items() if c not in ("_key", "_raw")}


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
    op: OperatorInfo,
    sources: list[tuple[str, StateSource]],
    lookups: dict[str, dict[str, wm.StoreLookup]],
    keys: list[str],
    key_field: str,
    typed: dict[str, Any],
    ctx: wm.Context,
    committed: list[int],
) -> None:
    """Fill each lookup's ``changes`` and ``ctx.history`` (the batch range searched).

    With a change feed: keys not in state need every retained batch (was it ever there?); join keys
    in state only need the batches that explain their rows, searched backwards in growing windows
    (3, 9, 27 ... batches). Without one (RocksDB without changelog checkpointing): the state at each
    of the last MAX_STATE_BATCHES retained batches, turned into updates and deletes. A failed read
    is recorded in ``ctx.history_error``: verdicts that depend on history become ``unknown``.
    """
    batch, first = ctx.batch, ctx.first_batch
    with_history = [(n, s) for n, s in sources if s.has_change_feed]
    if not with_history:
        return
    if not has_change_feed(info, op.operator_id):
        _history_from_state(info, sources, lookups, keys, key_field, typed, ctx, committed)
        return
    # a join key is explained by recent batches only when it is matched or on both sides: a key on one side
    # needs the other side's whole history (was its row there, and evicted unmatched?)
    in_state = {
        key
        for key in keys
        if all(lk.rows for lk in lookups[key].values())
        or any((r.get("value") or {}).get("matched") for lk in lookups[key].values() for r in lk.rows)
    }
    need_all = ctx.kind != wm.JOIN or len(in_state) < len(keys)
    size = 3
    while True:
        start = first if need_all else max(first, batch - size + 1)
        try:
            for name, src in with_history:
                changes = _read_changes(info, src, key_field, keys, typed, start, batch)
                for key in keys:
                    lookups[key][name].changes = [_without_key(r) for r in changes if key in _owner(r["_raw"], keys, typed)]
                    lookups[key][name].changes_table = f"{table_name(src)}_changes"
        except StateReadError as e:
            ctx.history_error = e.message
            for key in keys:
                for lk in lookups[key].values():
                    lk.changes, lk.changes_table = None, None
            return
        if start == first or all(_window_explains(lk.rows, lk.changes or []) for key in in_state for lk in lookups[key].values()):
            ctx.history = (start, batch)
            return
        size *= 3


def _read_changes(
    info: CheckpointInfo, src: StateSource, key_field: str, keys: list[str], typed: dict[str, Any], start: int, end: int
) -> list[dict[str, Any]]:
    opts = {"readChangeFeed": "true", "changeStartBatchId": str(start), "changeEndBatchId": str(end)}
    what = f"the change feed of {src.describe()} for batches {start}–{end}"
    return _matching(state_frame(info.path, src, opts, what), key_field, keys, typed, what)


def _history_from_state(
    info: CheckpointInfo,
    sources: list[tuple[str, StateSource]],
    lookups: dict[str, dict[str, wm.StoreLookup]],
    keys: list[str],
    key_field: str,
    typed: dict[str, Any],
    ctx: wm.Context,
    committed: list[int],
) -> None:
    """History without a change feed: the key's rows at each retained batch, as the change feed would show them."""
    upto = [b for b in committed if b <= ctx.batch][-MAX_STATE_BATCHES:]
    ctx.history_method = "state per batch"
    try:
        for name, src in sources:
            per_batch = []
            for b in upto:
                what = f"{src.describe()} at batch {b}"
                per_batch.append(
                    (b, _matching(state_frame(info.path, src, {"batchId": str(b)}, what), key_field, keys, typed, what))
                )
            for key in keys:
                lookups[key][name].changes = replay_as_changes(
                    [(b, [r for r in rows if key in _owner(r["_raw"], keys, typed)]) for b, rows in per_batch]
                )
    except StateReadError as e:
        ctx.history_error = e.message
        for key in keys:
            for lk in lookups[key].values():
                lk.changes = None
        return
    ctx.history = (upto[0], upto[-1])
    if upto[0] > ctx.first_batch:
        ctx.notes.append(f"(History without a change feed covers the last {len(upto)} retained batches, from batch {upto[0]}.)")


def replay_as_changes(per_batch: list[tuple[int, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Rows present at successive batches -> change-feed-like rows: an update where a row appears or
    changes, a delete where it disappears."""
    out: list[dict[str, Any]] = []
    prev: dict[str, dict[str, Any]] = {}
    for b, rows in per_batch:
        now = {json.dumps(wm.jsonable(r.get("key")), sort_keys=True): r for r in rows}
        for k, r in now.items():
            if k not in prev or wm.jsonable(prev[k].get("value")) != wm.jsonable(r.get("value")):
                out.append({**_without_key(r), "batch_id": b, "change_type": "update"})
        for k, r in prev.items():
            if k not in now:
                out.append({**_without_key(r), "batch_id": b, "change_type": "delete", "value": None})
        prev = now
    return out


def _eviction_horizon(
    info: CheckpointInfo, source: StateSource, start: int, end: int, watermarks: dict[int, int]
) -> tuple[int, int] | None:
    """Observed eviction delay of one join side (see ``why_missing.eviction_horizon``)."""
    from pyspark.sql import functions as F

    opts = {"readChangeFeed": "true", "changeStartBatchId": str(start), "changeEndBatchId": str(end)}
    what = f"the change feed of {source.describe()}"
    df = state_frame(info.path, source, opts, what)
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
    rows = _rows(slim, what)
    for r in rows:
        r["key"] = json.loads(r["key"])
    return wm.eviction_horizon(rows, watermarks)
