"""The overview of a checkpoint: batches, watermarks, operators, captured configuration."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from analysis.model import CheckpointInfo, streaming_conf


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
            }
            for b in info.batches
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


def batches_table(info: CheckpointInfo) -> pa.Table:
    """One row per batch, watermark and timestamp as UTC datetimes (None when 0)."""
    ts_type = pa.timestamp("ms", tz="UTC")
    return pa.table(
        {
            "batch_id": pa.array([b.batch_id for b in info.batches], pa.int64()),
            "committed": pa.array([b.committed for b in info.batches], pa.bool_()),
            "watermark": pa.array([_ts(b.watermark_ms) for b in info.batches], ts_type),
            "watermark_ms": pa.array([b.watermark_ms for b in info.batches], pa.int64()),
            "timestamp": pa.array([_ts(b.timestamp_ms) for b in info.batches], ts_type),
        }
    )


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
