"""A key's records in the query's input: what ``spark_io.gather.inputs`` finds in the files each batch read.

Pure: the record, the search's result (what was searched, what could not be and why), the arrivals of
a record with a given event time, and an input value read as Spark reads an event time (the plan's
filters on a record: ``predicates``).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from statelens.analysis.core.key_format import jsonable


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
    via: str | None = None  # how it gets the key when no column of it holds it (a static table maps its column to it)
    unreadable: str = ""  # a line holding the key that Spark's reader cannot read as a record (why): a row of nulls

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


ANY = "any column"  # no key column in the source: every column is searched for the key


_UNSEARCHED = re.compile(r"^(.+?) of the (.*) source \((.*)\)$")  # "<file> of the <source> source (why)"


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
    # files searched that are not as Spark read them ("<file> of the <source> source (how)"): an answer
    # from them says what they hold now
    changed: list[str] = field(default_factory=list)
    # lines holding a key that Spark's reader could not read as a record (not valid JSON): it read them as nulls
    unreadable: list[InputRecord] = field(default_factory=list)
    # records of keys found in no file Spark read, in files beside them that no batch read (batch None)
    unread: list[InputRecord] = field(default_factory=list)
    unread_why: dict[str, str] = field(default_factory=dict)  # such a file -> why no batch read it
    unlisted_why: list[str] = field(default_factory=list)  # "<folder> (why)": a source's folder not listed for them
    computed_by: dict[str, str] = field(default_factory=dict)  # a key column Python code output -> that plan node

    @property
    def complete(self) -> bool:
        return self.files_listed > 0 and not self.unsearched

    missing: list[str] = field(default_factory=list)  # key columns no source has (computed from the input)

    def of(self, key: str) -> list[InputRecord]:
        return [r for r in self.records if r.key == key]

    def note(self) -> str | None:
        """What was not searched, in one sentence: the files of one reason together, counted per source
        (``unsearched`` keeps each file and its reason); and the files searched that changed since Spark
        read them."""
        changed = (
            f" Changed since Spark read them (their records now may not be what it read): {'; '.join(self.changed[:3])}"
            + (f" and {len(self.changed) - 3} more" if len(self.changed) > 3 else "")
            + "."
            if self.changed
            else ""
        )
        if not self.unsearched:
            return changed.strip() or None
        by_why: dict[str, dict[str, list[str]]] = {}
        whole: list[str] = []
        for entry in sorted(self.unsearched):
            m = _UNSEARCHED.match(entry)
            if m is None:
                whole.append(entry)
            else:
                by_why.setdefault(m.group(3), {}).setdefault(m.group(2), []).append(m.group(1))
        parts = []
        for why, sources in by_why.items():
            counted = [
                f"{files[0]} of the {source} source" if len(files) == 1 else f"{len(files)} files of the {source} source"
                for source, files in sorted(sources.items())
            ]
            parts.append(f"{', '.join(counted)} ({why})")
        shown = parts + whole
        more = f" and {len(shown) - 4} more" if len(shown) > 4 else ""
        return "Not searched: " + "; ".join(shown[:4]) + more + "." + changed


# --------------------------------------------------------------------------- arrivals of a record with a given event time


@dataclass(frozen=True)
class Arrival:
    """A record of the key with the event time, found in an input file a batch read."""

    batch: int
    source: str
    file: str


@dataclass
class ArrivalSearch:
    """Per key, where its record arrived (``spark_io.gather.arrivals``), and what could not be searched."""

    found: dict[str, list[Arrival]]  # the key's record with the event time
    seen: dict[str, list[Arrival]] = field(default_factory=dict)  # any record of the key, whatever its time
    searched: int = 0  # input files read
    unsearched: set[str] = field(default_factory=set)  # files or sources not searched, each with why

    def to_dict(self) -> dict[str, Any]:
        return {
            "found": {k: [a.__dict__ for a in v] for k, v in self.found.items()},
            "key_seen": {k: [a.__dict__ for a in v] for k, v in self.seen.items()},
            "files_searched": self.searched,
            "not_searched": sorted(self.unsearched),
        }


def holds_time(values: list[Any], t: int) -> bool:
    """Whether one of a record's values is the event time ``t`` (a timestamp, ISO text, or epoch ms)."""

    def ms(v: Any) -> int | None:
        us = event_time_us(v) if isinstance(v, (dt.datetime, str)) else None
        return us // 1000 if us is not None else None

    return any(ms(v) == t or (type(v) is int and v == t) for v in values)


# --------------------------------------------------------------------------- event times


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


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


def utc_time(us: int) -> dt.datetime:
    """A time in microseconds since 1970 as a UTC timestamp: the inverse of ``event_time_us``."""
    return _EPOCH + dt.timedelta(microseconds=us)


def _us(t: dt.datetime) -> int:
    delta = t - _EPOCH
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
