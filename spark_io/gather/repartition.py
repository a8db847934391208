"""``statelens repartition``: where every stored key would go with another partition count.

Reads each store's keys at the last committed batch natively and places them with Spark's hash
partitioning (``spark_io.readers.native.hashing.key_partitions``). Before a store is previewed, the
same function must place every stored row in the partition it is in now: a store where it does
not (a key type not computed here, a key layout not known) is named as not placed, never guessed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from statelens.analysis.checkpoint.repartition import RepartitionPreview, StorePreview, command, hazards, refusal
from statelens.analysis.checkpoint.restart import load_cost
from statelens.analysis.core.arrow_numpy import numpy_of
from statelens.analysis.core.errors import InvalidInput, StateLensError, option
from statelens.analysis.core.model import (
    JOIN_ROW_FIELDS,
    JOIN_SIDES,
    CheckpointInfo,
    OperatorInfo,
    StateSource,
    operator_of,
    require_state,
    sources_of,
)
from statelens.spark_io.logs.checkpoint import list_state_files, read_checkpoint
from statelens.spark_io.readers.native import kernels
from statelens.spark_io.readers.native.hashing import key_hashes
from statelens.spark_io.readers.native.reader import NativeReader
from statelens.spark_io.readers.native.stats import spark_json

HOT_KEYS = 3


def _stores(op: OperatorInfo) -> list[tuple[str, StateSource, str]]:
    """(label, source, store folder) of each store whose rows move: a join's sides by their rows store."""
    if op.is_join:
        return [
            (side, StateSource(op.operator_id, store_name=op.join_rows_store(side)), op.folder_of(op.join_rows_store(side)))
            for side in JOIN_SIDES
        ]
    out: list[tuple[str, StateSource, str]] = []
    for src in sources_of(op):
        if src.timers or src.join_side:
            continue
        label = src.state_var or src.store_name or "default"
        out.append((label, src, op.folder_of(src.store_name) if src.store_name else "default"))
    return out


def _multi_row(t: pa.Table, prefix: int | None) -> bool:
    """Whether a key may hold several rows of this store (a join key's values, a list or map state's
    elements, a session window's sessions): only then is a key hotter than another."""
    key_fields = {f.name for f in t.schema.field("key").type}
    return bool(prefix) or bool(key_fields & set(JOIN_ROW_FIELDS)) or bool({"list_element", "user_map_key"} & set(t.column_names))


def _hot_keys(t: pa.Table, hashes: np.ndarray) -> list[dict[str, Any]]:
    """One partition's keys with the most rows: {"key", "rows", "from", "hash"}."""
    key = t["key"].combine_chunks()
    fields = [f.name for f in key.type if f.name not in JOIN_ROW_FIELDS]
    flat = pa.table({f: key.field(f) for f in fields})
    while any(pa.types.is_struct(c.type) for c in flat.columns):
        flat = flat.flatten()
    cols = flat.column_names
    flat = flat.append_column("_now", t["partition_id"]).append_column("_h", pa.array(hashes))
    grouped = flat.group_by(cols).aggregate([("_now", "count"), ("_now", "min"), ("_h", "min")])
    grouped = grouped.sort_by([("_now_count", "descending")]).slice(0, HOT_KEYS)
    return [
        {"key": spark_json({c: r[c] for c in cols}), "rows": r["_now_count"], "from": r["_now_min"], "hash": r["_h_min"]}
        for r in grouped.to_pylist()
        if r["_now_count"] > 1
    ]


def _placed(reader: NativeReader, src: StateSource, batch: int, prefix: int | None, partitions: int) -> Any:
    """Per current partition of one store: its rows' partitions and key hashes, and its hottest keys
    (read and hashed a partition per core: one partition's keys in memory at a time per core)."""
    skip = frozenset(JOIN_ROW_FIELDS)

    def one(parts: list[int]) -> tuple[np.ndarray, np.ndarray | None, list[dict[str, Any]]]:
        t = reader.state(src, batch, parts, keys_only=True)
        now = numpy_of(t["partition_id"]).astype(np.int64) if t.num_rows else np.zeros(0, np.int64)
        if not t.num_rows:
            return now, np.zeros(0, np.int64), []
        h = key_hashes(t["key"], prefix, skip)
        hot = _hot_keys(t, h) if h is not None and _multi_row(t, prefix) else []
        return now, h, hot

    return reader.decode_each(one, [[p] for p in range(partitions)])


def repartition_preview(
    path: str, partitions: int, operator_id: int | None = None, info: CheckpointInfo | None = None, batch: int | None = None
) -> RepartitionPreview:
    """``batch``: the state read (default: the last committed batch, what a repartition now moves)."""
    if partitions < 1:
        raise InvalidInput(f"{option('--partitions')} must be 1 or more, not {partitions}.")
    info = info or read_checkpoint(path)
    require_state(info)
    batch = info.last_committed if batch is None else batch
    if batch is None:
        raise InvalidInput(f"{info.path} has no committed batch: there is no state to repartition yet.")
    ops = [operator_of(info, operator_id)] if operator_id is not None else info.operators
    reader = NativeReader(info)
    files = list_state_files(info.path)
    costs = load_cost(files, batch + 1, info.partitions_at(batch))
    ssts: dict[tuple[int, str], int] = {}
    for f in files:
        if f.kind == "sst":
            ssts[(f.operator_id, f.store_name)] = ssts.get((f.operator_id, f.store_name), 0) + f.size
    current = info.partitions_at(batch) or info.current_partitions
    stores: list[StorePreview] = []
    unknown: list[str] = []
    for op in ops:
        for label, src, folder in _stores(op):
            store_info = op.store(src.store_name) if src.store_name else None
            now = current or (store_info or op.stores[0]).num_partitions
            prefix = store_info.num_cols_prefix_key or None if store_info else None
            # the files the state loads from, compressed (lz4: about a quarter of the bytes walked), and RocksDB's SST files
            on_disk = sum(c.bytes for c in costs if c.operator_id == op.operator_id and c.store == folder)
            kernels.expect_scan(4 * (on_disk + ssts.get((op.operator_id, folder), 0)))
            try:
                pieces = _placed(reader, src, batch, prefix, now)
            except StateLensError as e:
                unknown.append(f"operator {op.operator_id} {label}: not read natively ({e.message})")
                continue
            if any(h is None for _, h, _ in pieces):
                unknown.append(f"operator {op.operator_id} {label}: not placed (a key field type not computed here)")
                continue
            part_now = np.concatenate([p for p, _, _ in pieces]) if pieces else np.zeros(0, np.int64)
            hashes = np.concatenate([h for _, h, _ in pieces]) if pieces else np.zeros(0, np.int64)  # type: ignore[misc]
            if not np.array_equal(hashes % now, part_now):  # Spark's own placement, the check of the function
                unknown.append(
                    f"operator {op.operator_id} {label}: not placed (its keys are not where Spark's hash puts them); "
                    "Spark's repartition still is the truth"
                )
                continue
            new = hashes % partitions
            rows_before = np.bincount(part_now, minlength=now)
            by_part = {c.partition: c.bytes for c in costs if c.operator_id == op.operator_id and c.store == folder}
            per_row = np.array([by_part.get(p, 0) / n if n else 0.0 for p, n in enumerate(rows_before)])
            rows = np.bincount(new, minlength=partitions)
            size = np.bincount(new, weights=per_row[part_now], minlength=partitions) if len(new) else np.zeros(partitions)
            hot = sorted((k for _, _, ks in pieces for k in ks), key=lambda k: -k["rows"])[:HOT_KEYS]
            preview = StorePreview(op.operator_id, label, rows_before.tolist(), rows.tolist(), [round(float(b)) for b in size])
            preview.hot_keys = [
                {"key": k["key"], "rows": k["rows"], "from": k["from"], "to": int(k["hash"] % partitions)} for k in hot
            ]
            stores.append(preview)
    error_class, refused = refusal(info, partitions)
    return RepartitionPreview(
        info.path,
        partitions,
        current,
        batch,
        stores,
        error_class,
        refused,
        command(info.path, partitions, info.checkpoint_format_version),
        unknown,
        hazards(info),
    )
