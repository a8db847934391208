"""What the diagnoses need from state, as a small interface, and an in-memory implementation.

``StateAccess`` is all ``analysis.diagnose`` asks of a reader: the key fields of a store, its
rows at a batch for some keys (or partitions), its change feed over a batch range, near-miss
keys and whether a change feed exists. ``spark_io.readers.spark_state.SparkState`` implements it with
Spark's State Data Source (filters run in Spark); ``ArrowState`` implements it over Arrow
tables in memory, for tests without a JVM and for state already loaded.

Keys are compared as text and, where the user's text parses as the key field's type, by
value (``typed_values``): ``17850`` finds a double ``17850.0``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from statelens.analysis.core.arrow_numpy import (
    ALNUM_LOWER,
    DIGITS,
    arrow_of,
    cast,
    filtered,
    is_in,
    kernel,
    numpy_filled,
    numpy_of,
    one_array,
    pc,
    rows_of,
    string_array,
    struct_field,
    translate_ascii,
)
from statelens.analysis.core.errors import StateReadError
from statelens.analysis.core.key_columns import columns_equal_to_key
from statelens.analysis.core.model import JOIN_ROW_FIELDS, StateSource
from statelens.analysis.core.near_miss import NearSeen, digits, near_miss_reason, normalize

MAX_STATE_BATCHES = 30  # history without a change feed: the state at this many retained batches, newest first


@dataclass(frozen=True)
class KeyQuery:
    """Which rows a diagnosis wants: the key field, the user's keys, and their typed values."""

    key_field: str
    keys: tuple[str, ...]
    typed: tuple[tuple[str, Any], ...] = ()

    def owners(self, raw: Any) -> list[str]:
        """Which of the user's keys a row's key field value answers (by text or by typed value), in
        the order asked: a look-up of the value's text and of the value itself, not a pass over every
        key (a question of a few hundred keys compares each row read once, not once per key)."""
        by_value, at = self._index
        text = key_text(raw)
        found = [text] if text in at else []
        with contextlib.suppress(TypeError):  # a struct or list value: equal to no typed key
            found += by_value.get(raw, ())
        if len(found) == 1 and len(at[found[0]]) == 1:
            return found
        return [self.keys[i] for i in sorted({i for k in found for i in at[k]})]  # each place it was asked

    def by_owner(self, rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        """The rows (each with ``_raw``, the key field's value) each of the user's keys owns, in read order."""
        out: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            for k in dict.fromkeys(self.owners(r["_raw"])):
                out.setdefault(k, []).append(r)
        return out

    @cached_property
    def _index(self) -> tuple[dict[Any, list[str]], dict[str, list[int]]]:
        """Keys by their typed value, and each key's places among the keys asked (a key is its own text)."""
        at: dict[str, list[int]] = {}
        for i, k in enumerate(self.keys):
            at.setdefault(k, []).append(i)
        by_value: dict[Any, list[str]] = {}
        for k, v in dict(self.typed).items():
            if k in at:
                with contextlib.suppress(TypeError):  # a signalling NaN decimal: equal to nothing
                    by_value.setdefault(v, []).append(k)
        return by_value, at


WINDOW_KEYS = ("window", "session_window")  # a key field that is a time window


class StateAccess(Protocol):
    def key_fields(self, source: StateSource, batch: int) -> list[tuple[str, str]]:
        """(name, type) of the key's plain fields a user can match (not a join's index, not structs)."""
        ...

    def windowed(self, source: StateSource, batch: int) -> bool:
        """Whether the key holds a time window (a struct ``window`` or ``session_window``)."""
        ...

    def value_fields(self, source: StateSource, batch: int) -> list[str]: ...

    def key_columns(self, source: StateSource, batch: int, keys: tuple[str, ...] = ()) -> dict[str, str]:
        """Key field -> the value column equal to it on every row read (a join's ``field0`` ->
        ``order_id``; ``key_columns.columns_equal_to_key``). ``keys``: the keys asked about, whose
        rows a reader that reads part of a store reads anyway (their partition first)."""
        ...

    def rows(self, source: StateSource, batch: int, query: KeyQuery) -> list[dict[str, Any]]:
        """Rows holding one of the keys at the batch, each with ``_raw``: the key field's value."""
        ...

    def changes(self, source: StateSource, start: int, end: int, query: KeyQuery) -> list[dict[str, Any]]:
        """Change-feed rows (``batch_id``, ``change_type``, key, value) of the keys over the batches."""
        ...

    def near_keys(self, source: StateSource, batch: int, key_field: str, keys: list[str]) -> list[str]:
        """Key field values at the batch that look like one of the keys (case, punctuation, digits)."""
        ...

    def near_history(self, source: StateSource, start: int, end: int, key_field: str, keys: list[str]) -> list[NearSeen]:
        """Key field values in the change feed over the batches that look like one of the keys, with
        when they came and went (a payment keyed ``ORD-7`` evicted before the question)."""
        ...

    def eviction_horizon(self, source: StateSource, start: int, end: int, watermarks: dict[int, int]) -> tuple[int, int] | None:
        """How far past a row's event time the watermark was when this store evicted it
        (``why_missing.eviction_horizon`` over the store's whole change feed)."""
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


def key_text(v: Any) -> str | None:
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
    derived: dict[Any, Any] = field(default_factory=dict)  # columns computed once per table

    def _table(self, source: StateSource, batch: int) -> pa.Table:
        try:
            return self.state[(source, batch)]
        except KeyError:
            raise StateReadError(f"{source.describe()} at batch {batch} is not loaded.") from None

    def key_fields(self, source: StateSource, batch: int) -> list[tuple[str, str]]:
        key_type = self._table(source, batch).schema.field("key").type
        return [
            (f.name, _type_name(f.type)) for f in key_type if f.name not in JOIN_ROW_FIELDS and not pa.types.is_struct(f.type)
        ]

    def windowed(self, source: StateSource, batch: int) -> bool:
        key_type = self._table(source, batch).schema.field("key").type
        return any(f.name in WINDOW_KEYS and pa.types.is_struct(f.type) for f in key_type)

    def value_fields(self, source: StateSource, batch: int) -> list[str]:
        schema = self._table(source, batch).schema
        if "value" not in schema.names or not pa.types.is_struct(schema.field("value").type):
            return []
        return [f.name for f in schema.field("value").type]

    def key_columns(self, source: StateSource, batch: int, keys: tuple[str, ...] = ()) -> dict[str, str]:
        return columns_equal_to_key(self._table(source, batch))

    def _text_column(self, table: pa.Table, key_field: str) -> Any:
        k = (id(table), key_field)
        if k not in self.derived:
            self.derived[k] = cast(struct_field(table["key"], key_field), pa.string())
        return self.derived[k]

    def _prefilter(self, table: pa.Table, query: KeyQuery) -> pa.Table:
        """The rows whose key field equals one of the keys as text or as a typed value (vectorised);
        ``_matching`` then checks each survivor exactly."""
        if table.num_rows == 0:
            return table
        mask = is_in(self._text_column(table, query.key_field), string_array(list(query.keys)))
        typed = [v for _, v in query.typed]
        if typed:
            field_values = struct_field(table["key"], query.key_field)
            try:
                mask = kernel("or", mask, is_in(field_values, pa.array(typed, field_values.type)))
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                return table  # values Arrow cannot convert: the exact check decides on every row
        return filtered(table, mask)

    def rows(self, source: StateSource, batch: int, query: KeyQuery) -> list[dict[str, Any]]:
        return _matching(rows_of(self._prefilter(self._table(source, batch), query)), query)

    def _feed_table(self, source: StateSource) -> pa.Table:
        feed = self.feeds.get(source)
        if isinstance(feed, Exception):
            raise feed
        if feed is None:
            raise StateReadError(f"{source.describe()} has no change feed.")
        return feed

    def changes(self, source: StateSource, start: int, end: int, query: KeyQuery) -> list[dict[str, Any]]:
        rows = rows_of(self._prefilter(self._feed_table(source), query))
        return _matching([r for r in rows if start <= r["batch_id"] <= end], query)

    def _key_table(self, source: StateSource, batch: int) -> pa.Table:
        """A table with the source's ``key`` column at the batch (near-miss searches need no more)."""
        return self._table(source, batch)

    def _near_columns(self, source: StateSource, batch: int, key_field: str) -> tuple[Any, Any, Any]:
        """The key field as text, normalised (lower case, letters and digits) and as digits only; kept,
        as every question on this state asks the same."""
        k = (source, batch, key_field)
        if k not in self.derived:
            self.derived[k] = near_columns(self._key_table(source, batch), key_field)
        return self.derived[k]

    def near_keys(self, source: StateSource, batch: int, key_field: str, keys: list[str]) -> list[str]:
        return near_keys_among(*self._near_columns(source, batch, key_field), keys)

    def _feed_keys(self, source: StateSource, start: int, end: int) -> pa.Table:
        """``batch_id``, ``change_type`` and ``key`` of the change feed over the batches."""
        feed = self._feed_table(source)
        batches = numpy_of(feed["batch_id"])  # (a compute call with a Python number imports pandas: 0.5 s)
        return filtered(feed, arrow_of((batches >= start) & (batches <= end), pa.bool_()))

    def near_history(self, source: StateSource, start: int, end: int, key_field: str, keys: list[str]) -> list[NearSeen]:
        k = ("near_history", source, start, end, key_field)
        if k not in self.derived:
            feed = self._feed_keys(source, start, end)
            self.derived[k] = (feed, *near_columns(feed, key_field))
        feed, text, norm, digit = self.derived[k]
        return near_seen_among(feed, text, norm, digit, keys)

    def eviction_horizon(self, source: StateSource, start: int, end: int, watermarks: dict[int, int]) -> tuple[int, int] | None:
        feed = self._feed_table(source)
        in_range = feed.filter(pc.and_(pc.greater_equal(feed["batch_id"], start), pc.less_equal(feed["batch_id"], end)))
        return arrow_eviction_horizon(in_range, watermarks)

    def has_change_feed(self, operator_id: int) -> bool:
        return any(s.operator_id == operator_id for s in self.feeds)


def near_columns(table: pa.Table, key_field: str) -> tuple[Any, Any, Any]:
    """The key field of a table's ``key`` as text, normalised (lower case, letters and digits) and
    as digits only: what a near-miss search compares."""
    text = cast(struct_field(table["key"], key_field), pa.string())
    return text, translate_ascii(text, ALNUM_LOWER), translate_ascii(text, DIGITS)


def near_keys_among(text: Any, norm: Any, digit: Any, keys: list[str]) -> list[str]:
    """The distinct texts that are near misses of one of ``keys`` (``near_columns`` of the state)."""
    values = set(kernel("unique", kernel("filter", text, _near_mask(norm, digit, keys))).to_pylist())
    return sorted(v for v in values if v and any(near_miss_reason(k, v) for k in keys))


def near_seen_among(feed: pa.Table, text: Any, norm: Any, digit: Any, keys: list[str]) -> list[NearSeen]:
    """Near misses of ``keys`` in a change feed (``near_columns`` of it): when each came and went."""
    mask = _near_mask(norm, digit, keys)
    return near_seen(
        zip(
            kernel("filter", feed["batch_id"], mask).to_pylist(),
            kernel("filter", feed["change_type"], mask).to_pylist(),
            kernel("filter", text, mask).to_pylist(),
            strict=True,
        ),
        keys,
    )


def _near_mask(norm: Any, digit: Any, keys: list[str]) -> Any:
    """Rows whose normalised text or digits equal a key's: the candidates ``near_miss_reason`` checks."""
    norms = cast(string_array(sorted({normalize(x) for x in keys})), pa.large_string())
    digit_keys = cast(string_array(sorted({digits(x) for x in keys if len(digits(x)) >= 2})), pa.large_string())
    return kernel("or", is_in(norm, norms), is_in(digit, digit_keys))


def near_seen(changes: Iterable[tuple[int, str, str | None]], keys: list[str]) -> list[NearSeen]:
    """(batch, change type, key text) of the change feed -> each near-miss key's first and last
    batch, and the batch that removed it when its last change was a delete."""
    by_key: dict[str, list[tuple[int, str]]] = {}
    for batch, change, text in changes:
        if text and any(near_miss_reason(k, text) for k in keys):
            by_key.setdefault(text, []).append((int(batch), str(change)))
    out = []
    for text, seen in sorted(by_key.items()):
        seen.sort(key=lambda c: (c[0], c[1] == "delete"))
        last_batch, last_change = seen[-1]
        out.append(NearSeen(text, seen[0][0], last_batch, last_batch if last_change == "delete" else None))
    return out


def _codes(column: Any) -> np.ndarray:
    """A dense code per distinct value of a column (structs: per distinct combination of fields)."""
    column = one_array(column)
    if pa.types.is_struct(column.type):
        codes = np.zeros(len(column), np.int64)
        for i in range(column.type.num_fields):
            child = _codes(pc.struct_field(column, [i]))
            _, codes = np.unique(codes * (int(child.max(initial=0)) + 1) + child, return_inverse=True)
        valid = numpy_of(column.is_valid())
        return np.where(valid, codes, -1)
    encoded = pc.dictionary_encode(column)
    return numpy_filled(encoded.indices, -1).astype(np.int64)


def arrow_eviction_horizon(feed: pa.Table, watermarks: dict[int, int]) -> tuple[int, int] | None:
    """``why_missing.eviction_horizon`` over a change feed table, vectorised: for every delete whose
    previous change of the same key (ordered by batch, updates before deletes) is an update with an
    event time (the value's first timestamp), the watermark of its batch and of the batch before,
    against that time; the tightest bounds over all of them."""
    value_type = feed.schema.field("value").type if "value" in feed.schema.names else None
    if not watermarks or feed.num_rows == 0 or value_type is None or not pa.types.is_struct(value_type):
        return None
    time_field = next((f.name for f in value_type if pa.types.is_timestamp(f.type)), None)
    if time_field is None:
        return None
    times = pc.struct_field(feed["value"], time_field)
    micros = pc.cast(times, pa.timestamp("us", tz="UTC")).cast(pa.int64())
    t = numpy_filled(micros, 0) // 1000
    has_t = numpy_of(pc.is_valid(micros))
    key = _codes(feed["key"])
    batch = numpy_of(feed["batch_id"]).astype(np.int64)
    delete = numpy_filled(pc.equal(feed["change_type"], string_array(["delete"])[0]), False)
    order = np.lexsort((delete, batch, key))
    key, batch, delete, t, has_t = key[order], batch[order], delete[order], t[order], has_t[order]
    evicted = np.zeros(len(key), np.bool_)
    evicted[1:] = delete[1:] & ~delete[:-1] & has_t[:-1] & (key[1:] == key[:-1])
    idx = np.nonzero(evicted)[0]
    marks = np.array(sorted(watermarks.items()), np.int64).reshape(-1, 2)
    b = batch[idx]
    pos = np.searchsorted(marks[:, 0], b)
    known = (pos < len(marks)) & (marks[np.minimum(pos, len(marks) - 1), 0] == b)
    if not known.any():
        return None
    b, prev_t = b[known], t[idx - 1][known]
    wm_now = marks[pos[known], 1]
    wm_before = np.array([watermarks.get(int(x) - 1, 0) for x in np.unique(b)], np.int64)[np.searchsorted(np.unique(b), b)]
    lo, hi = int((wm_before - prev_t).max()), int((wm_now - prev_t).min())
    return None if lo > hi else (lo, hi)


def _matching(rows: list[dict[str, Any]], query: KeyQuery) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        raw = (r.get("key") or {}).get(query.key_field)
        if query.owners(raw):
            out.append({**r, "_raw": raw})
    return out
