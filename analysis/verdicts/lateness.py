"""``dropped_as_late``: the missing record's event time against the watermark that dropped late rows."""

from __future__ import annotations

import datetime as dt
from typing import Any

from statelens.analysis.core.key_format import fmt_time, to_ms
from statelens.analysis.inputs.records import Arrival
from statelens.analysis.verdicts.key_verdicts import (
    AGGREGATION,
    DEDUP,
    DROPPED_AS_LATE,
    EVICTED,
    JOIN,
    NEVER_IN_STATE,
    SESSION,
    WAITING_OTHER_SIDE,
    Context,
    KeyDiagnosis,
    StoreLookup,
)


def _arrival_text(found: list[Arrival]) -> str:
    """Where the key's records were read: each batch and file once (a file holding several named once)."""
    places = list(dict.fromkeys(f"batch {a.batch} read it from {a.file} (the {a.source} source)" for a in found))
    return "; ".join(places[:3]) + (f" and {len(places) - 3} more" if len(places) > 3 else "")


def apply_lateness(
    d: KeyDiagnosis, ctx: Context, late: Any, lookups: list[StoreLookup], progress_hint: str = "--event-log"
) -> None:
    """Weigh the event time of the record that never showed up (``analysis.progress.Lateness``).

    ``dropped_as_late`` needs evidence on both counts: the record is behind the watermark the
    operator drops late rows by from batch N on, the key's record never reached state (never in
    state, or a join key whose other side never came), and the progress shows this operator
    dropping rows by the watermark from batch N on. Without the drops the verdict stays and
    the explanation says "would have been late from batch N"."""
    t = fmt_time(late.event_time_ms)
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
            f"rows by (latest {fmt_time(ctx.watermarks.get(last, 0))}): it was not dropped as late."
        )
        return
    wm_n = fmt_time(_late_watermark(ctx, n))
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
    search = late.arrivals
    found = sorted(search.found.get(d.key, []), key=lambda a: a.batch) if search is not None else []
    if found and all(a.batch < n for a in found):  # it came before it was late: not dropped as late
        d.explanation += (
            f" {would} But the record arrived earlier: {_arrival_text(found)}, before the watermark passed its event "
            f"time: it was not dropped as late.{chained}"
        )
        return
    if search is not None and search.searched and not search.unsearched and not search.seen.get(d.key):
        d.explanation += (
            f" {would} But none of the {search.searched:,} input files the query read holds the key: its record never "
            f"reached the query, so it was not dropped as late.{chained}"
        )
        return
    counts = _counts(late.drops)
    if window_missing:
        whose = f"no state row of the key (in any batch searched) covers {t}"
    elif d.verdict in (WAITING_OTHER_SIDE, EVICTED) and d.side in ("left", "right"):
        whose = f"the {('right' if d.side == 'left' else 'left')} side's row for this key never reached the join state"
    else:
        whose = "no row of the key reached the state"
    d.verdict = DROPPED_AS_LATE
    drops = sorted(late.drops)
    arrived = sorted({a.batch for a in found if a.batch in late.drops})
    if len(arrived) == 1:
        d.dropped_in_batch = arrived[0]
        which = (
            f"It was dropped in batch {arrived[0]}: {_arrival_text([a for a in found if a.batch == arrived[0]])}, "
            "and that batch dropped rows."
        )
    elif len(drops) == 1:
        d.dropped_in_batch = drops[0]
        which = f"It was dropped in batch {drops[0]}, the only batch from {n} on that dropped rows."
    else:
        seen = sorted(search.seen.get(d.key, []), key=lambda a: a.batch) if search is not None else []
        if seen and not found:
            unknown = f"records of the key were read ({_arrival_text(seen)}), none with that event time"
        else:
            unknown = "the progress does not say" + (
                f", and the input files could not all be searched ({_few(search.unsearched)})"
                if search is not None and search.unsearched
                else ""
            )
        which = (
            f"It was dropped in one of batches {', '.join(map(str, drops))}, the batches from {n} on that dropped rows: "
            f"which one depends on the batch the record arrived in: {unknown}."
        )
    d.explanation = (
        f"{would} Operator {ctx.operator_id} dropped rows by the watermark in those batches ({counts}) and "
        f"{whose}: the record most likely arrived late and was dropped. {which} To keep such records, raise the "
        f"withWatermark delay above how late they arrive, or send late rows elsewhere before the stateful "
        f"operator.{chained} {d.explanation}"
    )


def _few(items: set[str]) -> str:
    shown = sorted(items)
    return "; ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")


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
