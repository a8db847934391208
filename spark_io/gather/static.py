"""The static tables a streaming query joins its streams with, read from their files.

The event log's plan names each join that is not a stream-stream join (``BroadcastHashJoin``,
``SortMergeJoin`` ...) and the scan under each side; a side none of whose scans is one of the
checkpoint's sources reads a static table. Its files (JSON lines, CSV, Parquet) are read where the
plan's ``Location`` says, else under ``--input-root`` by the folder's name (a copy of the inputs).
"""

from __future__ import annotations

import csv
import io
import json
import re
import urllib.parse

from statelens.analysis.core.errors import StateLensError
from statelens.analysis.plan.query_plan import QueryPlan
from statelens.analysis.plan.static_table import MAX_ROWS, StaticTable
from statelens.spark_io.gather.inputs import MAX_FILE_BYTES, _format, _join, _local, _read
from statelens.spark_io.storage import open_storage
from statelens.spark_io.storage.gate import check_allowed

_URI = re.compile(r"(?:[a-z][a-z0-9+.-]*:)?/[^,\]\s]+")


def static_tables(plan: QueryPlan | None, sources: set[str], input_root: tuple[str, ...] = ()) -> dict[int, StaticTable]:
    """Scan node id -> the static table it reads, for every scan on a static side of a batch join."""
    if plan is None:
        return {}
    out: dict[int, StaticTable] = {}
    for join in plan.batch_joins.values():
        for scans in join.scans.values():
            if any(_source_of(plan, s, sources) for s in scans):
                continue  # the stream's side
            for scan_id in scans:
                if scan_id in plan.scans and scan_id not in out:
                    out[scan_id] = _read_table(plan, scan_id, input_root)
    return out


def _source_of(plan: QueryPlan, scan_id: int, sources: set[str]) -> bool:
    loc = plan.scans[scan_id].location if scan_id in plan.scans else ""
    return any(name and f"/{name}/" in loc for name in sources)


def _read_table(plan: QueryPlan, scan_id: int, input_root: tuple[str, ...]) -> StaticTable:
    scan = plan.scans[scan_id]
    locations = [m.group(0) for m in _URI.finditer(scan.location.split("[", 1)[-1])]
    name = (locations[0].rstrip("/").rsplit("/", 1)[-1] if locations else "") or f"scan {scan_id}"
    table = StaticTable(scan_id, name, locations[0] if locations else scan.location, columns=list(scan.columns))
    files: list[str] = []
    refused = False
    for loc in locations:
        allowed = _may(loc)
        found = _files(loc) if allowed else []
        refused = refused or not allowed
        for moved in [m for root in input_root for m in _under(root, loc)] if not found else []:
            if _may(moved) and (found := _files(moved)):
                break
        files += found
    if not files:
        table.why = (
            "its files are outside the folders that may be opened"
            if refused
            else "its files are no longer there" + ("" if input_root else " (give where the inputs are now: --input-root)")
        )
        return table
    table.where = files[0].rsplit("/", 1)[0]
    rows: list[dict[str, object]] = []
    try:
        for f in files:
            rows += _rows(f, _format(f, scan.format) or scan.format, scan.columns)
            if len(rows) > MAX_ROWS:
                table.why = f"larger than {MAX_ROWS:,} rows: not read"
                return table
    except (OSError, ValueError, StateLensError) as e:
        table.why = f"its files cannot be read ({getattr(e, 'message', None) or e})"
        return table
    table.rows = rows
    return table


def _may(loc: str) -> bool:
    """Whether ``loc`` lies inside the bounds (a refusal is noted for the audit): a place outside them
    is not looked at, so whether files are there is never told."""
    try:
        check_allowed(loc, "input")
    except StateLensError:
        return False
    return True


def _under(root: str, loc: str) -> list[str]:
    """Where a table read from ``loc`` may be under ``root`` now: the same relative path, its last three,
    two, then one parts (``/old/in/ref/countries.csv`` -> ``ROOT/in/ref/countries.csv`` ...
    ``ROOT/countries.csv``)."""
    parts = [p for p in urllib.parse.urlparse(loc).path.split("/") if p] if "://" in loc else [p for p in loc.split("/") if p]
    return [_join(root, *parts[-k:]) for k in range(min(3, len(parts)), 0, -1)]


def _files(loc: str) -> list[str]:
    """The data files at a location: the file itself (a table read from one file), or a folder's files
    (not hidden, not ``_SUCCESS``)."""
    path = _local(loc)
    if path is None:
        return []
    try:
        storage = open_storage(path, check=False)
        top = storage.info("")
        if top is None:
            return []
        if not top.is_dir:
            return [path] if top.size <= MAX_FILE_BYTES else []
        entries = storage.listdir("")
    except (OSError, StateLensError):
        return []
    return sorted(
        _join(path, e.name) for e in entries if not e.is_dir and not e.name.startswith((".", "_")) and e.size <= MAX_FILE_BYTES
    )


def _rows(path: str, fmt: str, columns: list[str]) -> list[dict[str, object]]:
    data = _read(path)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        from statelens.analysis.core.arrow_numpy import rows_of

        return rows_of(pq.read_table(io.BytesIO(data)))
    text = data.decode("utf-8", "replace")
    if fmt == "csv":
        lines = list(csv.reader(io.StringIO(text)))
        if lines and set(columns) <= {c.strip() for c in lines[0]}:
            header, lines = lines[0], lines[1:]
        else:
            header = columns
        return [{c: (v if v != "" else None) for c, v in zip(header, line, strict=False)} for line in lines if line]
    return [json.loads(line) for line in text.splitlines() if line.strip()]
