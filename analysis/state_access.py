"""What the diagnoses need from state, as a small interface, and an in-memory implementation.

``StateAccess`` is all ``analysis.diagnose`` asks of a reader: the key fields of a store, its
rows at a batch for some keys (or partitions), its change feed over a batch range, near-miss
keys and whether a change feed exists. ``spark_io.diagnosis.SparkState`` implements it with
Spark's State Data Source (filters run in Spark); ``ArrowState`` implements it over Arrow
tables in memory, for tests without a JVM and for state already loaded.

Keys are compared as text and, where the user's text parses as the key field's type, by
value (``typed_values``): ``17850`` finds a double ``17850.0``.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from analysis import why_missing as wm
from analysis.errors import StateReadError
from analysis.model import StateSource


@dataclass(frozen=True)
class KeyQuery:
    """Which rows a diagnosis wants: the key field, the user's keys, and their typed values."""

    key_field: str
    keys: tuple[str, ...]
    typed: tuple[tuple[str, Any], ...] = ()

    def owners(self, raw: Any) -> list[str]:
        """Which of the user's keys a row's key field value answers (by text or by typed value)."""
        typed = dict(self.typed)
        return [k for k in self.keys if k == _text(raw) or (k in typed and typed[k] == raw)]


class StateAccess(Protocol):
    def key_fields(self, source: StateSource, batch: int) -> list[tuple[str, str]]:
        """(name, type) of the key's plain fields a user can match (not a join's index, not structs)."""
        ...

    def value_fields(self, source: StateSource, batch: int) -> list[str]: ...

    def rows(self, source: StateSource, batch: int, query: KeyQuery) -> list[dict[str, Any]]:
        """Rows holding one of the keys at the batch, each with ``_raw``: the key field's value."""
        ...

    def changes(self, source: StateSource, start: int, end: int, query: KeyQuery) -> list[dict[str, Any]]:
        """Change-feed rows (``batch_id``, ``change_type``, key, value) of the keys over the batches."""
        ...

    def near_keys(self, source: StateSource, batch: int, key_field: str, keys: list[str]) -> list[str]:
        """Key field values at the batch that look like one of the keys (case, punctuation, digits)."""
        ...

    def eviction_feed(self, source: StateSource, start: int, end: int) -> list[dict[str, Any]]:
        """The whole change feed, slimmed to batch_id, change_type, key and the value's event time."""
        ...

    def has_change_feed(self, operator_id: int) -> bool: ...


# --------------------------------------------------------------------------- typed keys

_INTS = ("tinyint", "smallint", "int", "bigint", "byte", "short", "integer", "long")


def _as_int(x: str) -> int | None:
    f = float(x)
    return int(f) if f.is_integer() else None


def _as_timestamp(x: str) -> dt.datetime:
    v = dt.datetime.fromisoformat(x.replace("Z", "+00:00"))
    return v if v.tzinfo else v.replace(tzinfo=dt.UTC)


def _as_bool(x: str) -> bool | None:
    return {"true": True, "false": False}.get(x.lower())


def typed_values(type_name: str, keys: list[str]) -> tuple[str, dict[str, Any]]:
    """How keys are compared with a field of this (Spark simple string) type, and each key's typed value."""
    t = type_name.lower()
    parse: Callable[[str], Any] | None = None
    how = "as text"
    if t in _INTS:
        parse, how = _as_int, f"as a number ({t})"
    elif t in ("float", "double"):
        parse, how = float, f"as a number ({t})"
    elif t.startswith("decimal"):
        parse, how = decimal.Decimal, f"as a number ({t})"
    elif t == "date":
        parse, how = dt.date.fromisoformat, "as a date"
    elif t.startswith("timestamp"):
        parse, how = _as_timestamp, "as a timestamp (UTC when no offset is given)"
    elif t == "boolean":
        parse, how = _as_bool, "as a boolean"
    values: dict[str, Any] = {}
    if parse is not None:
        for k in keys:
            try:
                v = parse(k.strip())
            except (ValueError, ArithmeticError):
                continue
            if v is not None:
                values[k] = v
    return how, values


def _text(v: Any) -> str | None:
    """A key field value as Spark casts it to string (the text users type)."""
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dt.datetime):
        return v.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S") if v.tzinfo else v.strftime("%Y-%m-%d %H:%M:%S")
    return str(v)


# --------------------------------------------------------------------------- in memory


def _type_name(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return {8: "tinyint", 16: "smallint", 32: "int", 64: "bigint"}[t.bit_width]
    if pa.types.is_floating(t):
        return "float" if t.bit_width == 32 else "double"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_boolean(t):
        return "boolean"
    return "string"


@dataclass
class ArrowState:
    """StateAccess over Arrow tables: ``state[(source, batch)]`` and ``feeds[source]`` (the change feed
    over every retained batch). A source without a feed has no change feed; a value of ``feeds``
    that is an exception is raised when read (a failed read)."""

    state: dict[tuple[StateSource, int], pa.Table]
    feeds: dict[StateSource, pa.Table | Exception] = field(default_factory=dict)
    memo: dict[Any, list[dict[str, Any]]] = field(default_factory=dict)

    def _table(self, source: StateSource, batch: int) -> pa.Table:
        try:
            return self.state[(source, batch)]
        except KeyError:
            raise StateReadError(f"{source.describe()} at batch {batch} is not loaded.") from None

    def _rows(self, source: StateSource, batch: int) -> list[dict[str, Any]]:
        k = ("rows", source, batch)
        if k not in self.memo:
            self.memo[k] = self._table(source, batch).to_pylist()
        return self.memo[k]

    def key_fields(self, source: StateSource, batch: int) -> list[tuple[str, str]]:
        key_type = self._table(source, batch).schema.field("key").type
        return [(f.name, _type_name(f.type)) for f in key_type if f.name != "index" and not pa.types.is_struct(f.type)]

    def value_fields(self, source: StateSource, batch: int) -> list[str]:
        schema = self._table(source, batch).schema
        if "value" not in schema.names or not pa.types.is_struct(schema.field("value").type):
            return []
        return [f.name for f in schema.field("value").type]

    def rows(self, source: StateSource, batch: int, query: KeyQuery) -> list[dict[str, Any]]:
        return _matching(self._rows(source, batch), query)

    def _feed(self, source: StateSource) -> list[dict[str, Any]]:
        feed = self.feeds.get(source)
        if isinstance(feed, Exception):
            raise feed
        if feed is None:
            raise StateReadError(f"{source.describe()} has no change feed.")
        k = ("feed", source)
        if k not in self.memo:
            self.memo[k] = feed.to_pylist()
        return self.memo[k]

    def changes(self, source: StateSource, start: int, end: int, query: KeyQuery) -> list[dict[str, Any]]:
        return _matching([r for r in self._feed(source) if start <= r["batch_id"] <= end], query)

    def near_keys(self, source: StateSource, batch: int, key_field: str, keys: list[str]) -> list[str]:
        values = {_text((r.get("key") or {}).get(key_field)) for r in self._rows(source, batch)}
        return sorted(v for v in values if v and any(wm.near_miss_reason(k, v) for k in keys))

    def eviction_feed(self, source: StateSource, start: int, end: int) -> list[dict[str, Any]]:
        return [r for r in self._feed(source) if start <= r["batch_id"] <= end]

    def has_change_feed(self, operator_id: int) -> bool:
        return any(s.operator_id == operator_id for s in self.feeds)


def _matching(rows: list[dict[str, Any]], query: KeyQuery) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        raw = (r.get("key") or {}).get(query.key_field)
        if query.owners(raw):
            out.append({**r, "_raw": raw})
    return out
