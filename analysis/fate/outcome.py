"""The key's outcome, derived from its records' fates: what reached the output, the root cause of what
did not (where and when), and the sentence a user reads first.

A record's contribution reached the output when the last operator of its path emitted what it
became (a file sink's files confirm it; for a user's function, whose output is not in its state, the
sink's files alone tell); it waits while a row of it is held in some state; else it was lost, to the
cause its steps name (its own drop, or, for a join row that never matched, the other side's).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import Any

from statelens.analysis.core.operator_kinds import JOIN, behaviour
from statelens.analysis.fate.model import (
    CONDITION_NOT_MET,
    DROPPED,
    DROPPED_AS_DUPLICATE,
    DROPPED_AS_LATE,
    EMITTED,
    EMITTED_UNMATCHED,
    EVICTED_UNMATCHED,
    FILTERED,
    HELD,
    LOST,
    MATCHED,
    MODE_UNKNOWN,
    NEVER_IN_INPUT,
    NO_MATCH_IN_INPUT,
    NO_STATIC_MATCH,
    OUTCOME_WRITTEN,
    PARTLY_WRITTEN,
    REACHED,
    REACHED_STATE,
    STATE_REMOVED,
    UNKNOWN,
    WAITING,
    WAITING_FOR_WATERMARK,
    WRITTEN,
    WRITTEN_UNMATCHED,
    Cause,
    KeyFate,
    Output,
    RecordFate,
    Waiting,
)
from statelens.analysis.inputs.records import InputSearch

WORDS = {
    OUTCOME_WRITTEN: "Written",
    PARTLY_WRITTEN: "Partly written",
    WRITTEN_UNMATCHED: "Written unmatched",
    WAITING: "Waiting",
    LOST: "Lost",
    NEVER_IN_INPUT: "Never in the input",
    UNKNOWN: "Unknown",
}
STEP_WORDS = {
    "dropped_as_late": "dropped as late",
    "dropped_as_duplicate": "dropped as duplicates",
    "condition_not_met": "rejected by the join condition",
    "filtered": "filtered out",
    "no_static_match": "dropped by a join with a static table",
    "reached_state": "reached state",
    "evicted_unmatched": "evicted unmatched",
    "not_found_in_state": "never found in state",
    "unknown": "of unknown fate",
}


def judge(
    fate: KeyFate,
    written: list[Output],
    sink_searched: bool,
    function_ops: set[int],
    search: InputSearch,
    sink_columns: frozenset[str] | None = None,
    row_keys: dict[tuple[int | None, str | None, str], str] | None = None,
) -> None:
    """Set each record's contribution and cause, and the key's outputs, waiting rows, outcome, cause,
    headline and summary. ``written``: the key's rows in a file sink's files (``sink_searched``: a
    file sink was searched, so no row there is an answer too); ``function_ops``: the operators whose
    output is a user's function's (group state, transformWithState); ``sink_columns``: the columns of
    the sink's rows (None: not known): the sink decides what of a row the state says was emitted was
    written, where it has the row's columns; ``row_keys``: the state key (JSON) each sink row (batch,
    file, row) was found for."""
    owned = _own_values(fate.records)
    for rf in fate.records:
        _contribution(rf, written, sink_searched, function_ops, sink_columns, owned[id(rf)], row_keys or {})
    _repeats_of_written(fate)
    outputs = [o for rf in fate.records for o in rf.outputs if o.kind != STATE_REMOVED]
    fate.outputs = sorted(
        dict.fromkeys(outputs + written), key=lambda o: (o.batch_id if o.batch_id is not None else -1, o.group, o.kind)
    )
    counted = _counted(fate)
    fate.waiting = list(dict.fromkeys(w for rf in counted if rf.contribution == HELD or rf.waiting for w in rf.waiting))
    reached = [r for r in counted if r.contribution == REACHED]
    held = [r for r in counted if r.contribution == HELD]
    lost = [r for r in counted if r.contribution == DROPPED]
    unknown = [r for r in counted if r.contribution == UNKNOWN]
    made = [c for c in search.missing if c in search.computed_by]  # key columns Python code output
    nodes = " and ".join(dict.fromkeys(search.computed_by[c] for c in made))
    by_python = f"the operators' key {' and '.join(made)} is what Python code ({nodes}) output, which neither the plan nor the checkpoint shows"
    if not fate.records:
        if written:  # in the sink: a key computed from the input (no record holds it as is)
            why = (
                "no input record holding it was found, so whether each of its records reached the output cannot be "
                f"told: {by_python if made else 'it is computed from the input'}"
            )
            fate.outcome, fate.cause = OUTCOME_WRITTEN, Cause(UNKNOWN, None, None, None, None, why, why=why)
        elif fate.input_searched and search.complete and not search.missing:
            fate.outcome = NEVER_IN_INPUT
            detail = f"none of the {search.files_searched:,} input files the query read holds {fate.key!r}"
            unread = [r for r in search.unreadable if r.key == fate.key]
            if unread:
                lines = "; ".join(f"{r.source}/{r.file_name} line {r.row}" for r in unread[:3])
                detail = (
                    f"no record Spark read from the {search.files_searched:,} input files the query read holds {fate.key!r}: "
                    f"{lines}{' and more' if len(unread) > 3 else ''} holds it in a line that is {unread[0].unreadable}, "
                    "which Spark's reader reads as a row of nulls (its default mode, PERMISSIVE)"
                )
            unseen = list(dict.fromkeys(r.file for r in search.unread if r.key == fate.key))
            if unseen:
                told = "; ".join(
                    f"{_named(search, f)} holds it, and no batch read it ({search.unread_why.get(f, 'not in the source log')})"
                    for f in unseen[:3]
                )
                detail += f"; in the source's folder, {told}" + (f"; and {len(unseen) - 3} more files" if len(unseen) > 3 else "")
            elif search.unlisted_why:
                detail += (
                    f"; whether a file beside them that no batch read holds it is not known: "
                    f"{'; '.join(search.unlisted_why)} could not be listed"
                )
            fate.cause = Cause(NEVER_IN_INPUT, None, None, None, None, detail)
        elif fate.input_searched and search.complete and made:
            why = f"no input column holds {fate.key!r}: {by_python}: which input records hold the key cannot be told"
            fate.outcome, fate.cause = UNKNOWN, Cause(UNKNOWN, None, None, None, None, why, why=why)
        elif fate.input_searched and search.complete:
            why = (
                f"no input column holds {fate.key!r}, but no input column is named {' or '.join(search.missing)} as the "
                "operators' key is: it may be computed from the input (a renamed column, a static join, an expression), "
                "which the query's event log tells"
            )
            fate.outcome, fate.cause = UNKNOWN, Cause(UNKNOWN, None, None, None, None, why, why=why)
        else:
            why = fate.input_note or "the input was not searched"
            fate.outcome, fate.cause = UNKNOWN, Cause(UNKNOWN, None, None, None, None, why, why=why)
    elif reached:
        padded = [r for r in reached if all(o.null_padded for o in r.outputs if o.kind != STATE_REMOVED)]
        if len(padded) == len(reached) and any(o.null_padded for r in reached for o in r.outputs):
            fate.outcome, fate.cause = WRITTEN_UNMATCHED, _first([_unmatched_cause(r) for r in padded])
        elif lost or unknown:
            fate.outcome, fate.cause = PARTLY_WRITTEN, _first([r.cause for r in lost + unknown])
        else:
            fate.outcome, fate.cause = OUTCOME_WRITTEN, None
            # a group of it still waits for the watermark: held records, or (their event times unknown, so
            # every group of the key theirs) records that reached the output too
            pending = [w for w in fate.waiting if not w.unless_emitted]
            if held:
                fate.cause = _waiting_cause(held, fate.waiting)
            elif pending:
                fate.cause = _waiting_cause(reached, pending)
    elif written:  # the sink's files hold rows of the key that no record of it was followed to
        fate.outcome, fate.cause = _written_unfollowed(fate, lost, unknown, held)
    elif held:
        fate.cause = _waiting_cause(held, fate.waiting)
        fate.outcome = UNKNOWN if any(w.unless_emitted for w in fate.waiting) else WAITING
    elif lost and not unknown:
        fate.outcome, fate.cause = LOST, _first([r.cause for r in lost])
    else:  # some record's fate cannot be told: nothing reached the output as far as the others tell
        fate.outcome, fate.cause = UNKNOWN, _first([r.cause for r in unknown if r.cause is not None and r.cause.kind == UNKNOWN])
    if fate.outcome == UNKNOWN and fate.cause is None:
        why = "what became of its records cannot be told"
        fate.cause = Cause(UNKNOWN, None, None, None, None, why, why=why)
    fate.summary = summary(fate)
    fate.written = written
    fate.headline = headline(fate, written)


def _counted(fate: KeyFate) -> list[RecordFate]:
    """The records whose fate is the key's: a left semi join's right rows are never output, and count
    only where the key has no left row."""
    return [r for r in fate.records if not r.match_only] or fate.records


def _repeats_of_written(fate: KeyFate) -> None:
    """A record a dedup dropped as a repeat of the key's own earlier record, which reached the output:
    what it holds was written (the dedup did its job), not lost."""
    where = {(r.record.source, r.record.file, r.record.row): r for r in fate.records}
    for rf in fate.records:
        c = rf.cause
        if rf.contribution != DROPPED or c is None or c.kind != DROPPED_AS_DUPLICATE or c.earlier is None:
            continue
        original = where.get((c.earlier.source, c.earlier.file, c.earlier.row))
        if original is not None and original.contribution == REACHED:
            rf.contribution, rf.cause = REACHED, None
            rf.outputs = list(original.outputs)
        elif original is not None and original.contribution == UNKNOWN:  # it is as its original: unknown too
            rf.contribution = UNKNOWN
            told = original.cause.why or original.cause.detail if original.cause is not None else ""
            why = f"{c.detail}; whether that record reached the output cannot be told" + (f": {told}" if told else "")
            rf.cause = Cause(UNKNOWN, c.operator_id, c.batch_id, c.side, rf.record, why, why=why)


def _written_unfollowed(
    fate: KeyFate, lost: list[RecordFate], unknown: list[RecordFate], held: list[RecordFate]
) -> tuple[str, Cause | None]:
    """The sink holds rows of the key, yet the walk followed none of its records there: written, as the
    sink says; partly written where some record was lost for a known cause; else what could not be
    told is the cause, named as unknown."""
    known = [r for r in lost if r.cause is not None and r.cause.kind != UNKNOWN]
    if known and unknown:
        return PARTLY_WRITTEN, _first([r.cause for r in known])
    if held and not unknown and not lost:
        return OUTCOME_WRITTEN, _waiting_cause(held, fate.waiting)
    first = (unknown or lost or held or fate.records)[0]
    told = _first([r.cause for r in unknown]) if unknown else None
    why = f"what became of {len(unknown or lost or held)} of its {len(fate.records)} input record(s) cannot be told" + (
        f": {told.why or told.detail}" if told is not None else " (the walk followed none of them to the output)"
    )
    return OUTCOME_WRITTEN, Cause(UNKNOWN, None, None, None, first.record, why, why=why)


def sink_value(values: dict[str, Any], name: str, state: Any) -> Any:
    """A state key field's value in a sink row, as the sink holds it: its own column, or, for a struct
    (a window), its fields flattened into columns: ``window_start``/``window_end``, ``window.start``, or
    ``start``/``end`` (None: the sink has no such column)."""
    if name in values:
        return values[name]
    if isinstance(state, dict) and state:
        for form in ("{n}_{f}", "{n}.{f}", "{f}"):
            columns = {f: form.format(n=name, f=f) for f in state}
            if all(c in values for c in columns.values()):
                return {f: values[c] for f, c in columns.items()}
    return None


def _not_in_sink(derived: list[Output], written: list[Output], sink_columns: frozenset[str] | None) -> Output | None:
    """The first row a record became that the state says was emitted and the sink (searched, with the
    row's columns) does not hold, written in its batch; None: each is there, or cannot be checked."""
    if not sink_columns:
        return None
    for o in derived:
        if not o.key or o.kind not in (EMITTED, MATCHED, EMITTED_UNMATCHED):
            continue
        if not _has_columns(o.key, sink_columns):
            return None  # the sink does not have its columns: it cannot say
        there = [w for w in written if w.batch_id in (o.batch_id, None) and (w.key is None or w.key == o.key)]
        if not there:
            return o
    return None


def _has_columns(key: str, sink_columns: frozenset[str] | None) -> bool:
    """Whether the sink's rows have each column of a state key (JSON), as the sink holds them."""
    fields = json.loads(key)
    held = dict.fromkeys(sink_columns or (), "")
    return bool(sink_columns) and isinstance(fields, dict) and all(sink_value(held, k, v) is not None for k, v in fields.items())


def _own_values(records: list[RecordFate]) -> dict[int, set[str]]:
    """Each record's (by ``id``) text values no other record of the key has (its id, its event's...): a
    sink row holding one holds that record."""
    texts = {
        id(r): {v for c, v in r.record.values.items() if c != r.record.column and isinstance(v, str) and v.strip()}
        for r in records
    }
    seen = Counter(v for vs in texts.values() for v in vs)
    return {k: {v for v in vs if seen[v] == 1} for k, vs in texts.items()}


def _emitted_padded(cause: Cause, written: list[Output], own: frozenset[str] | set[str]) -> Output | None:
    """A join of unknown type evicted the record unmatched in ``cause.emitted_in``: the sink's row written
    in that batch that holds one of the record's own values is it, emitted null-padded (an outer join)."""
    if cause.emitted_in is None or not own:
        return None
    return next((w for w in written if w.batch_id == cause.emitted_in and own & w.texts), None)


def _emitted_open(rf: RecordFate, written: list[Output], row_keys: dict[tuple[int | None, str | None, str], str]) -> list[Output]:
    """The sink's rows of every group (window) the record waits in, written since it arrived; [] unless
    each has one."""
    keys = {w.key for w in rf.waiting if w.key}
    b = rf.record.batch_id or 0

    def key_of(o: Output) -> str | None:
        return o.key or row_keys.get((o.batch_id, o.file, o.group))

    rows = [o for o in written if key_of(o) in keys and (o.batch_id is None or o.batch_id >= b)]
    return rows if keys and keys <= {key_of(o) for o in rows} else []


def _contribution(
    rf: RecordFate,
    written: list[Output],
    sink_searched: bool,
    function_ops: set[int],
    sink_columns: frozenset[str] | None = None,
    own: frozenset[str] | set[str] = frozenset(),
    row_keys: dict[tuple[int | None, str | None, str], str] | None = None,
) -> None:
    b = rf.record.batch_id or 0
    open_groups = [w for w in rf.waiting if w.unless_emitted]
    if (
        sink_searched
        and open_groups
        and all(w.key and _has_columns(w.key, sink_columns) for w in open_groups)
        and not _emitted_open(rf, written, row_keys or {})
    ):  # the sink would hold each group it waits in had the query emitted it (update mode): append mode
        rf.waiting = [dataclasses.replace(w, unless_emitted="") for w in rf.waiting]
    derived = [o for o in rf.outputs if o.kind != STATE_REMOVED]
    missing = _not_in_sink(derived, written, sink_columns) if sink_searched else None
    last = rf.steps[-1] if rf.steps else None
    # it reached a user's function's state (not dropped before it): what it emitted is the sink's to tell
    by_function = last is not None and last.operator_id in function_ops and last.outcome == REACHED_STATE
    # the rows written since it arrived: of its group where the sink's row is known to be one (a key asked by another column)
    later = [
        w for w in written if (w.batch_id is None or w.batch_id >= b) and (w.key is None or last is None or w.key == last.key)
    ]
    if missing is not None:  # the sink decides what was written
        rf.contribution = DROPPED
        why = (
            f"operator {missing.operator_id} emitted {missing.group} in batch {missing.batch_id}, as its state tells, but "
            f"the sink's files hold no row of it written then: the sink decides what was written (a file of that batch "
            "gone, or another folder than the query's sink?)"
        )
        rf.cause = Cause(UNKNOWN, missing.operator_id, missing.batch_id, None, rf.record, why, why=why)
    elif derived:
        rf.contribution = REACHED
        rf.cause = _unmatched_cause(rf) if all(o.null_padded for o in derived) else None
    elif by_function and later:  # the function's output is the sink's to tell
        rf.contribution = REACHED
        rf.outputs = later
    elif rf.waiting and (emitted := _emitted_open(rf, written, row_keys or {})):
        # the sink holds each group it waits in, written since it arrived while the state still holds the group:
        # the query emits a group before it closes (update or complete mode), this record's part with it
        rf.contribution = REACHED
        rf.outputs = emitted
    elif rf.waiting:
        rf.contribution = HELD
        rf.cause = next((s.cause for s in reversed(rf.steps) if s.cause is not None), None)
    elif by_function and any(o.kind == STATE_REMOVED for o in rf.outputs):
        removed = next(o for o in rf.outputs if o.kind == STATE_REMOVED)
        if sink_searched:
            rf.contribution = DROPPED
            why = (
                f"its group's state was removed by operator {removed.operator_id} in batch {removed.batch_id}, and the "
                f"sink's files hold no row of it written since batch {b}: the user's function emitted none"
            )
            rf.cause = Cause(UNKNOWN, removed.operator_id, removed.batch_id, None, rf.record, why, why=why)
        else:
            rf.contribution = UNKNOWN
            why = (
                f"its group's state was removed by operator {removed.operator_id} in batch {removed.batch_id}; what the "
                "user's function emitted then is not in the state, and no file sink was searched"
            )
            rf.cause = Cause(UNKNOWN, removed.operator_id, removed.batch_id, None, rf.record, why, why=why)
    else:
        cause = next((s.cause for s in reversed(rf.steps) if s.cause is not None), None)
        rf.cause = cause
        rf.contribution = UNKNOWN if cause is None or (cause.kind == UNKNOWN and rf.outcome == UNKNOWN) else DROPPED
        padded = _emitted_padded(cause, written, own) if cause is not None and cause.unless_emitted else None
        if padded is not None and cause is not None:  # the sink holds it, written when the join evicted it unmatched
            cause.unless_emitted = ""
            rf.contribution, rf.cause = REACHED, cause
            detail = f"emitted null-padded when evicted unmatched (the sink's row holds this record): {padded.detail}"
            rf.outputs = [Output(cause.operator_id, padded.group, padded.batch_id, EMITTED_UNMATCHED, detail, True, padded.file)]
        elif cause is not None and cause.unless_emitted and (written or not sink_searched):
            # the sink cannot say it was not emitted null-padded
            rf.contribution = UNKNOWN
            rf.cause = Cause(
                UNKNOWN, cause.operator_id, cause.batch_id, cause.side, rf.record, cause.unless_emitted, why=cause.unless_emitted
            )


def _unmatched_cause(rf: RecordFate) -> Cause | None:
    """Why a join row went out null-padded: the cause its join step names."""
    return next((s.cause for s in rf.steps if s.outcome in (EVICTED_UNMATCHED, CONDITION_NOT_MET) and s.cause is not None), None)


def _first(causes: list[Cause | None]) -> Cause | None:
    """The cause to headline: the first that is known, else the first."""
    found = [c for c in causes if c is not None]
    return next((c for c in found if c.kind != UNKNOWN), found[0] if found else None)


def _waiting_cause(held: list[RecordFate], waiting: list[Waiting]) -> Cause:
    w = min(waiting, key=lambda w: (w.released_at_watermark is None, w.released_at_watermark or 0)) if waiting else None
    step_cause = next((r.cause for r in held if r.cause is not None and w is not None and w.cause == r.cause.kind), None)
    if step_cause is not None:  # a join row waiting for a match that never came (or was lost upstream)
        return step_cause
    rec = held[0].record
    op = w.operator_id if w else None
    if (o := next((x for x in waiting if x.unless_emitted), None)) is not None:  # append: waiting; update: emitted
        return Cause(UNKNOWN, o.operator_id, None, None, rec, o.unless_emitted, why=o.unless_emitted)
    if w is not None and w.cause == UNKNOWN:  # a join row of a join of unknown type: for a match, or the watermark
        told = next((r.cause for r in held if r.cause is not None), None)  # why it is unmatched so far
        why = w.detail + (f"; unmatched so far: {told.detail}" if told is not None else "")
        return Cause(UNKNOWN, op, told.batch_id if told else None, told.side if told else None, rec, why, why=why)
    return Cause(WAITING_FOR_WATERMARK, op, None, None, rec, w.detail if w else "it waits in state")


# --------------------------------------------------------------------------- words


def _where(o: Output) -> str:
    if o.kind == WRITTEN:
        return f"{o.group}: written in batch {o.batch_id}" + (f" ({o.file})" if o.file else "")
    return f"{o.group}: {o.kind.replace('_', ' ')} by operator {o.operator_id} in batch {o.batch_id}"


def _reached_text(fate: KeyFate, written: list[Output]) -> str:
    if written:
        rows = sorted(written, key=lambda o: (o.batch_id or -1, o.group))
        places = list(dict.fromkeys((o.batch_id, o.file) for o in rows))  # a file holding several rows named once
        shown = "; ".join(f"batch {b} ({f})" if f else f"batch {b}" for b, f in places[:3])
        more = f" and {len(places) - 3} more" if len(places) > 3 else ""
        whose = "of it are" if any(o.key is None for o in rows) else "its records went into are"  # downstream: another key's rows
        return f"{len(rows)} row(s) {whose} in the sink's files, written in {shown}{more}"
    outs = [o for o in fate.outputs if o.kind != WRITTEN]
    groups = list(dict.fromkeys(_where(o) for o in outs))
    more = f" and {len(groups) - 3} more" if len(groups) > 3 else ""
    return f"{len(groups)} row(s) of it reached the output ({'; '.join(groups[:3])}{more})"


def _cause_text(cause: Cause | None) -> str:
    """A cause as part of the first sentence (its own sentences joined)."""
    if cause is None:
        return ""
    text = cause.detail.rstrip(".").replace(". ", "; ")
    return text + (f"; {cause.then}" if cause.then else "")


# what became of a record that did not reach the output, by its cause (a filter's record was not lost: the query removed it)
_WHAT_BECAME = {
    FILTERED: "filtered out by the query",
    DROPPED_AS_LATE: "dropped as late",
    DROPPED_AS_DUPLICATE: "dropped as duplicates",
    NO_MATCH_IN_INPUT: "never matched",
    CONDITION_NOT_MET: "never matched",
    NO_STATIC_MATCH: "dropped by the static join",
    UNKNOWN: "lost",
}


def headline(fate: KeyFate, written: list[Output]) -> str:
    """Outcome and root cause in plain words: the answer's first sentence."""
    word = WORDS.get(fate.outcome, fate.outcome)
    c = fate.cause
    if fate.outcome == NEVER_IN_INPUT:
        text = f"{word}: {_cause_text(c)}."
        near = [n for n in fate.near_fates if n.outcome in (OUTCOME_WRITTEN, PARTLY_WRITTEN, WRITTEN_UNMATCHED)]
        if near:
            n = near[0]
            where = f" in batch {', '.join(map(str, n.batches[:3]))}" if n.batches else ""
            files = f" ({n.files[0]})" if n.files else ""
            text += f" A look-alike, {n.key!r} ({n.reason}), was written{where}{files}."
        return text
    if fate.outcome == OUTCOME_WRITTEN:  # one sentence: what was written, and what else is true of the key
        text = f"{word}: {_reached_text(fate, written)}"
        if c is not None and c.kind == UNKNOWN:
            text += f", but {_cause_text(c)}"
        elif c is not None and c.kind == WAITING_FOR_WATERMARK and fate.waiting:
            w = min(fate.waiting, key=lambda w: (w.released_at_watermark is None, w.released_at_watermark or 0))
            text += f"; {len(fate.waiting)} more wait: {w.detail}"
        return text + "."
    if fate.outcome == WRITTEN_UNMATCHED:
        padded = [o for o in fate.outputs if o.kind == EMITTED_UNMATCHED]
        first = padded[0] if padded else None
        emitted = (
            f"its row was emitted null-padded by operator {first.operator_id} in batch {first.batch_id}"
            if first
            else "its row went out null-padded"
        )
        why = _cause_text(c) or "no match came"
        return f"{word}: it never matched ({why}), so {emitted}, and {_reached_text(fate, written)}."
    if fate.outcome == PARTLY_WRITTEN:
        counted = _counted(fate)
        rest = Counter(
            _WHAT_BECAME.get(r.cause.kind if r.cause else UNKNOWN, "lost") if r.contribution == DROPPED else "not followed"
            for r in counted
            if r.contribution in (DROPPED, UNKNOWN)
        )
        what = ", ".join(f"{n} {how}" for how, n in rest.most_common())
        return (
            f"{word}: {_reached_text(fate, written)}; {sum(rest.values())} of its {len(counted)} records did not reach it "
            f"({what}): {_cause_text(c)}."
        )
    if fate.outcome == WAITING:
        soonest = (
            min(fate.waiting, key=lambda x: (x.released_at_watermark is None, x.released_at_watermark or 0))
            if fate.waiting
            else None
        )
        text = f"{word}: {soonest.detail}" if soonest else f"{word}: a row of it is held in state"
        if c is not None and c.kind != WAITING_FOR_WATERMARK:
            text += f"; {_cause_text(c)}"
        return text + "."
    return f"{word}: {_cause_text(c) or 'what became of it cannot be told'}."


def summary(fate: KeyFate) -> str:
    """The records by what became of them: ``3 input record(s) of u-1: 2 reached state, 1 dropped as late.``"""
    if not fate.records:
        return ""
    counts = Counter(r.outcome for r in fate.records)
    parts = ", ".join(f"{c} {STEP_WORDS.get(o, o.replace('_', ' '))}" for o, c in counts.most_common())
    text = f"{len(fate.records)} input record(s) of {fate.key}: {parts}."
    waiting = fate.waiting
    if waiting:
        text += " Still waiting: " + "; ".join(list(dict.fromkeys(w.group for w in waiting))[:3]) + "."
    return text


# a verdict of the operator nearest the output -> the outcome it means, when no input record was followed
_FROM_VERDICT = {
    "matched": OUTCOME_WRITTEN,
    "emitted_unmatched": WRITTEN_UNMATCHED,
    "waiting_for_other_side": WAITING,
    "waiting_for_watermark": WAITING,
    "session_open": WAITING,
    "dropped_as_late": LOST,
    "condition_not_met": LOST,
}
_CAUSE_OF_VERDICT = {
    "waiting_for_watermark": WAITING_FOR_WATERMARK,
    "session_open": WAITING_FOR_WATERMARK,
    "dropped_as_late": "dropped_as_late",
    "condition_not_met": CONDITION_NOT_MET,
}


def _unknown(fate: KeyFate, operator_id: int, why: str) -> KeyFate:
    return dataclasses.replace(
        fate, cause=Cause(UNKNOWN, operator_id, None, None, None, why, why=why), headline=f"{WORDS[UNKNOWN]}: {why}."
    )


def from_state(
    fate: KeyFate,
    verdict: str,
    was_matched: bool | None,
    kind: str,
    explanation: str,
    operator_id: int,
    join_type: str | None = None,
    mode_assumed: bool = False,
) -> KeyFate:
    """No record of the key was followed (the input was not searched): the outcome as the last
    operator's state tells it, said to come from there. Only where the verdict says it: a key in a
    join's or an aggregation's state, evicted, matched or waiting; else it stays unknown. A join's row
    evicted unmatched is lost only where the join type is known (an outer join wrote it null-padded):
    without it the key stays unknown, and says why; so does a window waiting where the output mode is
    not known (``mode_assumed``: in update or complete mode it was emitted) and no sink holding the
    operators' key columns lacks every row of it (it would hold one: append mode). A new fate: the one
    given is left as it is."""
    if verdict == "waiting_for_watermark" and mode_assumed and not fate.sink_lacks_key:
        return _unknown(fate, operator_id, f"operator {operator_id}'s state holds its window: {MODE_UNKNOWN}")
    outcome = _FROM_VERDICT.get(verdict)
    if verdict == "evicted":
        outcome = (
            (OUTCOME_WRITTEN if was_matched else LOST if join_type else None)
            if kind == JOIN
            else OUTCOME_WRITTEN
            if behaviour(kind).emits_when_evicted
            else None
        )
        if outcome is None and kind == JOIN and not was_matched:
            why = (
                f"operator {operator_id}'s state shows it evicted unmatched: an inner or semi join dropped it (lost), an "
                "outer join preserving its side wrote it null-padded, and the checkpoint does not record the join type "
                "(give the query's event log, or the join type)"
            )
            return _unknown(fate, operator_id, why)
    if outcome is None:
        return fate
    first = explanation.split(". ")[0].rstrip(".")
    note = "its input files were not searched" + (
        ": they are no longer where the query read them (give where they are now: --input-root)"
        if "no longer there" in (fate.input_note or "")
        else ""
    )
    kind_of_cause = _CAUSE_OF_VERDICT.get(verdict)
    cause = None
    if outcome not in (OUTCOME_WRITTEN,) or kind_of_cause is not None:
        why = f"{first} (operator {operator_id}'s state; {note})"
        cause = Cause(kind_of_cause or UNKNOWN, operator_id, None, None, None, why, why=None if kind_of_cause else why)
    headline = f"{WORDS[outcome]}, as operator {operator_id}'s state tells ({note})."  # its verdict follows
    return dataclasses.replace(fate, outcome=outcome, cause=cause, headline=headline)


def _named(search: InputSearch, uri: str) -> str:
    """A file of the search as the answer names it: its source's folder and its name."""
    rec = next((r for r in search.unread + search.records if r.file == uri), None)
    return f"{rec.source}/{rec.file_name}" if rec else uri.rsplit("/", 1)[-1]
