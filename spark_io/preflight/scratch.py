"""A scratch copy of what the next batch of a checkpoint needs, for a changed query to restart on.

The copy holds the query's id, the offsets and commit logs, the sources' logs, the operators'
metadata and state schemas, and of each store partition the files of the state version the next
batch loads (the newest snapshot at or below it and the change files after it; RocksDB's SST
files). Nothing else is copied; the checkpoint is only read.

The next batch: Spark plans it from the sources, as on a real restart (or re-runs the last batch
when it did not commit). When the sources hold no new data, no batch would run, and nothing would
be checked: for that case ``planned_offsets`` holds ``offsets/<last + 1>`` with the same source
offsets and the watermark the last commit set, which, written into the copy, makes Spark run the
batch it would run next without new data, with every check of a restart.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from statelens.analysis.core.errors import InvalidInput
from statelens.analysis.core.model import CheckpointInfo
from statelens.spark_io.storage import Entry, open_storage

_VERSIONED = re.compile(r"^\.?(\d+)(?:_[0-9A-Za-z-]+)?\.(delta|snapshot|changelog|zip)(?:\.crc)?$")
_SNAPSHOTS = ("snapshot", "zip")
_KEPT_FOLDERS = {"_metadata", "_stateSchema", "SSTs"}


@dataclass(frozen=True)
class Scratch:
    path: Path  # the copy's folder
    batch: int  # the batch Spark runs next on it
    planned_offsets: str | None  # offsets/<batch> for that batch without new data (None: the last batch is re-run)
    files: int
    bytes: int
    seconds: float


def _needed_state(entries: list[Entry], version: int) -> list[Entry]:
    """Of one store partition's files, those state ``version`` is built from (with their sidecars)."""
    by_version: dict[int, list[tuple[str, Entry]]] = {}
    for e in entries:
        m = _VERSIONED.match(e.name)
        if m:
            by_version.setdefault(int(m.group(1)), []).append((m.group(2), e))
    snapshots = [v for v, files in by_version.items() if v <= version and any(k in _SNAPSHOTS for k, _ in files)]
    base = max(snapshots, default=0)
    out = [e for k, e in by_version.get(base, []) if k in _SNAPSHOTS]
    out += [e for v in range(base + 1, version + 1) for k, e in by_version.get(v, []) if k not in _SNAPSHOTS]
    return out


def _wanted(entries: list[Entry], version: int) -> list[Entry]:
    """The checkpoint's files the copy takes."""
    out: list[Entry] = []
    partitions: dict[str, list[Entry]] = {}
    for e in entries:
        parts = e.path.split("/")
        top = parts[0]
        if top in ("metadata", "offsets", "commits", "sources") or (len(parts) == 1 and e.name.startswith(".metadata")):
            out.append(e)
        elif top == "state":
            if _KEPT_FOLDERS.intersection(parts[:-1]):
                out.append(e)
            elif _VERSIONED.match(e.name):
                partitions.setdefault("/".join(parts[:-1]), []).append(e)
            else:
                out.append(e)
    for files in partitions.values():
        out += _needed_state(files, version)
    return out


def _planned_offsets(offsets: str, watermark_ms: int | None) -> str:
    """``offsets/<n>`` for the batch after ``n`` with no new data: the same source offsets, the
    watermark the commit of ``n`` set, the time now."""
    lines = offsets.split("\n")
    meta = json.loads(lines[1])
    if watermark_ms is not None:
        meta["batchWatermarkMs"] = watermark_ms
    meta["batchTimestampMs"] = int(time.time() * 1000)
    lines[1] = json.dumps(meta, separators=(",", ":"))
    return "\n".join(lines)


def scratch_copy(info: CheckpointInfo, dest: Path) -> Scratch:
    """Copy into ``dest`` (a new folder) what the next batch of the checkpoint needs."""
    if not info.batches:
        raise InvalidInput(f"{info.path} has no batch yet: any query starts on it. Nothing to check before the change.")
    started = time.time()
    storage = open_storage(info.path)
    last = info.batches[-1]
    batch = last.batch_id + 1 if last.committed else last.batch_id
    entries = storage.walk("")
    wanted = _wanted(entries, batch)
    dest.mkdir(parents=True)
    total = 0

    def copy(e: Entry) -> int:
        target = dest / e.path
        target.parent.mkdir(parents=True, exist_ok=True)
        data = storage.read(e.path, e)
        target.write_bytes(data)
        return len(data)

    total = sum(storage.map(copy, wanted))
    for folder in ("offsets", "commits", "sources", "state"):
        (dest / folder).mkdir(exist_ok=True)
    planned = None
    if last.committed:
        planned = _planned_offsets(storage.read(f"offsets/{last.batch_id}").decode("utf-8"), last.next_watermark_ms)
    return Scratch(dest, batch, planned, len(wanted), total, round(time.time() - started, 3))
