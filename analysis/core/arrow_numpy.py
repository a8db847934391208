"""Arrow columns as numpy arrays read straight from their buffers, and Arrow's kernels called without
importing ``pyarrow.compute`` (``kernel``).

pyarrow's own ``to_numpy`` imports pandas on first use (about 0.3 s), which a command that
answers in about a second cannot afford. Only fixed-width columns (integers, floats, booleans,
timestamps, dates) are read here; nulls must have been filled or be irrelevant to the caller.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa


class _Compute:
    """``pyarrow.compute``, imported on first use: importing it builds a Python function for each of
    its kernels (40-50 ms), a seventh of a one-key lookup, which calls the few it needs by name
    (``kernel``). pyarrow's own ``cast``, ``filter`` and ``take`` methods import it too."""

    def __getattr__(self, name: str) -> Any:
        import pyarrow.compute

        return getattr(pyarrow.compute, name)


pc: Any = _Compute()


def kernel(name: str, *args: Any, options: Any = None) -> Any:
    """Arrow's compute kernel ``name`` over ``args``, called through pyarrow's core module (about
    10 ms to import) instead of ``pyarrow.compute``."""
    from pyarrow import _compute

    return _compute.call_function(name, list(args), options)


def struct_field(column: Any, name: str) -> Any:
    """A struct column's field (``pc.struct_field``)."""
    from pyarrow import _compute

    return kernel("struct_field", column, options=_compute.StructFieldOptions([name]))


def cast(column: Any, to: pa.DataType) -> Any:
    """``column.cast(to)`` (a safe cast)."""
    from pyarrow import _compute

    return kernel("cast", column, options=_compute.CastOptions.safe(to))


def is_in(column: Any, values: pa.Array) -> Any:
    """``pc.is_in(column, value_set=values)``."""
    from pyarrow import _compute

    return kernel("is_in", column, options=_compute.SetLookupOptions(values))


def struct_array(children: list[pa.Array], names: list[str], valid: np.ndarray) -> pa.StructArray:
    """``pa.StructArray.from_arrays(children, names, mask=~valid)``, null where not ``valid``, from its
    buffers (``from_arrays`` inverts a mask with ``pyarrow.compute``)."""
    bitmap = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    fields = [pa.field(name, c.type) for name, c in zip(names, children, strict=True)]
    return pa.Array.from_buffers(pa.struct(fields), len(valid), [bitmap], children=children)  # type: ignore[return-value]


def filtered(table: pa.Table, mask: Any) -> pa.Table:
    """``table.filter(mask)`` (a null in the mask drops its row)."""
    return kernel("filter", table, mask)  # type: ignore[no-any-return]


def one_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column as one array (``combine_chunks`` of no chunks imports pandas: 0.5 s of a process)."""
    if not isinstance(column, pa.ChunkedArray):
        return column
    if column.num_chunks == 1:
        return column.chunk(0)
    if column.num_chunks:
        return column.combine_chunks()
    t = column.type
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return pa.Array.from_buffers(t, 0, [None, pa.py_buffer(np.zeros(1, np.int32)), pa.py_buffer(b"")])
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return pa.Array.from_buffers(t, 0, [None, pa.py_buffer(np.zeros(1, np.int64)), pa.py_buffer(b"")])
    if pa.types.is_primitive(t):
        return pa.Array.from_buffers(t, 0, [None, pa.py_buffer(b"")])
    return pa.nulls(0, t)


def numpy_of(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    column = one_array(column)
    t = column.type
    if isinstance(t, pa.DictionaryType):
        raise TypeError("dictionary columns: read their indices")
    data = column.buffers()[1]
    n, offset = len(column), column.offset
    if pa.types.is_boolean(t):
        if data is None or n == 0:
            return np.zeros(n, np.bool_)
        bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
        return bits[offset : offset + n].astype(np.bool_)
    if pa.types.is_integer(t):
        dtype = np.dtype(f"{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}")
    elif pa.types.is_floating(t):
        dtype = np.dtype(f"f{t.bit_width // 8}")
    elif pa.types.is_timestamp(t) or pa.types.is_date64(t) or pa.types.is_duration(t):
        dtype = np.dtype("i8")
    elif pa.types.is_date32(t):
        dtype = np.dtype("i4")
    else:
        raise TypeError(f"not a fixed-width column: {t}")
    if data is None or n == 0:
        return np.zeros(n, dtype)
    return np.frombuffer(data, dtype, count=n, offset=offset * dtype.itemsize)


def numpy_filled(column: pa.Array | pa.ChunkedArray, fill: int | bool) -> np.ndarray:
    """``numpy_of`` with ``fill`` where the column is null (``pc.fill_null`` with a Python value
    makes a pyarrow scalar, which imports pandas)."""
    values = numpy_of(column)
    if column.null_count:
        values = np.where(numpy_of(column.is_valid()), values, fill)
    return values


def arrow_of(values: np.ndarray, type_: pa.DataType, valid: np.ndarray | None = None) -> pa.Array:
    """A fixed-width numpy array as an Arrow array of ``type_`` (the same bytes; booleans packed),
    null where ``valid`` is False."""
    n = len(values)
    validity = None if valid is None or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    if pa.types.is_boolean(type_):
        data = pa.py_buffer(np.packbits(values.astype(np.bool_), bitorder="little"))
    else:
        data = pa.py_buffer(np.ascontiguousarray(values))
    return pa.Array.from_buffers(type_, n, [validity, data])


def string_array(words: list[str]) -> pa.Array:
    """A string array built from its buffers (``pa.array`` of a list imports pandas on first use)."""
    encoded = [w.encode("utf-8") for w in words]
    offsets = np.cumsum([0] + [len(e) for e in encoded]).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), len(words), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def _byte_table(keep: bytes, lower: bool = False) -> np.ndarray:
    table = np.zeros(256, np.uint8)
    for b in keep:
        table[b] = ord(chr(b).lower()) if lower else b
    return table


DIGITS = _byte_table(b"0123456789")
ALNUM_LOWER = _byte_table(b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", lower=True)


def translate_ascii(column: pa.Array | pa.ChunkedArray, table: np.ndarray) -> pa.Array:
    """Each string with every byte ``b`` replaced by ``table[b]`` and the bytes mapped to 0 dropped,
    in one pass over the string data. With tables that keep ASCII bytes only (``DIGITS``,
    ``ALNUM_LOWER``) a character of several bytes is dropped whole, so the result is valid UTF-8 and
    equals removing ``[^0-9]`` (or ``[^0-9A-Za-z]``, then lower-casing) with a regular expression."""
    column = one_array(column)
    large = pa.types.is_large_string(column.type)
    if not (large or pa.types.is_string(column.type)):
        raise TypeError(f"not a string column: {column.type}")
    n = len(column)
    buffers = column.buffers()
    offsets = np.frombuffer(buffers[1], np.int64 if large else np.int32, count=n + 1, offset=column.offset * (8 if large else 4))
    start, end = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(buffers[2], np.uint8)[start:end] if buffers[2] is not None else np.zeros(0, np.uint8)
    mapped = table[data]
    kept = mapped != 0
    # bytes kept per string: summed over each non-empty string's run (an empty one keeps none);
    # per string, not per byte, so no array of the data's length but the two above
    starts, lengths = offsets[:-1] - start, np.diff(offsets)
    counts = np.zeros(n, np.int64)
    filled = lengths > 0
    if filled.any():  # summed as 16 bits where no string is longer (4x faster than 64)
        wide = np.int64 if lengths.max() >= 1 << 16 else np.uint16
        counts[filled] = np.add.reduceat(kept.view(np.uint8), starts[filled].astype(np.intp), dtype=wide)
    new_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=new_offsets[1:])
    valid = numpy_of(column.is_valid()) if column.null_count else None
    validity = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.large_string(), n, [validity, pa.py_buffer(new_offsets), pa.py_buffer(np.ascontiguousarray(mapped[kept]))]
    )


# --------------------------------------------------------------------------- rows without pandas


def rows_of(table: pa.Table) -> list[dict[str, Any]]:
    """``table.to_pylist()``, with time-zone-aware timestamps (top level or nested) read without pyarrow
    importing pandas for their zone (about 0.5 s in a whole process): read as naive UTC, then given
    their zone back."""
    naive, zones = _without_zones(table.schema)
    if not zones:
        return table.to_pylist()
    rows = pa.Table.from_arrays([cast(c, f.type) for c, f in zip(table.columns, naive, strict=True)], schema=naive).to_pylist()
    for r in rows:
        _zoned(r, zones)
    return rows


def _strip(t: pa.DataType) -> tuple[pa.DataType, Any]:
    """A type without time zones, and where they were: a zone name, or a nested map of them."""
    if pa.types.is_timestamp(t) and t.tz is not None:
        return pa.timestamp(t.unit), t.tz
    if pa.types.is_struct(t):
        fields, zones = [], {}
        for f in t:
            ft, z = _strip(f.type)
            fields.append(pa.field(f.name, ft, f.nullable, f.metadata))
            if z is not None:
                zones[f.name] = z
        return (pa.struct(fields), zones) if zones else (t, None)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        vt, z = _strip(t.value_type)
        if z is None:
            return t, None
        return (pa.list_(vt) if pa.types.is_list(t) else pa.large_list(vt)), ("list", z)
    return t, None


def _without_zones(schema: pa.Schema) -> tuple[pa.Schema, dict[str, Any]]:
    fields, zones = [], {}
    for f in schema:
        ft, z = _strip(f.type)
        fields.append(pa.field(f.name, ft, f.nullable, f.metadata))
        if z is not None:
            zones[f.name] = z
    return pa.schema(fields, schema.metadata), zones


def _zone_of(name: str) -> dt.tzinfo:
    if name.upper() in ("UTC", "ETC/UTC", "Z", "+00:00", "GMT"):
        return dt.UTC
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError):
        return dt.UTC


def _zoned(row: dict[str, Any], zones: dict[str, Any]) -> None:
    for name, z in zones.items():
        v = row.get(name)
        if v is None:
            continue
        if isinstance(z, str):
            tz = _zone_of(z)
            row[name] = v.replace(tzinfo=dt.UTC) if tz is dt.UTC else v.replace(tzinfo=dt.UTC).astimezone(tz)
        elif isinstance(z, dict):
            _zoned(v, z)
        else:  # a list of them
            for i, item in enumerate(v):
                if item is None:
                    continue
                if isinstance(z[1], str):
                    v[i] = item.replace(tzinfo=dt.UTC).astimezone(_zone_of(z[1]))
                else:
                    _zoned(item, z[1])
