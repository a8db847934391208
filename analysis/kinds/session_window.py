"""Session windows: the session the record opened or joined, followed through the merges that grew it,
until the watermark closed it (emitted: the next operator's row or the query's output) or while it
stays open (the watermark that closes it)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from statelens.analysis.core.key_format import fmt_duration, to_ms
from statelens.analysis.core.operator_kinds import SESSION, OperatorKind
from statelens.analysis.fate.model import (
    DROPPED_AS_LATE,
    EMITTED,
    PASSED,
    REACHED_STATE,
    Cause,
    Output,
    Step,
    fmt_time,
    noun,
    record_text,
    window_text,
)
from statelens.analysis.fate.stage import Stage, key_has
from statelens.analysis.fate.walk import Arrival, FateWalk, Flow, OpView, StepResult, column_value, key_id
from statelens.analysis.kinds.aggregation import mode_known, output_mode, unless_emitted
from statelens.analysis.verdicts.key_verdicts import SESSION_OPEN, Context, KeyDiagnosis, StoreLookup


def session_of(row: dict[str, Any]) -> tuple[int, int] | None:
    """A state row's session: the struct with start and end in its value (its key holds the start only)."""
    for part in (row.get("value"), row.get("key")):
        for v in (part or {}).values() if isinstance(part, dict) else ():
            if isinstance(v, dict) and to_ms(v.get("start")) is not None and to_ms(v.get("end")) is not None:
                return to_ms(v["start"]) or 0, to_ms(v["end"]) or 0
    return None


class SessionStage(Stage):
    def step(self, walk: FateWalk, view: OpView, a: Arrival) -> StepResult:
        side, flow, rec, final, t_us = a.side, a.flow, a.rec, a.final, a.t_us
        op_id, b = view.operator_id, flow.batch
        state = self.state_of(walk, view, side, flow, rec)
        if isinstance(state, StepResult):
            return state
        col, value, [hist] = state
        wanted = {  # the group's columns the row has (without a plan the key also names the session's start)
            c.name: v for c in view.keys.get("", []) if c.window is None and (v := column_value(flow.values, c)) is not None
        }
        mine = [
            c for c in hist.changes if key_has({k: v for k, v in (c.get("key") or {}).items() if k in wanted}, wanted, walk.tz)
        ]
        t = t_us // 1000 if t_us is not None else None
        here = [
            c
            for c in mine
            if c["batch_id"] == b and c["change_type"] == "update" and (s := session_of(c)) and (t is None or s[0] <= t < s[1])
        ]
        if not here:
            late = walk.late_mark(op_id, b)
            if t is not None and late is not None and t <= late:  # the gap is not known: no session of it was kept
                detail = (
                    f"Dropped as late by {view.label} in batch {b}: no session holds its event time {fmt_time(t)}, which is "
                    f"behind the operator's late-row watermark {fmt_time(late)} (without the event log the session gap "
                    "is not known: a session ending after the watermark would have been kept)."
                )
                short = (
                    f"its {noun(rec)} ({record_text(rec)}, event time {fmt_time(t)[:-4]}) was dropped as late by operator "
                    f"{op_id} in batch {b}, behind its late-row watermark {fmt_time(late)[:-4]}"
                )
                return StepResult(
                    Step(op_id, DROPPED_AS_LATE, b, detail, cause=Cause(DROPPED_AS_LATE, op_id, b, None, rec, short))
                )
            held = f" holding {fmt_time(t)}" if t is not None else ""
            return self.not_found(walk, view, flow, rec, f"A session of {col.name} {value}{held}")
        start = here[0]
        cur_key, (s0, e0) = key_id(start["key"]), session_of(start) or (0, 0)
        closed: int | None = None
        merges = 0
        for g in sorted({c["batch_id"] for c in mine if c["batch_id"] > b}):
            at_g = [c for c in mine if c["batch_id"] == g]
            if any(c["change_type"] == "update" and key_id(c["key"]) == cur_key for c in at_g):  # grew later: same start
                s0, e0 = session_of(next(c for c in at_g if key_id(c["key"]) == cur_key and c["change_type"] == "update")) or (
                    s0,
                    e0,
                )
            if any(c["change_type"] == "delete" and key_id(c["key"]) == cur_key for c in at_g):
                # merged into another session holding its start (its own row re-put in the batch it closed is not one)
                into = next(
                    (
                        c
                        for c in at_g
                        if c["change_type"] == "update"
                        and key_id(c["key"]) != cur_key
                        and (s := session_of(c))
                        and s[0] <= s0 < s[1]
                    ),
                    None,
                )
                if into is None:
                    closed = g
                    break
                cur_key, (s0, e0) = key_id(into["key"]), session_of(into) or (s0, e0)  # merged into an earlier session
                merges += 1
        group = f"{col.name} {value}, session {window_text(s0, e0)[7:]}"
        merged = f" (merged {merges} time(s))" if merges else ""
        mode = output_mode(walk, view, True)
        outputs, flows, waiting = [], [], []
        row = {**wanted, "session_window": {"start": _utc(s0), "end": _utc(e0)}}  # the row it is, emitted
        if closed is not None or mode != "append":
            out_at = closed if closed is not None else b
            text = (
                f"emitted in batch {out_at}, when the watermark passed its end{merged}"
                if closed is not None
                else f"emitted updated in batch {b}"
            )
            outputs.append(Output(op_id, group, out_at, EMITTED, text, null_padded=flow.null_padded, key=key_id(row)))
            flows.append(Flow(row, out_at, flow.null_padded, flow.unmatched_cause))
        elif any(key_id(r["key"]) == cur_key for r in hist.rows):
            w = walk.release(op_id, e0, group, None, f"the session {window_text(s0, e0)[7:]}{merged}")
            if not mode_known(walk, view):  # append assumed: in update or complete mode it went out
                w = dataclasses.replace(w, unless_emitted=unless_emitted(view, group), key=key_id(row))
            waiting.append(w)
            text = f"still open, waiting for the watermark{merged}"
        else:
            text = f"left the state without being emitted{merged}"
        detail = f"Counted in {view.label} in batch {b}, in the session {window_text(s0, e0)[7:]}: {text}."
        step = Step(op_id, REACHED_STATE if final or not flows else PASSED, b, detail, None, group, [dict(c) for c in here][:10])
        return StepResult(step, flows, outputs, waiting)


def _utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


# ---- the one-operator verdict


def in_state(key: str, ctx: Context, state_rows: list[dict[str, Any]], lookups: list[StoreLookup], what: str) -> KeyDiagnosis:
    wm = ctx.watermark
    sessions = []
    for r in state_rows:
        w = (r.get("value") or {}).get("session_window") or {}
        s, e = to_ms(w.get("start")), to_ms(w.get("end"))
        if s is not None and e is not None:
            sessions.append((s, e))
    desc = "; ".join(
        f"{fmt_time(s)} – {fmt_time(e)} ({'closes in ' + fmt_duration(e - wm) if e > wm else 'closing'})"
        for s, e in sorted(sessions)
    )
    return KeyDiagnosis(
        key,
        SESSION_OPEN,
        f"{what} has {len(sessions)} open session(s): {desc}. A session closes and is emitted (append mode) "
        f"once the watermark (now {fmt_time(wm)}) passes its end; new events within the gap extend it.",
    )


KIND = OperatorKind(
    SESSION,
    ("sessionwindow*",),
    ("SessionWindowStateStoreSave",),
    "session window",
    emits_when_evicted=True,
    watermark_evicts=True,
    stage=SessionStage(),
    in_state=in_state,
    evicted=lambda ctx: "The watermark passed the end of its session: the session was closed and emitted (append mode).",
)
