"""State health: skew, growth, watermarks, retention and configuration advice (pure functions).

Inputs are plain facts gathered by ``spark_io.gather.checkup``: rows per partition and the hottest keys
of a store, its change feed reduced to (batch, delete?, key hash, partition), state file sizes,
and the checkpoint's batches and captured configuration.
"""

from __future__ import annotations

import itertools
import os
import statistics
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from statelens.analysis.core.key_format import fmt_time
from statelens.analysis.core.model import Batch, StateFile
from statelens.analysis.core.operator_kinds import behaviour

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
    engine: str = "spark"  # which reader answered
    engine_note: str | None = None  # why Spark answered although the native reader was asked first

    @property
    def too_little_state(self) -> bool:
        """Fewer rows than SKEW_MIN_ROWS_PER_PARTITION per partition: the counts are noise, not skew."""
        return sum(self.rows_by_partition.values()) < SKEW_MIN_ROWS_PER_PARTITION * max(1, len(self.rows_by_partition))

    @property
    def ratio_text(self) -> str:
        """The max/min headline: "too little state", "∞ (an empty partition)" or "1.6x"."""
        if self.too_little_state:
            return "too little state"
        return "∞ (an empty partition)" if self.skew_ratio is None else f"{self.skew_ratio:.1f}x"

    @property
    def headline(self) -> str:
        """One line for titles: the ratios, or why there are none."""
        if self.too_little_state:
            rows = sum(self.rows_by_partition.values())
            return f"too little state to judge: {rows:,} rows in {len(self.rows_by_partition)} partitions"
        return f"max/min {self.ratio_text}, max/median {self.max_over_median:.1f}x"

    def to_dict(self) -> dict[str, Any]:
        return {
            "operator_id": self.operator_id,
            "store_name": self.store_name,
            "batch_id": self.batch_id,
            "too_little_state": self.too_little_state,
            "rows_by_partition": {str(p): n for p, n in sorted(self.rows_by_partition.items())},
            "bytes_by_partition": {str(p): n for p, n in sorted(self.bytes_by_partition.items())},
            "skew_ratio": self.skew_ratio,
            "max_over_median": self.max_over_median,
            "top_keys": self.top_keys,
            "engine": self.engine,
            "engine_note": self.engine_note,
            "findings": [f.to_dict() for f in self.findings],
        }


HOT_KEY_ADVICE = {
    "aggregation": "Aggregate in two phases: add a random salt (0..N-1) to the grouping key, aggregate, then drop the "
    "salt and combine the N partial results.",
    "join": "Salt the skewed side only (a random suffix 0..N-1 on its key) and replicate the other side N times, once "
    "per suffix, so every pair still meets; or route the hot key through a separate query. Salting both sides "
    "independently loses matches.",
    "dedup": "Deduplication cannot be salted (every copy of a key must reach the same state): deduplicate on a finer "
    "key (add an id or the event time) or filter the hot key's repeats upstream.",
    "dedup_within_watermark": "Deduplication cannot be salted (every copy of a key must reach the same state): "
    "deduplicate on a finer key or filter the hot key's repeats upstream.",
    "session_window": "A session cannot be split across salts: filter or pre-aggregate the hot key's events upstream.",
    "group_state": "Group state is per key by design: split the key in your function's key (for example by a sub-id) "
    "if its state can be partitioned, or handle the hot key apart.",
    "transform_with_state": "State is per grouping key by design: split the key (for example by a sub-id) if its "
    "state can be partitioned, or handle the hot key apart.",
}


def skew_report(
    operator_id: int,
    store_name: str,
    batch_id: int,
    num_partitions: int,
    rows_by_partition: dict[int, int],
    bytes_by_partition: dict[int, int],
    top_keys: list[dict[str, Any]],
    kind: str = "aggregation",
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
                    f"Key {key_json(k['key'])} alone holds {k['rows']:,} rows ({k['rows'] / total:.0%} of the store). "
                    + HOT_KEY_ADVICE.get(kind, HOT_KEY_ADVICE["aggregation"]),
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
    # batch -> keys inserted, deleted by it; a batch missing is not known (the first retained batch of a
    # query whose older batches are gone: what it changed is in none of the files left)
    inserts: dict[int, int]
    deletes: dict[int, int]
    bytes: dict[int, int]  # batch -> bytes of state files on disk up to its version
    # "change feed": the store's changes, as its delta or changelog files list them; "state per batch"
    # (no change feed: RocksDB without changelog checkpointing): the differences between the states
    # of successive batches (a key updated in place, or inserted and deleted between two, is not seen)
    method: str = "change feed"

    def described(self) -> str:
        """How its inserts and deletes were counted, in a sentence."""
        if self.method == "change feed":
            return "inserts and deletes as the store's change feed lists them"
        return (
            "inserts and deletes as the differences between the states of successive batches (this store keeps no "
            "change feed: RocksDB without changelog checkpointing); a value updated in place is not counted"
        )


def copies_apart(rows: list[tuple[int, int]]) -> dict[int, int]:
    """(key_hash, partition) rows as id -> partition, the n-th copy of a key under an id of its own."""
    out: dict[int, int] = {}
    copies: dict[int, int] = {}
    for k, p in rows:
        n = copies.get(k, 0)
        copies[k] = n + 1
        out[k if n == 0 else (k ^ (n * 0x9E3779B97F4A7C15)) & 0x7FFFFFFFFFFFFFFF] = p
    return out


def diff_snapshots(snapshots: list[tuple[int, list[tuple[int, int]]]]) -> list[tuple[int, bool, int, int]]:
    """Changes between successive snapshots of (key_hash, partition): what a change feed would hold.
    A key held several times (a list's elements, a format 4 join's rows of one key and time) counts
    each time: its n-th copy gets an id of its own."""
    out: list[tuple[int, bool, int, int]] = []
    prev: dict[int, int] = {}
    for b, rows in snapshots:
        now = copies_apart(rows)
        out += [(b, False, k, p) for k, p in now.items() if k not in prev]
        out += [(b, True, k, p) for k, p in prev.items() if k not in now]
        prev = now
    return out


def replay_changes(
    batches: list[int],
    changes: Iterable[tuple[int, bool, int, int]] | tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    base: Iterable[tuple[int, int]] | tuple[np.ndarray, np.ndarray] = (),
) -> tuple[dict[int, int], dict[int, dict[int, int]], dict[int, int], dict[int, int]]:
    """One pass over a change feed: rows per batch (and per partition), inserts and deletes.

    ``changes`` holds (batch_id, is_delete, key_id, partition_id), as tuples or as four arrays, in
    feed order; an insert is an update of a key not present before, a delete counts when the key
    was present. ``base`` is (key_id, partition) of the state before the first batch. Vectorised:
    each change's key was present before it when the key's previous change was an update (or,
    for its first change, when the key is in ``base``)."""
    batch, is_delete, key, part = _arrays(changes, 4)
    base_key, base_part = _arrays(base, 2)
    order_b = sorted(batches)
    bi = _positions(batch, np.asarray(order_b, np.int64))
    wanted = bi >= 0
    if not wanted.all():
        is_delete, key, part, bi = is_delete[wanted], key[wanted], part[wanted], bi[wanted]
    if not is_delete.any():  # no delete (a store that only grows): a key's first change inserts it
        inserted = _first_changes(key, bi)
        if len(base_key):
            inserted &= ~np.isin(key, base_key)
        deleted = np.zeros(len(key), np.bool_)
        return _counts(order_b, base_part, bi, part, inserted, deleted)
    # each key's changes in batch order, feed order within a batch: a feed lists a key's changes in
    # batch order already (one partition's files, oldest first), so a stable sort by key suffices;
    # where it does not, by key and batch
    order, sorted_key = _stable_order(key)
    sorted_bi = bi[order]
    if ((sorted_key[1:] == sorted_key[:-1]) & (sorted_bi[1:] < sorted_bi[:-1])).any():
        order = np.lexsort((np.arange(len(key)), bi, key))
        sorted_key, sorted_bi = key[order], bi[order]
    key, bi, is_delete, part = sorted_key, sorted_bi, is_delete[order].astype(bool), part[order]
    first = np.ones(len(key), np.bool_)
    first[1:] = key[1:] != key[:-1]
    after_update = np.zeros(len(key), np.bool_)
    after_update[1:] = ~is_delete[:-1]
    present_before = np.where(first, np.isin(key, base_key), after_update)
    return _counts(order_b, base_part, bi, part, ~is_delete & ~present_before, is_delete & present_before)


def _counts(
    order_b: list[int], base_part: np.ndarray, bi: np.ndarray, part: np.ndarray, inserted: np.ndarray, deleted: np.ndarray
) -> tuple[dict[int, int], dict[int, dict[int, int]], dict[int, int], dict[int, int]]:
    """``replay_changes``'s figures from each change's batch index and partition, and whether it
    inserted or deleted a key (in any order)."""
    parts = np.unique(np.concatenate([base_part, part[inserted]]))
    pi = _positions(part, parts)  # a partition no insert reaches: -1, and only its deletes of nothing
    shape = (len(order_b), max(len(parts), 1))
    cell = bi * shape[1] + pi
    size = shape[0] * shape[1]
    delta = (np.bincount(cell[inserted], minlength=size) - np.bincount(cell[deleted], minlength=size)).reshape(shape)
    start = np.zeros(shape[1], np.int64)
    np.add.at(start, _positions(base_part, parts), 1)
    per_part = start + np.cumsum(delta, axis=0)
    seen = np.full(shape[1], len(order_b), np.int64)  # the batch index a partition is first counted at
    seen[_positions(base_part, parts)] = -1
    first_insert = np.full(shape[1], len(order_b), np.int64)
    np.minimum.at(first_insert, pi[inserted], bi[inserted])
    seen = np.minimum(seen, first_insert)
    ins = np.bincount(bi[inserted], minlength=len(order_b))
    dels = np.bincount(bi[deleted], minlength=len(order_b))
    rows_out, parts_out, ins_out, dels_out = {}, {}, {}, {}
    for i, b in enumerate(order_b):
        rows_out[b] = int(per_part[i].sum())
        parts_out[b] = {int(parts[j]): int(per_part[i, j]) for j in range(len(parts)) if seen[j] <= i}
        ins_out[b], dels_out[b] = int(ins[i]), int(dels[i])
    return rows_out, parts_out, ins_out, dels_out


def _first_changes(key: np.ndarray, bi: np.ndarray) -> np.ndarray:
    """Whether each change is its key's first, by batch and then feed order: the keys sorted (not
    stably), each run of equal keys' earliest change taken by its (batch, position) number."""
    n = len(key)
    first = np.zeros(n, np.bool_)
    if not n:
        return first
    order, sorted_key = _sorted(key, _order_of)
    starts = np.flatnonzero(np.concatenate(([True], sorted_key[1:] != sorted_key[:-1])))
    earliest = np.minimum.reduceat((bi * n + np.arange(n))[order], starts)
    first[earliest % n] = True
    return first


SORT_APART = 200_000  # changes past which the negative and other keys are sorted on two cores


def _stable_order(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.argsort(key, kind="stable")`` and the keys in that order, faster: an unstable sort
    (numpy's vectorised one), then each run of equal keys put back in feed order by one sort of
    (run, position) numbers."""
    return _sorted(key, _stable_order_of)


def _sorted(
    key: np.ndarray, sort: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
) -> tuple[np.ndarray, np.ndarray]:
    """``sort(key, positions)``: the positions of ``key`` in sorted order, and the sorted keys. Many
    keys: the negative ones and the others (every one of the first sorts before every one of the
    second) apart, side by side (numpy's sorts free the GIL)."""
    n = len(key)
    if n < SORT_APART or (os.cpu_count() or 1) < 2:
        return sort(key, np.arange(n))
    negative = key < 0
    halves = (np.flatnonzero(negative), np.flatnonzero(~negative))
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(sort, key[halves[0]], halves[0])
        second = sort(key[halves[1]], halves[1])
        first_order, first_keys = first.result()
    return np.concatenate([first_order, second[0]]), np.concatenate([first_keys, second[1]])


def _order_of(key: np.ndarray, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions of ``key`` in sorted order (equal keys in any order), and the sorted keys."""
    order = np.argsort(key)
    return position[order], key[order]


def _stable_order_of(key: np.ndarray, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_stable_order`` of ``key``, each given as its ``position``."""
    n = len(key)
    if n < 2:
        return position, key
    order = np.argsort(key)
    sorted_key = key[order]
    run = np.zeros(n, np.int64)
    np.cumsum(sorted_key[1:] != sorted_key[:-1], out=run[1:])
    return position[np.sort(run * n + order) % n], sorted_key


def _positions(values: np.ndarray, sorted_unique: np.ndarray) -> np.ndarray:
    """Each value's index in ``sorted_unique``, or -1 where it is not there (batch ids and
    partitions: small numbers, looked up in a table)."""
    if not len(sorted_unique) or not len(values):
        return np.full(len(values), -1, np.int64)
    lo, hi = int(sorted_unique[0]), int(sorted_unique[-1])
    if hi - lo < 1 << 22:
        table = np.full(hi - lo + 1, -1, np.int64)
        table[sorted_unique - lo] = np.arange(len(sorted_unique))
        inside = (values >= lo) & (values <= hi)
        return np.where(inside, table[np.clip(values, lo, hi) - lo], -1)
    at = np.clip(np.searchsorted(sorted_unique, values), 0, len(sorted_unique) - 1)
    return np.where(sorted_unique[at] == values, at, -1)


def _arrays(rows: Any, width: int) -> tuple[np.ndarray, ...]:
    if isinstance(rows, tuple) and len(rows) == width and all(isinstance(a, np.ndarray) for a in rows):
        return tuple(np.asarray(a, np.int64) for a in rows)
    data = np.array(list(rows), np.int64).reshape(-1, width)
    return tuple(data[:, i] for i in range(width))


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


@dataclass
class EvictionFacts:
    """What decides whether an operator's state can ever leave, gathered from its state and schema."""

    operator_id: int
    kind: str  # analysis.why_missing kinds: join, aggregation, dedup, ...
    key_has_event_time: bool = True  # aggregation / dedup: the key holds a window or a timestamp
    other_way_out: bool = False  # group state with timeouts set, transformWithState with TTL or timers
    oldest_event_ms: int | None = None  # the oldest event time held in state (value or key)
    windows_past_watermark: int = 0  # windows still in state although the watermark passed their end


def counted(stores: list[StoreGrowth]) -> list[StoreGrowth]:
    """The stores whose rows are what users mean by 'rows in state': a join's rows per side
    (keyWithIndexToValue or keyWithTsToValues, not its key counts or time index), every other
    store or state variable."""
    return [g for g in stores if not g.store_name.endswith(("keyToNumValues", "tsWithKey"))]


def rows_in_state(stores: list[StoreGrowth]) -> int:
    return sum(g.rows[max(g.rows)] for g in counted(stores) if g.rows)


def counted_stores_text(stores: list[StoreGrowth]) -> str:
    names = [f"op{g.operator_id} {g.store_name}" for g in counted(stores)]
    left_out = len(stores) - len(names)
    return (
        "counted: "
        + ", ".join(names)
        + ("; a join's keyToNumValues stores are left out (they count keys, not rows)" if left_out else "")
    )


def key_json(key: Any) -> str:
    """A key as JSON, the way every page, the CLI and the report show keys."""
    import json

    return json.dumps(key, ensure_ascii=False, default=str)


def never_evicts(f: EvictionFacts, has_watermark: bool) -> str | None:
    """Why the operator's state can never leave, or None when it can."""
    if behaviour(f.kind).watermark_evicts and not has_watermark:
        return "the query has no watermark, and this operator removes state only when the watermark passes it"
    if behaviour(f.kind).needs_key_time and not f.key_has_event_time:
        return "its key has no event-time column (no window, no timestamp), so the watermark cannot remove any of it"
    if f.windows_past_watermark:  # counted for an aggregation alone (spark_io.gather.checkup)
        return (
            f"{f.windows_past_watermark} window(s) already behind the watermark are still kept: the query runs in "
            "complete mode, which never removes a window"
        )
    return None


def growth_fix(f: EvictionFacts, has_watermark: bool) -> tuple[str, str | None]:
    """What lets such state leave: the change to the query, and the API or setting it names."""
    if behaviour(f.kind).watermark_evicts and not has_watermark:
        return (
            "Fix: define a watermark on the event-time column (withWatermark) before this operator, so state older than "
            "the delay can be removed.",
            "withWatermark(eventTimeColumn, delay)",
        )
    fix = behaviour(f.kind).needs_key_time
    if fix is not None and not f.key_has_event_time:
        return fix
    return "Fix: run it in append or update mode, which removes windows behind the watermark.", "outputMode"


def growth_findings(
    stores: list[StoreGrowth], batches: list[Batch], conf: dict[str, str], facts: list[EvictionFacts] | None = None
) -> list[Finding]:
    findings: list[Finding] = []
    marks = [b.watermark_ms for b in batches]
    has_watermark = any(marks)
    stuck = _stuck_run(batches)
    by_op: dict[int, list[StoreGrowth]] = {}
    for g in counted(stores):
        by_op.setdefault(g.operator_id, []).append(g)
    for f in facts or []:
        gs = [g for g in by_op.get(f.operator_id, []) if len(g.rows) >= 3]
        if not gs:
            continue
        first, last = min(gs[0].rows), max(gs[0].rows)
        before = sum(g.rows[first] for g in gs)
        after = sum(g.rows[last] for g in gs)
        removed = sum(sum(g.deletes.values()) for g in gs)
        grew = after > before
        detail = ", ".join(f"{g.store_name} {g.rows[first]:,} → {g.rows[last]:,}" for g in gs)
        evidence = {"operator_id": f.operator_id, "rows": {g.store_name: [g.rows[first], g.rows[last]] for g in gs}}
        why = never_evicts(f, has_watermark)
        if why and grew:
            fix, setting = growth_fix(f, has_watermark)
            findings.append(
                Finding(
                    "unbounded_growth",
                    f"Operator {f.operator_id} ({f.kind.replace('_', ' ')}) can never shrink: {why}. Its rows went "
                    f"{detail} over batches {first}–{last}; it grows until the job runs out of memory or disk. {fix}",
                    setting=setting,
                    evidence=evidence,
                )
            )
        elif grew and not removed and behaviour(f.kind).watermark_evicts:
            when = (
                f" The oldest event time in state is {fmt_time(f.oldest_event_ms)}; the watermark is {fmt_time(marks[-1])}: rows "
                "leave once the watermark passes their event time plus the operator's bound (window end, join time range)."
                if f.oldest_event_ms
                else ""
            )
            stuck_text = (
                f" The watermark has not moved for {len(stuck)} batches: eviction waits for it."
                if stuck and len(stuck) > STUCK_BATCHES
                else ""
            )
            findings.append(
                Finding(
                    "not_evicting_yet",
                    f"Operator {f.operator_id} ({f.kind.replace('_', ' ')}) has removed nothing yet over batches "
                    f"{first}–{last} ({detail}).{when}{stuck_text}",
                    severity="info",
                    evidence=evidence | {"oldest_event_ms": f.oldest_event_ms, "watermark_ms": marks[-1] if marks else 0},
                )
            )
        elif grew and not removed:
            out = "timeouts or TTL are set, so state can leave" if f.other_way_out else "no timeout or TTL was seen"
            findings.append(
                Finding(
                    "no_removal_yet",
                    f"Operator {f.operator_id} ({f.kind.replace('_', ' ')}) has removed nothing over batches {first}–{last} "
                    f"({detail}): its state leaves only when the function removes it, a timeout fires or TTL expires; {out}.",
                    severity="info",
                    evidence=evidence,
                )
            )
    needing = [f.operator_id for f in facts or [] if behaviour(f.kind).watermark_evicts]
    if batches and stores and not has_watermark and needing:
        findings.append(
            Finding(
                "watermark_missing",
                f"The watermark is 0 in all {len(batches)} batches: the query defines no watermark, so operator"
                f"{'s' if len(needing) > 1 else ''} {', '.join(map(str, needing))} can never evict state. Add "
                "withWatermark(eventTimeColumn, delay) before the stateful operators.",
            )
        )
    elif stuck and len(stuck) >= STUCK_BATCHES + 1:
        inserts = sum(g.inserts.get(b, 0) for g in stores for b in stuck)
        if inserts:
            findings.append(
                Finding(
                    "watermark_stuck",
                    f"The watermark has stayed at {fmt_time(marks[-1])} for {len(stuck)} batches ({stuck[0]}–{stuck[-1]}) "
                    f"while {inserts:,} new rows entered state: the event times are not advancing (constant, "
                    "defaulted or far in the past), so state is never evicted. Check the event-time column.",
                    evidence={"watermark_ms": marks[-1], "from_batch": stuck[0], "to_batch": stuck[-1]},
                )
            )
    retention = retention_finding(batches, conf)
    if retention:
        findings.append(retention)
    return findings


def _stuck_run(batches: list[Batch]) -> list[int]:
    """The trailing batches whose (non-zero) watermark did not move."""
    run: list[int] = []
    for prev, cur in itertools.pairwise(batches):
        if cur.watermark_ms and cur.watermark_ms == prev.watermark_ms:
            run = run or [prev.batch_id]
            run.append(cur.batch_id)
        else:
            run = []
    return run


def min_batches_to_retain(conf: dict[str, str]) -> tuple[int, bool]:
    """minBatchesToRetain from the checkpoint's conf, and whether it was recorded (else Spark's default)."""
    raw = conf.get("spark.sql.streaming.minBatchesToRetain")
    return (int(raw), True) if raw and raw.isdigit() else (DEFAULT_MIN_BATCHES_TO_RETAIN, False)


def retention_finding(batches: list[Batch], conf: dict[str, str]) -> Finding | None:
    """Far more batches retained than minBatchesToRetain: the cleanup is not running."""
    retain, recorded = min_batches_to_retain(conf)
    committed = [b.batch_id for b in batches if b.committed]
    if len(committed) <= retain + 10:
        return None
    said = "" if recorded else f" (not recorded in the checkpoint: Spark's default {retain} assumed)"
    return Finding(
        "retention_stuck",
        f"{len(committed)} batches are retained although Spark keeps only the last {retain}{said}: old versions are "
        "not being cleaned up (maintenance not running, or cleanup failing on this storage).",
        setting="spark.sql.streaming.minBatchesToRetain",
    )


TREND_BATCHES = 10  # the projection's slope is fitted over this many latest batches
BACK_TO_BACK_MS = 3_600_000  # batches spanning less than this say nothing about a daily rate
IDLE_FACTOR = 10  # a gap this many times the median interval is an idle gap


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else 0.0


def projection(stores: list[StoreGrowth], batches: list[Batch], growing_ops: set[int]) -> Finding | None:
    """Where an operator that can never shrink is heading: rows and bytes in 7 and 30 days.

    The rate is a least-squares slope over the last TREND_BATCHES batches (rows and bytes per batch);
    the cadence comes from the batch timestamps, with idle gaps (over IDLE_FACTOR x the median
    interval) counted and said. None when nothing grows, or when the recent trend is flat or falling.
    """
    gs = [g for g in counted(stores) if g.operator_id in growing_ops and g.rows]
    if not gs:
        return None
    common = sorted(set.intersection(*(set(g.rows) for g in gs)))[-TREND_BATCHES:]
    if len(common) < 3:
        return None
    rows = [(b, sum(g.rows[b] for g in gs)) for b in common]
    rate = slope([(float(b), float(r)) for b, r in rows])
    if rate <= 0:
        return None
    bytes_series = [(float(b), float(sum(g.bytes.get(b, 0) for g in gs))) for b in common]
    byte_rate = slope(bytes_series)
    rows_now, bytes_now = rows[-1][1], bytes_series[-1][1]
    per_row = bytes_now / rows_now if rows_now else 0.0
    times = [b.timestamp_ms for b in batches if b.timestamp_ms]  # the query's cadence over every retained batch
    evidence: dict[str, Any] = {"rows_per_batch": rate, "bytes_per_batch": byte_rate, "batches": [common[0], common[-1]]}
    head = (
        f"Fitted over batches {common[0]}–{common[-1]}, the state that can never shrink grows by {rate:,.1f} rows and "
        f"{human_bytes(byte_rate)} on disk per batch (now {rows_now:,} rows, {human_bytes(bytes_now)})."
    )
    if len(times) < 2 or times[-1] - times[0] < BACK_TO_BACK_MS:
        return Finding(
            "projection",
            head + " These batches ran back to back (less than an hour apart in all), so a daily rate cannot be told "
            "from them: multiply by the batches the query runs per day.",
            severity="info",
            evidence=evidence | {"batches_per_day": None},
        )
    gaps = [b - a for a, b in itertools.pairwise(times)]
    typical = statistics.median(gaps)
    idle = [g for g in gaps if typical and g > IDLE_FACTOR * typical]
    busy_ms = sum(g for g in gaps if g not in idle) or 1
    per_day = (len(gaps) - len(idle)) * 86_400_000 / busy_ms
    r7, r30 = rows_now + rate * per_day * 7, rows_now + rate * per_day * 30
    b7, b30 = bytes_now + byte_rate * per_day * 7, bytes_now + byte_rate * per_day * 30
    idle_text = f"; {len(idle)} idle gap(s) left out" if idle else ""
    return Finding(
        "projection",
        head + f" At {per_day:,.0f} batches a day (the median interval between batches, {typical / 1000:,.0f} s{idle_text}) "
        f"it reaches about {r7:,.0f} rows ({human_bytes(b7)}) in 7 days and {r30:,.0f} rows ({human_bytes(b30)}) in 30 days, "
        f"assuming the input keeps its recent rate (about {human_bytes(per_row)} on disk per row now).",
        severity="info",
        evidence=evidence | {"batches_per_day": per_day, "rows_7d": r7, "rows_30d": r30, "bytes_7d": b7, "bytes_30d": b30},
    )


def human_bytes(n: float) -> str:
    """Bytes in human units: 1.2 KB, 3.4 MB."""
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
