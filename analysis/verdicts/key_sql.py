"""The DuckDB queries over the SQL page's tables that reproduce a key's evidence."""

from __future__ import annotations

from statelens.analysis.core.key_format import sql_literal
from statelens.analysis.verdicts.key_verdicts import JOIN, Context, StoreLookup


def evidence_queries(key: str, ctx: Context, lookups: list[StoreLookup]) -> list[dict[str, str]]:
    lit = sql_literal(key)
    kf = ctx.key_field
    out = []
    if ctx.kind == JOIN and len(lookups) == 2:
        left, right = lookups
        out.append(
            {
                "title": "Both sides' state for the key (the State Reader blog's outer join)",
                "sql": (
                    f"SELECT coalesce(l.key.{kf}, r.key.{kf}) AS join_key, l.key.index AS left_index, "
                    "l.value.matched AS left_matched, l.value AS left_value,\n"
                    "       r.key.index AS right_index, r.value.matched AS right_matched, r.value AS right_value\n"
                    f"FROM {left.table} l\nFULL OUTER JOIN {right.table} r ON l.key.{kf} = r.key.{kf}\n"
                    f"WHERE CAST(coalesce(l.key.{kf}, r.key.{kf}) AS VARCHAR) = {lit}"
                ),
            }
        )
    else:
        for lk in lookups:
            out.append(
                {
                    "title": f"State rows for the key ({lk.name})",
                    "sql": f"SELECT * FROM {lk.table} WHERE CAST(key.{kf} AS VARCHAR) = {lit}",
                }
            )
    for lk in lookups:
        if lk.changes_table:
            out.append(
                {
                    "title": f"History of the key ({lk.name} change feed)",
                    "sql": (
                        f"SELECT batch_id, change_type, key, value, partition_id FROM {lk.changes_table}\n"
                        f"WHERE CAST(key.{kf} AS VARCHAR) = {lit} ORDER BY batch_id"
                    ),
                }
            )
    return out
