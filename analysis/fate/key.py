"""One key's fate: each of its records followed (``walk``), then judged (``outcome``); the input
columns a key may be in."""

from __future__ import annotations

from analysis.core.inputs import InputSearch
from analysis.fate.model import KeyFate, Output
from analysis.fate.outcome import judge
from analysis.fate.walk import FateWalk
from analysis.verdicts.key_verdicts import GROUP_STATE, TWS, operator_kind


def key_fate(
    key: str,
    search: InputSearch,
    walk: FateWalk | None,
    written: list[Output],
    why_not: str | None = None,
    sink_searched: bool = False,
) -> KeyFate:
    """The fate of one key: each record followed, what reached the output, what waits, why the rest
    did not. ``written``: the key's rows found in a file sink's files (``sink_searched``: a sink was
    searched); ``why_not``: why the input was not searched at all (a Kafka source ...)."""
    records = search.of(key)
    fate = KeyFate(key, input_searched=why_not is None and search.files_searched > 0, input_note=why_not or search.note())
    fate.near = [r for r in search.near if r.key == key]
    function_ops: set[int] = set()
    if walk is not None:
        for rec in records:
            fate.records.append(walk.follow(rec, records))
        fate.notes = list(walk.notes)
        function_ops = {o.operator_id for o in walk.info.operators if operator_kind(o.operator_name) in (GROUP_STATE, TWS)}
    judge(fate, written, sink_searched, function_ops, search)
    return fate


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
