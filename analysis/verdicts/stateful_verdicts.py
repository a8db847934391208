"""The one-operator verdict of a key in the state of any kind but a join: not in state (never, or
evicted), or in state, told by the kind's own verdict (its module in ``analysis.kinds``); and the
verdict the kinds whose state a user's function keeps share (``holds_state``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from statelens.analysis.core.key_format import fmt_time, jsonable
from statelens.analysis.core.operator_kinds import UnsupportedOperator, behaviour
from statelens.analysis.verdicts.key_timeline import row_evidence
from statelens.analysis.verdicts.key_verdicts import IN_STATE, NEVER_IN_STATE, Context, KeyDiagnosis, StoreLookup
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
    """The verdict of a kind's operator on a key it holds state for, declared in the kind's module
    (``analysis.kinds``; a join's: ``join_verdicts``); a kind without one is refused, never given
    another kind's."""
    verdict: InStateVerdict | None = behaviour(kind).in_state
    if verdict is None:
        raise UnsupportedOperator(f"operator kind {kind} has no verdict yet")
    return verdict


def holds_state(key: str, ctx: Context, state_rows: list[dict[str, Any]], lookups: list[StoreLookup], what: str) -> KeyDiagnosis:
    """A user's function's state (group state, transformWithState: what it keeps, its timeouts and
    timers), or a limit's: the key holds it, as it is."""
    return KeyDiagnosis(key, IN_STATE, f"{what} holds state: {_state_summary(lookups, ctx)}.")


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
