"""Which partitions of a store may hold a near miss of a key, without reading the store.

A near miss has the key's letters and digits (case and punctuation aside) or its digits alone
(``analysis.near_miss``). For each partition the index keeps the 32-bit hashes of those two
forms of every key the partition held at any retained batch: the keys of the state at the first
retained batch and of every change after it (a key in the state at a later batch is either
still there or was removed by a change, which names it). A question then reads only the
partitions whose hashes match: usually the key's own and none else. A hash shared by chance
costs a partition read, never an answer (the partitions read are searched exactly).

The index is built once per store and key field, on the first near-miss search, and kept on
disk beside the file cache (``<cache>/keyindex``); when the query has committed batches since,
only their changes are read and added. Without a change feed (RocksDB without changelog
checkpointing) it covers the newest batch only and is built again when that moves.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from statelens.analysis.core.arrow_numpy import cast, kernel, numpy_filled, numpy_of, string_array
from statelens.analysis.core.errors import StateLensError
from statelens.analysis.core.model import StateSource
from statelens.analysis.core.near_miss import digits, normalize
from statelens.analysis.core.state_access import near_columns
from statelens.spark_io.readers.native.kernels import string_hashes
from statelens.spark_io.readers.native.reader import NativeReader
from statelens.spark_io.storage.cache import cache_dir

SCHEME = "fnv1a32 of the alphanumeric lower-case form and of the digits (2 or more), per partition; v1"


@dataclass
class _Index:
    first: int  # the first batch whose state and changes it covers
    last: int  # the newest batch it covers
    norm: list[np.ndarray]  # per partition: sorted distinct hashes of the letters-and-digits form
    digits: list[np.ndarray]  # per partition: sorted distinct hashes of the digits (2 or more)


def _hashes_of(table: pa.Table, key_field: str, partitions: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    _, norm, digit = near_columns(table, key_field)
    part = numpy_of(table["partition_id"]).astype(np.uint64) << np.uint64(32)
    long_digits = numpy_filled(kernel("binary_length", digit), 0) >= 2  # (a compute call with a Python number imports pandas)

    def per_partition(hashes: np.ndarray, parts: np.ndarray) -> list[np.ndarray]:
        both = _distinct(parts | hashes.astype(np.uint64))
        owner = (both >> np.uint64(32)).astype(np.int64)
        cuts = np.searchsorted(owner, np.arange(partitions + 1))
        low = (both & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        return [low[cuts[p] : cuts[p + 1]] for p in range(partitions)]

    return per_partition(string_hashes(norm), part), per_partition(string_hashes(digit)[long_digits], part[long_digits])


def _holds(sorted_hashes: np.ndarray, hashes: np.ndarray) -> bool:
    """Whether any of ``hashes`` is in the sorted array (a binary search each)."""
    if not len(hashes) or not len(sorted_hashes):
        return False
    at = np.minimum(np.searchsorted(sorted_hashes, hashes), len(sorted_hashes) - 1)
    return bool((sorted_hashes[at] == hashes).any())


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted, each once (by sorting: numpy's hashing ``unique`` is several times slower on these)."""
    values = np.sort(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))] if len(values) else values


def _merged(a: list[np.ndarray], b: list[np.ndarray]) -> list[np.ndarray]:
    return [_distinct(np.concatenate((x, y))) for x, y in zip(a, b, strict=True)]


class KeyIndex:
    """The near-miss index of a checkpoint's stores (``partitions``), kept on disk."""

    def __init__(self, reader: NativeReader, folder: Path | None = None) -> None:
        self.reader = reader
        self.info = reader.info
        self.folder = (folder or cache_dir()) / "keyindex"
        self._lock = threading.Lock()
        self._loaded: dict[str, _Index] = {}

    def _id(self, source: StateSource, key_field: str) -> str:
        where = self.reader.storage.where("")
        text = f"{where}\0{self.info.query_id}\0{source.describe()}\0{key_field}\0{SCHEME}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def partitions(self, source: StateSource, key_field: str, keys: list[str], start: int, feed: bool) -> list[int] | None:
        """The partitions that may hold a near miss of ``keys`` in the state or the changes of the
        batches from ``start`` on; None when the index cannot tell (then search everything)."""
        committed = [b.batch_id for b in self.info.committed_batches]
        if not committed or self.info.query_id is None:
            return None
        with self._lock:
            try:
                index = self._current(source, key_field, committed[0], committed[-1], feed)
            except (StateLensError, OSError, ValueError):
                return None  # the search reads everything, which says what failed
        if index is None or start < index.first:
            return None
        # (``pa.array`` of Python strings imports pandas: 0.5 s of a whole process)
        norms = cast(string_array([normalize(k) for k in keys]), pa.large_string())
        digit_keys = cast(string_array([d for k in keys if len(d := digits(k)) >= 2]), pa.large_string())
        wanted = ((string_hashes(norms), index.norm), (string_hashes(digit_keys), index.digits))
        return [p for p in range(len(index.norm)) if any(_holds(per_part[p], hashes) for hashes, per_part in wanted)]

    # ---------------------------------------------------------------- building and keeping

    def _current(self, source: StateSource, key_field: str, first: int, last: int, feed: bool) -> _Index | None:
        ident = self._id(source, key_field)
        index = self._loaded.get(ident) or self._read(ident)
        n = self.reader.partitions(source, last)
        if index is not None and (index.last > last or len(index.norm) != n or (not feed and index.last != last)):
            index = None  # the checkpoint was written anew, repartitioned, or (no change feed) moved on
        if index is None:
            index = self._build(source, key_field, first, last, feed, n)
        elif index.last < last:
            norm, digit = _hashes_of(self.reader.changes(source, index.last + 1, last, keys_only=True), key_field, n)
            index = _Index(index.first, last, _merged(index.norm, norm), _merged(index.digits, digit))
        else:
            self._loaded[ident] = index
            return index
        self._loaded[ident] = index
        self._write(ident, index)
        return index

    def _build(self, source: StateSource, key_field: str, first: int, last: int, feed: bool, n: int) -> _Index:
        """Partition by partition (memory: one partition's keys at a time; in parallel on remote storage)."""
        base = first if feed else last

        def one(p: int) -> tuple[np.ndarray, np.ndarray]:
            tables = [self.reader.state(source, base, [p], keys_only=True)]
            if feed:
                tables.append(self.reader.changes(source, base, last, [p], keys_only=True))
            got = [_hashes_of(t.select(["key", "partition_id"]), key_field, n) for t in tables]
            return _distinct(np.concatenate([g[0][p] for g in got])), _distinct(np.concatenate([g[1][p] for g in got]))

        built = self.reader.decode_each(one, range(n))
        return _Index(base, last, [b[0] for b in built], [b[1] for b in built])

    def _read(self, ident: str) -> _Index | None:
        folder = self.folder / ident
        try:
            manifest = json.loads((folder / "manifest.json").read_text())
            with np.load(folder / manifest["arrays"]) as arrays:
                n = int(manifest["partitions"])
                return _Index(
                    int(manifest["first"]),
                    int(manifest["last"]),
                    [arrays[f"n{p}"] for p in range(n)],
                    [arrays[f"d{p}"] for p in range(n)],
                )
        except (OSError, ValueError, KeyError):
            return None

    def _write(self, ident: str, index: _Index) -> None:
        """The arrays under a new name, then the manifest naming them (a reader sees the old index or
        the new one, never half of one); a cache folder that cannot be written only costs a rebuild."""
        folder = self.folder / ident
        try:
            folder.mkdir(parents=True, exist_ok=True)
            name = f"{index.first}-{index.last}-{os.getpid()}-{threading.get_ident()}.npz"
            arrays = {f"n{p}": a for p, a in enumerate(index.norm)} | {f"d{p}": a for p, a in enumerate(index.digits)}
            np.savez(folder / name, **arrays)  # type: ignore[arg-type]
            manifest = {"first": index.first, "last": index.last, "partitions": len(index.norm), "arrays": name}
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".manifest-")
            with os.fdopen(fd, "w") as f:
                json.dump(manifest, f)
            os.replace(tmp, folder / "manifest.json")
            for old in folder.glob("*.npz"):
                if old.name != name:
                    old.unlink(missing_ok=True)
        except OSError:
            pass
