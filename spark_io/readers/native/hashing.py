"""The state partition of a key, as Spark computes it: ``pmod(hash(key), numPartitions)`` with
Spark's Murmur3 x86_32 (seed 42), for a key of one field. Checked against every row's
``partition_id`` of every sample (``tests/test_native_engine.py``)."""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any

import numpy as np
import pyarrow as pa

_C1, _C2, _M = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
SEED = 42


def _mix_k1(k: int) -> int:
    k = (k * _C1) & _M
    k = ((k << 15) | (k >> 17)) & _M
    return (k * _C2) & _M


def _mix_h1(h: int, k: int) -> int:
    h ^= k
    h = ((h << 13) | (h >> 19)) & _M
    return (h * 5 + 0xE6546B64) & _M


def _fmix(h: int, length: int) -> int:
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M
    return h ^ (h >> 16)


def hash_int(v: int, seed: int = SEED) -> int:
    return _fmix(_mix_h1(seed, _mix_k1(v & _M)), 4)


def hash_long(v: int, seed: int = SEED) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    h = _mix_h1(seed, _mix_k1(v & _M))
    h = _mix_h1(h, _mix_k1(v >> 32))
    return _fmix(h, 8)


def hash_bytes(data: bytes, seed: int = SEED) -> int:
    """Spark's ``hashUnsafeBytes``: 4-byte little-endian words, then each remaining byte (signed) alone."""
    aligned = len(data) - len(data) % 4
    h = seed
    for (word,) in struct.iter_unpack("<I", data[:aligned]):
        h = _mix_h1(h, _mix_k1(word))
    for b in data[aligned:]:
        h = _mix_h1(h, _mix_k1((b - 256 if b > 127 else b) & _M))
    return _fmix(h, len(data))


def spark_hash(value: Any, type_name: str) -> int | None:
    """Spark's ``hash(value)`` (a signed int) for a Spark simple type name; None if not computed here."""
    t = type_name.lower()
    if value is None:
        return SEED
    if t == "string":
        h = hash_bytes(str(value).encode("utf-8"))
    elif t in ("int", "integer", "smallint", "short", "tinyint", "byte"):
        h = hash_int(int(value))
    elif t in ("bigint", "long"):
        h = hash_long(int(value))
    elif t == "boolean":
        h = hash_int(1 if value else 0)
    elif t == "double":
        f = float(value)
        h = hash_long(struct.unpack("<q", struct.pack("<d", 0.0 if f == 0 else f))[0])
    elif t == "float":
        f = float(value)
        h = hash_int(struct.unpack("<i", struct.pack("<f", 0.0 if f == 0 else f))[0])
    elif t == "date" and isinstance(value, dt.date):
        h = hash_int((value - dt.date(1970, 1, 1)).days)
    elif t.startswith("timestamp") and isinstance(value, dt.datetime):
        v = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        h = hash_long((v - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1))
    elif t.startswith("decimal") and isinstance(value, decimal.Decimal):
        precision, scale = (int(x) for x in t[t.index("(") + 1 : -1].split(","))
        if precision > 18:
            return None
        h = hash_long(int(value.scaleb(scale).to_integral_value()))
    else:
        return None
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_of(value: Any, type_name: str, num_partitions: int) -> int | None:
    h = spark_hash(value, type_name)
    return None if h is None else h % num_partitions  # Python's % is Spark's pmod for a positive divisor


# --------------------------------------------------------------------------- whole keys, vectorized

_U32 = np.uint32


def _v_mix_k1(k: np.ndarray) -> np.ndarray:
    k = k * _U32(_C1)
    k = (k << _U32(15)) | (k >> _U32(17))
    return k * _U32(_C2)


def _v_mix_h1(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    h = h ^ k
    h = (h << _U32(13)) | (h >> _U32(19))
    return h * _U32(5) + _U32(0xE6546B64)


def _v_fmix(h: np.ndarray, length: np.ndarray | int) -> np.ndarray:
    h = h ^ np.asarray(length, dtype=np.uint32)
    h = h ^ (h >> _U32(16))
    h = h * _U32(0x85EBCA6B)
    h = h ^ (h >> _U32(13))
    h = h * _U32(0xC2B2AE35)
    return h ^ (h >> _U32(16))


def _v_int(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    return _v_fmix(_v_mix_h1(seed, _v_mix_k1(values.astype(np.int64).astype(np.uint32))), 4)


def _v_long(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64).view(np.uint64)
    h = _v_mix_h1(seed, _v_mix_k1((v & np.uint64(0xFFFFFFFF)).astype(np.uint32)))
    h = _v_mix_h1(h, _v_mix_k1((v >> np.uint64(32)).astype(np.uint32)))
    return _v_fmix(h, 8)


def _v_bytes(column: pa.Array, seed: np.ndarray) -> np.ndarray:
    """Spark's ``hashUnsafeBytes`` of every value, each with its own seed (4-byte words, then single bytes)."""
    col = column.cast(pa.large_binary()) if not pa.types.is_large_binary(column.type) else column
    offsets = np.frombuffer(col.buffers()[1], dtype=np.int64)[col.offset : col.offset + len(col) + 1]
    data = np.frombuffer(col.buffers()[2], dtype=np.uint8) if col.buffers()[2] is not None else np.zeros(0, np.uint8)
    start, length = offsets[:-1], offsets[1:] - offsets[:-1]
    h = seed.copy()
    words = length // 4
    padded = np.concatenate([data, np.zeros(8, np.uint8)])
    for w in range(int(words.max(initial=0))):
        rows = np.nonzero(words > w)[0]
        at = start[rows] + 4 * w
        word = (
            padded[at].astype(np.uint32)
            | (padded[at + 1].astype(np.uint32) << _U32(8))
            | (padded[at + 2].astype(np.uint32) << _U32(16))
            | (padded[at + 3].astype(np.uint32) << _U32(24))
        )
        h[rows] = _v_mix_h1(h[rows], _v_mix_k1(word))
    for t in range(3):
        rows = np.nonzero(length - words * 4 > t)[0]
        signed = padded[start[rows] + words[rows] * 4 + t].astype(np.int8).astype(np.int32).astype(np.uint32)
        h[rows] = _v_mix_h1(h[rows], _v_mix_k1(signed))
    return _v_fmix(h, length.astype(np.uint32))


def _v_hash(column: pa.Array, seed: np.ndarray) -> np.ndarray | None:
    """Spark's ``hash`` of a column, each row continuing from its seed (a null keeps the seed)."""
    t = column.type
    if pa.types.is_struct(t):
        h = seed
        for i in range(t.num_fields):
            got = _v_hash(column.field(i), h)
            if got is None:
                return None
            h = got
        return np.where(np.asarray(column.is_valid()), h, seed) if column.null_count else h
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        out = _v_bytes(column, seed)
    elif pa.types.is_boolean(t):
        out = _v_int(np.asarray(column.fill_null(False)).astype(np.int64), seed)
    elif (pa.types.is_integer(t) and t.bit_width <= 32) or pa.types.is_date32(t):
        as_int = column.cast(pa.int32()) if pa.types.is_date32(t) else column
        out = _v_int(np.asarray(as_int.cast(pa.int64()).fill_null(0)), seed)
    elif pa.types.is_int64(t) or pa.types.is_timestamp(t):
        if pa.types.is_timestamp(t) and t.unit != "us":
            column = column.cast(pa.timestamp("us", t.tz))
        out = _v_long(np.asarray(column.cast(pa.int64()).fill_null(0)), seed)
    elif pa.types.is_float64(t):
        v = np.asarray(column.fill_null(0.0)).astype(np.float64)
        v = np.where(v == 0, 0.0, v)
        out = _v_long(np.where(np.isnan(v), np.float64("nan"), v).view(np.int64), seed)
    elif pa.types.is_float32(t):
        v = np.asarray(column.fill_null(0.0)).astype(np.float32)
        v = np.where(v == 0, np.float32(0.0), v)
        out = _v_int(v.view(np.int32).astype(np.int64), seed)
    else:  # decimals, lists, maps ...: not computed here
        return None
    return np.where(np.asarray(column.is_valid()), out, seed) if column.null_count else out


def key_hashes(
    key: pa.Array | pa.ChunkedArray, fields: int | None = None, skip: frozenset[str] = frozenset()
) -> np.ndarray | None:
    """Spark's ``hash(key fields...)`` per row (a signed int64 of the int32), as the hash partitioning
    of a stateful operator computes it (Murmur3, seed 42, the fields in order); ``fields``: only the
    first ones (a prefix key); ``skip``: fields that are not the shuffle's (a join row's index). None
    when a field's type is not computed here."""
    arr = key.combine_chunks() if isinstance(key, pa.ChunkedArray) else key
    if not pa.types.is_struct(arr.type):
        return None
    h = np.full(len(arr), SEED, dtype=np.uint32)
    for i in range(arr.type.num_fields if fields is None else fields):
        if arr.type.field(i).name in skip:
            continue
        got = _v_hash(arr.field(i), h)
        if got is None:
            return None
        h = got
    return h.view(np.int32).astype(np.int64)


def key_partitions(
    key: pa.Array | pa.ChunkedArray, num_partitions: int, fields: int | None = None, skip: frozenset[str] = frozenset()
) -> np.ndarray | None:
    """``pmod(hash(key fields...), num_partitions)`` per row (see ``key_hashes``)."""
    h = key_hashes(key, fields, skip)
    return None if h is None else h % num_partitions  # numpy's % of a positive divisor is Spark's pmod
