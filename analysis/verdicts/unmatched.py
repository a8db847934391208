"""Which keys never matched? For users who know only that counts do not add up: per join, the
keys evicted unmatched, waiting for the other side, and held on both sides without a match
(the condition rejected them); per windowed aggregation, the windows still waiting for the
watermark. Pure: Arrow tables of the state and its change feed in, keys with batches out."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from statelens.analysis.core.arrow_numpy import one_array
from statelens.analysis.core.key_format import fmt_time, to_ms
from statelens.analysis.verdicts.key_verdicts import (
    CONDITION_NOT_MET,
    EMITTED_UNMATCHED,
    EVICTED,
    PRESERVED,
    WAITING_OTHER_SIDE,
    WAITING_WATERMARK,
)

SIDES = ("left", "right")


@dataclass(frozen=True)
class UnmatchedKey:
    key: str
    verdict: str  # evicted (unmatched), emitted_unmatched, waiting_for_other_side, condition_not_met, waiting_for_watermark
    side: str | None  # a join side, "both", or None
    batch: int | None  # evicted: the batch that evicted it; else the batch it entered state (None: before the history)
    detail: str = ""  # an aggregation's window


@dataclass
class UnmatchedReport:
    operator_id: int
    operator_name: str
    batch: int
    history: tuple[int, int] | None  # the change-feed batches searched
    keys: list[UnmatchedKey] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    engine: str = "native"
    key_name: str = "key"  # what the key is: a join's value column (order_id) where its field equals one
    join_type: str | None = None  # given, or from the event log's plan: tells emitted null-padded from dropped

    def counts(self) -> dict[str, int]:
        return dict(Counter(k.verdict for k in self.keys))

    def per_batch(self) -> dict[str, dict[int, int]]:
        out: dict[str, Counter[int]] = {}
        for k in self.keys:
            if k.batch is not None:
                out.setdefault(k.verdict, Counter())[k.batch] += 1
        return {v: dict(sorted(c.items())) for v, c in out.items()}

    def since(self, first: int | None) -> UnmatchedReport:
        """Only the keys whose batch is ``first`` or later (keys from before the history stay out)."""
        if first is None:
            return self
        kept = [k for k in self.keys if k.batch is not None and k.batch >= first]
        return dataclasses.replace(self, keys=kept)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "operator_name": self.operator_name,
            "batch": self.batch,
            "key_name": self.key_name,
            "history": list(self.history) if self.history else None,
            "counts": self.counts(),
            "per_batch": {v: {str(b): n for b, n in c.items()} for v, c in self.per_batch().items()},
            "keys": [k.__dict__ for k in self.keys],
            "notes": self.notes,
            "engine": self.engine,
            "join_type": self.join_type,
        }


def key_text(key: pa.ChunkedArray | pa.Array, fields: list[str]) -> pa.Array:
    """The join or grouping key as the text a user types: one field's value, or several joined by ' | '."""
    key = one_array(key)
    parts = [pc.fill_null(pc.cast(key.field(f), pa.string()), "null") for f in fields]
    return parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, " | ")


def _sides(state: pa.Table, fields: list[str]) -> dict[str, bool]:
    """Join key text -> whether any of its rows is matched, for one side's keyWithIndexToValue state."""
    if state.num_rows == 0:
        return {}
    matched = state["value"].combine_chunks().field("matched") if "matched" in state.schema.field("value").type.names else None
    t = pa.table(
        {
            "k": key_text(state["key"], fields),
            "m": pc.fill_null(matched, False) if matched is not None else pa.array([False] * state.num_rows),
        }
    )
    g = t.group_by("k").aggregate([("m", "max")])
    return dict(zip(g["k"].to_pylist(), g["m_max"].to_pylist(), strict=True))


def _history(feed: pa.Table, fields: list[str]) -> dict[str, tuple[int | None, bool, int | None]]:
    """Join key text -> (first batch it entered, whether a row was ever matched, last batch that deleted a row)."""
    if feed.num_rows == 0:
        return {}
    value = feed["value"].combine_chunks()
    matched = value.field("matched") if "matched" in value.type.names else pa.array([False] * feed.num_rows)
    is_update = pc.not_equal(feed["change_type"], "delete")
    t = pa.table(
        {
            "k": key_text(feed["key"], fields),
            "entered": pc.if_else(is_update, feed["batch_id"], pa.scalar(None, pa.int64())),
            "deleted": pc.if_else(is_update, pa.scalar(None, pa.int64()), feed["batch_id"]),
            "m": pc.fill_null(pc.and_(is_update, pc.fill_null(matched, False)), False),
        }
    )
    g = t.group_by("k").aggregate([("entered", "min"), ("m", "max"), ("deleted", "max")])
    return {
        k: (e, bool(m), d)
        for k, e, m, d in zip(
            g["k"].to_pylist(), g["entered_min"].to_pylist(), g["m_max"].to_pylist(), g["deleted_max"].to_pylist(), strict=True
        )
    }


def join_unmatched(
    states: dict[str, pa.Table], feeds: dict[str, pa.Table] | None, fields: list[str], join_type: str | None = None
) -> list[UnmatchedKey]:
    """``states``/``feeds``: each side's keyWithIndexToValue state at the batch and its change feed
    over the history (None: no change feed, so evictions cannot be told). A key evicted unmatched
    from both sides, held by both at once, was rejected by the condition; one evicted from a side
    an outer join preserves (``join_type``) was emitted null-padded."""
    now = {s: _sides(states[s], fields) for s in SIDES}
    hist = {s: _history(feeds[s], fields) for s in SIDES} if feeds is not None else {s: {} for s in SIDES}

    def entered(side: str, k: str) -> int | None:
        return hist[side].get(k, (None, False, None))[0]

    out = []
    for side in SIDES:
        other = "right" if side == "left" else "left"
        for k, matched in sorted(now[side].items()):
            if matched:
                continue
            since = entered(side, k)
            held = f"in the {side} side's state since batch {since}" if since is not None else f"in the {side} side's state"
            if k in now[other]:
                if side == "left" and not now[other][k]:
                    firsts = [b for b in (entered("left", k), entered("right", k)) if b is not None]
                    detail = "both sides hold it unmatched: the condition rejected every pair"
                    out.append(UnmatchedKey(k, CONDITION_NOT_MET, "both", max(firsts) if firsts else None, detail))
            elif hist[other].get(k, (None, False, None))[2] is not None and not hist[other][k][1]:
                left_at = hist[other][k][2]
                detail = f"{held}; the {other} side's row left unmatched in batch {left_at}: the condition rejected the pair"
                out.append(UnmatchedKey(k, CONDITION_NOT_MET, side, since, detail))
            else:
                out.append(UnmatchedKey(k, WAITING_OTHER_SIDE, side, since, f"{held}; no {other} row with it yet"))
    # evicted unmatched: deleted from a side, never matched on either, in neither side's state now
    evicted: dict[str, dict[str, int]] = {}
    for side in SIDES:
        for k, (_, ever_matched, deleted) in hist[side].items():
            other_matched = hist["right" if side == "left" else "left"].get(k, (None, False, None))[1]
            if deleted is not None and not ever_matched and not other_matched and k not in now["left"] and k not in now["right"]:
                evicted.setdefault(k, {})[side] = deleted
    preserved = PRESERVED.get(join_type or "", ())
    for k, by_side in sorted(evicted.items()):
        both = len(by_side) == 2 and _held_together(entered("left", k), by_side["left"], entered("right", k), by_side["right"])
        side = "both" if len(by_side) == 2 else next(iter(by_side))
        if both:
            verdict = CONDITION_NOT_MET
        elif any(s in preserved for s in by_side):
            verdict = EMITTED_UNMATCHED
        else:
            verdict = EVICTED
        emitted = [s for s in by_side if s in preserved]
        gone = max(by_side.values())
        if both:
            detail = f"both sides held it; evicted in batch {gone}: the condition rejected every pair"
        elif emitted:
            detail = f"evicted in batch {gone}, emitted null-padded ({', '.join(emitted)} side, {(join_type or '').replace('_', ' ')} join)"
        elif join_type:
            detail = (
                f"evicted from the {side} side in batch {gone} without a match: the {join_type.replace('_', ' ')} join dropped it"
            )
        else:
            detail = (
                f"evicted from the {side} side in batch {gone} without a match: emitted null-padded if the join preserves "
                "that side, dropped otherwise (the join type is not known)"
            )
        out.append(UnmatchedKey(k, verdict, side, gone, detail))
    return out


def _held_together(a_in: int | None, a_out: int, b_in: int | None, b_out: int) -> bool:
    """Whether both sides held the key at once (their rows were in state in a common batch)."""
    return (a_in is None or a_in <= b_out) and (b_in is None or b_in <= a_out)


def waiting_windows(state: pa.Table, fields: list[str], watermark_ms: int) -> list[UnmatchedKey]:
    """Windows of an aggregation still in state because the watermark has not passed their end
    (append mode emits a window only then)."""
    if state.num_rows == 0:
        return []
    key = state["key"].combine_chunks()
    window = next((f.name for f in key.type if pa.types.is_struct(f.type) and "end" in f.type.names), None)
    if window is None:
        return []
    out = []
    texts = key_text(key, fields).to_pylist() if fields else [""] * len(key)
    for text, w in zip(texts, key.field(window).to_pylist(), strict=True):
        end = to_ms(w["end"]) if isinstance(w, dict) and isinstance(w.get("end"), dt.datetime) else None
        if end is not None and end > watermark_ms:
            start = to_ms(w["start"])
            out.append(UnmatchedKey(text, WAITING_WATERMARK, None, None, f"window {fmt_time(start or 0)} – {fmt_time(end)}"))
    return sorted(out, key=lambda k: (k.detail, k.key))
