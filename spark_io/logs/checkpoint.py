"""Checkpoint log reader in plain Python: no JVM, local folders and object stores (``spark_io.storage``).

A Structured Streaming checkpoint folder holds::

    metadata                      {"id": "<query id>"}
    offsets/<batch>               "v1", batch metadata JSON (watermark, timestamp, conf), source offsets
    commits/<batch>               "v1", {"nextBatchWatermarkMs": ...}   (present once the batch committed)
    sources/, sinks/ ...
    state/<op>/_metadata/metadata operator metadata v1 (operator name, stores, partitions)
    state/<op>/_metadata/v2/<b>   operator metadata v2 (transformWithState: state variables)
    state/<op>/_stateSchema/...   state schema v3 files
    state/<op>/<partition>/[<store>/]<version>.delta|.snapshot|.changelog|.zip, SSTs/*.sst

Batch ``N`` writes state version ``N + 1``. This module reads all of that into plain
dataclasses; it never writes anything.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from statelens.analysis.core.errors import (
    CheckpointUnreadable,
    CorruptCheckpoint,
    StateLensError,
)
from statelens.analysis.core.model import (
    DEFAULT_STORE,
    JOIN_STORES,
    JOIN_V4_ROWS,
    Batch,
    CheckpointInfo,
    OperatorInfo,
    StateFile,
    StoreInfo,
)
from statelens.analysis.core.operator_kinds import JOIN, find_kind
from statelens.analysis.inputs.sources import SourceBatch, batch_sources, offset_lines, parse_offset
from statelens.spark_io.logs.files import DIGITS, VERSIONED, Files, StorageFiles, open_files
from statelens.spark_io.storage import LocalStorage
from statelens.spark_io.storage.locations import is_local, local_path

# --------------------------------------------------------------------------- file access

if TYPE_CHECKING:  # the doctor's and the restart error's modules: read by those questions alone
    from statelens.analysis.checkpoint.doctor import DoctorReport, RunState
    from statelens.analysis.checkpoint.restart_error import RestartExplanation


# --------------------------------------------------------------------------- helpers


def _read_text(files: Files, rel: str, read: dict[str, bytes] | None = None) -> str:
    """A log file's text (``read``: files read already)."""
    data = read[rel] if read and rel in read else files.read(rel)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptCheckpoint(f"{rel} is not a text file (binary content): the file is damaged.") from e


def _log_entry(files: Files, rel: str, read: dict[str, bytes] | None = None) -> dict[str, Any]:
    """Parse a metadata log file: a version line ``vN`` then a JSON object."""
    lines = _read_text(files, rel, read).split("\n")
    if not lines or not re.fullmatch(r"v\d+", lines[0].strip()):
        raise CorruptCheckpoint(f"{rel} does not start with a version line like 'v1': the file is truncated or damaged.")
    if len(lines) < 2 or not lines[1].strip():
        raise CorruptCheckpoint(f"{rel} has no metadata after its version line: the file is truncated.")
    try:
        entry = json.loads(lines[1])
    except json.JSONDecodeError as e:
        raise CorruptCheckpoint(f"{rel} line 2 is not valid JSON ({e.msg}): the file is truncated or damaged.") from e
    if not isinstance(entry, dict):
        raise CorruptCheckpoint(f"{rel} line 2 is not a JSON object: the file is damaged.")
    return entry


MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: the last instant a date can show


def _int_field(entry: dict[str, Any], key: str, rel: str, default: int | None = 0) -> int | None:
    """A millisecond field (watermark, timestamp): an integer between 0 and year 9999."""
    v = entry.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise CorruptCheckpoint(f"{rel}: '{key}' should be an integer, found {json.dumps(v)[:40]}.")
    if not 0 <= v <= MAX_MS:
        raise CorruptCheckpoint(f"{rel}: '{key}' is {v}, not a time in milliseconds: the file is damaged.")
    return v


# --------------------------------------------------------------------------- batches


def read_query_id(files: Files) -> str | None:
    if not files.is_file("metadata"):
        return None
    text = _read_text(files, "metadata").strip()
    try:
        entry = json.loads(text.split("\n")[0]) if text else None
    except json.JSONDecodeError as e:
        raise CorruptCheckpoint(f"metadata is not valid JSON ({e.msg}): the file is damaged.") from e
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        raise CorruptCheckpoint("metadata has no query id: the file is damaged.")
    return entry["id"]


def read_batches(files: Files, damaged: list[tuple[int, str]] | None = None) -> tuple[list[Batch], dict[str, str]]:
    """Every batch in offsets/ with its commit state; and the conf of the latest batch. ``damaged``:
    offsets files that cannot be read are put there (batch, why) and left out, instead of raised."""
    offsets = files.numbered("offsets")
    commits = files.numbered("commits")
    batches: list[Batch] = []
    conf: dict[str, str] = {}
    if not offsets and commits:
        raise CorruptCheckpoint("commits/ has files but offsets/ has none: the checkpoint is damaged.")
    # every offset file (each batch's watermark, time and conf); of the commit files only the last
    # committed batch's content, as Spark reads it on restart (the others tell by being there)
    last_commit = max((b for b in offsets if b in commits), default=None)
    texts = files.read_many([*offsets.values(), *([commits[last_commit]] if last_commit is not None else [])])
    for batch_id in sorted(offsets):
        rel = f"offsets/{batch_id}"
        try:
            entry = _log_entry(files, offsets[batch_id], texts)
            watermark = _int_field(entry, "batchWatermarkMs", rel)
            timestamp = _int_field(entry, "batchTimestampMs", rel)
            raw_conf = entry.get("conf", {})
            if not isinstance(raw_conf, dict):
                raise CorruptCheckpoint(f"{rel}: 'conf' should be a JSON object.")
        except CorruptCheckpoint as e:
            if damaged is None:
                raise
            damaged.append((batch_id, e.message))
            continue
        conf = {str(k): str(v) for k, v in raw_conf.items()}
        next_wm = None
        committed = batch_id in commits
        if batch_id == last_commit:
            crel = f"commits/{batch_id}"
            next_wm = _int_field(_log_entry(files, commits[batch_id], texts), "nextBatchWatermarkMs", crel, None)
        shuffle = conf.get("spark.sql.shuffle.partitions", "")
        parts = int(shuffle) if shuffle.isdigit() and int(shuffle) > 0 else None
        batches.append(Batch(batch_id, committed, watermark or 0, timestamp or 0, next_wm, parts))
    return batches, conf


# --------------------------------------------------------------------------- operators


def _operator_metadata(files: Files, op_rel: str) -> tuple[int | None, dict[str, Any] | None]:
    """Latest operator metadata: v2 (``_metadata/v2/<batch>``) if present, else v1."""
    v2 = files.numbered(f"{op_rel}/_metadata/v2")
    if v2:
        return 2, _log_entry(files, v2[max(v2)])
    if files.is_file(f"{op_rel}/_metadata/metadata"):
        return 1, _log_entry(files, f"{op_rel}/_metadata/metadata")
    return None, None


def state_metadata_table(path: str) -> Any:
    """Spark's ``state-metadata`` table (an Arrow table) from the files, without a JVM (``StateMetadataSource``): a
    row per store each operator's newest metadata lists (v2 ``_metadata/v2/<batch>``, else v1),
    as written (a join in state format 3 lists its one ``default`` store); the first and last batch
    of ``commits/``; v2's operator properties JSON. Checkpoints before Spark 4.0 have none: no rows."""
    files = open_files(path)
    commits = sorted(files.numbered("commits"))
    lo, hi = (commits[0], commits[-1]) if commits else (-1, -1)
    rows: list[dict[str, Any]] = []
    for op_name in sorted((d for d in files.subdirs("state") if DIGITS.match(d)), key=int):
        version, meta = _operator_metadata(files, f"state/{op_name}")
        if meta is None:
            continue
        op = meta.get("operatorInfo", {})
        props = meta.get("operatorPropertiesJson") if version == 2 else None
        for store in meta.get("stateStoreInfo", []):
            if isinstance(store, dict):
                rows.append(
                    {
                        "operatorId": int(op.get("operatorId", int(op_name))),
                        "operatorName": str(op.get("operatorName", "")),
                        "stateStoreName": str(store.get("storeName", DEFAULT_STORE)),
                        "numPartitions": int(store.get("numPartitions", 0)),
                        "minBatchId": lo,
                        "maxBatchId": hi,
                        "operatorProperties": props if isinstance(props, str) else None,
                    }
                )
    import pyarrow as pa  # not at import: the log reader answers without it

    schema = pa.schema(
        [
            ("operatorId", pa.int64()),
            ("operatorName", pa.string()),
            ("stateStoreName", pa.string()),
            ("numPartitions", pa.int32()),
            ("minBatchId", pa.int64()),
            ("maxBatchId", pa.int64()),
            ("operatorProperties", pa.string()),
        ]
    )
    return pa.Table.from_pylist(rows, schema)


def _store_names_on_disk(files: Files, partition_rel: str) -> list[str]:
    names = [d for d in files.subdirs(partition_rel) if d not in ("_metadata", "SSTs", "logs")]
    if files.versioned_kinds(partition_rel) or not names:
        names.append(DEFAULT_STORE)
    return sorted(names)


def first_partition_kinds(path: str, operator_id: int) -> set[str]:
    """The kinds of state files in the operator's first partition, or its first store's folder
    there that has any (Spark writes every partition and store of an operator alike): a listing or
    two, not the whole state tree. Empty when none holds a version file yet."""
    files = open_files(path)
    op_rel = f"state/{operator_id}"
    parts = sorted((d for d in files.subdirs(op_rel) if DIGITS.match(d)), key=int)
    if not parts:
        return set()
    first = f"{op_rel}/{parts[0]}"
    for folder in [first] + [f"{first}/{s}" for s in _store_names_on_disk(files, first) if s != DEFAULT_STORE]:
        kinds = files.versioned_kinds(folder)
        if kinds:  # the first folder with versions tells (a store's checkpointing is its operator's)
            return kinds
    return set()


def read_operators(files: Files) -> list[OperatorInfo]:
    ops: list[OperatorInfo] = []
    for op_name in sorted((d for d in files.subdirs("state") if DIGITS.match(d)), key=int):
        op_rel = f"state/{op_name}"
        op_id = int(op_name)
        version, meta = _operator_metadata(files, op_rel)
        if meta is not None:
            info = meta.get("operatorInfo", {})
            stores = [
                StoreInfo(
                    str(s.get("storeName", DEFAULT_STORE)),
                    int(s.get("numPartitions", 0)),
                    int(s.get("numColsPrefixKey", 0)),
                )
                for s in meta.get("stateStoreInfo", [])
                if isinstance(s, dict)
            ]
            props: dict[str, Any] = {}
            raw_props = meta.get("operatorPropertiesJson")
            if isinstance(raw_props, str) and raw_props:
                try:
                    props = json.loads(raw_props)
                except json.JSONDecodeError:
                    props = {}
            name = str(info.get("operatorName", "unknown"))
            if find_kind(name) == JOIN and props.get("useVirtualColumnFamilies") and len(stores) == 1:
                # join state formats 3 and 4: the join's stores are column families of one store
                stores = [
                    StoreInfo(n, stores[0].num_partitions, family_of=stores[0].store_name)
                    for n in _join_families(files, op_rel, stores[0].store_name)
                ]
            ops.append(OperatorInfo(op_id, name, stores, version, props))
        else:
            # no operator metadata (checkpoints written before Spark 4.0): stores from the folders,
            # the operator from the store names and the state schema file
            parts = sorted((d for d in files.subdirs(op_rel) if DIGITS.match(d)), key=int)
            names = _store_names_on_disk(files, f"{op_rel}/{parts[0]}") if parts else [DEFAULT_STORE]
            op = OperatorInfo(op_id, "unknown", [StoreInfo(n, len(parts)) for n in names])
            op.operator_name, op.inferred_from = _infer_operator(files, op_rel, op)
            ops.append(op)
    return ops


def _join_families(files: Files, op_rel: str, store: str) -> tuple[str, ...]:
    """The stores of a join kept as column families of ``store``, as its schema file names them
    (format 4: keyWithTsToValues and tsWithKey per side; format 3: Spark's four stores)."""
    fams = _schema_families(files, f"{op_rel}/_stateSchema/{store}")
    names = tuple(f.name for f in fams if f.name.startswith(("left-", "right-"))) if not isinstance(fams, str) else ()
    return tuple(sorted(names)) if any(n.endswith(JOIN_V4_ROWS) for n in names) else JOIN_STORES


def _schema_of(files: Files, op_rel: str, store: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """Key and value fields of a store from its state schema file (partition 0), if there is one."""
    sub = "" if store == DEFAULT_STORE else f"{store}/"
    rel = f"{op_rel}/0/{sub}_metadata/schema"
    if not files.is_file(rel):
        return None
    schemas = [o for o in parse_schema_file(files.read(rel)) if o.get("type") == "struct"]
    if len(schemas) < 2:
        raise CorruptCheckpoint(f"{rel} does not hold a key and a value schema: the file is damaged.")
    return schemas[0].get("fields", []), schemas[1].get("fields", [])


def _infer_operator(files: Files, op_rel: str, op: OperatorInfo) -> tuple[str, str]:
    """The operator name Spark would record, and what it was inferred from."""
    names = [s.store_name for s in op.stores]
    if any(n.startswith(("left-", "right-")) for n in names):
        return "symmetricHashJoin", f"store names ({', '.join(names)})"
    try:
        schema = _schema_of(files, op_rel, names[0])
    except CorruptCheckpoint as e:  # said in the operator's name and reason, not hidden
        return "unknown", f"nothing: no operator metadata, and {e.message}"
    if schema is None:
        return "unknown", "nothing: no operator metadata and no state schema file"
    op.key_fields, op.value_fields = schema
    value = {f.get("name") for f in op.value_fields}
    key = {f.get("name") for f in op.key_fields}
    why = "the state schema file: value field"
    if "__dummy__" in value:
        return "dedupe", f"{why} __dummy__"
    if "expiresAtMicros" in value:
        return "dedupeWithinWatermark", f"{why} expiresAtMicros"
    if "timeoutTimestamp" in value or "groupState" in value:
        return "flatMapGroupsWithState", f"{why} timeoutTimestamp/groupState"
    if "sessionStartTime" in key or op.stores[0].num_cols_prefix_key:
        return "sessionWindowStateStoreSaveExec", "the state schema file: session key"
    return "stateStoreSave", "the state schema file: a grouping key and aggregation buffers (the remaining kind)"


def read_checkpoint(path: str, damaged: list[tuple[int, str]] | None = None) -> CheckpointInfo:
    """Everything the overview needs, from the files alone. Fast: no state file listing.

    Local folders are read directly (no JVM); other URIs through Spark (``SparkFiles``). ``damaged``:
    offsets files that cannot be read go there instead of raising (the doctor reports them).
    """
    files = open_files(path)
    files.map(files.subdirs, ["offsets", "commits", "state"])  # listed at once (remote: in parallel), read below
    batches, conf = read_batches(files, damaged)
    commits = files.numbered("commits")
    offsets = files.numbered("offsets")
    _FORMAT_VERSIONS[files.location] = checkpoint_format_version(files, conf)
    info = CheckpointInfo(
        files.location,
        read_query_id(files),
        batches,
        read_operators(files),
        conf,
        checkpoint_format_version=_FORMAT_VERSIONS[files.location],
        commits_without_offsets=sorted(set(commits) - set(offsets)),
    )
    return _repartitioned(info)


def _repartitioned(info: CheckpointInfo) -> CheckpointInfo:
    """After an offline repartition the operator metadata (v1) still records the old partition
    count: the stores get the count of the last repartition that committed."""
    done = [r for r in info.repartitions if r.committed]
    if not done:
        return info
    n = done[-1].after
    for op in info.operators:
        op.stores = [replace(s, num_partitions=n) for s in op.stores]
    return info


FORMAT_VERSION_CONF = "spark.sql.streaming.stateStore.checkpointFormatVersion"
_FORMAT_VERSIONS: dict[str, int] = {}  # location -> format version, as last read


def reader_conf(path: str) -> dict[str, str]:
    """SQL confs a State Data Source read of this checkpoint needs: its checkpoint format version
    (Spark's reader looks for v1 file names otherwise and fails on v2 checkpoints)."""
    if is_local(path):
        files = StorageFiles(LocalStorage(local_path(path)))
        version = checkpoint_format_version(files) if files.subdirs("") else 1
    else:
        version = _FORMAT_VERSIONS.get(path.strip().rstrip("/"), 1)
    return {FORMAT_VERSION_CONF: str(version)}


def checkpoint_format_version(files: Files, conf: dict[str, str] | None = None) -> int:
    """2 when the checkpoint uses the v2 format: recorded in offsets' conf by some versions, and
    always visible in the v2 commit log, whose entries list each state store's unique ids."""
    if conf and conf.get(FORMAT_VERSION_CONF) == "2":
        return 2
    commits = files.numbered("commits")
    if commits and "stateUniqueIds" in _log_entry(files, commits[max(commits)]):
        return 2
    return 1


# --------------------------------------------------------------------------- state files


def doctor(
    path: str, run: RunState | None = None, now_ms: int | None = None, repartition_runs: list[tuple[int, int]] | None = None
) -> DoctorReport:
    """The checkpoint doctor on what can be read: folders that cannot be read are among its
    problems (never taken for missing files), as is a log that cannot be read at all. ``run``: the
    query's last run as its event log tells it; ``now_ms``: the time now (default: the clock);
    ``repartition_runs``: the offline repartitions an event log shows (start, end ms)."""
    from statelens.analysis.checkpoint.doctor import damaged_offsets, examine, repartition_history, unreadable_report
    from statelens.analysis.checkpoint.integrity import integrity_problems
    from statelens.spark_io.logs.integrity import verify_sidecars

    damaged: list[tuple[int, str]] = []
    try:
        info = read_checkpoint(path, damaged)
    except CheckpointUnreadable as e:
        return unreadable_report(path, e.message, e.folder)
    unreadable: list[str] = []
    files = list_state_files(info.path, unreadable)
    report = examine(info, files, unreadable, int(time.time() * 1000) if now_ms is None else now_ms, run)
    report.problems += repartition_history(info, _repartition_seconds(info, repartition_runs or []))
    committed = set(open_files(info.path).numbered("commits"))
    report.problems[:0] = [damaged_offsets(batch, why, batch in committed, info) for batch, why in damaged]
    files_of = open_files(info.path)
    if isinstance(files_of, StorageFiles):  # through Spark each file would be a job
        sidecars = verify_sidecars(files_of, unreadable)
        report.checksums_verified = sidecars.checked
        report.problems += integrity_problems(sidecars)
    return report


def _repartition_seconds(info: CheckpointInfo, runs: list[tuple[int, int]]) -> dict[int, float]:
    """Batch -> how long each finished repartition ran, from an event log's repartition runs: the run
    between the batch's offsets and commit files' times, or the one run of a log with one repartition."""
    done = [r for r in info.repartitions if r.committed]
    if not runs or not done:
        return {}
    files = open_files(info.path)
    out: dict[int, float] = {}
    for r in done:
        start = files.entry(f"offsets/{r.batch_id}") if isinstance(files, StorageFiles) else None
        end = files.entry(f"commits/{r.batch_id}") if isinstance(files, StorageFiles) else None
        if start is not None and end is not None:
            lo, hi = start.mtime_ns // 1_000_000 - 60_000, end.mtime_ns // 1_000_000 + 60_000
            match = [run for run in runs if lo <= run[0] and run[1] <= hi]
            if len(match) == 1:
                out[r.batch_id] = (match[0][1] - match[0][0]) / 1000
                continue
        if len(done) == 1 and len(runs) == 1:
            out[r.batch_id] = (runs[0][1] - runs[0][0]) / 1000
    return out


def explain_restart_error(path: str, error: str) -> RestartExplanation:
    """A failed restart's error explained against this checkpoint's operators and stored key schemas."""
    from statelens.analysis.checkpoint.restart_error import explain

    info = read_checkpoint(path)
    return explain(error, info, read_key_fields(info.path)[0])


def _file_kind(name: str) -> tuple[str, int | None]:
    m = VERSIONED.match(name)
    if m:
        return m.group(2), int(m.group(1))
    if name.endswith(".sst"):
        return "sst", None
    return "other", None


def list_state_files(path: str, unreadable: list[str] | None = None) -> list[StateFile]:
    """Every state file with its operator, partition, store, kind, version and size.

    Hidden ``.crc`` checksum files are skipped. Schema and metadata files are reported with
    kind ``schema`` / ``metadata`` and partition -1 when they belong to the operator. A folder
    that cannot be read raises ``CheckpointUnreadable``, or is added to ``unreadable``.
    """
    files = open_files(path)
    out: list[StateFile] = []
    for rel, size in files.walk("state", unreadable):
        parts = rel.split("/")  # state, op, partition?, store?, ..., name
        if len(parts) < 3 or not DIGITS.match(parts[1]):
            continue
        op_id = int(parts[1])
        partition = int(parts[2]) if len(parts) > 3 and DIGITS.match(parts[2]) else -1
        store = DEFAULT_STORE
        if partition >= 0 and len(parts) > 4 and parts[3] not in ("_metadata", "SSTs", "logs"):
            store = parts[3]
        name = parts[-1]
        if "_metadata" in parts or "_stateSchema" in parts:
            kind, version = ("schema" if "schema" in name.lower() or "_stateSchema" in parts else "metadata"), None
        else:
            kind, version = _file_kind(name)
        out.append(StateFile(op_id, partition, store, kind, version, size, rel))
    return out


def read_schema_file(path: Path) -> list[dict[str, Any]]:
    return parse_schema_file(path.read_bytes())


def parse_schema_file(data: bytes) -> list[dict[str, Any]]:
    """The JSON schemas (key, value, ...) inside a state schema file (any format version).

    Schema files are written with Java's DataOutputStream: a version string and the
    schemas as length-prefixed JSON; we pick out every JSON object in order.
    """
    text = data.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    out: list[dict[str, Any]] = []
    i = 0
    while True:
        i = text.find("{", i)
        if i < 0:
            return out
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i += 1
            continue
        if isinstance(obj, dict):
            out.append(obj)
        i = end


# --------------------------------------------------------------------------- sources


def read_source_offsets(path: str) -> dict[int, list[SourceBatch]]:
    """What each batch read from each source (``analysis.sources``), from offsets/ and sources/.

    Returns batch -> list of ``SourceBatch`` (one per source)."""

    files = open_files(path)
    offsets: dict[int, list[Any]] = {}
    index: dict[str, int] = {}  # source id (its sources/<id> folder) -> its place in the query's sources
    numbered = files.numbered("offsets")
    sources = [
        rel
        for rel, _size in files.walk("sources")
        if len(rel.split("/")) == 3 and re.fullmatch(r"\d+(\.compact)?", rel.split("/")[2])
    ]
    read = files.read_many([*numbered.values(), *sources])
    for batch_id, rel in sorted(numbered.items()):
        pairs = offset_lines(_read_text(files, rel, read).split("\n"))
        for sid, _ in pairs:
            index.setdefault(sid, int(sid) if DIGITS.match(sid) else len(index))
        row: list[Any] = [None] * (max((index[sid] for sid, _ in pairs), default=-1) + 1)
        for sid, offset in pairs:
            row[index[sid]] = offset
        offsets[batch_id] = row
    entries: dict[int, list[dict[str, Any]]] = {}
    initial: dict[int, Any] = {}
    for rel in sources:
        parts = rel.split("/")
        if parts[1] not in index and not DIGITS.match(parts[1]):
            continue
        source = index[parts[1]] if parts[1] in index else int(parts[1])
        lines = [x for x in _read_text(files, rel, read).split("\n")[1:] if x.strip()]
        parsed = [parse_offset(x) for x in lines]
        file_entries = [p for p in parsed if isinstance(p, dict) and "path" in p]
        if file_entries:
            entries.setdefault(source, []).extend(file_entries)
        elif parts[2] == "0" and parsed:
            initial[source] = parsed[0]  # Kafka's initial offsets, the rate source's start time
    for source, es in entries.items():  # compact files repeat entries of the batches they cover
        seen: dict[tuple[str, int], dict[str, Any]] = {(e["path"], e.get("batchId", -1)): e for e in es}
        entries[source] = sorted(seen.values(), key=lambda e: (e.get("batchId", -1), e["path"]))
    return batch_sources(offsets, entries, initial)


def _schema_families(files: Files, folder: str) -> list[Any] | str:
    """The column families (``Family``) of the newest v3 schema file in ``folder``, or why not."""
    from statelens.spark_io.logs.state_schema import read_v3

    def version(rel: str) -> tuple[int, str]:
        head = rel.rsplit("/", 1)[-1].split("_")[0]
        return (int(head) if head.isdigit() else -1, rel)

    rels = sorted((rel for rel, _ in files.walk(folder) if not rel.endswith(".crc")), key=version)
    if not rels:
        return f"{folder} holds no state schema file."
    try:
        return read_v3(files.read(rels[-1]), rels[-1])
    except StateLensError as e:
        return e.message


def family_schemas(path: str, files: Files | None = None) -> dict[int, dict[str, dict[str, Any]]]:
    """Operator -> column family -> {"key", "value", "avro"}, from each store's newest v3 schema file
    (transformWithState's variables; a join's stores in format 3 and 4)."""
    files = files or open_files(path)
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for op_dir in files.subdirs("state"):
        if not op_dir.isdigit():
            continue
        for store in files.subdirs(f"state/{op_dir}/_stateSchema"):
            fams = _schema_families(files, f"state/{op_dir}/_stateSchema/{store}")
            if isinstance(fams, str):
                continue
            for f in fams:
                out.setdefault(int(op_dir), {})[f.name] = {"key": f.key, "value": f.value, "avro": f.avro}
    return out


def _family_key_fields(files: Files, folder: str, family: str) -> list[dict[str, Any]] | str:
    """The key fields of a column family from the newest v3 schema file in ``folder``, or why not."""
    fams = _schema_families(files, folder)
    if isinstance(fams, str):
        return fams
    found = {f.name: f.key for f in fams}
    return found.get(family) or f"{folder} holds no column family {family}."


def read_key_fields(path: str) -> tuple[dict[int, list[dict[str, Any]]], dict[int, str]]:
    """Each operator's state key fields, from its state schema files (no JVM): the schema of its
    main store (a join's keyWithIndexToValue), or transformWithState's first _stateSchema file.
    Returns (operator -> fields, operator -> why its schema could not be read); an operator with
    no schema file is in neither."""
    files = open_files(path)
    out: dict[int, list[dict[str, Any]]] = {}
    problems: dict[int, str] = {}
    for op in read_operators(files):
        op_rel = f"state/{op.operator_id}"
        names = [s.store_name for s in op.stores]
        store = next((n for n in names if n.endswith("keyWithIndexToValue")), names[0] if names else DEFAULT_STORE)
        folder = op.folder_of(store)
        if folder != store:  # a column family of another store (join state format 3): its v3 schema file
            family = _family_key_fields(files, f"{op_rel}/_stateSchema/{folder}", store)
            if isinstance(family, str):
                problems[op.operator_id] = family
            else:
                out[op.operator_id] = family
            continue
        try:
            schema = _schema_of(files, op_rel, store)
        except CorruptCheckpoint as e:
            problems[op.operator_id] = e.message
            continue
        if schema is not None:
            out[op.operator_id] = schema[0]
            continue
        tws = sorted(rel for rel, _ in files.walk(f"{op_rel}/_stateSchema"))
        if tws:
            structs = [o for o in parse_schema_file(files.read(tws[0])) if o.get("type") == "struct"]
            if structs:
                out[op.operator_id] = structs[0].get("fields", [])
            else:
                problems[op.operator_id] = f"{tws[0]} holds no schema: the file is damaged."
    return out, problems
