"""Progress from real event logs and progress JSON lines, source offsets from real checkpoints,
late rows and the dropped_as_late verdict.

The truth: ``outputs/<name>.progress.json`` is what Spark reported in-process
(``query.recentProgress``) in the run that wrote the sample and its event log; the dropped-row
counts are also derived from the generator's input data and the watermarks that data implies.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_checkpoint import expected_watermarks

from statelens.analysis.core.errors import ProgressNotFound, ProgressReadError
from statelens.analysis.core.key_format import parse_event_time
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.runs.progress import late_drops, lateness, operator_mismatch, progress_findings
from statelens.analysis.verdicts import why_missing as wm
from statelens.spark_io.logs.checkpoint import read_checkpoint, read_source_offsets
from statelens.spark_io.logs.event_logs import read_progress
from support import ROOT, SAMPLES, ms, sample, scenario

EVENT_LOGS = SAMPLES / "event_logs"
RATE = SAMPLES / "sources" / "rate_union"
# the codec each sample's event log was written with (generate.py: Scenario.event_log)
CODECS = {"join_hdfs": "zstd", "join_rocksdb": "lz4", "chained_join_agg": "snappy", "dedup": "none", "windowed_agg": "none"}


def truth(name: str) -> list[dict]:
    return json.loads((SAMPLES / "outputs" / f"{name}.progress.json").read_text())


def _offset(v):  # type: ignore[no-untyped-def]
    return json.loads(v) if isinstance(v, str) else v


@pytest.mark.parametrize("name", sorted(CODECS))
def test_event_log_gives_what_spark_reported(name: str) -> None:
    info = read_checkpoint(sample(name))
    log = read_progress(str(EVENT_LOGS / name), info)
    assert scenario(name).event_log in ("rolling", "plain", CODECS[name])
    if CODECS[name] != "none":
        assert all(f.endswith(f"({CODECS[name]})") for f in log.files), log.files
    if name == "windowed_agg":
        assert log.files[0].startswith("eventlog_v2_") and "/events_1_" in log.files[0]
    expected = truth(name)
    assert log.query_id == info.query_id == expected[0]["id"]
    assert [b.batch_id for b in log.batches] == [p["batchId"] for p in expected]
    assert len(log.batches) == len(info.batches)  # every batch of the checkpoint has its progress
    assert operator_mismatch(log, info) is None
    for b, p in zip(log.batches, expected, strict=True):
        assert b.input_rows == p["numInputRows"]
        assert b.duration_ms == p["batchDuration"]
        assert b.durations == p["durationMs"]
        assert [(o.operator_name, o.rows_total, o.rows_updated, o.rows_removed) for o in b.operators] == [
            (o["operatorName"], o["numRowsTotal"], o["numRowsUpdated"], o["numRowsRemoved"]) for o in p["stateOperators"]
        ]
        assert [o.rows_dropped_by_watermark for o in b.operators] == [o["numRowsDroppedByWatermark"] for o in p["stateOperators"]]
        assert [o.memory_used_bytes for o in b.operators] == [o["memoryUsedBytes"] for o in p["stateOperators"]]
        assert [(s.start_offset, s.end_offset, s.input_rows) for s in b.sources] == [
            (_offset(s["startOffset"]), _offset(s["endOffset"]), s["numInputRows"]) for s in p["sources"]
        ]


def _join_drops_from_data(name: str) -> dict[int, int]:
    """Rows of each batch whose event time is at or before the previous batch's watermark (the
    late-row filter since Spark 3.4), from the generator's input data."""
    wms = expected_watermarks(name, 2, {"orders": "order_time", "payments": "payment_time"})
    out: dict[int, int] = {}
    for b, batch in enumerate(scenario(name).batches):
        limit = wms[b - 1] if b > 0 else wms[0]
        late = [r for r in batch["payments"] if limit and ms(r["payment_time"]) <= limit]
        late += [r for r in batch["orders"] if r["status"] != "cancelled" and limit and ms(r["order_time"]) <= limit]
        if late:
            out[b] = len(late)
    return out


@pytest.mark.parametrize("name,operator", [("join_hdfs", 0), ("join_rocksdb", 0), ("chained_join_agg", 1)])
def test_join_drops_per_batch_are_the_late_payments(name: str, operator: int) -> None:
    expected = _join_drops_from_data(name)
    assert expected and len(expected) >= 10  # the samples drop late payments in most batches
    (d,) = late_drops(read_progress(str(EVENT_LOGS / name), read_checkpoint(sample(name))))
    assert (d.operator_id, d.by_batch) == (operator, expected)


def test_windowed_agg_drops_the_late_events_per_batch() -> None:
    s = scenario("windowed_agg")
    wms = expected_watermarks("windowed_agg", 10, {"events": "event_time"})
    expected = {}
    for b, batch in enumerate(s.batches):
        # aggregation counts dropped rows after its partial aggregation: one per (window, user)
        late = {
            (ms(r["event_time"]) // 300_000, r["user_id"]) for r in batch["events"] if b and ms(r["event_time"]) <= wms[b - 1]
        }
        if late:
            expected[b] = len(late)
    assert expected == {4: 1, 7: 2, 10: 3}
    info = read_checkpoint(sample("windowed_agg"))
    log = read_progress(str(EVENT_LOGS / "windowed_agg"), info)
    (d,) = late_drops(log)
    assert (d.operator_id, d.operator_name, d.by_batch) == (0, "stateStoreSave", expected)
    (f,) = [f for f in progress_findings(log, info) if f.code == "late_rows_dropped"]
    assert f.evidence["rows_dropped_by_batch"] == {str(k): v for k, v in expected.items()}
    assert f.evidence["watermark_lag_ms"] == 10 * 60_000  # withWatermark("event_time", "10 minutes")
    assert "6 row(s)" in f.message and "(4, 7, 10;" in f.message


def test_healthy_sample_without_drops_has_no_late_finding() -> None:
    info = read_checkpoint(sample("dedup"))
    log = read_progress(str(EVENT_LOGS / "dedup"), info)
    assert late_drops(log) == [] and progress_findings(log, info) == []


def test_event_log_folder_is_searched_by_query_id(tmp_path: Path) -> None:
    """A spark.eventLog.dir with several applications: the checkpoint's query is picked out."""
    for name in CODECS:
        for p in (EVENT_LOGS / name).iterdir():
            (shutil.copytree if p.is_dir() else shutil.copy)(p, tmp_path / p.name)
    for name in ("windowed_agg", "join_rocksdb"):
        log = read_progress(str(tmp_path), read_checkpoint(sample(name)))
        assert [b.batch_id for b in log.batches] == [p["batchId"] for p in truth(name)]
        assert len(log.files) == 1


def test_batches_past_the_checkpoints_last_are_another_applications_and_left_out(tmp_path: Path) -> None:
    """A copy of the checkpoint run elsewhere under the same query id (a scratch run, a rebuild) wrote
    batches past the checkpoint's last into the same folder: they are not the checkpoint's."""
    info = read_checkpoint(sample("windowed_agg"))
    last = info.batches[-1].batch_id
    real = truth("windowed_agg")
    copies = [{**p, "batchId": last + 1 + i, "runId": "another-run"} for i, p in enumerate(real[-2:])]
    (tmp_path / "progress.jsonl").write_text("".join(json.dumps(p) + "\n" for p in [*real, *copies]))
    log = read_progress(str(tmp_path / "progress.jsonl"), info)
    assert [b.batch_id for b in log.batches] == [p["batchId"] for p in real]
    assert any(f"past the checkpoint's last batch ({last})" in n for n in log.notes), log.notes
    (tmp_path / "only.jsonl").write_text("".join(json.dumps(p) + "\n" for p in copies))
    with pytest.raises(ProgressNotFound, match=r"only for batches .* past the checkpoint's last batch"):
        read_progress(str(tmp_path / "only.jsonl"), info)


def test_event_log_of_another_query_is_refused_with_its_ids() -> None:
    with pytest.raises(ProgressNotFound) as e:
        read_progress(str(EVENT_LOGS / "dedup"), read_checkpoint(sample("join_hdfs")))
    assert truth("dedup")[0]["id"] in e.value.message and read_checkpoint(sample("join_hdfs")).query_id in e.value.message


def test_cut_compressed_log_is_an_error_not_an_empty_answer(tmp_path: Path) -> None:
    src = next((EVENT_LOGS / "join_rocksdb").iterdir())
    cut = tmp_path / src.name
    cut.write_bytes(src.read_bytes()[: src.stat().st_size // 2])
    with pytest.raises(ProgressReadError, match="lz4"):
        read_progress(str(cut), read_checkpoint(sample("join_rocksdb")))


def test_progress_json_lines_and_rate_source_offsets() -> None:
    cp = str(RATE / "checkpoint")
    info = read_checkpoint(cp)
    lines = [json.loads(x) for x in (RATE / "progress.jsonl").read_text().splitlines()]
    log = read_progress(str(RATE / "progress.jsonl"), info)
    assert log.format == "json lines"
    assert [b.batch_id for b in log.batches] == [p["batchId"] for p in lines] == [b.batch_id for b in info.batches]
    offsets = read_source_offsets(cp)
    for p in lines:
        rate, per_batch = offsets[p["batchId"]]
        assert (rate.kind, per_batch.kind) == ("rate", "rate-micro-batch")
        assert per_batch.rows == p["sources"][1]["numInputRows"] == 10
        assert per_batch.end_offset == p["sources"][1]["endOffset"]
        assert rate.end_offset == p["sources"][0]["endOffset"]
        # the checkpoint says how many seconds of rows; the progress how many rows (rowsPerSecond=20)
        secs = rate.end_offset - (rate.start_offset or 0)
        assert secs * 20 == p["sources"][0]["numInputRows"]


@pytest.mark.parametrize("name", ["join_hdfs", "windowed_agg", "chained_join_agg"])
def test_file_sources_list_the_file_each_batch_read(name: str) -> None:
    """The generator writes input file i for batch i (maxFilesPerTrigger=1) for every source."""
    s = scenario(name)
    offsets = read_source_offsets(sample(name))
    for b, per_source in offsets.items():
        assert [x.kind for x in per_source] == ["file"] * len(s.schemas)
        want = [f"part-{b:05d}.json"] if b < len(s.batches) else []  # the last batch runs without data
        assert [[f.rsplit("/", 1)[-1] for f in x.files] for x in per_source] == [want] * len(s.schemas), b


def test_event_time_parsing() -> None:
    assert parse_event_time("2026-01-01T00:07:15") == ms("2026-01-01T00:07:15+00:00")
    assert parse_event_time("2026-01-01 02:07:15+02:00") == ms("2026-01-01T00:07:15+00:00")
    assert parse_event_time("1767226035000") == 1767226035000


def _payment_time(n: int) -> str:
    (p,) = [r for b in scenario("join_hdfs").batches for r in b["payments"] if r["payment_id"] == f"pmt-{n}"]
    return p["payment_time"]


def _first_late_batch(name: str, t: int) -> int:
    wms = expected_watermarks(name, 2, {"orders": "order_time", "payments": "payment_time"})
    return next(b for b in range(1, len(wms)) if wms[b - 1] and t <= wms[b - 1])


def test_why_missing_late_payment_is_dropped_as_late_with_evidence() -> None:
    """ord-153's payment (case 3: 8 minutes before the order) never joined: it came late."""
    from statelens.spark_io.gather.diagnosis import why_missing

    t = ms(_payment_time(153))
    arrived = next(
        b for b, batch in enumerate(scenario("join_hdfs").batches) for r in batch["payments"] if r["payment_id"] == "pmt-153"
    )
    output = json.loads((SAMPLES / "outputs" / "join_hdfs.json").read_text())
    assert not [r for r in output if r["order_id"] == "ord-153"]  # truth: it never joined
    report = why_missing(sample("join_hdfs"), KeyQuestion(("ord-153",), event_time_ms=t, event_log=str(EVENT_LOGS / "join_hdfs")))
    (r,) = report.results
    assert r.verdict == wm.DROPPED_AS_LATE and r.side == "left"
    late = report.operator_report.lateness
    assert late is not None and late.late_from_batch == _first_late_batch("join_hdfs", t)
    assert arrived in late.drops and late.drops == {b: 1 for b in range(late.late_from_batch, 16)}
    assert f"late from batch {late.late_from_batch}" in r.explanation
    # several batches dropped rows: each is named, none is claimed
    assert r.dropped_in_batch is None
    assert f"dropped in one of batches {', '.join(map(str, sorted(late.drops)))}" in r.explanation
    # without the event log the verdict stays, and says from when it would have been late
    (plain,) = why_missing(sample("join_hdfs"), KeyQuestion(("ord-153",), event_time_ms=t)).results
    assert plain.verdict == wm.WAITING_OTHER_SIDE
    assert f"would have been late from batch {late.late_from_batch}" in plain.explanation


def test_event_time_never_behind_the_watermark_is_not_late() -> None:
    from statelens.spark_io.gather.diagnosis import why_missing

    info = read_checkpoint(sample("join_hdfs"))
    t = info.batches[-1].watermark_ms + 3_600_000
    (r,) = why_missing(
        sample("join_hdfs"), KeyQuestion(("ord-153",), event_time_ms=t, event_log=str(EVENT_LOGS / "join_hdfs"))
    ).results
    assert r.verdict == wm.WAITING_OTHER_SIDE and "it was not dropped as late" in r.explanation


def test_matched_key_keeps_its_verdict_with_an_event_time() -> None:
    from statelens.spark_io.gather.diagnosis import why_missing

    output = json.loads((SAMPLES / "outputs" / "join_hdfs.json").read_text())
    assert [r for r in output if r["order_id"] == "ord-156"]  # it joined
    t = ms(_payment_time(153))
    (r,) = why_missing(
        sample("join_hdfs"), KeyQuestion(("ord-156",), event_time_ms=t, event_log=str(EVENT_LOGS / "join_hdfs"))
    ).results
    assert r.verdict == wm.MATCHED


def test_windowed_agg_late_event_in_a_window_never_in_state() -> None:
    """The batch-4 late event (user-0, 20 minutes old) fell in a window the state never held."""
    from statelens.spark_io.gather.diagnosis import why_missing

    (late_ev,) = [r for r in scenario("windowed_agg").batches[4]["events"] if r["event_id"].startswith("late-")]
    t = ms(late_ev["event_time"])
    report = why_missing(
        sample("windowed_agg"), KeyQuestion((late_ev["user_id"],), event_time_ms=t, event_log=str(EVENT_LOGS / "windowed_agg"))
    )
    (r,) = report.results
    assert r.verdict == wm.DROPPED_AS_LATE
    assert report.operator_report.lateness is not None and 4 in report.operator_report.lateness.drops
    # batches 4, 7 and 10 dropped rows: each is named, none is claimed
    drops = sorted(report.operator_report.lateness.drops)
    assert len(drops) > 1 and r.dropped_in_batch is None
    assert f"dropped in one of batches {', '.join(map(str, drops))}" in r.explanation


def test_lateness_without_progress_has_no_drops() -> None:
    info = read_checkpoint(sample("join_hdfs"))
    late = lateness(ms(_payment_time(153)), info, 0, None)
    assert late.late_from_batch == _first_late_batch("join_hdfs", late.event_time_ms)
    assert late.drops == {} and not late.progress_read


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, timeout=300)


def test_cli_progress_json_contract() -> None:
    p = _cli("progress", sample("windowed_agg"), "--event-log", str(EVENT_LOGS / "windowed_agg"), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    expected = truth("windowed_agg")
    assert out["query_id"] == expected[0]["id"]
    for b, t in zip(out["batches"], expected, strict=True):
        assert b["batch_id"] == t["batchId"] and b["input_rows"] == t["numInputRows"] and b["duration_ms"] == t["batchDuration"]
        assert [(s["description"], s["start_offset"], s["end_offset"], s["input_rows"]) for s in b["sources"]] == [
            (s["description"], _offset(s["startOffset"]), _offset(s["endOffset"]), s["numInputRows"]) for s in t["sources"]
        ]
        assert [
            (o["operator_id"], o["rows_total"], o["rows_dropped_by_watermark"], o["memory_used_bytes"]) for o in b["operators"]
        ] == [
            (i, o["numRowsTotal"], o["numRowsDroppedByWatermark"], o["memoryUsedBytes"])
            for i, o in enumerate(t["stateOperators"])
        ]


def test_cli_progress_bad_event_log_is_one_line() -> None:
    p = _cli("progress", sample("join_hdfs"), "--event-log", str(EVENT_LOGS / "dedup"))
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "No progress for this query" in p.stderr
    p = _cli("why-missing", sample("join_hdfs"), "ord-1", "--event-time", "yesterday")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "not an event time" in p.stderr


@pytest.mark.jvm
@pytest.mark.parametrize("name", ["join_rocksdb", "windowed_agg"])
def test_event_log_through_spark_equals_local(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A URI read through Spark's binaryFile reader (as s3a:// would be) gives the same progress."""
    info = read_checkpoint(sample(name))
    local = read_progress(str(EVENT_LOGS / name), info)
    monkeypatch.setenv("STATELENS_LOGS_VIA_SPARK", "1")
    remote = read_progress((EVENT_LOGS / name).as_uri(), info)
    assert remote.batches == local.batches and remote.files == local.files


@pytest.mark.parametrize("name", ["join_hdfs", "join_rocksdb", "chained_join_agg"])
def test_log_still_being_written_gives_its_complete_part_and_says_so(name: str, tmp_path: Path) -> None:
    """A running application's compressed .inprogress log may end inside a block."""
    src = next((EVENT_LOGS / name).iterdir())
    data = src.read_bytes()
    cut = tmp_path / f"{src.name}.inprogress"
    cut.write_bytes(data[: int(len(data) * 0.7)])
    info = read_checkpoint(sample(name))
    log = read_progress(str(cut), info)
    full = read_progress(str(src), info)
    assert 0 < len(log.batches) < len(full.batches)
    assert log.batches == full.batches[: len(log.batches)]
    assert any("still being written" in n for n in log.notes)


def test_kafka_offsets_give_rows_per_partition() -> None:
    """Kafka cannot run here (its connector is not on PyPI); its offsets are the documented JSON
    {"topic": {"partition": offset}} in offsets/<batch>, the initial ones in sources/<n>/0."""
    from statelens.analysis.inputs.sources import batch_sources, kind_of

    offsets = {
        0: [{"orders": {"0": 10, "1": 7}}],
        1: [{"orders": {"0": 25, "1": 7}}],
        3: [{"orders": {"0": 30, "1": 9}}],  # batch 2's offsets were purged
        4: [{"orders": {"0": 31, "1": 9, "2": 4}}],  # a partition was added
    }
    out = batch_sources(offsets, {}, {0: {"orders": {"0": 0, "1": 5}}})
    assert kind_of(offsets[0][0]) == "kafka"
    assert (out[0][0].rows, out[0][0].partitions) == (12, {"orders/0": 10, "orders/1": 2})
    assert (out[1][0].rows, out[1][0].partitions) == (15, {"orders/0": 15, "orders/1": 0})
    assert out[1][0].summary == "15 rows (orders/0 +15)"
    assert out[3][0].rows is None and "not in the checkpoint" in out[3][0].note
    assert out[4][0].rows is None  # the new partition's start is unknown: no guess


@pytest.mark.parametrize("name", ["join_hdfs", "join_rocksdb", "windowed_agg", "chained_join_agg"])
def test_sources_are_named_by_the_folder_spark_says_they_read(name: str) -> None:
    """Without progress the checkpoint alone names each file source by its folder: the folder
    Spark's own progress description names (``FileStreamSource[file:/.../in/orders]``)."""
    spark_said = [s["description"] for s in truth(name)[0]["sources"]]
    want = [d.rstrip("]").rsplit("/", 1)[-1] for d in spark_said]
    assert all(d.startswith("FileStreamSource[") for d in spark_said)
    offsets = read_source_offsets(sample(name))
    for per_source in offsets.values():
        assert [s.name for s in per_source] == want
    p = _cli("progress", sample(name))
    assert p.returncode == 0, p.stderr
    assert all(f"{n} (file): " in p.stdout for n in want) and "0 (file)" not in p.stdout
    with_log = json.loads(_cli("progress", sample(name), "--event-log", str(EVENT_LOGS / name), "--json").stdout)
    assert [s["label"] for s in with_log["batches"][0]["sources"]] == [f"{n} (file)" for n in want]


def test_rate_sources_are_named_by_their_kind() -> None:
    offsets = read_source_offsets(str(RATE / "checkpoint"))
    assert {tuple(s.name for s in v) for v in offsets.values()} == {("rate", "rate-micro-batch")}


def test_kafka_sources_are_named_by_their_topics() -> None:
    """Kafka cannot run here: its offsets name the topics ({"topic": {"partition": offset}}), and
    a progress description without the checkpoint's offsets is Spark's KafkaV2[Subscribe[...]]."""
    from statelens.analysis.inputs.sources import batch_sources, name_from_description

    out = batch_sources({0: [{"payments": {"0": 3}, "orders": {"0": 1}}, {"clicks": {"0": 2}}]}, {}, {})
    assert [s.name for s in out[0]] == ["orders, payments", "clicks"]
    assert name_from_description("KafkaV2[Subscribe[orders,payments]]") == "orders, payments"
    assert name_from_description("KafkaV2[SubscribePattern[ord.*]]") == "ord.*"
    assert name_from_description("FileStreamSource[file:/data/orders/*.json]") == "orders"
    assert name_from_description("MemoryStream[value#1]") == ""


def test_same_named_partitioned_folders_are_told_apart(tmp_path: Path, spark: Any) -> None:
    """A real query over two sources whose folders are both ``in`` (a/in partitioned by day,
    b/in plain): each is named by the folders that tell them apart, never by ``day=...``."""
    for side, files in (("a", ["day=1/0.json", "day=2/1.json"]), ("b", ["0.json"])):
        for f in files:
            (tmp_path / side / "in" / f).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / side / "in" / f).write_text('{"k": "x"}\n')
    a = spark.readStream.schema("k STRING, day INT").json(str(tmp_path / "a" / "in")).select("k")
    b = spark.readStream.schema("k STRING").json(str(tmp_path / "b" / "in"))
    cp = tmp_path / "checkpoint"
    q = (
        a.union(b)
        .groupBy("k")
        .count()
        .writeStream.format("noop")
        .outputMode("complete")
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    described = [s["description"] for s in q.lastProgress["sources"]]
    offsets = read_source_offsets(str(cp))
    assert [s.name for s in offsets[0]] == ["a/in", "b/in"]
    assert [len(s.files) for s in offsets[0]] == [2, 1]
    assert [d.rstrip("]").endswith(f"/{n}") for d, n in zip(described, ["a/in", "b/in"], strict=True)] == [True, True]


def test_the_event_log_tells_how_the_querys_last_run_ended() -> None:
    """The samples ran with Trigger.AvailableNow: their last run terminated, without an exception."""
    for name in ("dedup", "windowed_agg"):
        run = read_progress(str(SAMPLES / "event_logs" / name), read_checkpoint(sample(name))).run
        assert run is not None and not run.running and run.exception is None, name


@pytest.mark.parametrize("name", ["dedup_window_chain", "dedup", "windowed_agg"])
def test_snapshot_lag_is_what_spark_reported_and_its_snapshots_exist(name: str) -> None:
    """Spark's own SnapshotLastUploaded metrics of the newest batch: every snapshot it names is a file
    of the checkpoint, and the files hold one at least as new (Spark uploads snapshots after the batch)."""
    from statelens.analysis.runs.progress import snapshot_lags
    from statelens.spark_io.logs.checkpoint import doctor

    info = read_checkpoint(sample(name))
    lags = snapshot_lags(read_progress(str(EVENT_LOGS / name), info))
    assert lags and lags[0].batch_id == info.committed_batches[-1].batch_id
    newest = {(c.operator_id, c.partition): c.snapshot_version for c in doctor(info.path).restart_cost}
    for x in lags:
        assert x.behind == x.batch_id + 1 - (x.last_snapshot or 0)
        if x.last_snapshot is not None:
            part = Path(info.path) / "state" / str(x.operator_id) / str(x.partition)
            assert [p.name for p in part.glob(f"{x.last_snapshot}.*") if p.suffix in (".zip", ".snapshot")], x
            assert (newest[(x.operator_id, x.partition)] or 0) >= x.last_snapshot
    out = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "progress", info.path, "--event-log", str(EVENT_LOGS / name), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert json.loads(out.stdout)["snapshot_lag"] == [x.to_dict() for x in lags]
