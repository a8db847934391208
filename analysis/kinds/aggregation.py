"""An aggregation (time windows or plain groups): the state row the record was counted in, then when
that row went out (append: the batch the watermark evicted it; update: the batch it changed; complete:
every batch), as the next operator's input row or the query's output, or the watermark it waits for."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from typing import TYPE_CHECKING, Any

from statelens.analysis.core.key_format import fmt_duration, to_ms
from statelens.analysis.core.model import append_only
from statelens.analysis.core.operator_kinds import AGGREGATION, OperatorKind
from statelens.analysis.fate.model import (
    EMITTED,
    MODE_UNKNOWN,
    PASSED,
    REACHED_STATE,
    UNKNOWN,
    Cause,
    Output,
    Step,
    Waiting,
    fmt_time,
    group_text,
)
from statelens.analysis.fate.stage import Stage, key_has
from statelens.analysis.fate.walk import (
    TIME_KEYS,
    Arrival,
    FateWalk,
    Flow,
    OpView,
    StepResult,
    column_value,
    key_id,
    window_of_key,
)
from statelens.analysis.inputs.records import event_time_us
from statelens.analysis.verdicts.key_verdicts import IN_STATE, WAITING_WATERMARK, Context, KeyDiagnosis, StoreLookup

if TYPE_CHECKING:
    from statelens.analysis.plan.query_plan import Window


def output_mode(walk: FateWalk, view: OpView, windowed: bool) -> str:
    """The operator's output mode: the plan's; append where the query has several stateful operators
    (the only mode Spark runs them in); else append for windows with a watermark (said once)."""
    if mode_known(walk, view):
        return (view.output_mode or "Append").lower()
    mode = "append" if windowed and any(walk.watermarks.values()) else "update"
    walk.note(f"The output mode is not in the checkpoint; {mode} mode was assumed (give the query's event log to know).")
    return mode


def mode_known(walk: FateWalk, view: OpView) -> bool:
    """The plan gives the output mode, or the checkpoint's several stateful operators do (append only)."""
    return view.output_mode is not None or append_only(walk.info)


class AggregationStage(Stage):
    def step(self, walk: FateWalk, view: OpView, a: Arrival) -> StepResult:
        side, flow, rec, final, t_us, window = a.side, a.flow, a.rec, a.final, a.t_us, a.window
        op_id, b = view.operator_id, flow.batch
        state = self.state_of(walk, view, side, flow, rec)
        if isinstance(state, StepResult):
            return state
        col, value, [hist] = state
        wanted = {
            c.name: column_value(flow.values, c)
            for c in view.keys.get("", [])
            if c.window is None and c.name not in TIME_KEYS and c.name not in flow.computed  # explode's: any of its rows
        }
        t = t_us // 1000 if t_us is not None else None
        windows = window.of(t) if window is not None and t is not None else None
        # the rows it was counted in: changed in its batch (a row closed in the same batch shows as a delete)
        updates = [c for c in hist.changes if c["batch_id"] == b and key_has(c.get("key") or {}, wanted, walk.tz)]
        if t is not None and view.planned:
            updates = [
                c
                for c in updates
                if (windows is None and (_covers(c["key"], t) or window_of_key(c["key"]) is None))
                or (windows and window_of_key(c["key"]) in windows)
            ]
        elif t is not None:  # no plan: which column the window is on is not known: any time the row holds
            times = [
                x // 1000
                for v in flow.values.values()
                if (x := event_time_us(v, walk.tz) if isinstance(v, (str, dt.datetime)) else None) is not None
            ]
            updates = [c for c in updates if window_of_key(c["key"]) is None or any(_covers(c["key"], x) for x in times)]
        # the plan's window over a time it does not trace to the input: the windows of one event time it may have had
        maybe = _maybe_counted_in(window, updates, walk.late_mark(op_id, b)) if t is None and window is not None else []
        if maybe:
            updates = [c for c in updates if key_id(c["key"]) in set().union(*maybe)]
        changes = hist.changes
        if not updates and windows:
            updates = _closed_unseen(walk, view, b, windows, wanted)
            changes = [*changes, *updates]
        if not updates:
            holding = f" holding {fmt_time(t)}" if t is not None else ""
            return self.not_found(walk, view, flow, rec, f"A row of {col.name} {value}{holding}")
        keys = {key_id(c["key"]): c["key"] for c in updates}
        mode = output_mode(walk, view, any(window_of_key(k) for k in keys.values()))
        outputs: list[Output] = []
        flows: list[Flow] = []
        waiting: list[Waiting] = []
        texts = []
        for kid, key in keys.items():
            group = group_text(key)
            # closed by the watermark: its delete from this batch on (a row counted and closed in one batch too)
            later = sorted((c for c in changes if key_id(c["key"]) == kid and c["batch_id"] >= b), key=lambda c: c["batch_id"])
            gone = next((c["batch_id"] for c in later if c["change_type"] == "delete"), None)
            held = any(key_id(r["key"]) == kid for r in hist.rows)
            out_at: int | None = None
            if mode == "append":
                if gone is not None:
                    out_at = gone
                    texts.append(f"{group}: emitted in batch {gone}, when the watermark passed its end")
                elif held:
                    win = window_of_key(key)
                    if win is not None:
                        w = dataclasses.replace(walk.release(op_id, win[1], group, None, group), key=kid)
                        if not mode_known(walk, view):  # append assumed: in update or complete mode it went out
                            w = dataclasses.replace(w, unless_emitted=unless_emitted(view, group))
                        waiting.append(w)
                    else:
                        waiting.append(Waiting(op_id, group, None, None, f"{group}: no window: append mode never emits it"))
                    texts.append(f"{group}: still in state, waiting for the watermark")
            elif mode == "update":
                out_at = b
                texts.append(f"{group}: emitted updated in batch {b}")
            else:
                out_at = b
                texts.append(f"{group}: in the output of batch {b} and every batch after (complete mode)")
            if out_at is not None:
                detail = {"append": "closed: the watermark passed its end", "update": "updated"}.get(
                    mode, "complete mode: in every batch's output from then on"
                )
                outputs.append(Output(op_id, group, out_at, EMITTED, detail, null_padded=flow.null_padded, key=kid))
                flows.append(Flow(dict(key), out_at, flow.null_padded, flow.unmatched_cause))
        detail = f"Counted in {view.label} in batch {b}: " + "; ".join(texts) + "."
        evidence = [dict(c) for c in updates][:10]
        groups = "; ".join(group_text(k) for k in keys.values())
        emitted = {o.key for o in outputs}
        if len({bool(ids & emitted) for ids in maybe}) > 1:  # some of the windows it may be in went out, others not
            why = (
                f"its event time at {view.label} is one the query's plan does not trace to an input column (computed "
                f"by an expression or by Python code): of its group's windows changed in batch {b}, some it may have "
                f"been counted in were emitted and others still wait: {'; '.join(texts)}"
            )
            cause = Cause(UNKNOWN, op_id, b, None, rec, why, why=why)
            return StepResult(Step(op_id, UNKNOWN, b, why[0].upper() + why[1:] + ".", None, groups, evidence, cause=cause))
        step = Step(op_id, REACHED_STATE if final else (PASSED if flows else REACHED_STATE), b, detail, None, groups, evidence)
        return StepResult(step, flows, outputs, waiting)


def unless_emitted(view: OpView, group: str) -> str:
    return f"{group} is still in {view.label}'s state: {MODE_UNKNOWN}"


def _closed_unseen(
    walk: FateWalk, view: OpView, b: int, windows: list[tuple[int, int]], wanted: dict[str, Any]
) -> list[dict[str, Any]]:
    """Without a change feed the state is seen at batch ends only: a window the row was counted in and
    that the watermark closed in the same batch is in no batch's state. Its row, as a change feed would
    show it (a delete in that batch), where the plan's eviction watermark of the batch is past its end."""
    marks = walk.marks.get(b, {}).get(view.operator_id)
    name = next((c.name for c in view.keys.get("", []) if c.window is not None), None)
    if walk.access.has_change_feed(view.operator_id) or not view.planned or marks is None or marks.eviction is None or not name:
        return []
    closed = [w for w in windows if w[1] <= marks.eviction]
    if closed:
        walk.note(
            f"{view.label} has no change feed: a window counted and closed in the same batch is in no batch's state; "
            "it was taken to be emitted then, its end being behind that batch's eviction watermark."
        )
    return [
        {"batch_id": b, "change_type": "delete", "key": {name: {"start": _utc(s), "end": _utc(e)}, **wanted}, "value": None}
        for s, e in closed
    ]


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def _maybe_counted_in(window: Window, changed: list[dict[str, Any]], late_ms: int | None) -> list[set[str]]:
    """Without the row's event time (its window's spec known, not the time it is over): the sets of its
    group's windows it may have been counted in, as key ids. Those of one event time past the batch's
    late-row watermark (Spark drops a row at or behind it) whose windows each changed in the batch, as
    a row counted in a window changes it; none: not told this way (a change without a window, a
    session, windows too many to walk)."""
    found = {window_of_key(c["key"]): key_id(c["key"]) for c in changed}
    ids = {w: i for w, i in found.items() if w is not None}
    if window.session or not ids or len(ids) < len(found):
        return []
    lo, hi = min(s for s, _ in ids), max(e for _, e in ids)
    first = lo - window.size_ms
    first -= (first - window.start_ms) % window.slide_ms
    if (hi - first) // window.slide_ms > 10_000:
        return []
    # the times a row's windows change at: every window's start and end on the grid
    edges = sorted({x for g in range(first, hi + 1, window.slide_ms) for x in (g, g + window.size_ms) if lo <= x <= hi})
    out: list[set[str]] = []
    for at, until in itertools.pairwise(edges):
        if late_ms is not None and until <= late_ms:  # every time from here to there is late
            continue
        held = window.of(at)
        if held and all(w in ids for w in held) and (these := {ids[w] for w in held}) not in out:
            out.append(these)
    return out


def _covers(key: dict[str, Any], t_ms: int) -> bool:
    w = window_of_key(key)
    return w is not None and w[0] <= t_ms < w[1]


# ---- the one-operator verdict


def in_state(key: str, ctx: Context, state_rows: list[dict[str, Any]], lookups: list[StoreLookup], what: str) -> KeyDiagnosis:
    wm = ctx.watermark
    windows = [(r["key"].get("window") or {}) for r in state_rows if isinstance(r.get("key"), dict)]
    ends = sorted(e for w in windows if isinstance(w, dict) and (e := to_ms(w.get("end"))) is not None)
    mode = (ctx.output_mode or "").lower()
    if not ends:
        emitted = {
            "update": "this query runs in update mode: its new value is emitted in every batch that changes it.",
            "complete": "this query runs in complete mode: it is in every batch's output.",
            "append": "this query runs in append mode, which emits a group only when it is removed: never, here.",
        }.get(
            mode,
            "in update or complete mode its new value is emitted in every batch that changes it (append mode emits "
            "nothing for it until it is removed, which does not happen).",
        )
        return KeyDiagnosis(
            key,
            IN_STATE,
            f"{what} is in state ({len(state_rows)} row(s)). Its group has no window, so the watermark never removes it; "
            + emitted,
        )
    if not wm:
        emitted = {
            "update": "This query runs in update mode: they are emitted in every batch that changes them.",
            "complete": "This query runs in complete mode: every batch's output holds all of them.",
        }.get(
            mode,
            "In complete or update mode they are emitted in every batch that changes them; append mode would need a watermark.",
        )
        return KeyDiagnosis(
            key,
            IN_STATE,
            f"{what} has {len(ends)} window(s) in state and the query has no watermark: windows never close and are "
            f"never removed. {emitted}",
        )
    past = [e for e in ends if e <= wm]
    if past and (ctx.single_operator or mode == "complete") and mode != "append":
        return KeyDiagnosis(
            key,
            IN_STATE,
            f"{what} has {len(ends)} window(s) in state, {len(past)} of them ending at or before the watermark "
            f"({fmt_time(wm)}) yet still kept: the query runs in complete mode, which keeps every window and emits all "
            "of them in every batch.",
        )
    if past:
        return KeyDiagnosis(
            key,
            WAITING_WATERMARK,
            f"{what} has {len(ends)} window(s) in state; {len(past)} end before the query's watermark ({fmt_time(wm)}) "
            "but are still kept: in a query with several stateful operators this one evicts by the watermark of its "
            "input, which lags behind the upstream operator's bound (for example a join's time range). "
            + ("Each" if mode == "append" else "In append mode each")
            + f" window is emitted when that watermark passes its end; the earliest ends at {fmt_time(min(ends))}.",
        )
    nxt = min(ends)
    closes = (
        f"the watermark (now {fmt_time(wm)}) reaches its end: the next closes at {fmt_time(nxt)}, {fmt_duration(nxt - wm)} ahead of "
        "the watermark."
        if ctx.single_operator
        # several operators: this one evicts by its input's watermark, which may trail the query's (a join's
        # bound upstream): only the window's end is said, not a distance to the query's watermark
        else f"the watermark of its input passes its end: the next ends at {fmt_time(nxt)} (the query's watermark is "
        f"{fmt_time(wm)}; this operator's may trail it)."
    )
    if mode == "update":
        text = f"{what} has {len(ends)} window(s) in state. This query runs in update mode: their current counts were emitted in the batches that changed them; each leaves the state when {closes}"
    elif mode == "append":
        text = f"{what} has {len(ends)} window(s) in state. This query runs in append mode: a window is emitted when {closes}"
    else:  # not known: append assumed (the diagnosis says so once)
        text = f"{what} has {len(ends)} window(s) in state. A window is emitted when {closes}"
    return KeyDiagnosis(key, WAITING_WATERMARK, text)


def evicted(ctx: Context) -> str:
    """What the watermark's removal of a group's window meant for its output."""
    mode = (ctx.output_mode or "").lower()
    if mode == "append":
        return (
            "The watermark passed the end of its window: this query runs in append mode, so its result was emitted in that batch."
        )
    if mode == "update":
        return "The watermark passed the end of its window: this query runs in update mode, so its counts had been emitted in the batches that changed them."
    return "The watermark passed the end of its window: its result was emitted in that batch."


# a plain group-by keeps every group: what lets its state leave
WINDOWED = (
    "Fix: group by a window of the event-time column (window(eventTime, ...)) with a watermark, so closed windows "
    "are removed; a plain group-by keeps every group forever.",
    "groupBy(window(eventTimeColumn, duration), ...)",
)

KIND = OperatorKind(
    AGGREGATION,
    ("statestoresave*",),
    ("StateStoreSave",),
    "aggregation",
    emits_when_evicted=True,
    unmatched=True,
    watermark_evicts=True,
    needs_key_time=WINDOWED,
    stage=AggregationStage(),
    in_state=in_state,
    evicted=evicted,
)
