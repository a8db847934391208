"""Arrow columns as numpy arrays read straight from their buffers.

pyarrow's own ``to_numpy`` imports pandas on first use (about 0.3 s), which a command that
answers in about a second cannot afford. Only fixed-width columns (integers, floats, booleans,
timestamps, dates) are read here; nulls must have been filled or be irrelevant to the caller.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def numpy_of(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
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
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
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
