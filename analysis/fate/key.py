"""One key's fate: each of its records followed (``walk``), then judged (``outcome``); the input
columns a key may be in."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from statelens.analysis.core.operator_kinds import behaviour
from statelens.analysis.core.state_access import key_text
from statelens.analysis.fate.model import (
    EMITTED,
    EMITTED_UNMATCHED,
    MATCHED,
    REACHED_STATE,
    UNKNOWN,
    WRITTEN,
    Cause,
    KeyFate,
    Output,
    RecordFate,
    group_text,
)
from statelens.analysis.fate.outcome import judge, sink_value
from statelens.analysis.fate.walk import TIME_KEYS, FateWalk, defect
from statelens.analysis.inputs.records import InputSearch, event_time_us
from statelens.analysis.plan.static_table import StaticTable

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
    sink_columns: frozenset[str] | None = None,
) -> KeyFate:
    """The fate of one key: each record followed, what reached the output, what waits, why the rest
    did not. ``written``: the key's rows found in a file sink's files (``sink_searched``: a sink was
    searched); ``sink``: the sink's rows by a column's values, to find the rows the key's records
    became downstream (a window of another key); ``sink_columns``: the columns the sink's rows have (a
    row the state says was emitted, whose columns the sink has, is written only where the sink holds
    it); ``why_not``: why the input was not searched at all."""
    records = search.of(key)
    fate = KeyFate(key, input_searched=why_not is None and search.files_searched > 0, input_note=why_not or search.note())
    fate.near = [r for r in search.near if r.key == key]
    function_ops: set[int] = set()
    if walk is not None:
        for rec in records:
            fate.records.append(walk.follow(rec, records))
        fate.notes = list(walk.notes)
        function_ops = {o.operator_id for o in walk.info.operators if behaviour(o.kind).function}
    row_keys: dict[tuple[int | None, str | None, str], str] = {}
    if sink is not None:
        own = {(o.batch_id, o.file, o.group) for o in written}
        more = downstream_writes([o for r in fate.records for o in r.outputs], sink)
        more += function_writes(fate.records, function_ops, sink)
        row_keys = {(o.batch_id, o.file, o.group): o.key for o in more if o.key}  # the key's own rows too: their state key
        written = written + list(dict.fromkeys(o for o in more if (o.batch_id, o.file, o.group) not in own))
    judge(fate, written, sink_searched, function_ops, search, sink_columns, row_keys)
    if walk is not None and sink_searched and not written and sink_columns:
        fate.sink_lacks_key = bool(set(key_columns_of(walk)) & sink_columns)
    return fate


def failed_fate(key: str, e: Exception) -> KeyFate:
    """A key whose fate could not be followed for a defect: unknown, saying so (the other keys still answer)."""
    why = defect(e)
    fate = KeyFate(key, input_searched=False, input_note=why, outcome=UNKNOWN)
    fate.cause = Cause(UNKNOWN, None, None, None, None, why, why=why)
    fate.headline = f"Unknown: {why}."
    return fate


def downstream_writes(outputs: list[Output], sink: SinkSearch) -> list[Output]:
    """The sink's rows of what the last operator emitted: the same key (a window, the group's
    columns) written in the batch it was emitted in."""
    return _rows_of(
        [
            (o.key, (o.batch_id, o.batch_id), o.null_padded)
            for o in outputs
            if o.key and o.kind in (EMITTED, MATCHED, EMITTED_UNMATCHED)
        ],
        sink,
    )


def function_writes(records: list[RecordFate], function_ops: set[int], sink: SinkSearch) -> list[Output]:
    """The sink's rows of the groups a user's function holds the records in (the group's columns),
    written in the batch a record arrived or later: a function emits on a record, a timer, a timeout.
    So too the groups (windows) the last operator still holds a record in: in update or complete mode
    it emits a group in every batch that changes it."""
    wanted: list[tuple[str, tuple[int | None, int | None], bool]] = []
    for rf in records:
        wanted += [(w.key, (rf.record.batch_id or 0, None), False) for w in rf.waiting if w.key]
        last = rf.steps[-1] if rf.steps else None
        if last is not None and last.key and last.operator_id in function_ops and last.outcome == REACHED_STATE:
            wanted.append((last.key, (rf.record.batch_id or 0, None), False))
    return _rows_of(wanted, sink)


def _rows_of(wanted: list[tuple[str, tuple[int | None, int | None], bool]], sink: SinkSearch) -> list[Output]:
    """The sink's rows holding each state key (JSON) written in its batches (first, last: None is
    open), searched by the key's most telling column (the fewest values)."""
    keyed = [(json.loads(k), k, first, last, padded) for k, (first, last), padded in wanted]
    by_column: dict[str, set[str]] = {}
    for key, *_ in keyed:
        for col, v in key.items():
            if not isinstance(v, dict) and key_text(v) is not None:
                by_column.setdefault(col, set()).add(str(key_text(v)))
    if not by_column:
        return []
    col = min(by_column, key=lambda c: len(by_column[c]))
    out = []
    for batch, file, values in sink(col, sorted(by_column[col])):
        for key, kid, first, last, padded in keyed:
            if batch is None or (first is not None and batch < first) or (last is not None and batch > last):
                continue
            if all(_same(v, sink_value(values, k, v)) for k, v in key.items()):
                shown = {k: v for k, v in values.items() if k not in ("filename", "file_row_number")}
                out.append(Output(None, group_text(shown), batch, WRITTEN, file, null_padded=padded, file=file, key=kid))
    return out


def _same(state: Any, sink: Any) -> bool:
    """A state key's field (as JSON: times as ISO text) against the sink row's value."""
    if isinstance(state, dict):
        return isinstance(sink, dict) and all(_same(v, sink.get(k)) for k, v in state.items())
    t = event_time_us(state) if isinstance(state, str) and state[:4].isdigit() and "T" in state else None
    if t is not None:
        return t == event_time_us(sink) if isinstance(sink, (str, dt.datetime)) else False
    return key_text(state) == key_text(sink)


@dataclass(frozen=True)
class StaticLookup:
    """A key column a join with a static table gives (a region looked up from a country): the stream's
    records that get a key are those whose ``stream_column`` holds a value the table maps to it."""

    column: str  # the table's column the key is a value of
    stream_column: str  # the stream's column it is looked up by
    table_keys: tuple[str, ...]  # the table's columns the stream's is compared with
    table: StaticTable

    def values(self, key: str) -> list[str]:
        """The stream column's values that the table maps to the key."""
        return [str(v[0]) for v in self.table.giving(self.column, key, self.table_keys) if v and v[0] is not None]

    def via(self, value: str, key: str) -> str:
        return f"{self.stream_column} {value} is {self.column} {key} in {self.table.label}"


def static_lookups(walk: FateWalk, key_field: str | None) -> list[StaticLookup]:
    """The operators' key columns (or ``key_field``) that come from a static table, each with how a
    stream record gets a value of it: the join's key on the stream's side (single-column joins)."""
    out: list[StaticLookup] = []
    if walk.plan is None:
        return out
    for op in sorted(walk.info.operators, key=lambda o: o.operator_id):
        for cols in walk.view(op).keys.values():
            for c in cols:
                if c.scan not in walk.static_tables or (key_field is not None and key_field not in (c.name, c.source_column)):
                    continue
                out += [x for x in _through(walk, c.scan, c.source_column or c.name) if x not in out]
    if key_field is not None and not out:  # a column of a static table no operator is keyed by
        for scan, table in walk.static_tables.items():
            if key_field in table.columns:
                out += _through(walk, scan, key_field)
    return out


def _through(walk: FateWalk, scan: int | None, column: str) -> list[StaticLookup]:
    """How a stream record gets a static table's column: the joins whose static side reads the table."""
    out = []
    for join in walk.plan.batch_joins.values() if walk.plan else []:
        static = next((s for s, scans in join.scans.items() if scan in scans), None)
        if static is None or scan is None or len(join.keys[static]) != 1 or column in join.keys[static]:
            continue  # (the column the stream is joined by is the stream's own)
        stream = "right" if static == "left" else "left"
        out.append(StaticLookup(column, join.keys[stream][0], join.keys[static], walk.static_tables[scan]))
    return out


def search_columns(walk: FateWalk, key_field: str | None) -> list[str]:
    """The input columns a key may be in, the likeliest first: every operator's lookup column (the
    column its state key takes), operator 0's first; with ``key_field``, that column (or the
    column of that state key field: ``field0`` of a join is its key column; none: no state key has it).
    A column a static table gives is not an input column (``static_lookups``)."""
    cols: list[str] = []
    for op in sorted(walk.info.operators, key=lambda o: o.operator_id):
        view = walk.view(op)
        for side in view.keys:
            for i, c in enumerate(view.keys[side]):
                if c.window is not None or c.name in TIME_KEYS or c.scan in walk.static_tables:
                    continue
                column = c.source_column or c.name
                if key_field is None or key_field in (column, c.name, f"field{i}"):
                    cols.append(column)
    return list(dict.fromkeys(cols))


def python_columns(walk: FateWalk) -> dict[str, str]:
    """The operators' key columns that Python code output (``MapInPandas`` ...): column -> that node."""
    return {c.name: c.via for op in walk.info.operators for cols in walk.view(op).keys.values() for c in cols if c.via}


def sink_columns(walk: FateWalk, columns: list[str]) -> list[str]:
    """The columns a key may be in among the query's output: the input columns it is searched in, and
    the operators' key columns as they name them (a column renamed before the state keeps that name)."""
    return list(dict.fromkeys([*columns, *key_columns_of(walk)]))


def key_columns_of(walk: FateWalk) -> list[str]:
    """The operators' key columns (not windows or times), as they name them, from operator 0 up."""
    return [
        c.name
        for op in sorted(walk.info.operators, key=lambda o: o.operator_id)
        for cols in walk.view(op).keys.values()
        for c in cols
        if c.window is None and c.name not in TIME_KEYS and not c.name.startswith("field")
    ]
