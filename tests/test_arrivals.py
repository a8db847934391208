"""Which batch dropped a late record, when several dropped rows: the input files each batch read
(the file source's log) searched for the record. A real windowed aggregation drops one late row in
each of two batches; the truth is Spark's own progress (rows dropped per batch) and its file log
(the file each batch read)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.verdicts import why_missing as wm
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.logs.checkpoint import read_source_offsets


def _ms(hhmm: str) -> int:
    return int(dt.datetime.fromisoformat(f"2026-01-01T{hhmm}:00+00:00").timestamp() * 1000)


FILES = [  # one file per batch (maxFilesPerTrigger=1, ordered by modification time)
    [("a", "00:00"), ("b", "00:10")],
    [("c", "00:20")],  # late rows are dropped by the previous batch's watermark: 00:09 from the next batch on
    [("late-1", "00:01"), ("d", "00:30")],
    [("late-2", "00:02"), ("e", "00:40")],
]


@pytest.fixture(scope="module")
def late_rows(tmp_path_factory: Any, spark: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    root = tmp_path_factory.mktemp("late_rows")
    src = root / "events"
    src.mkdir()
    for i, rows in enumerate(FILES):
        f = src / f"{i}.json"
        f.write_text("".join(json.dumps({"k": k, "t": f"2026-01-01T{t}:00Z"}) + "\n" for k, t in rows))
        os.utime(f, (1_700_000_000 + i * 10, 1_700_000_000 + i * 10))
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        q = (
            spark.readStream.schema("k STRING, t TIMESTAMP")
            .option("maxFilesPerTrigger", 1)
            .json(str(src))
            .withWatermark("t", "1 minute")
            .groupBy(F.window("t", "1 minute"), "k")
            .count()
            .writeStream.format("noop")
            .outputMode("append")
            .option("checkpointLocation", str(root / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        progress = [json.loads(p.json) for p in q.recentProgress]
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    log = root / "progress.jsonl"
    log.write_text("".join(json.dumps(p) + "\n" for p in progress))
    return {"root": root, "checkpoint": str(root / "checkpoint"), "log": str(log), "progress": progress}


def _read_in(checkpoint: str, name: str) -> int:
    """The batch whose file log lists ``name`` (Spark's own record of what each batch read)."""
    return next(b for b, srcs in read_source_offsets(checkpoint).items() for s in srcs for f in s.files if f.endswith(name))


def test_the_batch_that_read_the_record_dropped_it(late_rows: dict[str, Any]) -> None:
    dropped = {p["batchId"]: p["stateOperators"][0]["numRowsDroppedByWatermark"] for p in late_rows["progress"]}
    busy = sorted(b for b, n in dropped.items() if n)
    assert len(busy) == 2  # two batches dropped a row each: the progress alone cannot tell which is whose
    for key, hhmm, name in (("late-1", "00:01", "2.json"), ("late-2", "00:02", "3.json")):
        report = why_missing(
            late_rows["checkpoint"],
            KeyQuestion((key,), operator=0, key_field="k", event_time_ms=_ms(hhmm), event_log=late_rows["log"]),
        )
        (r,) = report.results
        arrived = _read_in(late_rows["checkpoint"], name)
        assert arrived in busy
        assert r.verdict == wm.DROPPED_AS_LATE and r.dropped_in_batch == arrived, r.explanation
        assert f"It was dropped in batch {arrived}: batch {arrived} read it from {name} (the events source)" in r.explanation
        assert report.operator_report.lateness is not None and report.operator_report.lateness.arrivals is not None
        assert report.operator_report.lateness.arrivals.searched == len(FILES)


def test_without_the_input_files_each_candidate_is_named(late_rows: dict[str, Any], tmp_path: Path) -> None:
    moved = tmp_path / "events"
    shutil.move(str(late_rows["root"] / "events"), moved)
    try:
        (r,) = why_missing(
            late_rows["checkpoint"],
            KeyQuestion(("late-2",), operator=0, key_field="k", event_time_ms=_ms("00:02"), event_log=late_rows["log"]),
        ).results
    finally:
        shutil.move(str(moved), str(late_rows["root"] / "events"))
    assert r.verdict == wm.DROPPED_AS_LATE and r.dropped_in_batch is None
    assert "the input files could not all be searched (0.json of the events source (no longer there" in r.explanation


def test_a_key_the_input_never_held_was_not_dropped(late_rows: dict[str, Any]) -> None:
    """Every input file searched and none holds the key: its record never reached the query."""
    (r,) = why_missing(
        late_rows["checkpoint"],
        KeyQuestion(("never-sent",), operator=0, key_field="k", event_time_ms=_ms("00:03"), event_log=late_rows["log"]),
    ).results
    assert r.verdict == wm.NEVER_IN_STATE and r.dropped_in_batch is None
    assert f"none of the {len(FILES)} input files the query read holds the key" in r.explanation


def test_a_record_with_another_event_time_is_not_claimed(late_rows: dict[str, Any]) -> None:
    """late-2 arrived at 00:02; asked about with 00:04 the files hold the key but no such record."""
    (r,) = why_missing(
        late_rows["checkpoint"],
        KeyQuestion(("late-2",), operator=0, key_field="k", event_time_ms=_ms("00:04"), event_log=late_rows["log"]),
    ).results
    arrived = _read_in(late_rows["checkpoint"], "3.json")
    assert r.verdict == wm.DROPPED_AS_LATE and r.dropped_in_batch is None
    assert (
        f"records of the key were read (batch {arrived} read it from 3.json (the events source)), none with that event time"
        in (r.explanation)
    )


def test_the_whole_query_follows_each_late_record_to_the_batch_that_dropped_it(late_rows: dict[str, Any]) -> None:
    """Without an operator: each record of the key from the file that held it, through the aggregation.
    The progress here is JSON lines (no plan): the watermarks are worked out from the checkpoint's."""
    report = why_missing(late_rows["checkpoint"], KeyQuestion(("late-1", "late-2", "a"), event_log=late_rows["log"]))
    r = {x.key: x for x in report.results}
    dropped = {p["batchId"]: p["stateOperators"][0]["numRowsDroppedByWatermark"] for p in late_rows["progress"]}
    for key, name in (("late-1", "2.json"), ("late-2", "3.json")):
        [rec] = r[key].fate.records
        arrived = _read_in(late_rows["checkpoint"], name)
        assert (r[key].verdict, r[key].reason) == (wm.DROPPED_AS_LATE, "late_record")
        assert (rec.record.file_name, rec.outcome, rec.operator_id, rec.at_batch) == (name, "dropped_as_late", 0, arrived)
        assert dropped[arrived] == 1 and "dropped 1 row(s) by the watermark" in rec.steps[0].detail
    [a] = r["a"].fate.records  # on time: counted, its window emitted once the watermark passed it
    assert a.outcome == "reached_state" and [o.kind for o in r["a"].fate.outputs] == ["emitted"]
