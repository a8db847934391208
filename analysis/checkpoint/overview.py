"""The overview of a checkpoint: batches, watermarks, operators, captured configuration."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from statelens.analysis.core.model import JOIN_ROW_FIELDS, CheckpointInfo, streaming_conf


def overview_dict(info: CheckpointInfo) -> dict[str, Any]:
    """The CLI's ``overview --json`` contract."""
    return {
        "query_id": info.query_id,
        "batches": [
            {
                "batch_id": b.batch_id,
                "committed": b.committed,
                "watermark_ms": b.watermark_ms,
                "timestamp_ms": b.timestamp_ms,
                "partitions": b.shuffle_partitions,
            }
            for b in info.batches
        ],
        "repartitions": [
            {"batch_id": r.batch_id, "from": r.before, "to": r.after, "committed": r.committed} for r in info.repartitions
        ],
        "operators": [
            {
                "operator_id": op.operator_id,
                "operator_name": op.operator_name,
                "stores": [{"store_name": s.store_name, "num_partitions": s.num_partitions} for s in op.stores],
            }
            for op in info.operators
        ],
    }


def _ts(ms: int) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC) if ms else None


def batches_table(info: CheckpointInfo, tz: str = "UTC") -> pa.Table:
    """One row per batch, watermark and timestamp as datetimes in ``tz`` (None when 0)."""
    ts_type = pa.timestamp("ms", tz=tz)
    return pa.table(
        {
            "batch_id": pa.array([b.batch_id for b in info.batches], pa.int64()),
            "committed": pa.array([b.committed for b in info.batches], pa.bool_()),
            "watermark": pa.array([_ts(b.watermark_ms) for b in info.batches], ts_type),
            "watermark_ms": pa.array([b.watermark_ms for b in info.batches], pa.int64()),
            "timestamp": pa.array([_ts(b.timestamp_ms) for b in info.batches], ts_type),
            "partitions": pa.array([b.shuffle_partitions for b in info.batches], pa.int64()),
        }
    )


def repartition_lines(info: CheckpointInfo) -> list[str]:
    """One sentence per offline state repartition (Spark 4.2+)."""
    return [
        f"Batch {r.batch_id} repartitioned the state offline from {r.before} to {r.after} partitions"
        + ("" if r.committed else " and did not finish: rerun the repartition with the same count before restarting the query")
        + "."
        for r in info.repartitions
    ]


def conf_table(info: CheckpointInfo) -> pa.Table:
    conf = streaming_conf(info.conf)
    return pa.table({"setting": list(conf), "value": list(conf.values())})


def summary(info: CheckpointInfo) -> dict[str, Any]:
    """Headline facts for the overview page."""
    committed = info.committed_batches
    watermarks = [b.watermark_ms for b in info.batches if b.watermark_ms]
    return {
        "query_id": info.query_id,
        "batches": len(info.batches),
        "committed": len(committed),
        "first_batch": info.batches[0].batch_id if info.batches else None,
        "last_committed": info.last_committed,
        "uncommitted": info.uncommitted,
        "watermark_ms": watermarks[-1] if watermarks else 0,
        "provider": info.provider,
        "shuffle_partitions": info.conf.get("spark.sql.shuffle.partitions"),
        "operators": len(info.operators),
    }


def _type_text(t: Any) -> str:
    if isinstance(t, dict):
        if t.get("type") == "struct":
            return "struct<" + ", ".join(f"{f.get('name')}: {_type_text(f.get('type'))}" for f in t.get("fields", [])) + ">"
        return str(t.get("type", "?"))
    return str(t)


def key_text(fields: list[dict[str, Any]]) -> str:
    """A state key's fields as ``name: type``; a join's ``index`` (its row counter) left out, a
    transformWithState ``key`` struct shown by its fields."""
    if len(fields) >= 1 and fields[0].get("name") == "key" and isinstance(fields[0].get("type"), dict):
        fields = fields[0]["type"].get("fields", [])
    return ", ".join(f"{f.get('name')}: {_type_text(f.get('type'))}" for f in fields if f.get("name") not in JOIN_ROW_FIELDS)


def operators_table(
    info: CheckpointInfo, keys: dict[int, list[dict[str, Any]]], problems: dict[int, str] | None = None
) -> pa.Table:
    """Every operator at a glance: kind, key, stores, partitions, provider, state variables.

    ``keys``: operator -> its key fields from the state schema files, ``problems``: operator ->
    why its schema file could not be read (both from ``read_key_fields``)."""
    problems = problems or {}

    def key_of(op_id: int) -> str:
        if op_id in problems:
            return f"unknown: {problems[op_id]}"
        return key_text(keys.get(op_id, [])) or "unknown: no state schema file"

    columns: dict[str, list[Any]] = {
        "operator": [o.operator_id for o in info.operators],
        "kind": [o.operator_name + (" (inferred)" if o.inferred_from else "") for o in info.operators],
        "key": [key_of(o.operator_id) for o in info.operators],
        "stores": [", ".join(s.store_name for s in o.stores) for o in info.operators],
        "partitions": [max((s.num_partitions for s in o.stores), default=0) for o in info.operators],
        # the class without its package and suffix (the conf table has it whole): HDFSBacked, RocksDB
        "provider": [info.provider.removesuffix("StateStoreProvider") or info.provider for _ in info.operators],
        "state variables": [", ".join(o.state_variables) for o in info.operators],
    }
    if not any(columns["state variables"]):  # only transformWithState has them: no empty column
        del columns["state variables"]
    return pa.table(columns)
