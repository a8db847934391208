"""Which keys never matched? Reads what ``analysis.unmatched`` needs (each join side's state at
the batch and its change feed, or an aggregation's state) through the chosen engine."""

from __future__ import annotations

from statelens.analysis.core import key_columns
from statelens.analysis.core.errors import InvalidInput
from statelens.analysis.core.key_columns import columns_equal_to_key
from statelens.analysis.core.model import (
    JOIN_ROW_FIELDS,
    CheckpointInfo,
    StateSource,
    default_operator,
    operator_of,
    resolve_batch,
)
from statelens.analysis.core.operator_kinds import kind_of
from statelens.analysis.verdicts import why_missing as wm
from statelens.analysis.verdicts.unmatched import UnmatchedReport, join_unmatched, waiting_windows
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers import engine
from statelens.spark_io.readers.state_reader import has_change_feed

# why an operator kind has no keys that "never matched", said when it is asked
_WHY_NOT = {
    wm.DEDUP: "A deduplication keeps only first occurrences, so its state does not show the rows it dropped. ",
    wm.DEDUP_WITHIN: "A deduplication keeps only first occurrences, so its state does not show the rows it dropped. ",
    wm.SESSION: "A session window's open sessions wait for the watermark: growth and why-missing show them. ",
    wm.GROUP_STATE: "A user's function keeps what it chooses; what it emitted is not in its state. ",
    wm.TWS: "A user's function keeps what it chooses; what it emitted is not in its state. ",
}


def unmatched(
    path: str,
    operator_id: int | None = None,
    batch_id: int | None = None,
    since: int | None = None,
    info: CheckpointInfo | None = None,
    join_type: str | None = None,
    event_log: str | None = None,
) -> UnmatchedReport:
    """``join_type``: the join's type (else the event log's plan says it): keys evicted unmatched from a
    preserved side of an outer join were emitted null-padded."""
    info = info or read_checkpoint(path)
    op = default_operator(info) if operator_id is None else operator_of(info, operator_id)
    if join_type is not None and join_type not in wm.JOIN_TYPES:
        raise InvalidInput(f"Unknown join type '{join_type}': use one of {', '.join(wm.JOIN_TYPES)}.")
    if join_type is None and event_log and op.is_join:
        from statelens.spark_io.logs.event_logs import read_progress

        plan = read_progress(event_log, info).joins.get(op.operator_id)
        join_type = plan.join_type if plan else None
    batch = resolve_batch(info, batch_id)
    kind = kind_of(op.operator_name)
    committed = [b.batch_id for b in info.committed_batches if b.batch_id <= batch]
    engines: set[str] = set()
    if kind == wm.JOIN:
        sources = {side: StateSource(op.operator_id, store_name=op.join_rows_store(side)) for side in ("left", "right")}
        states = {}
        for side, src in sources.items():
            states[side], _ = engine.read_state(info.path, src, batch, info=info)
            engines.add(engine.engine_of(states[side]))
        fields = [f.name for f in states["left"].schema.field("key").type if f.name not in JOIN_ROW_FIELDS]
        by_side = {side: columns_equal_to_key(t) for side, t in states.items()}
        key_name = " | ".join(key_columns.label(f, key_columns.key_column(f, by_side)) for f in fields)
        report = UnmatchedReport(op.operator_id, op.operator_name, batch, None, key_name=key_name, join_type=join_type)
        feeds = None
        if has_change_feed(info, op.operator_id):
            feeds = {}
            for side, src in sources.items():
                feeds[side], start, end = engine.read_changes(info.path, src, committed[0], batch, info=info)
                engines.add(engine.engine_of(feeds[side]))
            report.history = (start, end)
        else:
            report.notes.append(
                "No change feed (RocksDB without changelog checkpointing): keys already evicted cannot be listed, "
                "and the batches keys entered state are not known."
            )
        report.keys = join_unmatched(states, feeds, fields, join_type)
        if join_type is None:
            report.notes.append(
                "The join type is not known (give the query's event log or the join type): keys evicted unmatched read "
                "as evicted; in an outer join the preserved side's were emitted null-padded."
            )
        if committed and committed[0] > 0:
            report.notes.append(f"Batches before {committed[0]} were purged: keys evicted before then are not listed.")
    elif kind == wm.AGGREGATION:
        src = StateSource(op.operator_id, store_name=op.stores[0].store_name if op.stores else None)
        state, _ = engine.read_state(info.path, src, batch, info=info)
        engines.add(engine.engine_of(state))
        fields = [f.name for f in state.schema.field("key").type if not f.type.num_fields]
        report = UnmatchedReport(op.operator_id, op.operator_name, batch, None)
        watermark = next((b.watermark_ms for b in info.batches if b.batch_id == batch), 0)
        report.keys = waiting_windows(state, fields, watermark)
        if not report.keys and not watermark:
            report.notes.append("The query has no watermark: windows are never closed (complete or update mode).")
    else:
        raise InvalidInput(
            f"Operator {op.operator_id} is a {kind.replace('_', ' ')}: 'which keys never matched' is answered for "
            "stream-stream joins (unmatched keys) and windowed aggregations (windows still waiting). "
            + _WHY_NOT.get(kind, "")
            + "Ask why-missing about a key of it instead."
        )
    report.engine = "spark" if "spark" in engines else "native"
    return report.since(since)
