"""Reading only a key's partition: Spark places state by pmod(hash(key), numPartitions), and the
verdicts read from the keys' partitions (latest snapshot + deltas) equal the full scan's: every key
lookup a diagnosis makes through Spark returns the full scan's rows. On every provider, format and
version kind that can be pruned; that every row of every sample is in the partition State Lens's
hash gives its key is ``test_native_engine.py``'s (the native reads equal Spark's: the golden files)."""

from __future__ import annotations

import golden
import pytest

from statelens.analysis.core.model import default_operator, lookup_sources
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.verdicts import diagnose
from statelens.spark_io.gather.diagnosis import key_fields_of
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers.spark_state import SparkState
from support import SAMPLES

# each costs a read of its stores and two diagnoses through Spark
VERDICTS = [
    "join_hdfs",
    "join_rocksdb",
    "hot_key_join",
    "unbounded_agg",
    "apply_in_pandas_with_state",
    "compat/3.5.9/join_hdfs",
    "compat/3.5.9/join_state_format_1",
    "compat/4.0.5/join_rocksdb",
    "compat/4.3.0/rocksdb_no_changelog",
    "compat/4.3.0/full_outer_join",
    "compat/4.3.0/purged",
    "compat/4.3.0/dedup_no_event_time",
    "compat/4.3.0/processing_time_timeout",
]


def single_field_stores(info):  # type: ignore[no-untyped-def]
    op = default_operator(info)
    out = []
    for _, src in lookup_sources(op):
        if src.store_name:
            out.append((op, src))
    return out


@pytest.mark.parametrize("name", VERDICTS)
def test_partition_is_spark_hash_of_the_key_and_verdicts_match_the_full_scan(name: str, spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    info = read_checkpoint(str(SAMPLES / name))
    pruned = 0
    for op, src in single_field_stores(info):
        store = next(s for s in op.stores if s.store_name == src.store_name)
        df = spark.read.format("statestore").option("operatorId", op.operator_id).option("storeName", src.store_name)
        if info.checkpoint_format_version == 2:
            return  # unique-id file names: the full scan is used
        df = df.load(info.path)
        fields = [f for f in df.schema["key"].dataType.fieldNames() if f != "index"]
        if len(fields) != 1:
            continue
        placed = F.pmod(F.hash(F.col("key").getField(fields[0])), F.lit(store.num_partitions)) == F.col("partition_id")
        rows, wrong = df.agg(F.count("*"), F.count_if(~placed)).first()  # one read of the store
        assert wrong == 0 and rows > 0, (name, src.store_name)
        pruned += 1
    assert pruned, "no single-field key: every partition is read"
    field = key_fields_of(info, default_operator(info).operator_id)[0]
    # keys of one partition, and two in no state that Spark would place there: only it is read
    first = df.select("partition_id").first()[0]
    held = df.where(F.col("partition_id") == first).selectExpr(f"CAST(key.`{field}` AS STRING)").distinct().limit(12)
    keys = [r[0] for r in held.collect()]
    typed = F.col("id").cast(df.schema["key"].dataType[field].dataType)  # numbers no sample's keys reach
    absent = spark.range(10**6, 10**6 + 64).where(F.pmod(F.hash(typed), F.lit(store.num_partitions)) == first)
    keys += [r[0] for r in absent.select(typed.cast("string")).limit(2).collect()]
    access = BothWays(info)
    report = diagnose.why_missing(
        access, info, KeyQuestion(tuple(keys), operator=default_operator(info).operator_id, key_field=field)
    )
    assert access.lookups and len(report.results) == len(keys)
    assert access.pruned._placed, "the keys' partition was computed"
    assert all(parts == [first] for parts in access.pruned._placed.values()), "the lookups read that partition alone"


class BothWays:
    """Spark's reads for a diagnosis, each key lookup made from the keys' partitions and by the full
    scan, which must return the same rows: the verdicts read the first equal the full scan's (every
    other read the diagnosis makes is the same either way)."""

    def __init__(self, info) -> None:  # type: ignore[no-untyped-def]
        self.pruned, self.full = SparkState(info), SparkState(info, prune=False)
        self.lookups = 0

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.pruned, name)

    def rows(self, source, batch, query):  # type: ignore[no-untyped-def]
        pruned, full = self.pruned.rows(source, batch, query), self.full.rows(source, batch, query)
        assert sorted(map(golden.row_text, pruned)) == sorted(map(golden.row_text, full)), (source, batch)
        self.lookups += 1
        return pruned
