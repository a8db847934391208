"""Key/value records of state files, as arrays over one byte buffer.

``Records`` holds, for every record of the files read: its kind (put, delete, merge), where its
key and value sit in ``buf``, and the state version (batch + 1) that wrote it. ``latest`` keeps
each key's last record (the state at a version is the snapshot's records, then every change
after it, last write wins), so only the rows that survive are decoded.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import xxhash

from statelens.analysis.core.errors import NativeUnsupported, StateReadError
from statelens.spark_io.logs.codecs import Cut, decompress
from statelens.spark_io.readers.native import kernels

_STATUS = {
    kernels.CUT: "a record runs past the end of the file (cut short)",
    kernels.BAD_TYPE: "an unknown record type byte",
    kernels.BAD_SIZE: "an impossible key or value size",
    kernels.NO_END: "no end-of-file mark (the file is cut short)",
}


@dataclass
class Records:
    buf: np.ndarray  # uint8
    kind: np.ndarray  # int8: kernels.PUT / DELETE / MERGE
    koff: np.ndarray  # int64
    klen: np.ndarray  # int64
    voff: np.ndarray  # int64
    vlen: np.ndarray  # int64
    version: np.ndarray  # int64: the state version of the file the record came from
    # the keys' 64-bit FNV-1a hashes, once ``key_hashes`` has computed them (a growth's key ids, then
    # its state's dense key codes: the keys hashed once)
    hashed: np.ndarray | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.kind)

    def take(self, idx: np.ndarray) -> Records:
        return Records(
            self.buf,
            self.kind[idx],
            self.koff[idx],
            self.klen[idx],
            self.voff[idx],
            self.vlen[idx],
            self.version[idx],
            None if self.hashed is None else self.hashed[idx],
        )

    def key_hashes(self) -> np.ndarray:
        """The 64-bit FNV-1a hash of each record's key bytes (int64 bits), computed once."""
        if self.hashed is None:
            self.hashed = kernels.byte_hashes(self.buf, self.koff, self.klen)
        return self.hashed

    @staticmethod
    def empty() -> Records:
        z = np.zeros(0, np.int64)
        buf = np.zeros(0, np.uint8)
        buf.flags.writeable = False
        return Records(buf, np.zeros(0, np.int8), z, z, z, z, z)


LZ4_SEED = 0x9747B28C  # lz4-java's block checksum seed, as Spark's LZ4CompressionCodec uses it


def _lz4_checksum(block: bytes | pa.Buffer) -> int:
    return int(xxhash.xxh32_intdigest(memoryview(block), LZ4_SEED))


def decompressed(data: bytes, rel: str) -> bytes:
    """A state file's decompressed bytes; a damaged stream names the file and the byte."""
    try:
        raw, codec = decompress(data, _lz4_checksum)
    except Cut as cut:
        raise StateReadError(f"The state file {rel} is damaged: {cut} (of {len(data):,} bytes).") from cut
    if codec == "none" and data:
        raise NativeUnsupported(
            f"{rel} is not compressed with lz4, zstd or snappy (its first bytes are {data[:8].hex()}): another "
            "spark.sql.streaming.stateStore.compression.codec, which the native reader does not decode"
        )
    return raw


def changelog_header(raw: bytes) -> tuple[int, int, list[tuple[int, str]]]:
    """(changelog format version, where the records start, the lineage) of a RocksDB changelog.

    v1 has no header; v2 and v4 start with ``writeUTF("v2")``; v3 and v4 add the lineage (JSON,
    written with writeUTF) of checkpoint format v2. As in Spark, anything not read as ``v<digits>``
    is a v1 file."""
    if len(raw) >= 2:
        (n,) = struct.unpack_from(">H", raw, 0)
        head = raw[2 : 2 + n]
        if 2 <= n <= 4 and head[:1] == b"v" and head[1:].isdigit():
            version = int(head[1:])
            pos = 2 + n
            lineage: list[tuple[int, str]] = []
            if version >= 3:
                import json

                (m,) = struct.unpack_from(">H", raw, pos)
                items = json.loads(raw[pos + 2 : pos + 2 + m].decode("utf-8"))
                lineage = [(int(i["version"]), str(i["checkpointUniqueId"])) for i in items]
                pos += 2 + m
            if version not in (1, 2, 3, 4):
                raise NativeUnsupported(f"changelog format v{version}")
            return version, pos, lineage
    return 1, 0, []


def _scan(buf: np.ndarray, base: int, start: int, end: int, fmt: int, version: int, rel: str) -> Records:
    """The records of the file at ``buf[base:end]``, from ``base + start``."""
    count, status, where, arrays = kernels.scan_all(buf, base + start, end, fmt)
    if status != kernels.OK:
        raise StateReadError(
            f"The state file {rel} is damaged at byte {where - base} of {end - base:,} decompressed: {_STATUS[status]} "
            f"after {count:,} records."
        )
    kind, koff, klen, voff, vlen = arrays
    return Records(buf, kind, koff, klen, voff, vlen, np.full(count, version, np.int64))


def scan_file(raw: bytes, start: int, fmt: int, version: int, rel: str) -> Records:
    """The records of one decompressed file, over its own bytes (kept apart: ``KeptFiles``)."""
    buf = np.frombuffer(raw, np.uint8) if raw else np.zeros(0, np.uint8)
    buf.flags.writeable = False
    return _scan(buf, 0, start, len(buf), fmt, version, rel)


class Chain:
    """The records of a store's files, oldest first, over one buffer that grows as files are
    added: each file's decompressed bytes are copied in once and scanned where they landed, so the
    files' own buffers and a joined copy of them never coexist (peak memory: the whole plus one file)."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._items: list[tuple[int, Records | tuple[int, int, int, str]]] = []  # base, records or a file span

    def add_file(self, raw: bytes, start: int, fmt: int, version: int, rel: str) -> None:
        self._items.append((len(self._data), (start, fmt, version, rel)))
        self._data += raw

    def add_records(self, rec: Records) -> None:
        """Records decoded elsewhere (a RocksDB snapshot's pairs)."""
        self._items.append((len(self._data), rec))
        self._data += rec.buf.data  # the array's bytes, not copied first

    def records(self, texts: tuple[str, ...] = ()) -> Records:
        """The records of every file, in order. ``texts``: only files whose bytes hold one of them
        are walked (a key holding a text is in no other file: a lookup reads the few that have it)."""
        if len(self._items) == 1 and isinstance(self._items[0][1], Records):
            return self._items[0][1]  # one snapshot: its own buffer, no copy
        buf = np.frombuffer(self._data, np.uint8) if self._data else np.zeros(0, np.uint8)
        buf.flags.writeable = False  # as every buffer the kernels see: one compiled variant each
        ends = [base for base, _ in self._items[1:]] + [len(self._data)]
        needles = [t.encode("utf-8") for t in texts]
        parts = []
        for (base, item), end in zip(self._items, ends, strict=True):
            if isinstance(item, Records):
                parts.append(Records(buf, item.kind, item.koff + base, item.klen, item.voff + base, item.vlen, item.version))
            else:
                start, fmt, version, rel = item
                if needles and all(n and self._data.find(n, base + start, end) < 0 for n in needles):
                    continue  # no record of this file holds a key with one of the texts
                parts.append(_scan(buf, base, start, end, fmt, version, rel))
        return _over(buf, parts)


def _over(buf: np.ndarray, parts: list[Records]) -> Records:
    """Records of several parts that share ``buf``, in order."""
    if not parts:
        return Records.empty()
    if len(parts) == 1:
        return parts[0]
    return Records(
        buf,
        *(np.concatenate([getattr(p, f) for p in parts]) for f in ("kind", "koff", "klen", "voff", "vlen", "version")),
    )


def from_pairs(pairs: list[tuple[bytes, bytes]], version: int) -> Records:
    """Records of (key, value) pairs read from a RocksDB snapshot (all puts)."""
    if not pairs:
        return Records.empty()
    flat = [x for kv in pairs for x in kv]
    lengths = np.fromiter(map(len, flat), np.int64, len(flat))
    starts = np.zeros(len(flat), np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    buf = np.frombuffer(b"".join(flat), np.uint8)
    n = len(pairs)
    koff, klen, voff, vlen = (np.ascontiguousarray(a) for a in (starts[0::2], lengths[0::2], starts[1::2], lengths[1::2]))
    return Records(buf, np.full(n, kernels.PUT, np.int8), koff, klen, voff, vlen, np.full(n, version))


def containing(rec: Records, needles: tuple[str, ...]) -> Records:
    """The records whose key bytes contain one of ``needles`` (UTF-8): a cheap first cut before a
    lookup of text keys; the decoded keys are then compared exactly."""
    if not len(rec) or not needles:
        return rec
    mask = np.zeros(len(rec), np.bool_)
    for needle in needles:
        raw = needle.encode("utf-8")
        if not raw:
            return rec  # every key holds the empty text
        kernels.contains(rec.buf, rec.koff, rec.klen, np.frombuffer(raw, np.uint8), mask)
    return rec.take(np.flatnonzero(mask))


def key_codes(rec: Records) -> tuple[np.ndarray, int]:
    """A dense code per distinct key bytes (equal bytes, equal key: UnsafeRow equality)."""
    codes, n = kernels.dense_codes(rec.buf, rec.koff, rec.klen, rec.hashed)
    return codes, int(n)


def of_deleted_keys(rec: Records) -> Records:
    """The records of the keys that have a delete among them (all that an eviction delay needs)."""
    deletes = rec.kind == kernels.DELETE
    if not deletes.any():
        return rec.take(np.zeros(0, np.int64))
    codes, n = key_codes(rec)
    hit = np.zeros(n, np.bool_)
    hit[codes[deletes]] = True
    return rec.take(np.flatnonzero(hit[codes]))


def latest(rec: Records) -> Records:
    """Each key's last record, deletes dropped: the state after applying the records in order
    (no merges: see ``fold_merges``)."""
    if not len(rec):
        return rec
    codes, n = key_codes(rec)
    last = np.zeros(len(rec), np.bool_)  # each key's last record, in record order
    at = kernels.last_per_code(codes, n)
    last[at[at >= 0]] = True
    live = rec.take(np.flatnonzero(last))
    return live.take(np.nonzero(live.kind != kernels.DELETE)[0])


def fold_merges(rec: Records) -> tuple[Records, np.ndarray]:
    """The state of a store whose values are lists (RocksDB merges append a value): per key its
    values since the last put or delete. Returns (the records that make up the live lists, their
    key code), in order."""
    if not len(rec):
        return rec, np.zeros(0, np.int64)
    codes, n = key_codes(rec)
    resets = np.nonzero(rec.kind != kernels.MERGE)[0]
    last_reset = np.full(n, -1, np.int64)
    if len(resets):
        last_reset = kernels.last_per_code(codes[resets], n)
        last_reset = np.where(last_reset >= 0, resets[np.maximum(last_reset, 0)], -1)
    keep = np.arange(len(rec)) >= last_reset[codes]
    keep &= rec.kind != kernels.DELETE
    idx = np.nonzero(keep)[0]
    return rec.take(idx), codes[idx]
