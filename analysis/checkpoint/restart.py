"""What a restart of the query costs and what it may change, from the checkpoint alone (pure).

* Cost: each store partition loads the newest snapshot at or below the restart's state version
  and replays every delta or changelog after it (the snapshot lag); the partitions that replay
  the most come first.
* What may change: Spark restores the settings it records in ``offsets/`` (``OffsetSeqMetadata``'s
  relevant confs) from the checkpoint whatever the restarted session sets, and checks each stateful
  operator's state schema against the stored one (``StateSchemaCompatibilityChecker``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from statelens.analysis.core.model import CheckpointInfo, StateFile

SNAPSHOTS = ("snapshot", "zip")
DELTAS = ("delta", "changelog")


@dataclass
class PartitionCost:
    operator_id: int
    store: str
    partition: int
    snapshot_version: int | None  # None: no snapshot, every delta from version 1 is replayed
    replayed: int  # deltas or changelogs replayed after the snapshot
    bytes: int  # the snapshot's and the replayed files' bytes (a RocksDB zip without its SST files)


def restart_cost(info: CheckpointInfo, files: list[StateFile]) -> list[PartitionCost]:
    """Per store partition, what loading the last committed batch's state version reads; most replayed first."""
    committed = info.committed_batches
    if not committed:
        return []
    last = committed[-1].batch_id
    return load_cost(files, last + 1, info.partitions_at(last))


def load_cost(files: list[StateFile], version: int, partitions: int | None = None) -> list[PartitionCost]:
    """Per store partition, the files loading state ``version`` reads; most replayed first.
    ``partitions``: the version's partition count after an offline repartition (older partitions are not loaded)."""
    groups: dict[tuple[int, str, int], list[StateFile]] = defaultdict(list)
    for f in files:
        in_use = partitions is None or f.partition_id < partitions
        if f.partition_id >= 0 and in_use and f.version is not None and f.version <= version:
            groups[(f.operator_id, f.store_name, f.partition_id)].append(f)
    out = []
    for (op, store, part), fs in groups.items():
        snaps = [f for f in fs if f.kind in SNAPSHOTS]
        base = max((f.version for f in snaps if f.version is not None), default=None)
        replay = [f for f in fs if f.kind in DELTAS and f.version is not None and f.version > (base or 0)]
        read = replay + [f for f in snaps if f.version == base]
        out.append(PartitionCost(op, store, part, base, len(replay), sum(f.size for f in read)))
    return sorted(out, key=lambda c: (-c.replayed, -c.bytes, c.operator_id, c.store, c.partition))


@dataclass
class Setting:
    setting: str
    value: str
    may_change: str  # "no", "yes", or what limits it
    why: str


# confs Spark restores from offsets/ on restart (OffsetSeqMetadata.relevantSQLConfs and friends)
FIXED = {
    "spark.sql.shuffle.partitions": "The state is partitioned by it: Spark uses the recorded value. Spark 4.2+ "
    "repartitions a stopped query's state offline; otherwise a new checkpoint.",
    "spark.sql.streaming.stateStore.providerClass": "The state files are the provider's own format: a restart with "
    "another provider cannot read them.",
    "spark.sql.streaming.join.stateFormatVersion": "State written in one join state format is not read by another.",
    "spark.sql.streaming.aggregation.stateFormatVersion": "State written in one aggregation state format is not read by another.",
    "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": "Group state written in one format is not read by another.",
    "spark.sql.streaming.stateStore.encodingFormat": "Rows are UnsafeRows or Avro as first written.",
    "spark.sql.streaming.stateStore.compression.codec": "The state files are compressed with the recorded codec.",
    "spark.sql.streaming.stateStore.rocksdb.formatVersion": "RocksDB's files keep the recorded format.",
    "spark.sql.streaming.multipleWatermarkPolicy": "Spark uses the recorded policy.",
    "spark.sql.streaming.statefulOperator.useStrictDistribution": "Spark uses the recorded value.",
}


def restart_settings(info: CheckpointInfo) -> list[Setting]:
    """The checkpoint's settings and stateful operators, each with whether a restart may change it."""
    out = [Setting(k, info.conf[k], "no", why) for k, why in FIXED.items() if k in info.conf]
    if "spark.sql.streaming.stateStore.rowChecksum.enabled" in info.conf:
        out.append(
            Setting(
                "spark.sql.streaming.stateStore.rowChecksum.enabled",
                info.conf["spark.sql.streaming.stateStore.rowChecksum.enabled"],
                "no",
                "Rows carry checksums as first written; Spark uses the recorded value.",
            )
        )
    avro = info.conf.get("spark.sql.streaming.stateStore.encodingFormat", "unsaferow").lower() == "avro"
    for op in info.operators:
        tws = "transformwithstate" in op.operator_name.lower()
        evolves = (
            "value schemas only, compatibly (Avro encoding)"
            if tws and avro
            else "no (value schemas evolve only for transformWithState with Avro encoding)"
        )
        stores = ", ".join(s.store_name for s in op.stores)
        out.append(
            Setting(
                f"operator {op.operator_id}",
                f"{op.operator_name} ({stores})",
                "no",
                "Operators are numbered in plan order: adding, removing or reordering a stateful operator fails the "
                "restart (STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA or a schema error).",
            )
        )
        out.append(
            Setting(
                f"operator {op.operator_id} state schema",
                "key and value schemas in its state schema files",
                evolves,
                "The key schema (grouping, dedup or join keys, window) never changes; a changed aggregate changes "
                "the value schema (STATE_STORE_KEY/VALUE_SCHEMA_NOT_COMPATIBLE).",
            )
        )
    return out
