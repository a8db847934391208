"""One key's fate: each of its records followed (``walk``), then judged (``outcome``); the input
columns a key may be in."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from analysis.core.inputs import InputSearch, event_time_us
from analysis.core.state_access import key_text
from analysis.fate.model import EMITTED, EMITTED_UNMATCHED, MATCHED, WRITTEN, KeyFate, Output, group_text
from analysis.fate.outcome import judge
from analysis.fate.walk import FateWalk
from analysis.verdicts.key_verdicts import GROUP_STATE, TWS, operator_kind

# a file sink's rows whose column holds one of the values: (column, values) -> (batch, file, row values)
SinkSearch = Callable[[str, list[str]], list[tuple[int | None, str, dict[str, Any]]]]


def key_fate(
    key: str,
    search: InputSearch,
    walk: FateWalk | None,
    written: list[Output],
    why_not: str | None = None,
    sink_searched: bool = False,
    sink: SinkSearch | None = None,
) -> KeyFate:
    """The fate of one key: each record followed, what reached the output, what waits, why the rest
    did not. ``written``: the key's rows found in a file sink's files (``sink_searched``: a sink was
    searched); ``sink``: the sink's rows by a column's values, to find the rows the key's records
    became downstream (a window of another key); ``why_not``: why the input was not searched at all."""
    records = search.of(key)
    fate = KeyFate(key, input_searched=why_not is None and search.files_searched > 0, input_note=why_not or search.note())
    fate.near = [r for r in search.near if r.key == key]
    function_ops: set[int] = set()
    if walk is not None:
        for rec in records:
            fate.records.append(walk.follow(rec, records))
        fate.notes = list(walk.notes)
        function_ops = {o.operator_id for o in walk.info.operators if operator_kind(o.operator_name) in (GROUP_STATE, TWS)}
    if sink is not None:
        own = {(o.batch_id, o.file, o.group) for o in written}
        more = downstream_writes([o for r in fate.records for o in r.outputs], sink)
        written = written + list(dict.fromkeys(o for o in more if (o.batch_id, o.file, o.group) not in own))
    judge(fate, written, sink_searched, function_ops, search)
    return fate


def downstream_writes(outputs: list[Output], sink: SinkSearch) -> list[Output]:
    """The sink's rows of what the last operator emitted: the same key (a window, the group's
    columns) written in the batch it was emitted in."""
    emitted = [(o, json.loads(o.key)) for o in outputs if o.key and o.kind in (EMITTED, MATCHED, EMITTED_UNMATCHED)]
    by_column: dict[str, set[str]] = {}
    for _, key in emitted:
        for col, v in key.items():
            if not isinstance(v, dict) and key_text(v) is not None:
                by_column.setdefault(col, set()).add(str(key_text(v)))
    if not by_column:
        return []
    col = min(by_column, key=lambda c: len(by_column[c]))  # the most telling column: the fewest values
    out = []
    for batch, file, values in sink(col, sorted(by_column[col])):
        for o, key in emitted:
            if o.batch_id == batch and all(_same(v, values.get(k)) for k, v in key.items()):
                shown = {k: v for k, v in values.items() if k not in ("filename", "file_row_number")}
                out.append(Output(None, group_text(shown), batch, WRITTEN, file, null_padded=o.null_padded, file=file, key=o.key))
    return out


def _same(state: Any, sink: Any) -> bool:
    """A state key's field (as JSON: times as ISO text) against the sink row's value."""
    if isinstance(state, dict):
        return isinstance(sink, dict) and all(_same(v, sink.get(k)) for k, v in state.items())
    t = event_time_us(state) if isinstance(state, str) and state[:4].isdigit() and "T" in state else None
    if t is not None:
        return t == event_time_us(sink) if isinstance(sink, (str, dt.datetime)) else False
    return key_text(state) == key_text(sink)


def search_columns(walk: FateWalk, key_field: str | None) -> list[str]:
    """The input columns a key may be in, the likeliest first: every operator's lookup column (the
    column its state key takes), operator 0's first; with ``key_field``, that column (or the
    column of that state key field: ``field0`` of a join is its key column; none: no state key has it)."""
    cols: list[str] = []
    for op in sorted(walk.info.operators, key=lambda o: o.operator_id):
        view = walk.view(op)
        for side in view.keys:
            for i, c in enumerate(view.keys[side]):
                if c.window is not None or c.name in ("window", "session_window"):
                    continue
                column = c.source_column or c.name
                if key_field is None or key_field in (column, c.name, f"field{i}"):
                    cols.append(column)
    return list(dict.fromkeys(cols))
