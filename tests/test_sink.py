"""The sink decides what was written: a real windowed aggregation into a Parquet file sink whose
window is flattened into ``window_start``/``window_end`` columns (as file sinks' users write it).
Its rows are matched as the sink holds them; a copy of the sink without a batch's file makes that
batch's row not written, whatever the state says; a sink folder that cannot be searched is one line.
The truth is what Spark reads of the sink's files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pipegen.spec import EPOCH_TIMES  # timestamp_seconds(n), timestamp_millis(n), CAST(n / 1000 AS TIMESTAMP)

import statelens
from support import ROOT

sys.path.insert(0, str(ROOT / "tests" / "jobs"))
import changed_job as cj
from restart_errors import _conf as confs  # the session's confs set for a block, then restored

BATCHES = 6
EPOCH_2026 = 1_767_225_600  # 2026-01-01 00:00 UTC, in seconds


@pytest.fixture(scope="module")
def flat(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(checkpoint, sink, inputs) of the job's windowed aggregation into Parquet, window flattened."""
    root = tmp_path_factory.mktemp("flat")
    inputs, checkpoint, sink = root / "in", root / "cp", root / "out"
    for b in range(BATCHES):
        cj.write_input(inputs, b)
    with confs(spark, cj.confs("windowed_flat", "none")):
        cj.start(spark, "windowed_flat", "none", inputs, checkpoint, sink).awaitTermination()
    return checkpoint, sink, inputs


def spark_rows(spark: Any, files: list[Path]) -> list[dict[str, Any]]:
    return [r.asDict() for r in spark.read.parquet(*map(str, files)).collect()]


def test_a_record_asked_by_its_input_column_finds_its_window_in_a_flattened_sink(
    spark: Any, flat: tuple[Path, Path, Path]
) -> None:
    """ev-7 is user-2's event at 00:02:06: its window's row is in the sink, written in the batch the
    watermark closed it, its file named (the window's columns are window_start and window_end)."""
    checkpoint, sink, _ = flat
    (r,) = statelens.open(str(checkpoint)).why_missing("ev-7", key_field="event_id", sink=str(sink)).to_dict()["results"]
    written = [o for o in r["fate"]["outputs"] if o["kind"] == "written"]
    assert r["outcome"] == "written" and len(written) == 1 and written[0]["file"], r["fate"]["outputs"]
    (row,) = [x for x in spark_rows(spark, [sink / written[0]["file"]]) if x["user_id"] == "user-2"]
    assert str(row["window_start"]).startswith("2026-01-01 00:00:00") and row["events"] >= 1


def test_a_sink_lacking_a_batchs_file_decides_that_row_was_not_written(
    spark: Any, flat: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    checkpoint, sink, _ = flat
    cp = statelens.open(str(checkpoint))
    (whole,) = cp.why_missing("user-1", sink=str(sink)).to_dict()["results"]
    files = {o["batch_id"]: o["file"] for o in whole["fate"]["outputs"] if o["kind"] == "written"}
    assert whole["outcome"] == "written" and len(files) >= 2, whole["fate"]["outputs"]
    first = min(files)
    copy = tmp_path / "sink-copy"
    shutil.copytree(sink, copy)
    (copy / files[first]).unlink()  # its log still names it: the file is gone
    (r,) = cp.why_missing("user-1", sink=str(copy)).to_dict()["results"]
    # the truth: what Spark reads of the copy's files holds user-1's rows of the other batches only
    kept = {str(x["window_start"]) for x in spark_rows(spark, list(copy.glob("*.parquet"))) if x["user_id"] == "user-1"}
    assert len(kept) == len(files) - 1
    assert r["outcome"] == "partly_written" and r["cause"] == "unknown", (r["outcome"], r["cause"])
    assert r["cause_at"]["batch_id"] == first and "the sink decides what was written" in r["cause_at"]["why"]
    assert {o["batch_id"] for o in r["fate"]["outputs"] if o["kind"] == "written"} == set(files) - {first}


def test_a_sink_that_cannot_be_searched_is_one_line(flat: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """A folder State Lens cannot search as a sink (a Delta table: its log is not read) is refused in one
    line, never silently left unused (a folder without a sink log is a foreachBatch's: searched, below)."""
    checkpoint, _, _ = flat
    delta = tmp_path / "table"
    (delta / "_delta_log").mkdir(parents=True)
    r = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "why-missing", str(checkpoint), "user-1", "--sink", str(delta)],
        capture_output=True,
        text=True,
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and f"--sink {delta} cannot be searched" in lines[0], r.stderr
    assert "Delta table" in lines[0] and r.stdout == ""


@pytest.mark.parametrize("layout", ["a folder per batch", "files appended to one folder"])
def test_a_foreach_batch_folder_is_searched_its_batches_told_by_layout_or_time(spark: Any, tmp_path: Path, layout: str) -> None:
    """A foreachBatch function that writes each batch's rows into a folder of its own (``batch=N``), or
    appends them to one folder: the key's rows are found, each with the batch that wrote it, told by
    the folder's layout or by the file's time within the batch's (from its offsets to its commit). The
    truth: the files each call of the function wrote."""
    inputs, checkpoint, out = tmp_path / "in", tmp_path / "cp", tmp_path / "out"
    for b in range(BATCHES):
        cj.write_input(inputs, b)
    wrote: dict[str, int] = {}  # file -> the batch whose function call wrote it

    def each(df: Any, batch_id: int) -> None:
        target = out / f"batch={batch_id}" if layout == "a folder per batch" else out
        before = {p for p in out.rglob("*.parquet")} if out.exists() else set()
        df.write.mode("append").parquet(str(target))
        for p in set(out.rglob("*.parquet")) - before:
            wrote[str(p.relative_to(out))] = batch_id

    with confs(spark, cj.confs("windowed_flat", "none")):
        df, mode = cj.build(spark, "windowed_flat", "none", inputs)
        q = df.writeStream.outputMode(mode).option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
        q.foreachBatch(each).start().awaitTermination()
    assert wrote
    (r,) = statelens.open(str(checkpoint)).why_missing("user-1", sink=str(out)).to_dict()["results"]
    written = [o for o in r["fate"]["outputs"] if o["kind"] == "written"]
    assert r["outcome"] == "written" and written, r["fate"]["outputs"]
    for o in written:
        assert o["batch_id"] == wrote[o["file"]], (o, wrote)
        told = "the folder's layout" if layout == "a folder per batch" else "the file's time"
        assert told in o["detail"], o["detail"]


def test_an_input_file_changed_since_spark_read_it_is_said_so(flat: tuple[Path, Path, Path]) -> None:
    """An answer says what Spark read: a file at its logged place, modified since (a record appended),
    is named as changed; the record it holds now was never read by Spark."""
    import os

    checkpoint, _, inputs = flat
    target = inputs / "events" / f"part-{BATCHES - 1:05d}.json"
    text, st = target.read_text(), target.stat()
    try:
        target.write_text(text + '{"event_id": "ev-new", "user_id": "user-new-77", "kind": "buy", "value": 1, '
                          '"event_time": "2026-01-01T00:21:00.000Z"}\n')  # fmt: skip
        (r,) = statelens.open(str(checkpoint)).why_missing("user-new-77").to_dict()["results"]
    finally:
        target.write_text(text)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    note = r["fate"]["input_note"] or ""
    assert (
        f"Changed since Spark read them (their records now may not be what it read): {target.name} of the events source" in note
    )
    assert r["outcome"] != "written"


def test_input_files_spark_archived_are_found_under_the_archive(spark: Any, tmp_path: Path) -> None:
    """cleanSource=archive: Spark moves each file it read to sourceArchiveDir + the file's own path.
    Given the archive as --input-root, the records are found there (the truth: the files Spark moved)."""
    inputs, checkpoint, archive = tmp_path / "in", tmp_path / "cp", tmp_path / "archive"
    for b in range(BATCHES):
        cj.write_input(inputs, b)
    events = (
        spark.readStream.schema(cj.EVENTS)
        .option("maxFilesPerTrigger", 1)
        .option("cleanSource", "archive")
        .option("sourceArchiveDir", str(archive))
        .json(str(inputs / "events"))
    )
    q = events.groupBy("user_id").count().writeStream.outputMode("update").format("noop")
    q.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start().awaitTermination()
    moved = sorted(archive.rglob("*.json"))
    assert moved, "Spark archived no file"
    cp = statelens.open(str(checkpoint))
    (gone,) = cp.why_missing("user-1").to_dict()["results"]
    (found,) = cp.why_missing("user-1", input_root=str(archive)).to_dict()["results"]
    assert "no longer there" in (gone["fate"]["input_note"] or "")
    archived = {p.name for p in moved}
    assert {r["file"].rsplit("/", 1)[-1] for r in found["fate"]["records"]} & archived
    assert found["outcome"] == "written" or found["fate"]["records"], found["fate"]


# the application a job's queries run in: ``runs``, (folder, argument) pairs, one query each
JOB_APPLICATION = """
import sys
from pyspark.sql import SparkSession
logs, runs = sys.argv[1], list(zip(sys.argv[2::2], sys.argv[3::2]))
spark = (SparkSession.builder.master("local[1]").config("spark.sql.shuffle.partitions", 2)
         .config("spark.ui.enabled", "false").config("spark.eventLog.enabled", "true")
         .config("spark.eventLog.dir", "file://" + logs).getOrCreate())
"""


def run_jobs(job: str, base: Path, runs: dict[str, tuple[list[str], str]]) -> Path:
    """Each run's ``base/<run>/in/part-<i>.json`` (mtimes in order: one file a batch), then ``job``'s query
    run for real on each, one after the other in one application (a team's application of several
    streams, ``JOB_APPLICATION``): its event log folder (returned) holds each query's plans, told apart by
    the query's id."""
    import os

    logs = base / "logs"
    logs.mkdir()
    for name, (files, _) in runs.items():
        (base / name / "in").mkdir(parents=True)
        for i, text in enumerate(files):
            path = base / name / "in" / f"part-{i}.json"
            path.write_text(text + "\n")
            os.utime(path, (1_767_225_600 + i, 1_767_225_600 + i))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    args = [x for name, (_, arg) in runs.items() for x in (str(base / name), arg)]
    script = JOB_APPLICATION + job
    run = subprocess.run([sys.executable, "-c", script, str(logs), *args], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return logs


READER_JOB = """
from pyspark.sql.functions import count, window
for root, where in runs:
    events = spark.readStream.schema("user_id STRING, ts TIMESTAMP, n BIGINT").option("maxFilesPerTrigger", 1).json(root + "/in")
    if where:
        events = events.where(where)
    q = (events.withWatermark("ts", "5 minutes").groupBy(window("ts", "10 minutes"), "user_id").agg(count("*").alias("c"))
         .writeStream.format("parquet").option("path", root + "/sink").option("checkpointLocation", root + "/cp")
         .outputMode("append").trigger(availableNow=True).start())
    q.awaitTermination()
"""
LATER = '{"user_id": "u-good", "ts": "2026-01-01T00:30:00Z", "n": 1}'  # moves the watermark past the first window
READ = {  # the first file's lines of each query, and its filter
    "time": (
        [
            '{"user_id": "u-good", "ts": "2026-01-01T00:01:00Z", "n": 1}',
            '{"user_id": "u-bad", "ts": "yesterday noon", "n": 1}',
        ],
        "",
    ),
    "number": (
        [
            '{"user_id": "u-good", "ts": "2026-01-01T00:01:00Z", "n": 1}',
            '{"user_id": "u-text", "ts": "2026-01-01T00:02:00Z", "n": "many"}',
            '{"user_id": "u-broken", "ts": "2026-01-01T00:02:00Z", "n": 1',
        ],
        "n > 0",
    ),
}


@pytest.fixture(scope="module")
def read_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What Spark's JSON reader made of text in a timestamp and a bigint field and of a broken line: the
    queries of ``READ``, run in one application; their folders and the event log under the path."""
    base = tmp_path_factory.mktemp("reader")
    run_jobs(READER_JOB, base, {name: (["\n".join(lines), LATER], where) for name, (lines, where) in READ.items()})
    return base


def test_a_time_spark_cannot_read_is_null_and_the_window_filters_it_out(spark: Any, read_runs: Path) -> None:
    """A record whose event time is text Spark's reader cannot read as a timestamp: Spark makes it null,
    and the window's own filter (``isnotnull(ts)``) removes it. With the event log the answer says so
    (filtered, that record), not "no filter removed it". Truth: Spark's own read of the file and its sink."""
    root = read_runs / "time"
    read = spark.read.schema("user_id STRING, ts TIMESTAMP, n BIGINT").json(str(root / "in" / "part-0.json"))
    assert read.where("user_id = 'u-bad'").first()["ts"] is None  # what Spark's reader made of it
    assert {r["user_id"] for r in spark.read.parquet(str(root / "sink")).collect()} == {"u-good"}
    cp = statelens.open(str(root / "cp"))
    given = {"input_root": str(root / "in"), "sink": str(root / "sink")}
    (r,) = cp.why_missing("u-bad", event_log=str(read_runs / "logs"), **given).to_dict()["results"]
    assert (r["outcome"], r["cause"], r["cause_at"]["batch_id"]) == ("lost", "filtered", 0), r["explanation"]
    assert r["cause_at"]["predicate"].startswith("isnotnull(ts") and r["cause_at"]["file"].endswith("part-0.json")
    assert r["cause_at"]["row"] == 2


def test_what_spark_read_of_a_number_that_is_text_and_of_a_line_that_is_no_json(spark: Any, read_runs: Path) -> None:
    """Text in a bigint field is null to Spark's reader, so the query's ``n > 0`` removes it: filtered,
    that record (it said no filter removed it). A line that is not valid JSON is a row of nulls to
    Spark: its key never reached the query, and the answer names the line (it said no file holds the
    key). Truth: Spark's own read of the file and the query's sink."""
    root = read_runs / "number"
    read = spark.read.schema("user_id STRING, ts TIMESTAMP, n BIGINT").json(str(root / "in" / "part-0.json")).collect()
    assert [r["n"] for r in read if r["user_id"] == "u-text"] == [None]  # what Spark's reader made of them
    assert "u-broken" not in {r["user_id"] for r in read} and sum(r["user_id"] is None for r in read) == 1
    assert {r["user_id"] for r in spark.read.parquet(str(root / "sink")).collect()} == {"u-good"}
    cp = statelens.open(str(root / "cp"))
    given = {"input_root": str(root / "in"), "sink": str(root / "sink")}
    (r,) = cp.why_missing("u-text", event_log=str(read_runs / "logs"), **given).to_dict()["results"]
    assert (r["outcome"], r["cause"], r["cause_at"]["batch_id"], r["cause_at"]["row"]) == ("lost", "filtered", 0, 2)
    assert "isnotnull(n" in r["cause_at"]["predicate"] and "> 0" in r["cause_at"]["predicate"], r["explanation"]
    for log in (str(read_runs / "logs"), None):
        (b,) = cp.why_missing("u-broken", event_log=log, **given).to_dict()["results"]
        assert b["outcome"] == "never_in_input", b["explanation"]
        assert "part-0.json line 3" in b["fate"]["headline"] and "not valid JSON" in b["fate"]["headline"]


COMPUTED_JOB = """
import json
from pyspark.sql import functions as F
for root, how in runs:
    if how not in ("plain", "udf"):  # SQL making the event time of a number since the epoch (pipegen's EPOCH_TIMES)
        df = spark.readStream.schema("user_id STRING, epoch BIGINT").option("maxFilesPerTrigger", 1).json(root + "/in")
        df, keys = df.withColumn("ts", F.expr(how)).withWatermark("ts", "5 minutes"), ["user_id"]
    else:
        df = spark.readStream.schema("user_id STRING, ts TIMESTAMP, items ARRAY<STRING>").option("maxFilesPerTrigger", 1).json(root + "/in")
        if how == "udf":
            df = df.withColumn("user_id", F.udf(lambda s: s.lower(), "string")("user_id"))
        df, keys = df.withColumn("item", F.explode("items")).withWatermark("ts", "5 minutes"), ["user_id", "item"]
    q = (df.groupBy(F.window("ts", "10 minutes"), *keys).count()
         .writeStream.format("parquet").option("path", root + "/sink").option("checkpointLocation", root + "/cp")
         .outputMode("append").trigger(availableNow=True).start())
    q.awaitTermination()
    with open(root + "/progress.jsonl", "w") as out:  # Spark's own account of each batch
        out.writelines(json.dumps(json.loads(p.json)) + "\\n" for p in q.recentProgress)
"""


@pytest.fixture(scope="module")
def computed_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The exploding query with its user column as read (``plain``) and as a Python UDF computes it
    (``udf``), run in one application; their folders and the event log under the path."""
    files = [
        '{"user_id": "U-1", "ts": "2026-01-01T00:01:00Z", "items": ["a", "b"]}',
        '{"user_id": "u-9", "ts": "2026-01-01T00:30:00Z", "items": ["z"]}',
    ]
    base = tmp_path_factory.mktemp("computed")
    runs = {how: (files, how) for how in ("plain", "udf")}
    for unit, (sql, per_second) in EPOCH_TIMES.items():  # one file a batch: the last has a late record
        at = [[("u-1", 60)], [("u-9", 1800)], [("u-9", 1860)], [("u-late", 120), ("u-2", 1920)]]
        runs[unit] = (
            ["\n".join(json.dumps({"user_id": k, "epoch": (EPOCH_2026 + t) * per_second}) for k, t in f) for f in at],
            sql.format("epoch"),
        )
    run_jobs(COMPUTED_JOB, base, runs)
    return base


@pytest.mark.parametrize("udf", [False, True])
def test_a_key_column_the_query_computes_is_never_read_from_the_record(spark: Any, computed_runs: Path, udf: bool) -> None:
    """``explode(items) AS item`` before the state: the record's rows are found by its other key
    columns (it said 'cannot be told'); a key column a Python UDF computes (``lower(user_id)``) is not
    the record's own: the answer is `unknown`, saying so, never "lost" (the record was written as the
    UDF's value). Truth: the query's sink."""
    root = computed_runs / ("udf" if udf else "plain")
    rows = spark.read.parquet(str(root / "sink")).collect()
    assert sorted((r["user_id"], r["item"]) for r in rows) == [("u-1" if udf else "U-1", "a"), ("u-1" if udf else "U-1", "b")]
    cp = statelens.open(str(root / "cp"))
    given = {"input_root": str(root / "in"), "sink": str(root / "sink"), "event_log": str(computed_runs / "logs")}
    (r,) = cp.why_missing("U-1", key_field="user_id", **given).to_dict()["results"]
    if udf:
        assert (r["outcome"], r["cause"]) == ("unknown", "unknown"), r["explanation"]
        assert "computed by the query" in r["explanation"]
    else:
        assert (r["outcome"], r["cause"]) == ("written", None), r["explanation"]
        logged = {  # Spark's own record of the batch that wrote each sink file
            (int(f.name), json.loads(line)["path"].rsplit("/", 1)[-1])
            for f in (root / "sink" / "_spark_metadata").iterdir()
            if f.name.isdigit()
            for line in f.read_text().splitlines()[1:]
        }
        written = {(o["batch_id"], o["file"].rsplit("/", 1)[-1]) for o in r["fate"]["outputs"] if o["kind"] == "written"}
        assert written and written <= logged, (written, logged)


@pytest.mark.parametrize("unit", EPOCH_TIMES)
def test_an_event_time_the_query_makes_of_a_number_judges_lateness(spark: Any, computed_runs: Path, unit: str) -> None:
    """``timestamp_seconds(epoch)`` (``timestamp_millis``, ``(epoch / 1000).cast('timestamp')``) before the
    watermark: the record's event time is the query's, of its number. With the event log, the late record is dropped as late, in the batch
    Spark dropped it, at its own event time (it said the time "is computed by code": cannot be told).
    Without it, no value of the record is a time: lateness cannot be told, and the answer never says
    "not late" (it did). Truth: the query's sink and Spark's progress (its rows dropped by the watermark)."""
    root = computed_runs / unit
    assert {r["user_id"] for r in spark.read.parquet(str(root / "sink")).collect()} == {"u-1"}  # u-late: never
    progress = map(json.loads, (root / "progress.jsonl").read_text().splitlines())
    dropped = {p["batchId"]: p["stateOperators"][0]["numRowsDroppedByWatermark"] for p in progress}
    (late_batch,) = (b for b, n in dropped.items() if n)
    cp = statelens.open(str(root / "cp"))
    given = {"input_root": str(root / "in"), "sink": str(root / "sink")}
    (r,) = cp.why_missing("u-late", event_log=str(computed_runs / "logs"), **given).to_dict()["results"]
    assert (r["outcome"], r["cause"], r["cause_at"]["batch_id"]) == ("lost", "dropped_as_late", late_batch), r["explanation"]
    assert "event time 2026-01-01 00:02:00" in r["explanation"], r["explanation"]  # EPOCH_2026 + 120 s
    (w,) = cp.why_missing("u-1", event_log=str(computed_runs / "logs"), **given).to_dict()["results"]
    assert w["outcome"] == "written", w["explanation"]
    (n,) = cp.why_missing("u-late", **given).to_dict()["results"]
    assert (n["outcome"], n["cause"]) == ("lost", "unknown"), n["explanation"]
    assert "not late" not in n["explanation"] and "cannot be told" in n["explanation"], n["explanation"]
