"""Which keys never matched, against what the queries really emitted."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.compute as pc
import pytest

from statelens.analysis.core.errors import InvalidInput
from statelens.analysis.core.model import StateSource
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.verdicts import why_missing as wm
from statelens.spark_io.gather.unmatched import unmatched
from statelens.spark_io.readers import engine
from support import COMPAT, ROOT, SAMPLES, sample, scenario

JOINS = [sample("join_hdfs"), sample("join_rocksdb"), str(COMPAT / "4.3.0" / "join_state_format_3")]


def emitted(path: str) -> set[str]:
    if path.startswith(str(COMPAT)):
        truth = json.loads((COMPAT / "4.3.0" / "truth" / "join_state_format_3.json").read_text())
        return {r["order_id"] for r in truth["emitted"]}
    name = path.rsplit("/", 1)[-1]
    return {r["order_id"] for r in json.loads((SAMPLES / "outputs" / f"{name}.json").read_text())}


def entered_now(path: str) -> set[str]:
    """The join keys either side holds at the last batch."""
    keys: set[str] = set()
    for side in ("left", "right"):
        state, _ = engine.read_state(path, StateSource(0, store_name=f"{side}-keyWithIndexToValue"))
        keys |= set(pc.cast(pc.struct_field(state["key"], "field0"), "string").to_pylist())
    return keys


@pytest.mark.parametrize("path", JOINS, ids=lambda p: p.rsplit("/", 1)[-1])
def test_unmatched_keys_are_the_orders_that_never_joined(path: str) -> None:
    report = unmatched(path)
    out = emitted(path)
    listed = {k.key for k in report.keys}
    assert listed and not listed & out  # nothing listed was emitted
    # every order that entered the left state and was never emitted is listed (on whichever side
    # holds it now, or both sides if evicted from both)
    left_feed, _, _ = engine.read_changes(path, StateSource(0, store_name="left-keyWithIndexToValue"))
    entered = set(pc.cast(pc.struct_field(left_feed["key"], "field0"), "string").to_pylist())
    assert entered - out == listed & entered
    assert sum(report.counts().values()) == len(report.keys)
    assert all(k.detail for k in report.keys)  # each says why it is unmatched, where and since when
    waiting = next(k for k in report.keys if k.verdict == wm.WAITING_OTHER_SIDE)
    assert (
        waiting.detail
        == f"in the {waiting.side} side's state since batch {waiting.batch}; no {'right' if waiting.side == 'left' else 'left'} row with it yet"
    )
    # each verdict is the one why-missing gives the key
    sample_keys = {k.verdict: k for k in report.keys}
    from statelens.spark_io.gather.diagnosis import why_missing

    keys = [k for k in report.keys if k.verdict != wm.CONDITION_NOT_MET or k.side != "both"]
    sample_keys = {k.verdict: k for k in keys}
    gone = [k for k in report.keys if k.verdict == wm.CONDITION_NOT_MET and k.side == "both" and k.key not in entered_now(path)]
    verdicts = {
        r.key: r
        for r in why_missing(path, KeyQuestion(tuple([k.key for k in [*sample_keys.values(), *gone[:1]]]), operator=0)).results
    }
    for k in sample_keys.values():
        assert verdicts[k.key].verdict == k.verdict, (k, verdicts[k.key].explanation)
    for k in gone[:1]:  # both sides held it and evicted it unmatched: one operator's verdict reads evicted, from both
        v = verdicts[k.key]
        assert (v.verdict, v.side, v.was_matched, v.evicted_at_batch) == (wm.EVICTED, "both", False, k.batch), v.explanation


def test_since_keeps_the_keys_of_later_batches() -> None:
    full = unmatched(sample("join_hdfs"))
    later = unmatched(sample("join_hdfs"), since=12)
    assert later.keys == [k for k in full.keys if k.batch is not None and k.batch >= 12] and later.keys


def test_spark_lists_the_same_keys(spark) -> None:  # type: ignore[no-untyped-def]
    before = engine.current()
    engine.configure(engine.SPARK)
    try:
        by_spark = unmatched(sample("join_rocksdb"))
    finally:
        engine.configure(before)
    assert by_spark.engine == "spark" and by_spark.keys == unmatched(sample("join_rocksdb")).keys


def test_windows_still_waiting_are_the_windows_not_yet_emitted() -> None:
    report = unmatched(sample("windowed_agg"))
    assert report.keys and {k.verdict for k in report.keys} == {wm.WAITING_WATERMARK}
    out = json.loads((SAMPLES / "outputs" / "windowed_agg.json").read_text())
    done = {(r["user_id"], str(r["window"]["start"])[:16].replace("T", " ")) for r in out}
    for k in report.keys:
        start = k.detail.removeprefix("window ")[:16]
        assert (k.key, start) not in done  # a waiting window was not emitted yet
    users = {e["user_id"] for b in scenario("windowed_agg").batches for e in b["events"]}
    assert {k.key for k in report.keys} <= users


def test_other_operators_say_what_is_answered() -> None:
    with pytest.raises(InvalidInput, match="deduplication keeps only first occurrences"):
        unmatched(sample("dedup"))


def test_cli_unmatched_json() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "unmatched", sample("join_hdfs"), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["counts"] == unmatched(sample("join_hdfs")).counts()
    assert sum(sum(c.values()) for c in out["per_batch"].values()) == len(out["keys"])


def test_an_outer_join_with_its_type_says_emitted_null_padded_and_rejected_by_the_condition() -> None:
    """The left outer impressions ⋈ clicks: its type from the event log's plan. Keys evicted unmatched
    from the left side were emitted null-padded (the query's output holds them with no click), and a
    key both sides held without a match was rejected by the condition; without the type they are evicted."""
    path = sample("outer_join_clicks")
    with_type = unmatched(path, event_log=str(SAMPLES / "event_logs" / "outer_join_clicks"))
    assert with_type.join_type == "left_outer"
    truth = json.loads((SAMPLES / "outputs" / "outer_join_clicks.json").read_text())
    null_padded = {r["ad_id"]: r["batch_id"] for r in truth if r["click_id"] is None}
    got = {k.key: k.batch for k in with_type.keys if k.verdict == wm.EMITTED_UNMATCHED}
    rejected = {k.key: k for k in with_type.keys if k.verdict == wm.CONDITION_NOT_MET}
    assert "ad-far-click" in rejected and rejected["ad-far-click"].side == "both"
    assert got | {"ad-far-click": null_padded["ad-far-click"]} == null_padded  # every null-padded row, and its batch
    given = unmatched(path, join_type="left_outer")
    assert [k.__dict__ for k in given.keys] == [k.__dict__ for k in with_type.keys]
    plain = unmatched(path)
    assert not [k for k in plain.keys if k.verdict == wm.EMITTED_UNMATCHED] and any(
        "join type is not known" in n for n in plain.notes
    )
    with pytest.raises(InvalidInput):
        unmatched(path, join_type="sideways")
