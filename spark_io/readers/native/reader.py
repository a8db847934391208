"""``NativeReader``: the rows Spark's State Data Source gives, read from a local checkpoint's state
files without a JVM. The same columns, types and rows as ``statestore`` (proven against Spark on
every sample by ``tests/test_native_equality.py``):

* a store: ``key``, ``value``, ``partition_id``; a join side (``joinSide``): the join key and the
  row without ``index`` and ``matched``, for the indexes below the key's count;
* transformWithState (``stateVarName``): value state ``key, value``; list state one row per
  element ``key, list_element``; map state ``key, user_map_key, user_map_value``; registered
  timers ``key, expiration_timestamp_ms``;
* change feeds: ``batch_id, change_type`` (update, delete, append) before those columns.

What it does not decode (another codec, Avro-encoded rows, arrays and maps in rows, row
checksums, real RocksDB column families) raises ``NativeUnsupported`` naming it; damaged files
raise ``StateReadError`` naming the file and the byte.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from statelens.analysis.core.arrow_numpy import arrow_of, kernel, numpy_of, pc, string_array
from statelens.analysis.core.errors import NativeUnsupported, StateReadError
from statelens.analysis.core.model import (
    DEFAULT_STORE,
    JOIN_ROW_FIELDS,
    JOIN_V4_ROWS,
    CheckpointInfo,
    OperatorInfo,
    StateSource,
    is_tws,
    operator_of,
)
from statelens.spark_io.logs.checkpoint import parse_schema_file
from statelens.spark_io.logs.state_schema import Family, read_v3
from statelens.spark_io.readers.native import avro_rows, kernels
from statelens.spark_io.readers.native.records import Records, containing, fold_merges, latest, of_deleted_keys
from statelens.spark_io.readers.native.stores import (
    KeptFiles,
    PartitionFiles,
    RocksPartition,
    commit_ids,
    hdfs_changes,
    hdfs_records,
)
from statelens.spark_io.readers.native.unsafe_row import Damaged, Rows, Undecodable, decode, unique_fields
from statelens.spark_io.storage import Entry, is_native, open_storage

T = TypeVar("T")
R = TypeVar("R")

CHANGE_TYPES = {kernels.PUT: "update", kernels.DELETE: "delete", kernels.MERGE: "append"}


@dataclass(frozen=True)
class StateRead:
    """What a read of a state decodes (``NativeReader.state``'s arguments of the same names)."""

    keys_only: bool = False
    value_fields: frozenset[str] | None = None
    key_fields: frozenset[str] | None = None


@dataclass
class _Piece:
    """Decoded columns of one partition."""

    columns: dict[str, pa.Array]


class NativeReader:
    """State of one checkpoint, local or on object storage, read from its files (``info`` from
    ``read_checkpoint``). On remote storage each partition is read in a thread of its own (the
    requests wait on the network) and state files come from the local cache once fetched."""

    def __init__(self, info: CheckpointInfo) -> None:
        if not is_native(info.path):
            raise NativeUnsupported(f"{info.path} is on storage only Spark reads (hdfs:// and the like)")
        self.info = info
        self.storage = open_storage(info.path, check=False)
        provider = info.provider
        if provider not in ("HDFSBackedStateStoreProvider", "RocksDBStateStoreProvider"):
            raise NativeUnsupported(f"the state store provider {provider}")
        self.rocksdb = provider == "RocksDBStateStoreProvider"
        encoding = info.conf.get("spark.sql.streaming.stateStore.encodingFormat", "unsaferow").lower()
        if encoding not in ("unsaferow", "avro"):
            raise NativeUnsupported(f"spark.sql.streaming.stateStore.encodingFormat={encoding}")
        self.avro = self.rocksdb and encoding == "avro"  # the HDFS provider writes UnsafeRows whatever the setting
        # row checksums (Spark 4.1+): every value carries the CRC32C of its key and value, verified and stripped on read
        self.row_checksums = info.conf.get("spark.sql.streaming.stateStore.rowChecksum.enabled", "false").lower() == "true"
        self._lock = threading.Lock()
        self._ids_lock = threading.Lock()
        self._families: dict[tuple[int, str], dict[str, Family]] = {}
        self._rocks_cache: dict[tuple[int, str, int], RocksPartition] = {}
        self._kept = KeptFiles()
        self._commit_ids: dict[int, dict[int, list[list[str]]]] = {}  # operator -> batch -> partition -> ids
        self._listed: dict[str, PartitionFiles] = {}  # partition folders, listed once
        # states made from a change feed's records as it was walked (``change_key_ids``), each taken once
        self._made: dict[tuple[StateSource, int, StateRead], pa.Table] = {}

    # ---------------------------------------------------------------- public

    def state(
        self,
        source: StateSource,
        batch: int,
        partitions: Iterable[int] | None = None,
        texts: tuple[str, ...] = (),
        keys_only: bool = False,
        value_fields: frozenset[str] | None = None,
        key_fields: frozenset[str] | None = None,
    ) -> pa.Table:
        """Rows of a store, join side, state variable or the timers at a batch. ``texts``: only
        keys whose bytes hold one of these strings are decoded (a superset of the rows of those
        text keys, for a lookup to filter exactly). ``keys_only``: a store's ``key`` and
        ``partition_id`` without its values (near-miss searches). ``value_fields``, ``key_fields``:
        a store's ``value`` or ``key`` with these fields only (the others are not decoded)."""
        op = source.operator_id
        return self._read(
            source,
            self._partitions_of(source, batch, partitions),
            lambda store, p, values: self._state_records(op, store, p, batch + 1, texts, values),
            False,
            keys_only,
            value_fields,
            key_fields,
        )

    def changes(
        self,
        source: StateSource,
        start: int,
        end: int,
        partitions: Iterable[int] | None = None,
        texts: tuple[str, ...] = (),
        deleted_keys_only: bool = False,
        keys_only: bool = False,
    ) -> pa.Table:
        """The change feed of a store or state variable over batches ``start``..``end``;
        ``deleted_keys_only``: only the changes of keys deleted in that range (eviction delays);
        ``keys_only``: a store's changes without their values (growth counts keys). An offline
        repartition batch in the range has no change log and changes no row: the feed skips it."""
        if not source.has_change_feed:
            raise NativeUnsupported(f"{source.describe()} has no change feed")
        op = source.operator_id
        pieces = []
        for lo, hi in self.info.feed_segments(start, end) or [(start, start - 1)]:

            def records(store: str, p: int, values: bool, lo: int = lo, hi: int = hi) -> Records:
                rec = containing(self._change_records(op, store, p, lo + 1, hi + 1, texts), texts)  # changelogs hold values
                return of_deleted_keys(rec) if deleted_keys_only else rec

            parts = self._partitions_of(source, hi, partitions)
            pieces.append(self._read(source, parts, records, True, keys_only))
        return pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]

    def made_state(self, source: StateSource, batch: int, read: StateRead) -> pa.Table | None:
        """The state ``change_key_ids`` made of ``source`` at ``batch`` for ``read`` as it walked the feed
        (once; None when it made none): the rows ``state`` gives, in the order the feed last wrote
        each key."""
        with self._lock:
            return self._made.pop((source, batch, read), None)

    def key_ids(
        self, source: StateSource, batch: int, partitions: Iterable[int] | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Each row of a store at ``batch`` as (key id, partition), nothing decoded: the key id is the
        64-bit FNV-1a hash of the key's stored bytes, the identity the store itself keys its rows by.
        None where a row is not one stored key (a join side read from two stores, list and map
        state, timers, join rows of format 4): count those from their decoded rows."""
        op = source.operator_id
        ids = self._key_ids(
            source,
            self._partitions_of(source, batch, partitions),
            lambda store, p: self._state_records(op, store, p, batch + 1, values=False),
            False,
        )
        return None if ids is None else (ids[0][2], ids[0][3])

    def change_key_ids(
        self, source: StateSource, start: int, end: int, partitions: Iterable[int] | None = None, state: StateRead | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """The change feed over ``start``..``end`` as (batch id, 1 for a delete, key id, partition) per
        change, in feed order, nothing decoded (``key_ids``; None where ``key_ids`` is).

        ``state``: where the feed starts at the first batch, the records walked make up the state at
        ``end`` too (each key's last record, as a store's first version plus its changes would): that
        read of it is decoded from them as they are walked, for ``made_state`` (a growth's eviction
        figures would otherwise read every changelog again)."""
        if not source.has_change_feed:
            raise NativeUnsupported(f"{source.describe()} has no change feed")
        op = source.operator_id
        segments = self.info.feed_segments(start, end) or [(start, start - 1)]
        if partitions is not None or start != 0 or len(segments) != 1:
            state = None
        pieces = []
        for lo, hi in segments:

            def records(store: str, p: int, lo: int = lo, hi: int = hi) -> Records:
                return self._change_records(op, store, p, lo + 1, hi + 1)

            walked = self._key_ids(source, self._partitions_of(source, hi, partitions), records, True, state)
            if walked is None:
                return None
            ids, made = walked
            if made is not None and state is not None:
                with self._lock:
                    self._made[(source, end, state)] = made
            pieces.append(ids)
        batch, deletes, keys, parts = (np.concatenate(c) for c in zip(*pieces, strict=True))
        return batch, deletes, keys, parts

    def _key_ids(
        self,
        source: StateSource,
        partitions: list[int],
        records: Callable[[str, int], Records],
        changes: bool,
        state: StateRead | None = None,
    ) -> tuple[tuple[np.ndarray, ...], pa.Table | None] | None:
        """(batch, is delete, key id, partition) of the records, and with ``state`` that read of the
        state the records make up (their keys' last records), decoded from the same records."""
        view = self._view(operator_of(self.info, source.operator_id), source)
        if type(view) is not _Plain or view.fam.event_time_key:
            return None
        schema = self._configure(source, view, state) if state is not None else None

        def piece(p: int) -> tuple[tuple[np.ndarray, ...], _Piece | None]:
            recs = {store: records(store, p) for store in view.stores}
            rec = view._records(recs, p, changes)
            ids = (
                rec.version - 1,
                (rec.kind == kernels.DELETE).astype(np.int64),
                rec.key_hashes(),
                np.full(len(rec), p, np.int64),
            )
            return ids, (self._built(source, view, recs, p, False) if schema is not None else None)

        pieces = self.decode_each(piece, partitions) or [(tuple(np.zeros(0, np.int64) for _ in range(4)), None)]
        ids = tuple(np.concatenate(c) for c in zip(*(i for i, _ in pieces), strict=True))
        made = _concat([m for _, m in pieces if m is not None], schema) if schema is not None else None
        return ids, made

    def warm(self, source: StateSource, batch: int) -> None:
        """Read the RocksDB files the source's state at ``batch`` is made from, in every
        partition, into the kept files (for the questions after; nothing is decoded)."""
        if not self.rocksdb:
            return  # HDFS files are read in one pass each: nothing worth keeping
        op = operator_of(self.info, source.operator_id)
        for store in self._view(op, source).stores:
            for p in range(self.partitions(source, batch)):
                self._rocks(op.operator_id, store, p).warm(batch + 1)

    def partitions(self, source: StateSource, batch: int | None = None) -> int:
        """The store's partitions at ``batch`` (they change with an offline repartition), else now."""
        op = operator_of(self.info, source.operator_id)
        now = max((s.num_partitions for s in op.stores), default=0)
        return (self.info.partitions_at(batch) if batch is not None else None) or now

    def _partitions_of(self, source: StateSource, batch: int, wanted: Iterable[int] | None) -> list[int]:
        """The partitions a read at ``batch`` decodes: all of that batch's, or those of ``wanted`` it has
        (Spark's ``partition_id`` filter finds no row in a partition a batch does not have)."""
        n = self.partitions(source, batch)
        return list(range(n)) if wanted is None else [p for p in wanted if 0 <= p < n]

    def key_fields(self, source: StateSource) -> list[dict[str, Any]]:
        """The fields of the ``key`` column (Spark's JSON schema) this source gives, repeated names
        numbered as in the table (``_groupingexpression_1``)."""
        return unique_fields(self._view(operator_of(self.info, source.operator_id), source).key_fields)

    def schema(self, source: StateSource, changes: bool = False) -> pa.Schema:
        """The columns a read of this source gives, without reading it."""
        try:
            return self._view(operator_of(self.info, source.operator_id), source).schema(changes)
        except Undecodable as e:
            raise NativeUnsupported(f"{source.describe()} holds {e.message}") from e

    # ---------------------------------------------------------------- views

    def _read(
        self,
        source: StateSource,
        partitions: Iterable[int],
        records: Callable[[str, int, bool], Any],
        changes: bool,
        keys_only: bool = False,
        value_fields: frozenset[str] | None = None,
        key_fields: frozenset[str] | None = None,
    ) -> pa.Table:
        view = self._view(operator_of(self.info, source.operator_id), source)
        schema = self._configure(source, view, StateRead(keys_only, value_fields, key_fields), changes)
        # list values (format 4 joins) are read even for keys: a key has a row per value
        read_values = not view.keys_only or bool(isinstance(view, _Plain) and view.fam.event_time_key)

        def piece(p: int) -> _Piece:
            return self._built(source, view, {store: records(store, p, read_values) for store in view.stores}, p, changes)

        return _concat(self.decode_each(piece, sorted(set(partitions))), schema)

    def _configure(self, source: StateSource, view: _View, read: StateRead, changes: bool = False) -> pa.Schema:
        """Set what ``view`` decodes for this read; the columns it gives."""
        if type(view) is _Plain:  # the other views need every value field to build their rows
            view.keys_only, view.value_only = read.keys_only, read.value_fields
            if view.fam.plain_key:  # a key of one row (not a prefix or an event time apart)
                view.key_only = read.key_fields
        try:
            schema = view.schema(changes)
        except Undecodable as e:
            raise NativeUnsupported(f"{source.describe()} holds {e.message}") from e
        return schema.remove(schema.get_field_index("value")) if view.keys_only else schema

    @staticmethod
    def _built(source: StateSource, view: _View, recs: dict[str, Any], p: int, changes: bool) -> _Piece:
        try:
            return view.build(recs, p, changes)
        except Damaged as e:
            raise StateReadError(
                f"The state of {source.describe()} in partition {p} is damaged: {e} (row {e.row}); its files are under "
                f"state/{source.operator_id}/{p}/."
            ) from e

    def decode_each(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """``fn`` (a partition's decoding) over ``items``, a core each. While the loops would run in
        Python, the first item runs alone, its loops' estimates counted for every item, and its
        time tells what the rest would cost there: past the time loading the compiled loops takes,
        they load (at once, or after it) and the rest decode in parallel with them.
        (On remote storage every item starts at once: there the requests are what takes time.)"""
        items = list(items)
        if len(items) < 2 or kernels.loaded() or self.storage.remote:
            return self.storage.map(fn, items, decodes=True)
        before = kernels.python_seconds()
        with kernels.alike(len(items)):
            first = fn(items[0])
        kernels.expect((kernels.python_seconds() - before) * (len(items) - 1))
        return [first, *self.storage.map(fn, items[1:], decodes=True)]

    def _view(self, op: OperatorInfo, source: StateSource) -> _View:
        try:
            if is_tws(op):
                return self._tws_view(op, source)
            if source.join_side and op.join_rows_store(source.join_side).endswith(JOIN_V4_ROWS):
                rows = op.join_rows_store(source.join_side)
                return _JoinRowsAsSide(self, op.operator_id, op.folder_of(rows), self._family(op, rows), rows)
            if source.join_side:
                counts, values = (f"{source.join_side}-{kind}" for kind in ("keyToNumValues", "keyWithIndexToValue"))
                folder = op.folder_of(values)
                return _JoinSide(self, op.operator_id, counts, values, self._family(op, counts), self._family(op, values), folder)
            store = source.store_name or DEFAULT_STORE
            fam = self._family(op, store)
            prefix = next((s.num_cols_prefix_key for s in op.stores if s.store_name == store), 0)
            if prefix and not fam.prefix_cols:
                fam.encoder = {"keyStateEncoderType": "PrefixKeyScanStateEncoderSpec", "numColsPrefixKey": prefix}
            folder = op.folder_of(store)
            return _Plain(self, op.operator_id, folder, fam, cf=store if folder != store else None)
        except Undecodable as e:
            raise NativeUnsupported(f"{source.describe()} holds {e}") from e

    def _tws_view(self, op: OperatorInfo, source: StateSource) -> _View:
        if not self.rocksdb:
            raise NativeUnsupported("transformWithState on the HDFS provider")
        fams = self._families_of(op, DEFAULT_STORE)
        if source.timers:
            name = next((n for n in fams if n.startswith("$") and n.endswith("_keyToTimestamp")), None)
            if name is None:
                raise NativeUnsupported(f"operator {op.operator_id} registers no timers in its schema")
            return _Tws(self, op.operator_id, fams[name], "timers")
        if source.state_var not in fams:
            raise NativeUnsupported(f"no state schema for state variable {source.state_var}")
        fam = fams[source.state_var]
        kind = op.state_variable_type(source.state_var) or "ValueState"
        if kind == "ListState":
            return _Tws(self, op.operator_id, fam, "list")
        if kind == "MapState":
            return _Tws(self, op.operator_id, fam, "map")
        return _Plain(self, op.operator_id, DEFAULT_STORE, fam, cf=fam.name)

    # ---------------------------------------------------------------- schemas

    def _families_of(self, op: OperatorInfo, store: str) -> dict[str, Family]:
        """Every column family (or the one store) of ``store``: from the newest v3 schema file, else
        from the v1/v2 file of partition 0."""
        key = (op.operator_id, store)
        if key in self._families:
            return self._families[key]
        folder = f"state/{op.operator_id}/_stateSchema/{store}"

        def order(e: Entry) -> tuple[int, int]:
            head = e.name.split("_")[0]
            return (int(head) if head.isdigit() else -1, e.mtime_ns)

        v3 = sorted((e for e in self._list(folder) if not e.is_dir and not e.name.endswith(".crc")), key=order)
        if v3:
            fams = {f.name: f for f in read_v3(self._bytes(v3[-1].path, v3[-1]), v3[-1].path)}
            if self.avro:  # every schema a family has had, by id: a row names the one it was written with
                for e in v3:
                    for old in read_v3(self._bytes(e.path, e), e.path):
                        if old.name in fams:
                            fams[old.name].key_writers[old.key_schema_id] = old.key
                            fams[old.name].value_writers[old.value_schema_id] = old.value
                for fam in fams.values():
                    fam.avro = True
        else:
            sub = "" if store == DEFAULT_STORE else f"{store}/"
            rel = f"state/{op.operator_id}/0/{sub}_metadata/schema"
            found = {e.name: e for e in self._list(rel.rsplit("/", 1)[0])}.get("schema")
            if found is None or found.is_dir:
                raise NativeUnsupported(f"no state schema file for operator {op.operator_id} store {store}")
            structs = [o for o in parse_schema_file(self._bytes(rel, found)) if o.get("type") == "struct"]
            if len(structs) < 2:
                raise StateReadError(f"{rel} does not hold a key and a value schema: the file is damaged.")
            fams = {store: Family(store, structs[0].get("fields", []), structs[1].get("fields", []))}
        self._families[key] = fams
        return fams

    def _family(self, op: OperatorInfo, store: str) -> Family:
        """The schema of a store, or of a store kept as a column family of another (format 3 joins)."""
        fams = self._families_of(op, op.folder_of(store))
        if store in fams:
            return fams[store]
        if len(fams) == 1:
            return next(iter(fams.values()))
        raise NativeUnsupported(f"operator {op.operator_id} store {store} keeps several column families {sorted(fams)}")

    # ---------------------------------------------------------------- files

    def _list(self, rel: str) -> list[Entry]:
        try:
            return self.storage.listdir(rel)
        except OSError as e:
            raise StateReadError(f"The state folder {rel} cannot be read ({e.strerror or e}).") from e

    def _bytes(self, rel: str, entry: Entry) -> bytes:
        try:
            return self.storage.read(rel, entry)
        except OSError as e:
            raise StateReadError(f"{rel} cannot be read ({e.strerror or e}).") from e

    def _files(self, op_id: int, store: str, partition: int) -> PartitionFiles:
        """The partition's files, from one listing of its folder (the batches this reader answers
        for are fixed: their files are there or not, once). Listed outside the lock: partitions are
        read in parallel."""
        rel = f"state/{op_id}/{partition}" + ("" if store == DEFAULT_STORE else f"/{store}")
        with self._lock:
            if rel in self._listed:
                return self._listed[rel]
        listed = PartitionFiles.of(self.storage, rel)
        with self._lock:
            return self._listed.setdefault(rel, listed)

    def _ids_of(self, op_id: int) -> dict[int, list[list[str]]]:
        """Checkpoint format v2: the operator's state file ids per batch, from the commit log (read once)."""
        with self._ids_lock:
            if op_id not in self._commit_ids:
                committed = [b.batch_id for b in self.info.committed_batches]
                self._commit_ids[op_id] = commit_ids(self.storage, committed, op_id)
            return self._commit_ids[op_id]

    def _rocks(self, op_id: int, store: str, partition: int) -> RocksPartition:
        key = (op_id, store, partition)
        with self._lock:
            if key in self._rocks_cache:
                return self._rocks_cache[key]
        part = self._files(op_id, store, partition)
        v2 = self.info.checkpoint_format_version == 2
        ids: dict[int, str] = {}
        if v2:
            for b, per_part in self._ids_of(op_id).items():
                candidates = per_part[partition] if partition < len(per_part) else []
                found = [u for u in candidates if part.name("changelog", b + 1, u) or part.name("zip", b + 1, u)]
                if found:
                    ids[b + 1] = found[0]
        with self._lock:
            return self._rocks_cache.setdefault(key, RocksPartition(part, ids, v2, self._kept))

    def _state_records(
        self, op_id: int, store: str, partition: int, version: int, texts: tuple[str, ...] = (), values: bool = True
    ) -> Records:
        """The records that make up a version of one store partition (a snapshot, then the changes
        after it, in order), in one buffer; each file's own buffer is released once copied.
        ``values=False``: a RocksDB snapshot's values are not read (they come back empty)."""
        if self.rocksdb:
            rec = self._rocks(op_id, store, partition).state(version, values)
        else:
            rec = hdfs_records(self._files(op_id, store, partition), version, texts)
        return containing(self._verified(rec, op_id, store, partition) if values else rec, texts)

    def _change_records(
        self, op_id: int, store: str, partition: int, start: int, end: int, texts: tuple[str, ...] = ()
    ) -> Records:
        """The changes of one store partition in versions ``start``..``end`` (``texts``: from the files
        holding one of them; the RocksDB changelogs, kept for the questions after, are walked whole)."""
        if self.rocksdb:
            rp = self._rocks(op_id, store, partition)
            if not rp.part.files["changelog"]:
                raise NativeUnsupported("a change feed of RocksDB without changelog checkpointing")
            return self._verified(rp.changes(start, end), op_id, store, partition)
        return self._verified(hdfs_changes(self._files(op_id, store, partition), start, end, texts), op_id, store, partition)

    def _verified(self, rec: Records, op_id: int, store: str, partition: int) -> Records:
        """The records with their row checksums verified and removed (a no-op without row checksums).
        A mismatch is an error naming the file, the row and both sums: never a silently wrong row."""
        if not self.row_checksums or not len(rec):
            return rec
        out = np.empty(int(np.maximum(rec.vlen, 0).sum()), np.uint8)
        args = (rec.buf, rec.kind, rec.koff, rec.klen, rec.voff, rec.vlen)
        koff, klen, noff, nlen, bad, status, stored, got = kernels.strip_row_checksums(
            *args, self.rocksdb, kernels.CRC32C_TABLE, out
        )
        if bad >= 0:
            version = int(rec.version[bad])
            row = int(bad - np.searchsorted(rec.version, version))  # records are in file order, oldest first
            part = self._files(op_id, store, partition)
            kinds = ("changelog", "zip") if self.rocksdb else ("delta", "snapshot")
            names = [n for k in kinds for n in part.files[k].get(version, {}).values()] or [f"version {version}"]
            where = f"{part.rel}/{names[0]}" + (f" (or {', '.join(names[1:])})" if len(names) > 1 else "")
            if status == 2:
                raise StateReadError(
                    f"Row checksum mismatch in {where}, row {row}: the row stores CRC32C {int(stored):#010x} but its key and "
                    f"value give {int(got):#010x}. The file is damaged (Spark checks row checksums only as often as "
                    "spark.sql.streaming.stateStore.rowChecksum.readVerificationRatio says, by default never: it would "
                    "read the damaged row). Restore the file, or restart from an earlier batch or a new checkpoint."
                )
            raise StateReadError(f"{where}, row {row}: a value too short for its row checksum: the file is damaged or cut short.")
        buf = np.concatenate([rec.buf, out])
        buf.flags.writeable = False
        base = len(rec.buf)
        voff = np.where(rec.vlen >= 0, noff + base, rec.voff)
        return Records(buf, rec.kind, koff, klen, voff, nlen, rec.version)

    def cf_id(self, op_id: int, store: str, partition: int, name: str) -> int:
        """The id of a virtual column family in one partition (from its snapshots' metadata)."""
        families = self._rocks(op_id, store, partition).families
        if name not in families:
            raise NativeUnsupported(
                f"no RocksDB snapshot of state/{op_id}/{partition} records the id of column family {name} yet"
            )
        return families[name]


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The table with the schema's exact types (a cast copies, so only when they differ)."""
    return table if table.schema.equals(schema, check_metadata=False) else table.cast(schema)


def _concat(pieces: list[_Piece], schema: pa.Schema) -> pa.Table:
    # (``pa.table`` of a dict and ``schema.empty_table()`` import pandas: 0.5 s of a whole process)
    tables = [_conform(pa.Table.from_arrays(list(p.columns.values()), list(p.columns)), schema) for p in pieces if p.columns]
    return pa.concat_tables(tables) if tables else pa.Table.from_batches([], schema)


# --------------------------------------------------------------------------- views


def _rows(rec: Records, which: str, skip: int, keep: np.ndarray | None = None) -> Rows:
    """Key or value rows of records, ``skip`` bytes into each (RocksDB's version byte, a column
    family id)."""
    off = rec.koff if which == "key" else rec.voff
    size = rec.klen if which == "key" else rec.vlen
    keep = keep if keep is not None else np.ones(len(rec), np.bool_)
    return Rows(rec.buf, off + skip, size - skip, keep)


def _struct_type(fields: list[dict[str, Any]]) -> pa.DataType:
    from statelens.spark_io.readers.native.unsafe_row import arrow_type

    return arrow_type({"type": "struct", "fields": fields})


_CHANGE_NAMES = string_array([CHANGE_TYPES[k] for k in range(3)])


def _feed_columns(rec: Records) -> dict[str, pa.Array]:
    kinds = arrow_of(rec.kind.astype(np.int8), pa.int8())
    return {
        "batch_id": arrow_of(rec.version - 1, pa.int64()),
        "change_type": kernel("array_take", _CHANGE_NAMES, kinds),
    }


class _View:
    stores: list[str]
    key_fields: list[dict[str, Any]]
    keys_only = False  # decode the key only (a plain store's near-miss search)
    value_only: frozenset[str] | None = None  # decode these value fields only (a plain store)
    key_only: frozenset[str] | None = None  # decode these key fields only (a plain store whose key is one row)

    def __init__(self, reader: NativeReader, op_id: int) -> None:
        self.reader = reader
        self.op_id = op_id
        self.rocks = reader.rocksdb

    def build(self, recs: dict[str, Any], partition: int, changes: bool) -> _Piece:
        raise NotImplementedError

    def schema(self, changes: bool) -> pa.Schema:
        raise NotImplementedError

    def _with_feed(self, columns: dict[str, pa.DataType], changes: bool) -> pa.Schema:
        base = [pa.field(n, t, True) for n, t in columns.items()]
        if changes:
            base = [pa.field("batch_id", pa.int64()), pa.field("change_type", pa.string()), *base]
        return pa.schema([*base, pa.field("partition_id", pa.int32())])


def _merge(parts: Records, changes: bool) -> Records:
    return parts if changes else latest(parts)


def _split_cf(rec: Records, cf_id: int) -> Records:
    """The records of one virtual column family (a 2-byte little-endian id before every key)."""
    if not len(rec):
        return rec
    ids = kernels.gather_le(rec.buf, rec.koff, 2, rec.klen >= 2)
    return rec.take(np.nonzero((ids == cf_id) & (rec.klen >= 2))[0])


class _Plain(_View):
    """A store (or a transformWithState value state): key and value rows as they are."""

    def __init__(self, reader: NativeReader, op_id: int, store: str, fam: Family, cf: str | None) -> None:
        super().__init__(reader, op_id)
        self.stores = [store]
        self.fam = fam
        self.cf = cf
        self.key_fields = fam.key

    def _records(self, recs: dict[str, Any], partition: int, changes: bool) -> Records:
        raw = recs[self.stores[0]]
        if self.cf is not None:
            cf_id = self.reader.cf_id(self.op_id, self.stores[0], partition, self.cf)
            raw = _split_cf(raw, cf_id)
        if self.fam.event_time_key:  # list values: the rows since each key's last put
            return raw if changes else fold_merges(raw)[0]
        return _merge(raw, changes)

    def build(self, recs: dict[str, Any], partition: int, changes: bool) -> _Piece:
        rec = self._records(recs, partition, changes)
        elements = None
        if self.fam.event_time_key:  # one row per value of a key and time, as Spark reads them
            rec, elements = _list_elements(rec)
        key = _decode_key(rec, self.fam, self.rocks, self.cf is not None, self.key_only)
        cols: dict[str, pa.Array] = {}
        if changes:
            cols |= _feed_columns(rec)
        cols["key"] = key
        if not self.keys_only:
            cols["value"] = (
                _rows_of(elements, self.fam, "value", only=self.value_only)
                if elements is not None
                else _decode_value(rec, self.fam, self.rocks, self.value_only)
            )
        cols["partition_id"] = arrow_of(np.full(len(rec), partition, np.int32), pa.int32())
        return _Piece(cols)

    def schema(self, changes: bool) -> pa.Schema:
        key, value = self.fam.key, self.fam.value
        if self.key_only is not None:
            key = [f for f in unique_fields(key) if f["name"] in self.key_only]
        if self.value_only is not None:
            value = [f for f in unique_fields(value) if f["name"] in self.value_only]
        return self._with_feed({"key": _struct_type(key), "value": _struct_type(value)}, changes)


def _rows_of(
    rows: Rows, fam: Family, which: str, part: slice = slice(None), with_id: bool = True, only: frozenset[str] | None = None
) -> pa.StructArray:
    """Key or value rows of a family (``part``: of these key fields), as UnsafeRows or Avro
    (``with_id``: the Avro rows start with their schema id)."""
    fields = (fam.key if which == "key" else fam.value)[part]
    if not fam.avro:
        return decode(rows, fields, only)
    writers = {i: f[part] for i, f in (fam.key_writers if which == "key" else fam.value_writers).items()}
    return avro_rows.decode(rows, fields, writers if with_id else None, only)


def _decode_value(rec: Records, fam: Family, rocks: bool, only: frozenset[str] | None = None) -> pa.Array:
    present = rec.kind != kernels.DELETE
    return _rows_of(_rows(rec, "value", 1 if rocks else 0, present), fam, "value", only=only)


def _decode_key(rec: Records, fam: Family, rocks: bool, cf: bool, only: frozenset[str] | None = None) -> pa.Array:
    """Key rows: plain UnsafeRows (HDFS), RocksDB's version byte first, after a 2-byte column family
    id with virtual column families; prefix-scan keys are two rows (the first columns and the rest).
    ``only``: of these fields only (a key of one row: ``Family.plain_key``)."""
    skip = 2 if cf else 0
    if fam.event_time_key:
        return _event_time_key(rec, fam, skip)
    if fam.range_ordinals:
        raise NativeUnsupported(f"the range-scan key encoding of {fam.name}")
    if rocks and fam.prefix_cols:
        n = fam.prefix_cols
        plen = kernels.gather_le(rec.buf, rec.koff + skip, 4, np.ones(len(rec), np.bool_))
        start = rec.koff + skip + 4
        keep = np.ones(len(rec), np.bool_)
        first = _rows_of(Rows(rec.buf, start + 1, plen - 1, keep), fam, "key", slice(None, n), with_id=False)
        rest_off = start + plen
        rest = _rows_of(Rows(rec.buf, rest_off + 1, rec.koff + rec.klen - rest_off - 1, keep), fam, "key", slice(n, None))
        names = [f["name"] for f in fam.key]
        children = [first.field(i) for i in range(n)] + [rest.field(i) for i in range(len(fam.key) - n)]
        return pa.StructArray.from_arrays(children, names=names)
    return _rows_of(_rows(rec, "key", skip + (1 if rocks else 0)), fam, "key", only=only)


def _event_time_key(rec: Records, fam: Family, skip: int) -> pa.StructArray:
    """Keys of join state format 4: the key row and the event time (the schema's last field),
    ``[cf id][version byte][row][time]`` (postfix) or ``[cf id][time][version byte][row]`` (prefix)."""
    keep = np.ones(len(rec), np.bool_)
    fields = fam.key[:-1]
    if fam.event_time_key == "postfix":
        row_off, time_at = rec.koff + skip + 1, rec.koff + rec.klen - 8
    else:
        row_off, time_at = rec.koff + skip + 9, rec.koff + skip
    row = decode(
        Rows(rec.buf, row_off, rec.koff + rec.klen - row_off - (8 if fam.event_time_key == "postfix" else 0), keep), fields
    )
    times = arrow_of(kernels.gather_event_times(rec.buf, time_at), pa.int64())
    names = [f["name"] for f in unique_fields(fam.key)]
    return pa.StructArray.from_arrays([row.field(i) for i in range(len(fields))] + [times], names=names)


class _JoinRowsAsSide(_Plain):
    """A join side of join state format 4 as ``joinSide`` shows one of format 1-3: the rows of its
    keyWithTsToValues family with the join key (no event time) and the row (no ``matched``)."""

    def __init__(self, reader: NativeReader, op_id: int, folder: str, fam: Family, cf: str) -> None:
        super().__init__(reader, op_id, folder, fam, cf)
        self.key_fields = [f for f in fam.key if f["name"] not in JOIN_ROW_FIELDS]
        self.value_fields = [f for f in fam.value if f["name"] != "matched"]

    def build(self, recs: dict[str, Any], partition: int, changes: bool) -> _Piece:
        piece = super().build(recs, partition, changes)
        for col, fields in (("key", self.key_fields), ("value", self.value_fields)):
            struct = piece.columns[col]
            names = [f["name"] for f in fields]
            piece.columns[col] = pa.StructArray.from_arrays([struct.field(n) for n in names], names=names)
        return piece

    def schema(self, changes: bool) -> pa.Schema:
        return self._with_feed({"key": _struct_type(self.key_fields), "value": _struct_type(self.value_fields)}, changes)


class _JoinSide(_View):
    """A join side as ``joinSide`` shows it: the rows of keyWithIndexToValue whose index is below
    the key's count in keyToNumValues, without ``index`` and ``matched``. The two stores are
    folders of their own, or column families of ``folder`` (join state format 3)."""

    def __init__(
        self,
        reader: NativeReader,
        op_id: int,
        counts: str,
        values: str,
        counts_fam: Family,
        values_fam: Family,
        folder: str,
    ) -> None:
        super().__init__(reader, op_id)
        self.names = [counts, values]
        self.families = folder not in self.names
        self.stores = [folder] if self.families else self.names
        self.counts_fam, self.values_fam = counts_fam, values_fam
        self.key_fields = [f for f in values_fam.key if f["name"] != "index"]
        self.value_fields = [f for f in values_fam.value if f["name"] != "matched"]

    def _store(self, recs: dict[str, Any], partition: int, name: str) -> Records:
        if not self.families:
            return _merge(recs[name], False)
        folder = self.stores[0]
        return _merge(_split_cf(recs[folder], self.reader.cf_id(self.op_id, folder, partition, name)), False)

    def build(self, recs: dict[str, Any], partition: int, changes: bool) -> _Piece:
        counts = self._store(recs, partition, self.names[0])
        values = self._store(recs, partition, self.names[1])
        ck = _decode_key(counts, self.counts_fam, self.rocks, self.families)
        cv = _decode_value(counts, self.counts_fam, self.rocks)
        vk = _decode_key(values, self.values_fam, self.rocks, self.families)
        vv = _decode_value(values, self.values_fam, self.rocks)
        key_names = [f["name"] for f in self.key_fields]
        count_of = pa.table({"k": _json_keys(ck, key_names), "n": cv.field(0)})
        rows = pa.table(
            {
                "k": _json_keys(vk, key_names),
                "i": vk.field("index"),
                "row": arrow_of(np.arange(len(vk), dtype=np.int64), pa.int64()),
            }
        )
        joined = rows.join(count_of, "k", join_type="left outer")
        ok = joined.filter(pc.less(joined["i"], joined["n"]))
        rows_kept = numpy_of(ok["row"])
        take = np.sort(rows_kept) if len(rows_kept) else np.zeros(0, np.int64)
        key = pa.StructArray.from_arrays([vk.field(n).take(take) for n in key_names], names=key_names)
        value_names = [f["name"] for f in self.value_fields]
        value = pa.StructArray.from_arrays([vv.field(n).take(take) for n in value_names], names=value_names)
        return _Piece({"key": key, "value": value, "partition_id": arrow_of(np.full(len(take), partition, np.int32), pa.int32())})

    def schema(self, changes: bool) -> pa.Schema:
        return self._with_feed({"key": _struct_type(self.key_fields), "value": _struct_type(self.value_fields)}, changes)


def _json_keys(struct: pa.StructArray, names: list[str]) -> pa.Array:
    """A join key as one comparable binary column (the key fields' values, stringified)."""
    parts = [pc.cast(struct.field(n), pa.string()) for n in names]
    parts = [pc.fill_null(p, "\x00null") for p in parts]
    return pc.binary_join_element_wise(*parts, "\x1f") if len(parts) > 1 else parts[0]


class _Tws(_View):
    """transformWithState list state (one row per element), map state (prefix key: grouping key,
    user key) and registered timers (prefix key: grouping key, expiry), in one virtual column family."""

    def __init__(self, reader: NativeReader, op_id: int, fam: Family, kind: str) -> None:
        super().__init__(reader, op_id)
        self.stores = [DEFAULT_STORE]
        self.fam = fam
        self.kind = kind
        self.key_fields = fam.key if kind == "list" else _nested_fields(fam.key[0])

    def _names(self) -> list[tuple[str, pa.DataType]]:
        if self.kind == "list":
            return [("key", _struct_type(self.fam.key)), ("list_element", _struct_type(self.fam.value))]
        if self.kind == "map":
            return [
                ("key", _struct_type(self.key_fields)),
                ("user_map_key", _struct_type(_nested_fields(self.fam.key[1]))),
                ("user_map_value", _struct_type(self.fam.value)),
            ]
        return [("key", _struct_type(self.key_fields)), ("expiration_timestamp_ms", pa.int64())]

    def schema(self, changes: bool) -> pa.Schema:
        return self._with_feed(dict(self._names()), changes)

    def build(self, recs: dict[str, Any], partition: int, changes: bool) -> _Piece:
        cf_id = self.reader.cf_id(self.op_id, DEFAULT_STORE, partition, self.fam.name)
        raw = recs[DEFAULT_STORE]
        raw = _split_cf(raw, cf_id)
        cols: dict[str, pa.Array] = {}
        if self.kind == "list":
            rec = raw
            if not changes:
                rec, _ = fold_merges(rec)
            rec, elements = _list_elements(rec)
            if changes:
                cols |= _feed_columns(rec)
            cols["key"] = _decode_key(rec, self.fam, True, True)
            cols["list_element"] = _rows_of(elements, self.fam, "value")
        else:
            rec = _merge(raw, changes)
            if changes:
                cols |= _feed_columns(rec)
            key = _decode_key(rec, self.fam, True, True)
            cols["key"] = key.field(0)
            if self.kind == "map":
                cols["user_map_key"] = key.field(1)
                cols["user_map_value"] = _decode_value(rec, self.fam, True)
            else:
                cols["expiration_timestamp_ms"] = key.field(1)
        cols["partition_id"] = arrow_of(np.full(len(rec), partition, np.int32), pa.int32())
        return _Piece(cols)


def _nested_fields(f: dict[str, Any]) -> list[dict[str, Any]]:
    t = f.get("type")
    if not isinstance(t, dict) or t.get("type") != "struct":
        raise NativeUnsupported(f"a transformWithState key field {f.get('name')} that is not a struct")
    return list(t["fields"])


def _list_elements(rec: Records) -> tuple[Records, Rows]:
    """One record per list element (the record repeated) and the elements' rows: each value holds
    ``int size (LE), version byte + row`` per element, joined by a delimiter byte. A delete has
    no element (a null ``list_element``)."""
    values = np.nonzero(rec.kind != kernels.DELETE)[0]
    owner, off, size, bad = kernels.split_multi_values(rec.buf, rec.voff[values], rec.vlen[values], values)
    if bad >= 0:
        raise Damaged("a list value whose element sizes do not add up", int(values[bad]))
    deletes = np.nonzero(rec.kind == kernels.DELETE)[0]
    order = np.argsort(np.concatenate([owner, deletes]), kind="stable")
    keep = np.concatenate([np.ones(len(off), np.bool_), np.zeros(len(deletes), np.bool_)])[order]
    owner = np.concatenate([owner, deletes])[order]
    off = np.concatenate([off + 1, np.zeros(len(deletes), np.int64)])[order]
    size = np.concatenate([size - 1, np.zeros(len(deletes), np.int64)])[order]
    out = rec.take(owner)
    # a put of several elements (ListState.put) is, in Spark's change feed, the first element's
    # update and the others' appends
    later = np.zeros(len(owner), np.bool_)
    later[1:] = owner[1:] == owner[:-1]
    out.kind = np.where(later & (out.kind == kernels.PUT), np.int8(kernels.MERGE), out.kind).astype(np.int8)
    return out, Rows(rec.buf, off, size, keep)
