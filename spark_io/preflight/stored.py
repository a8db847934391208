"""What the stored state shows of the deployed query, for what a changed one would do differently:
each operator's window widths and the newest event time it holds (read natively, once per store,
at the last committed batch), and how much state a new checkpoint would lose. A store that cannot
be read natively is named, with why: what depends on it is then not compared (never guessed)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from statelens.analysis.core.arrow_numpy import numpy_of
from statelens.analysis.core.errors import StateLensError
from statelens.analysis.core.model import CheckpointInfo, StateSource, is_tws, sources_of
from statelens.spark_io.readers.native.reader import NativeReader


@dataclass
class StoredFacts:
    widths: dict[int, list[int]] = field(default_factory=dict)  # operator -> distinct window widths (ms)
    newest: dict[int, tuple[int, int]] = field(default_factory=dict)  # operator -> [lo, hi) of its newest event time (ms)
    unread: list[str] = field(default_factory=list)  # stores not read, and why


SESSION_COLUMN = "session_window"  # the column session_window() gives a row (Spark's name, not a kind)


def _window(struct: pa.StructArray) -> tuple[pa.StructArray, bool] | None:
    """A row's time window (a tumbling or sliding ``window``, or a ``session_window``), and whether a session."""
    for name in ("window", SESSION_COLUMN):
        if name in [f.name for f in struct.type]:
            w = struct.field(name)
            if [f.name for f in w.type][:2] == ["start", "end"]:
                return w, name == SESSION_COLUMN
    return None


def _ms(col: pa.Array) -> pa.Array:
    return numpy_of(col.cast("int64")) // 1000


def stored_facts(info: CheckpointInfo, column: str | None) -> StoredFacts:
    """``column``: the changed query's watermark column (None: no newest event time is wanted)."""
    facts = StoredFacts()
    last = info.last_committed
    if last is None:
        return facts
    reader = NativeReader(info)
    for op in info.operators:
        if not op.stores or "transformWithState" in op.operator_name:
            continue
        stores = [op.join_rows_store(side) for side in ("left", "right")] if op.is_join else [op.stores[0].store_name]
        for store in stores:
            try:
                t = reader.state(StateSource(op.operator_id, store_name=store), last, keys_only=column is None and not op.is_join)
            except StateLensError as e:
                facts.unread.append(f"operator {op.operator_id} {store}: not read natively ({e.message})")
                continue
            if not t.num_rows:
                continue
            for part in [p for p in ("key", "value") if p in t.column_names]:
                struct = t[part].combine_chunks()
                found = None
                if (window := _window(struct)) is not None:
                    w, session = window
                    start, end = _ms(w.field("start")), _ms(w.field("end"))
                    if part == "key" and not session and not op.is_join:
                        facts.widths[op.operator_id] = sorted({int(x) for x in set((end - start).tolist())})
                    found = (int(start.max()), int(end.max()))
                elif column and column in [f.name for f in struct.type] and pa.types.is_timestamp(struct.type.field(column).type):
                    newest = int(_ms(struct.field(column)).max())
                    found = (newest, newest + 1)
                if found and column:
                    lo, hi = facts.newest.get(op.operator_id, found)
                    facts.newest[op.operator_id] = (max(lo, found[0]), max(hi, found[1]))
                    break
    return facts


def _distinct_keys(tables: list[pa.Table]) -> int:
    """Distinct grouping keys over the ``key`` columns of several reads (a transformWithState's variables)."""
    keys = [t.select(["key"]).flatten() for t in tables if t.num_rows]
    if not keys:
        return 0
    union = pa.concat_tables(keys, promote_options="permissive")
    return union.group_by(union.column_names).aggregate([]).num_rows


def state_size(info: CheckpointInfo) -> dict[int, tuple[int, int]]:
    """Operator -> (rows in all its stores, keys of its main store) at the last committed batch:
    what a new checkpoint loses (an operator whose stores are not read natively is left out). A
    transformWithState's rows are its variables' (a list's elements, a map's entries), its keys the
    grouping keys any variable holds."""
    last = info.last_committed
    if last is None:
        return {}
    out: dict[int, tuple[int, int]] = {}
    reader = NativeReader(info)
    for op in info.operators:
        try:
            if is_tws(op):
                tables = [reader.state(src, last, keys_only=True) for src in sources_of(op) if src.state_var]
                out[op.operator_id] = (sum(t.num_rows for t in tables), _distinct_keys(tables))
                continue
            counts = {
                s.store_name: reader.state(StateSource(op.operator_id, store_name=s.store_name), last, keys_only=True).num_rows
                for s in op.stores
            }
        except StateLensError:
            continue
        out[op.operator_id] = (sum(counts.values()), counts.get(op.default_store, max(counts.values(), default=0)))
    return out
