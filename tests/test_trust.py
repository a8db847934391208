"""Never a silent wrong answer, and verdicts that follow the query's real semantics.

A failed read that a verdict depends on gives ``unknown`` with the read and Spark's reason (CLI
JSON and the page); typed keys match by value; modes, timeouts and keys without event time are
explained as Spark really behaves (checked on the compatibility samples' real checkpoints).
"""

from __future__ import annotations

import json
from pathlib import Path

import golden
import pytest
from streamlit.testing.v1 import AppTest

from statelens import cli
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.verdicts import why_missing as wm
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.logs.checkpoint import read_checkpoint
from support import COMPAT, ROOT, SAMPLES, tree_checksums


def garbled_history(copy_sample) -> Path:  # type: ignore[no-untyped-def]
    """A copy of join_hdfs whose early deltas are garbage: the state at the last batch still loads
    (from the snapshot of version 11 and the deltas after it), the change feed from batch 0 cannot."""
    cp = copy_sample("join_hdfs")
    for delta in cp.glob("state/0/*/left-keyWithIndexToValue/2.delta"):
        delta.write_bytes(b"not a delta file")
    for crc in cp.glob("state/0/*/left-keyWithIndexToValue/.2.delta.crc"):
        crc.unlink()
    return cp


def test_failed_history_read_gives_unknown_in_the_cli_json(copy_sample, capsys, spark) -> None:  # type: ignore[no-untyped-def]
    cp = garbled_history(copy_sample)
    before = tree_checksums(cp)
    assert cli.main(["why-missing", str(cp), "ord-0", "ord-154", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "change feed" in out["history"]["error"] and out["history"]["batches"] is None
    verdicts = {r["key"]: r for r in out["results"]}
    # ord-0 left state long ago: without its history nothing can be said
    assert verdicts["ord-0"]["verdict"] == "unknown"
    assert "could not be read" in verdicts["ord-0"]["explanation"] and "change feed" in verdicts["ord-0"]["explanation"]
    # ord-154 is in state on both sides at the last batch: that verdict does not need history
    assert verdicts["ord-154"]["verdict"] == "condition_not_met"
    assert tree_checksums(cp) == before


def test_failed_history_read_is_shown_on_the_page(copy_sample, spark) -> None:  # type: ignore[no-untyped-def]
    cp = garbled_history(copy_sample)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["checkpoint"] = str(cp)
    at.run()
    at.switch_page("views/why_missing.py").run()
    at.text_area(key="wm_keys").set_value("ord-0").run()
    at.button(key="wm_run").click().run()
    assert not at.exception
    assert "#### `ord-0` &nbsp; :gray-badge[Unknown]" in [m.value for m in at.markdown]  # its input files are gone too
    assert "Operator 0's verdict: :gray-badge[Unknown: a read failed]" in [c.value for c in at.caption]
    assert any("could not be read" in w.value for w in at.warning)


def compat(name: str) -> str:
    return str(COMPAT / "4.3.0" / name)


def test_typed_keys_match_by_value(spark) -> None:  # type: ignore[no-untyped-def]
    """A double field holding 2.0 answers '2'; a date field answers an ISO date; odd characters are just characters."""
    r = why_missing(
        compat("composite_keys"), KeyQuestion(("2", "2.0", "x"), key_field="_groupingexpression_3")
    )  # score: (value / 2) as double
    v = {d.key: d for d in r.results}
    assert v["2"].verdict == v["2.0"].verdict != wm.NEVER_IN_STATE
    assert v["2"].matched_as == "as a number (double)" and v["x"].matched_as == "as text"
    assert v["x"].verdict == wm.NEVER_IN_STATE
    r = why_missing(compat("composite_keys"), KeyQuestion(("2026-01-01",), key_field="_groupingexpression"))  # day
    assert r.results[0].verdict != wm.NEVER_IN_STATE and r.results[0].matched_as == "as a date"
    r = why_missing(
        compat("composite_keys"), KeyQuestion(("o'brien", 'say "hi"', "back\\slash", "東京", "zoë"), key_field="user_id")
    )
    assert all(d.verdict != wm.NEVER_IN_STATE for d in r.results), [(d.key, d.verdict) for d in r.results]


def test_semantics_of_modes_timeouts_and_keys_without_event_time(spark) -> None:  # type: ignore[no-untyped-def]
    (d,) = why_missing(compat("complete_no_watermark"), KeyQuestion(("user-1",))).results
    assert d.verdict == wm.IN_STATE and "no watermark" in d.explanation and "ahead of the watermark" not in d.explanation
    (d,) = why_missing(compat("complete_mode"), KeyQuestion(("user-1",))).results
    assert d.verdict == wm.IN_STATE and "complete mode" in d.explanation
    (d,) = why_missing(compat("processing_time_timeout"), KeyQuestion(("user-1",))).results
    assert d.verdict == wm.IN_STATE and "processing time" in d.explanation and "watermark passes" not in d.explanation
    (d,) = why_missing(compat("dedup_no_event_time"), KeyQuestion(("ev-1",))).results
    assert d.verdict == wm.DROPPING_DUPLICATES and "never removed" in d.explanation and "no event-time column" in d.explanation
    report = why_missing(compat("join_hdfs"), KeyQuestion(tuple([f"ord-{n}" for n in range(60, 100)])))
    waiting = [d for d in report.results if d.verdict in (wm.WAITING_OTHER_SIDE, wm.CONDITION_NOT_MET)]
    assert waiting and all("past their event time" in d.explanation for d in waiting if "evicted once" in d.explanation)
    assert not any("-" in part.split("past")[0][-12:] for d in waiting for part in d.explanation.split("watermark was ")[1:])


def test_inferred_operator_is_said_on_the_page(spark) -> None:  # type: ignore[no-untyped-def]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["checkpoint"] = str(COMPAT / "3.5.9" / "left_outer_join")
    at.run()
    at.switch_page("views/why_missing.py").run()
    assert not at.exception
    assert at.selectbox(key="wm_op").format_func(0) == "0: symmetricHashJoin (inferred)"
    assert any("inferred from store names" in c.value for c in at.caption)
    at.selectbox(key="wm_join_type").set_value("left_outer").run()
    at.text_area(key="wm_keys").set_value("ord-13").run()
    at.button(key="wm_run").click().run()
    # no input to follow (a copy without its files): the outcome as the join's state tells it, and said so
    assert "#### `ord-13` &nbsp; :violet-badge[Written unmatched (null-padded)] :gray-badge[cause unknown · operator 0]" in [
        m.value for m in at.markdown
    ]
    assert "Operator 0's verdict: :violet-badge[Emitted unmatched (null-padded) · left side]" in [c.value for c in at.caption]


LOADED = [
    "join_hdfs",
    "join_rocksdb",
    "windowed_agg",
    "dedup",
    "session_window",
    "apply_in_pandas_with_state",
    "transform_with_state",
    "compat/4.3.0/full_outer_join",
    "compat/3.5.9/join_state_format_1",
    "compat/4.3.0/composite_keys",
    "compat/4.3.0/rocksdb_no_changelog",
]


@pytest.mark.parametrize("name", LOADED)
def test_loaded_state_answers_like_spark(name: str, spark) -> None:  # type: ignore[no-untyped-def]
    """The app's loaded state (Arrow in memory) gives the verdicts of reading through Spark per key."""
    from statelens.analysis.core.model import default_operator, lookup_sources
    from statelens.analysis.verdicts import diagnose
    from statelens.spark_io.gather.diagnosis import key_fields_of
    from statelens.spark_io.readers.access import load_state
    from statelens.spark_io.readers.spark_state import SparkState

    info = read_checkpoint(str(SAMPLES / name))
    op = default_operator(info)
    field = key_fields_of(info, op.operator_id)[0]
    batch = info.committed_batches[-1].batch_id
    state = spark.read.format("statestore")
    for k, v in lookup_sources(op)[0][1].options().items():  # the store the diagnosis reads first
        state = state.option(k, v)
    values = [r[0] for r in state.load(info.path).selectExpr(f"CAST(key.`{field}` AS STRING)").distinct().limit(25).collect()]
    keys = [*values, "ord-0", "user-3", "nope"]
    loaded = load_state(info, op.operator_id, batch)
    q = KeyQuestion(
        tuple(keys), operator=op.operator_id, batch=batch, key_field=field, join_type="full_outer" if "outer" in name else None
    )
    a = diagnose.why_missing(loaded, info, q)
    b = diagnose.why_missing(SparkState(info), info, q)
    assert [(r.key, r.verdict, r.side, r.evicted_at_batch) for r in a.results] == [
        (r.key, r.verdict, r.side, r.evicted_at_batch) for r in b.results
    ]
    assert [r.explanation for r in a.results] == [r.explanation for r in b.results]


def test_eviction_delay_in_spark_equals_the_python_reference(spark) -> None:  # type: ignore[no-untyped-def]
    from statelens.analysis.core.model import StateSource
    from statelens.spark_io.readers.spark_state import SparkState

    for name in ("join_hdfs", "compat/3.5.9/join_hdfs", "compat/4.3.0/full_outer_join"):
        info = read_checkpoint(str(SAMPLES / name))
        marks = {b.batch_id: b.watermark_ms for b in info.batches}
        first, last = info.committed_batches[0].batch_id, info.committed_batches[-1].batch_id
        for side in ("left", "right"):
            src = StateSource(0, store_name=f"{side}-keyWithIndexToValue")
            feed = (
                spark.read.format("statestore")
                .option("storeName", src.store_name)
                .option("readChangeFeed", "true")
                .option("changeStartBatchId", first)
                .option("changeEndBatchId", last)
                .load(info.path)
                .collect()
            )
            reference = wm.eviction_horizon([r.asDict(recursive=True) for r in feed], marks)
            assert SparkState(info).eviction_horizon(src, first, last, marks) == reference, (name, side)
            assert reference is not None


def test_a_checkpoint_without_change_feed_says_so(capsys, spark) -> None:  # type: ignore[no-untyped-def]
    cp = compat("rocksdb_no_changelog")
    assert cli.main(["sql", cp, "SELECT count(*) FROM op0_left_keyWithIndexToValue_changes"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no change feed" in err and "changelogCheckpointing" in err
    assert cli.main(["growth", cp, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["method"].values()) == {"state per batch"}


def test_growth_without_a_change_feed_counts_what_each_batch_changed_the_first_included(capsys) -> None:  # type: ignore[no-untyped-def]
    """Inserts and deletes of a store without a change feed are the differences between successive
    states: at the query's first batch everything in its state (it read 0 before); the truth is
    Spark's reader of each batch's state (the sample's golden file, checked against live Spark in
    test_native_equality.py)."""
    cp = compat("rocksdb_no_changelog")
    assert cli.main(["growth", cp, "--store", "left-keyToNumValues", "--json"]) == 0
    series = json.loads(capsys.readouterr().out)["series"]
    assert [s["batch_id"] for s in series] == [b.batch_id for b in read_checkpoint(cp).committed_batches]
    spark_rows = golden.state_at_batches("compat/4.3.0/rocksdb_no_changelog")["operator 0, store left-keyToNumValues"]
    before: set[str] = set()
    for s in series:
        keys = {json.dumps(r["key"], sort_keys=True) for r in spark_rows.get(s["batch_id"], [])}
        assert (s["rows"], s["inserts"], s["deletes"]) == (len(keys), len(keys - before), len(before - keys)), s
        before = keys


def test_damaged_schema_file_leaves_the_operator_unknown_and_says_why(tmp_path: Path) -> None:
    import shutil

    cp = tmp_path / "agg"
    shutil.copytree(COMPAT / "3.5.9" / "windowed_agg", cp)
    assert read_checkpoint(str(cp)).operators[0].operator_name == "stateStoreSave"  # inferred from the schema file
    (cp / "state/0/0/_metadata/schema").write_bytes(b"\x00\x01garbage")
    for crc in (cp / "state/0/0/_metadata").glob(".*.crc"):
        crc.unlink()
    (op,) = read_checkpoint(str(cp)).operators
    assert op.operator_name == "unknown" and "damaged" in (op.inferred_from or "")
