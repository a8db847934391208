"""Stream-stream join verdicts: matched, waiting for the other side, condition not met, evicted
(null-padded on a preserved side of an outer join), and when the watermark evicts a waiting row."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from statelens.analysis.core.key_format import event_time_ms, fmt_duration, fmt_time, jsonable
from statelens.analysis.verdicts.key_timeline import history_rows, row_evidence
from statelens.analysis.verdicts.key_verdicts import (
    CONDITION_NOT_MET,
    IN_STATE,
    MATCHED,
    NEVER_IN_STATE,
    PRESERVED,
    WAITING_OTHER_SIDE,
    Context,
    KeyDiagnosis,
    StoreLookup,
)
from statelens.analysis.verdicts.verdict_common import matched_batch, near_misses, near_text, not_in_state, side_history


def diagnose_join(key: str, ctx: Context, left: StoreLookup, right: StoreLookup) -> KeyDiagnosis:
    sides = {"left": left, "right": right}
    all_rows = [(name, r) for name, lk in sides.items() for r in lk.rows]
    other_seen = {name: side_history(sides["right" if name == "left" else "left"]) for name in sides}
    if any((r.get("value") or {}).get("matched") for _, r in all_rows):
        joined_in = matched_batch([left, right])
        when = f" It became matched in batch {joined_in}." if joined_in is not None else ""
        d = KeyDiagnosis(
            key,
            MATCHED,
            f"Rows with this key are in the join state marked matched: the key joined and its output was emitted.{when}",
            was_matched=True,
            matched_at_batch=joined_in,
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
        pairs = _pairs(_timed(left.rows), _timed(right.rows))
        d = KeyDiagnosis(
            key,
            CONDITION_NOT_MET,
            "Both sides hold this key but no row is matched: the rest of the join condition (usually the "
            f"event-time range) rejected every pair. {_pairs_text(pairs, ctx)}",
            was_matched=False,
        )
        d.evidence += _pair_evidence(pairs)
    elif left.rows or right.rows:
        side = "left" if left.rows else "right"
        other = "right" if side == "left" else "left"
        evicted_at, other_matched, _ = other_seen[side]
        if evicted_at is not None and not other_matched:
            kept = _timed(sides[side].rows)
            gone = _timed(r for r in history_rows(sides[other]) if r["change_type"] != "delete")
            pairs = _pairs(kept, gone) if side == "left" else _pairs(gone, kept)
            d = KeyDiagnosis(
                key,
                CONDITION_NOT_MET,
                f"The key is in the {side} side's state, unmatched. The {other} side held it too and evicted it unmatched in "
                f"batch {evicted_at}: the rest of the join condition (usually the event-time range) rejected the pair, "
                f"and no {other} row with this key can come back. {_pairs_text(pairs, ctx)} "
                f"{_eviction_estimate(ctx, side, _times(sides[side]))}",
                side=side,
                was_matched=False,
            )
            d.evidence += _pair_evidence(pairs)
        else:
            d = KeyDiagnosis(
                key,
                WAITING_OTHER_SIDE,
                f"The key is in the {side} side's state and no row with it is on the {other} side: it is waiting "
                f"for the other side. {_eviction_estimate(ctx, side, _times(sides[side]))}",
                side=side,
                was_matched=False,
            )
            d.near_misses = near_misses(key, [sides[other]], ctx.batch)
            if d.near_misses:
                d.explanation += (
                    f" The {other} side holds or held similar keys: {near_text(d.near_misses, True)}. A malformed key "
                    "is the usual cause."
                )
        if ctx.join_type in PRESERVED and side in PRESERVED[ctx.join_type]:
            d.explanation += (
                f" In this {ctx.join_type.replace('_', ' ')} join it is emitted with nulls when it is evicted unmatched."
            )
    else:
        d = not_in_state(key, ctx, [left, right], "The key")
        d.near_misses = near_misses(key, [left, right], ctx.batch)
        if d.near_misses and (d.verdict == NEVER_IN_STATE or d.was_matched is False):
            d.explanation += (
                f" Similar keys are or were in state: {near_text(d.near_misses, True)}. A malformed key is the usual cause."
            )
        return d
    for name, r in all_rows:
        d.evidence.append(row_evidence(name, r, ctx.batch))
    return d


Timed = tuple[str | None, int]  # a row's event-time field and its time (ms)


def _timed(rows: Iterable[dict[str, Any]]) -> list[Timed]:
    out = []
    for r in rows:
        field, t = event_time_ms(r.get("value"))
        if t is not None and (field, t) not in out:
            out.append((field, t))
    return out


def _pairs(left: list[Timed], right: list[Timed]) -> list[tuple[Timed, Timed]]:
    return [(lt, rt) for lt in left for rt in right]


def _pairs_text(pairs: list[tuple[Timed, Timed]], ctx: Context) -> str:
    """Both event times of each pair the condition rejected, their difference, and the join's bound."""
    if not pairs:
        return "The rows carry no event time to compare."
    shown = "; ".join(
        f"left {lf} {fmt_time(lt)} vs right {rf} {fmt_time(rt)} (right {'after' if rt >= lt else 'before'} left by "
        f"{fmt_duration(abs(rt - lt))})"
        for (lf, lt), (rf, rt) in pairs[:5]
    )
    more = f" and {len(pairs) - 5} more pairs" if len(pairs) > 5 else ""
    return f"{shown}{more}. {_bound_text(ctx)}"


def _bound_text(ctx: Context) -> str:
    if ctx.join_condition:
        return f"The join's condition, from the event log's plan: {ctx.join_condition}."
    spans = {s: h for s, h in ctx.eviction_horizon.items() if h}
    if not spans:
        return "The join's time range is not recorded in the checkpoint, and no eviction shows it yet."
    parts = [
        f"{s} rows {fmt_duration(max(0, lo))}" + ("" if lo == hi else f"–{fmt_duration(max(0, hi))}")
        for s, (lo, hi) in sorted(spans.items())
    ]
    return (
        "The join's bound, as its evictions show it: rows are kept until the watermark is this far past their event "
        f"time ({', '.join(parts)}); pairs further apart than the join's time range never match."
    )


def _pair_evidence(pairs: list[tuple[Timed, Timed]]) -> list[dict[str, Any]]:
    return [
        {"store": "pair", "left_time": fmt_time(lt), "right_time": fmt_time(rt), "difference_s": (rt - lt) / 1000}
        for (_, lt), (_, rt) in pairs
    ]


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
    behind = f"Its event time {fmt_time(t)} is {rel} the watermark ({fmt_time(wm)})."
    horizon = ctx.eviction_horizon.get(side)
    if horizon:
        lo, hi = max(0, horizon[0]), max(0, horizon[1])
        span = fmt_duration(hi) if lo == hi else f"{fmt_duration(lo)}–{fmt_duration(hi)}"
        return (
            f"{behind} Rows of this side were evicted once the watermark was {span} past their event time "
            f"(the join's time bound), so it will be evicted when the watermark passes about {fmt_time(t + hi)}."
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
