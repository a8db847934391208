"""Near-miss keys: a key the user typed against keys in state that differ by case, punctuation or
only share their digits (``ORD-7`` for ``ord-7``)."""

from __future__ import annotations

import re


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
