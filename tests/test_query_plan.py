"""The query as its physical plan states it, read from the real event logs of the samples' queries.

The truth is the query each sample ran (``sample_checkpoints/generate.py``): its sources, filters,
watermark columns and delays, stateful operators and their keys, output mode and join condition.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from statelens.analysis.inputs.records import event_time_us
from statelens.analysis.plan.query_plan import EpochTime, Window, join_plans, readable
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.logs.event_logs import read_progress
from support import SAMPLES, sample


def plan_of(name: str):  # type: ignore[no-untyped-def]
    log = read_progress(str(SAMPLES / "event_logs" / name), read_checkpoint(sample(name)))
    q = log.query_plan()
    assert q is not None
    return q, log


def test_dedup_then_window_as_the_query_wrote_it() -> None:
    q, log = plan_of("dedup_window_chain")
    dedup, agg = q.operators[1], q.operators[0]
    assert (dedup.kind, agg.kind) == ("dedup", "aggregation")
    assert [c.source_column for c in dedup.keys] == ["event_id"]  # dropDuplicates(["event_id"])
    assert agg.keys[0].window == Window("event_time", 300_000, 300_000, 0)  # window(event_time, "5 minutes")
    assert [c.source_column for c in agg.keys[1:]] == ["user_id"]
    assert dedup.watermark_columns[""].source_column == "event_time" and q.watermark_delays == {"event_time": 600_000}
    assert agg.output_mode == "Append"
    [scan] = q.scans.values()
    assert scan.format == "json" and q.chain(scan.node_id) == [(dedup, ""), (agg, "")]
    assert any("NOT (kind = test)" in readable(f) for f in dedup.filters[scan.node_id])  # .where(col("kind") != "test")
    # every batch's plan states each operator's two watermarks; the dedup and the aggregation share them
    marks = log.operator_watermarks()
    info = read_checkpoint(sample("dedup_window_chain"))
    wm = {b.batch_id: b.watermark_ms for b in info.batches}
    for b, ops in marks.items():
        assert ops[0].eviction == ops[1].eviction == wm[b], b
        assert ops[0].late == ops[1].late == (wm.get(b - 1, 0) if b else 0), b


def test_a_join_then_an_aggregation_trails_the_watermark_by_the_joins_bound() -> None:
    q, log = plan_of("chained_join_agg")
    join, agg = q.operators[1], q.operators[0]
    assert join.join is not None and join.join.join_type == "inner"
    assert join.join.condition == "(order_time >= payment_time - 5 minutes) AND (order_time <= payment_time + 5 minutes)"
    assert [c.source_column for c in join.keys] == [c.source_column for c in join.right_keys] == ["order_id"]
    assert agg.keys[0].window == Window("order_time", 300_000, 300_000, 0) and agg.keys[1].source_column == "customer_id"
    info = read_checkpoint(sample("chained_join_agg"))
    wm = {b.batch_id: b.watermark_ms for b in info.batches}
    for b, ops in log.operator_watermarks().items():
        if wm[b]:  # the join's output watermark: its state watermark, the query's minus the 5 minute bound (and 1 ms)
            assert ops[1].eviction == wm[b] and ops[0].eviction == wm[b] - 300_001, b
            assert ops[1].cleanup == {"left": wm[b] - 300_001, "right": wm[b] - 300_001}, b
    assert join_plans(log.plans[max(log.plans)])[1] == join.join


def test_a_left_outer_join_over_json_and_parquet() -> None:
    q, _ = plan_of("outer_join_clicks")
    [join] = q.operators.values()
    assert join.join is not None and join.join.join_type == "left_outer"
    assert sorted(s.format for s in q.scans.values()) == ["json", "parquet"]
    assert join.watermark_columns["left"].source_column == "impression_time"
    assert join.watermark_columns["right"].source_column == "click_time"


def test_a_csv_source_into_a_file_sink() -> None:
    q, log = plan_of("file_sink_agg")
    assert [s.format for s in q.scans.values()] == ["csv"]
    assert log.sink.startswith("FileSink[")


def test_a_window_over_a_time_python_code_output_keeps_its_size_and_slide() -> None:
    """``window(ts, '5 minutes', '2 minutes')`` over the ``ts`` a mapInPandas passes on: the plan does not
    trace that time to the input (the column is ""), yet the window's size and slide are the plan's."""
    folder = SAMPLES / "generated" / "seed-3511"
    log = read_progress(str(folder / "event_log"), read_checkpoint(str(folder / "checkpoint")))
    q = log.query_plan()
    assert q is not None
    [agg] = q.operators.values()
    window = next(c.window for c in agg.keys if c.window is not None)
    assert window == Window("", 300_000, 120_000, 0)
    assert agg.watermark_columns[""].window == window


@given(st.integers(min_value=0, max_value=10**9), st.integers(1, 4), st.integers(0, 3))
def test_the_windows_a_row_may_be_in_are_those_of_one_time_each_changed(t: int, k: int, evicted: int) -> None:
    """Without the row's event time: every set of windows of one time past the late-row watermark whose
    windows each changed in the batch, its own among them. A window the watermark closed in the batch
    (a delete) ending at or before the late-row watermark holds no row of the batch."""
    from statelens.analysis.fate.walk import key_id
    from statelens.analysis.kinds.aggregation import _maybe_counted_in

    slide = 60_000
    w = Window("", slide * k, slide)

    def change(win: tuple[int, int], kind: str) -> dict[str, object]:
        start, end = (dt.datetime.fromtimestamp(x / 1000, dt.UTC) for x in win)
        return {"key": {"window": {"start": start, "end": end}, "g": "a"}, "change_type": kind}

    mine = w.of(t)
    late = mine[0][1] - slide  # the row's time is past it: its first window ends one slide later at least
    closed = [(mine[0][0] - slide * (i + 1), mine[0][1] - slide * (i + 1)) for i in range(evicted)]  # end <= late
    found = _maybe_counted_in(w, [change(x, "update") for x in mine] + [change(x, "delete") for x in closed], late)
    assert found == [{key_id(change(x, "update")["key"]) for x in mine}]
    if k == 1 and evicted:  # a window closed in the batch ending after the late-row watermark may hold it too
        found = _maybe_counted_in(w, [change(mine[0], "update"), change(closed[0], "delete")], late - 1)
        assert found == [{key_id(change(closed[0], "delete")["key"])}, {key_id(change(mine[0], "update")["key"])}]


def test_sliding_windows_hold_an_event_time_in_every_window_that_covers_it() -> None:
    w = Window("t", size_ms=10 * 60_000, slide_ms=5 * 60_000)
    t = 12 * 60_000
    assert w.of(t) == [(5 * 60_000, 15 * 60_000), (10 * 60_000, 20 * 60_000)]
    assert Window("t", 300_000, 300_000, 0).of(299_999) == [(0, 300_000)]


@given(st.integers(min_value=0, max_value=10**13), st.integers(min_value=1, max_value=10**7), st.integers(1, 4))
def test_windows_cover_their_event_time(t: int, slide: int, k: int) -> None:
    w = Window("t", slide * k, slide)
    found = w.of(t)
    assert len(found) == k and all(s <= t < e and e - s == slide * k and s % slide == 0 for s, e in found)


def test_event_times_are_read_as_spark_reads_them() -> None:
    utc = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    us = int(utc.timestamp()) * 1_000_000
    assert event_time_us("2026-01-01T00:00:00+00:00") == us
    assert event_time_us("2026-01-01T01:00:00+01:00") == us
    assert event_time_us("2026-01-01 00:00:00Z") == us
    assert event_time_us("2026-01-01T00:00:00.000250+00:00") == us + 250
    assert event_time_us("2025-12-31T19:00:00", "America/New_York") == us  # no offset: the session's time zone
    assert event_time_us(int(utc.timestamp())) == us  # a JSON number: seconds
    assert event_time_us(utc) == us and event_time_us("view") is None and event_time_us(None) is None


def test_times_a_query_makes_of_numbers_are_spark_s_to_the_microsecond(spark: Any) -> None:
    """``timestamp_seconds`` (of a whole number and of a double), ``timestamp_millis``, ``timestamp_micros``
    and ``cast(n / 1000 as timestamp)``: the time State Lens makes of each number is Spark's, to the
    microsecond, also where double arithmetic is not exact (9001605505255 / 1000.0 * 10^6 is not
    9001605505255000). Truth: Spark's ``unix_micros`` of each."""
    cases = [
        (EpochTime("n"), "timestamp_seconds(n)", "BIGINT", [1_767_225_600, 0, -1]),
        (EpochTime("n"), "timestamp_seconds(n)", "DOUBLE", [592064621.4916989, 328819476.55515575, -1.5]),
        (EpochTime("n", 1_000), "timestamp_millis(n)", "BIGINT", [1_767_225_600_123, -1]),
        (EpochTime("n", 1), "timestamp_micros(n)", "BIGINT", [1_767_225_600_123_456, -1]),
        (EpochTime("n", divisor=1000.0), "cast(n / 1000 as timestamp)", "BIGINT", [9001605505255, 8600171734044, -8651648715015]),
    ]
    for epoch, expr, kind, values in cases:
        rows = spark.createDataFrame([(v,) for v in values], f"n {kind}").selectExpr("n", f"unix_micros({expr}) AS us").collect()
        assert [epoch.us(r["n"]) for r in rows] == [r["us"] for r in rows], expr
    assert EpochTime("n", 1_000).us("1767225600123") == 1_767_225_600_123_000  # a CSV's text
    assert all(EpochTime("n").us(v) is None for v in ("soon", None, True, float("nan"), float("inf")))  # null to Spark


def test_a_time_past_python_s_years_is_written_not_a_crash(spark: Any) -> None:
    """Spark holds times far past year 9999 (epoch milliseconds read as seconds make year 57971); the
    one time formatter writes them instead of raising (the CLI died on one). Truth: Spark's own time."""
    from statelens.analysis.core.key_format import fmt_time

    (row,) = spark.sql(
        "SELECT year(timestamp_seconds(1767225600000)) AS y, unix_millis(timestamp_seconds(1767225600000)) AS ms"
    ).collect()
    assert row["y"] > 9999
    assert fmt_time(row["ms"]) == f"{row['ms']:,} ms since 1970-01-01 UTC"
    assert fmt_time(1_767_225_600_000) == "2026-01-01 00:00:00 UTC"
