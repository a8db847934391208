"""State health: skew, growth, watermarks, retention and configuration advice (pure functions).

Inputs are plain facts gathered by ``spark_io.health``: rows per partition and the hottest keys
of a store, its change feed reduced to (batch, delete?, key hash, partition), state file sizes,
and the checkpoint's batches and captured configuration.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from spark_io.checkpoint import Batch, StateFile

SKEW_WARNING = 10.0
SKEW_MIN_ROWS_PER_PARTITION = 10  # below this on average, partition counts are noise, not skew
HDFS_LARGE_ROWS = 1_000_000
SMALL_KEYSPACE_ROWS_PER_PARTITION = 1_000
LARGE_ROWS_PER_PARTITION = 5_000_000
DEFAULT_MIN_BATCHES_TO_RETAIN = 100
STUCK_BATCHES = 3


@dataclass
class Finding:
    code: str
    message: str
    severity: str = "warning"  # warning | info
    setting: str | None = None  # the configuration to change, when there is one
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"code": self.code, "message": self.message, "severity": self.severity}
        if self.setting:
            d["setting"] = self.setting
        if self.evidence:
            d["evidence"] = self.evidence
        return d


# --------------------------------------------------------------------------- skew


@dataclass
class SkewReport:
    operator_id: int
    store_name: str
    batch_id: int
    rows_by_partition: dict[int, int]
    bytes_by_partition: dict[int, int]
    skew_ratio: float | None  # max / min rows; None when a partition is empty (infinite)
    max_over_median: float
    top_keys: list[dict[str, Any]]
    findings: list[Finding]

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "store_name": self.store_name,
            "batch_id": self.batch_id,
            "rows_by_partition": {str(p): n for p, n in sorted(self.rows_by_partition.items())},
            "bytes_by_partition": {str(p): n for p, n in sorted(self.bytes_by_partition.items())},
            "skew_ratio": self.skew_ratio,
            "max_over_median": self.max_over_median,
            "top_keys": self.top_keys,
            "findings": [f.to_dict() for f in self.findings],
        }


def skew_report(
    operator_id: int,
    store_name: str,
    batch_id: int,
    num_partitions: int,
    rows_by_partition: dict[int, int],
    bytes_by_partition: dict[int, int],
    top_keys: list[dict[str, Any]],
) -> SkewReport:
    """Skew of one store at one batch. Every partition counts, empty ones included."""
    parts = range(max(num_partitions, max(rows_by_partition, default=-1) + 1))
    rows = {p: int(rows_by_partition.get(p, 0)) for p in parts}
    sizes = {p: int(bytes_by_partition.get(p, 0)) for p in parts}
    counts = list(rows.values())
    hi, lo = max(counts, default=0), min(counts, default=0)
    ratio = (hi / lo) if lo > 0 else None
    median = statistics.median(counts) if counts else 0
    over_median = hi / max(median, 1)  # a median of 0 counts as 1 row
    findings: list[Finding] = []
    total = sum(counts)
    if total < SKEW_MIN_ROWS_PER_PARTITION * len(counts):
        findings.append(
            Finding(
                "too_little_state_for_skew",
                f"{total:,} rows over {len(counts)} partitions: too few to judge skew.",
                severity="info",
            )
        )
    elif ratio is None or ratio > SKEW_WARNING:
        hot = max(rows, key=lambda p: rows[p])
        ratio_text = "infinite: at least one partition is empty" if ratio is None else f"{ratio:.1f}x"
        findings.append(
            Finding(
                "state_skew",
                f"Partition {hot} holds {hi:,} of {total:,} rows ({hi / total:.0%}); skew ratio max/min is {ratio_text}, "
                f"max/median {over_median:.1f}x.",
                evidence={"partition": hot, "rows": hi},
            )
        )
        if top_keys and top_keys[0]["rows"] >= max(2, total // 10):
            k = top_keys[0]
            findings.append(
                Finding(
                    "hot_key",
                    f"Key {k['key']} alone holds {k['rows']:,} rows ({k['rows'] / total:.0%} of the store). Salt it: add a "
                    "random suffix (0..N-1) to the key on both sides or before the aggregation, and combine the N partial "
                    "results; a hot join key usually means many rows per key in keyWithIndexToValue.",
                    evidence=k,
                )
            )
        findings.append(
            Finding(
                "shuffle_partitions_fixed",
                f"The store has {len(rows)} partitions. spark.sql.shuffle.partitions cannot change for an existing "
                "checkpoint: to spread state differently, start the query on a new checkpoint with another value "
                "(and salt hot keys); for the state already here, only salting new data helps.",
                severity="info",
                setting="spark.sql.shuffle.partitions",
            )
        )
    return SkewReport(operator_id, store_name, batch_id, rows, sizes, ratio, over_median, top_keys, findings)


# --------------------------------------------------------------------------- growth


@dataclass
class StoreGrowth:
    operator_id: int
    store_name: str
    rows: dict[int, int]  # batch -> rows in state after the batch
    rows_by_partition: dict[int, dict[int, int]]  # batch -> partition -> rows
    inserts: dict[int, int]
    deletes: dict[int, int]
    bytes: dict[int, int]  # batch -> bytes of state files on disk up to its version
    method: str = "change feed"  # or "state per batch": no change feed (RocksDB without changelog)


def diff_snapshots(snapshots: list[tuple[int, list[tuple[int, int]]]]) -> list[tuple[int, bool, int, int]]:
    """Changes between successive snapshots of (key_hash, partition): what a change feed would hold."""
    out: list[tuple[int, bool, int, int]] = []
    prev: dict[int, int] = {}
    for b, rows in snapshots:
        now = dict(rows)
        out += [(b, False, k, p) for k, p in now.items() if k not in prev]
        out += [(b, True, k, p) for k, p in prev.items() if k not in now]
        prev = now
    return out


def replay_changes(
    batches: list[int],
    changes: Iterable[tuple[int, bool, int, int]],
    base: Iterable[tuple[int, int]] = (),
) -> tuple[dict[int, int], dict[int, dict[int, int]], dict[int, int], dict[int, int]]:
    """One pass over a change feed: rows per batch (and per partition), inserts and deletes.

    ``changes`` holds (batch_id, is_delete, key_hash, partition_id); an insert is an update of a
    key not present before. ``base`` is (key_hash, partition) of the state before the first batch.
    """
    present: dict[int, int] = dict(base)
    per_part: dict[int, int] = {}
    for _, p in present.items():
        per_part[p] = per_part.get(p, 0) + 1
    by_batch: dict[int, list[tuple[bool, int, int]]] = {}
    for b, is_delete, k, p in changes:
        by_batch.setdefault(b, []).append((is_delete, k, p))
    rows, parts, ins, dels = {}, {}, {}, {}
    for b in batches:
        i = d = 0
        for is_delete, k, p in by_batch.get(b, ()):
            if is_delete:
                if k in present:
                    q = present.pop(k)
                    per_part[q] -= 1
                    d += 1
            elif k not in present:
                present[k] = p
                per_part[p] = per_part.get(p, 0) + 1
                i += 1
        rows[b], parts[b], ins[b], dels[b] = len(present), dict(per_part), i, d
    return rows, parts, ins, dels


def bytes_per_batch(files: Iterable[StateFile], operator_id: int, store_name: str, batches: list[int]) -> dict[int, int]:
    """Bytes on disk of a store's versioned files (delta, changelog, snapshot, zip) up to each batch's version."""
    per_version: dict[int, int] = {}
    for f in files:
        if f.operator_id == operator_id and f.store_name == store_name and f.version is not None:
            per_version[f.version] = per_version.get(f.version, 0) + f.size
    out, total, versions = {}, 0, sorted(per_version)
    i = 0
    for b in sorted(batches):
        while i < len(versions) and versions[i] <= b + 1:  # batch N writes version N + 1
            total += per_version[versions[i]]
            i += 1
        out[b] = total
    return out


def growth_findings(stores: list[StoreGrowth], batches: list[Batch], conf: dict[str, str]) -> list[Finding]:
    findings: list[Finding] = []
    growing: dict[int, list[StoreGrowth]] = {}
    for g in stores:
        order = sorted(g.rows)
        if len(order) >= 5:
            never_removed = sum(g.deletes.values()) == 0
            monotonic = all(g.rows[a] <= g.rows[b] for a, b in itertools.pairwise(order))
            if never_removed and monotonic and g.rows[order[-1]] > g.rows[order[0]]:
                growing.setdefault(g.operator_id, []).append(g)
    for op_id, gs in growing.items():
        order = sorted(gs[0].rows)
        detail = ", ".join(f"{g.store_name} {g.rows[min(g.rows)]:,} → {g.rows[max(g.rows)]:,}" for g in gs)
        findings.append(
            Finding(
                "unbounded_growth",
                f"Operator {op_id}'s state grew in every one of {len(order)} batches and nothing was ever removed "
                f"(rows: {detail}): without a watermark the operator can use (or with one that never passes the "
                "state's event times) it grows until the job runs out of memory or disk.",
                evidence={"operator_id": op_id, "stores": {g.store_name: [g.rows[min(g.rows)], g.rows[max(g.rows)]] for g in gs}},
            )
        )
    marks = [b.watermark_ms for b in batches]
    if batches and stores and all(m == 0 for m in marks):
        findings.append(
            Finding(
                "watermark_missing",
                f"The watermark is 0 in all {len(batches)} batches: the query defines no watermark, so no stateful "
                "operator can ever evict state. Add withWatermark(eventTimeColumn, delay) before the stateful operators.",
            )
        )
    else:
        run_start = None
        for i in range(1, len(batches)):
            if marks[i] and marks[i] == marks[i - 1]:
                run_start = i - 1 if run_start is None else run_start
            else:
                run_start = None
        if run_start is not None and len(batches) - run_start >= STUCK_BATCHES + 1:
            stuck = [b.batch_id for b in batches[run_start:]]
            inserts = sum(g.inserts.get(b, 0) for g in stores for b in stuck)
            if inserts:
                findings.append(
                    Finding(
                        "watermark_stuck",
                        f"The watermark has stayed at {_fmt(marks[-1])} for {len(stuck)} batches ({stuck[0]}–{stuck[-1]}) "
                        f"while {inserts:,} new rows entered state: the event times are not advancing (constant, "
                        "defaulted or far in the past), so state is never evicted. Check the event-time column.",
                        evidence={"watermark_ms": marks[-1], "from_batch": stuck[0], "to_batch": stuck[-1]},
                    )
                )
    retain = int(conf.get("spark.sql.streaming.minBatchesToRetain", DEFAULT_MIN_BATCHES_TO_RETAIN))
    committed = [b.batch_id for b in batches if b.committed]
    if committed and committed[0] == 0 and committed[-1] >= retain + 10:
        findings.append(
            Finding(
                "retention_stuck",
                f"Batch 0 is still retained after {committed[-1] + 1} batches although Spark keeps only the last {retain}: "
                "old versions are not being cleaned up (maintenance not running, or cleanup failing on this storage).",
                setting="spark.sql.streaming.minBatchesToRetain",
            )
        )
    return findings


def _fmt(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if ms else "0"


def projection(stores: list[StoreGrowth], batches: list[Batch], row_bytes: float) -> Finding | None:
    """Rows and bytes in 7 and 30 days at the current rate, and the state size estimate."""
    ts = [b.timestamp_ms for b in batches if b.timestamp_ms]
    if len(ts) < 2 or not stores:
        return None
    interval = statistics.median(b - a for a, b in itertools.pairwise(ts)) or 1
    per_day = 86_400_000 / interval
    rows_now = sum(g.rows[max(g.rows)] for g in stores if g.rows)
    bytes_now = sum(g.bytes[max(g.bytes)] for g in stores if g.bytes)
    n = min(len(g.rows) for g in stores if g.rows) if any(g.rows for g in stores) else 0
    if n < 2:
        return None
    rate = sum((g.rows[max(g.rows)] - g.rows[min(g.rows)]) / (len(g.rows) - 1) for g in stores if g.rows)
    byte_rate = sum((g.bytes[max(g.bytes)] - g.bytes[min(g.bytes)]) / (len(g.bytes) - 1) for g in stores if g.bytes)
    overhead = bytes_now / (rows_now * row_bytes) if rows_now and row_bytes else 1.0
    r7, r30 = rows_now + rate * per_day * 7, rows_now + rate * per_day * 30
    est = {d: max(0.0, r) * row_bytes * overhead for d, r in (("7d", r7), ("30d", r30))}
    return Finding(
        "projection",
        f"At the current rate ({rate:+,.1f} rows and {byte_rate:+,.0f} bytes on disk per batch, about {per_day:,.0f} "
        f"batches a day) state reaches {max(0, r7):,.0f} rows in 7 days and {max(0, r30):,.0f} in 30 days; estimated "
        f"size rows x {row_bytes:,.0f} B (key + value) x {overhead:.1f} (versions on disk) = {_size(est['7d'])} and "
        f"{_size(est['30d'])}.",
        severity="info",
        evidence={
            "rows_per_batch": rate,
            "bytes_per_batch": byte_rate,
            "batches_per_day": per_day,
            "rows_7d": r7,
            "rows_30d": r30,
            "row_bytes": row_bytes,
            "version_overhead": overhead,
            "bytes_7d": est["7d"],
            "bytes_30d": est["30d"],
        },
    )


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024:
            return f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} PB"


# --------------------------------------------------------------------------- configuration


def config_advice(
    conf: dict[str, str],
    provider: str,
    total_rows: int,
    num_partitions: int,
    file_kinds: set[str],
) -> list[Finding]:
    """Advice from the configuration captured in offsets/ and the state files' kinds."""
    out: list[Finding] = []
    provider_key = "spark.sql.streaming.stateStore.providerClass"
    if provider.startswith("HDFSBacked") and total_rows >= HDFS_LARGE_ROWS:
        out.append(
            Finding(
                "hdfs_large_state",
                f"{total_rows:,} rows of state live in executor JVM memory with the HDFS-backed provider: expect long "
                "GC pauses. Switch to RocksDB (a new checkpoint, or Spark's provider migration when available).",
                setting=f"{provider_key}=org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
            )
        )
    if provider.startswith("RocksDB") and "zip" in file_kinds and "changelog" not in file_kinds:
        out.append(
            Finding(
                "rocksdb_without_changelog",
                "RocksDB uploads a full snapshot every batch: enable changelog checkpointing so each batch writes only "
                "its changes (and the change feed becomes readable).",
                setting="spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled=true",
            )
        )
    if num_partitions >= 200 and total_rows < SMALL_KEYSPACE_ROWS_PER_PARTITION * num_partitions / 10:
        out.append(
            Finding(
                "shuffle_partitions_too_many",
                f"{num_partitions} shuffle partitions hold only {total_rows:,} rows: every batch opens {num_partitions} "
                "state stores per operator for little data. It is fixed for this checkpoint; a new one can use fewer.",
                setting="spark.sql.shuffle.partitions",
            )
        )
    if num_partitions and total_rows / num_partitions > LARGE_ROWS_PER_PARTITION:
        out.append(
            Finding(
                "shuffle_partitions_too_few",
                f"{total_rows / num_partitions:,.0f} rows per partition across {num_partitions} partitions: each task "
                "carries a very large store. It is fixed for this checkpoint; a new one can use more.",
                setting="spark.sql.shuffle.partitions",
            )
        )
    for key, current in (
        ("spark.sql.streaming.join.stateFormatVersion", "2"),
        ("spark.sql.streaming.aggregation.stateFormatVersion", "2"),
        ("spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion", "2"),
    ):
        if key in conf and conf[key] < current:
            out.append(
                Finding(
                    "old_state_format",
                    f"{key} is {conf[key]} (current is {current}): the old format lacks fixes and features; it is fixed "
                    "for this checkpoint, a new checkpoint gets the current one.",
                    severity="info",
                    setting=key,
                )
            )
    return out
