"""What Spark reported per micro-batch (StreamingQueryProgress), matched to a checkpoint.

The checkpoint says what state exists; progress says what happened on the way: input rows and
rates, durations, and per stateful operator the rows updated, removed and **dropped by the
watermark**. Spark writes progress to listeners, to ``query.lastProgress`` and, as
``QueryProgressEvent`` records, to its event logs. ``spark_io.logs.event_logs`` reads those files into
records; this module (pure) turns records into per-batch facts and the findings drawn from them.

Progress does not carry operator ids: ``stateOperators`` lists the plan's stateful operators top
down, the order in which Spark numbers them (``IncrementalExecution``), so entry *i* is operator
*i*. The names are checked against the checkpoint's operators where those are known.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from statelens.analysis.checkpoint.doctor import RunState
from statelens.analysis.checkpoint.health import Finding
from statelens.analysis.core.errors import InvalidInput, ProgressNotFound
from statelens.analysis.core.key_format import fmt_duration
from statelens.analysis.core.model import Batch, CheckpointInfo
from statelens.analysis.inputs.records import ArrivalSearch
from statelens.analysis.inputs.sources import name_from_description
from statelens.analysis.plan.query_plan import JoinPlan, OperatorWatermarks, QueryPlan, batch_watermarks, join_plans, query_plan

PROGRESS_EVENT = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"
STARTED_EVENT = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryStartedEvent"
TERMINATED_EVENT = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryTerminatedEvent"
# durationMs phases in the order a micro-batch runs them
PHASES = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "addBatch", "commitOffsets")


def _iso_ms(text: Any) -> int | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _offset(v: Any) -> Any:
    """Event logs keep offsets as JSON text, listeners' ``progress.json`` as JSON: one form."""
    if isinstance(v, str):
        try:
            return json.loads(v)
        except json.JSONDecodeError:
            return v
    return v


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _float(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if v == "NaN" or v == "Infinity":  # Jackson writes non-finite rates as strings
        return None
    return None


@dataclass(frozen=True)
class SourceProgress:
    description: str
    start_offset: Any
    end_offset: Any
    input_rows: int
    input_rows_per_second: float | None
    processed_rows_per_second: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "start_offset": self.start_offset,
            "end_offset": self.end_offset,
            "input_rows": self.input_rows,
            "input_rows_per_second": self.input_rows_per_second,
            "processed_rows_per_second": self.processed_rows_per_second,
        }


@dataclass(frozen=True)
class OperatorProgress:
    operator_id: int  # position in stateOperators = Spark's operator id
    operator_name: str
    rows_total: int | None
    rows_updated: int | None
    rows_removed: int | None
    rows_dropped_by_watermark: int | None
    memory_used_bytes: int | None
    commit_time_ms: int | None
    custom_metrics: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "operator_name": self.operator_name,
            "rows_total": self.rows_total,
            "rows_updated": self.rows_updated,
            "rows_removed": self.rows_removed,
            "rows_dropped_by_watermark": self.rows_dropped_by_watermark,
            "memory_used_bytes": self.memory_used_bytes,
            "commit_time_ms": self.commit_time_ms,
            "custom_metrics": self.custom_metrics,
        }


@dataclass(frozen=True)
class BatchProgress:
    batch_id: int
    run_id: str
    timestamp_ms: int | None  # when the trigger started
    input_rows: int
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    duration_ms: int | None  # batchDuration, else durationMs.triggerExecution
    durations: dict[str, int]  # durationMs: addBatch, getBatch, walCommit ...
    watermark_ms: int | None  # eventTime.watermark
    event_time_max_ms: int | None
    sources: list[SourceProgress]
    operators: list[OperatorProgress]
    sink: str = ""  # the sink's description: FileSink[file:/out], ForeachBatchSink ...

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "run_id": self.run_id,
            "timestamp_ms": self.timestamp_ms,
            "input_rows": self.input_rows,
            "input_rows_per_second": self.input_rows_per_second,
            "processed_rows_per_second": self.processed_rows_per_second,
            "duration_ms": self.duration_ms,
            "durations": self.durations,
            "watermark_ms": self.watermark_ms,
            "event_time_max_ms": self.event_time_max_ms,
            "sources": [s.to_dict() for s in self.sources],
            "operators": [o.to_dict() for o in self.operators],
            "sink": self.sink,
        }


def progress_of(record: dict[str, Any]) -> dict[str, Any] | None:
    """The StreamingQueryProgress in a record: an event-log line, a listener's JSON line
    (``progress.json``, ``lastProgress``) or a wrapper ``{"progress": {...}}``; else None."""
    if "Event" in record:
        p = record.get("progress") if record["Event"] == PROGRESS_EVENT else None
    elif "batchId" in record and "id" in record:
        p = record
    else:
        p = record.get("progress")
    return p if isinstance(p, dict) and "batchId" in p else None


def parse_progress(p: dict[str, Any]) -> BatchProgress:
    durations = {str(k): int(v) for k, v in (p.get("durationMs") or {}).items() if _int(v) is not None}
    event_time = p.get("eventTime") or {}
    ops = [
        OperatorProgress(
            operator_id=i,
            operator_name=str(o.get("operatorName", "")),
            rows_total=_int(o.get("numRowsTotal")),
            rows_updated=_int(o.get("numRowsUpdated")),
            rows_removed=_int(o.get("numRowsRemoved")),
            rows_dropped_by_watermark=_int(o.get("numRowsDroppedByWatermark")),
            memory_used_bytes=_int(o.get("memoryUsedBytes")),
            commit_time_ms=_int(o.get("commitTimeMs")),
            custom_metrics=dict(o.get("customMetrics") or {}),
        )
        for i, o in enumerate(p.get("stateOperators") or [])
    ]
    sources = [
        SourceProgress(
            description=str(s.get("description", "")),
            start_offset=_offset(s.get("startOffset")),
            end_offset=_offset(s.get("endOffset")),
            input_rows=_int(s.get("numInputRows")) or 0,
            input_rows_per_second=_float(s.get("inputRowsPerSecond")),
            processed_rows_per_second=_float(s.get("processedRowsPerSecond")),
        )
        for s in p.get("sources") or []
    ]
    # event logs (Jackson) leave out the totals Spark derives from the sources: sum them the same way
    total = _int(p.get("numInputRows"))
    rate_in = _float(p.get("inputRowsPerSecond"))
    rate_done = _float(p.get("processedRowsPerSecond"))
    return BatchProgress(
        batch_id=int(p["batchId"]),
        run_id=str(p.get("runId", "")),
        timestamp_ms=_iso_ms(p.get("timestamp")),
        input_rows=total if total is not None else sum(s.input_rows for s in sources),
        input_rows_per_second=rate_in if "inputRowsPerSecond" in p else _sum_rate(s.input_rows_per_second for s in sources),
        processed_rows_per_second=(
            rate_done if "processedRowsPerSecond" in p else _sum_rate(s.processed_rows_per_second for s in sources)
        ),
        duration_ms=_int(p.get("batchDuration")) or durations.get("triggerExecution"),
        durations=durations,
        watermark_ms=_iso_ms(event_time.get("watermark")),
        event_time_max_ms=_iso_ms(event_time.get("max")),
        sources=sources,
        operators=ops,
        sink=str((p.get("sink") or {}).get("description", "")),
    )


def _sum_rate(rates: Iterable[float | None]) -> float | None:
    known = [r for r in rates if r is not None]
    return sum(known) if known else None


def executed(p: dict[str, Any]) -> bool:
    """A trigger that ran a batch; idle triggers (no new data) report the next batch id with
    only latestOffset and triggerExecution timings."""
    return "addBatch" in (p.get("durationMs") or {})


@dataclass
class ProgressLog:
    """One query's progress, one entry per executed batch (the last report when a restart ran a
    batch again), read from ``location``."""

    query_id: str
    location: str
    format: str  # "event log" | "json lines"
    files: list[str]
    batches: list[BatchProgress]
    notes: list[str] = field(default_factory=list)  # what could not be read or matched, said once
    runs: int = 1
    joins: dict[int, JoinPlan] = field(default_factory=dict)  # operator -> its join as the latest plan states it
    plans: dict[int, str] = field(default_factory=dict)  # batch -> its physical plan (an event log's SQL executions)
    time_zone: str | None = None  # spark.sql.session.timeZone of the application, from an event log
    run: RunState | None = None  # the query's last run: running, or terminated (and with what), from an event log

    def batch(self, batch_id: int) -> BatchProgress | None:
        return next((b for b in self.batches if b.batch_id == batch_id), None)

    def query_plan(self) -> QueryPlan | None:
        """The query as the newest plan that reads every source states it (None: no plan in the log)."""
        if "_plan" not in self.__dict__:
            self.__dict__["_plan"] = self._query_plan()
        return self.__dict__["_plan"]  # type: ignore[no-any-return]

    def _query_plan(self) -> QueryPlan | None:
        best: tuple[int, int, QueryPlan] | None = None
        for b in sorted(self.plans, reverse=True)[:20]:
            q = query_plan(self.plans[b])
            if q is not None and (best is None or len(q.scans) > best[0]):
                best = (len(q.scans), b, q)
        return best[2] if best else None

    def operator_watermarks(self) -> dict[int, dict[int, OperatorWatermarks]]:
        """batch -> operator -> the watermarks Spark gave it, for the batches whose plan the log holds."""
        return {b: batch_watermarks(text) for b, text in self.plans.items()}

    def drops(self) -> dict[int, dict[int, int]]:
        """batch -> operator -> rows it dropped by the watermark."""
        return {b.batch_id: {o.operator_id: o.rows_dropped_by_watermark or 0 for o in b.operators} for b in self.batches}

    def duplicates(self) -> dict[int, dict[int, int]]:
        """batch -> dedup operator -> duplicate rows it dropped (its ``numDroppedDuplicateRows`` metric)."""
        return {
            b.batch_id: {
                o.operator_id: int(o.custom_metrics["numDroppedDuplicateRows"])
                for o in b.operators
                if "numDroppedDuplicateRows" in o.custom_metrics
            }
            for b in self.batches
        }

    @property
    def sink(self) -> str:
        return next((b.sink for b in reversed(self.batches) if b.sink), "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "location": self.location,
            "format": self.format,
            "files": self.files,
            "runs": self.runs,
            "notes": self.notes,
            "batches": [b.to_dict() for b in self.batches],
            "joins": [j.to_dict() for _, j in sorted(self.joins.items())],
        }


def collect(
    records: Iterable[dict[str, Any]],
    query_id: str | None,
    location: str,
    fmt: str,
    files: list[str],
    notes: list[str],
    last_batch: int | None = None,
) -> ProgressLog:
    """The progress of ``query_id`` among ``records``; a clear error when there is none. ``last_batch``:
    the checkpoint's last planned batch: a batch past it is another application's (a copy of the
    checkpoint run elsewhere under the same query id), left out and said."""
    if not query_id:
        raise InvalidInput(
            "The checkpoint has no metadata file, so its query id is unknown and progress cannot be matched to it."
        )
    found: dict[int, BatchProgress] = {}
    beyond: set[int] = set()
    others: dict[str, int] = {}
    runs: set[str] = set()
    rerun: set[int] = set()
    seen = 0
    joins: dict[int, JoinPlan] = {}
    plans: dict[int, str] = {}
    time_zone = None
    last_run: dict[str, Any] = {}  # the last QueryStartedEvent of this query, and what followed it
    for record in records:
        p = progress_of(record)
        event = record.get("Event")
        if event == STARTED_EVENT and record.get("id") == query_id:
            last_run = {"run_id": record.get("runId"), "ended": False, "exception": None}
        elif event == TERMINATED_EVENT and record.get("id") == query_id and last_run.get("run_id") == record.get("runId"):
            last_run |= {"ended": True, "exception": record.get("exception")}
        elif event == "SparkListenerApplicationEnd" and last_run:
            last_run["ended"] = True
        if p is None:
            plan = _plan_of(record, query_id)
            if plan is not None:
                plans[plan[0]] = plan[1]
                joins.update(join_plans(plan[1]))
            time_zone = _time_zone(record) or time_zone
            continue
        seen += 1
        if p.get("id") != query_id:
            others[str(p.get("id"))] = others.get(str(p.get("id")), 0) + 1
            continue
        if not executed(p):
            continue
        if last_batch is not None and int(p["batchId"]) > last_batch:
            beyond.add(int(p["batchId"]))
            continue
        b = parse_progress(p)
        if b.batch_id in found and found[b.batch_id].run_id != b.run_id:
            rerun.add(b.batch_id)
        found[b.batch_id] = b
        runs.add(b.run_id)
    if not found:
        if beyond:
            raise ProgressNotFound(
                f"{location} holds progress of query {query_id} only for batches {_ranges(sorted(beyond))}, past the "
                f"checkpoint's last batch ({last_batch}): another application ran a copy of it. Point to the event log "
                "of the application that ran this checkpoint's query."
            )
        if not seen:
            raise ProgressNotFound(
                f"{location} holds no StreamingQueryProgress records: point to a Spark event log "
                "(spark.eventLog.dir) of the application that ran the query, or to a file of progress JSON lines."
            )
        ids = ", ".join(sorted(others)[:3]) + (" ..." if len(others) > 3 else "")
        raise ProgressNotFound(
            f"{location} holds progress of other queries ({ids}), none of query {query_id} (the checkpoint's id): "
            "point to the event log of the application that ran this checkpoint's query."
        )
    notes = list(notes)
    if beyond:
        notes.append(
            f"Batches {_ranges(sorted(beyond))} of this query id are past the checkpoint's last batch ({last_batch}): "
            "another application ran a copy of it (a scratch run, a rebuild, a restored copy); they are left out."
        )
    if rerun:
        notes.append(
            f"Batches {_ranges(sorted(rerun))} ran more than once (the query restarted): the last run's figures are shown."
        )
    run = (
        RunState(
            not last_run["ended"], str(last_run["exception"]).strip().splitlines()[0] if last_run["exception"] else None, location
        )
        if last_run
        else None
    )
    return ProgressLog(
        query_id, location, fmt, files, [found[k] for k in sorted(found)], notes, len(runs), joins, plans, time_zone, run
    )


def _plan_of(record: dict[str, Any], query_id: str) -> tuple[int, str] | None:
    """(batch, physical plan) of a micro-batch's SQL execution of this query (an event log's
    SQLExecutionStart: its description names the query id, run id and batch)."""
    plan = record.get("physicalPlanDescription")
    description = str(record.get("description", ""))
    if not isinstance(plan, str) or "state info [" not in plan or f"id = {query_id}" not in description:
        return None
    m = re.search(r"batch = (\d+)", description)
    return (int(m.group(1)), plan) if m else None


def _time_zone(record: dict[str, Any]) -> str | None:
    """The session time zone an application ran with (an event log's environment update)."""
    if record.get("Event") != "SparkListenerEnvironmentUpdate":
        return None
    props = record.get("Spark Properties") or {}
    system = record.get("System Properties") or {}
    if isinstance(props, list):  # [[key, value], ...] in some versions
        props = dict(props)
    if isinstance(system, list):
        system = dict(system)
    return props.get("spark.sql.session.timeZone") or system.get("user.timezone") or None


def _ranges(ids: list[int]) -> str:
    out: list[str] = []
    for i in ids:
        if out and out[-1].split("-")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ", ".join(out)


def operator_mismatch(log: ProgressLog, info: CheckpointInfo) -> str | None:
    """Why progress operators cannot be taken for the checkpoint's (None when they agree).

    Entry *i* of stateOperators is operator *i*; where the checkpoint knows its operators'
    names (state metadata, Spark 4.0+), every name must agree."""
    known = {o.operator_id: o.operator_name for o in info.operators if o.metadata_version is not None}
    for b in log.batches:
        if not b.operators:
            continue
        if info.operators and len(b.operators) != len(info.operators):
            return (
                f"batch {b.batch_id} reports {len(b.operators)} stateful operator(s) and the checkpoint has "
                f"{len(info.operators)}: the progress is of another version of the query"
            )
        for o in b.operators:
            if o.operator_id in known and known[o.operator_id] != o.operator_name:
                return (
                    f"batch {b.batch_id} names operator {o.operator_id} '{o.operator_name}', "
                    f"the checkpoint '{known[o.operator_id]}'"
                )
    return None


# --------------------------------------------------------------------------- late rows


@dataclass(frozen=True)
class LateDrops:
    operator_id: int
    operator_name: str
    by_batch: dict[int, int]  # batch -> rows dropped by the watermark (batches with drops only)

    @property
    def total(self) -> int:
        return sum(self.by_batch.values())


def late_drops(log: ProgressLog) -> list[LateDrops]:
    """Rows dropped by the watermark, per operator, in the batches where there were some."""
    return _drops(log, lambda o: o.rows_dropped_by_watermark)


def duplicate_drops(log: ProgressLog) -> list[LateDrops]:
    """Rows a deduplication dropped as duplicates (its ``numDroppedDuplicateRows`` metric), per operator,
    in the batches where there were some."""
    return _drops(log, lambda o: _int(o.custom_metrics.get("numDroppedDuplicateRows")))


def _drops(log: ProgressLog, count: Callable[[OperatorProgress], int | None]) -> list[LateDrops]:
    per_op: dict[int, LateDrops] = {}
    for b in log.batches:
        for o in b.operators:
            n = count(o)
            if n:
                d = per_op.setdefault(o.operator_id, LateDrops(o.operator_id, o.operator_name, {}))
                d.by_batch[b.batch_id] = n
    return [per_op[k] for k in sorted(per_op)]


_SNAPSHOT_UPLOADED = re.compile(r"^SnapshotLastUploaded\.partition_(\d+)_(.+)$")


@dataclass(frozen=True)
class SnapshotLag:
    """One state store instance as Spark 4.0+ reports it in a batch's progress
    (``SnapshotLastUploaded.partition_<p>_<store>``: the last snapshot version it uploaded, -1 none yet;
    Spark reports the few most lagging instances per operator,
    ``spark.sql.streaming.stateStore.numStateStoreInstanceMetricsToReport``)."""

    batch_id: int
    operator_id: int
    partition: int
    store: str
    last_snapshot: int | None  # None: no snapshot uploaded yet
    behind: int  # versions a load of this batch's state replays after that snapshot (all, without one)

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "operator_id": self.operator_id,
            "partition": self.partition,
            "store": self.store,
            "last_snapshot_version": self.last_snapshot,
            "versions_behind": self.behind,
        }


def snapshot_lags(log: ProgressLog) -> list[SnapshotLag]:
    """The snapshot lag Spark reported in the newest batch that reports it, most behind first."""
    for b in reversed(log.batches):
        version = b.batch_id + 1
        out = []
        for o in b.operators:
            for name, value in o.custom_metrics.items():
                m = _SNAPSHOT_UPLOADED.match(name)
                v = _int(value)
                if m and v is not None:
                    last = v if v >= 0 else None
                    out.append(SnapshotLag(b.batch_id, o.operator_id, int(m.group(1)), m.group(2), last, version - (last or 0)))
        if out:
            return sorted(out, key=lambda x: (-x.behind, x.operator_id, x.store, x.partition))
    return []


def watermark_lag_ms(log: ProgressLog) -> int | None:
    """How far the watermark trails the newest event time: the effective watermark delay.

    Batch b's watermark comes from event times seen up to batch b-1, so the lag is the newest
    event time seen before b minus b's watermark (the largest such gap is the delay itself)."""
    newest: int | None = None
    lags: list[int] = []
    for b in log.batches:
        if newest is not None and b.watermark_ms:
            lags.append(newest - b.watermark_ms)
        if b.event_time_max_ms is not None:
            newest = max(newest or b.event_time_max_ms, b.event_time_max_ms)
    lags = [x for x in lags if x >= 0]
    return min(lags) if lags else None


# --------------------------------------------------------------------------- a record's event time


def late_filter_watermarks(batches: list[Batch]) -> dict[int, int]:
    """batch -> the watermark its stateful operators drop late rows by.

    Since Spark 3.4 (``spark.sql.streaming.statefulOperator.allowMultiple``, on by default) late
    rows are filtered by the previous batch's watermark and state is evicted by the current one
    (``IncrementalExecution.eventTimeWatermarkForLateEvents``); the first batch uses its own."""
    out: dict[int, int] = {}
    prev: Batch | None = None
    for b in batches:
        out[b.batch_id] = (prev or b).watermark_ms
        prev = b
    return out


@dataclass(frozen=True)
class Lateness:
    event_time_ms: int
    late_from_batch: int | None  # first batch whose late-row watermark is at or past the event time
    drops: dict[int, int]  # batch >= late_from_batch -> rows the operator dropped (from progress)
    progress_read: bool  # whether progress was read at all (else drops is empty for want of data)
    batches_covered: list[int]  # batches >= late_from_batch that progress covers
    arrivals: ArrivalSearch | None = None  # the input files searched for the keys' records (None: not searched)

    def to_dict(self) -> dict[str, Any]:
        return {
            "event_time_ms": self.event_time_ms,
            "late_from_batch": self.late_from_batch,
            "rows_dropped_by_watermark": {str(k): v for k, v in self.drops.items()},
            "progress_read": self.progress_read,
            "batches_with_progress": self.batches_covered,
            "arrivals": self.arrivals.to_dict() if self.arrivals is not None else None,
        }


def lateness(
    event_time_ms: int,
    info: CheckpointInfo,
    operator_id: int,
    log: ProgressLog | None,
    arrivals: ArrivalSearch | None = None,
) -> Lateness:
    """From which batch a record with this event time is late for ``operator_id``, and whether
    that operator dropped rows by the watermark from then on (Spark drops event time <= watermark);
    ``arrivals``: the batches whose input files hold the keys' records."""
    wms = late_filter_watermarks(info.batches)
    late_from = next((b for b, w in sorted(wms.items()) if w and event_time_ms <= w), None)
    drops: dict[int, int] = {}
    covered: list[int] = []
    if log is not None and late_from is not None:
        for b in log.batches:
            if b.batch_id < late_from:
                continue
            covered.append(b.batch_id)
            op = next((o for o in b.operators if o.operator_id == operator_id), None)
            if op and op.rows_dropped_by_watermark:
                drops[b.batch_id] = op.rows_dropped_by_watermark
    return Lateness(event_time_ms, late_from, drops, log is not None, covered, arrivals)


# --------------------------------------------------------------------------- per batch, for pages and the CLI


def batch_rows(info: CheckpointInfo, sources: dict[int, list[Any]], log: ProgressLog | None) -> list[dict[str, Any]]:
    """One row per batch of the checkpoint: what the checkpoint says (sources read, from the
    offsets) joined with what the progress says (rows, rates, durations, operators), when given.

    ``sources``: batch -> ``analysis.sources.SourceBatch`` per source."""
    out = []
    for b in info.batches:
        p = log.batch(b.batch_id) if log else None
        cp_sources = sources.get(b.batch_id, [])
        src = []
        for i, s in enumerate(cp_sources):
            ps = p.sources[i] if p and i < len(p.sources) else None
            d = s.to_dict()
            if not s.name and ps:
                d["name"] = name_from_description(ps.description)
            d["label"] = d["name"] if d["name"] == s.kind else f"{d['name'] or f'source {i}'} ({s.kind})"
            d["description"] = ps.description if ps else d["label"]
            d["input_rows"] = ps.input_rows if ps else s.rows
            d["summary"] = f"{ps.input_rows:,} rows" if ps and s.kind != "file" else s.summary
            if ps and s.kind == "file":
                d["summary"] = f"{ps.input_rows:,} rows from {s.summary}"
            src.append(d)
        if p and not cp_sources:
            src = [
                {
                    **s.to_dict(),
                    "name": (n := name_from_description(s.description)),
                    "label": n or s.description,
                    "summary": f"{s.input_rows:,} rows",
                }
                for s in p.sources
            ]
        row: dict[str, Any] = {
            "batch_id": b.batch_id,
            "committed": b.committed,
            "input_rows": p.input_rows if p else _sum_rows(cp_sources),
            "duration_ms": p.duration_ms if p else None,
            "input_rows_per_second": p.input_rows_per_second if p else None,
            "processed_rows_per_second": p.processed_rows_per_second if p else None,
            "durations": p.durations if p else {},
            "watermark_ms": b.watermark_ms,
            "sources": src,
            "operators": [o.to_dict() for o in p.operators] if p else [],
            "has_progress": p is not None,
        }
        out.append(row)
    return out


def _sum_rows(sources: list[Any]) -> int | None:
    rows = [s.rows for s in sources]
    return sum(rows) if rows and all(r is not None for r in rows) else None


# --------------------------------------------------------------------------- findings


def progress_findings(log: ProgressLog, info: CheckpointInfo) -> list[Finding]:
    """``late_rows_dropped`` per operator that dropped rows by the watermark; a note when the
    progress's operators cannot be taken for the checkpoint's."""
    out: list[Finding] = []
    mismatch = operator_mismatch(log, info)
    if mismatch:
        out.append(
            Finding(
                "progress_unmatched",
                f"The progress in {log.location} does not match this checkpoint's operators ({mismatch}): "
                "its per-operator figures are not used.",
                severity="info",
            )
        )
        return out
    lag = watermark_lag_ms(log)
    for d in late_drops(log):
        batches = sorted(d.by_batch)
        worst = max(batches, key=lambda b: d.by_batch[b])
        delay = (
            f" The watermark trailed the newest event time by {fmt_duration(lag)}: rows that arrive later than "
            "that behind the newest event are dropped."
            if lag is not None
            else ""
        )
        out.append(
            Finding(
                "late_rows_dropped",
                f"Operator {d.operator_id} ({d.operator_name}) dropped {d.total:,} row(s) by the watermark in "
                f"{len(batches)} batch(es) ({_ranges(batches)}; most in batch {worst}: {d.by_batch[worst]:,}): they "
                f"never reached the state nor the output.{delay} If they matter, raise the withWatermark delay "
                "above how late they arrive (state is then kept longer), or route late rows elsewhere before the "
                "stateful operator.",
                setting="withWatermark(eventTimeColumn, delay)",
                evidence={
                    "operator_id": d.operator_id,
                    "rows_dropped_by_batch": {str(b): n for b, n in sorted(d.by_batch.items())},
                    "watermark_lag_ms": lag,
                },
            )
        )
    return out
