"""The state partition of a key, as Spark computes it: ``pmod(hash(key), numPartitions)`` with
Spark's Murmur3 x86_32 (seed 42), for a key of one field. Checked against every row's
``partition_id`` of every sample (``tests/test_native_engine.py``)."""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any

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
