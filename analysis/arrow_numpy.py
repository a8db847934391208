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
