"""Checkpoint doctor: is the checkpoint whole, and which batches can the state reader still load?

Pure: works on the log reader's batches and the state file listing (no JVM). A batch ``b``
needs state version ``b + 1`` of every store partition: a snapshot (``.snapshot`` / ``.zip``)
at some version ``s <= b + 1`` (or the empty version 0) followed by every delta
(``.delta`` / ``.changelog``) from ``s + 1`` to ``b + 1``. RocksDB without changelog
checkpointing uploads a ``.zip`` per version, so it needs that one file.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from statelens.analysis.checkpoint.health import human_bytes, min_batches_to_retain, retention_finding
from statelens.analysis.checkpoint.restart import PartitionCost, Setting, restart_cost, restart_settings
from statelens.analysis.core.model import CheckpointInfo, StateFile

SNAPSHOTS = ("snapshot", "zip")
DELTAS = ("delta", "changelog")


@dataclass
class Problem:
    code: str
    severity: str  # error | warning | info
    title: str
    meaning: str
    action: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Chain:
    """One store partition's state files: what versions it can rebuild."""

    operator_id: int
    store_name: str
    partition_id: int
    snapshots: list[int]
    deltas: list[int]
    loadable_versions: list[int]  # among the committed batches' versions


@dataclass
class DoctorReport:
    path: str
    committed: list[int]
    uncommitted: list[int]
    commits_without_offsets: list[int]
    restart_batch: int | None
    loadable_batches: list[int]
    min_batches_to_retain: int
    min_batches_recorded: bool
    checkpoint_format_version: int
    problems: list[Problem] = field(default_factory=list)
    chains: list[Chain] = field(default_factory=list)
    loadable_known: bool = True  # False: some state folders cannot be read, so which batches load is unknown
    checksums_verified: int = 0  # files whose checksum sidecar (.crc) was verified
    restart_cost: list[PartitionCost] = field(default_factory=list)  # per store partition, most replayed first
    restart_settings: list[Setting] = field(default_factory=list)  # what a restart may change

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        d["chains"] = [
            {k: v for k, v in asdict(c).items() if k not in ("snapshots", "deltas")}
            | {"snapshots": len(c.snapshots), "deltas": len(c.deltas)}
            for c in self.chains
        ]
        return d


@dataclass(frozen=True)
class RunState:
    """The query's last run as its event log tells it."""

    running: bool  # started and neither terminated nor ended with its application
    exception: str | None = None  # the exception it terminated with
    log_location: str = ""


RUNNING_AT_LEAST_MS = 10 * 60_000  # a batch planned this recently may still be running, whatever the trigger


def _uncommitted(info: CheckpointInfo, uncommitted: list[int], now_ms: int | None, run: RunState | None) -> Problem:
    """An uncommitted batch: running (planned recently, or the event log shows the query running), or
    left by a query that stopped or failed."""
    newest = info.batches[-1]
    only_newest = uncommitted == [newest.batch_id]
    unfinished = next((r for r in info.repartitions if r.batch_id == newest.batch_id and not r.committed), None)
    if only_newest and unfinished:
        return Problem(
            "unfinished_repartition",
            "error",
            f"Batch {newest.batch_id} is an offline state repartition that did not finish",
            f"offsets/{newest.batch_id} changes the shuffle partitions from {unfinished.before} to {unfinished.after} with "
            "the previous batch's input, and commits/ has no entry: the repartition stopped before it committed. Spark "
            "refuses to start the query on it (STREAMING_UNFINISHED_REPARTITION_DETECTED), and a repartition to another "
            "count fails too (STATE_REPARTITION_INVALID_CHECKPOINT.LAST_BATCH_ABANDONED_REPARTITION).",
            f"Run the repartition again with {unfinished.after} partitions and let it finish; then restart the query "
            "(or repartition to another count after that).",
            {"batches": uncommitted, "from": unfinished.before, "to": unfinished.after},
        )
    ts = [b.timestamp_ms for b in info.batches[-11:] if b.timestamp_ms]
    gaps = sorted(b - a for a, b in itertools.pairwise(ts) if b > a)
    typical = gaps[len(gaps) // 2] if gaps else None
    age = now_ms - newest.timestamp_ms if now_ms is not None and newest.timestamp_ms else None
    recent = age is not None and 0 <= age <= max(RUNNING_AT_LEAST_MS, 3 * (typical or 0))
    if only_newest and ((run is not None and run.running) or (run is None and recent)):
        why = (
            f"the query's event log ({run.log_location}) shows it running: started, not terminated"
            if run is not None and run.running
            else f"its offsets were written {_secs(age or 0)} ago"
            + (f" and batches start about every {_secs(typical)}" if typical else "")
        )
        return Problem(
            "batch_running",
            "info",
            f"Batch {newest.batch_id} running" + (f" for {_secs(age)}" if age is not None and age >= 0 else ""),
            f"offsets/ records batch {newest.batch_id}'s input and commits/ has no entry yet: {why}. Its state changes "
            "become a committed version when it commits.",
            f"Nothing to do; diagnoses use the last committed batch ({info.last_committed}) until it commits.",
            {"batches": uncommitted, "running_for_ms": age, "typical_batch_interval_ms": typical},
        )
    failed = f" The event log says the query terminated with: {run.exception}" if run is not None and run.exception else ""
    return Problem(
        "offsets_without_commits",
        "info" if only_newest else "warning",
        f"Batch{'es' if len(uncommitted) > 1 else ''} {', '.join(map(str, uncommitted))} planned but not committed",
        "offsets/ records the batch's input but commits/ has no entry: the query stopped or failed while "
        f"running it{' (it was planned ' + _secs(age) + ' ago)' if age is not None and age >= 0 else ''}. Its state "
        f"changes are not part of any committed version.{failed}",
        f"On restart Spark runs batch {uncommitted[-1]} again with the same input. Nothing to repair; "
        "diagnoses use the last committed batch.",
        {"batches": uncommitted},
    )


def _secs(ms: int) -> str:
    s = ms // 1000
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def loadable(version: int, snapshots: set[int], deltas: set[int], snapshot_per_version: bool) -> bool:
    if snapshot_per_version:
        return version in snapshots or version == 0
    base = max((s for s in snapshots if s <= version), default=0)
    while True:
        if all(v in deltas for v in range(base + 1, version + 1)):
            return True
        older = [s for s in snapshots if s < base]
        if not older:
            return False
        base = max(older)


def unreadable_problem(folders: list[str]) -> Problem:
    return Problem(
        "unreadable",
        "error",
        f"{len(folders)} folder(s) of the checkpoint cannot be read",
        f"{', '.join(folders[:5])}{' …' if len(folders) > 5 else ''}: the user State Lens runs as may not read "
        "them (permission denied), so what they hold is unknown: they are not reported as missing, and which "
        "batches still load cannot be told.",
        "Give that user read access to the checkpoint and every folder in it (ls -l shows who may read them), "
        "then run the doctor again.",
        {"folders": folders[:50]},
    )


def damaged_offsets(batch: int, why: str, committed: bool, info: CheckpointInfo) -> Problem:
    """An offsets file that cannot be parsed (truncated, overwritten): Spark reads the newest offsets
    file to restart, and a batch's offsets to run it again."""
    newest = not any(b.batch_id > batch for b in info.batches)
    action = (
        f"Batch {batch} has a commit: restore offsets/{batch} from a backup or the object store's versioning; "
        "do not delete it (Spark would plan the batch again over state already written for it)."
        if committed
        else f"Batch {batch} never committed: move offsets/{batch} out of the checkpoint (keep a copy) and Spark plans "
        f"batch {batch} again from batch {batch - 1}'s offsets on restart."
    )
    return Problem(
        "offsets_damaged",
        "error",
        f"offsets/{batch} cannot be read",
        f"{why} "
        + (
            "It is the newest offsets file, the one Spark reads first when the query restarts: the restart fails on it."
            if newest
            else "Spark reads it to run that batch again and to find the offsets of the batch after it."
        )
        + " The batches shown here leave it out.",
        action,
        {"batch_id": batch, "committed": committed},
    )


def unreadable_report(path: str, message: str, folder: str) -> DoctorReport:
    """The doctor's answer when the checkpoint's log itself cannot be read."""
    report = DoctorReport(path, [], [], [], None, [], 0, False, 1, loadable_known=False)
    problem = unreadable_problem([folder])
    problem.meaning = message
    report.problems.append(problem)
    return report


def repartition_history(info: CheckpointInfo, seconds: dict[int, float]) -> list[Problem]:
    """The offline repartitions that finished (an unfinished one is an error of its own), oldest first;
    ``seconds``: batch -> how long it ran (from the event log of the application that ran it)."""
    out = []
    for r in info.repartitions:
        if not r.committed:
            continue
        took = seconds.get(r.batch_id)
        out.append(
            Problem(
                "repartitioned",
                "info",
                f"Batch {r.batch_id} repartitioned the state offline from {r.before} to {r.after} partitions"
                + (f" in {_secs(int(took * 1000))}" if took is not None else ""),
                f"A batch of its own (Spark 4.2+'s offline repartition): it read no input and rewrote every store as "
                f"{r.after} partitions of full snapshots; batches before it read {r.before} partitions."
                + (" Its time is from the event log of the application that ran it." if took is not None else ""),
                "Nothing to repair.",
                {"batch": r.batch_id, "from": r.before, "to": r.after, "seconds": took},
            )
        )
    return out


def examine(
    info: CheckpointInfo,
    files: list[StateFile],
    unreadable: list[str] | None = None,
    now_ms: int | None = None,
    run: RunState | None = None,
) -> DoctorReport:
    """``unreadable``: state folders that could not be listed (their files are unknown, not missing);
    ``now_ms``: the time now (an uncommitted newest batch planned recently is running, not failed);
    ``run``: what the query's event log says of its last run."""
    committed = [b.batch_id for b in info.committed_batches]
    uncommitted = info.uncommitted
    min_keep, recorded = min_batches_to_retain(info.conf)
    if info.batches:
        last = info.batches[-1]
        restart = last.batch_id if not last.committed else last.batch_id + 1
    else:
        restart = None
    report = DoctorReport(
        info.path,
        committed,
        uncommitted,
        info.commits_without_offsets,
        restart,
        [],
        min_keep,
        recorded,
        info.checkpoint_format_version,
    )
    problems = report.problems
    if uncommitted:
        problems.append(_uncommitted(info, uncommitted, now_ms, run))
    if info.commits_without_offsets:
        problems.append(
            Problem(
                "commits_without_offsets",
                "error",
                f"Commits without offsets: {', '.join(map(str, info.commits_without_offsets))}",
                "commits/ has entries whose offsets/ files are gone: the log was damaged or partly deleted by hand.",
                "Restore offsets/ from a backup; otherwise the query must start from a new checkpoint.",
                {"batches": info.commits_without_offsets},
            )
        )
    # state chains
    has_state = any(f.partition_id >= 0 for f in files)
    snapshot_per_version = "RocksDB" in info.provider and not any(f.kind == "changelog" for f in files)
    if unreadable:  # what the unreadable folders hold is unknown: no chain is judged
        problems.append(unreadable_problem(unreadable))
        report.loadable_known = False
        has_state = False
    groups: dict[tuple[int, str, int], list[StateFile]] = defaultdict(list)
    for f in files if has_state else []:
        if f.partition_id >= 0 and f.version is not None:
            groups[(f.operator_id, f.store_name, f.partition_id)].append(f)
    most = max([info.partitions_at(b) or 0 for b in committed], default=0)  # before an offline repartition
    for op in info.operators if has_state else []:
        for st in op.folders:
            for p in range(max(st.num_partitions, most)):
                groups.setdefault((op.operator_id, st.store_name, p), [])
    broken: dict[int, list[str]] = defaultdict(list)
    loadable_by_batch = {b: True for b in committed}
    for (op_id, store, part), fs in sorted(groups.items()):
        snaps = {f.version for f in fs if f.kind in SNAPSHOTS and f.version is not None}
        deltas = {f.version for f in fs if f.kind in DELTAS and f.version is not None}
        ok_versions = []
        for b in committed:
            if part >= (info.partitions_at(b) or part + 1):
                continue  # not a partition of that batch (an offline repartition changed their count)
            if loadable(b + 1, snaps, deltas, snapshot_per_version):
                ok_versions.append(b + 1)
            else:
                loadable_by_batch[b] = False
                broken[b].append(f"operator {op_id} store {store} partition {part}")
        report.chains.append(Chain(op_id, store, part, sorted(snaps), sorted(deltas), ok_versions))
    report.loadable_batches = [b for b in committed if loadable_by_batch[b]] if has_state else []
    report.restart_cost = restart_cost(info, files) if has_state else []
    report.restart_settings = restart_settings(info)
    if has_state and committed:
        latest_unloadable = [b for b in committed if not loadable_by_batch[b]]
        if committed[-1] in latest_unloadable:
            parts = broken[committed[-1]]
            problems.append(
                Problem(
                    "state_files_missing",
                    "error",
                    f"The state of the last committed batch ({committed[-1]}) cannot be rebuilt",
                    f"{len(parts)} store partition(s) miss a snapshot or a delta of version {committed[-1] + 1} or one "
                    f"before it (for example {parts[0]}). Spark cannot load this state: a restart fails, and so do "
                    "reads of these batches.",
                    "Restore the missing files under state/ from a backup. Batches that still load: "
                    + (", ".join(map(str, report.loadable_batches[-5:])) or "none")
                    + ".",
                    {"batches": latest_unloadable, "partitions": parts[:20]},
                )
            )
        elif latest_unloadable:
            problems.append(
                Problem(
                    "old_batches_unreadable",
                    "info",
                    f"{len(latest_unloadable)} older committed batch(es) cannot be read",
                    "Their state files were cleaned up (Spark keeps minBatchesToRetain versions) or are missing; "
                    "the query itself only needs the latest.",
                    "Nothing to do for the query. To inspect those batches, keep more: raise "
                    "spark.sql.streaming.minBatchesToRetain.",
                    {"batches": latest_unloadable},
                )
            )
    if committed and committed[0] > 0:
        problems.append(
            Problem(
                "history_purged",
                "info",
                f"Batches before {committed[0]} were purged",
                "Spark keeps the last minBatchesToRetain "
                + (f"({min_keep})" if recorded else f"(not recorded in the checkpoint; Spark's default is {min_keep})")
                + " batches and deletes older logs and state "
                "files: overview, history searches and growth start at the oldest retained batch.",
                "Nothing to repair. A key that left state before then shows as never in state.",
                {"first_retained": committed[0]},
            )
        )
    now = info.partitions_at(committed[-1]) if committed else None
    left = [f for f in files if has_state and now is not None and f.partition_id >= now]
    if left:
        r = info.repartitions[-1]
        unused = sorted({f.partition_id for f in left})
        problems.append(
            Problem(
                "partitions_left_by_repartition",
                "info",
                f"{len(unused)} state partition folder(s) unused since the repartition at batch {r.batch_id}",
                f"Batch {r.batch_id} repartitioned the state from {r.before} to {r.after} partitions: partition(s) "
                f"{', '.join(map(str, unused))} keep {len(left)} file(s), {human_bytes(sum(f.size for f in left))}, that "
                "only batches before it read. Spark does not load them again, so its maintenance does not clean them up.",
                f"Nothing to repair. Keep them to read batches before {r.batch_id}; otherwise they may be archived.",
                {"partitions": unused, "files": len(left), "bytes": sum(f.size for f in left)},
            )
        )
    retention = retention_finding(info.batches, info.conf)
    if retention:
        problems.append(
            Problem(
                retention.code,
                "warning",
                "Old batches are not cleaned up",
                retention.message,
                "Check the state store maintenance task in the driver's log and the checkpoint store's delete permissions.",
                {"retained": len(committed), "min_batches_to_retain": min_keep},
            )
        )
    return report
