"""Verdicts every operator shares: a key never in state, a failed read (``unknown``), what was searched."""

from __future__ import annotations

from statelens.analysis.core.key_format import fmt_time
from statelens.analysis.core.near_miss import near_miss_reason
from statelens.analysis.core.operator_kinds import behaviour
from statelens.analysis.verdicts.key_timeline import history_rows, row_evidence
from statelens.analysis.verdicts.key_verdicts import (
    EMITTED_UNMATCHED,
    EVICTED,
    JOIN,
    NEVER_IN_STATE,
    PRESERVED,
    UNKNOWN,
    Context,
    KeyDiagnosis,
    StoreLookup,
)


def join_named(join_type: str) -> str:
    """``an inner join``, ``a left outer join``."""
    words = join_type.replace("_", " ")
    return f"{'an' if words[0] in 'aeiou' else 'a'} {words} join"


def _searched(ctx: Context) -> str:
    if ctx.history is None:
        return f"only the state at batch {ctx.batch} was searched"
    a, b = ctx.history
    how = "the change feed" if ctx.history_method == "change feed" else "the state at every retained batch (no change feed)"
    return f"searched the state at batch {ctx.batch} and {how} of batches {a}–{b}"


def side_history(lk: StoreLookup) -> tuple[int | None, bool | None, bool]:
    """(last delete batch, whether a row was ever matched (None: no matched flag), whether a row was seen)."""
    hist = history_rows(lk)
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


def not_in_state(key: str, ctx: Context, lookups: list[StoreLookup], what: str) -> KeyDiagnosis:
    """The key holds no row now: evicted (its history shows a removal) or never in state.

    A removal alone proves the key was in state: with purged batches its insert may be older than
    the history kept."""
    if ctx.history_error:
        d = _unknown(key, ctx, what)
    else:
        per_side = {lk.name: side_history(lk) for lk in lookups}
        evicted = {n: (b, m) for n, (b, m, _) in per_side.items() if b is not None}
        if evicted and ctx.kind == JOIN:
            d = _join_evicted(key, ctx, evicted, lookups)
        elif evicted:
            batch = max(b for b, _ in evicted.values())
            d = KeyDiagnosis(
                key,
                EVICTED,
                f"{what} was in state and was removed in batch {batch}, whose watermark was "
                f"{fmt_time(ctx.watermarks.get(batch, 0))}. " + behaviour(ctx.kind).evicted(ctx),
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
        for r in history_rows(lk):
            d.evidence.append(row_evidence(lk.name, r))
    return d


def matched_batch(lookups: list[StoreLookup]) -> int | None:
    """The first batch whose change feed shows a row of the key marked matched (it joined then)."""
    found = [
        r["batch_id"]
        for lk in lookups
        for r in history_rows(lk)
        if r["change_type"] != "delete" and (r.get("value") or {}).get("matched")
    ]
    return min(found) if found else None


def _join_evicted(
    key: str, ctx: Context, evicted: dict[str, tuple[int, bool | None]], lookups: list[StoreLookup]
) -> KeyDiagnosis:
    """Rows with the key were evicted from one or both sides: matched, emitted null-padded, or dropped."""
    sides = sorted(evicted)
    batch = max(b for b, _ in evicted.values())
    side = sides[0] if len(sides) == 1 else "both"

    def when(names: list[str]) -> str:
        return " and ".join(
            f"the {n} side in batch {evicted[n][0]} (watermark {fmt_time(ctx.watermarks.get(evicted[n][0], 0))})" for n in names
        )

    where = f" on the {' and '.join(sides)} side{'s' if len(sides) > 1 else ''}"
    flags = [m for _, m in evicted.values()]
    matched: bool | None = True if any(flags) else (None if any(m is None for m in flags) else False)
    head = f"The key was in state{where} and was evicted from {when(sides)}."
    joined_in = matched_batch(lookups) if matched else None
    if matched:
        at = f" in batch {joined_in}" if joined_in is not None else ""
        note = f" It had joined{at}, before it was evicted: its output was emitted{at}."
    elif matched is None:
        note = (
            " This checkpoint uses join state format 1, which does not record whether a row matched: "
            "whether it joined before eviction cannot be told from the state (look for it in the output)."
        )
    else:
        unmatched = [s for s in sides if evicted[s][1] is False]
        if ctx.join_type is None:
            emits = "; ".join(
                f"in a {s} or full outer join it was emitted null-padded in batch {evicted[s][0]}" for s in unmatched
            )
            note = (
                f" It never matched before the watermark evicted it. In an inner join no output was emitted for it; {emits}. "
                "The checkpoint does not record the join type: give it (--join-type, or Join type on the page) for one answer."
            )
        else:
            preserved = [s for s in unmatched if s in PRESERVED.get(ctx.join_type, ())]
            if preserved:
                emitted = "; ".join(f"the {s} side's row was emitted null-padded in batch {evicted[s][0]}" for s in preserved)
                return KeyDiagnosis(
                    key,
                    EMITTED_UNMATCHED,
                    f"The key was in state{where} and never matched. This is {join_named(ctx.join_type)}, so "
                    f"when the watermark evicted it the join emitted it with nulls for the other side's columns: "
                    f"{emitted} (watermark {fmt_time(ctx.watermarks.get(evicted[preserved[0]][0], 0))}).",
                    side=preserved[0] if len(preserved) == 1 else "both",
                    was_matched=False,
                    evicted_at_batch=max(evicted[s][0] for s in preserved),
                    evicted_by_side={s: evicted[s][0] for s in preserved},
                )
            note = f" It never matched before the watermark evicted it: {join_named(ctx.join_type)} emits nothing for it."
    return KeyDiagnosis(
        key,
        EVICTED,
        head + note,
        side=side,
        evicted_at_batch=batch,
        evicted_by_side={s: b for s, (b, _) in evicted.items()},
        was_matched=matched,
        matched_at_batch=joined_in,
    )


def near_misses(key: str, lookups: list[StoreLookup], batch: int, limit: int = 8) -> list[dict[str, str]]:
    """Keys that look like ``key`` in the stores' state at ``batch`` and in their change feeds, each
    with why it looks alike, the store (a join side) and when it was there."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for lk in lookups:
        for c in lk.near:
            reason = near_miss_reason(key, c)
            if reason:
                found[(c, lk.name)] = {"key": c, "reason": reason, "where": lk.name, "seen": f"in state at batch {batch}"}
        for s in lk.near_seen:
            reason = near_miss_reason(key, s.key)
            if reason and (s.key, lk.name) not in found:
                span = f"batch {s.first_batch}" if s.first_batch == s.last_batch else f"batches {s.first_batch}–{s.last_batch}"
                gone = f", removed in batch {s.removed_at}" if s.removed_at is not None else ""
                found[(s.key, lk.name)] = {"key": s.key, "reason": reason, "where": lk.name, "seen": f"{span}{gone}"}
    return [found[k] for k in sorted(found)][:limit]


def near_text(near: list[dict[str, str]], joined: bool) -> str:
    """'ORD-7' on the right side (batches 1–8, removed in batch 8), ... for an explanation."""
    where = (lambda n: f" on the {n['where']} side") if joined else (lambda n: "")
    return ", ".join(f"{n['key']!r}{where(n)} ({n['seen']})" for n in near[:3])
