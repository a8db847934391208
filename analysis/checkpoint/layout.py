"""The state files on disk, summarised per operator and store (from the log reader, no JVM)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

import pyarrow as pa

from statelens.analysis.checkpoint.health import human_bytes
from statelens.analysis.core.model import Batch, StateFile

VERSIONED_KINDS = ("delta", "snapshot", "changelog", "zip")


def store_files_summary(files: Iterable[StateFile]) -> pa.Table:
    """One row per (operator, store): partitions, files, bytes, versions and file kinds."""
    groups: dict[tuple[int, str], list[StateFile]] = defaultdict(list)
    for f in files:
        if f.partition_id >= 0:
            groups[(f.operator_id, f.store_name)].append(f)
    rows = []
    for (op, store), fs in sorted(groups.items()):
        versions = [f.version for f in fs if f.version is not None]
        kinds = Counter(f.kind for f in fs)
        rows.append(
            {
                "operator_id": op,
                "store_name": store,
                "partitions": len({f.partition_id for f in fs}),
                "files": len(fs),
                "bytes": sum(f.size for f in fs),
                "size": human_bytes(sum(f.size for f in fs)),
                "min_version": min(versions) if versions else None,
                "max_version": max(versions) if versions else None,
                "kinds": ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())),
            }
        )
    schema = pa.schema(
        [
            ("operator_id", pa.int64()),
            ("store_name", pa.string()),
            ("partitions", pa.int64()),
            ("files", pa.int64()),
            ("bytes", pa.int64()),
            ("size", pa.string()),
            ("min_version", pa.int64()),
            ("max_version", pa.int64()),
            ("kinds", pa.string()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def version_history(files: Iterable[StateFile], batches: list[Batch], operator_id: int, store: str) -> pa.Table:
    """One store's versions, as Flink's checkpoint history shows them: per state version (written
    by batch version - 1) its delta, snapshot, changelog and zip files and bytes over every
    partition, and whether the version is retained on disk or purged (a committed batch whose
    version has no file left)."""
    per: dict[int, list[StateFile]] = defaultdict(list)
    partitions: set[int] = set()
    for f in files:
        if f.operator_id == operator_id and f.store_name == store and f.partition_id >= 0:
            partitions.add(f.partition_id)
            if f.version is not None and f.kind in VERSIONED_KINDS:
                per[f.version].append(f)
    committed = {b.batch_id for b in batches if b.committed}
    versions = sorted(set(per) | {b + 1 for b in committed})
    rows = []
    for v in versions:
        fs = per.get(v, [])
        kinds = Counter(f.kind for f in fs)
        rows.append(
            {
                "version": v,
                "batch_id": v - 1,
                "committed": (v - 1) in committed,
                "on_disk": "retained" if fs else "purged",
                **{kind: kinds.get(kind, 0) for kind in VERSIONED_KINDS},
                "partitions_with_files": len({f.partition_id for f in fs}),
                "bytes": sum(f.size for f in fs),
                "size": human_bytes(sum(f.size for f in fs)),
            }
        )
    return pa.Table.from_pylist(rows) if rows else pa.table({"version": pa.array([], pa.int64())})


def schema_files(files: Iterable[StateFile], operator_id: int) -> pa.Table:
    """An operator's state schema files: ``_metadata/schema`` per store, and transformWithState's
    ``_stateSchema/<column family>/<schema version>_<id>`` files (schema evolution)."""
    rows = [
        {
            "path": f.path,
            "schema version": _schema_version(f.path),
            "bytes": f.size,
        }
        for f in sorted(files, key=lambda f: f.path)
        if f.operator_id == operator_id and f.kind == "schema"
    ]
    return pa.Table.from_pylist(rows) if rows else pa.table({"path": pa.array([], pa.string())})


def _schema_version(path: str) -> int | None:
    name = path.rsplit("/", 1)[-1]
    head = name.split("_", 1)[0]
    return int(head) if "_stateSchema" in path and head.isdigit() else None
