"""Read StreamingQueryProgress from Spark event logs or JSON-lines files, for one checkpoint.

Accepted paths (local, ``file://``, S3, ADLS and GCS read natively, or any URI Spark can read: hdfs:// ...):

* an event log file: ``local-1700000000000``, ``app-...``, plain or compressed as Spark writes it
  (``spark.eventLog.compress``): zstd frames, lz4-java's ``LZ4Block`` stream or snappy-java's
  stream; the codec is told by the file's first bytes, not its name;
* a rolling event log folder ``eventlog_v2_<app>`` (``events_<n>_<app>[.codec]`` read in order);
* a folder of such logs (``spark.eventLog.dir``): every application in it is read and the
  checkpoint's query is picked out by its id;
* a file of StreamingQueryProgress JSON lines (a listener's ``event.progress.json`` or
  ``query.lastProgress`` per line).

The codecs are decoded by ``spark_io.logs.codecs`` (pyarrow's lz4, snappy and zstd).
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from statelens.analysis.core.errors import InvalidInput, ProgressNotFound, ProgressReadError, StateLensError
from statelens.analysis.core.model import CheckpointInfo
from statelens.analysis.runs.progress import ProgressLog, collect, progress_of
from statelens.spark_io.logs.codecs import Cut, codec_of, decompress
from statelens.spark_io.runtime.engine_choice import reads_natively
from statelens.spark_io.storage import Entry, Storage, open_storage
from statelens.spark_io.storage.gate import check_allowed

_ROLLING_EVENTS = re.compile(r"^events_(\d+)_")
MAX_BYTES = 2 * 1024**3  # a decoded event log larger than this is refused (say so) rather than read


# --------------------------------------------------------------------------- codecs


def decode(data: bytes, name: str, notes: list[str]) -> tuple[str, str]:
    """(text, codec) of one event log file. A log still being written (``.inprogress``) may end
    inside a compressed block: what comes before is used and ``notes`` says so; any other file
    cut short is an error."""
    codec = codec_of(data)
    try:
        raw, _ = decompress(data)
    except Cut as cut:
        if not name.endswith(".inprogress"):
            raise ProgressReadError(f"{name}: {cut}. The file is damaged or was cut while copying.") from cut
        raw = cut.decoded
        notes.append(
            f"{name} is still being written: its last compressed block is incomplete ({cut}), so progress "
            "reported after it is missing until Spark flushes it."
        )
    except (OSError, ValueError, pa.ArrowException) as e:
        raise ProgressReadError(f"{name} could not be decompressed as {codec} ({e}): the file is damaged or cut.") from e
    return raw.decode("utf-8", errors="replace"), codec


# --------------------------------------------------------------------------- files


def _events_order(name: str) -> int:
    m = _ROLLING_EVENTS.match(name)
    return int(m.group(1)) if m else 0


def _candidates(storage: Storage, top: Entry) -> list[tuple[str, list[Entry]]]:
    """(label, files in reading order): one entry per event log or progress file at ``storage``
    (one listing per folder)."""
    name = storage.uri.rstrip("/").rsplit("/", 1)[-1]
    if not top.is_dir:
        return [(name, [top])]
    if name.startswith("eventlog_v2_"):
        events = [e for e in storage.listdir("") if not e.is_dir and e.name.startswith("events_")]
        return [(name, sorted(events, key=lambda e: _events_order(e.name)))]
    out: list[tuple[str, list[Entry]]] = []
    for e in storage.listdir(""):
        if e.name.startswith("."):
            continue
        if e.is_dir and e.name.startswith("eventlog_v2_"):
            events = [x for x in storage.listdir(e.path) if not x.is_dir and x.name.startswith("events_")]
            out.append((e.name, sorted(events, key=lambda x: _events_order(x.name))))
        elif not e.is_dir:
            out.append((e.name, [e]))
    return out


_PROGRESS_SOURCES = "an event log file, a spark.eventLog.dir folder or a progress JSON-lines file"
_ERROR_SOURCES = "the failed run's error text or its event log"


def _read_native(path: str, wanted: str) -> list[tuple[str, list[tuple[str, bytes]]]]:
    storage = open_storage(path, check=False)
    try:
        top = storage.info("")
        if top is None:
            raise ProgressNotFound(f"{path} does not exist: give {wanted}.")
        groups = _candidates(storage, top)
        read = storage.read_many([e.path for _, files in groups for e in files], {e.path: e for _, fs in groups for e in fs})
    except OSError as e:
        raise ProgressReadError(f"{path} cannot be read ({e.strerror or e}).") from e
    return [(label, [(e.name or label, read[e.path]) for e in files]) for label, files in groups]


def _read_spark(uri: str) -> list[tuple[str, list[tuple[str, bytes]]]]:
    """Any URI Spark can read, fetched with its binaryFile reader (works over Spark Connect)."""
    from statelens.spark_io.runtime.session import get_spark, spark_message

    try:
        rows = (
            get_spark()
            .read.format("binaryFile")
            .option("recursiveFileLookup", "true")
            .load(uri)
            .select("path", "content")
            .toArrow()
            .to_pylist()
        )
    except Exception as e:
        raise ProgressNotFound(f"Spark could not read {uri}: {spark_message(e, uri)}") from e
    groups: dict[str, list[tuple[str, bytes]]] = {}
    for r in rows:
        parts = urllib.parse.unquote(urllib.parse.urlparse(r["path"]).path).rstrip("/").split("/")
        name, parent = parts[-1], parts[-2] if len(parts) > 1 else ""
        label = parent if parent.startswith("eventlog_v2_") else name
        if name.startswith(".") or (parent.startswith("eventlog_v2_") and not name.startswith("events_")):
            continue
        groups.setdefault(label, []).append((name, r["content"] or b""))
    return [(label, sorted(files, key=lambda f: _events_order(f[0]))) for label, files in sorted(groups.items())]


def _records(label: str, text: str, query_id: str, notes: list[str]) -> Iterator[dict[str, Any]]:
    """JSON objects of the lines that can hold this query's progress (others are not parsed)."""
    lines = text.split("\n")
    bad = 0
    for i, line in enumerate(lines):
        # only progress lines, the query's SQL executions (its plans) and the environment (its time zone) are parsed
        if (
            query_id not in line
            and '"batchId"' not in line
            and not line.startswith(('{"Event":"SparkListenerEnvironmentUpdate"', '{"Event":"SparkListenerApplicationEnd"'))
        ):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if i < len(lines) - 1 or line.strip():
                bad += 1
            continue
        if isinstance(obj, dict):
            yield obj
    if bad:
        notes.append(
            f"{label}: {bad} line(s) naming the query are not complete JSON (a log still being written is cut at its end)."
        )


def _groups(raw: str, wanted: str) -> list[tuple[str, list[tuple[str, bytes]]]]:
    """(label, files' names and bytes) of every log under a path, local or through Spark."""
    check_allowed(raw, "event log")
    return _read_native(raw, wanted) if reads_natively(raw) else _read_spark(raw)


def _decoded(
    path: str, groups: list[tuple[str, list[tuple[str, bytes]]]], notes: list[str], refusal: str
) -> Iterator[tuple[str, str, str, str]]:
    """(label, name, text, codec) of each file in reading order; reading stops, with ``refusal``, once
    more than ``MAX_BYTES`` are decoded."""
    total = 0
    for label, parts in groups:
        for name, data in parts:
            text, codec = decode(data, name, notes)
            total += len(text)
            if total > MAX_BYTES:
                raise ProgressReadError(f"{path} holds more than {MAX_BYTES // 1024**3} GB{refusal}")
            yield label, name, text, codec


def log_fingerprint(path: str | None) -> tuple[int, int]:
    """Changes when an event log grows (a running application): (newest modification time, total
    size) of the file, or of the files directly in the folder and its eventlog_v2_* folders."""
    if not path or not reads_natively(path):
        return (0, 0)
    try:
        storage = open_storage(path, what="event log")
        top = storage.info("")
        if top is None:
            return (0, 0)
        entries = [e for _, files in _candidates(storage, top) for e in files]
    except (OSError, StateLensError):
        return (0, 0)
    return max((e.mtime_ns for e in entries), default=0), sum(e.size for e in entries)


def read_error_source(path: str) -> str:
    """The text of a failed run's error: a text file (``query.exception()``, a driver log) or its
    event log in any form ``read_progress`` takes (file, ``eventlog_v2_*`` folder, compressed)."""
    groups = _groups(path.strip(), _ERROR_SOURCES)
    texts = [text for _, _, text, _ in _decoded(path, groups, [], ": point to the one failed run's log.")]
    if not texts:
        raise ProgressNotFound(f"{path} is an empty folder: give {_ERROR_SOURCES}.")
    return "\n".join(texts)


def repartition_runs(path: str) -> list[tuple[int, int]]:
    """(start ms, end ms) of each offline state repartition an application in ``path`` ran: its jobs
    run stages named ``repartition at ...`` (Spark 4.2+'s ``StreamingCheckpointManager.repartition``),
    each with the job that reads the stores before it; jobs of one repartition follow each other."""
    groups = _groups(path.strip(), "a Spark event log")
    runs: list[tuple[int, int]] = []
    for _, _, text, _ in _decoded(path, groups, [], ": point to the application's own event log."):
        jobs: list[tuple[int, int, bool]] = []  # (start, end, a repartition stage)
        started: dict[int, tuple[int, bool]] = {}
        for line in text.split("\n"):
            if not line.startswith(('{"Event":"SparkListenerJobStart"', '{"Event":"SparkListenerJobEnd"')):
                continue
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue
            if e["Event"] == "SparkListenerJobStart":
                names = [str(s.get("Stage Name", "")) for s in e.get("Stage Infos", [])]
                started[e["Job ID"]] = (int(e.get("Submission Time", 0)), any(n.startswith("repartition at ") for n in names))
            elif e["Job ID"] in started:
                start, ours = started.pop(e["Job ID"])
                jobs.append((start, int(e.get("Completion Time", start)), ours))
        jobs.sort()
        run: list[int] | None = None
        for i, (start, end, ours) in enumerate(jobs):
            if not ours:
                continue
            begin = jobs[i - 1][0] if i and not jobs[i - 1][2] else start  # the read before it
            if run is not None and begin <= run[1] + 5_000:
                run[1] = max(run[1], end)
            else:
                if run is not None:
                    runs.append((run[0], run[1]))
                run = [begin, end]
        if run is not None:
            runs.append((run[0], run[1]))
    return sorted(runs)


def query_sinks(path: str, notes: list[str]) -> dict[str, str]:
    """Each query in an event log (or progress JSON lines) -> its sink's description as its progress
    says it (``FileSink[file:/lake/silver]``, ``ForeachBatchSink``): the log is read once for every query.
    Lines that are not complete JSON are said in ``notes``."""
    groups = _groups(path.strip(), _PROGRESS_SOURCES)
    if not groups:
        raise ProgressNotFound(f"{path} is an empty folder: no event log or progress file in it.")
    out: dict[str, str] = {}
    for _, name, text, _ in _decoded(path, groups, notes, " of event logs: point to the applications' logs."):
        for record in _records(name, text, '"sink"', notes):  # every progress line holds its sink
            p = progress_of(record)
            description = ((p or {}).get("sink") or {}).get("description")
            if p and p.get("id") and description:
                out[str(p["id"])] = str(description)
    return out


def read_progress(path: str, info: CheckpointInfo) -> ProgressLog:
    """The progress of the checkpoint's query in ``path`` (see the module doc for what it may be)."""
    raw = path.strip()
    if not raw:
        raise InvalidInput(
            "No event log path given: enter a Spark event log, a spark.eventLog.dir folder or a progress JSON-lines file."
        )
    groups = _groups(raw, _PROGRESS_SOURCES)
    if not groups:
        raise ProgressNotFound(f"{path} is an empty folder: no event log or progress file in it.")
    qid = info.query_id or ""
    notes: list[str] = []
    records: list[dict[str, Any]] = []
    files: list[str] = []
    event_log = False
    for label, name, text, codec in _decoded(path, groups, notes, " of event logs: point to the one application's log."):
        found = list(_records(name, text, qid, notes)) if qid else []
        if any((progress_of(r) or {}).get("id") == qid for r in found):
            shown = os.path.join(label, name) if label != name else name
            files.append(shown if codec == "none" else f"{shown} ({codec})")
        event_log = event_log or '"Event":' in text[:2000]
        records += found
    last = info.batches[-1].batch_id if info.batches else None
    return collect(records, info.query_id, path, "event log" if event_log else "json lines", files, notes, last)
