"""'Why is key X missing' on every sample checkpoint, with verdicts derived from the input data.

The orders / payments data follow the cases documented in sample_checkpoints/generate.py
(``orders_payments_batches``): order n sits in batch n // 10, and n % 10 decides its payment.
The join condition is order_time within ±5 minutes of payment_time, so an unmatched row is
evicted in the first batch whose watermark is past its event time + 5 minutes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statelens.analysis.core.errors import BatchOutOfRange, InvalidInput, UnknownOperator
from statelens.analysis.core.key_format import fmt_time
from statelens.analysis.core.model import StateSource
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.verdicts import why_missing as wm
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.gather.workspace import Workspace
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers.state_reader import read_changes
from support import SAMPLES, ms, sample, scenario

pytestmark = pytest.mark.usefixtures("spark")
JOINS = ["join_hdfs", "join_rocksdb"]


def verdicts(report) -> dict[str, wm.KeyDiagnosis]:  # type: ignore[no-untyped-def]
    return {r.key: r for r in report.results}


def order_time(n: int) -> int:
    order = next(o for b in scenario("join_hdfs").batches for o in b["orders"] if o["order_id"] == f"ord-{n}")
    return ms(order["order_time"])


def first_batch_past(name: str, t: int) -> int:
    return next(b.batch_id for b in read_checkpoint(sample(name)).batches if b.watermark_ms > t)


def outputs(name: str) -> list[dict]:  # type: ignore[type-arg]
    return json.loads((SAMPLES / "outputs" / f"{name}.json").read_text())  # type: ignore[no-any-return]


def emitted(name: str) -> set[str]:
    return {r["order_id"] for r in outputs(name)}


@pytest.mark.parametrize("name", JOINS)
def test_every_join_verdict_on_both_providers(name: str) -> None:
    keys = ["ord-150", "ord-151", "ord-152", "ord-153", "ord-154", "ord-155", "ord-156", "ord-157", "ord-158", "ord-159"]
    keys += ["missing-150", "ORD-155", "ord-1", "ord-6", "ord-1000"]
    report = why_missing(sample(name), KeyQuestion(tuple(keys)))
    assert [r.key for r in report.results] == keys  # in the order given
    assert report.batch == 16 and report.key_field == "field0" and report.operator_report.operator_name == "symmetricHashJoin"
    v = verdicts(report)
    five_min = 5 * 60_000
    expected = {
        "ord-150": (wm.WAITING_OTHER_SIDE, "left"),  # case 0: its payment went to missing-150
        "ord-151": (wm.WAITING_OTHER_SIDE, "left"),  # case 1: its payment went to ord-156
        "ord-152": (wm.MATCHED, None),  # case 2: paid by payment 142, a batch early
        "ord-153": (wm.WAITING_OTHER_SIDE, "left"),  # case 3: payment behind the watermark, dropped late
        "ord-154": (wm.CONDITION_NOT_MET, None),  # case 4: payment 8 minutes later
        "ord-155": (wm.WAITING_OTHER_SIDE, "left"),  # case 5: payment keyed ORD-155
        "ord-156": (wm.MATCHED, None),
        "ord-157": (wm.WAITING_OTHER_SIDE, "right"),  # case 7: order cancelled upstream, payment waits
        "ord-158": (wm.MATCHED, None),
        "ord-159": (wm.MATCHED, None),  # case 9: two order rows for one key
        "missing-150": (wm.WAITING_OTHER_SIDE, "right"),
        "ORD-155": (wm.WAITING_OTHER_SIDE, "right"),
        "ord-1": (wm.EVICTED, "left"),  # early, never paid: evicted unmatched
        "ord-6": (wm.EVICTED, "both"),  # early, paid: evicted after matching, on both sides
        "ord-1000": (wm.NEVER_IN_STATE, None),
    }
    assert {k: (r.verdict, r.side) for k, r in v.items()} == expected
    # the verdicts agree with what the query really emitted
    out = emitted(name)
    assert {f"ord-{n}" for n in range(150, 160)} & out == {k for k, r in v.items() if r.verdict == wm.MATCHED}
    assert "ord-6" in out and "ord-1" not in out

    assert "became matched in batch 15" in v["ord-156"].explanation
    assert v["ord-152"].was_matched is True and v["ord-150"].was_matched is False
    pair = next(e for e in v["ord-154"].evidence if e["store"] == "pair")
    assert pair["difference_s"] == 480.0
    assert {e["key"]["index"] for e in v["ord-159"].evidence if e["store"] == "left"} == {0, 1}
    now = f"in state at batch {report.batch}"
    assert sighted(v["ord-155"]) == [{"key": "ORD-155", "reason": "letter case differs", "where": "right", "seen": now}]
    assert {"key": "missing-150", "reason": "same digits, other prefix", "where": "right", "seen": now} in sighted(v["ord-150"])
    assert {"key": "ord-155", "reason": "letter case differs", "where": "left", "seen": now} in sighted(v["ORD-155"])
    # eviction: the first batch whose watermark passed event time + the 5 minute bound
    assert v["ord-1"].evicted_at_batch == first_batch_past(name, order_time(1) + five_min)
    assert v["ord-1"].was_matched is False
    assert v["ord-6"].evicted_at_batch == first_batch_past(name, order_time(6) + five_min) and v["ord-6"].was_matched is True
    # a matched key, since evicted, keeps the batch it joined in: the batch the query emitted it
    joined = min(r["batch_id"] for r in outputs(name) if r["order_id"] == "ord-6")
    assert v["ord-6"].matched_at_batch == joined and f"It had joined in batch {joined}" in v["ord-6"].explanation
    assert f"the left side in batch {v['ord-6'].evicted_at_batch}" in v["ord-6"].explanation
    assert v["ord-156"].matched_at_batch == min(r["batch_id"] for r in outputs(name) if r["order_id"] == "ord-156")
    # condition not met: both event times and their difference
    assert re.search(
        r"left order_time 2026-01-01 00:\d\d:\d\d UTC vs right payment_time 2026-01-01 00:\d\d:\d\d UTC "
        r"\(right after left by 8m\)",
        v["ord-154"].explanation,
    ), v["ord-154"].explanation
    assert "batches 0–16" in v["ord-1000"].explanation
    # the eviction estimate is learnt from the sample's own evictions: the 5 minute bound
    assert re.search(r"evicted once the watermark was 5m–5m 5s past", v["ord-153"].explanation)


def test_timeline_and_history_window() -> None:
    report = why_missing(sample("join_hdfs"), KeyQuestion(("ord-6",)))
    events = [(e["batch_id"], e["store"], e["event"]) for e in report.results[0].timeline]
    evict = first_batch_past("join_hdfs", order_time(6) + 5 * 60_000)
    assert (0, "left", "entered state") in events and (0, "left", "matched") in events
    assert (evict, "left", "evicted") in events and (evict, "right", "evicted") in events
    # a recent key in state is explained by the last few batches of history only
    recent = why_missing(sample("join_hdfs"), KeyQuestion(("ord-156",)))
    assert recent.operator_report.history == (14, 16)


@pytest.mark.parametrize(
    "name,key,verdict",
    [
        ("windowed_agg", "user-1", wm.WAITING_WATERMARK),
        ("windowed_agg", "user-9", wm.NEVER_IN_STATE),
        ("dedup", "ev-115", wm.DROPPING_DUPLICATES),
        ("dedup", "ev-119", wm.NEVER_IN_STATE),  # every third id repeats an older one: ev-119 never existed
        ("dedup_within_watermark", "ev-115", wm.DROPPING_DUPLICATES),
        ("session_window", "user-0", wm.SESSION_OPEN),
        ("session_window", "user-7", wm.NEVER_IN_STATE),
        ("apply_in_pandas_with_state", "user-0", wm.IN_STATE),
        ("transform_with_state", "user-0", wm.IN_STATE),
        ("unbounded_agg", "ev-5", wm.IN_STATE),
        ("stuck_watermark_dedup", "ev-3", wm.DROPPING_DUPLICATES),
        ("hot_key_join", "hot", wm.MATCHED),
        ("hot_key_join", "key-1", wm.WAITING_OTHER_SIDE),
    ],
)
def test_verdicts_of_every_operator(name: str, key: str, verdict: str) -> None:
    (r,) = why_missing(sample(name), KeyQuestion((key,))).results
    assert r.verdict == verdict, r.explanation


def test_windowed_agg_says_when_the_next_window_closes() -> None:
    info = read_checkpoint(sample("windowed_agg"))
    wm_now = info.batches[-1].watermark_ms
    ends = {
        ms(e["event_time"]) // 300_000 * 300_000 + 300_000
        for b in scenario("windowed_agg").batches
        for e in b["events"]
        if e["user_id"] == "user-1"
    }
    next_close = min(e for e in ends if e > wm_now)
    (r,) = why_missing(sample("windowed_agg"), KeyQuestion(("user-1",))).results
    assert f"the next closes at {fmt_time(next_close)}" in r.explanation
    assert len(r.evidence) == len([e for e in ends if e > wm_now])


def test_dedup_evictions_follow_the_watermark() -> None:
    t = next(ms(e["event_time"]) for b in scenario("dedup").batches for e in b["events"] if e["event_id"] == "ev-5")
    (r,) = why_missing(sample("dedup"), KeyQuestion(("ev-5",))).results
    assert r.verdict == wm.EVICTED and r.evicted_at_batch == first_batch_past("dedup", t - 1)
    # within-watermark dedup keeps the id until event time + the 10 minute delay
    (r2,) = why_missing(sample("dedup_within_watermark"), KeyQuestion(("ev-5",))).results
    assert r2.verdict == wm.EVICTED and r2.evicted_at_batch == first_batch_past("dedup_within_watermark", t + 10 * 60_000 - 1)


@pytest.mark.parametrize("name", ["apply_in_pandas_with_state", "transform_with_state"])
def test_timed_out_user_is_evicted_in_the_batch_it_expired(name: str) -> None:
    outputs = json.loads((SAMPLES / "outputs" / f"{name}.json").read_text())
    expired = next(r["batch_id"] for r in outputs if r["user_id"] == "user-3" and r["status"] == "expired")
    (r,) = why_missing(sample(name), KeyQuestion(("user-3",))).results
    assert r.verdict == wm.EVICTED and r.evicted_at_batch == expired


def test_state_details_of_arbitrary_stateful_operators() -> None:
    (g,) = why_missing(sample("apply_in_pandas_with_state"), KeyQuestion(("user-0",))).results
    assert "times out when the watermark passes" in g.explanation and '"events": ' in g.explanation
    (t,) = why_missing(sample("transform_with_state"), KeyQuestion(("user-0",))).results
    assert all(part in t.explanation for part in ("value 'count'", "map 'per_kind'", "list 'recent'", "timer(s) at"))
    assert {e["store"] for e in t.evidence} == {"count", "per_kind", "recent", "timers"}


def test_session_eviction_after_the_gap() -> None:
    events = [ms(e["event_time"]) for b in scenario("session_window").batches for e in b["events"] if e["user_id"] == "user-3"]
    end = max(events) + 15 * 60_000
    (r,) = why_missing(sample("session_window"), KeyQuestion(("user-3",))).results
    assert r.verdict == wm.EVICTED and r.evicted_at_batch == first_batch_past("session_window", end - 1)


def test_chained_operators_and_operator_choice() -> None:
    report = why_missing(sample("chained_join_agg"), KeyQuestion(("ord-156",)))
    assert report.operator_report.operator_id == 1 and report.results[0].verdict == wm.MATCHED  # the join is the default
    agg = why_missing(sample("chained_join_agg"), KeyQuestion(("cust-1",), operator=0, key_field="customer_id"))
    assert agg.results[0].verdict == wm.WAITING_WATERMARK


def test_composite_key_field_and_evidence_cap() -> None:
    r = why_missing(sample("stuck_watermark_dedup"), KeyQuestion(("2026-01-01 00:00:00",), key_field="event_time"))
    assert r.operator_report.key_fields == ["event_id", "event_time"] and r.results[0].verdict == wm.DROPPING_DUPLICATES
    assert len(r.results[0].evidence) == 120
    (hot,) = why_missing(sample("hot_key_join"), KeyQuestion(("hot",))).results
    assert len(hot.evidence) == wm.MAX_EVIDENCE and "first 200 of 1501 rows" in hot.explanation
    (k1,) = why_missing(sample("hot_key_join"), KeyQuestion(("key-1",))).results
    assert "no watermark, so it is never evicted" in k1.explanation


WEIRD = ["it's", 'say "hi"', "back\\slash", "ünïcødé 🔑", "x'); DROP TABLE op0_left; --", "%", "ord-15_", "' OR '1'='1"]


def test_odd_keys_are_just_keys() -> None:
    report = why_missing(sample("join_hdfs"), KeyQuestion((*WEIRD, "ord-154")))
    assert [r.key for r in report.results] == [*WEIRD, "ord-154"]
    assert all(r.verdict == wm.NEVER_IN_STATE for r in report.results[:-1])  # no LIKE, no injection
    ws = Workspace(sample("join_hdfs"))
    for r in report.results:
        for q in r.queries:
            rows = ws.execute(q["sql"]).table.num_rows  # the shown SQL runs as is
            if r.key != "ord-154":
                assert rows == 0, (r.key, q["sql"])
    # the SQL reproduces the evidence: both sides' rows and the history rows of ord-154
    target = report.results[-1]
    state_q, *history_qs = target.queries
    assert ws.execute(state_q["sql"]).table.num_rows == 1
    changes = sum(ws.execute(q["sql"]).table.num_rows for q in history_qs)
    direct = 0
    for store in ("left-keyWithIndexToValue", "right-keyWithIndexToValue"):
        feed, _, _ = read_changes(sample("join_hdfs"), StateSource(0, store_name=store))
        direct += sum(r["key"]["field0"] == "ord-154" for r in feed.to_pylist())
    assert changes == direct > 0
    assert ws.execute("SELECT count(*) AS n FROM op0_left").table.to_pylist()[0]["n"] > 0  # nothing was dropped


def test_bad_input() -> None:
    with pytest.raises(UnknownOperator):
        why_missing(sample("join_hdfs"), KeyQuestion(("ord-1",), operator=3))
    with pytest.raises(InvalidInput, match=r"no field 'amount'.*field0 \(order_id\)"):
        why_missing(sample("join_hdfs"), KeyQuestion(("ord-1",), operator=0, key_field="amount"))
    # the whole query: a state key field or an input column; neither is refused, naming the key columns
    with pytest.raises(InvalidInput, match=r"no field 'nope'.*key columns: order_id"):
        why_missing(sample("join_hdfs"), KeyQuestion(("ord-1",), key_field="nope"))
    with pytest.raises(InvalidInput, match="at least one key"):
        why_missing(sample("join_hdfs"), KeyQuestion(()))
    with pytest.raises(BatchOutOfRange):
        why_missing(sample("join_hdfs"), KeyQuestion(("ord-1",), batch=77))


def test_diagnosis_at_an_earlier_batch() -> None:
    # at batch 3 ord-1 was still waiting in state; by batch 16 it was evicted
    (r,) = why_missing(sample("join_hdfs"), KeyQuestion(("ord-1",), batch=3)).results
    assert r.verdict == wm.WAITING_OTHER_SIDE and r.side == "left"


def test_timeline_draws_the_keys_own_event_times_from_batch_0() -> None:
    """ord-3 entered state in batch 0 (no watermark yet): its markers sit at its own order and
    payment times, from the generator's data, not on the watermark line."""
    import datetime as dt

    from statelens.analysis.charts.charts import key_timeline_figure

    report = why_missing(sample("join_hdfs"), KeyQuestion(("ord-3",)))
    (r,) = report.results
    fig = key_timeline_figure(r, report.operator_report.watermarks)
    entered_traces = [t for t in fig.data if t.name.startswith("entered state")]  # one per join side
    b0 = scenario("join_hdfs").batches[0]
    order = next(o for o in b0["orders"] if o["order_id"] == "ord-3")
    payment = next(p for p in b0["payments"] if p["order_id"] == "ord-3")
    got = {
        (x, int(y.timestamp() * 1000))
        for t in entered_traces
        for x, y in zip(t.x, t.y, strict=True)
        if isinstance(y, dt.datetime)
    }
    assert {(0, ms(order["order_time"])), (0, ms(payment["payment_time"]))} <= got


@given(st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=30), st.integers(0, 5))
@settings(max_examples=300, deadline=None)
def test_near_miss_columns_equal_the_regular_expressions(words: list[str | None], cut: int) -> None:
    """The byte-table columns the near-miss search filters on equal the regex way, on any text
    (several-byte characters, nulls, a sliced array)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from statelens.analysis.core.arrow_numpy import ALNUM_LOWER, DIGITS, translate_ascii

    column = pa.array(words, pa.string()).slice(min(cut, len(words)))
    digits = pc.replace_substring_regex(column, "[^0-9]", "")
    norm = pc.utf8_lower(pc.replace_substring_regex(column, "[^0-9A-Za-z]", ""))
    assert translate_ascii(column, DIGITS).to_pylist() == digits.to_pylist()
    assert translate_ascii(pa.chunked_array([column], pa.string()), ALNUM_LOWER).to_pylist() == norm.to_pylist()
    assert [None if w is None else wm.digits(w) for w in column.to_pylist()] == digits.to_pylist()


def sighted(r: Any) -> list[dict[str, Any]]:
    """A key's look-alikes as the state showed them (each also carries what became of it, when followed)."""
    return [{k: n[k] for k in ("key", "reason", "where", "seen")} for n in r.near_misses]


@pytest.mark.parametrize("name", JOINS)
def test_near_miss_already_evicted_is_found_in_the_history(name: str) -> None:
    """ord-5's payment was keyed ORD-5: it waited on the right side and was evicted before the question."""
    arrived = next(b for b, batch in enumerate(scenario(name).batches) for p in batch["payments"] if p["order_id"] == "ORD-5")
    (payment,) = [p for batch in scenario(name).batches for p in batch["payments"] if p["order_id"] == "ORD-5"]
    evicted = first_batch_past(name, ms(payment["payment_time"]) + 5 * 60_000)
    (r,) = why_missing(sample(name), KeyQuestion(("ord-5",))).results
    assert r.verdict == wm.EVICTED and r.was_matched is False
    assert "ORD-5" not in emitted(name) and "ord-5" not in emitted(name)  # truth: neither joined
    assert sighted(r) == [
        {
            "key": "ORD-5",
            "reason": "letter case differs",
            "where": "right",
            "seen": f"batches {arrived}–{evicted}, removed in batch {evicted}",
        }
    ]
    assert f"'ORD-5' on the right side (batches {arrived}–{evicted}, removed in batch {evicted})" in r.explanation


def test_without_the_join_type_a_row_evicted_unmatched_is_unknown_not_lost() -> None:
    """The inner join's order ord-1 got no payment and was evicted (the generator's data; the event
    log's plan says Inner). With its input not searched and no join type, its state cannot tell lost
    from written null-padded: unknown, saying why; given the type, or the event log, lost."""
    import statelens

    cp = statelens.open(sample("join_hdfs"))
    (bare,) = cp.why_missing("ord-1").to_dict()["results"]
    assert (bare["outcome"], bare["cause"]) == ("unknown", "unknown")
    assert "does not record the join type" in bare["cause_at"]["why"]
    (typed,) = cp.why_missing("ord-1", join_type="inner").to_dict()["results"]
    (logged,) = cp.why_missing("ord-1", event_log=str(SAMPLES / "event_logs" / "join_hdfs")).to_dict()["results"]
    assert typed["outcome"] == logged["outcome"] == "lost"
