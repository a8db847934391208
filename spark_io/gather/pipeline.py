"""The pipeline under a root (``statelens pipeline``): every checkpoint at any depth, what each reads
and writes, and the hops between them (``analysis.pipeline.model``).

Per checkpoint: its ``ls`` row (health at a glance) and its file sources' logs (the files each batch
read). Every folder those files were read from, and each Declarative Pipeline table under
``--data-root``, is a table that may have a writer: its ``_spark_metadata`` log says which batch wrote
each file. Its writer is told by the Declarative Pipeline's layout (the table's current flow), else by
time (each batch's log entry written while that batch of exactly one query ran, between its
``offsets/N`` and ``commits/N``). Only listings and log files are read, no state or data file."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping

from statelens.analysis.core.errors import InvalidInput, NotACheckpoint, StateLensError, option
from statelens.analysis.core.model import CheckpointInfo
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.pipeline.fate import NEVER, HopAnswer, PipelineKeyAnswer, hop_answer, pipeline_fate
from statelens.analysis.pipeline.model import (
    Flow,
    Hop,
    Pipeline,
    PipelineQuery,
    SinkLog,
    link,
    norm,
    parent,
    storage_root,
)
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.gather.fleet import checkpoint_row, find_checkpoints, flows_of
from statelens.spark_io.gather.inputs import search_inputs, search_sink, sink_folder, sink_log_owner, sink_logs
from statelens.spark_io.logs.checkpoint import read_checkpoint, read_source_offsets
from statelens.spark_io.logs.event_logs import query_sinks, read_progress
from statelens.spark_io.storage import Storage, open_storage
from statelens.spark_io.storage.locations import is_local, local_path

SLACK_MS = 2000  # a log entry's time may round to the second on some file systems


def _rel(root: str, path: str) -> str:
    r, p = root.rstrip("/"), path.rstrip("/")
    return "." if p == r else p[len(r) + 1 :] if p.startswith(r + "/") else p


def _join(folder: str, name: str) -> str:
    return folder.rstrip("/") + "/" + name


def _sink_log(storage: Storage, folder: str) -> tuple[SinkLog | None, str | None]:
    """The folder's file sink log (None: it has none, not a file sink's table), or why it cannot be read."""
    try:
        logs, texts = sink_logs(storage)
    except (OSError, StateLensError) as e:
        return None, f"its _spark_metadata log cannot be read ({getattr(e, 'message', None) or e})"
    if not logs:
        return None, None
    owner = sink_log_owner(logs, texts)
    files = {norm(logged): batch for batch, _, logged in owner.values()}
    logged = parent(next(iter(files))) if files else norm(folder)
    return SinkLog(folder, logged, files, tuple(sorted(int(e.name.split(".")[0]) for e in logs))), None


def _stamps(storage: Storage, folder: str) -> dict[int, int]:
    """batch -> the modification time (ms) of its file in a log folder (``offsets``, ``commits``,
    ``_spark_metadata``); raises what the listing raised."""
    return {int(e.name.split(".")[0]): e.mtime_ns // 1_000_000 for e in storage.listdir(folder) if e.name.split(".")[0].isdigit()}


def _written_during(sink: dict[int, int], offsets: dict[int, int], commits: dict[int, int], slack: int = 0) -> bool:
    """Every batch of the sink's log written while the same batch of this query ran (``slack``: ms either side)."""
    return bool(sink) and all(
        b in offsets and b in commits and offsets[b] - slack <= t <= commits[b] + slack for b, t in sink.items()
    )


def _table_folders(data_root: str | None, flows: Iterable[Flow]) -> dict[str, str]:
    """A Declarative Pipeline table's folder under the warehouse (``<table>``, or ``<schema>.db/<table>``
    outside the default schema) -> the table's name (``schema.table``), for the tables that are there."""
    if not data_root:
        return {}
    storage = open_storage(data_root, what="folder", check=False)
    out: dict[str, str] = {}
    for f in flows:
        for rel in ([f.table] if f.schema == "default" else []) + [f"{f.schema}.db/{f.table}"]:
            if storage.info(_join(rel, "_spark_metadata")) is not None:
                out[open_storage(storage.where(rel), check=False).where("")] = f"{f.schema}.{f.table}"
                break
    return out


def _tables_in(folder: str, notes: list[str]) -> list[str]:
    """The folders directly in ``folder`` holding a file sink's log (a folder that cannot be listed: said in ``notes``)."""
    try:
        storage = open_storage(folder, check=False)
        dirs = [e for e in storage.listdir("") if e.is_dir and not e.name.startswith((".", "_"))]
        logged = storage.map(lambda e: storage.info(_join(e.name, "_spark_metadata")) is not None, dirs)
    except (OSError, StateLensError) as e:
        notes.append(f"the tables beside {folder} were not looked for: it cannot be listed ({getattr(e, 'message', None) or e})")
        return []
    return [open_storage(storage.where(e.name), check=False).where("") for e, has in zip(dirs, logged, strict=True) if has]


def _located(logged_folder: str, data_root: str | None, notes: list[str]) -> str | None:
    """Where a table whose files were logged in ``logged_folder`` is now: under the data root by its
    folder's name (a copy of the warehouse), else there (a place that cannot be read: said in ``notes``)."""
    candidates = [_join(data_root, logged_folder.rstrip("/").rsplit("/", 1)[-1])] if data_root else []
    candidates.append(local_path(logged_folder) if is_local(logged_folder) else logged_folder)
    failed = []
    for c in candidates:
        try:
            storage = open_storage(c, check=False)
            if storage.info("_spark_metadata") is not None:
                return storage.where("")
        except (OSError, StateLensError) as e:
            failed.append(f"{c} ({getattr(e, 'message', None) or e})")
    if failed:
        notes.append(f"the table read from {logged_folder} was not found: cannot be read at {'; '.join(failed)}")
    return None


def _event_log_sinks(event_log: str | None, ids: dict[str, str], notes: list[str]) -> dict[str, list[str]]:
    """A file sink's folder as the event log's progress names it (``norm``) -> the queries under the root
    (``ids``: query id -> name) writing it."""
    if not event_log:
        return {}
    try:
        sinks = query_sinks(event_log, notes)
    except StateLensError as e:
        notes.append(f"the event log cannot be read ({e.message}): each table's writer is told by its log's times")
        return {}
    out: dict[str, list[str]] = {}
    for qid, description in sinks.items():
        folder = sink_folder(description, None)
        if folder and qid in ids:
            out.setdefault(norm(folder), []).append(ids[qid])
    return out


def open_pipeline(root: str, data_root: str | None = None, now_ms: int | None = None, event_log: str | None = None) -> Pipeline:
    """Every query under ``root`` and the hops between them (``data_root``: where the tables are, when
    not where the logs say, e.g. a Declarative Pipeline's warehouse; ``event_log``: the applications'
    event logs, whose progress names each query's sink)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    paths = find_checkpoints(root)
    if not paths:
        raise NotACheckpoint(
            f"No checkpoint (a folder with offsets/ and commits/) under {root}: give the folder that holds them."
        )
    flows = flows_of(paths)
    several = len({storage_root(p) for p in flows}) > 1  # flows of several pipelines' storage roots
    notes: list[str] = []
    queries: dict[str, PipelineQuery] = {}
    query_ids: dict[str, str | None] = {}  # name -> the query's id (its checkpoint's metadata)
    reads: dict[str, dict[int, dict[int, list[str]]]] = {}
    for path in paths:
        flow = flows.get(path)
        name = _name(root, path, flow, several)
        row = checkpoint_row(path, now)
        sources: dict[int, tuple[str, str]] = {}
        read: dict[int, dict[int, list[str]]] = {}
        try:
            for batch, batch_sources in read_source_offsets(path).items():
                for s in batch_sources:
                    if s.kind == "file" and s.files:
                        read.setdefault(s.source, {}).setdefault(batch, []).extend(s.files)
                        sources.setdefault(s.source, (s.name, parent(s.files[0])))
        except StateLensError as e:
            notes.append(f"{name}: its sources cannot be read ({e.message})")
        reads[name] = read
        query_ids[name] = row.query_id
        queries[name] = PipelineQuery(
            name,
            path,
            flow,
            sources,
            last_batch=row.last_committed,
            watermark_ms=row.watermark_ms,
            state_bytes=row.state_bytes,
            problem=row.error or (f"{row.worst_severity}: {row.worst}" if row.worst else None),
        )
    # the tables: every folder a source read, and the Declarative Pipeline's tables in the warehouse
    tables: dict[str, str | None] = {}  # where it is now -> a Declarative Pipeline table's name
    for q in queries.values():
        for _, logged in q.sources.values():
            where = _located(logged, data_root, notes)
            if where is not None:
                tables.setdefault(where, None)
    tables.update(_table_folders(data_root, flows.values()))
    # a table no query reads (the last one) sits beside the others, or under the data root
    for parent_folder in {t.rstrip("/").rsplit("/", 1)[0] for t in tables} | ({data_root} if data_root else set()):
        for where in _tables_in(parent_folder, notes):
            tables.setdefault(where, None)
    writers: dict[str, tuple[str, SinkLog]] = {}
    batch_times = _BatchTimes()
    logged_sinks = _event_log_sinks(event_log, {i: n for n, i in query_ids.items() if i}, notes)
    for where, sdp_table in tables.items():
        storage = open_storage(where, what="folder", check=False)
        log, unreadable = _sink_log(storage, where)
        if unreadable:
            notes.append(f"the table at {where}: {unreadable}")
        if log is None:
            continue
        table_name = sdp_table or log.logged.rsplit("/", 1)[-1]
        readers = {
            storage_root(q.checkpoint)
            for q in queries.values()
            if q.flow and any(norm(f) == log.logged for _, f in q.sources.values())
        }
        writer, how = _writer(
            root,
            log.logged,
            table_name,
            sdp_table is not None,
            queries.values(),
            storage,
            readers,
            batch_times,
            logged_sinks.get(log.logged, []),
        )

        if writer is None:
            notes.append(f"the table at {where} ({len(log.batches)} batches logged): {how}")
            continue
        writers[log.logged] = (writer, log)
        queries[writer] = _with_sink(queries[writer], where, how)
    hops = link(reads, writers)
    return Pipeline(root, tuple(queries.values()), tuple(hops), tuple(notes))


def _name(root: str, path: str, flow: Flow | None, several: bool) -> str:
    """A query's name: its flow's (``silver``; under a root holding several pipelines' storage roots,
    ``<storage root>:silver``), else its checkpoint's folder relative to the root."""
    if flow is None:
        return _rel(root, path)
    return f"{_rel(root, storage_root(path))}:{flow.name}" if several else flow.name


def _with_sink(q: PipelineQuery, sink: str, how: str) -> PipelineQuery:
    return PipelineQuery(
        q.name, q.checkpoint, q.flow, q.sources, sink, how, q.last_batch, q.watermark_ms, q.state_bytes, q.problem
    )


class _BatchTimes:
    """Each checkpoint's batch times (``offsets/N`` and ``commits/N`` modification times), listed once
    for every table whose writer is told by time."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[dict[int, int], dict[int, int]] | str] = {}

    def of(self, checkpoint: str) -> tuple[dict[int, int], dict[int, int]] | str:
        """(offsets, commits) times, or why they cannot be listed."""
        if checkpoint not in self._seen:
            cp = open_storage(checkpoint, check=False)
            try:
                self._seen[checkpoint] = (_stamps(cp, "offsets"), _stamps(cp, "commits"))
            except (OSError, StateLensError) as e:
                self._seen[checkpoint] = str(getattr(e, "message", None) or e)
        return self._seen[checkpoint]


def _writer(
    root: str,
    logged: str,
    table_name: str,
    sdp: bool,
    queries: Iterable[PipelineQuery],
    storage: Storage,
    readers: set[str],
    batch_times: _BatchTimes,
    named: list[str],
) -> tuple[str | None, str]:
    """The query writing a table (its files logged under ``logged``), and how that is known; (None, why
    not) when it is not; ``named``: the queries the event log says write it. ``readers``:
    the storage roots of the Declarative Pipeline flows reading it (several pipelines may name a table
    alike: its writer is the reading pipeline's)."""
    queries = list(queries)
    schema, _, table = table_name.rpartition(".")
    current = [
        q
        for q in queries
        if q.flow and q.flow.current and q.flow.table == table and (not schema or not sdp or q.flow.schema == schema)
    ]
    if len(current) > 1 and readers:
        current = [q for q in current if storage_root(q.checkpoint) in readers]
    if len(current) == 1:
        return current[0].name, f"the Declarative Pipeline's table {current[0].flow.schema}.{table}"  # type: ignore[union-attr]
    if len(current) > 1:
        return None, f"{len(current)} current flows write table {table}: {', '.join(q.name for q in current)}"
    if len(named) == 1:
        return named[0], "the event log: this query's progress names the table as its sink"
    try:
        sink_times = _stamps(storage, "_spark_metadata")
    except (OSError, StateLensError) as e:
        return None, f"its log's times cannot be listed ({getattr(e, 'message', None) or e})"
    fits, exact, unlisted = [], [], []
    for q in queries:
        if logged in {norm(f) for _, f in q.sources.values()}:
            continue  # a query reading the table writes another one
        times = batch_times.of(q.checkpoint)
        if isinstance(times, str):
            unlisted.append(f"{q.name} ({times})")
        elif _written_during(sink_times, *times, slack=SLACK_MS):
            fits.append(q)
            if _written_during(sink_times, *times):
                exact.append(q)
    if not unlisted and (len(fits) == 1 or len(exact) == 1):
        # within a batch's own times beats within the slack kept for file systems that round them to the second
        return (fits if len(fits) == 1 else exact)[0].name, (
            "its _spark_metadata entries were written while this query's batches of the same numbers ran"
        )
    if unlisted:
        return None, f"the batch times of {len(unlisted)} queries cannot be listed: {'; '.join(unlisted[:3])}"
    if fits:
        return None, f"its log fits the batches of {len(fits)} queries ({', '.join(q.name for q in fits)}): give the event log"
    return None, f"no query under {root} wrote it (its log entries match no query's batches)"


def _stateless_answer(
    name: str, info: CheckpointInfo, key: str, columns: list[str], roots: tuple[str, ...], sink: str | None
) -> HopAnswer:
    """A query without state: the key's records in what it read, and its rows in the table it wrote."""
    search = search_inputs(info, [key], columns, roots)
    records = [r for r in search.records if r.key == key]
    found, unsearched = search_sink(sink, [key], columns) if sink else ({}, None)
    rows = found.get(key, [])
    read = tuple((r.batch_id, r.file) for r in records)
    written = tuple(sorted({r.batch_id for r in rows if r.batch_id is not None}))
    if rows:
        said = f"Written: {len(rows)} row(s) of it are in its table, written in batch {', '.join(map(str, written)) or '?'}."
        return HopAnswer(name, "written", None, None, said, read, written, {"key": key, "outcome": "written"})
    if not records:
        outcome = NEVER if search.complete else "unknown"
        said = (
            f"Never in the input: none of the {search.files_searched} files it read holds {key!r}."
            if outcome == NEVER
            else f"Unknown: {len(search.unsearched)} of the files it read could not be searched ({'; '.join(search.unsearched[:2])})."
        )
        return HopAnswer(
            name, outcome, outcome if outcome == NEVER else None, None, said, (), (), {"key": key, "outcome": outcome}
        )
    table = (
        f"its table could not be searched ({unsearched})"
        if unsearched
        else (
            "its table holds none: a query without state drops a row only in a filter or a projection; its plan (the event log) tells which"
        )
    )
    said = f"Unknown: it read {len(records)} record(s) of it (batch {records[0].batch_id}, {records[0].file_name}) and {table}."
    return HopAnswer(
        name, "unknown", None, {"batch_id": records[0].batch_id, "file": records[0].file}, said, read, (), {"key": key}
    )


def _field_for(name: str, fields: Mapping[str, str | None], hops: list[Hop], written_as: Mapping[str, str | None]) -> str | None:
    """The column query ``name`` is asked by: the one named for it, else the one the query upstream of it
    writes the key under (followed through a rename in its plan), else the keys' column."""
    if fields.get(name):
        return fields[name]
    carried = {written_as[h.upstream] for h in hops if h.downstream == name and h.upstream in written_as}
    return carried.pop() if len(carried) == 1 and None not in carried else fields.get("") or None


def _renamed(info: CheckpointInfo, key_field: str | None, event_log: str | None) -> str | None:
    """The column a query writes ``key_field`` under when its plan (the event log's) renames it, else None.
    An event log that cannot be read raises: the query then answers unknown, saying why."""
    if not key_field or not event_log:
        return None
    plan = read_progress(event_log, info).query_plan()
    return plan.written_as(key_field) if plan is not None else None


def why_missing_across(
    pipeline: Pipeline,
    keys: list[str],
    key_field: str | Mapping[str, str] | None,
    event_log: str | None = None,
    input_root: tuple[str, ...] = (),
) -> list[PipelineKeyAnswer]:
    """Each key followed from the first query's input through every hop to the last table: each
    current query asked on its own (its input: the tables upstream of it where they are now, then
    ``input_root``; its output: its table), then composed (``analysis.pipeline.fate``). ``key_field``:
    the keys' column, or query name -> its column there (``""``: every other query's), where a query
    renamed it; with the event log, a rename in a query's plan (``user AS customer``) is followed without
    it. A query that cannot answer says unknown and why; the others still answer."""
    order = [n for n in pipeline.order() if not (pipeline.query(n).flow and not pipeline.query(n).flow.current)]  # type: ignore[union-attr]
    fields = dict(key_field) if isinstance(key_field, Mapping) else {"": key_field} if key_field else {}
    unknown = sorted(set(fields) - {""} - {q.name for q in pipeline.queries})
    if unknown:
        raise InvalidInput(
            f"{option('--key-field')} names {', '.join(unknown)}, which is no query under {pipeline.root} (its queries: "
            f"{', '.join(order)})."
        )
    hops = [h for h in pipeline.hops if h.downstream in order]
    per_query: dict[str, dict[str, HopAnswer]] = {}
    written_as: dict[str, str | None] = {}  # query -> the column it writes the key under
    for name in order:
        q = pipeline.query(name)
        key_field = _field_for(name, fields, hops, written_as)
        written_as[name] = key_field
        roots = tuple(h.table for h in hops if h.downstream == name) + tuple(input_root)
        per_query[name] = {}
        try:
            info = read_checkpoint(q.checkpoint)
            if not info.operators:
                for k in keys:
                    per_query[name][k] = _stateless_answer(name, info, k, [key_field] if key_field else [], roots, q.sink)
            else:
                asked = KeyQuestion(tuple(keys), key_field, event_log, roots or None, q.sink)
                report = why_missing(q.checkpoint, asked, info)
                for r in report.to_dict()["results"]:
                    per_query[name][r["key"]] = hop_answer(name, r)
                written_as[name] = _renamed(info, key_field, event_log) or key_field
        except StateLensError as e:
            said = f"Unknown: {e.title}: {e.message}"
            if key_field and isinstance(e, InvalidInput):  # most likely the key's column is named otherwise here
                said += (
                    f" If {name} names the key column otherwise, say so: {option('--key-field')} {key_field},{name}=<its column>."
                )
            for k in keys:
                per_query[name][k] = HopAnswer(name, "unknown", None, None, said, answer={"key": k, "reason": e.message})
        per_query[name] = {k: dataclasses.replace(a, key_field=key_field) for k, a in per_query[name].items()}
    groups = [[n for n in g if n in per_query] for g in pipeline.groups()]
    out = []
    for k in keys:
        # the pipeline that saw the key (queries sharing no hop are pipelines of their own), else the first
        fates = [pipeline_fate(k, g, hops, {n: per_query[n][k] for n in g}) for g in groups if g]
        out.append(next((f for f in fates if f.outcome != NEVER), fates[0]))
    return out
