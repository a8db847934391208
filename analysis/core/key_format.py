"""How a diagnosis writes times, durations, values and SQL literals; a state row's event time."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from statelens.analysis.core.errors import InvalidInput

NO_TIME = "no time"  # a time that is not there (a watermark not set yet: 0), as every answer writes it


def fmt_time(ms: int | None) -> str:
    """The one way State Lens writes a time: UTC to the second, with milliseconds where there are some
    (a watermark 1 ms past a window's end is not the end); ``NO_TIME`` for none (or 0: no watermark yet)."""
    if not ms:
        return NO_TIME
    try:
        t = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    except (OverflowError, ValueError, OSError):  # past Python's years 1-9999 (a Spark timestamp reaches further)
        return f"{ms:,} ms since 1970-01-01 UTC"
    return t.strftime("%Y-%m-%d %H:%M:%S") + (f".{ms % 1000:03d}" if ms % 1000 else "") + " UTC"


def to_ms(v: Any) -> int | None:
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.UTC)
        return int(v.timestamp() * 1000)
    return None


def fmt_duration(ms: int) -> str:
    sign = "-" if ms < 0 else ""
    s = abs(ms) // 1000
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{sec}s" if sec or not (h or m) else ""]
    return sign + " ".join(p for p in parts if p)


def jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, decimal.Decimal):
        return str(v)
    return v


def event_time_ms(value: dict[str, Any] | None) -> tuple[str | None, int | None]:
    """The first timestamp field of a state value: the row's event time."""
    for k, v in (value or {}).items():
        ms = to_ms(v)
        if ms is not None:
            return k, ms
    return None, None


def row_time_ms(row: dict[str, Any]) -> int | None:
    """A state row's event time: its value's first timestamp, else its key's window start or
    timestamp field; None when the row carries no time (group state without one, say)."""
    _, ms = event_time_ms(row.get("value") if isinstance(row.get("value"), dict) else None)
    if ms is not None:
        return ms
    key = row.get("key")
    for v in (key or {}).values() if isinstance(key, dict) else []:
        if isinstance(v, dict) and to_ms(v.get("start")) is not None:
            return to_ms(v.get("start"))
        if to_ms(v) is not None:
            return to_ms(v)
    return None


def sql_literal(s: str) -> str:
    """A DuckDB string literal: quotes doubled, nothing else is special."""
    return "'" + s.replace("'", "''") + "'"


def parse_event_time(text: str) -> int:
    """An event time typed by a user: ISO 8601 (UTC unless it says otherwise) or epoch milliseconds."""
    raw = text.strip()
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        t = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"'{text}' is not an event time: write it like 2026-01-01T00:07:15 (UTC), 2026-01-01 00:07:15+02:00 "
            "or as epoch milliseconds."
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return int(t.timestamp() * 1000)
