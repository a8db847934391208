"""One key's evidence rows and its timeline against the watermark."""

from __future__ import annotations

import json
from typing import Any

from statelens.analysis.core.key_format import jsonable, row_time_ms
from statelens.analysis.verdicts.key_verdicts import Context, StoreLookup


def row_evidence(store: str, row: dict[str, Any], batch: int | None = None) -> dict[str, Any]:
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


def history_rows(lookup: StoreLookup) -> list[dict[str, Any]]:
    return sorted(lookup.changes or [], key=lambda r: r["batch_id"])


def key_timeline(lookups: list[StoreLookup], ctx: Context) -> list[dict[str, Any]]:
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
        for r in history_rows(lk):
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
