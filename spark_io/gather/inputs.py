"""A key's records in the query's input files and in a file sink's output (``analysis.inputs``).

A file source lists, per batch, the files it read (``sources/<n>/``, ``analysis.sources``). Each
file still on a local disk is searched for the keys:

* JSON lines and CSV: the file's bytes are searched for each key first (a byte search: files that
  do not hold a key's bytes are not parsed), then only the lines that hold it are parsed: a
  record answers a key when the key's column holds exactly the key;
* Parquet: DuckDB reads the files with the key's column compared to the key (row groups whose
  statistics exclude the key are skipped);
* text: the lines that hold the key (the source's one column, ``value``).

Keys not found exactly are searched again for near misses (case, surrounding whitespace,
punctuation, the same digits) in DuckDB over every listed file of their sources. Files that are
gone, remote, outside the allowed roots or of another format are named, never guessed. A file sink
(``_spark_metadata/<batch>``, compacted every 10 batches) is searched the same way for the rows
each batch wrote.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from statelens.analysis.core.arrow_numpy import rows_of
from statelens.analysis.core.errors import StateLensError
from statelens.analysis.core.key_format import fmt_time
from statelens.analysis.core.model import CheckpointInfo
from statelens.analysis.core.near_miss import digits, near_miss_reason, normalize
from statelens.analysis.inputs.records import ANY, InputRecord, InputSearch
from statelens.analysis.pipeline.model import flow_at
from statelens.spark_io.logs.checkpoint import read_source_offsets
from statelens.spark_io.runtime import scratch
from statelens.spark_io.runtime.engine_choice import reads_natively
from statelens.spark_io.storage import Entry, Storage, open_storage
from statelens.spark_io.storage.gate import check_allowed
from statelens.spark_io.storage.locations import is_local, local_path

MAX_FILE_BYTES = 512 * 1024**2  # a larger input file is named, not read
FORMATS = {
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".txt": "text",
    ".text": "text",
}


@dataclass(frozen=True)
class ListedFile:
    source_index: int
    source: str
    batch_id: int | None
    uri: str  # as the log lists it
    path: str | None  # where it is read from (None: not readable, see why)
    format: str
    why: str | None = None
    changed: str | None = None  # the file at its logged place is not as Spark read it: how it differs
    stamp: int | None = None  # its modification time (ms) as Spark listed it; a file no batch read: as it is now


def _local(uri: str) -> str | None:
    """Where a logged file is read from: a local path, or its URI on object storage this process
    reads (S3, ADLS, GCS); None: storage only Spark reads (hdfs:// ...)."""
    if is_local(uri):
        return local_path(uri)
    return uri.strip() if reads_natively(uri) else None


class _Listings:
    """Each folder of input or sink files listed once (not a request per file)."""

    def __init__(self) -> None:
        self._seen: dict[str, dict[str, Entry]] = {}

    def entry(self, loc: str) -> Entry | None:
        folder, _, name = loc.rstrip("/").rpartition("/")
        if folder not in self._seen:
            try:
                self._seen[folder] = {e.name: e for e in open_storage(folder or "/", check=False).listdir("")}
            except (OSError, StateLensError):
                self._seen[folder] = {}
        e = self._seen[folder].get(name)
        return e if e is not None and not e.is_dir else None


def _read(loc: str) -> bytes:
    return open_storage(loc, check=False).read("")


def _join(*parts: str) -> str:
    return "/".join([parts[0].rstrip("/"), *(p.strip("/") for p in parts[1:] if p.strip("/"))])


def _format(path: str, hint: str | None) -> str | None:
    if hint in ("json", "csv", "parquet", "text"):
        return hint
    name = path.lower()
    for ext, fmt in FORMATS.items():
        if name.endswith(ext) or f"{ext}." in name.rsplit("/", 1)[-1]:
            return fmt
    return None


def _folder(paths: list[str]) -> str:
    """The folder a source's files have in common (local paths or URIs alike)."""
    if not paths:
        return ""
    split = [p.rsplit("/", 1)[0].split("/") for p in paths]
    common = split[0]
    for parts in split[1:]:
        n = 0
        while n < min(len(common), len(parts)) and common[n] == parts[n]:
            n += 1
        common = common[:n]
    return "/".join(common)


def listed_files(
    info: CheckpointInfo, input_root: tuple[str, ...] = (), format_of: Callable[[str], str | None] | None = None
) -> tuple[list[ListedFile], list[str], dict[int, str]]:
    """Every file each batch read, where it can be read from, and the sources that are not files.

    ``input_root``: where the sources' folders are now, when the files moved since the query read
    them (a copy of the input beside a copy of the checkpoint, or the archive Spark moved them to
    with ``cleanSource=archive``; several: each in turn): a file logged as ``/old/in/orders/part-0.json``
    is looked for at ``<root>/orders/part-0.json``, then ``<root>/part-0.json``, then
    ``<root>/old/in/orders/part-0.json``.
    Returns (files, notes on sources not searched, source index -> name)."""
    batches = read_source_offsets(info.path)
    names: dict[int, str] = {}
    per_source: dict[int, list[tuple[int, str, int | None]]] = {}  # source -> (batch, file, its logged time)
    notes: list[str] = []
    for batch, sources in sorted(batches.items()):
        for s in sources:
            names.setdefault(s.source, s.name)
            if s.kind == "file":
                per_source.setdefault(s.source, []).extend((batch, f, s.stamps.get(f)) for f in s.files)
                if s.note:
                    notes.append(f"batch {batch} of the {s.name or 'file'} source ({s.note})")
            elif s.end_offset is not None:
                note = f"the {s.name or s.kind} source ({s.kind}: its records are not in files State Lens can search)"
                if note not in notes:
                    notes.append(note)
    out: list[ListedFile] = []
    listings = _Listings()
    for i, entries in sorted(per_source.items()):
        local = [p for _, u, _ in entries if (p := _local(u)) is not None]
        folder = _folder(local)
        for batch, uri, stamp in entries:
            logged: str | None = _local(uri)
            path, why, changed = logged, None, None
            if logged is None:
                why = "on storage only Spark reads"
            else:
                path, found, why = _moved(logged, folder, input_root, listings)
                if found is not None and found.size > MAX_FILE_BYTES:
                    why = f"larger than {MAX_FILE_BYTES // 1024**2} MB"
                if found is not None and path == logged and stamp is not None and abs(found.mtime_ns // 1_000_000 - stamp) > 1000:
                    # at its place, modified since Spark listed it: what it holds now is not what Spark read
                    changed = (
                        f"modified {fmt_time(found.mtime_ns // 1_000_000)}, after Spark read it (modified {fmt_time(stamp)})"
                    )
            fmt = _format(uri, format_of(names.get(i, "")) if format_of else None)
            if why is None and fmt is None:
                why = "a format searched only in JSON, CSV, Parquet and text files"
            out.append(ListedFile(i, names.get(i, ""), batch, uri, None if why else path, fmt or "", why, changed, stamp))
    return out, notes, names


def _moved(path: str, folder: str, roots: tuple[str, ...], listings: _Listings) -> tuple[str | None, Entry | None, str | None]:
    """(where the file is now, its entry there, why it is not read): where it was logged, else under
    each of ``roots`` in turn (see ``listed_files``). A place outside the bounds is not looked at:
    whether a file is there is never told."""
    refused = not _may(path)
    found = None if refused else listings.entry(path)
    if found is not None:
        return path, found, None
    rel = path[len(folder) :].lstrip("/") if folder and path.startswith(folder) else path.rsplit("/", 1)[-1]
    base = folder.rstrip("/").rsplit("/", 1)[-1] if folder else ""
    for root in roots:
        root = local_path(root) if is_local(root) else root
        # the source's folder copied under it, its files alone, or the whole logged path under it: where
        # Spark's cleanSource=archive moves a file it read (sourceArchiveDir + the file's own path)
        for candidate in (_join(root, base, rel), _join(root, rel), _join(root, path)):
            found = listings.entry(candidate) if _may(candidate) else None
            if found is not None:
                return candidate, found, None
    if refused:
        return None, None, "outside the folders that may be opened"
    return None, None, "no longer there" + ("" if roots else " (if the input moved, give where it is now: --input-root)")


def _may(path: str) -> bool:
    """Whether ``path`` lies inside the bounds (a refusal is noted for the audit)."""
    try:
        check_allowed(path, "input")
    except StateLensError:
        return False
    return True


# --------------------------------------------------------------------------- the search


Listing = tuple[list[ListedFile], list[str], dict[int, str]]  # what ``listed_files`` returns


def search_inputs(
    info: CheckpointInfo,
    keys: list[str],
    columns: list[str],
    input_root: tuple[str, ...] = (),
    format_of: Callable[[str], str | None] | None = None,
    time_zone: str = "UTC",
    listing: Listing | None = None,
    any_column: bool = False,
) -> InputSearch:
    """Every record of the keys in the files each batch read. ``columns``: the columns the key may
    be in, the likeliest first ([]: any column holding it); ``format_of``: a source's format by its
    name (the plan's Scan), else told by the files' names; ``listing``: the files, listed already;
    ``any_column``: a source lacking some of the columns is searched in its other columns too (no
    plan tells where an operator's key column comes from)."""
    files, notes, names = listing or listed_files(info, input_root, format_of)
    search = InputSearch(files_listed=len(files), unsearched=list(notes), time_zone=time_zone, sources=names)
    search.changed = [f"{f.uri.rsplit('/', 1)[-1]} of the {f.source} source ({f.changed})" for f in files if f.changed]
    readable = [f for f in files if f.path is not None]
    for f in files:
        if f.path is None:
            search.unsearched.append(f"{f.uri.rsplit('/', 1)[-1]} of the {f.source} source ({f.why})")
    search.files_searched = len(readable)
    by_source: dict[int, list[ListedFile]] = {}
    for f in readable:
        by_source.setdefault(f.source_index, []).append(f)
    wanted_of: dict[int, list[str]] = {}
    for i, fs in sorted(by_source.items()):
        # the key columns this source has; none of them: any column that holds the key (named in the answer);
        # ``any_column``: where some are missing, any other column too (after those: a column renamed later)
        wanted = wanted_of[i] = [c for c in columns if _has_column(fs, c)]
        found = _exact(fs, keys, [*wanted, REST] if any_column and wanted and len(wanted) < len(columns) else wanted)
        search.unreadable += [r for r in found if r.unreadable]
        found = [r for r in found if not r.unreadable]
        search.records += found
        cols = sorted({r.column for r in found})
        search.columns[names.get(i, str(i))] = ", ".join(cols) if cols else (", ".join(wanted) if wanted else ANY)
        missing = [k for k in keys if not any(r.key == k for r in found)]
        if missing and (wanted or not columns):  # look-alikes in the key's column (any only when none is known)
            search.near += _near(fs, missing, wanted)
    search.records.sort(key=lambda r: (r.key, r.batch_id if r.batch_id is not None else -1, r.source_index, r.file, r.row))
    search.missing = [c for c in columns if not any(_has_column(fs, c) for fs in by_source.values())]
    missing = [k for k in keys if not any(r.key == k for r in search.records)]
    if missing:  # the files beside those Spark read, which it never read: what the folder holds and Spark did not see
        for i, fs in sorted(by_source.items()):
            unlisted, refused = _unlisted(files, fs, input_root)
            search.unlisted_why += refused
            found = [r for r in _exact(unlisted, missing, wanted_of[i]) if not r.unreadable]
            search.unread += found
            newest = max((f.stamp for f in fs if f.stamp is not None), default=None)
            search.unread_why.update({f.uri: _passed_over(f, newest) for f in unlisted if any(r.file == f.uri for r in found)})
    return search


MAX_FILE_AGE_MS = 7 * 86_400_000  # the file source's default maxFileAge


def _passed_over(f: ListedFile, newest: int | None) -> str:
    """Why no batch read a file of a source's folder, told by its modification time."""
    if f.stamp is None or newest is None:
        return "no batch read it"
    when = f"modified {fmt_time(f.stamp)}"
    if f.stamp > newest:
        return f"{when}, after the newest file Spark read: a batch to come reads it"
    if f.stamp < newest - MAX_FILE_AGE_MS:
        return (
            f"{when}, more than 7 days (the file source's default maxFileAge) before the newest file Spark read "
            f"({fmt_time(newest)}): the source passes over a file that old when it comes"
        )
    return f"{when}, among the files Spark read: it was not there when Spark listed the folder, or the source's options passed over it"


MAX_UNLISTED = 1_000  # files of a source's folder that no batch read, searched for keys never found


def _unlisted(logged: list[ListedFile], fs: list[ListedFile], roots: tuple[str, ...] = ()) -> tuple[list[ListedFile], list[str]]:
    """The data files in the folders a source's files are in (where Spark listed them, where they are
    now, and its folder under each input root given: the source's folder beside the archive that
    ``cleanSource`` moved the files read to) that no batch of any source read (no entry of its log):
    newer than the last batch, or passed over (older than the source's ``maxFileAge`` when they came,
    or written as Spark listed). And each folder that could not be listed, with why (where Spark
    listed files and they moved since, the folder is gone: not said)."""
    read = {f.uri.rsplit("/", 1)[-1] for f in logged}
    first = fs[0]
    logged_at = [p for p in (_local(f.uri) for f in fs) if p]
    now_at = _folder([f.path for f in fs if f.path])
    base = _folder(logged_at).rstrip("/").rsplit("/", 1)[-1] if logged_at else ""
    under = [_join(local_path(r) if is_local(r) else r, base) for r in roots if base]
    folders = [x for x in dict.fromkeys((_folder(logged_at), now_at, *under)) if x]
    out: list[ListedFile] = []
    refused: list[str] = []
    for folder in folders:
        if not _may(folder):
            refused.append(f"{folder} (outside the folders that may be opened)")
            continue
        try:
            entries = open_storage(folder, check=False).listdir("")
        except (OSError, StateLensError) as err:
            if folder == now_at:  # the files read are there: listing it should have worked
                refused.append(f"{folder} ({getattr(err, 'message', None) or err})")
            continue
        for e in sorted(entries, key=lambda e: e.name):
            if e.is_dir or e.name in read or e.name.startswith(("_", ".")) or e.size > MAX_FILE_BYTES:
                continue
            fmt = _format(e.name, None)  # a file of the source's format (by its name, as the files read are named)
            if (fmt != first.format and not (fmt is None and _format(first.uri, None) is None)) or len(out) >= MAX_UNLISTED:
                continue
            out.append(
                ListedFile(
                    first.source_index,
                    first.source,
                    None,
                    _join(folder, e.name),
                    _join(folder, e.name),
                    first.format,
                    stamp=e.mtime_ns // 1_000_000,
                )
            )
            read.add(e.name)
    return out, refused


class RecordSearch:
    """The records of one source whose column holds one of some values, over one listing of the input
    (the fate's ``RecordFinder``: the other side of a join, the record a duplicate repeated)."""

    def __init__(self, listing: Listing) -> None:
        self.files = [f for f in listing[0] if f.path is not None]

    def __call__(self, source: str, column: str, values: list[str]) -> list[InputRecord]:
        files = [f for f in self.files if f.source == source]
        found = _exact(files, values, [column]) if files and _has_column(files, column) else []
        return [r for r in found if not r.unreadable]

    def columns(self, source: str | None = None) -> set[str]:
        """The columns of every source's files (their first readable file's header, record or schema)."""
        out: set[str] = set()
        for name in {f.source for f in self.files if source is None or f.source == source}:
            out |= _columns([f for f in self.files if f.source == name])
        return out


def _columns(files: list[ListedFile]) -> set[str]:
    for f in files:
        assert f.path is not None
        try:
            if f.format == "parquet":
                import pyarrow.parquet as pq

                with _local_copies([f.path]) as local:
                    return set(pq.read_schema(local[f.path]).names)
            if f.format == "text":
                return {"value"}
            lines = [line.decode("utf-8", "replace").strip() for line in _read(f.path).split(b"\n", 100)[:100]]
            lines = [line for line in lines if line]
            if not lines:
                continue
            if f.format == "csv":
                return set(next(csv.reader([lines[0]])))
            return {k for line in lines if isinstance(obj := _parse_line(line, "json", None, 0), dict) for k in obj}
        except (OSError, ValueError):
            continue
    return set()


def _has_column(files: list[ListedFile], column: str) -> bool:
    """Whether a source's files have a column (its first readable file's header, records or schema)."""
    return column in _columns(files)


def _exact(files: list[ListedFile], keys: list[str], columns: list[str]) -> list[InputRecord]:
    out: list[InputRecord] = []
    parquet = [f for f in files if f.format == "parquet"]
    for f in files:
        if f.format in ("json", "csv", "text"):
            out += _text_file(f, keys, columns)
    if parquet:
        out += _parquet(parquet, keys, columns, near=False)
    return out


REST = "*"  # in a list of columns to search: then every other column


def _pick(values: dict[str, Any], key: str, columns: list[str]) -> str | None:
    """The column holding exactly the key: the first of ``columns`` that does ([]: any column; ending
    in ``REST``: those first, then any other)."""
    if columns and columns[-1] == REST:
        columns = [*columns[:-1], *(c for c in values if c not in columns)]
    return next((c for c in columns or list(values) if c in values and _text(values[c]) == key), None)


def _text(v: Any) -> str | None:
    if v is None or isinstance(v, (dict, list)):
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _lines_with(data: bytes, needle: bytes) -> list[tuple[int, bytes]]:
    """(1-based line number, line) of every line holding ``needle``: a byte search, lines cut around hits."""
    out: list[tuple[int, bytes]] = []
    pos, line_no, counted_to = 0, 1, 0
    while True:
        hit = data.find(needle, pos)
        if hit < 0:
            return out
        start = data.rfind(b"\n", 0, hit) + 1
        end = data.find(b"\n", hit)
        end = len(data) if end < 0 else end
        line_no += data.count(b"\n", counted_to, start)
        counted_to = start
        out.append((line_no, data[start:end]))
        pos = end + 1


def _text_file(f: ListedFile, keys: list[str], columns: list[str]) -> list[InputRecord]:
    assert f.path is not None
    try:
        data = _read(f.path)
    except (OSError, StateLensError):
        return []
    header: list[str] | None = None
    if f.format == "csv":
        first = data.split(b"\n", 1)[0].decode("utf-8", "replace").strip("\r")
        header = next(csv.reader([first]))
    out: list[InputRecord] = []
    for key in keys:
        seen: set[int] = set()
        for line_no, line in _lines_with(data, key.encode()):
            if line_no in seen:
                continue
            seen.add(line_no)
            text = line.decode("utf-8", "replace").rstrip("\r")
            values = _parse_line(text, f.format, header, line_no)
            if values is None and f.format == "json" and text.strip():
                # Spark's JSON reader makes a line it cannot parse a row of nulls (PERMISSIVE, its default)
                out.append(
                    InputRecord(key, f.source, f.source_index, f.batch_id, f.uri, line_no, "", {}, unreadable="not valid JSON")
                )
                continue
            if values is None:
                continue
            col = _pick(values, key, columns)
            if col is not None:
                row = line_no - (1 if header is not None else 0)
                out.append(InputRecord(key, f.source, f.source_index, f.batch_id, f.uri, row, col, values))
    return out


def _parse_line(text: str, fmt: str, header: list[str] | None, line_no: int) -> dict[str, Any] | None:
    if fmt == "json":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            return None
        return obj if isinstance(obj, dict) else None
    if fmt == "csv":
        if header is None or line_no == 1:
            return None
        fields = next(csv.reader([text]), [])
        return dict(zip(header, fields, strict=False))
    return {"value": text}


_DUCK: list[Any] = []  # one in-memory DuckDB per process; each search has a cursor of its own
_DUCK_LOCK = threading.Lock()


def _duck() -> Any:
    """A connection for one search (a cursor of the process's DuckDB: opening a database costs 20 ms)."""
    with _DUCK_LOCK:
        if not _DUCK:
            import duckdb

            _DUCK.append(duckdb.connect(":memory:"))
        return _DUCK[0].cursor()


def _parquet(files: list[ListedFile], keys: list[str], columns: list[str], near: bool) -> list[InputRecord]:
    """Records of the keys (or, ``near``, of look-alikes) in Parquet files, read by DuckDB."""
    with _local_copies([f.path for f in files if f.path]) as local:
        by_path = {local[f.path]: f for f in files if f.path}
        return _parquet_local(by_path, keys, columns, near)


@contextlib.contextmanager
def _local_copies(locs: list[str]) -> Iterator[dict[str, str]]:
    """Local paths of the files (DuckDB and pyarrow's Parquet readers open paths): a local file is
    itself, a remote one is copied to a temporary folder removed afterwards."""
    remote = [loc for loc in locs if not is_local(loc)]
    if not remote:
        yield {loc: loc for loc in locs}
        return
    with tempfile.TemporaryDirectory(prefix="inputs-", dir=scratch.session_dir()) as tmp:
        out = {loc: loc for loc in locs if is_local(loc)}
        for i, loc in enumerate(remote):
            dest = os.path.join(tmp, f"{i}-{loc.rsplit('/', 1)[-1]}")
            with open(dest, "wb") as f:
                f.write(_read(loc))
            out[loc] = dest
        yield out


def _parquet_local(by_path: dict[str, ListedFile], keys: list[str], columns: list[str], near: bool) -> list[InputRecord]:
    con = _duck()
    try:
        schema = con.execute("DESCRIBE SELECT * FROM read_parquet(?, union_by_name = true)", [list(by_path)]).fetchall()
        names = [r[0] for r in schema]
        searchable = [n for n, t in ((r[0], r[1]) for r in schema) if "VARCHAR" in t or "INT" in t]
        cols = [c for c in columns if c in names] or searchable
        if columns and columns[-1] == REST:
            cols = [*cols, *(c for c in searchable if c not in cols)]
        if not cols:
            return []
        out: list[InputRecord] = []
        for key in keys:
            if near:
                norm, dig = normalize(key), digits(key)
                cond = " OR ".join(
                    f"(lower(regexp_replace(CAST({_q(c)} AS VARCHAR), '[^0-9A-Za-z]', '', 'g')) = ? "
                    f"OR (length(?) >= 2 AND regexp_replace(CAST({_q(c)} AS VARCHAR), '[^0-9]', '', 'g') = ?))"
                    for c in cols
                )
                params: list[Any] = [list(by_path)] + [x for _ in cols for x in (norm, dig, dig)]
            else:
                cond = " OR ".join(f"CAST({_q(c)} AS VARCHAR) = ?" for c in cols)
                params = [list(by_path)] + [key for _ in cols]
            rows = rows_of(  # (to_pylist of zoned times imports pandas)
                con.sql(
                    f"SELECT *, filename AS __file, file_row_number AS __row FROM read_parquet(?, union_by_name = true, "
                    f"filename = true, file_row_number = true) WHERE {cond}",
                    params=params,
                ).to_arrow_table()
            )
            for r in rows:
                f = by_path[r.pop("__file")]
                row = int(r.pop("__row")) + 1
                if near:
                    col, reason = _near_column(r, key, cols)
                    if col is not None:
                        out.append(InputRecord(key, f.source, f.source_index, f.batch_id, f.uri, row, col, r, reason))
                else:
                    col = _pick(r, key, cols)
                    if col is not None:
                        out.append(InputRecord(key, f.source, f.source_index, f.batch_id, f.uri, row, col, r))
        return out
    finally:
        con.close()


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _near_column(values: dict[str, Any], key: str, columns: list[str]) -> tuple[str | None, str | None]:
    for c in columns or list(values):
        v = _text(values.get(c))
        if v is not None:
            reason = near_miss_reason(key, v)
            if reason:
                return c, reason
    return None, None


MAX_NEAR = 20  # near-miss records kept per key


def _near(files: list[ListedFile], keys: list[str], columns: list[str]) -> list[InputRecord]:
    """Records whose key column only looks like a key (case, whitespace, punctuation, digits)."""
    out: list[InputRecord] = []
    text = [f for f in files if f.format in ("json", "csv", "text")]
    for key in keys:
        needles = {normalize(key)} | ({digits(key)} if len(digits(key)) >= 2 else set())
        found: list[InputRecord] = []
        for f in text:
            assert f.path is not None
            try:
                data = _read(f.path)
            except (OSError, StateLensError):
                continue
            folded = re.sub(rb"[^0-9a-z\n]", b"", data.lower())  # the lines keep their numbers
            header = next(csv.reader([data.split(b"\n", 1)[0].decode("utf-8", "replace")])) if f.format == "csv" else None
            lines = data.split(b"\n")
            for needle in needles:
                for line_no, _ in _lines_with(folded, needle.encode()):
                    values = _parse_line(lines[line_no - 1].decode("utf-8", "replace").rstrip("\r"), f.format, header, line_no)
                    if values is None:
                        continue
                    col, reason = _near_column(values, key, columns)
                    if col is not None and not any(r.file == f.uri and r.row == line_no for r in found):
                        row = line_no - (1 if header is not None else 0)
                        found.append(InputRecord(key, f.source, f.source_index, f.batch_id, f.uri, row, col, values, reason))
                    if len(found) >= MAX_NEAR:
                        break
        parquet = [f for f in files if f.format == "parquet"]
        if parquet and len(found) < MAX_NEAR:
            found += _parquet(parquet, [key], columns, near=True)[: MAX_NEAR - len(found)]
        out += found
    return out


# --------------------------------------------------------------------------- a file sink


@dataclass(frozen=True)
class SinkRow:
    batch_id: int | None  # None: a compacted log lists its file and the batch cannot be told
    batches: tuple[int, int]  # the batches it may have been written in (first, last)
    file: str
    values: dict[str, Any]
    # how its batch was told where no sink log names it: "the folder's layout", "the file's time ...", or
    # NOT_TOLD (neither tells: a foreachBatch folder's file); "": the sink's log told it
    told: str = ""


NOT_TOLD = "nothing"


# a folder written by a foreachBatch function names its batch in its path (``batch=5/``, ``batch_id=5``,
# ``batch-5.json``, ``epoch_5``), or no way at all
_BATCH_IN_PATH = re.compile(r"(?:^|[/_.-])(?:batch_?id|batchid|batch|epoch)[=_-]?(\d+)(?=[/_.-]|$)", re.I)


def batch_windows(checkpoint: str) -> dict[int, tuple[int, int]]:
    """Each committed batch's window in time (ns): from its offsets' writing to its commit's. What a
    batch's sink writes, a foreachBatch function's files too, is written within it."""
    storage = open_storage(checkpoint)
    try:
        offsets = {int(e.name): e.mtime_ns for e in storage.listdir("offsets") if e.name.isdigit()}
        commits = {int(e.name): e.mtime_ns for e in storage.listdir("commits") if e.name.isdigit()}
    except (OSError, StateLensError):
        return {}
    return {b: (offsets[b], t) for b, t in commits.items() if b in offsets and offsets[b] <= t}


def _told_batch(path: str, mtime_ns: int, windows: dict[int, tuple[int, int]]) -> tuple[int | None, str]:
    """A foreachBatch file's batch: named in its path, else the batch whose window holds its time."""
    named = _BATCH_IN_PATH.findall(path)
    if named:
        return int(named[-1]), "the folder's layout"
    held = [b for b, (start, end) in windows.items() if start <= mtime_ns <= end]
    if len(held) == 1:
        return held[0], "the file's time, within the batch's (its offsets to its commit)"
    return None, NOT_TOLD


def _search_batch_folder(
    storage: Any, folder: str, keys: list[str], columns: list[str], windows: dict[int, tuple[int, int]]
) -> dict[str, list[SinkRow]]:
    """The keys' rows in a folder a foreachBatch function writes (no sink log): every data file under
    it, each with its batch as its path or its time tells (else any of the batches)."""
    entries = [
        e for e in storage.walk("") if not any(p.startswith((".", "_")) for p in e.path.split("/")) and _format(e.name, None)
    ]
    base = local_path(folder) if is_local(folder) else folder
    by_path: dict[str, tuple[int | None, str, str]] = {}
    files = []
    for e in entries:
        path = _join(base, e.path)
        batch, told = _told_batch(e.path, e.mtime_ns, windows)
        by_path[path] = (batch, told, e.path)
        files.append(ListedFile(-1, "sink", batch, path, path, _format(e.name, None) or ""))
    found = _exact([f for f in files if f.format != "parquet"], keys, columns)
    parquet = [f for f in files if f.format == "parquet"]
    if parquet:
        found += _parquet(parquet, keys, columns, near=False)
    span = (min(windows), max(windows)) if windows else (0, 0)
    out: dict[str, list[SinkRow]] = {k: [] for k in keys}
    for r in found:
        batch, told, rel = by_path[r.file]
        out[r.key].append(SinkRow(batch, (batch, batch) if batch is not None else span, rel, r.values, told))
    return out


def sink_folder(description: str | None, given: str | None) -> str | None:
    """The file sink's folder: the one given, else the progress' ``FileSink[file:/out]``."""
    if given:
        return given
    m = re.fullmatch(r"FileSink\[(.+)\]", (description or "").strip())
    if not m:
        return None
    return _local(m.group(1))


def sink_column_names(folder: str) -> frozenset[str] | None:
    """The columns of a file sink's rows (its first readable data file's header, records or schema);
    None: they cannot be told (no file, storage only Spark reads, unreadable)."""
    if not is_local(folder) and not reads_natively(folder):
        return None
    try:
        storage = open_storage(folder, check=False)
        entries = [e for e in storage.listdir("") if not e.is_dir and not e.name.startswith((".", "_"))]
    except (OSError, StateLensError):
        return None
    entries.sort(key=lambda e: e.size == 0)  # a batch that emitted nothing wrote an empty file: no columns in it
    files = [
        ListedFile(-1, "sink", None, path, path, fmt)
        for e in entries
        if (fmt := _format(e.name, None)) and (path := _join(local_path(folder) if is_local(folder) else folder, e.name))
    ]
    found = _columns(files[:5])
    return frozenset(found) if found else None


def sink_logs(storage: Storage) -> tuple[list[Entry], dict[str, bytes]]:
    """A file sink folder's ``_spark_metadata`` log files, oldest first, and their bytes."""
    logs = sorted(
        (e for e in storage.listdir("_spark_metadata") if re.fullmatch(r"\d+(\.compact)?", e.name)),
        key=lambda e: int(e.name.split(".")[0]),
    )
    return logs, storage.read_many([e.path for e in logs], {e.path: e for e in logs})


def foreign_sink(info: CheckpointInfo, folder: str) -> str | None:
    """Why a file sink's folder holds another query's output, not this checkpoint's (None: nothing
    says so): a Declarative Pipeline flow's version superseded by a full refresh (the table was
    rewritten by the newer version), or a log past this query's last batch."""
    parts = tuple(info.path.rstrip("/").split("/"))
    flow = flow_at(parts)
    if flow is not None:
        try:
            versions = [
                int(e.name) for e in open_storage("/".join(parts[:-1]), check=False).listdir("") if e.is_dir and e.name.isdigit()
            ]
        except (OSError, StateLensError) as e:  # a newer version may have rewritten the table: not credited
            return f"whether a full refresh rewrote the table cannot be told: the flow's versions cannot be listed ({getattr(e, 'message', None) or e})"
        newer = max(versions, default=flow.version)
        if newer > flow.version:
            return (
                f"the table was rewritten by the full refresh that started version {newer} of flow {flow.flow}: its files are "
                f"version {newer}'s output, not this checkpoint's (version {flow.version}); ask version {newer}'s checkpoint "
                f"({'/'.join(parts[:-1])}/{newer})"
            )
    try:
        logs, _ = sink_logs(open_storage(folder, check=False))
    except (OSError, StateLensError):
        return None  # its search says why it cannot be read
    last_log = max((int(e.name.split(".")[0]) for e in logs), default=-1)
    last = info.batches[-1].batch_id if info.batches else -1
    if last_log > last:
        return f"its log holds batch {last_log}, past this query's last batch {last}: another query writes it"
    return None


def sink_log_owner(logs: list[Entry], texts: dict[str, bytes]) -> dict[str, tuple[int | None, tuple[int, int], str]]:
    """Each file a file sink's log lists -> (the batch that wrote it, the batches it may be of, its
    path as logged), from the log files (``_spark_metadata/<batch>``, oldest first) and their bytes.
    A ``<n>.compact`` log lists every file so far: the ones no earlier log named are its batch's, or,
    where batches since the previous compaction lost their own logs, one of those (batch None)."""
    owner: dict[str, tuple[int | None, tuple[int, int], str]] = {}
    kept = {int(e.name) for e in logs if e.name.isdigit()}
    last_compact = -1
    for log in logs:
        batch = int(log.name.split(".")[0])
        compact = log.name.endswith(".compact")
        lost = [b for b in range(last_compact + 1, batch) if b not in kept] if compact else []
        for line in texts[log.path].decode("utf-8", "replace").splitlines()[1:]:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            logged = str(entry.get("path", ""))
            name = logged.rsplit("/", 1)[-1]
            if entry.get("action", "add") != "add" or not name or name in owner:
                continue
            owner[name] = (None, (lost[0], batch), logged) if lost else (batch, (batch, batch), logged)
        if compact:
            last_compact = batch
    return owner


def search_sink(
    folder: str, keys: list[str], columns: list[str], windows: dict[int, tuple[int, int]] | None = None
) -> tuple[dict[str, list[SinkRow]], str | None]:
    """The rows of each key in the files a file sink wrote, each with the batch that wrote it
    (``_spark_metadata/<batch>``; a ``<n>.compact`` log's own files are the ones no kept log names).
    A folder without that log is one a ``foreachBatch`` function writes, searched with ``windows``
    (``batch_windows``: each batch's files told by their path or their time). Returns (key -> rows,
    why the sink could not be searched)."""
    try:
        check_allowed(folder, "sink")
    except StateLensError:
        return {}, f"the sink folder {folder} is outside the allowed roots"
    if not is_local(folder) and not reads_natively(folder):
        return {}, f"the sink folder {folder} is on storage only Spark reads"
    storage = open_storage(folder, check=False)
    try:
        listed = {e.name: e for e in storage.listdir("")}
        logs, texts = sink_logs(storage)
    except (OSError, StateLensError) as e:
        return {}, f"the sink folder {folder} cannot be read ({getattr(e, 'message', None) or e})"
    if "_spark_metadata" not in listed:
        if "_delta_log" in listed:
            return {}, f"the sink folder {folder} is a Delta table (its log is not read yet)"
        if windows is None:
            return {}, f"the sink folder {folder} has no _spark_metadata log (give where it is now: --sink)"
        try:
            return _search_batch_folder(storage, folder, keys, columns, windows), None
        except (OSError, StateLensError) as e:
            return {}, f"the sink folder {folder} cannot be read ({getattr(e, 'message', None) or e})"
    owner = sink_log_owner(logs, texts)
    files = []
    for name, (written_in, _, _) in owner.items():
        path = _join(local_path(folder) if is_local(folder) else folder, name)
        fmt = _format(name, None)
        if name in listed and not listed[name].is_dir and fmt:
            files.append(ListedFile(-1, "sink", written_in, path, path, fmt))
    found = _exact([f for f in files if f.format != "parquet"], keys, columns)
    parquet = [f for f in files if f.format == "parquet"]
    if parquet:
        found += _parquet(parquet, keys, columns, near=False)
    out: dict[str, list[SinkRow]] = {k: [] for k in keys}
    for r in found:
        written_in, span, _ = owner[r.file_name]
        out[r.key].append(SinkRow(written_in, span, r.file_name, r.values))
    return out, None
