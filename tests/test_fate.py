"""A key's whole fate, from the input files to the output, against what really happened.

The truth of each sample is what its real query did (``sample_checkpoints/generate.py``): the input
files it wrote (``inputs/<sample>/``, the generator's data), every row the query emitted with its
batch (``outputs/<sample>.json``: foreachBatch, or the file sink's files per ``_spark_metadata``
batch) and what Spark reported per batch (``outputs/<sample>.progress.json``: rows each operator
dropped by the watermark). The stories each sample was built for are in its data function's
docstring; every key of the input is checked against the emitted rows, on both engines.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from statelens.analysis import fate as F
from statelens.analysis.core.question import KeyQuestion
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.readers import engine
from support import SAMPLES, ms, sample, scenario

pytestmark = pytest.mark.usefixtures("spark")
ENGINES = ["native", "spark"]


def emitted(name: str) -> list[dict[str, Any]]:
    return json.loads((SAMPLES / "outputs" / f"{name}.json").read_text())  # type: ignore[no-any-return]


def dropped_by_watermark(name: str) -> dict[int, dict[int, int]]:
    """batch -> operator -> rows Spark reported dropped by the watermark (stateOperators[i] is operator i)."""
    out: dict[int, dict[int, int]] = {}
    for p in json.loads((SAMPLES / "outputs" / f"{name}.progress.json").read_text()):
        if "addBatch" in p.get("durationMs", {}):
            out[p["batchId"]] = {i: o.get("numRowsDroppedByWatermark", 0) for i, o in enumerate(p.get("stateOperators", []))}
    return out


def input_rows(name: str, source: str) -> list[tuple[int, dict[str, Any]]]:
    return [(b, r) for b, batch in enumerate(scenario(name).batches) for r in batch.get(source, [])]


def run(name: str, keys: list[str], eng: str, **kw: Any):  # type: ignore[no-untyped-def]
    engine.configure(eng)
    try:
        q = KeyQuestion(
            tuple(keys), event_log=str(SAMPLES / "event_logs" / name), input_root=str(SAMPLES / "inputs" / name), **kw
        )
        return why_missing(sample(name), q)
    finally:
        engine.configure("auto")


def by_key(report) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return {r.key: r for r in report.results}


def window_of(group: str) -> str:
    """``window 2026-01-01 00:00:00-00:05:00, user_id u`` -> ``2026-01-01 00:00:00``."""
    return group.split(", ")[0].removeprefix("window ").split("-00:")[0] if group.startswith("window ") else group


def start(w: dict[str, str]) -> str:
    return w["start"].replace("T", " ")


# --------------------------------------------------------------------------- dedup(event_id) -> 5-minute windows per user

CHAIN = "dedup_window_chain"
CHAIN_USERS = sorted({r["user_id"].strip() for _, r in input_rows(CHAIN, "events")} | {"user-7", "user-8"})


@pytest.fixture(scope="module", params=ENGINES)
def chain(request: pytest.FixtureRequest) -> dict[str, Any]:
    return by_key(run(CHAIN, CHAIN_USERS, request.param))


def test_every_users_emitted_windows_and_counts_are_what_the_query_emitted(chain: dict[str, Any]) -> None:
    truth = emitted(CHAIN)
    for user in CHAIN_USERS:
        f = chain[user].fate
        windows = {(o.batch_id, window_of(o.group)) for o in f.outputs if o.kind == F.EMITTED}
        assert windows == {(r["batch_id"], start(r["window"])) for r in truth if r["user_id"] == user}, user
        # the records counted in each emitted window are as many as the query counted
        counted = Counter(window_of(r.steps[-1].group or "") for r in f.records if r.outcome == F.REACHED_STATE)
        for r in truth:
            if r["user_id"] == user:
                assert counted[start(r["window"])] == r["events"], (user, r)


def test_a_record_dropped_as_late_by_the_upstream_dedup(chain: dict[str, Any]) -> None:
    r = chain["user-late"]
    assert (r.verdict, r.reason) == ("dropped_as_late", "late_record")
    [rec] = r.fate.records
    late_batch = next(b for b, row in input_rows(CHAIN, "events") if row["user_id"] == "user-late")
    assert (rec.record.batch_id, rec.outcome, rec.operator_id, rec.at_batch) == (late_batch, F.DROPPED_AS_LATE, 1, late_batch)
    assert rec.event_time_ms == ms("2026-01-01T00:01:00+00:00")
    assert dropped_by_watermark(CHAIN)[late_batch][1] >= 1  # Spark reported operator 1 (the dedup) dropping then
    assert "dropped 2 row(s) by the watermark in batch 10" in rec.steps[0].detail
    assert r.dropped_in_batch == late_batch and not r.fate.outputs and not r.fate.waiting


def test_a_second_record_late_after_its_window_was_emitted(chain: dict[str, Any]) -> None:
    r = chain["user-second"]
    assert r.reason == "late_record" and r.verdict != "dropped_as_late"  # one of its two records made it
    first, second = r.fate.records
    assert (first.record.batch_id, first.outcome, first.operator_id) == (1, F.REACHED_STATE, 0)
    assert (second.record.batch_id, second.outcome, second.operator_id, second.at_batch) == (10, F.DROPPED_AS_LATE, 1, 10)
    [out] = r.fate.outputs
    [row] = [t for t in emitted(CHAIN) if t["user_id"] == "user-second"]
    assert (out.batch_id, window_of(out.group), row["events"]) == (row["batch_id"], start(row["window"]), 1)
    assert out.batch_id < second.record.batch_id  # the window went out before the second record came


def test_duplicates_across_and_within_batches(chain: dict[str, Any]) -> None:
    """Each duplicate repeats a record of the same key that was written: the dedup did its job, the key
    was written whole (the duplicates are named, not counted as lost)."""
    r = chain["user-dup"]
    assert (r.outcome, r.cause, r.reason) == ("written", None, None)
    outcomes = [(x.record.batch_id, x.record.values["event_id"], x.outcome) for x in r.fate.records]
    assert outcomes == [
        (2, "ev-dup-1", F.REACHED_STATE),
        (3, "ev-dup-1", F.DROPPED_AS_DUPLICATE),
        (4, "ev-dup-2", F.REACHED_STATE),
        (4, "ev-dup-2", F.DROPPED_AS_DUPLICATE),
    ]
    dup_across, dup_within = (x for x in r.fate.records if x.outcome == F.DROPPED_AS_DUPLICATE)
    assert dup_across.contribution == dup_within.contribution == "reached_output"
    assert "read in batch 2 (events/part-00002.json row 5)" in dup_across.steps[0].detail
    earlier = dup_across.steps[0].cause.earlier
    assert earlier.batch_id == 2 and earlier.row == 5
    assert "came first in the same batch" in dup_within.steps[0].detail


@pytest.mark.parametrize(("asked", "found", "reason"), [("user-7", "User-7", "letter case"), ("user-8", "user-8 ", "whitespace")])
def test_a_key_typed_otherwise_is_never_in_the_input_with_its_near_miss(
    chain: dict[str, Any], asked: str, found: str, reason: str
) -> None:
    r = chain[asked]
    assert r.verdict == "never_in_input" and not r.fate.records
    assert [(n.values["user_id"], n.batch_id) for n in r.fate.near] == [(found, 5)]
    assert reason in r.fate.near[0].near


def test_a_filtered_record_quotes_the_filter(chain: dict[str, Any]) -> None:
    r = chain["user-test"]
    assert (r.verdict, r.reason) == ("never_in_state", "filtered")
    [rec] = r.fate.records
    assert (rec.outcome, rec.operator_id, rec.at_batch) == (F.FILTERED, 1, 6)
    assert "NOT (kind = test)" in rec.steps[0].detail


def test_emitted_and_waiting_windows_of_one_user(chain: dict[str, Any]) -> None:
    r = chain["user-0"]
    seen = {window_of(x.steps[-1].group or "") for x in r.fate.records}
    out = {window_of(o.group) for o in r.fate.outputs}
    waiting = {window_of(w.group): w for w in r.fate.waiting}
    assert out and waiting and out | set(waiting) == seen and not out & set(waiting)
    for w, wait in waiting.items():  # released when the watermark reaches the window's end
        end = ms(w.replace(" ", "T") + "+00:00") + 5 * 60_000
        assert (wait.released_at_watermark, wait.needs_event_time) == (end, end + 10 * 60_000)


# --------------------------------------------------------------------------- impressions LEFT OUTER JOIN clicks

CLICKS = "outer_join_clicks"
ADS = sorted({r["ad_id"] for _, r in input_rows(CLICKS, "impressions")})


@pytest.fixture(scope="module", params=ENGINES)
def clicks(request: pytest.FixtureRequest) -> dict[str, Any]:
    return by_key(run(CLICKS, ADS, request.param))


def test_every_ads_output_is_what_the_join_emitted(clicks: dict[str, Any]) -> None:
    truth = emitted(CLICKS)
    for ad in ADS:
        got = {(o.batch_id, o.kind) for o in clicks[ad].fate.outputs}
        want = {(r["batch_id"], F.MATCHED if r["click_id"] else F.EMITTED_UNMATCHED) for r in truth if r["ad_id"] == ad}
        assert got == want, ad


def test_a_click_that_came_after_its_impression_was_emitted(clicks: dict[str, Any]) -> None:
    r = clicks["ad-late-click"]
    assert (r.verdict, r.reason) == ("emitted_unmatched", "late_record")
    imp, click = r.fate.records
    # the impression arrived in batch 1 and was evicted in batch 9: its step is the eviction's
    assert (imp.record.source, imp.record.batch_id, imp.outcome, imp.side, imp.at_batch) == (
        "impressions",
        1,
        F.EVICTED_UNMATCHED,
        "left",
        9,
    )
    assert (click.record.source, click.outcome, click.side, click.at_batch) == ("clicks", F.DROPPED_AS_LATE, "right", 10)
    # written null-padded; the click the impression waited for came too late: the root cause is the click's
    assert (r.outcome, r.cause, r.cause_at["operator_id"], r.cause_at["batch_id"]) == (
        "written_unmatched",
        "dropped_as_late",
        0,
        10,
    )
    assert click.record.file_name.endswith(".parquet")
    assert dropped_by_watermark(CLICKS)[10][0] == 1
    [out] = r.fate.outputs
    assert (out.kind, out.batch_id) == (F.EMITTED_UNMATCHED, imp.at_batch) and out.batch_id < click.at_batch


def test_a_click_too_far_after_is_rejected_by_the_condition(clicks: dict[str, Any]) -> None:
    r = clicks["ad-far-click"]
    assert (r.verdict, r.reason) == ("emitted_unmatched", "condition_not_met")
    imp, click = r.fate.records
    assert [imp.outcome, click.outcome] == [F.CONDITION_NOT_MET, F.CONDITION_NOT_MET]
    assert "16m after" in imp.steps[0].detail and "impression_time + 10 minutes" in imp.steps[0].detail


def test_an_impression_still_waiting(clicks: dict[str, Any]) -> None:
    r = clicks["ad-waiting"]
    [rec] = r.fate.records
    assert rec.outcome == F.REACHED_STATE and not r.fate.outputs
    [w] = r.fate.waiting
    t = ms("2026-01-01T00:22:50+00:00")
    # left rows are evicted once the state watermark (the query's minus the 10 minute bound) passes them
    assert w.released_at_watermark is not None and t + 10 * 60_000 <= w.released_at_watermark <= t + 10 * 60_000 + 1
    assert w.needs_event_time == w.released_at_watermark + 2 * 60_000
    # two watermarked sources: the query's watermark is the minimum of theirs (the checkpoint's policy),
    # so both sources' event times must get there, each named
    assert "once every source's newest event time reaches its own (click_time" in w.detail and "impression_time" in w.detail
    assert "multipleWatermarkPolicy min" in w.detail


# --------------------------------------------------------------------------- a file sink and a join -> aggregation chain


@pytest.mark.parametrize("eng", ENGINES)
def test_the_file_sinks_rows_are_found_in_the_batches_that_wrote_them(eng: str) -> None:
    name = "file_sink_agg"
    users = sorted({r["user_id"] for _, r in input_rows(name, "events")})
    report = by_key(run(name, users, eng, sink=str(SAMPLES / "sinks" / name)))
    truth = emitted(name)
    for user in users:
        f = report[user].fate
        want = {(r["batch_id"], start(r["window"])) for r in truth if r["user_id"] == user}
        assert {(o.batch_id, window_of(o.group)) for o in f.outputs if o.kind == F.WRITTEN} == want, user
        assert {(o.batch_id, window_of(o.group)) for o in f.outputs if o.kind == F.EMITTED} == want, user
    late = report["user-late"]
    assert late.verdict == "dropped_as_late" and late.fate.records[0].at_batch == 7
    assert late.fate.records[0].record.file_name == "part-00007.csv"


@pytest.mark.parametrize("eng", ENGINES)
def test_a_join_then_an_aggregation_per_customer(eng: str) -> None:
    name = "chained_join_agg"
    customers = sorted({r["customer_id"] for _, r in input_rows(name, "orders")})
    report = by_key(run(name, customers, eng))
    truth = emitted(name)
    for c in customers:
        f = report[c].fate
        want = {(r["batch_id"], start(r["window"])) for r in truth if r["customer_id"] == c}
        assert {(o.batch_id, window_of(o.group)) for o in f.outputs} == want, c
        # every joined row of the customer's orders counted in its window: as many as the query counted
        counted = Counter(
            window_of(s.group or "") for r in f.records for s in r.steps if s.operator_id == 0 and s.outcome == F.REACHED_STATE
        )
        for r in truth:
            if r["customer_id"] == c:
                assert counted[start(r["window"])] == r["paid_orders"], (c, r)


def test_the_operator_watermarks_worked_out_equal_the_plans() -> None:
    """Without the event log's plans the per-operator watermarks are worked out as Spark's
    PropagateWatermarkSimulator does: they must equal what each batch's plan states."""
    from statelens.analysis.plan.query_plan import operator_watermarks
    from statelens.spark_io.logs.checkpoint import read_checkpoint
    from statelens.spark_io.logs.event_logs import read_progress

    for name in ("chained_join_agg", CHAIN, CLICKS):
        info = read_checkpoint(sample(name))
        planned = read_progress(str(SAMPLES / "event_logs" / name), info).operator_watermarks()
        batches = [(b.batch_id, b.watermark_ms) for b in info.batches]
        ops = [o.operator_id for o in info.operators]
        some = dict(list(planned.items())[:2])  # what the plans of two batches teach
        worked, _ = operator_watermarks(batches, some, ops)
        for b, marks in planned.items():
            for op, m in marks.items():
                assert (worked[b][op].late, worked[b][op].eviction) == (m.late, m.eviction), (name, b, op)


def test_without_the_event_log_the_fate_still_follows_the_records() -> None:
    engine.configure("native")
    try:
        r = why_missing(sample(CHAIN), KeyQuestion(("user-late", "user-second"), input_root=str(SAMPLES / "inputs" / CHAIN)))
    finally:
        engine.configure("auto")
    late, second = r.results
    assert late.verdict == "dropped_as_late" and late.fate.records[0].operator_id == 1
    assert "worked out from the checkpoint's watermarks" in late.fate.records[0].steps[0].detail
    assert "No progress of this batch was given" in late.fate.records[0].steps[0].detail
    assert [x.outcome for x in second.fate.records] == [F.REACHED_STATE, F.DROPPED_AS_LATE]


def test_moved_input_not_given_says_where_to_point() -> None:
    engine.configure("native")
    try:
        r = why_missing(sample(CHAIN), KeyQuestion(("user-late",), event_log=str(SAMPLES / "event_logs" / CHAIN)))
    finally:
        engine.configure("auto")
    [res] = r.results
    assert not res.fate.records and res.verdict == "never_in_state"  # the state's verdict: the input was not searched
    assert "no longer there" in (res.fate.input_note or "") and "--input-root" in (res.fate.input_note or "")
