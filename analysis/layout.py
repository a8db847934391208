"""The state files on disk, summarised per operator and store (from the log reader, no JVM)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

import pyarrow as pa

from analysis.model import StateFile

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
            ("min_version", pa.int64()),
            ("max_version", pa.int64()),
            ("kinds", pa.string()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)
