"""``NativeState``: what the diagnoses ask of state (``StateAccess``), answered by the native reader.

A key of one typed field is looked up in its own partition only, history included (Spark places
it at ``pmod(hash(key), numPartitions)``, ``hashing.py``); anything else reads whole stores,
which are kept for the questions after. With ``--engine auto`` a read the native reader cannot
decode goes to Spark (``SparkState``) and ``fallbacks`` says which and why.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from typing import Any

import pyarrow as pa

from statelens.analysis.core.arrow_numpy import rows_of
from statelens.analysis.core.errors import NativeUnsupported, StateReadError
from statelens.analysis.core.key_columns import columns_equal_to_key
from statelens.analysis.core.model import JOIN_ROW_FIELDS, CheckpointInfo, StateSource, operator_of
from statelens.analysis.core.near_miss import NearSeen
from statelens.analysis.core.state_access import (
    WINDOW_KEYS,
    ArrowState,
    KeyQuery,
    _matching,
    arrow_eviction_horizon,
    near_columns,
    near_keys_among,
    near_seen_among,
    typed_values,
)
from statelens.spark_io.readers.native.hashing import partition_of
from statelens.spark_io.readers.native.key_index import KeyIndex
from statelens.spark_io.readers.native.reader import NativeReader
from statelens.spark_io.readers.state_reader import has_change_feed
from statelens.spark_io.runtime import engine_choice
from statelens.spark_io.storage import downloads

_SIMPLE = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def simple_type(t: Any) -> str:
    """Spark's simpleString of a JSON schema type (``long`` -> ``bigint``), ``struct`` for structs."""
    if isinstance(t, dict):
        return str(t.get("type", "struct"))
    return _SIMPLE.get(str(t), str(t))


class NativeState(ArrowState):
    """StateAccess over the native reader; reads are kept (whole stores, or the keys' partitions)."""

    engine = engine_choice.NATIVE

    def __init__(self, info: CheckpointInfo, reader: NativeReader | None = None) -> None:
        super().__init__({}, {})
        self.info = info
        self.reader = reader or NativeReader(info)
        self.fallbacks: list[str] = []
        self._parts: dict[Any, pa.Table] = {}
        self._spark: Any = None
        self._looked_up: dict[tuple[StateSource, int], None] = {}  # (source, batch) read by partition, in order
        self._warmed: set[tuple[StateSource, int]] = set()
        self._key_index: KeyIndex | None = None

    def _or_spark(self, read: Any, spark_read: Any) -> Any:
        try:
            return read()
        except NativeUnsupported as e:
            if engine_choice.current() == engine_choice.NATIVE:
                raise
            if self._spark is None:
                from statelens.spark_io.readers.spark_state import SparkState

                self._spark = SparkState(self.info)
            self.fallbacks.append(e.message)
            return spark_read(self._spark)

    # ---------------------------------------------------------------- tables

    def _table(self, source: StateSource, batch: int) -> pa.Table:
        k = (source, batch)
        if k not in self.state:
            self.state[k] = self.reader.state(source, batch)
        return self.state[k]

    def _feed_table(self, source: StateSource) -> pa.Table:
        if source not in self.feeds and source.has_change_feed and self.has_change_feed(source.operator_id):
            committed = [b.batch_id for b in self.info.committed_batches]
            try:
                self.feeds[source] = self.reader.changes(source, committed[0], committed[-1])
            except StateReadError as e:
                self.feeds[source] = e
        return super()._feed_table(source)

    def _texts(self, source: StateSource, query: KeyQuery) -> tuple[str, ...]:
        """The user's keys, when the key field is text: only keys holding them need decoding."""
        field = next((f for f in self.reader.key_fields(source) if f["name"] == query.key_field), None)
        return tuple(query.keys) if field is not None and simple_type(field["type"]) == "string" else ()

    def _partitions(self, source: StateSource, query: KeyQuery, batch: int) -> list[int] | None:
        """The partitions that can hold the keys at ``batch``, or None (the key is not one typed field)."""
        fields = [f for f in self.reader.key_fields(source) if f["name"] not in JOIN_ROW_FIELDS]
        if len(fields) != 1 or fields[0]["name"] != query.key_field:
            return None
        type_name = simple_type(fields[0]["type"])
        typed = dict(query.typed)
        values = [k if type_name == "string" else typed.get(k) for k in query.keys]
        n = self.reader.partitions(source, batch)
        if not n or any(v is None for v in values):
            return None
        parts = [partition_of(v, type_name, n) for v in values]
        return None if any(p is None for p in parts) else sorted({p for p in parts if p is not None})

    def _known_first(self, source: StateSource, batch: int, keys: tuple[str, ...]) -> list[int]:
        """The store's partitions: those of ``keys`` (when the key is one field) and those already
        read for a key first."""
        fields = [f for f in self.reader.key_fields(source) if f["name"] not in JOIN_ROW_FIELDS]
        asked: list[int] = []
        if keys and len(fields) == 1:  # the keys' values as the diagnosis compares them
            _, typed = typed_values(simple_type(fields[0]["type"]), list(keys))
            asked = self._partitions(source, KeyQuery(fields[0]["name"], keys, tuple(typed.items())), batch) or []
        known = asked + sorted({p for k in self._parts if k[:2] == (source, batch) for p in k[2]} - set(asked))
        return known + [p for p in range(self.reader.partitions(source, batch)) if p not in known]

    def _partial(self, k: Any, read: Any) -> pa.Table:
        if k not in self._parts:
            self._parts[k] = read()
        return self._parts[k]

    # ---------------------------------------------------------------- StateAccess

    def key_fields(self, source: StateSource, batch: int) -> list[tuple[str, str]]:
        def native() -> list[tuple[str, str]]:
            return [
                (f["name"], simple_type(f["type"]))
                for f in self.reader.key_fields(source)
                if f["name"] not in JOIN_ROW_FIELDS and not isinstance(f["type"], dict)
            ]

        return self._or_spark(native, lambda s: s.key_fields(source, batch))  # type: ignore[no-any-return]

    def windowed(self, source: StateSource, batch: int) -> bool:
        def native() -> bool:
            return any(f["name"] in WINDOW_KEYS and isinstance(f["type"], dict) for f in self.reader.key_fields(source))

        return self._or_spark(native, lambda s: s.windowed(source, batch))  # type: ignore[no-any-return]

    def value_fields(self, source: StateSource, batch: int) -> list[str]:
        def native() -> list[str]:
            schema = self.reader.schema(source)
            if "value" not in schema.names or not pa.types.is_struct(schema.field("value").type):
                return []
            return [f.name for f in schema.field("value").type]

        return self._or_spark(native, lambda s: s.value_fields(source, batch))  # type: ignore[no-any-return]

    def key_columns(self, source: StateSource, batch: int, keys: tuple[str, ...] = ()) -> dict[str, str]:
        """Checked on the whole store when it is read, else on its first partition holding rows, the
        key's own first (a lookup reads only the key's partition: the whole store would cost the
        answer seconds, and on object storage a download)."""
        k = ("key columns", source, batch)
        if k not in self.derived:

            def native() -> dict[str, str]:
                if (source, batch) in self.state:
                    return columns_equal_to_key(self.state[(source, batch)])
                schema = self.reader.schema(source)
                if "value" not in schema.names or not pa.types.is_struct(schema.field("value").type):
                    return {}
                key_types = {f.type for f in schema.field("key").type}
                same_type = frozenset(f.name for f in schema.field("value").type if f.type in key_types)
                if not same_type:  # no value column can equal a key field: nothing to decode
                    return {}
                for p in self._known_first(source, batch, keys):
                    table = self.reader.state(source, batch, [p], value_fields=same_type)
                    if table.num_rows:
                        return columns_equal_to_key(table)
                return {}

            self.derived[k] = self._or_spark(native, lambda s: s.key_columns(source, batch))
        return self.derived[k]  # type: ignore[no-any-return]

    def rows(self, source: StateSource, batch: int, query: KeyQuery) -> list[dict[str, Any]]:
        def native() -> list[dict[str, Any]]:
            parts = None if (source, batch) in self.state else self._partitions(source, query, batch)
            if parts is None:
                return super(NativeState, self).rows(source, batch, query)
            texts = self._texts(source, query)
            self._looked_up[(source, batch)] = None
            table = self._partial((source, batch, tuple(parts), texts), lambda: self.reader.state(source, batch, parts, texts))
            return _matching(rows_of(self._prefilter(table, query)), query)

        return self._or_spark(native, lambda s: s.rows(source, batch, query))  # type: ignore[no-any-return]

    def changes(self, source: StateSource, start: int, end: int, query: KeyQuery) -> list[dict[str, Any]]:
        def native() -> list[dict[str, Any]]:
            # one partition count over the range: else the whole feed (an offline repartition moved the keys)
            moved = any(start <= r.batch_id <= end for r in self.info.repartitions)
            parts = None if source in self.feeds or moved else self._partitions(source, query, end)
            if parts is None:
                return super(NativeState, self).changes(source, start, end, query)
            texts = self._texts(source, query)
            table = self._partial(
                ("feed", source, start, end, tuple(parts), texts), lambda: self.reader.changes(source, start, end, parts, texts)
            )
            return _matching(rows_of(self._prefilter(table, query)), query)

        return self._or_spark(native, lambda s: s.changes(source, start, end, query))  # type: ignore[no-any-return]

    def _key_table(self, source: StateSource, batch: int) -> pa.Table:
        if (source, batch) in self.state:
            return self.state[(source, batch)]
        return self._partial(("keys", source, batch), lambda: self.reader.state(source, batch, keys_only=True))

    def _near_partitions(self, source: StateSource, key_field: str, keys: list[str], start: int) -> list[int] | None:
        """The partitions the key index says may hold a near miss (None: search them all)."""
        if self._key_index is None:
            self._key_index = KeyIndex(self.reader)
        feed = source.has_change_feed and self.has_change_feed(source.operator_id)
        return self._key_index.partitions(source, key_field, keys, start, feed)

    def near_keys(self, source: StateSource, batch: int, key_field: str, keys: list[str]) -> list[str]:
        def native() -> list[str]:
            parts = None if (source, batch) in self.state else self._near_partitions(source, key_field, keys, batch)
            if parts is None:
                return super(NativeState, self).near_keys(source, batch, key_field, keys)
            table = self._partial(
                ("near keys", source, batch, tuple(parts)), lambda: self.reader.state(source, batch, parts, keys_only=True)
            )
            return near_keys_among(*near_columns(table, key_field), keys)

        return self._or_spark(native, lambda s: s.near_keys(source, batch, key_field, keys))  # type: ignore[no-any-return]

    def _feed_keys(self, source: StateSource, start: int, end: int) -> pa.Table:
        if source in self.feeds:
            return super()._feed_keys(source, start, end)
        return self._partial(("feed keys", source, start, end), lambda: self.reader.changes(source, start, end, keys_only=True))

    def near_history(self, source: StateSource, start: int, end: int, key_field: str, keys: list[str]) -> list[NearSeen]:
        def native() -> list[NearSeen]:
            parts = None if source in self.feeds else self._near_partitions(source, key_field, keys, start)
            if parts is None:
                return super(NativeState, self).near_history(source, start, end, key_field, keys)
            feed = self._partial(
                ("near feed", source, start, end, tuple(parts)),
                lambda: self.reader.changes(source, start, end, parts, keys_only=True),
            )
            return near_seen_among(feed, *near_columns(feed, key_field), keys)

        return self._or_spark(native, lambda s: s.near_history(source, start, end, key_field, keys))  # type: ignore[no-any-return]

    def eviction_horizon(self, source: StateSource, start: int, end: int, watermarks: dict[int, int]) -> tuple[int, int] | None:
        """From the changes of the keys deleted in the range only (what evictions are made of); kept."""
        k = ("horizon", source, start, end, tuple(sorted(watermarks.items())))
        if k not in self.derived:

            def native() -> tuple[int, int] | None:
                if source in self.feeds:
                    return super(NativeState, self).eviction_horizon(source, start, end, watermarks)
                feed = self.reader.changes(source, start, end, deleted_keys_only=True)
                return arrow_eviction_horizon(feed, watermarks)

            self.derived[k] = self._or_spark(native, lambda s: s.eviction_horizon(source, start, end, watermarks))
        return self.derived[k]  # type: ignore[no-any-return]

    def warm_in_background(self) -> threading.Thread | None:
        """Between questions (the app): read the other partitions' snapshots of the stores looked
        up so far, in a thread, so the next keys find them kept. A read that fails here fails
        again, with its message, in the question that needs it."""
        todo = [k for k in self._looked_up if k not in self._warmed]
        if not todo:
            return None
        self._warmed.update(todo)

        def warm() -> None:  # the asking page's context (its storage and bounds), not its progress bar
            with downloads.unreported():
                self._warm(todo)

        t = threading.Thread(target=contextvars.copy_context().run, args=(warm,), name="statelens-warm-snapshots", daemon=True)
        t.start()
        return t

    def _warm(self, todo: list[tuple[StateSource, int]]) -> None:
        for source, batch in todo:
            with contextlib.suppress(StateReadError, NativeUnsupported):  # said by the question that reads it
                self.reader.warm(source, batch)

    def has_change_feed(self, operator_id: int) -> bool:
        operator_of(self.info, operator_id)
        return has_change_feed(self.info, operator_id)
