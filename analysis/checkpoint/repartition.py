"""What repartitioning the state would do, before it is done (pure).

Spark 4.2+ repartitions a checkpoint's state offline (``StreamingCheckpointManager.repartition``;
PySpark: ``spark._streamingCheckpointManager.repartition(path, n)``): every stored row goes to the
partition Spark's hash partitioning of its key gives for the new count, the partition the restarted
query's shuffle sends that key to. ``spark_io.gather.repartition`` computes those partitions from
the stored keys; this module judges the result: rows and bytes per new partition, skew before and
after, the hottest keys' new homes, and whether Spark would refuse (checked with PySpark 4.3):

* ``STATE_REWRITER_INVALID_CHECKPOINT.MISSING_OPERATOR_METADATA``: no operator metadata (a
  checkpoint Spark 3.x wrote);
* ``STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER``: state on the HDFS-backed provider
  (RocksDB only);
* ``STATE_REPARTITION_INVALID_CHECKPOINT.SHUFFLE_PARTITIONS_ALREADY_MATCH``: the count it has.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from statelens.analysis.core.model import CheckpointInfo

ROCKSDB = "RocksDBStateStoreProvider"


@dataclass
class StorePreview:
    operator_id: int
    store: str  # "default", a store or transformWithState variable, or a join's "left" / "right"
    rows_before: list[int]  # rows per current partition
    rows: list[int]  # rows per new partition, 0 .. N-1
    bytes: list[int]  # estimated bytes per new partition: each row at its current partition's bytes per row
    hot_keys: list[dict[str, Any]] = field(default_factory=list)  # {"key", "rows", "from", "to"}

    @property
    def skew_before(self) -> float:
        return skew(self.rows_before)

    @property
    def skew_after(self) -> float:
        return skew(self.rows)


@dataclass
class RepartitionPreview:
    path: str
    partitions: int  # the new count
    current: int | None  # the count the state has now
    batch: int  # the state read: the last committed batch
    stores: list[StorePreview]
    spark_error_class: str | None  # what Spark's repartition would raise (None: it would run)
    spark_refusal: str | None  # why, in a sentence
    command: str
    unknown: list[str] = field(default_factory=list)  # stores whose keys could not be placed, and why
    warnings: list[str] = field(default_factory=list)  # what Spark's repartition would do wrong here

    @property
    def skew_before(self) -> float:
        return max((s.skew_before for s in self.stores), default=1.0)

    @property
    def skew_after(self) -> float:
        return max((s.skew_after for s in self.stores), default=1.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "partitions": self.partitions,
            "current_partitions": self.current,
            "batch": self.batch,
            "spark_error_class": self.spark_error_class,
            "spark_refusal": self.spark_refusal,
            "stores": [
                asdict(s) | {"skew_before": round(s.skew_before, 3), "skew_after": round(s.skew_after, 3)} for s in self.stores
            ],
            "skew_before": round(self.skew_before, 3),
            "skew_after": round(self.skew_after, 3),
            "command": self.command,
            "unknown": self.unknown,
            "warnings": self.warnings,
        }


def skew(rows: list[int]) -> float:
    """The fullest partition against the mean (1.0: even)."""
    total = sum(rows)
    return max(rows) / (total / len(rows)) if rows and total else 1.0


def refusal(info: CheckpointInfo, partitions: int) -> tuple[str | None, str | None]:
    """Whether Spark's offline repartition would refuse this checkpoint, in the order it checks."""
    if info.operators and all(op.metadata_version is None for op in info.operators):
        return (
            "STATE_REWRITER_INVALID_CHECKPOINT.MISSING_OPERATOR_METADATA",
            "The checkpoint has no operator metadata (Spark before 4.0 wrote it): Spark's repartition needs it. "
            "Run the query one batch on Spark 4.2+ first; it writes the metadata.",
        )
    provider = info.conf.get("spark.sql.streaming.stateStore.providerClass", "")
    if info.operators and not provider.endswith(ROCKSDB):
        return (
            "STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER",
            f"The state is on {provider.rsplit('.', 1)[-1] or 'the HDFS-backed provider'}: Spark repartitions RocksDB state "
            "only. The preview still shows where the keys would go.",
        )
    if info.current_partitions == partitions:
        return (
            "STATE_REPARTITION_INVALID_CHECKPOINT.SHUFFLE_PARTITIONS_ALREADY_MATCH",
            f"The state already has {partitions} partitions.",
        )
    return None, None


def hazards(info: CheckpointInfo) -> list[str]:
    """What Spark's repartition runs through but damages (checked with PySpark 4.3.0)."""
    out = []
    for op in info.operators:
        if op.is_join and any(s.store_name.endswith("keyWithTsToValues") for s in op.stores):
            out.append(
                f"Operator {op.operator_id} keeps join state format 4: PySpark 4.3.0's repartition runs, but leaves its "
                "keyWithTsToValues stores unreadable (Spark's State Data Source fails on them; rows of tsWithKey are lost). "
                "Do not repartition it with that version: keep the count, or start a new checkpoint."
            )
    return out


def command(path: str, partitions: int, checkpoint_format_version: int = 1) -> str:
    """What to run; a checkpoint of state format version 2 needs the session set to it (else Spark
    refuses: ``STATE_REWRITER_INVALID_CHECKPOINT.STATE_CHECKPOINT_FORMAT_VERSION_MISMATCH``)."""
    conf = (
        'spark.conf.set("spark.sql.streaming.stateStore.checkpointFormatVersion", "2"); '
        if checkpoint_format_version == 2
        else ""
    )
    return (
        f'{conf}spark._streamingCheckpointManager.repartition("{path}", {partitions})  # PySpark 4.3 (Spark 4.2+), '
        "with the query stopped; on Databricks: spark.sql.streaming.stateStore.partitions"
    )


def lines(p: RepartitionPreview) -> list[str]:
    """The preview in text, for the CLI."""
    out = [
        f"repartition {p.current} -> {p.partitions} partitions (state of batch {p.batch}): "
        + (f"Spark would refuse: {p.spark_error_class}. {p.spark_refusal}" if p.spark_error_class else "Spark would run it."),
        f"skew (fullest partition / mean): {p.skew_before:.2f} now, {p.skew_after:.2f} after",
    ]
    for s in p.stores:
        out.append(
            f"operator {s.operator_id} {s.store}: {sum(s.rows):,} rows; per new partition: "
            + ", ".join(f"{i}: {n:,}" for i, n in enumerate(s.rows))
            + f" (skew {s.skew_before:.2f} -> {s.skew_after:.2f})"
        )
        for k in s.hot_keys:
            out.append(f"    hot key {k['key']} ({k['rows']:,} rows): partition {k['from']} -> {k['to']}")
    out += [f"not placed: {u}" for u in p.unknown]
    out += [f"WARNING: {w}" for w in p.warnings]
    out.append(f"command: {p.command}")
    return out
