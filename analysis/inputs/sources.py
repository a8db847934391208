"""What each batch read from each source, told by the checkpoint alone (no JVM, no event log).

``offsets/<batch>`` holds, after its metadata line, one line per source (in the query's source
order, ``-`` for a source without an offset yet): the end offset of that batch. The start is the
previous batch's end. By source:

* Kafka: ``{"topic": {"partition": offset}}``; rows per partition = end - start. The start of
  the first batch is in ``sources/<n>/0`` (the initial offsets Spark wrote).
* file source: ``{"logOffset": n}``; the files of file-log batches (previous n, n] are listed in
  ``sources/<n>/`` (one file per log batch, compacted into ``<n>.compact`` every 10).
* rate-micro-batch: ``{"offset": rows, "timestamp": ms}``; rows = end - start.
* rate: the seconds since the query started (``sources/<n>/0`` holds that start); the rows
  depend on ``rowsPerSecond``, which the checkpoint does not keep.

Each source is named by what it reads: a file source by its folder (the folder its files have in
common, above any ``key=value`` partition folders), Kafka by its topics, the rate sources by
their kind; a progress description (``FileStreamSource[file:/data/orders]``,
``KafkaV2[Subscribe[orders]]``) names a source the checkpoint cannot.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SourceBatch:
    """One source at one batch."""

    source: int  # index in the query's sources (sources/<n>/)
    kind: str  # kafka | file | rate | rate-micro-batch | unknown
    end_offset: Any  # parsed JSON (or the raw text)
    start_offset: Any  # the previous batch's end (None when not known)
    rows: int | None  # rows read, when the offsets tell
    partitions: dict[str, int] = field(default_factory=dict)  # kafka: "topic/partition" -> rows
    files: list[str] = field(default_factory=list)  # file source: the files read
    note: str = ""
    name: str = ""  # what it reads: the file source's folder, Kafka's topics (source_names)
    stamps: dict[str, int] = field(default_factory=dict)  # file source: path -> its modification time (ms) as Spark listed it

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "source": self.source,
            "name": self.name,
            "kind": self.kind,
            "start_offset": self.start_offset,
            "end_offset": self.end_offset,
            "rows": self.rows,
        }
        if self.partitions:
            d["partitions"] = self.partitions
        if self.kind == "file":
            d["files"] = self.files
        if self.note:
            d["note"] = self.note
        return d

    @property
    def summary(self) -> str:
        if self.kind == "file":
            names = ", ".join(f.rsplit("/", 1)[-1] for f in self.files[:3]) + (" ..." if len(self.files) > 3 else "")
            return f"{len(self.files)} file(s)" + (f": {names}" if names else "")
        if self.kind == "kafka":
            if self.rows is None:
                return self.note or "offsets only"
            busy = ", ".join(f"{k} +{v:,}" for k, v in sorted(self.partitions.items()) if v)
            return f"{self.rows:,} rows" + (f" ({busy})" if busy else "")
        if self.kind == "rate":
            return f"{self.note}" if self.note else "rate"
        return f"{self.rows:,} rows" if self.rows is not None else (self.note or str(self.end_offset))


def parse_offset(text: str) -> Any:
    text = text.strip()
    if text in ("", "-"):
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def offset_lines(lines: list[str]) -> list[tuple[str, Any]]:
    """(source id, parsed end offset) of each source in an offsets file's lines after the metadata:
    format v1 lists them in source order (ids 0, 1, ...); v2 (Spark 4.2+, ``OffsetMap``) writes
    ``<source id>:<offset>`` per line, the id being the source's name or its ordinal."""
    version = lines[0].strip() if lines else "v1"
    rest = [x for x in lines[2:] if x.strip()]
    if version != "v2":
        return [(str(i), parse_offset(x)) for i, x in enumerate(rest)]
    out: list[tuple[str, Any]] = []
    for x in rest:
        sid, sep, value = x.partition(":")
        out.append((sid, parse_offset(value)) if sep else (str(len(out)), parse_offset(x)))
    return out


def kind_of(offset: Any) -> str:
    if isinstance(offset, dict):
        if "logOffset" in offset:
            return "file"
        if set(offset) >= {"offset", "timestamp"}:
            return "rate-micro-batch"
        if offset and all(isinstance(v, dict) and all(str(p).lstrip("-").isdigit() for p in v) for v in offset.values()):
            return "kafka"
    if isinstance(offset, int) and not isinstance(offset, bool):
        return "rate"
    return "unknown"


def _kafka_rows(start: dict[str, Any] | None, end: dict[str, Any]) -> dict[str, int] | None:
    if not isinstance(start, dict):
        return None
    out: dict[str, int] = {}
    for topic, parts in end.items():
        for p, off in parts.items():
            before = (start.get(topic) or {}).get(p)
            if before is None or before < 0 or off < 0:  # a new partition, or latest/earliest markers
                return None
            out[f"{topic}/{p}"] = off - before
    return out


_GLOB = re.compile(r"[*?\[\]{}]")


def _folders(path: str) -> list[str]:
    return re.sub(r"^[a-zA-Z][\w+.-]*:/*", "/", path).rstrip("/").split("/")


def common_folder(folders: list[list[str]]) -> list[str]:
    """The folder ``folders`` (each split into its parts) have in common, without its
    ``key=value`` partition folders and globs: ``[..., "in", "orders"]`` for
    ``/in/orders/date=2026-01-01`` and ``/in/orders``."""
    common = folders[0] if folders else []
    for f in folders[1:]:
        n = next((k for k, (a, b) in enumerate(zip(common, f, strict=False)) if a != b), min(len(common), len(f)))
        common = common[:n]
    return [c for c in common if c and "=" not in c and not _GLOB.search(c)]


def name_from_description(description: str) -> str:
    """A source's name from its progress description: ``FileStreamSource[file:/data/orders]`` ->
    ``orders``, ``KafkaV2[Subscribe[orders,payments]]`` -> ``orders, payments``; ``""`` when the
    description does not say."""
    kafka = re.search(r"(?:Subscribe|SubscribePattern|Assign)\[(.*?)\]", description)
    if description.startswith("Kafka") and kafka:
        return ", ".join(t.strip() for t in kafka.group(1).split(",") if t.strip())
    inner = re.fullmatch(r"\w+\[(.*)\]", description.strip())
    if inner and "/" in inner.group(1):
        return (common_folder([_folders(inner.group(1).split(",")[0].strip())]) or [""])[-1]
    return ""


def source_names(offsets: dict[int, list[Any]], file_entries: dict[int, list[dict[str, Any]]]) -> dict[int, str]:
    """Per source index, what it reads (see the module's docstring; "" where the checkpoint does
    not tell). Two file sources whose folders share a name are told apart by their parent folders
    (``a/in``, ``b/in``)."""
    count = max([0, *(len(v) for v in offsets.values()), *(i + 1 for i in file_entries)])
    out: dict[int, str] = {}
    folders: dict[int, list[str]] = {}
    for i in range(count):
        ends = [v[i] for v in offsets.values() if i < len(v) and v[i] is not None]
        kinds = {kind_of(e) for e in ends}
        if file_entries.get(i):
            folders[i] = common_folder([_folders(e["path"])[:-1] for e in file_entries[i]])
            out[i] = folders[i][-1] if folders[i] else ""
        elif kinds == {"kafka"}:
            out[i] = ", ".join(sorted({t for e in ends for t in e}))
        else:
            out[i] = next(iter(kinds)) if len(kinds) == 1 and kinds != {"unknown"} else ""
    for depth in range(2, 8):
        names = list(out.values())
        clash = [i for i in folders if out[i] and names.count(out[i]) > 1]
        if not clash:
            break
        for i in clash:
            out[i] = "/".join(folders[i][-depth:])
    return out


def batch_sources(
    offsets: dict[int, list[Any]],
    file_entries: dict[int, list[dict[str, Any]]],
    initial: dict[int, Any],
) -> dict[int, list[SourceBatch]]:
    """Per batch, what each source read.

    ``offsets``: batch -> the parsed end offset of every source; ``file_entries``: source ->
    entries of its file log (``{"path", "batchId"}``); ``initial``: source -> the initial offset
    Spark wrote in ``sources/<n>/0`` (Kafka) or the rate source's start time."""
    names = source_names(offsets, file_entries)
    out: dict[int, list[SourceBatch]] = {}
    prev: dict[int, Any] = {}
    prev_batch: int | None = None
    for b in sorted(offsets):
        row: list[SourceBatch] = []
        for i, end in enumerate(offsets[b]):
            kind = kind_of(end)
            follows = prev_batch == b - 1  # the previous batch's offsets are kept: they are this batch's start
            start = prev.get(i) if follows else None
            if kind == "kafka" and start is None and b == 0:
                start = initial.get(i)
            rows: int | None = None
            partitions: dict[str, int] = {}
            files: list[str] = []
            stamps: dict[str, int] = {}
            note = ""
            if end is None:
                note = "no offset yet"
            elif kind == "kafka":
                parts = _kafka_rows(start, end)
                if parts is None:
                    note = "a start offset is not in the checkpoint (the previous batch is purged, or a partition is new)"
                else:
                    partitions, rows = parts, sum(parts.values())
            elif kind == "file":
                lo = start.get("logOffset", -1) if isinstance(start, dict) else (-1 if b == 0 else None)
                hi = end["logOffset"]
                if lo is None:
                    note = "the previous batch's offsets are purged"
                else:
                    read = [e for e in file_entries.get(i, []) if lo < e.get("batchId", -1) <= hi]
                    files = [e["path"] for e in read]
                    stamps = {e["path"]: int(e["timestamp"]) for e in read if isinstance(e.get("timestamp"), int)}
                    if not files and hi > lo:
                        note = "the file log of these batches is purged"
            elif kind == "rate-micro-batch":
                if isinstance(start, dict):
                    rows = end["offset"] - start["offset"]
                elif b == 0:
                    rows = end["offset"]
            elif kind == "rate":
                secs = end - start if isinstance(start, int) else (end if b == 0 else None)
                note = f"{secs} s of rows (rowsPerSecond is not in the checkpoint)" if secs is not None else "rate"
            if not follows and b > 0 and end is not None and kind in ("kafka", "rate-micro-batch") and rows is None:
                note = note or "the previous batch's offsets are purged"
            row.append(SourceBatch(i, kind, end, start, rows, partitions, files, note, names.get(i, ""), stamps))
            prev[i] = end
        prev_batch = b
        out[b] = row
    return out
