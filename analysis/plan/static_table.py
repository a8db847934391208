"""A static table a stream is joined with inside a streaming query (a stream-static join), as read
from its files: what the join found for a record, and the values of the stream's key that give a
value of the table's columns (a region asked for: the countries the table maps to it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from statelens.analysis.core.state_access import key_text

MAX_ROWS = 2_000_000  # a larger static table is named, not read


@dataclass
class StaticTable:
    scan_id: int  # the plan's scan node that reads it
    name: str  # its folder's name
    where: str  # where it was read from, or looked for
    rows: list[dict[str, Any]] | None = None  # None: not read (see why)
    why: str | None = None
    columns: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"the static table {self.name} ({self.where})"

    def matching(self, keys: tuple[str, ...], values: list[Any]) -> list[dict[str, Any]]:
        """Its rows whose key columns hold these values (compared as text, as the key of a lookup is)."""
        wanted = [key_text(v) for v in values]
        if self.rows is None or any(w is None for w in wanted):
            return []
        return [r for r in self.rows if [key_text(r.get(k)) for k in keys] == wanted]

    def giving(self, column: str, value: str, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
        """The key values of its rows whose ``column`` holds ``value``: what a stream record must hold to get it."""
        if self.rows is None:
            return []
        out = [tuple(r.get(k) for k in keys) for r in self.rows if key_text(r.get(column)) == value]
        return list(dict.fromkeys(out))
