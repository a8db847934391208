"""'Why is key X missing', end to end over any ``StateAccess`` (pure: no Spark here).

Reads per store: the state at the batch (exact matches); the history only where it is needed:
for a join key matched or on both sides, the recent batches that explain its rows (searched
backwards in growing windows); for every other key, every retained batch. Without a change feed
the history is the state at each of the last MAX_STATE_BATCHES retained batches. A failed history
read is recorded: keys whose verdict depends on it become ``unknown``. Near-miss keys are looked
up only for keys that wait or were never seen; a waiting join key gets its side's eviction delay.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from statelens.analysis.core import key_columns
from statelens.analysis.core.errors import InvalidInput, StateReadError, UnknownOperator
from statelens.analysis.core.model import (
    JOIN_SIDES,
    CheckpointInfo,
    OperatorInfo,
    StateSource,
    append_only,
    default_operator,
    lookup_sources,
    operator_of,
    resolve_batch,
    table_name,
    validate_source,
)
from statelens.analysis.core.operator_kinds import behaviour, kind_of
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.core.state_access import MAX_STATE_BATCHES, KeyQuery, StateAccess, typed_values
from statelens.analysis.inputs.records import ArrivalSearch, InputSearch
from statelens.analysis.verdicts import why_missing as wm

if TYPE_CHECKING:  # (the progress module, with the plan's parser, is read only with an event log or an event time)
    from statelens.analysis.plan.query_plan import JoinPlan
    from statelens.analysis.runs.progress import Lateness, ProgressLog


@dataclass
class WhyMissingReport:
    checkpoint: str
    operator_id: int
    operator_name: str
    kind: str
    batch: int
    key_field: str
    key_fields: list[str]
    history: tuple[int, int] | None
    watermarks: dict[int, int]
    results: list[wm.KeyDiagnosis] = field(default_factory=list)
    inferred_from: str | None = None  # the operator kind was inferred (no operator metadata)
    join_type: str | None = None
    join_plan: JoinPlan | None = None  # the join as the event log's plan states it (type, keys, condition)
    history_method: str | None = None  # "change feed" | "state per batch"; None: no history searched
    history_error: str | None = None  # the history read that failed, with Spark's reason
    lateness: Lateness | None = None  # given the missing record's event time
    engine: str = "spark"  # which reader answered: native (state files) or spark (State Data Source)
    engine_notes: list[str] = field(default_factory=list)  # reads handed to Spark, and why
    key_columns: dict[str, str] = field(default_factory=dict)  # join side -> the value column key_field equals
    # a windowed operator's output mode was assumed (append): not in the checkpoint, one stateful operator
    output_mode_assumed: bool = False

    whole_query: ClassVar[bool] = False  # one operator's verdicts (the whole query's: ``analysis.fate.answer.QueryAnswer``)

    @property
    def key_label(self) -> str:
        return key_columns.field_label(self.key_field, self.key_columns)

    @property
    def operator_report(self) -> WhyMissingReport:
        """The operator report an answer shows (its operator, join, history): this one."""
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "engine": self.engine,
            "engine_notes": self.engine_notes,
            "operator_id": self.operator_id,
            "operator_name": self.operator_name,
            "operator_inferred_from": self.inferred_from,
            "batch_id": self.batch,
            "key_field": self.key_field,
            "key_columns": self.key_columns,
            "join_type": self.join_type,
            "join_plan": self.join_plan.to_dict() if self.join_plan else None,
            "history": {
                "batches": list(self.history) if self.history else None,
                "method": self.history_method,
                "error": self.history_error,
            },
            "lateness": self.lateness.to_dict() if self.lateness else None,
            "whole_query": False,
            "plan_from": None,  # the whole query's answer says where its plan came from, and its input
            "input": None,
            "results": [r.to_dict() for r in self.results],
        }


def input_dict(s: InputSearch) -> dict[str, Any]:
    """The input files searched for the keys, as the whole query's JSON gives them."""
    return {
        "files_listed": s.files_listed,
        "files_searched": s.files_searched,
        "columns": s.columns,
        "not_searched": s.unsearched,
        "time_zone": s.time_zone,
        **({"changed_since_read": s.changed} if s.changed else {}),
    }


def ordered_key_fields(fields: list[tuple[str, str]]) -> list[str]:
    """Key field names, the one a user most likely means first (the first that is not a timestamp)."""
    names = [n for n, _ in fields]
    first = next((n for n, t in fields if not t.startswith("timestamp")), names[0] if names else None)
    return [first, *(n for n in names if n != first)] if first else []


def why_missing(
    access: StateAccess,
    info: CheckpointInfo,
    q: KeyQuestion,
    progress: ProgressLog | None = None,
    arrivals: ArrivalSearch | None = None,
) -> WhyMissingReport:
    """Diagnose each key of ``q`` at its operator (the first one when it names none).
    ``q.event_time_ms``: the event time of the record that never showed up; with the query's
    ``progress`` it can prove the record was dropped as late. ``q.near_misses=False``: the verdicts
    alone, without the search for look-alike keys in the other partitions."""
    keys, key_field, join_type, event_time_ms, near_misses = (
        list(q.keys),
        q.key_field,
        q.join_type,
        q.event_time_ms,
        q.near_misses,
    )
    batch_id = q.batch
    op = default_operator(info) if q.operator is None else operator_of(info, q.operator)
    kind = kind_of(op.operator_name)  # a kind no one knows: refused, never walked as another
    batch = resolve_batch(info, batch_id)
    sources = lookup_sources(op)
    if not sources:
        raise UnknownOperator(f"Operator {op.operator_id} ({op.operator_name}) has no readable state.")
    for _, src in sources:
        validate_source(info, src)
    first_src = sources[0][1]
    typed_fields = access.key_fields(first_src, batch)
    fields = ordered_key_fields(typed_fields)
    if not fields:
        raise InvalidInput(f"Operator {op.operator_id} ({op.operator_name}) has no key fields to match.")
    plan = progress.joins.get(op.operator_id) if progress is not None and kind == wm.JOIN else None
    if plan is not None and join_type is None:
        join_type = plan.join_type  # the checkpoint does not record it; the event log's plan does
    by_side = {name: access.key_columns(src, batch, tuple(keys)) for name, src in sources} if kind == wm.JOIN else {}
    for side, keys_of_side in (("left", plan.left_keys), ("right", plan.right_keys)) if plan else ():
        for i, column in enumerate(keys_of_side):  # a side without rows to read it from: the plan names it
            if column.isidentifier():
                by_side[side].setdefault(f"field{i}", column)
    if key_field is None:
        key_field = fields[0]
    elif key_field not in fields:
        key_field = key_columns.field_of(key_field, by_side) or _no_field(key_field, typed_fields, by_side)
    matched_as, typed = typed_values(dict(typed_fields)[key_field], keys)
    query = KeyQuery(key_field, tuple(keys), tuple(typed.items()))

    committed = [b.batch_id for b in info.committed_batches]
    watermarks = {b.batch_id: b.watermark_ms for b in info.batches}
    names = [name for name, _ in sources]
    lookups: dict[str, dict[str, wm.StoreLookup]] = {
        key: {name: wm.StoreLookup(name, table_name(src)) for name, src in sources} for key in keys
    }
    join_format = 2 if kind != wm.JOIN or "matched" in access.value_fields(first_src, batch) else 1

    # 1. the state at the batch: one filtered read per store
    for name, src in sources:
        owned = query.by_owner(access.rows(src, batch, query))
        for key in keys:
            lookups[key][name].rows = [_without_key(r) for r in owned.get(key, ())]

    ctx = wm.Context(
        kind,
        op.operator_id,
        op.operator_name,
        batch,
        watermarks,
        key_field,
        first_batch=committed[0],
        join_type=join_type,
        join_condition=plan.condition if plan else None,
        join_format=join_format,
        batch_times={b.batch_id: b.timestamp_ms for b in info.batches},
        single_operator=len(info.operators) == 1,
        output_mode=_output_mode(progress, op.operator_id) or behaviour(kind).output_mode,
    )
    mode_assumed = ctx.output_mode is None and not append_only(info)
    if mode_assumed and behaviour(kind).emits_when_evicted and any(watermarks.values()):
        # the usual mode of a windowed aggregation with a watermark, said once (the state tells complete mode apart)
        ctx.notes.append("(The output mode is not in the checkpoint: append mode was assumed; the query's event log tells.)")
    # 2. history: the change feed, or the state batch by batch where there is none
    read_history(access, op, sources, lookups, query, ctx, committed)

    def run_all() -> list[wm.KeyDiagnosis]:
        out = [wm.diagnose(key, ctx, [lookups[key][n] for n in names]) for key in keys]
        for d in out:
            d.matched_as = matched_as if d.key in typed else "as text"
            for note in ctx.notes:
                d.explanation += f" {note}"
        return out

    results = run_all()
    # 3. near-miss keys, only for keys that are waiting, were never seen or left unmatched (a malformed
    # key is the usual cause), searched in the stores that do not hold the key (a waiting key: the other
    # side): in their state at the batch and in their change feed (a look-alike already evicted)
    suspicious = [r.key for r in results if near_misses and r.looks_for_near_misses]
    # the change-feed batches to search for look-alikes (None: no change feed was read)
    feed_span = ctx.history if ctx.history_method == "change feed" and not ctx.history_error else None
    for name, src in sources:
        absent = [key for key in suspicious if not lookups[key][name].rows]
        if not absent:
            continue
        near = access.near_keys(src, batch, key_field, absent)
        seen = []
        if feed_span is not None and src.has_change_feed:
            try:
                seen = access.near_history(src, feed_span[0], feed_span[1], key_field, absent)
            except StateReadError as e:
                ctx.notes.append(f"(Similar keys in the {name} store's history were not searched: {e.message})")
        for key in absent:
            lookups[key][name].near = sorted(n for n in near if wm.near_miss_reason(key, n))
            lookups[key][name].near_seen = [s for s in seen if wm.near_miss_reason(key, s.key)]
    # 4. joins: for keys waiting on one side, when the watermark evicts them, and for pairs the condition
    # rejected, the join's bound (both from the sides' observed evictions)
    waiting_sides: set[str] = set()
    for r in results:
        if r.verdict == wm.WAITING_OTHER_SIDE and r.side:
            waiting_sides.add(r.side)
        elif r.verdict == wm.CONDITION_NOT_MET:
            waiting_sides |= {r.side} if r.side in JOIN_SIDES else set(JOIN_SIDES)
    if kind == wm.JOIN and ctx.history_method == "change feed" and not ctx.history_error and any(watermarks.values()):
        for side in sorted(waiting_sides):
            try:
                horizon = access.eviction_horizon(dict(sources)[side], committed[0], batch, watermarks)
            except StateReadError as e:
                ctx.notes.append(
                    f"(The eviction estimate needs the {side} side's change feed, which could not be read: {e.message})"
                )
                continue
            if horizon:
                ctx.eviction_horizon[side] = horizon
    if suspicious or waiting_sides:
        results = run_all()
    late = None
    if event_time_ms is not None:
        from statelens.analysis.runs.progress import lateness

        late = lateness(event_time_ms, info, op.operator_id, progress, arrivals)
    for d in results if late else []:
        if d.verdict != wm.UNKNOWN:
            wm.apply_lateness(d, ctx, late, [lookups[d.key][n] for n in names])
    return WhyMissingReport(
        info.path,
        op.operator_id,
        op.operator_name,
        kind,
        batch,
        key_field,
        [n for n, _ in typed_fields],
        ctx.history,
        watermarks,
        results,
        inferred_from=op.inferred_from,
        join_type=join_type,
        join_plan=plan,
        history_method=ctx.history_method if ctx.history else None,
        history_error=ctx.history_error,
        lateness=late,
        engine=str(getattr(access, "engine", "spark")),
        engine_notes=list(dict.fromkeys(getattr(access, "fallbacks", []))),
        key_columns=key_columns.key_column(key_field, by_side),
        output_mode_assumed=mode_assumed and behaviour(kind).emits_when_evicted,
    )


def _output_mode(progress: ProgressLog | None, operator_id: int) -> str | None:
    """The operator's output mode as the event log's plan states it (aggregations), else None."""
    plan = progress.query_plan() if progress is not None and progress.plans else None
    op = plan.operators.get(operator_id) if plan is not None else None
    return op.output_mode if op is not None else None


def _no_field(key_field: str, typed_fields: list[tuple[str, str]], by_side: dict[str, dict[str, str]]) -> str:
    names = [key_columns.field_label(n, key_columns.key_column(n, by_side)) for n, _ in typed_fields]
    raise InvalidInput(f"The key has no field '{key_field}'. Its fields are: {', '.join(names)}.")


def _without_key(row: dict[str, Any]) -> dict[str, Any]:
    return {c: v for c, v in row.items() if c not in ("_key", "_raw")}


def _key_id(key: Any) -> str:
    return json.dumps(wm.jsonable(key), sort_keys=True)


def _window_explains(rows: list[dict[str, Any]], changes: list[dict[str, Any]]) -> bool:
    """Whether a window of join changes explains every row now in state: each (key, index) has an
    update in it and, if the row is matched, the update that marked it matched."""
    flags: dict[str, list[bool]] = {}
    for c in changes:
        if c["change_type"] == "update":
            flags.setdefault(_key_id(c["key"]), []).append(bool((c.get("value") or {}).get("matched")))
    for r in rows:
        seen = flags.get(_key_id(r["key"]))
        if not seen or ((r.get("value") or {}).get("matched") and not any(seen)):
            return False
    return True


def read_history(
    access: StateAccess,
    op: OperatorInfo,
    sources: list[tuple[str, StateSource]],
    lookups: dict[str, dict[str, wm.StoreLookup]],
    query: KeyQuery,
    ctx: wm.Context,
    committed: list[int],
) -> None:
    """Fill each lookup's ``changes`` and ``ctx.history`` (the batch range searched); a failed read goes
    to ``ctx.history_error``."""
    batch, first = ctx.batch, ctx.first_batch
    keys = list(query.keys)
    with_history = [(n, s) for n, s in sources if s.has_change_feed]
    if not with_history:
        return
    if not access.has_change_feed(op.operator_id):
        _history_from_state(access, sources, lookups, query, ctx, committed)
        return
    # a join key is explained by recent batches only when it is matched or on both sides: a key on one side
    # needs the other side's whole history (was its row there, and evicted unmatched?)
    explained = {
        key
        for key in keys
        if all(lk.rows for lk in lookups[key].values())
        or any((r.get("value") or {}).get("matched") for lk in lookups[key].values() for r in lk.rows)
    }
    need_all = ctx.kind != wm.JOIN or len(explained) < len(keys)
    size = 3
    while True:
        start = first if need_all else max(first, batch - size + 1)
        try:
            for name, src in with_history:
                owned = query.by_owner(access.changes(src, start, batch, query))
                for key in keys:
                    lookups[key][name].changes = [_without_key(r) for r in owned.get(key, ())]
                    lookups[key][name].changes_table = f"{table_name(src)}_changes"
        except StateReadError as e:
            _history_failed(ctx, lookups, e)
            return
        if start == first or all(
            _window_explains(lk.rows, lk.changes or []) for key in explained for lk in lookups[key].values()
        ):
            ctx.history = (start, batch)
            return
        size *= 3


def _history_from_state(
    access: StateAccess,
    sources: list[tuple[str, StateSource]],
    lookups: dict[str, dict[str, wm.StoreLookup]],
    query: KeyQuery,
    ctx: wm.Context,
    committed: list[int],
) -> None:
    """History without a change feed: the key's rows at each retained batch, as the change feed would show them."""
    upto = [b for b in committed if b <= ctx.batch][-MAX_STATE_BATCHES:]
    ctx.history_method = "state per batch"
    try:
        for name, src in sources:
            for key, changes in replay_states(access, src, upto, query).items():
                lookups[key][name].changes = changes
    except StateReadError as e:
        _history_failed(ctx, lookups, e)
        return
    ctx.history = (upto[0], upto[-1])
    if upto[0] > ctx.first_batch:
        ctx.notes.append(f"(History without a change feed covers the last {len(upto)} retained batches, from batch {upto[0]}.)")


def _history_failed(ctx: wm.Context, lookups: dict[str, dict[str, wm.StoreLookup]], e: StateReadError) -> None:
    """A history read failed: no key keeps a partial history, and the verdicts that need it say unknown."""
    ctx.history_error = e.message
    for per_store in lookups.values():
        for lk in per_store.values():
            lk.changes, lk.changes_table = None, None


def replay_states(access: StateAccess, src: StateSource, batches: list[int], query: KeyQuery) -> dict[str, list[dict[str, Any]]]:
    """Each asked key's rows in ``src`` at each of ``batches`` (one read a batch), replayed on their own as
    the change feed would show them: the history of a store without one."""
    per_batch = [(b, query.by_owner(access.rows(src, b, query))) for b in batches]
    return {k: replay_as_changes([(b, owned.get(k, [])) for b, owned in per_batch]) for k in query.keys}


def replay_as_changes(per_batch: list[tuple[int, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Rows present at successive batches -> change-feed-like rows: an update where a row appears or
    changes, a delete where it disappears."""
    out: list[dict[str, Any]] = []
    prev: dict[str, dict[str, Any]] = {}
    for b, rows in per_batch:
        now = {_key_id(r.get("key")): r for r in rows}
        for k, r in now.items():
            if k not in prev or wm.jsonable(prev[k].get("value")) != wm.jsonable(r.get("value")):
                out.append({**_without_key(r), "batch_id": b, "change_type": "update"})
        for k, r in prev.items():
            if k not in now:
                out.append({**_without_key(r), "batch_id": b, "change_type": "delete", "value": None})
        prev = now
    return out
