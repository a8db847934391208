"""Verdicts of aggregations, dropDuplicates, session windows, group state and transformWithState."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from statelens.analysis.core.key_format import event_time_ms, fmt_duration, fmt_time, jsonable, to_ms
from statelens.analysis.core.operator_kinds import GROUP_STATE, LIMIT, TWS, UnsupportedOperator
from statelens.analysis.verdicts.key_timeline import row_evidence
from statelens.analysis.verdicts.key_verdicts import (
    AGGREGATION,
    DEDUP,
    DEDUP_WITHIN,
    DROPPING_DUPLICATES,
    IN_STATE,
    NEVER_IN_STATE,
    SESSION,
    SESSION_OPEN,
    WAITING_WATERMARK,
    Context,
    KeyDiagnosis,
    StoreLookup,
)
from statelens.analysis.verdicts.verdict_common import near_misses, near_text, not_in_state


def diagnose_stateful(key: str, ctx: Context, lookups: list[StoreLookup]) -> KeyDiagnosis:
    rows = [(lk.name, r) for lk in lookups for r in lk.rows]
    what = f"The key ({ctx.key_field} = {key!r})"
    if not rows:
        d = not_in_state(key, ctx, lookups, what)
        d.near_misses = near_misses(key, lookups, ctx.batch)
        if d.near_misses and d.verdict == NEVER_IN_STATE:
            d.explanation += f" Similar keys are or were in state: {near_text(d.near_misses, False)}."
        return d
    d = in_state_verdict(ctx.kind)(key, ctx, [r for _, r in rows], lookups, what)
    for name, r in rows:
        d.evidence.append(row_evidence(name, r, ctx.batch))
    return d


def in_state_verdict(kind: str) -> InStateVerdict:
    """The verdict of a kind's operator on a key it holds state for (a join's: ``join_verdicts``); a
    kind without one is refused, never given another kind's."""
    if kind not in VERDICTS:
        raise UnsupportedOperator(f"operator kind {kind} has no verdict yet")
    return VERDICTS[kind]


def _dedup_in_state(
    key: str, ctx: Context, state_rows: list[dict[str, Any]], lookups: list[StoreLookup], what: str
) -> KeyDiagnosis:
    wm = ctx.watermark
    if ctx.kind == DEDUP_WITHIN:
        expires = [r["value"]["expiresAtMicros"] // 1000 for r in state_rows if (r.get("value") or {}).get("expiresAtMicros")]
        until = f"until the watermark passes {fmt_time(max(expires))}" if expires else "until it expires"
        never = not wm
    else:
        times = [t for r in state_rows for _, t in [event_time_ms(r.get("key"))] if t is not None]
        until = f"until the watermark passes its event time {fmt_time(max(times))}" if times else ""
        never = not wm or not times
    if never:
        why = (
            "there is no watermark"
            if not wm
            else "the deduplication key has no event-time column, so the watermark cannot evict it"
        )
        tail = f" It is never removed: {why}, and this state grows with every new key."
        until = "for as long as the query runs"
    else:
        tail = f" The watermark has not passed it yet (now {fmt_time(wm)})."
    return KeyDiagnosis(
        key,
        DROPPING_DUPLICATES,
        f"{what} is in the deduplication state: the first row with it was emitted, and every later row "
        f"with it is dropped as a duplicate {until}.{tail}",
    )


def _session_in_state(
    key: str, ctx: Context, state_rows: list[dict[str, Any]], lookups: list[StoreLookup], what: str
) -> KeyDiagnosis:
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


def _holds_state(key: str, ctx: Context, state_rows: list[dict[str, Any]], lookups: list[StoreLookup], what: str) -> KeyDiagnosis:
    """A user's function's state (group state, transformWithState: what it keeps, its timeouts and
    timers), or a limit's: the key holds it, as it is."""
    return KeyDiagnosis(key, IN_STATE, f"{what} holds state: {_state_summary(lookups, ctx)}.")


def _aggregation_in_state(
    key: str, ctx: Context, state_rows: list[dict[str, Any]], lookups: list[StoreLookup], what: str
) -> KeyDiagnosis:
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


def _state_summary(lookups: list[StoreLookup], ctx: Context) -> str:
    """Group state with its timeout, or each transformWithState variable with its value, TTL and timers."""
    wm = ctx.watermark
    last_time = ctx.batch_times.get(ctx.batch, 0)
    parts = []
    for lk in lookups:
        if not lk.rows:
            continue
        r0 = lk.rows[0]
        v = r0.get("value") or {}
        if "timeoutTimestamp" in v:
            tt = v.get("timeoutTimestamp") or 0
            if tt <= 0:
                timeout = ", no timeout set"
            elif not wm:
                timeout = (
                    f", times out at processing time {fmt_time(tt)} (a processing-time timeout: there is no watermark; "
                    f"batch {ctx.batch} ran at {fmt_time(last_time)}): it fires in the first batch that runs after that"
                )
            else:
                timeout = (
                    f", times out when the watermark passes {fmt_time(tt)} (now {fmt_time(wm)}) if the timeout is on event "
                    f"time, or at processing time {fmt_time(tt)} if it is on processing time (batch {ctx.batch} ran at "
                    f"{fmt_time(last_time)})"
                )
            parts.append(f"group state {json.dumps(jsonable(v.get('groupState', v)))}{timeout}")
        elif "expiration_timestamp_ms" in r0:
            parts.append("timer(s) at " + ", ".join(fmt_time(t) for t in sorted(r["expiration_timestamp_ms"] for r in lk.rows)))
        elif "list_element" in r0:
            parts.append(f"list '{lk.name}' with {len(lk.rows)} element(s)")
        elif "user_map_key" in r0:
            # in the user keys' order: the rows' order is the reader's (a snapshot's, or a changelog's)
            shown = sorted(
                (json.dumps(jsonable(r["user_map_key"]), sort_keys=True), json.dumps(jsonable(r["user_map_value"])))
                for r in lk.rows
            )
            entries = ", ".join(f"{k}: {v}" for k, v in shown[:5])
            parts.append(f"map '{lk.name}' {{{entries}}}")
        else:
            ttl = _ttl(r0)
            parts.append(f"value '{lk.name}' = {json.dumps(jsonable(v))}{ttl}")
    return "; ".join(parts)


def _ttl(row: dict[str, Any]) -> str:
    """A transformWithState TTL expiry, wherever the reader puts it (value field or its own column)."""
    for holder in (row, row.get("value") or {}):
        for name in ("ttlExpirationMs", "ttl_expiration_ms", "expiration_timestamp_ms"):
            t = holder.get(name) if isinstance(holder, dict) else None
            if isinstance(t, int) and t > 0:
                return f", expires by TTL at processing time {fmt_time(t)}"
    return ""


# (key, context, its state rows, every store's lookup, "The key (field = 'x')") -> the verdict
InStateVerdict = Callable[[str, Context, list[dict[str, Any]], list[StoreLookup], str], KeyDiagnosis]
# each kind's verdict on a key it holds state for, one per kind of the registry but the join's
VERDICTS: dict[str, InStateVerdict] = {
    AGGREGATION: _aggregation_in_state,
    DEDUP: _dedup_in_state,
    DEDUP_WITHIN: _dedup_in_state,
    SESSION: _session_in_state,
    GROUP_STATE: _holds_state,
    TWS: _holds_state,
    LIMIT: _holds_state,
}
