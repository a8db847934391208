"""A key's records in the query's input: what ``spark_io.gather.inputs`` finds in the files each batch read.

Pure: the record, the search's result (what was searched, what could not be and why), an input
value read as Spark reads an event time, and the plan's filters evaluated on a record where they
are simple enough to evaluate (comparisons, ``IN``, null checks, ``AND``/``OR``/``NOT``).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from analysis.key_format import jsonable
from analysis.query_plan import strip_parens


@dataclass(frozen=True)
class InputRecord:
    """One record of an input file that holds the key (or a near miss of it)."""

    key: str  # the user's key it answers
    source: str  # the source's name (its folder)
    source_index: int  # sources/<n>/ of the checkpoint
    batch_id: int | None  # the batch that read its file (None: the file's batch was purged)
    file: str  # the file as the source's log lists it
    row: int  # 1-based position in the file
    column: str  # the column that holds the key
    values: dict[str, Any] = field(hash=False, compare=False)
    near: str | None = None  # why it looks like the key when it is not the key exactly

    @property
    def file_name(self) -> str:
        return self.file.rsplit("/", 1)[-1]

    def where(self) -> str:
        return f"{self.file_name}, row {self.row}" + (f" (batch {self.batch_id})" if self.batch_id is not None else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "batch_id": self.batch_id,
            "file": self.file,
            "row": self.row,
            "column": self.column,
            "values": jsonable(self.values),
        }


@dataclass
class InputSearch:
    """The search of every file each batch read: the key's records, and what could not be searched."""

    records: list[InputRecord] = field(default_factory=list)
    near: list[InputRecord] = field(default_factory=list)  # records whose key only looks like a key asked
    files_listed: int = 0
    files_searched: int = 0
    unsearched: list[str] = field(default_factory=list)  # "<file> of the <source> source (why)", or a whole source
    columns: dict[str, str] = field(default_factory=dict)  # source -> the column searched ("any": every column)
    time_zone: str = "UTC"  # the session time zone event times without an offset were read in
    sources: dict[int, str] = field(default_factory=dict)  # source index -> its name (its folder)

    @property
    def complete(self) -> bool:
        return self.files_listed > 0 and not self.unsearched

    def of(self, key: str) -> list[InputRecord]:
        return [r for r in self.records if r.key == key]

    def note(self) -> str | None:
        if not self.unsearched:
            return None
        shown = sorted(self.unsearched)
        more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
        return "Not searched: " + "; ".join(shown[:3]) + more + "."


# --------------------------------------------------------------------------- event times


def event_time_us(value: Any, time_zone: str = "UTC") -> int | None:
    """An input value as Spark reads it into a TIMESTAMP, in microseconds: a timestamp, ISO 8601
    text (the session time zone when it has no offset), or a number of seconds (JSON numbers)."""
    if isinstance(value, dt.datetime):
        t = value if value.tzinfo else value.replace(tzinfo=_zone(time_zone))
        return _us(t)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value * 1_000_000)
    if isinstance(value, str):
        text = value.strip()
        if not text or not text[:4].isdigit():
            return None
        try:
            t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        return _us(t if t.tzinfo else t.replace(tzinfo=_zone(time_zone)))
    return None


def _us(t: dt.datetime) -> int:
    delta = t - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _zone(name: str) -> dt.tzinfo:
    if name.upper() in ("UTC", "Z", "GMT", ""):
        return dt.UTC
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError):
        m = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})?", name)
        if m:
            sign = 1 if m.group(1) == "+" else -1
            return dt.timezone(sign * dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0)))
        return dt.UTC


# --------------------------------------------------------------------------- the plan's filters on a record


def filter_verdict(condition: str, values: dict[str, Any]) -> bool | None:
    """Whether a record passes a filter of the plan (``readable`` text), None when it cannot be told:
    a column the record does not have, or an expression this evaluator does not know."""
    try:
        return _eval(condition.strip(), values)
    except _Unknown:
        return None


class _Unknown(Exception):
    pass


def _split(text: str, word: str) -> list[str] | None:
    parts, depth, cur, i = [], 0, "", 0
    token = f" {word} "
    while i < len(text):
        c = text[i]
        depth += (c == "(") - (c == ")")
        if depth == 0 and text.startswith(token, i):
            parts.append(cur)
            cur = ""
            i += len(token)
            continue
        cur += c
        i += 1
    parts.append(cur)
    return parts if len(parts) > 1 else None


_COMPARE = re.compile(r"^(?P<col>[A-Za-z_][\w$]*) (?P<op>=|<=>|!=|<>|>=|<=|>|<) (?P<lit>.+)$")


def _eval(text: str, values: dict[str, Any]) -> bool:
    text = strip_parens(text)
    for word, combine in (("OR", any), ("AND", all)):
        parts = _split(text, word)
        if parts is not None:
            results = [filter_verdict(p, values) for p in parts]
            if word == "AND" and False in results:
                return False
            if word == "OR" and True in results:
                return True
            if None in results:
                raise _Unknown
            return combine(results)
    if text.startswith("NOT "):
        return not _eval(text[4:], values)
    m = re.fullmatch(r"(isnotnull|isnull)\((?P<col>[A-Za-z_][\w$]*)\)", text)
    if m:
        present = _value(values, m.group("col")) is not None
        return present if m.group(1) == "isnotnull" else not present
    m = re.fullmatch(r"(?P<col>[A-Za-z_][\w$]*) IN \((?P<items>.*)\)", text)
    if m:
        v = _value(values, m.group("col"))
        return v is not None and any(_equal(v, item.strip()) for item in m.group("items").split(","))
    m = _COMPARE.match(text)
    if m:
        v = _value(values, m.group("col"))
        if v is None:
            return False  # a comparison with null is not true: the row is filtered
        lit, op = m.group("lit").strip(), m.group("op")
        if op in ("=", "<=>"):
            return _equal(v, lit)
        if op in ("!=", "<>"):
            return not _equal(v, lit)
        a, b = _ordered(v, lit)
        return {">": a > b, "<": a < b, ">=": a >= b, "<=": a <= b}[op]
    raise _Unknown


def _value(values: dict[str, Any], col: str) -> Any:
    if col not in values:
        raise _Unknown
    v = values[col]
    return None if v == "" else v


def _equal(v: Any, lit: str) -> bool:
    lit = lit.strip()
    if len(lit) >= 2 and lit[0] == lit[-1] and lit[0] in "'\"":
        lit = lit[1:-1]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            return float(v) == float(lit)
        except ValueError:
            return False
    return str(v) == lit


def _ordered(v: Any, lit: str) -> tuple[Any, Any]:
    try:
        return float(v), float(lit)
    except (TypeError, ValueError):
        return str(v), lit.strip("'\"")
