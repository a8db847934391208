"""In which batch a record arrived: the input files each batch read, searched for it.

A file source lists, per batch, the files it read (``analysis.sources``). When those files are
still on a local disk, the record of a key with a given event time is found in them: a line of a
JSON or CSV file holding the key and a value equal to the event time, or a Parquet row. That batch
is the one that dropped it, when the record was late (``analysis.lateness``). Files that are gone,
remote, outside the allowed roots or of another format are named, never guessed.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path
from typing import Any

import pyarrow as pa

from analysis.errors import StateLensError
from analysis.lateness import Arrival, ArrivalSearch, holds_time
from analysis.model import CheckpointInfo, default_operator, operator_of
from analysis.progress import ProgressLog, lateness
from spark_io.checkpoint import check_allowed, is_local, read_source_offsets

TEXT = (".json", ".jsonl", ".csv", ".txt")
MAX_FILE_BYTES = 256 * 1024**2  # a larger input file is named, not read


def _local(uri: str) -> str | None:
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme not in ("", "file"):
        return None
    return urllib.parse.unquote(parsed.path) if parsed.scheme else uri


def _text_rows(data: bytes, key: str) -> list[list[Any]]:
    """The values of each line that holds ``key`` (a JSON object's values, or a CSV line's fields)."""
    needle = key.encode()
    out: list[list[Any]] = []
    for line in data.split(b"\n"):
        if needle not in line:
            continue
        text = line.decode("utf-8", "replace").strip()
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            out.append([f.strip().strip('"') for f in text.split(",")])
            continue
        if isinstance(obj, dict):
            out.append(list(_flat(obj)))
    return out


def _flat(obj: Any) -> Any:
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _flat(v)
    else:
        yield obj


def _parquet_rows(path: str, key: str) -> list[list[Any]]:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    mask = None
    for name in table.column_names:
        col = table[name]
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            hit = pc.equal(col, key)
            mask = hit if mask is None else pc.or_(mask, hit)
    if mask is None:
        return []
    return [list(r.values()) for r in table.filter(pc.fill_null(mask, False)).to_pylist()]


def arrivals_for(
    info: CheckpointInfo, keys: list[str], operator_id: int | None, event_time_ms: int | None, progress: ProgressLog | None
) -> ArrivalSearch | None:
    """The search, where it can tell which batch dropped a late record: an event time is given and
    the progress shows the operator dropping rows once that time was late (a local checkpoint)."""
    if event_time_ms is None or progress is None or not is_local(info.path):
        return None
    op = default_operator(info) if operator_id is None else operator_of(info, operator_id)
    if not lateness(event_time_ms, info, op.operator_id, progress).drops:
        return None
    return find_arrivals(info, keys, event_time_ms)


def find_arrivals(info: CheckpointInfo, keys: list[str], event_time_ms: int) -> ArrivalSearch:
    """Per key, the batches (and files) whose input holds the key's record with this event time."""
    search = ArrivalSearch(found={k: [] for k in keys}, seen={k: [] for k in keys})
    for batch, sources in sorted(read_source_offsets(info.path).items()):
        for s in sources:
            if s.kind != "file":
                if s.kind != "unknown" or s.end_offset is not None:
                    search.unsearched.add(f"the {s.name or s.kind} source ({s.kind}: its records are not in files)")
                continue
            if s.note:
                search.unsearched.add(f"batch {batch} of the {s.name} source ({s.note})")
            for uri in s.files:
                _search_file(search, batch, s.name, uri, keys, event_time_ms)
    return search


def _search_file(search: ArrivalSearch, batch: int, source: str, uri: str, keys: list[str], t: int) -> None:
    path = _local(uri)
    name = uri.rsplit("/", 1)[-1]
    why = None
    if path is None:
        why = "not on a local disk"
    elif not os.path.isfile(path):
        why = "no longer there"
    elif not path.lower().endswith((*TEXT, ".parquet")):
        why = "a format searched only in JSON, CSV and Parquet files"
    elif os.path.getsize(path) > MAX_FILE_BYTES:
        why = f"larger than {MAX_FILE_BYTES // 1024**2} MB"
    else:
        try:
            check_allowed(path)
        except StateLensError:
            why = "outside the allowed roots"
    if why or path is None:
        search.unsearched.add(f"{name} of the {source} source ({why})")
        return
    search.searched += 1
    try:
        data = None if path.lower().endswith(".parquet") else Path(path).read_bytes()
        for key in keys:
            rows = [r for r in (_parquet_rows(path, key) if data is None else _text_rows(data, key)) if key in map(str, r)]
            if rows:
                search.seen[key].append(Arrival(batch, source, name))
            if any(holds_time(r, t) for r in rows):
                search.found[key].append(Arrival(batch, source, name))
    except (OSError, pa.ArrowInvalid) as e:
        search.unsearched.add(f"{name} of the {source} source (cannot be read: {e})")
