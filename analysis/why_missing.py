"""'Why is key X missing': one verdict per key, with evidence, a timeline and the SQL behind it.

Pure functions. ``spark_io.diagnosis`` reads, for each key, the rows that hold it in every
relevant store at the chosen batch, its change-feed history, and near-miss keys; this
module turns them into a ``KeyDiagnosis``. Verdicts by operator:

* stream-stream join: ``matched``, ``waiting_for_other_side``, ``condition_not_met``,
  ``evicted``, ``never_in_state`` (the State Reader blog's left/right outer join, plus history)
* aggregation: ``waiting_for_watermark`` (windowed) or ``in_state``, ``evicted``, ``never_in_state``
* dropDuplicates(WithinWatermark): ``dropping_duplicates``, ``evicted``, ``never_in_state``
* session windows: ``session_open``, ``evicted``, ``never_in_state``
* applyInPandasWithState / flatMapGroupsWithState / transformWithState: ``in_state``,
  ``evicted``, ``never_in_state``
* any operator, given the missing record's event time and the query's progress:
  ``dropped_as_late`` (see ``apply_lateness``)
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from dataclasses import dataclass, field
from typing import Any

MATCHED = "matched"
WAITING_OTHER_SIDE = "waiting_for_other_side"
CONDITION_NOT_MET = "condition_not_met"
EVICTED = "evicted"
NEVER_IN_STATE = "never_in_state"
WAITING_WATERMARK = "waiting_for_watermark"
IN_STATE = "in_state"
DROPPING_DUPLICATES = "dropping_duplicates"
SESSION_OPEN = "session_open"
EMITTED_UNMATCHED = "emitted_unmatched"  # outer join: evicted unmatched on a preserved side, emitted null-padded
UNKNOWN = "unknown"  # a read the verdict depends on failed
DROPPED_AS_LATE = "dropped_as_late"  # the record's event time was behind the watermark and the operator dropped late rows

JOIN_TYPES = ("inner", "left_outer", "right_outer", "full_outer", "left_semi")
PRESERVED = {"inner": (), "left_semi": (), "left_outer": ("left",), "right_outer": ("right",), "full_outer": ("left", "right")}

MAX_EVIDENCE = 200  # rows of evidence per key; the SQL reproduces all of them

JOIN, AGGREGATION, DEDUP, DEDUP_WITHIN, SESSION, GROUP_STATE, TWS = (
    "join",
    "aggregation",
    "dedup",
    "dedup_within_watermark",
    "session_window",
    "group_state",
    "transform_with_state",
)


def operator_kind(operator_name: str) -> str:
    name = operator_name.lower()
    if name == "symmetrichashjoin":
        return JOIN
    if "transformwithstate" in name:
        return TWS
    if "withstate" in name:  # applyInPandasWithState, flatMapGroupsWithState
        return GROUP_STATE
    if name.startswith("sessionwindow"):
        return SESSION
    if name == "dedupewithinwatermark":
        return DEDUP_WITHIN
    if name.startswith("dedupe"):
        return DEDUP
    return AGGREGATION


# --------------------------------------------------------------------------- inputs


@dataclass
class StoreLookup:
    """What one store says about one key: rows at the batch, history, near-miss keys."""

    name: str  # "left" / "right" for join sides, "state" or a state variable name otherwise
    table: str  # the workspace SQL table that holds these rows
    rows: list[dict[str, Any]] = field(default_factory=list)  # state rows at the batch
    changes: list[dict[str, Any]] | None = None  # change-feed rows for the key; None: no history
    changes_table: str | None = None
    near: list[str] = field(default_factory=list)  # other keys that look like this one


@dataclass
class Context:
    kind: str
    operator_id: int
    operator_name: str
    batch: int
    watermarks: dict[int, int]  # batch -> watermark (ms) used by that batch
    key_field: str
    history: tuple[int, int] | None = None  # change-feed batches searched
    first_batch: int = 0  # oldest retained batch
    eviction_horizon: dict[str, tuple[int, int]] = field(default_factory=dict)  # join side -> (lo, hi) ms
    join_type: str | None = None  # not recorded in the checkpoint: given by the user
    join_format: int = 2  # join state format 1 has no 'matched' flag
    history_method: str = "change feed"  # or "state per batch" (no change feed)
    history_error: str | None = None  # a failed history read: verdicts that depend on it are unknown
    notes: list[str] = field(default_factory=list)  # failed side reads worth saying in every explanation
    batch_times: dict[int, int] = field(default_factory=dict)  # batch -> batch timestamp (ms)
    single_operator: bool = True

    @property
    def watermark(self) -> int:
        return self.watermarks.get(self.batch, 0)


@dataclass
class KeyDiagnosis:
    key: str
    verdict: str
    explanation: str
    side: str | None = None
    was_matched: bool | None = None
    evicted_at_batch: int | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    near_misses: list[dict[str, str]] = field(default_factory=list)
    queries: list[dict[str, str]] = field(default_factory=list)  # title, sql: reproduce the evidence
    matched_as: str | None = None  # how the typed key was compared

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "verdict": self.verdict,
            "side": self.side,
            "was_matched": self.was_matched,
            "evicted_at_batch": self.evicted_at_batch,
            "matched_as": self.matched_as,
            "explanation": self.explanation,
            "evidence": self.evidence,
            "timeline": self.timeline,
            "near_misses": self.near_misses,
            "queries": self.queries,
        }


# --------------------------------------------------------------------------- helpers


def fmt_ms(ms: int | None) -> str:
    if not ms:
        return "none"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def to_ms(v: Any) -> int | None:
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.UTC)
        return int(v.timestamp() * 1000)
    return None


def fmt_duration(ms: int) -> str:
    sign = "-" if ms < 0 else ""
    s = abs(ms) // 1000
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{sec}s" if sec or not (h or m) else ""]
    return sign + " ".join(p for p in parts if p)


def jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, decimal.Decimal):
        return str(v)
    return v


def event_time_ms(value: dict[str, Any] | None) -> tuple[str | None, int | None]:
    """The first timestamp field of a state value: the row's event time."""
    for k, v in (value or {}).items():
        ms = to_ms(v)
        if ms is not None:
            return k, ms
    return None, None


def row_time_ms(row: dict[str, Any]) -> int | None:
    """A state row's event time: its value's first timestamp, else its key's window start or
    timestamp field; None when the row carries no time (group state without one, say)."""
    _, ms = event_time_ms(row.get("value") if isinstance(row.get("value"), dict) else None)
    if ms is not None:
        return ms
    key = row.get("key")
    for v in (key or {}).values() if isinstance(key, dict) else []:
        if isinstance(v, dict) and to_ms(v.get("start")) is not None:
            return to_ms(v.get("start"))
        if to_ms(v) is not None:
            return to_ms(v)
    return None


def sql_literal(s: str) -> str:
    """A DuckDB string literal: quotes doubled, nothing else is special."""
    return "'" + s.replace("'", "''") + "'"


def normalize(s: str) -> str:
    return re.sub(r"[^0-9a-z]", "", s.lower())


def digits(s: str) -> str:
    return re.sub(r"[^0-9]", "", s)


def near_miss_reason(key: str, other: str) -> str | None:
    """Why ``other`` looks like a malformed ``key`` (or None when it does not)."""
    if other == key:
        return None
    if other.strip() == key.strip():
        return "leading/trailing whitespace differs"
    if other.lower() == key.lower():
        return "letter case differs"
    if normalize(other) == normalize(key):
        return "punctuation or spacing differs"
    if len(digits(key)) >= 2 and digits(other) == digits(key):
        return "same digits, other prefix"
    return None


def near_misses(key: str, candidates: list[str], limit: int = 8) -> list[dict[str, str]]:
    out = []
    for c in sorted(set(candidates)):
        reason = near_miss_reason(key, c)
        if reason:
            out.append({"key": c, "reason": reason})
    return out[:limit]


def _row_evidence(store: str, row: dict[str, Any], batch: int | None = None) -> dict[str, Any]:
    value = row.get("value")
    ev: dict[str, Any] = {"store": store, "batch_id": batch if batch is not None else row.get("batch_id")}
    if "change_type" in row:
        ev["change_type"] = row["change_type"]
    ev["key"] = jsonable(row.get("key"))
    if value is not None or "value" in row:
        ev["value"] = jsonable(value)
    for extra in ("list_element", "user_map_key", "user_map_value", "expiration_timestamp_ms"):
        if extra in row:
            ev[extra] = jsonable(row[extra])
    ev["partition_id"] = row.get("partition_id")
    return ev


def _history(lookup: StoreLookup) -> list[dict[str, Any]]:
    return sorted(lookup.changes or [], key=lambda r: r["batch_id"])


def _timeline(lookups: list[StoreLookup], ctx: Context) -> list[dict[str, Any]]:
    """Life of the key per store: entered, updated, matched, removed; with the batch's watermark.

    When the history searched starts after the oldest retained batch, a row first seen already
    matched is shown as matched there (it may have entered state earlier).
    """
    partial = ctx.history is not None and ctx.history[0] > ctx.first_batch
    events = []
    for lk in lookups:
        present: set[str] = set()
        was_matched: set[str] = set()
        last_time: dict[str, int | None] = {}  # a delete carries no value: the row's time as last seen
        for r in _history(lk):
            k = json.dumps(jsonable(r.get("key")), sort_keys=True)
            b = r["batch_id"]
            t = row_time_ms(r)
            t = last_time.get(k) if t is None else t
            last_time[k] = t
            if r["change_type"] == "delete":
                event = "evicted" if k in present else "removed"
                present.discard(k)
            else:
                matched = bool((r.get("value") or {}).get("matched"))
                if k not in present:
                    event = "matched" if partial and matched else "entered state"
                elif matched and k not in was_matched:
                    event = "matched"
                else:
                    event = "updated"
                if matched:
                    was_matched.add(k)
                present.add(k)
            events.append(
                {
                    "batch_id": b,
                    "store": lk.name,
                    "event": event,
                    "watermark_ms": ctx.watermarks.get(b, 0),
                    "event_time_ms": t,
                }
            )
        if lk.rows:
            times = [t for t in (row_time_ms(r) for r in lk.rows) if t is not None]
            events.append(
                {
                    "batch_id": ctx.batch,
                    "store": lk.name,
                    "event": f"in state ({len(lk.rows)} row{'s' if len(lk.rows) != 1 else ''})",
                    "watermark_ms": ctx.watermark,
                    "event_time_ms": max(times) if times else None,
                }
            )
    # one row per (batch, store, event), in batch order
    seen, out = set(), []
    for e in sorted(events, key=lambda e: (e["batch_id"], e["store"])):
        sig = (e["batch_id"], e["store"], e["event"])
        if sig not in seen:
            seen.add(sig)
            out.append(e)
    return out


def _queries(key: str, ctx: Context, lookups: list[StoreLookup]) -> list[dict[str, str]]:
    lit = sql_literal(key)
    kf = ctx.key_field
    out = []
    if ctx.kind == JOIN and len(lookups) == 2:
        left, right = lookups
        out.append(
            {
                "title": "Both sides' state for the key (the State Reader blog's outer join)",
                "sql": (
                    f"SELECT coalesce(l.key.{kf}, r.key.{kf}) AS join_key, l.key.index AS left_index, "
                    "l.value.matched AS left_matched, l.value AS left_value,\n"
                    "       r.key.index AS right_index, r.value.matched AS right_matched, r.value AS right_value\n"
                    f"FROM {left.table} l\nFULL OUTER JOIN {right.table} r ON l.key.{kf} = r.key.{kf}\n"
                    f"WHERE CAST(coalesce(l.key.{kf}, r.key.{kf}) AS VARCHAR) = {lit}"
                ),
            }
        )
    else:
        for lk in lookups:
            out.append(
                {
                    "title": f"State rows for the key ({lk.name})",
                    "sql": f"SELECT * FROM {lk.table} WHERE CAST(key.{kf} AS VARCHAR) = {lit}",
                }
            )
    for lk in lookups:
        if lk.changes_table:
            out.append(
                {
                    "title": f"History of the key ({lk.name} change feed)",
                    "sql": (
                        f"SELECT batch_id, change_type, key, value, partition_id FROM {lk.changes_table}\n"
                        f"WHERE CAST(key.{kf} AS VARCHAR) = {lit} ORDER BY batch_id"
                    ),
                }
            )
    return out


def _searched(ctx: Context) -> str:
    if ctx.history is None:
        return f"only the state at batch {ctx.batch} was searched"
    a, b = ctx.history
    how = "the change feed" if ctx.history_method == "change feed" else "the state at every retained batch (no change feed)"
    return f"searched the state at batch {ctx.batch} and {how} of batches {a}–{b}"


def _side_history(lk: StoreLookup) -> tuple[int | None, bool | None, bool]:
    """(last delete batch, whether a row was ever matched (None: no matched flag), whether a row was seen)."""
    hist = _history(lk)
    deletes = [r["batch_id"] for r in hist if r["change_type"] == "delete"]
    updates = [r for r in hist if r["change_type"] != "delete"]
    flags = [(r.get("value") or {}).get("matched") for r in updates]
    matched = any(flags) if any(f is not None for f in flags) else None
    return (max(deletes) if deletes else None), matched, bool(hist)


def _unknown(key: str, ctx: Context, what: str) -> KeyDiagnosis:
    return KeyDiagnosis(
        key,
        UNKNOWN,
        f"{what} is not in state at batch {ctx.batch}, and its history could not be read, so whether it was "
        f"evicted or never arrived cannot be told. The read that failed: {ctx.history_error}",
    )


def _not_in_state(key: str, ctx: Context, lookups: list[StoreLookup], what: str) -> KeyDiagnosis:
    """The key holds no row now: evicted (its history shows a removal) or never in state.

    A removal alone proves the key was in state: with purged batches its insert may be older than
    the history kept."""
    if ctx.history_error:
        d = _unknown(key, ctx, what)
    else:
        per_side = {lk.name: _side_history(lk) for lk in lookups}
        evicted = {n: (b, m) for n, (b, m, _) in per_side.items() if b is not None}
        if evicted and ctx.kind == JOIN:
            d = _join_evicted(key, ctx, evicted)
        elif evicted:
            batch = max(b for b, _ in evicted.values())
            d = KeyDiagnosis(
                key,
                EVICTED,
                f"{what} was in state and was removed in batch {batch}, whose watermark was "
                f"{fmt_ms(ctx.watermarks.get(batch, 0))}. " + _eviction_note(ctx),
                evicted_at_batch=batch,
            )
        else:
            causes = (
                "it never reached the operator: filtered out upstream, dropped as late data (its event time "
                "was already behind the watermark when it arrived), not produced by the source, or older than "
                "the oldest retained batch"
            )
            d = KeyDiagnosis(key, NEVER_IN_STATE, f"{what} was never in state ({_searched(ctx)}): {causes}.")
    for lk in lookups:
        for r in _history(lk):
            d.evidence.append(_row_evidence(lk.name, r))
    return d


def _join_evicted(key: str, ctx: Context, evicted: dict[str, tuple[int, bool | None]]) -> KeyDiagnosis:
    """Rows with the key were evicted from one or both sides: matched, emitted null-padded, or dropped."""
    sides = sorted(evicted)
    batch = max(b for b, _ in evicted.values())
    where = f" on the {' and '.join(sides)} side{'s' if len(sides) > 1 else ''}"
    flags = [m for _, m in evicted.values()]
    matched: bool | None = True if any(flags) else (None if any(m is None for m in flags) else False)
    head = f"The key was in state{where} and was evicted in batch {batch}, whose watermark was {fmt_ms(ctx.watermarks.get(batch, 0))}."
    if matched:
        note = " It had joined before it was evicted: its output was emitted."
    elif matched is None:
        note = (
            " This checkpoint uses join state format 1, which does not record whether a row matched: "
            "whether it joined before eviction cannot be told from the state (look for it in the output)."
        )
    else:
        unmatched = [s for s in sides if evicted[s][1] is False]
        if ctx.join_type is None:
            emits = "; ".join(
                f"in a {'left' if s == 'left' else 'right'} or full outer join it was emitted null-padded in batch {evicted[s][0]}"
                for s in unmatched
            )
            note = (
                f" It never matched before the watermark evicted it. In an inner join no output was emitted for it; {emits}. "
                "The checkpoint does not record the join type: give it (--join-type, or Join type on the page) for one answer."
            )
        else:
            preserved = [s for s in unmatched if s in PRESERVED.get(ctx.join_type, ())]
            if preserved:
                s0 = preserved[0]
                b0 = evicted[s0][0]
                d = KeyDiagnosis(
                    key,
                    EMITTED_UNMATCHED,
                    f"The key was in state{where} and never matched. This is a {ctx.join_type.replace('_', ' ')} join, so when the "
                    f"watermark evicted the {s0} side's row{'s' if len(preserved) == 1 else ''} in batch {b0} (watermark "
                    f"{fmt_ms(ctx.watermarks.get(b0, 0))}) the join emitted {'it' if len(preserved) == 1 else 'them'} "
                    "with nulls for the other side's columns.",
                    side=s0,
                    was_matched=False,
                    evicted_at_batch=b0,
                )
                return d
            note = f" It never matched before the watermark evicted it: a {ctx.join_type.replace('_', ' ')} join emits nothing for it."
    return KeyDiagnosis(
        key,
        EVICTED,
        head + note,
        side=sides[0] if len(sides) == 1 else None,
        evicted_at_batch=batch,
        was_matched=matched,
    )


def _eviction_note(ctx: Context) -> str:
    if ctx.kind == AGGREGATION:
        return "The watermark passed the end of its window: in append mode its result was emitted in that batch."
    if ctx.kind in (DEDUP, DEDUP_WITHIN):
        return (
            "From then on a row with this key is not recognised as a duplicate: if it is not behind the "
            "watermark it passes through again, otherwise it is dropped as late data."
        )
    if ctx.kind == SESSION:
        return "The watermark passed the end of its session: the session was closed and emitted (append mode)."
    return "Its state was removed: by a timeout, a timer or TTL expiry, or by the function itself (state.remove() / clear())."


# --------------------------------------------------------------------------- joins


def _diagnose_join(key: str, ctx: Context, left: StoreLookup, right: StoreLookup) -> KeyDiagnosis:
    sides = {"left": left, "right": right}
    all_rows = [(name, r) for name, lk in sides.items() for r in lk.rows]
    other_seen = {name: _side_history(sides["right" if name == "left" else "left"]) for name in sides}
    if any((r.get("value") or {}).get("matched") for _, r in all_rows):
        matched_batches = [
            r["batch_id"]
            for lk in (left, right)
            for r in _history(lk)
            if r["change_type"] == "update" and (r.get("value") or {}).get("matched")
        ]
        when = f" It became matched in batch {min(matched_batches)}." if matched_batches else ""
        d = KeyDiagnosis(
            key,
            MATCHED,
            f"Rows with this key are in the join state marked matched: the key joined and its output was emitted.{when}",
            was_matched=True,
        )
    elif ctx.join_format == 1 and (
        (left.rows and right.rows) or (left.rows and other_seen["left"][2]) or (right.rows and other_seen["right"][2])
    ):
        held = " and ".join(n for n in ("left", "right") if sides[n].rows)
        d = KeyDiagnosis(
            key,
            IN_STATE,
            f"The key is in the {held} side's state, and the other side held it too. This checkpoint uses join state "
            "format 1, which does not record whether a row matched: whether they joined cannot be told from the state "
            "(look for the key in the output).",
        )
    elif left.rows and right.rows:
        pairs = []
        for lr in left.rows:
            lf, lt = event_time_ms(lr.get("value"))
            for rr in right.rows:
                rf, rt = event_time_ms(rr.get("value"))
                if lt is not None and rt is not None:
                    pairs.append((lf, lt, rf, rt))
        detail = "; ".join(
            f"{lf} {fmt_ms(lt)} vs {rf} {fmt_ms(rt)} (difference {fmt_duration(rt - lt)})" for lf, lt, rf, rt in pairs[:5]
        )
        d = KeyDiagnosis(
            key,
            CONDITION_NOT_MET,
            "Both sides hold this key but no row is matched: the rest of the join condition (usually the "
            f"event-time range) rejected every pair. {detail}.",
            was_matched=False,
        )
        for _lf, lt, _rf, rt in pairs:
            d.evidence.append(
                {"store": "pair", "left_time": fmt_ms(lt), "right_time": fmt_ms(rt), "difference_s": (rt - lt) / 1000}
            )
    elif left.rows or right.rows:
        side = "left" if left.rows else "right"
        other = "right" if side == "left" else "left"
        evicted_at, other_matched, _ = other_seen[side]
        if evicted_at is not None and not other_matched:
            d = KeyDiagnosis(
                key,
                CONDITION_NOT_MET,
                f"The key is in the {side} side's state, unmatched. The {other} side held it too and evicted it unmatched in "
                f"batch {evicted_at}: the rest of the join condition (usually the event-time range) rejected the pair, "
                f"and no {other} row with this key can come back. {_eviction_estimate(ctx, side, _times(sides[side]))}",
                side=side,
                was_matched=False,
            )
        else:
            d = KeyDiagnosis(
                key,
                WAITING_OTHER_SIDE,
                f"The key is in the {side} side's state and no row with it is on the {other} side: it is waiting "
                f"for the other side. {_eviction_estimate(ctx, side, _times(sides[side]))}",
                side=side,
                was_matched=False,
            )
            d.near_misses = near_misses(key, sides[other].near)
            if d.near_misses:
                d.explanation += (
                    f" The {other} side holds similar keys ({', '.join(repr(n['key']) for n in d.near_misses[:3])}): "
                    "a malformed key is the usual cause."
                )
        if ctx.join_type in PRESERVED and side in PRESERVED[ctx.join_type]:
            d.explanation += (
                f" In this {ctx.join_type.replace('_', ' ')} join it is emitted with nulls when it is evicted unmatched."
            )
    else:
        d = _not_in_state(key, ctx, [left, right], "The key")
        d.near_misses = near_misses(key, left.near + right.near)
        if d.near_misses and d.verdict == NEVER_IN_STATE:
            d.explanation += f" Similar keys are in state: {', '.join(repr(n['key']) for n in d.near_misses[:3])}."
        return d
    for name, r in all_rows:
        d.evidence.append(_row_evidence(name, r, ctx.batch))
    return d


def _times(lk: StoreLookup) -> list[int]:
    return [t for r in lk.rows for _, t in [event_time_ms(r.get("value"))] if t is not None]


def _eviction_estimate(ctx: Context, side: str, times: list[int]) -> str:
    wm = ctx.watermark
    if not wm:
        return (
            "There is no watermark, so it is never evicted: it waits until a row with this key arrives on the "
            "other side, and state grows with every unmatched key."
        )
    if not times:
        return "It is evicted once the watermark passes its event time plus the join's time-range bound."
    t = min(times)
    rel = f"{fmt_duration(wm - t)} behind" if wm >= t else f"{fmt_duration(t - wm)} ahead of"
    behind = f"Its event time {fmt_ms(t)} is {rel} the watermark ({fmt_ms(wm)})."
    horizon = ctx.eviction_horizon.get(side)
    if horizon:
        lo, hi = max(0, horizon[0]), max(0, horizon[1])
        span = fmt_duration(hi) if lo == hi else f"{fmt_duration(lo)}–{fmt_duration(hi)}"
        return (
            f"{behind} Rows of this side were evicted once the watermark was {span} past their event time "
            f"(the join's time bound), so it will be evicted when the watermark passes about {fmt_ms(t + hi)}."
        )
    return f"{behind} It is evicted once the watermark passes its event time plus the join's time-range bound."


def eviction_horizon(changes: list[dict[str, Any]], watermarks: dict[int, int]) -> tuple[int, int] | None:
    """From one side's change feed: how far past a row's event time the watermark was when it was evicted.

    A row deleted in batch b with event time T was kept while watermark(b - 1) <= T + X and evicted once
    watermark(b) > T + X, so X lies in [watermark(b - 1) - T, watermark(b) - T). Returns the tightest
    (lo, hi) over all evictions, or None when nothing was evicted.
    """
    last_time: dict[str, int] = {}
    lo, hi = None, None
    for r in sorted(changes, key=lambda r: r["batch_id"]):
        k = json.dumps(jsonable(r.get("key")), sort_keys=True)
        if r["change_type"] == "delete":
            t = last_time.pop(k, None)
            b = r["batch_id"]
            if t is None or b not in watermarks:
                continue
            a, z = watermarks.get(b - 1, 0) - t, watermarks[b] - t
            lo = a if lo is None else max(lo, a)
            hi = z if hi is None else min(hi, z)
        else:
            _, t2 = event_time_ms(r.get("value"))
            if t2 is not None:
                last_time[k] = t2
    if lo is None or hi is None or lo > hi:
        return None
    return lo, hi


# --------------------------------------------------------------------------- other operators


def _diagnose_stateful(key: str, ctx: Context, lookups: list[StoreLookup]) -> KeyDiagnosis:
    rows = [(lk.name, r) for lk in lookups for r in lk.rows]
    wm = ctx.watermark
    what = f"The key ({ctx.key_field} = {key!r})"
    if not rows:
        d = _not_in_state(key, ctx, lookups, what)
        d.near_misses = near_misses(key, [n for lk in lookups for n in lk.near])
        if d.near_misses and d.verdict == NEVER_IN_STATE:
            d.explanation += f" Similar keys are in state: {', '.join(repr(n['key']) for n in d.near_misses[:3])}."
        return d
    state_rows = [r for _, r in rows]
    if ctx.kind == AGGREGATION:
        d = _aggregation_in_state(key, ctx, state_rows, what)
    elif ctx.kind in (DEDUP, DEDUP_WITHIN):
        if ctx.kind == DEDUP_WITHIN:
            expires = [r["value"]["expiresAtMicros"] // 1000 for r in state_rows if (r.get("value") or {}).get("expiresAtMicros")]
            until = f"until the watermark passes {fmt_ms(max(expires))}" if expires else "until it expires"
            never = not wm
        else:
            times = [t for r in state_rows for _, t in [event_time_ms(r.get("key"))] if t is not None]
            until = f"until the watermark passes its event time {fmt_ms(max(times))}" if times else ""
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
            tail = f" The watermark has not passed it yet (now {fmt_ms(wm)})."
        d = KeyDiagnosis(
            key,
            DROPPING_DUPLICATES,
            f"{what} is in the deduplication state: the first row with it was emitted, and every later row "
            f"with it is dropped as a duplicate {until}.{tail}",
        )
    elif ctx.kind == SESSION:
        sessions = []
        for r in state_rows:
            w = (r.get("value") or {}).get("session_window") or {}
            s, e = to_ms(w.get("start")), to_ms(w.get("end"))
            if s is not None and e is not None:
                sessions.append((s, e))
        desc = "; ".join(
            f"{fmt_ms(s)} – {fmt_ms(e)} ({'closes in ' + fmt_duration(e - wm) if e > wm else 'closing'})"
            for s, e in sorted(sessions)
        )
        d = KeyDiagnosis(
            key,
            SESSION_OPEN,
            f"{what} has {len(sessions)} open session(s): {desc}. A session closes and is emitted (append mode) "
            f"once the watermark (now {fmt_ms(wm)}) passes its end; new events within the gap extend it.",
        )
    else:
        d = KeyDiagnosis(key, IN_STATE, f"{what} holds state: {_state_summary(lookups, ctx)}.")
    for name, r in rows:
        d.evidence.append(_row_evidence(name, r, ctx.batch))
    return d


def _aggregation_in_state(key: str, ctx: Context, state_rows: list[dict[str, Any]], what: str) -> KeyDiagnosis:
    wm = ctx.watermark
    windows = [(r["key"].get("window") or {}) for r in state_rows if isinstance(r.get("key"), dict)]
    ends = sorted(e for w in windows if isinstance(w, dict) and (e := to_ms(w.get("end"))) is not None)
    if not ends:
        return KeyDiagnosis(
            key,
            IN_STATE,
            f"{what} is in state ({len(state_rows)} row(s)). Its group has no window, so the watermark never removes it; "
            "in update or complete mode its new value is emitted in every batch that changes it (append mode emits "
            "nothing for it until it is removed, which does not happen).",
        )
    if not wm:
        return KeyDiagnosis(
            key,
            IN_STATE,
            f"{what} has {len(ends)} window(s) in state and the query has no watermark: windows never close and are "
            "never removed. In complete or update mode they are emitted in every batch that changes them; append "
            "mode would need a watermark.",
        )
    past = [e for e in ends if e <= wm]
    if past and ctx.single_operator:
        return KeyDiagnosis(
            key,
            IN_STATE,
            f"{what} has {len(ends)} window(s) in state, {len(past)} of them ending at or before the watermark "
            f"({fmt_ms(wm)}) yet still kept: the query runs in complete mode, which keeps every window and emits all "
            "of them in every batch.",
        )
    if past:
        return KeyDiagnosis(
            key,
            WAITING_WATERMARK,
            f"{what} has {len(ends)} window(s) in state; {len(past)} end before the query's watermark ({fmt_ms(wm)}) "
            "but are still kept: in a query with several stateful operators this one evicts by the watermark of its "
            "input, which lags behind the upstream operator's bound (for example a join's time range). In append mode "
            f"each window is emitted when that watermark passes its end; the earliest ends at {fmt_ms(min(ends))}.",
        )
    nxt = min(ends)
    return KeyDiagnosis(
        key,
        WAITING_WATERMARK,
        f"{what} has {len(ends)} window(s) in state. In append mode a window is emitted when the watermark "
        f"(now {fmt_ms(wm)}) reaches its end: the next closes at {fmt_ms(nxt)}, {fmt_duration(nxt - wm)} ahead of "
        "the watermark. In update mode its current counts were emitted already.",
    )


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
                    f", times out at processing time {fmt_ms(tt)} (a processing-time timeout: there is no watermark; "
                    f"batch {ctx.batch} ran at {fmt_ms(last_time)}): it fires in the first batch that runs after that"
                )
            else:
                timeout = (
                    f", times out when the watermark passes {fmt_ms(tt)} (now {fmt_ms(wm)}) if the timeout is on event "
                    f"time, or at processing time {fmt_ms(tt)} if it is on processing time (batch {ctx.batch} ran at "
                    f"{fmt_ms(last_time)})"
                )
            parts.append(f"group state {json.dumps(jsonable(v.get('groupState', v)))}{timeout}")
        elif "expiration_timestamp_ms" in r0:
            parts.append("timer(s) at " + ", ".join(fmt_ms(r["expiration_timestamp_ms"]) for r in lk.rows))
        elif "list_element" in r0:
            parts.append(f"list '{lk.name}' with {len(lk.rows)} element(s)")
        elif "user_map_key" in r0:
            entries = ", ".join(
                f"{json.dumps(jsonable(r['user_map_key']))}: {json.dumps(jsonable(r['user_map_value']))}" for r in lk.rows[:5]
            )
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
                return f", expires by TTL at processing time {fmt_ms(t)}"
    return ""


def diagnose(key: str, ctx: Context, lookups: list[StoreLookup]) -> KeyDiagnosis:
    """One key's verdict. For joins ``lookups`` is [left, right]; otherwise every store or state variable."""
    if ctx.kind == JOIN:
        d = _diagnose_join(key, ctx, lookups[0], lookups[1])
    else:
        d = _diagnose_stateful(key, ctx, lookups)
    d.timeline = _timeline(lookups, ctx)
    d.queries = _queries(key, ctx, lookups)
    if len(d.evidence) > MAX_EVIDENCE:
        d.explanation += f" (Evidence: the first {MAX_EVIDENCE} of {len(d.evidence)} rows; the SQL below returns all.)"
        d.evidence = d.evidence[:MAX_EVIDENCE]
    return d


# --------------------------------------------------------------------------- the missing record's event time


def apply_lateness(
    d: KeyDiagnosis, ctx: Context, late: Any, lookups: list[StoreLookup], progress_hint: str = "--event-log"
) -> None:
    """Weigh the event time of the record that never showed up (``analysis.progress.Lateness``).

    ``dropped_as_late`` needs evidence on both counts: the record is behind the watermark the
    operator drops late rows by from batch N on, the key's record never reached state (never in
    state, or a join key whose other side never came), and the progress shows this operator
    dropping rows by the watermark from batch N on. Without the drops the verdict stays and
    the explanation says "would have been late from batch N"."""
    t = fmt_ms(late.event_time_ms)
    n = late.late_from_batch
    chained = (
        ""
        if ctx.single_operator
        else " (In a chain of stateful operators a later operator drops by the watermark its input carries, "
        "which can trail the query's; the figures are the query's watermarks.)"
    )
    if n is None:
        last = max(ctx.watermarks) if ctx.watermarks else ctx.batch
        d.explanation += (
            f" A record with event time {t} is not behind the watermark any batch up to {last} dropped late "
            f"rows by (latest {fmt_ms(ctx.watermarks.get(last, 0))}): it was not dropped as late."
        )
        return
    wm_n = fmt_ms(_late_watermark(ctx, n))
    would = (
        f"A record with event time {t} would have been late from batch {n} on: from that batch the operator "
        f"drops rows at or before {wm_n} (the previous batch's watermark)."
    )
    unmatched_evicted = ctx.kind == JOIN and d.verdict == EVICTED and d.was_matched is False
    rows = [r for lk in lookups for r in [*lk.rows, *(lk.changes or [])]]
    covered = _time_in_rows(rows, late.event_time_ms)
    if covered is False and not (ctx.history and ctx.history[0] <= ctx.first_batch):
        covered = None  # the history searched does not reach back to every retained batch: cannot tell
    window_missing = ctx.kind in (AGGREGATION, SESSION, DEDUP) and d.verdict != NEVER_IN_STATE and covered is False
    record_missing = d.verdict in (NEVER_IN_STATE, WAITING_OTHER_SIDE) or unmatched_evicted or window_missing
    if not record_missing:
        if covered and late.drops and ctx.kind != JOIN:
            d.explanation += (
                f" {would} Operator {ctx.operator_id} dropped rows by the watermark then ({_counts(late.drops)}), and a "
                "state row of the key held that event time: the record may have been counted before the watermark "
                f"passed it or dropped after; the state cannot tell which.{chained}"
            )
        else:
            held = " A state row of the key holds that event time." if covered else ""
            d.explanation += f" {would}{held} The key's verdict does not depend on it.{chained}"
        return
    if not late.progress_read:
        d.explanation += (
            f" {would} Whether operator {ctx.operator_id} dropped rows then is in the query's progress: "
            f"give its event log ({progress_hint}).{chained}"
        )
        return
    if not late.batches_covered:
        d.explanation += f" {would} The progress given does not cover batch {n} or later.{chained}"
        return
    if not late.drops:
        d.explanation += (
            f" {would} But the progress shows operator {ctx.operator_id} dropped no rows by the watermark in "
            f"batches {late.batches_covered[0]}-{late.batches_covered[-1]}: the record was not dropped as late.{chained}"
        )
        return
    counts = _counts(late.drops)
    if window_missing:
        whose = f"no state row of the key (in any batch searched) covers {t}"
    elif d.verdict in (WAITING_OTHER_SIDE, EVICTED) and d.side:
        whose = f"the {('right' if d.side == 'left' else 'left')} side's row for this key never reached the join state"
    else:
        whose = "no row of the key reached the state"
    d.verdict = DROPPED_AS_LATE
    d.explanation = (
        f"{would} Operator {ctx.operator_id} dropped rows by the watermark in those batches ({counts}) and "
        f"{whose}: the record most likely arrived late and was dropped. To keep such records, raise the "
        f"withWatermark delay above how late they arrive, or send late rows elsewhere before the stateful "
        f"operator.{chained} {d.explanation}"
    )


def _counts(drops: dict[int, int]) -> str:
    return ", ".join(f"batch {b}: {c:,}" for b, c in sorted(drops.items()))


def _time_in_rows(rows: list[dict[str, Any]], t: int) -> bool | None:
    """Whether a state row of the key holds event time ``t``: a window (start, end) around it, or
    a timestamp field equal to it. None when the rows carry no event time to compare."""
    seen_time = False

    def walk(v: Any) -> bool:
        nonlocal seen_time
        if isinstance(v, dict):
            start, end = _ms(v.get("start")), _ms(v.get("end"))
            if start is not None and end is not None:
                seen_time = True
                if start <= t < end:
                    return True
            return any(walk(x) for x in v.values())
        ms = _ms(v)
        if ms is not None:
            seen_time = True
            return ms == t
        return False

    found = any(walk(r.get("key")) for r in rows)
    return True if found else (False if seen_time else None)


def _ms(v: Any) -> int | None:
    return to_ms(v) if isinstance(v, dt.datetime) else _iso(v)


def _iso(v: Any) -> int | None:
    if not isinstance(v, str) or len(v) < 19 or v[4] != "-" or v[10] not in "T ":
        return None
    try:
        return to_ms(dt.datetime.fromisoformat(v))
    except ValueError:
        return None


def _late_watermark(ctx: Context, batch: int) -> int:
    earlier = [b for b in ctx.watermarks if b < batch]
    return ctx.watermarks.get(max(earlier), 0) if earlier else ctx.watermarks.get(batch, 0)
