"""Data exports: CSV (nested columns flattened to dotted names) and Parquet (as is)."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq


def flatten_all(table: pa.Table) -> pa.Table:
    """Struct columns become ``a.b.c`` columns; lists and maps become JSON text."""
    while any(pa.types.is_struct(t) for t in table.schema.types):
        table = table.flatten()
    cols, names = [], []
    for name, col in zip(table.column_names, table.columns, strict=True):
        t = col.type
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
            col = pa.array([None if v is None else json.dumps(v, default=str) for v in col.to_pylist()], pa.string())
        elif pa.types.is_null(t):
            col = pc.cast(col, pa.string())
        cols.append(col)
        names.append(name)
    return pa.table(cols, names=names)


def to_csv_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pacsv.write_csv(flatten_all(table), buf)
    return buf.getvalue()


def to_parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()
