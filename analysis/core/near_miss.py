"""Near-miss keys: a key the user typed against keys in state that differ by case, punctuation or
only share their digits (``ORD-7`` for ``ord-7``)."""

from __future__ import annotations

import re
from dataclasses import dataclass


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
