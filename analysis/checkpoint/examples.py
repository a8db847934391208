"""Example SQL for a checkpoint, over the workspace's documented table names."""

from __future__ import annotations

from statelens.analysis.core.model import CheckpointInfo, sources_of, table_name


def example_queries(info: CheckpointInfo) -> dict[str, str]:
    """Title -> SQL, tailored to the operators this checkpoint has."""
    out: dict[str, str] = {}
    for op in info.operators:
        sources = sources_of(op)
        if op.is_join:
            left = f"op{op.operator_id}_left_keyWithIndexToValue"
            right = f"op{op.operator_id}_right_keyWithIndexToValue"
            out[f"Join {op.operator_id}: left ⋈ right state, who is waiting for whom"] = (
                "-- The State Reader blog's diagnosis: outer-join both sides' state on the join key.\n"
                "-- matched = true: joined and emitted; a NULL side: waiting for the other side;\n"
                "-- both sides present, not matched: the time-range condition rejected them.\n"
                "SELECT coalesce(l.key.field0, r.key.field0) AS join_key,\n"
                "       l.value.matched AS left_matched, r.value.matched AS right_matched,\n"
                "       l.value AS left_value, r.value AS right_value\n"
                f"FROM {left} l\n"
                f"FULL OUTER JOIN {right} r ON l.key.field0 = r.key.field0\n"
                "ORDER BY join_key"
            )
            out[f"Join {op.operator_id}: unmatched rows per side"] = (
                f"SELECT 'left' AS side, value.matched AS matched, count(*) AS rows FROM {left} GROUP BY ALL\n"
                "UNION ALL\n"
                f"SELECT 'right', value.matched, count(*) FROM {right} GROUP BY ALL\n"
                "ORDER BY side, matched"
            )
            out[f"Join {op.operator_id}: keys with the most rows (hot keys)"] = (
                f"SELECT key.field0 AS join_key, count(*) AS rows FROM {left}\nGROUP BY ALL ORDER BY rows DESC LIMIT 20"
            )
        first = next((s for s in sources if not s.join_side), None)
        if first is None:
            continue
        name = table_name(first)
        out[f"Operator {op.operator_id} ({op.operator_name}): first rows of {name}"] = f"SELECT * FROM {name} LIMIT 100"
        out[f"Operator {op.operator_id}: rows per partition"] = (
            f"SELECT partition_id, count(*) AS rows FROM {name} GROUP BY ALL ORDER BY partition_id"
        )
        if not first.timers:
            out[f"Operator {op.operator_id}: changes per batch (change feed)"] = (
                f"SELECT batch_id, change_type, count(*) AS changes FROM {name}_changes\n"
                "GROUP BY ALL ORDER BY batch_id, change_type"
            )
    return out
