"""Spark's ``UnsafeRow`` decoded into Arrow, a column at a time.

An UnsafeRow of n fields is a null bit set (``ceil(n / 64)`` 8-byte words), one 8-byte slot per
field, then a variable part. Fixed-width values sit in their slot (little endian); strings,
binaries, long decimals and nested structs put ``offset << 32 | size`` in the slot, the offset
counted from the row's start. Rows are addressed by their start (``base``) and length in one
byte buffer, so every field of every row is decoded by one compiled loop (``kernels``).

Types are Spark's JSON schema (the state schema files); the Arrow types are those Spark's own
``toArrow`` gives (timestamps in UTC microseconds, every field nullable).
"""

from __future__ import annotations

import decimal
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from statelens.analysis.core.arrow_numpy import arrow_of, struct_array
from statelens.analysis.core.errors import NativeUnsupported
from statelens.spark_io.readers.native import kernels

_FIXED = {
    "boolean": (1, pa.bool_()),
    "byte": (1, pa.int8()),
    "short": (2, pa.int16()),
    "integer": (4, pa.int32()),
    "int": (4, pa.int32()),
    "long": (8, pa.int64()),
    "bigint": (8, pa.int64()),
    "float": (4, pa.float32()),
    "double": (8, pa.float64()),
    "date": (4, pa.date32()),
    "timestamp": (8, pa.timestamp("us", tz="UTC")),
    "timestamp_ntz": (8, pa.timestamp("us")),
}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(-?\d+)\)")
_TEXT = re.compile(r"^(string|char\(\d+\)|varchar\(\d+\))( collate .*)?$")


class Undecodable(NativeUnsupported):
    """A type or a layout this decoder does not read (said in the message)."""


class Damaged(Exception):
    """Rows whose bytes contradict their schema: ``row`` is the first such row (its index)."""

    def __init__(self, message: str, row: int) -> None:
        super().__init__(message)
        self.row = row


def arrow_type(t: Any) -> pa.DataType:
    """The Arrow type Spark's ``toArrow`` gives for a Spark JSON type; Undecodable if unsupported."""
    if isinstance(t, dict):
        if t.get("type") == "struct":
            return pa.struct([pa.field(f["name"], arrow_type(f["type"]), True) for f in unique_fields(t["fields"])])
        raise Undecodable(f"the type {t.get('type')} (arrays, maps and user-defined types are read by Spark)")
    name = str(t).lower()
    if name in _FIXED:
        return _FIXED[name][1]
    if _TEXT.match(name):
        return pa.string()
    if name == "binary":
        return pa.binary()
    if name in ("void", "null"):
        return pa.null()
    m = _DECIMAL.fullmatch(name)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    if name == "decimal":
        return pa.decimal128(10, 0)
    raise Undecodable(f"the type {t}")


def unique_fields(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fields with repeated names numbered (``name_1``), as State Lens reads them through Spark too."""
    seen: dict[str, int] = {}
    out = []
    for f in fields:
        n = seen.get(f["name"], 0)
        seen[f["name"]] = n + 1
        out.append(f if n == 0 else {**f, "name": f"{f['name']}_{n}"})
    return out


@dataclass
class Rows:
    """UnsafeRows in ``buf``: row i starts at ``base[i]`` and is ``size[i]`` bytes; ``keep[i]`` is
    False for rows that are absent (a null parent struct, a delete's value)."""

    buf: np.ndarray
    base: np.ndarray
    size: np.ndarray
    keep: np.ndarray


def decode(rows: Rows, fields: list[dict[str, Any]], only: frozenset[str] | None = None) -> pa.StructArray:
    """The rows as one Arrow struct column of the fields (null where not ``keep``); ``only``: of
    these fields only (the others are not decoded)."""
    fields = unique_fields(fields)
    bitset = ((len(fields) + 63) // 64) * 8
    end = rows.base + rows.size
    fixed_end = rows.base + bitset + 8 * len(fields)
    bad = kernels.check_within(rows.base, fixed_end - rows.base, rows.base, end, rows.keep)
    if bad >= 0:
        raise Damaged(f"a row of {rows.size[bad]} bytes is shorter than its {len(fields)} fields need", int(bad))
    children = []
    wanted = [(i, f) for i, f in enumerate(fields) if only is None or f["name"] in only]
    for i, f in wanted:
        is_null = kernels.null_bits(rows.buf, rows.base, i, rows.keep)
        present = rows.keep & ~is_null
        slot = rows.base + bitset + 8 * i
        children.append(_column(rows, f["type"], slot, present, end, f["name"]))
    return struct_array(children, [f["name"] for _, f in wanted], np.asarray(rows.keep, np.bool_))


def _validity(present: np.ndarray) -> pa.Buffer | None:
    return None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))


def _column(rows: Rows, t: Any, slot: np.ndarray, present: np.ndarray, end: np.ndarray, name: str) -> pa.Array:
    at = arrow_type(t)
    n = len(slot)
    if pa.types.is_null(at):
        return pa.nulls(n)
    if pa.types.is_struct(at):
        word = kernels.gather_le(rows.buf, slot, 8, present)
        off, size = rows.base + (word >> 32), word & 0xFFFFFFFF
        bad = kernels.check_within(off, size, rows.base, end, present)
        if bad >= 0:
            raise Damaged(f"field {name} points outside its row", int(bad))
        return decode(Rows(rows.buf, np.where(present, off, 0), size, present), t["fields"])
    if pa.types.is_string(at) or pa.types.is_binary(at) or (pa.types.is_decimal(at) and at.precision > 18):
        word = kernels.gather_le(rows.buf, slot, 8, present)
        off, size = rows.base + (word >> 32), word & 0xFFFFFFFF
        bad = kernels.check_within(off, size, rows.base, end, present)
        if bad >= 0:
            raise Damaged(f"field {name} points outside its row", int(bad))
        offsets, data = kernels.gather_bytes(rows.buf, off, size, present)
        if pa.types.is_decimal(at):
            return _long_decimals(offsets, data, present, at)
        big = offsets[-1] > 2**31 - 1
        arrow_offsets = pa.py_buffer(offsets if big else offsets.astype(np.int32))
        kind = (
            (pa.large_string() if big else pa.string()) if pa.types.is_string(at) else (pa.large_binary() if big else pa.binary())
        )
        return pa.Array.from_buffers(kind, n, [_validity(present), arrow_offsets, pa.py_buffer(data)])
    if pa.types.is_decimal(at):  # precision <= 18: the unscaled long in the slot
        unscaled = kernels.gather_le(rows.buf, slot, 8, present)
        words = np.empty((n, 2), np.int64)
        words[:, 0] = unscaled
        words[:, 1] = unscaled >> 63
        return pa.Array.from_buffers(at, n, [_validity(present), pa.py_buffer(words)])
    width = _FIXED[str(t).lower()][0]
    raw = kernels.gather_le(rows.buf, slot, width, present)
    if pa.types.is_boolean(at):
        values: np.ndarray = raw != 0
    elif pa.types.is_float32(at):
        values = raw.astype(np.int32).view(np.float32)
    elif pa.types.is_float64(at):
        values = raw.view(np.float64)
    elif pa.types.is_date(at):
        values = raw.astype(np.int32)
    elif pa.types.is_timestamp(at):
        values = raw
    else:  # signed integers of 1, 2, 4 or 8 bytes
        values = raw.astype(np.dtype(f"i{at.bit_width // 8}"))
    return arrow_of(values, at, present)


def _long_decimals(offsets: np.ndarray, data: np.ndarray, present: np.ndarray, at: pa.Decimal128Type) -> pa.Array:
    """Decimals of more than 18 digits: Java's BigInteger bytes (big-endian two's complement) of
    the unscaled value. Rare in state; decoded per value."""
    raw = data.tobytes()
    out: list[decimal.Decimal | None] = []
    for i in range(len(present)):
        if not present[i]:
            out.append(None)
            continue
        unscaled = int.from_bytes(raw[offsets[i] : offsets[i + 1]], "big", signed=True)
        out.append(decimal.Decimal(unscaled).scaleb(-at.scale))
    return pa.array(out, at)
