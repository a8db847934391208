"""Real failed restarts, for the doctor's ``--error`` explanations (a developer tool, run with the samples).

Each case runs a stateful query on a fresh checkpoint for three batches, changes the query (or the
checkpoint) the way users do, restarts it on the same checkpoint with the pinned PySpark, and keeps
what Spark really said: ``restart_errors/<case>/checkpoint`` (the checkpoint after the failure) and
``restart_errors/<case>/error.txt`` (the query's exception, as ``query.exception()`` gives it).

    python sample_checkpoints/generate.py --restart-errors
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import generate as g

HERE = Path(__file__).resolve().parent
OUT = HERE / "restart_errors"


def _count(s: Any) -> Any:
    return s.groupBy("user_id").count()


def _count_by_kind(s: Any) -> Any:
    return s.groupBy("user_id", "kind").count()


def _mean(s: Any) -> Any:
    from pyspark.sql import functions as F

    return s.groupBy("user_id").agg(F.avg("value").alias("mean"))


def _dedup_then_count(s: Any) -> Any:
    return s.dropDuplicates(["event_id"]).groupBy("user_id").count()


def _drop_newest_delta(checkpoint: Path) -> None:
    part = checkpoint / "state" / "0" / "0"
    newest = max((p for p in part.glob("*.delta")), key=lambda p: int(p.name.split(".")[0]))
    newest.unlink()
    for crc in part.glob(f".{newest.name}.crc"):
        crc.unlink()


def _repartition_unfinished(checkpoint: Path) -> None:
    """Repartition the state offline from 2 to 3 partitions (Spark 4.2+), then take away the commit the
    repartition wrote last: what a repartition that died before committing leaves."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    spark._streamingCheckpointManager.repartition(str(checkpoint), 3)  # type: ignore[union-attr]
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)


BASE_CONF = {"spark.sql.shuffle.partitions": "2", "spark.sql.streaming.stateStore.providerClass": g.HDFS}

# case -> (first query, restarted query, what is done to the checkpoint in between, conf of the restart)
CASES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[Path], None] | None, dict[str, str]]] = {
    "grouping_key_added": (_count, _count_by_kind, None, {}),
    "aggregate_changed": (_count, _mean, None, {}),
    "operator_added": (_count, _dedup_then_count, None, {}),
    "delta_missing": (_count, _count, _drop_newest_delta, {}),
    "provider_changed": (_count, _count, None, {"spark.sql.streaming.stateStore.providerClass": g.ROCKSDB}),
    "repartition_unfinished": (_count, _count, _repartition_unfinished, {}),
}
# cases whose query runs on another provider from the first run (Spark repartitions RocksDB state only)
FIRST_CONF = {"repartition_unfinished": {"spark.sql.streaming.stateStore.providerClass": g.ROCKSDB}}


def _run(spark: Any, build: Callable[[Any], Any], inputs: Path, checkpoint: Path) -> str | None:
    stream = spark.readStream.schema(g.EVENTS).option("maxFilesPerTrigger", 1).json(str(inputs))
    query = (
        build(stream)
        .writeStream.outputMode("update")
        .format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    except Exception as e:
        return str(e)
    return str(query.exception()) if query.exception() else None


@contextmanager
def _conf(spark: Any, conf: dict[str, str]) -> Iterator[None]:
    before = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, old in before.items():
            spark.conf.set(k, old) if old is not None else spark.conf.unset(k)


def restart(spark: Any, case: str, checkpoint: Path) -> str:
    """Run the case's first query for three batches on a new ``checkpoint`` (HDFS provider unless
    ``FIRST_CONF`` says otherwise, two partitions), change it, restart it on a fourth input file: Spark's error ("" if it succeeds)."""
    first, second, damage, conf = CASES[case]
    batches = g.event_batches(4, 6, 3)
    with tempfile.TemporaryDirectory() as tmp, _conf(spark, {**BASE_CONF, **FIRST_CONF.get(case, {})}):
        inputs = Path(tmp) / "in"
        inputs.mkdir()
        for i, batch in enumerate(batches):
            path = inputs / f"part-{i:05d}.json"
            path.write_text("".join(json.dumps(r) + "\n" for r in batch["events"]))
            os.utime(path, (1_767_225_600 + i, 1_767_225_600 + i))
            if i == 2:
                assert _run(spark, first, inputs, checkpoint) is None
                if damage:
                    damage(checkpoint)
        with _conf(spark, conf):
            return _run(spark, second, inputs, checkpoint) or ""


def main(argv: list[str] | None = None) -> int:
    """All cases into ``restart_errors/``; or one case (``--case C --checkpoint DIR``) in an application
    of its own that writes its Spark event log into ``--event-log DIR``."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=sorted(CASES))
    ap.add_argument("--checkpoint")
    ap.add_argument("--event-log")
    args = ap.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
    )
    if args.event_log:
        builder = builder.config("spark.eventLog.enabled", "true").config(
            "spark.eventLog.dir", Path(args.event_log).resolve().as_uri()
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if args.case:
        print(restart(spark, args.case, Path(args.checkpoint)), flush=True)
        spark.stop()
        return 0
    if OUT.exists():
        shutil.rmtree(OUT)
    for case in CASES:
        error = restart(spark, case, OUT / case / "checkpoint")
        (OUT / case / "error.txt").write_text(error)
        print(f"{case}: {(error or '(the restart succeeded)').splitlines()[0][:160]}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
