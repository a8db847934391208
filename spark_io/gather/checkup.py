"""Gathers what the health diagnoses need, from the reader the engine choice picks
(``spark_io.readers.engine``): ``SparkStats`` reduces inside Spark, ``NativeStats`` from the native
reader's tables in DuckDB; both give the same figures.

* skew: rows per partition and the hottest keys; bytes per partition come from the state files.
* growth: each store's change feed over the retained batches, as (batch, delete?, key id,
  partition), replayed once: rows per batch without re-reading the state at every batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from statelens.analysis.checkpoint import health
from statelens.analysis.core.errors import UnknownStore
from statelens.analysis.core.model import (
    JOIN_V4_ROWS,
    CheckpointInfo,
    OperatorInfo,
    StateFile,
    StateSource,
    default_operator,
    lookup_sources,
    operator_of,
    require_committed,
    require_state,
    resolve_batch,
    sources_of,
    validate_source,
)
from statelens.analysis.core.operator_kinds import AGGREGATION, TWS, find_kind
from statelens.analysis.core.state_access import MAX_STATE_BATCHES
from statelens.spark_io.logs.checkpoint import list_state_files, read_checkpoint
from statelens.spark_io.readers import engine
from statelens.spark_io.readers.spark_stats import SparkStats, StateStats
from statelens.spark_io.readers.state_reader import has_change_feed

if TYPE_CHECKING:  # the whole checkup's parts, imported when it runs: skew and growth alone need none
    from statelens.analysis.checkpoint.doctor import DoctorReport
    from statelens.analysis.runs.progress import ProgressLog


def stats_for(info: CheckpointInfo, which: str) -> StateStats:
    """The health figures of one checkpoint from the native reader or from Spark."""
    if which == engine.NATIVE:
        from statelens.spark_io.readers.native.stats import NativeStats

        return NativeStats(info, engine.native_reader(info))
    return SparkStats(info)


def source_for(op: OperatorInfo, store: str) -> StateSource:
    """A store name, a join store or a transformWithState variable name, as a source."""
    for src in sources_of(op):
        if store in (src.store_name, src.state_var):
            return src
    names = [s.state_var or s.store_name for s in sources_of(op) if not s.join_side and not s.timers]
    raise UnknownStore(
        f"Operator {op.operator_id} ({op.operator_name}) has no store '{store}'. Its stores are: {', '.join(map(str, names))}."
    )


# --------------------------------------------------------------------------- skew


def skew(
    path: str,
    operator_id: int | None = None,
    store: str | None = None,
    batch_id: int | None = None,
    info: CheckpointInfo | None = None,
    files: list[StateFile] | None = None,
    only: str | None = None,
) -> health.SkewReport:
    """Skew of one store at one batch; ``only``: the engine to read with, whatever the choice."""
    info = info or read_checkpoint(path)
    require_state(info)
    op = default_operator(info) if operator_id is None else operator_of(info, operator_id)
    store = store or op.default_store
    src = source_for(op, store)
    validate_source(info, src)
    batch = resolve_batch(info, batch_id)
    (per_part, top), used, why = engine.answer(
        info,
        lambda: stats_for(info, engine.NATIVE).skew_counts(src, batch),
        lambda: SparkStats(info).skew_counts(src, batch),
        only,
    )
    files = files if files is not None else list_state_files(info.path)
    store_dir = op.folder_of(src.store_name)  # transformWithState variables and format 3 joins share one
    sizes: dict[int, int] = {}
    for f in files:
        if (
            f.operator_id == op.operator_id
            and f.partition_id >= 0
            and f.store_name == store_dir
            and f.kind not in ("schema", "metadata")
        ):
            sizes[f.partition_id] = sizes.get(f.partition_id, 0) + f.size
    num_partitions = next((s.num_partitions for s in op.folders if s.store_name == store_dir), len(sizes))
    report = health.skew_report(
        op.operator_id,
        store,
        batch,
        num_partitions,
        per_part,
        sizes,
        [{"key": _key_text(k), "rows": n} for k, n in top],
        find_kind(op.operator_name) or op.operator_name,
    )
    report.engine, report.engine_note = used, why
    return report


def _key_text(key_json: str) -> Any:
    import json

    k = json.loads(key_json)
    return next(iter(k.values())) if isinstance(k, dict) and len(k) == 1 else k


# --------------------------------------------------------------------------- growth


@dataclass
class GrowthReport:
    stores: list[health.StoreGrowth]
    findings: list[health.Finding]
    batches: list[Any]
    files: list[StateFile] = field(default_factory=list)
    engine: str = "spark"  # which reader answered
    engine_note: str | None = None  # why Spark answered although the native reader was asked first

    def series(self) -> list[dict[str, Any]]:
        return [
            {
                "operator_id": g.operator_id,
                "store_name": g.store_name,
                "batch_id": b,
                "rows": g.rows[b],
                "inserts": g.inserts.get(b),  # None: not known (see StoreGrowth)
                "deletes": g.deletes.get(b),
                "bytes": g.bytes.get(b, 0),
            }
            for g in self.stores
            for b in sorted(g.rows)
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "engine_note": self.engine_note,
            "series": self.series(),
            "method": {f"{g.operator_id}/{g.store_name}": g.method for g in self.stores},
            "findings": [f.to_dict() for f in self.findings],
        }


def _growth_sources(op: OperatorInfo) -> list[StateSource]:
    return [s for s in sources_of(op) if s.has_change_feed]


def store_growth(
    info: CheckpointInfo, op: OperatorInfo, src: StateSource, files: list[StateFile], stats: StateStats
) -> health.StoreGrowth:
    """Rows per batch of one store from its change feed, in one pass. A store of lists (a list state,
    format 4 join rows: several per key and time) counts its elements, which its change feed does
    not give one by one: from its state at each batch."""
    lists = (src.state_var and op.state_variable_type(src.state_var) == "ListState") or (src.store_name or "").endswith(
        JOIN_V4_ROWS
    )
    if not has_change_feed(info, op.operator_id) or lists:
        return _growth_from_state(info, op, src, files, stats)
    committed = [b.batch_id for b in info.committed_batches]
    first, last = committed[0], committed[-1]
    base: Any = ()
    start = first
    if first > 0:  # older batches are gone: start from the state at the first retained batch
        base = stats.key_ids(src, first)
        start = first + 1
    batches = [b for b in committed if b >= first]
    changes: Any = ()
    if start <= last:
        changes = stats.change_ids(src, start, last)
    rows, parts, ins, dels = health.replay_changes(batches, changes, base)
    if first > 0:  # what the first retained batch changed is in no file left
        ins.pop(first, None)
        dels.pop(first, None)
    name = src.state_var or src.store_name or "default"
    return health.StoreGrowth(
        op.operator_id,
        name,
        rows,
        parts,
        ins,
        dels,
        health.bytes_per_batch(files, op.operator_id, op.folder_of(src.store_name), batches),
    )


def _growth_from_state(
    info: CheckpointInfo, op: OperatorInfo, src: StateSource, files: list[StateFile], stats: StateStats
) -> health.StoreGrowth:
    """Rows per batch without a change feed (RocksDB without changelog checkpointing), or of a list
    state (its elements, one by one): the state at
    each of the last MAX_STATE_BATCHES retained batches, as key ids, compared batch to batch."""
    batches = [b.batch_id for b in info.committed_batches][-MAX_STATE_BATCHES:]
    snapshots = []
    for b in batches:
        keys, parts = stats.key_ids(src, b)
        snapshots.append((b, list(zip(keys.tolist(), parts.tolist(), strict=True))))
    base = list(health.copies_apart(snapshots[0][1]).items())
    changes = health.diff_snapshots(snapshots)
    rows, parts_by_batch, ins, dels = health.replay_changes(batches, [c for c in changes if c[0] != batches[0]], base)
    if batches[0] == 0:  # the query's first batch: everything in its state was inserted by it
        ins[0], dels[0] = rows[0], 0
    else:  # an earlier state to compare with is not read
        ins.pop(batches[0], None)
        dels.pop(batches[0], None)
    name = src.state_var or src.store_name or "default"
    return health.StoreGrowth(
        op.operator_id,
        name,
        rows,
        parts_by_batch,
        ins,
        dels,
        health.bytes_per_batch(files, op.operator_id, op.folder_of(src.store_name), batches),
        method="state per batch",
    )


def growth(
    path: str, operator_id: int | None = None, store: str | None = None, info: CheckpointInfo | None = None
) -> GrowthReport:
    info = info or read_checkpoint(path)
    require_state(info)
    require_committed(info)
    ops = info.operators if operator_id is None else [operator_of(info, operator_id)]
    files = list_state_files(info.path)
    sources = [(op, src) for op in ops for src in ([source_for(op, store)] if store else _growth_sources(op))]
    for _, src in sources:
        if not src.has_change_feed:
            raise UnknownStore(f"{src.describe()} has no change feed to measure growth from.")

    def measure(stats: StateStats) -> tuple[list[health.StoreGrowth], list[health.EvictionFacts]]:
        for op in ops:
            stats.expect_eviction(eviction_source(op), resolve_batch(info, None))
        return [store_growth(info, op, src, files, stats) for op, src in sources], [eviction_facts(info, op, stats) for op in ops]

    (stores, facts), used, why = engine.answer(
        info, lambda: measure(stats_for(info, engine.NATIVE)), lambda: measure(SparkStats(info))
    )
    findings = health.growth_findings(stores, info.batches, info.conf, facts)
    growing = {f.evidence["operator_id"] for f in findings if f.code == "unbounded_growth"}
    proj = health.projection(stores, info.committed_batches, growing)
    if proj:
        findings.append(proj)
    return GrowthReport(stores, findings, info.batches, files, used, why)


def eviction_source(op: OperatorInfo) -> StateSource:
    """The store whose rows tell how the operator's state leaves (a join's left rows)."""
    return lookup_sources(op)[0][1]


def eviction_facts(info: CheckpointInfo, op: OperatorInfo, stats: StateStats) -> health.EvictionFacts:
    """What decides whether the operator's state can leave: its key's event time, timeouts and TTL,
    the oldest event time in state, windows kept past the watermark."""
    kind = find_kind(op.operator_name) or op.operator_name
    facts = health.EvictionFacts(op.operator_id, kind)
    src = eviction_source(op)
    batch = resolve_batch(info, None)
    wm_now = info.batches[-1].watermark_ms if info.batches else 0
    # in a chain, a later operator evicts by the lagging watermark of its input: windows behind the
    # query's watermark do not mean complete mode there
    count_past = kind == AGGREGATION and bool(wm_now) and len(info.operators) == 1
    e = stats.eviction(src, batch, wm_now if count_past else None)
    facts.key_has_event_time = e.key_has_event_time
    facts.oldest_event_ms = e.oldest_ms
    facts.windows_past_watermark = e.windows_past
    facts.other_way_out = e.timeout_set
    if kind == TWS:
        variables = op.properties.get("stateVariables", [])
        facts.other_way_out = any(v.get("ttlEnabled") for v in variables) or any(
            str(v.get("stateName", "")).startswith("$") for v in variables
        )
    return facts


def config_findings(info: CheckpointInfo, files: list[StateFile], total_rows: int) -> list[health.Finding]:
    partitions = max((s.num_partitions for o in info.operators for s in o.stores), default=0)
    kinds = {f.kind for f in files}
    return health.config_advice(info.conf, info.provider, total_rows, partitions, kinds)


@dataclass
class Checkup:
    """Everything the health page and the report show for one checkpoint."""

    info: CheckpointInfo
    skews: list[health.SkewReport]
    growth: GrowthReport
    config: list[health.Finding]
    progress: ProgressLog | None = None  # the query's progress, when an event log was given
    progress_findings: list[health.Finding] = field(default_factory=list)
    doctor: DoctorReport | None = None  # whole files, checksums, what a restart reads and may change

    @property
    def findings(self) -> list[health.Finding]:
        """Every finding once: the stores with too little state to judge skew in one note, not one each."""
        little = [s for s in self.skews if s.too_little_state]
        out = [f for s in self.skews for f in s.findings if f.code != "too_little_state_for_skew"]
        if little:
            stores = "; ".join(
                f"operator {s.operator_id} {s.store_name} ({sum(s.rows_by_partition.values()):,} rows, "
                f"{len(s.rows_by_partition)} partitions)"
                for s in little
            )
            out.append(
                health.Finding(
                    "too_little_state_for_skew",
                    f"Skew is not judged for {len(little)} store(s) with fewer than {health.SKEW_MIN_ROWS_PER_PARTITION} "
                    f"rows per partition: {stores}.",
                    severity="info",
                )
            )
        out += self.growth.findings + self.progress_findings + self.config
        return sorted(out, key=lambda f: f.severity != "warning")


def checkup(path: str, info: CheckpointInfo | None = None, event_log: str | None = None) -> Checkup:
    """Skew, growth and configuration of every operator; with the query's ``event_log`` (or
    progress JSON lines) also the rows dropped by the watermark."""
    from statelens.analysis.runs.progress import progress_findings
    from statelens.spark_io.logs.checkpoint import doctor
    from statelens.spark_io.logs.event_logs import read_progress

    info = info or read_checkpoint(path)
    require_state(info)
    log = read_progress(event_log, info) if event_log else None
    g = growth(path, info=info)
    skews = [skew(path, op.operator_id, info=info, files=g.files) for op in info.operators]
    total_rows = health.rows_in_state(g.stores)
    late = progress_findings(log, info) if log else []
    return Checkup(
        info, skews, g, config_findings(info, g.files, total_rows), log, late, doctor(info.path, log.run if log else None)
    )
