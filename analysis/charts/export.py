"""Data exports: CSV (nested columns flattened to dotted names) and Parquet (as is)."""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from statelens.analysis.core.errors import ExportError


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

    def render() -> Any:
        return fig.to_image(format=fmt, width=1100, height=fig.layout.height or 450, scale=1 if fmt == "svg" else 2)

    for _ in range(RENDER_TRIES):
        try:
            out = _within(RENDER_SECONDS, render)
        except Exception as e:  # kaleido needs a Chrome/Chromium
            raise ExportError(
                f"Could not render {fmt.upper()} ({str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__}). "
                "PNG and SVG need Chromium (Debian: apt-get install chromium); HTML and CSV work without it."
            ) from e
        if out is not None:
            return bytes(out)
    raise ExportError(
        f"Could not render {fmt.upper()}: Chromium did not answer in {RENDER_SECONDS:.0f} s, {RENDER_TRIES} times. "
        "Try again when the machine is less busy; HTML and CSV do not need Chromium."
    )


RENDER_SECONDS = 90.0  # one render, as kaleido limits it (its limit does not cover Chromium's start, which can hang)
RENDER_TRIES = 2  # a hung Chromium is left behind; the next try starts another


def _within(seconds: float, fn: Any) -> Any:
    """``fn()``'s result, or None when it has not returned in ``seconds`` (it runs on in a daemon
    thread, which ends with the process); its exception is raised here."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["out"] = fn()
        except Exception as e:
            box["error"] = e

    t = threading.Thread(target=run, daemon=True, name="statelens-render")
    t.start()
    t.join(seconds)
    if "error" in box:
        raise box["error"]
    return box.get("out")


def to_parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


# epoch milliseconds between 2000-01-01 and 2200-01-01: a time, not a count
_MS_RANGE = (946_684_800_000, 7_258_118_400_000)


def _is_ms_name(name: str) -> bool:
    n = name.lower().rsplit(".", 1)[-1]
    return n.endswith(("_ms", "timestampms", "timestamp"))  # last_event_ms, expiration_timestamp_ms, timeoutTimestamp


def with_readable_times(table: pa.Table, tz: str = "UTC") -> pa.Table:
    """The table with a readable time column after each epoch-millisecond column (timers'
    ``expiration_timestamp_ms``, TTL expiries, ``last_event_ms`` in a state value ...), nested
    fields included: ``value.last_event_ms`` gets ``value.last_event_ms (time)``. Only integer
    columns named like milliseconds whose values are plausible dates get one."""
    flat = table
    while any(pa.types.is_struct(t) for t in flat.schema.types):
        flat = flat.flatten()
    extra: dict[str, pa.Array] = {}
    for name, col in zip(flat.column_names, flat.columns, strict=True):
        if not (pa.types.is_integer(col.type) and _is_ms_name(name)):
            continue
        valid = pc.drop_null(col)
        if len(valid) == 0:
            continue
        lo, hi = pc.min(valid).as_py(), pc.max(valid).as_py()
        if lo < _MS_RANGE[0] or hi > _MS_RANGE[1]:
            continue
        extra[name] = pc.cast(pc.cast(col, pa.int64()), pa.timestamp("ms", tz=tz))
    if not extra:
        return table
    out = table
    for name, times in reversed(extra.items()):  # inserted right after their column, in field order
        top = name.split(".", 1)[0]
        out = out.add_column(out.column_names.index(top) + 1, f"{name} (time)", times)
    return out


def ms_times(row: dict[str, Any], tz: str = "UTC") -> dict[str, Any]:
    """For one evidence row: a readable time for each epoch-millisecond field, top level or nested
    in its value (``expiration_timestamp_ms``, ``value.groupState.last_event_ms`` ...), keyed
    ``<name> (time)``."""
    import datetime as dt
    import zoneinfo

    fields: list[tuple[str, Any]] = []

    def walk(prefix: str, d: dict[str, Any]) -> None:
        for k, v in d.items():
            if isinstance(v, dict):
                walk(f"{prefix}{k}.", v)
            else:
                fields.append((f"{prefix}{k}", v))

    walk("", {k: v for k, v in row.items() if k != "key"})
    out: dict[str, Any] = {}
    for name, v in fields:
        if isinstance(v, int) and not isinstance(v, bool) and _is_ms_name(name) and _MS_RANGE[0] <= v <= _MS_RANGE[1]:
            out[f"{name} (time)"] = dt.datetime.fromtimestamp(v / 1000, zoneinfo.ZoneInfo(tz))
    return out


def display_table(table: pa.Table, tz: str = "UTC") -> pa.Table:
    """A state table as a grid shows it readably: every nested field its own column
    (``key.window.start``, ``key.user_id``: no key cut at the grid's width), timestamps in ``tz``
    (a window's bounds as times, never epoch milliseconds), and a readable time beside each
    epoch-millisecond field."""
    flat = flatten_all(table)
    cols = []
    for col in flat.columns:
        if pa.types.is_timestamp(col.type):
            col = pc.cast(col, pa.timestamp(col.type.unit, tz=tz))
        cols.append(col)
    return with_readable_times(pa.table(cols, names=flat.column_names), tz)


def display_rows(rows: list[dict[str, Any]], tz: str = "UTC") -> list[dict[str, Any]]:
    """Evidence rows as a grid shows them: nested fields as ``key.user_id`` columns, times in ``tz``,
    lists as JSON, and a readable time beside each epoch-millisecond field."""
    import datetime as dt
    import zoneinfo

    zone = zoneinfo.ZoneInfo(tz)
    out = []
    for row in rows:
        flat: dict[str, Any] = {}

        def walk(prefix: str, d: dict[str, Any], flat: dict[str, Any] = flat) -> None:
            for k, v in d.items():
                if isinstance(v, dict):
                    walk(f"{prefix}{k}.", v)
                elif isinstance(v, dt.datetime):
                    flat[f"{prefix}{k}"] = (v if v.tzinfo else v.replace(tzinfo=dt.UTC)).astimezone(zone)
                elif isinstance(v, (list, tuple)):
                    flat[f"{prefix}{k}"] = json.dumps(v, default=str)
                else:
                    flat[f"{prefix}{k}"] = v

        walk("", row)
        out.append(flat | ms_times(row, tz))
    return out


def arrow_schema_rows(table: pa.Table) -> list[dict[str, Any]]:
    """A flat description of a (nested) Arrow schema: one row per field path."""
    rows: list[dict[str, Any]] = []

    def walk(prefix: str, t: pa.DataType, nullable: bool) -> None:
        rows.append({"column": prefix, "type": str(t), "nullable": nullable})
        if pa.types.is_struct(t):
            for f in t:
                walk(f"{prefix}.{f.name}", f.type, f.nullable)

    for f in table.schema:
        walk(f.name, f.type, f.nullable)
    return rows
