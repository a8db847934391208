"""Near-miss keys: a key the user typed against keys in state that differ by case, punctuation or
only share their digits (``ORD-7`` for ``ord-7``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analysis.key_verdicts import StoreLookup


@dataclass(frozen=True)
class NearSeen:
    """A near-miss key in a store's change feed: the batches of its first and last change, and
    the batch that removed it when its last change was a delete."""

    key: str
    first_batch: int
    last_batch: int
    removed_at: int | None


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
