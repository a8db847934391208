"""Data exports: CSV (nested columns flattened to dotted names) and Parquet (as is)."""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from analysis.errors import ExportError


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


FIGURE_FORMATS = ("png", "svg", "html")


def figure_bytes(fig: Any, fmt: str) -> bytes:
    """A chart as PNG or SVG (kaleido, with the system Chromium) or as a standalone HTML page."""
    if fmt == "html":
        return fig.to_html(full_html=True, include_plotlyjs=True).encode()
    if fmt not in ("png", "svg"):
        raise ExportError(f"Unknown chart format '{fmt}': use png, svg, html or csv.")
    try:
        return bytes(fig.to_image(format=fmt, width=1100, height=fig.layout.height or 450, scale=1 if fmt == "svg" else 2))
    except Exception as e:  # kaleido needs a Chrome/Chromium
        raise ExportError(
            f"Could not render {fmt.upper()} ({str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__}). "
            "PNG and SVG need Chromium (Debian: apt-get install chromium); HTML and CSV work without it."
        ) from e


def to_parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()
