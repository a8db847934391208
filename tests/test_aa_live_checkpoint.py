"""A checkpoint being written by a running query while State Lens reads it: every read answers
for a committed batch (or says clearly why it cannot); none fails in another way.

Named to run before the tests that load many samples' state stores into the shared JVM: in full
CI runs after them, the query's first commits took over 80 s."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from statelens.analysis.core.errors import StateLensError
from statelens.analysis.core.model import StateSource
from statelens.analysis.core.question import KeyQuestion
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers.state_reader import read_state
from support import logged_batches


@pytest.mark.usefixtures("spark")
def test_reads_while_a_query_writes(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cp = tmp_path / "live"
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    stream = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 200)
        .load()
        .selectExpr("CONCAT('k-', CAST(value % 500 AS STRING)) AS k", "timestamp")
        .withWatermark("timestamp", "5 seconds")
        .groupBy("k")
        .count()
    )
    query = (
        stream.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(cp))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    answers, refusals, failures = 0, 0, []
    reasons: Counter[str] = Counter()  # why reads were refused: said when there are too many
    try:
        # the read window starts once the query has committed twice (slow on a JVM busy with the
        # earlier tests' state stores: give it time, and say so if it never does)
        deadline = time.monotonic() + 240
        while len(logged_batches(cp)) < 2:
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, f"the query committed fewer than 2 batches in 240 s: {query.status}"
            time.sleep(0.5)
        end = time.monotonic() + 10  # about 30 commits of the query
        while time.monotonic() < end:
            try:
                info = read_checkpoint(str(cp))
                committed = {b.batch_id for b in info.committed_batches}
                table, batch = read_state(str(cp), StateSource(0), info=info)
                assert batch in committed and table.num_rows <= 500
                (r,) = why_missing(str(cp), KeyQuestion(("k-7",)), info=info).results
                assert r.verdict in ("in_state", "never_in_state")
                answers += 1
            except StateLensError as e:
                refusals += 1  # a clear message is allowed, a wrong answer or a crash is not
                reasons[f"{e.title}: {e.message[:160]}"] += 1
            except Exception as e:
                failures.append(repr(e)[:300])
    finally:
        query.stop()
        spark.conf.set("spark.sql.shuffle.partitions", "8")
    assert failures == []
    assert answers >= 3 and answers > refusals, reasons.most_common(3)


@pytest.mark.usefixtures("spark")
def test_a_batch_in_flight_reads_as_running_not_failed(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The doctor on a query whose batch 2 is running (its sink waits until the doctor has answered): 'batch 2 running', not
    'planned but not committed: the query stopped or failed'; the same checkpoint a day later reads
    as a query that stopped."""
    import threading

    from statelens.spark_io.logs.checkpoint import doctor

    cp = tmp_path / "in_flight"
    started, release = threading.Event(), threading.Event()

    def slow(df, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        if batch_id == 2:
            started.set()
            release.wait(120)

    stream = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5).load()
    query = (
        stream.writeStream.foreachBatch(slow)
        .option("checkpointLocation", str(cp))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        assert started.wait(240), f"batch 2 never started: {query.status}"
        report = doctor(str(cp))
        [problem] = [p for p in report.problems if p.code in ("batch_running", "offsets_without_commits")]
        assert problem.code == "batch_running" and problem.severity == "info"
        assert problem.title.startswith("Batch 2 running for ") and report.committed[-1] == 1
        assert "stopped or failed" not in problem.meaning
    finally:
        threading.Timer(1.0, release.set).start()  # batch 2 ends while the query stops, as in a real stop
        query.stop()
    info = read_checkpoint(str(cp))
    later = info.batches[-1].timestamp_ms + 24 * 3600 * 1000
    if info.batches[-1].committed:  # the stop let batch 2 finish: nothing is in flight any more
        return
    report = doctor(str(cp), now_ms=later)
    [problem] = [p for p in report.problems if p.code in ("batch_running", "offsets_without_commits")]
    assert problem.code == "offsets_without_commits" and "stopped or failed" in problem.meaning
