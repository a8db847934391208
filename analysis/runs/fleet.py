"""Every checkpoint under a folder at a glance (pure): one row per query from its log facts, its
state files' names and sizes, and the doctor's report; no state file is read.

Growth and skew here are what file sizes alone can tell:
* growth: HDFS snapshots each hold a partition's whole state, so the sum over partitions of the
  newest snapshot at or below a version is the state's size then (a RocksDB zip holds no rows:
  its SST files do, and which of them a version uses is inside the zip, so RocksDB stores show no
  trend here);
* skew: the bytes a partition's current state takes (HDFS: newest snapshot and the deltas after
  it; RocksDB: the SST files in the partition's folder and the changelogs after the newest zip),
  per store, the largest partition against the median.
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from statelens.analysis.checkpoint.doctor import DoctorReport
from statelens.analysis.core.model import CheckpointInfo, StateFile

GROWTH_RATIO = 1.5  # the newest snapshot total against the oldest retained one
SKEW_RATIO = 10.0  # the largest partition's bytes against the median (as health's SKEW_WARNING)
SKEW_MIN_BYTES = 64 * 1024  # a store smaller than this per partition is noise, not skew
_SEVERITY = {"error": 0, "warning": 1, "info": 2}


@dataclass
class CheckpointRow:
    path: str
    query_id: str | None = None
    last_committed: int | None = None
    committed_at_ms: int | None = None  # the batch's planned time (offsets' batchTimestampMs)
    uncommitted: int = 0  # batches planned and not committed
    watermark_ms: int | None = None
    watermark_lag_ms: int | None = None  # the time now minus the watermark
    operators: list[str] = field(default_factory=list)
    state_bytes: int = 0
    state_files: int = 0
    trend: list[tuple[int, int]] = field(default_factory=list)  # (batch, state bytes by its snapshots)
    worst: str | None = None  # the doctor's worst problem
    worst_severity: str | None = None
    problems: int = 0
    findings: list[str] = field(default_factory=list)  # growth and skew told by file sizes
    error: str | None = None  # why the checkpoint could not be read
    flow: str | None = None  # a Declarative Pipeline flow's checkpoint: its flow (``schema.table[/flow][@vN]``)
    superseded: bool = False  # that flow's version is superseded by a full refresh

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["trend"] = [{"batch_id": b, "bytes": n} for b, n in self.trend]
        return d


def row_of(info: CheckpointInfo, files: list[StateFile], report: DoctorReport, now_ms: int) -> CheckpointRow:
    last = info.committed_batches[-1] if info.committed_batches else None
    known = [info.batches[-1].watermark_ms] if info.batches else []  # the newest batch planned
    known += [last.next_watermark_ms] if last and last.next_watermark_ms is not None else []
    watermark = max(known, default=0)
    worst = min(report.problems, key=lambda p: _SEVERITY.get(p.severity, 3), default=None)
    state = [f for f in files if f.partition_id >= 0 and f.kind not in ("schema", "metadata")]
    row = CheckpointRow(
        info.path,
        info.query_id,
        last.batch_id if last else None,
        last.timestamp_ms or None if last else None,
        len(info.uncommitted),
        watermark or None,
        now_ms - watermark if watermark else None,
        [op.operator_name for op in info.operators],
        sum(f.size for f in files),
        len(files),
        snapshot_trend(info, state),
        worst.title if worst else None,
        worst.severity if worst else None,
        len(report.problems),
    )
    row.findings = growth_findings(row.trend) + skew_findings(info, state)
    return row


def snapshot_trend(info: CheckpointInfo, files: list[StateFile]) -> list[tuple[int, int]]:
    """(batch, bytes) of the HDFS stores' state at each retained snapshot version where every
    partition has a snapshot at or below it; [] for RocksDB (its zips hold no rows)."""
    if "RocksDB" in info.provider:
        return []
    snaps: dict[tuple[int, str, int], dict[int, int]] = defaultdict(dict)
    for f in files:
        if f.kind == "snapshot" and f.version is not None:
            snaps[(f.operator_id, f.store_name, f.partition_id)][f.version] = f.size
    if not snaps:
        return []
    versions = sorted({v for s in snaps.values() for v in s})
    out = []
    for v in versions:
        newest = [max((x for x in s if x <= v), default=None) for s in snaps.values()]
        if all(n is not None for n in newest):
            out.append((v - 1, sum(s[n] for s, n in zip(snaps.values(), newest, strict=True) if n is not None)))
    return out


def growth_findings(trend: list[tuple[int, int]]) -> list[str]:
    if len(trend) < 3 or trend[0][1] <= 0:
        return []
    ratio = trend[-1][1] / trend[0][1]
    rising = all(b >= a for (_, a), (_, b) in itertools.pairwise(trend))
    if ratio >= GROWTH_RATIO and rising:
        return [f"state grew {ratio:.1f}x from batch {trend[0][0]} to {trend[-1][0]} (snapshot sizes), and never shrank"]
    return []


def partition_bytes(files: list[StateFile]) -> dict[tuple[int, str], dict[int, int]]:
    """Per (operator, store folder), the bytes each partition's current state takes (see the module doc)."""
    by_part: dict[tuple[int, str, int], list[StateFile]] = defaultdict(list)
    for f in files:
        by_part[(f.operator_id, f.store_name, f.partition_id)].append(f)
    out: dict[tuple[int, str], dict[int, int]] = defaultdict(dict)
    for (op, store, part), fs in by_part.items():
        snaps = [f for f in fs if f.kind in ("snapshot", "zip") and f.version is not None]
        base = max((f.version for f in snaps if f.version is not None), default=0)
        after = sum(f.size for f in fs if f.kind in ("delta", "changelog") and (f.version or 0) > base)
        snap = sum(f.size for f in snaps if f.version == base and f.kind == "snapshot")
        ssts = sum(f.size for f in fs if f.kind == "sst")
        out[(op, store)][part] = snap + ssts + after
    return out


def skew_findings(info: CheckpointInfo, files: list[StateFile]) -> list[str]:
    out = []
    for (op, store), parts in sorted(partition_bytes(files).items()):
        if len(parts) < 2:
            continue
        median = statistics.median(parts.values())
        hot, most = max(parts.items(), key=lambda kv: kv[1])
        if most < SKEW_MIN_BYTES or median <= 0:
            continue
        if most / median >= SKEW_RATIO:
            out.append(f"operator {op} {store}: partition {hot} holds {most / median:.0f}x the median partition's bytes")
    return out


SORTS = ("problems", "path", "bytes", "lag", "behind")


def sort_rows(rows: list[CheckpointRow], by: str = "problems") -> list[CheckpointRow]:
    """The rows in the order asked: ``problems`` (unreadable first, then errors, warnings, notes),
    ``path``, ``bytes`` (most first), ``lag`` (the watermark furthest behind first), ``behind``
    (most batches planned and not committed first)."""
    from statelens.analysis.core.errors import InvalidInput

    keys: dict[str, Callable[[CheckpointRow], Any]] = {
        "path": lambda r: r.path,
        "problems": lambda r: (r.error is None, {"error": 0, "warning": 1, "info": 2}.get(r.worst_severity or "", 3), r.path),
        "bytes": lambda r: -r.state_bytes,
        "lag": lambda r: -(r.watermark_lag_ms or 0),
        "behind": lambda r: -r.uncommitted,
    }
    if by not in keys:
        raise InvalidInput(f"Cannot sort by '{by}': use one of {', '.join(SORTS)}.")
    return sorted(rows, key=keys[by])
