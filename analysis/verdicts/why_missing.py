"""'Why is key X missing': one verdict per key, with evidence, a timeline and the SQL behind it.

Pure functions. ``spark_io.gather.diagnosis`` reads, for each key, the rows that hold it in every
relevant store at the chosen batch, its change-feed history, and near-miss keys; this
module turns them into a ``KeyDiagnosis``. Verdicts by operator:

* stream-stream join: ``matched``, ``waiting_for_other_side``, ``condition_not_met``,
  ``evicted``, ``never_in_state`` (the State Reader blog's left/right outer join, plus history)
* aggregation: ``waiting_for_watermark`` (windowed) or ``in_state``, ``evicted``, ``never_in_state``
* dropDuplicates(WithinWatermark): ``dropping_duplicates``, ``evicted``, ``never_in_state``
* session windows: ``session_open``, ``evicted``, ``never_in_state``
* applyInPandasWithState / flatMapGroupsWithState / transformWithState: ``in_state``,
  ``evicted``, ``never_in_state``
* any operator, given the missing record's event time and the query's progress:
  ``dropped_as_late`` (see ``apply_lateness``)

The parts live by job beside it: ``key_verdicts`` (verdicts and inputs), ``key_format``,
``near_miss``, ``key_timeline``, ``key_sql``, ``verdict_common``, ``join_verdicts``,
``stateful_verdicts`` and ``lateness``; the names callers use are re-exported here.
"""

from __future__ import annotations

import json
from typing import Any

from statelens.analysis.core.key_format import event_time_ms, fmt_duration, jsonable, row_time_ms, sql_literal, to_ms
from statelens.analysis.core.near_miss import digits, near_miss_reason, normalize
from statelens.analysis.verdicts.join_verdicts import diagnose_join, eviction_horizon
from statelens.analysis.verdicts.key_sql import evidence_queries
from statelens.analysis.verdicts.key_timeline import key_timeline
from statelens.analysis.verdicts.key_verdicts import (
    AGGREGATION,
    CONDITION_NOT_MET,
    DEDUP,
    DEDUP_WITHIN,
    DROPPED_AS_LATE,
    DROPPING_DUPLICATES,
    EMITTED_UNMATCHED,
    EVICTED,
    GROUP_STATE,
    IN_STATE,
    JOIN,
    JOIN_TYPES,
    MATCHED,
    MAX_EVIDENCE,
    NEVER_IN_STATE,
    PRESERVED,
    SESSION,
    SESSION_OPEN,
    TWS,
    UNKNOWN,
    WAITING_OTHER_SIDE,
    WAITING_WATERMARK,
    Context,
    KeyDiagnosis,
    StoreLookup,
)
from statelens.analysis.verdicts.lateness import apply_lateness
from statelens.analysis.verdicts.stateful_verdicts import diagnose_stateful
from statelens.analysis.verdicts.verdict_common import near_misses


def _evidence_order(row: dict[str, Any]) -> tuple[Any, ...]:
    b = row.get("batch_id")
    return (
        b if isinstance(b, int) else -1,
        str(row.get("store", "")),
        json.dumps(jsonable(row.get("key")), sort_keys=True, default=str),
        json.dumps(
            jsonable({k: v for k, v in row.items() if k not in ("store", "batch_id", "key")}), sort_keys=True, default=str
        ),
    )


def diagnose(key: str, ctx: Context, lookups: list[StoreLookup]) -> KeyDiagnosis:
    """One key's verdict. For joins ``lookups`` is [left, right]; otherwise every store or state variable."""
    if ctx.kind == JOIN:
        d = diagnose_join(key, ctx, lookups[0], lookups[1])
    else:
        d = diagnose_stateful(key, ctx, lookups)
    d.timeline = key_timeline(lookups, ctx)
    d.queries = evidence_queries(key, ctx, lookups)
    # in an order of their own, not the reader's: the same rows are shown (and cut) whoever read them
    d.evidence.sort(key=_evidence_order)
    if len(d.evidence) > MAX_EVIDENCE:
        d.explanation += f" (Evidence: the first {MAX_EVIDENCE} of {len(d.evidence)} rows; the SQL below returns all.)"
        d.evidence = d.evidence[:MAX_EVIDENCE]
    return d


__all__ = [
    "AGGREGATION",
    "CONDITION_NOT_MET",
    "DEDUP",
    "DEDUP_WITHIN",
    "DROPPED_AS_LATE",
    "DROPPING_DUPLICATES",
    "EMITTED_UNMATCHED",
    "EVICTED",
    "GROUP_STATE",
    "IN_STATE",
    "JOIN",
    "JOIN_TYPES",
    "MATCHED",
    "MAX_EVIDENCE",
    "NEVER_IN_STATE",
    "PRESERVED",
    "SESSION",
    "SESSION_OPEN",
    "TWS",
    "UNKNOWN",
    "WAITING_OTHER_SIDE",
    "WAITING_WATERMARK",
    "Context",
    "KeyDiagnosis",
    "StoreLookup",
    "apply_lateness",
    "diagnose",
    "digits",
    "event_time_ms",
    "eviction_horizon",
    "fmt_duration",
    "jsonable",
    "near_miss_reason",
    "near_misses",
    "normalize",
    "row_time_ms",
    "sql_literal",
    "to_ms",
]
