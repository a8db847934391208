"""The diagnoses of ``analysis`` against the in-memory ``ArrowState``: no JVM, no Spark.

Small hand-made states of an inner join and an aggregation give every join verdict, the
``unknown`` verdict when the history read fails, the history rebuilt from the state at each
batch where there is no change feed, and typed keys.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from statelens.analysis.core.errors import StateReadError
from statelens.analysis.core.model import Batch, CheckpointInfo, OperatorInfo, StateSource, StoreInfo
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.core.state_access import ArrowState
from statelens.analysis.verdicts import why_missing as wm
from statelens.analysis.verdicts.diagnose import why_missing

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
LEFT = StateSource(0, store_name="left-keyWithIndexToValue")
RIGHT = StateSource(0, store_name="right-keyWithIndexToValue")
STORES = ["left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues", "right-keyWithIndexToValue"]


def join_info(batches: int = 3) -> CheckpointInfo:
    op = OperatorInfo(0, "symmetricHashJoin", [StoreInfo(s, 2) for s in STORES])
    marks = [0, 60_000, 120_000, 180_000][:batches]
    return CheckpointInfo("/mem/join", "q", [Batch(b, True, marks[b], 1_000 * b) for b in range(batches)], [op], {})


def rows(entries: list[tuple[str, int, bool, int]], batch: int | None = None) -> pa.Table:
    """(key, index, matched, minute) -> a keyWithIndexToValue table (or change feed when batch is set)."""
    data = [
        {
            **({"batch_id": batch, "change_type": "update"} if batch is not None else {}),
            "key": {"field0": k, "index": i},
            "value": {"t": T0 + dt.timedelta(minutes=m), "matched": matched},
            "partition_id": 0,
        }
        for k, i, matched, m in entries
    ]
    return pa.Table.from_pylist(data)


def feed(*parts: pa.Table) -> pa.Table:
    return pa.concat_tables(parts, promote_options="default")


def deletes(keys: list[tuple[str, int]], batch: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"batch_id": batch, "change_type": "delete", "key": {"field0": k, "index": i}, "value": None, "partition_id": 0}
            for k, i in keys
        ],
        schema=rows([("x", 0, False, 0)], 0).schema,
    )


def join_state() -> ArrowState:
    # batch 0: a (left), b (both, unmatched), c (both, matched), gone (left); batch 1: gone evicted
    left0 = [("a", 0, False, 0), ("b", 0, False, 0), ("c", 0, True, 0), ("gone", 0, False, 0)]
    right0 = [("b", 0, False, 20), ("c", 0, True, 1)]
    left_now = [("a", 0, False, 0), ("b", 0, False, 0), ("c", 0, True, 0)]
    state = {}
    for b in range(3):
        state[(LEFT, b)] = rows(left0 if b == 0 else left_now)
        state[(RIGHT, b)] = rows(right0)
    return ArrowState(
        state,
        feeds={
            LEFT: feed(rows(left0, 0), deletes([("gone", 0)], 1)),
            RIGHT: feed(rows(right0, 0)),
        },
    )


def verdicts(report) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {r.key: r.verdict for r in report.results}


def test_join_verdicts_in_memory() -> None:
    report = why_missing(join_state(), join_info(), KeyQuestion(("a", "b", "c", "gone", "nope", "A")))
    assert verdicts(report) == {
        "a": wm.WAITING_OTHER_SIDE,
        "b": wm.CONDITION_NOT_MET,
        "c": wm.MATCHED,
        "gone": wm.EVICTED,
        "nope": wm.NEVER_IN_STATE,
        "A": wm.NEVER_IN_STATE,
    }
    by_key = {r.key: r for r in report.results}
    assert by_key["gone"].evicted_at_batch == 1 and by_key["gone"].was_matched is False
    assert [n["key"] for n in by_key["A"].near_misses] == ["a"]  # letter case differs
    assert report.operator_report.history == (0, 2) and report.operator_report.history_method == "change feed"


def test_outer_join_emits_the_evicted_unmatched_row() -> None:
    report = why_missing(join_state(), join_info(), KeyQuestion(("gone",), join_type="left_outer"))
    (d,) = report.results
    assert d.verdict == wm.EMITTED_UNMATCHED and d.side == "left" and d.evicted_at_batch == 1
    (d,) = why_missing(join_state(), join_info(), KeyQuestion(("gone",), join_type="right_outer")).results
    assert d.verdict == wm.EVICTED


def test_a_failed_history_read_gives_unknown() -> None:
    access = join_state()
    access.feeds[LEFT] = StateReadError("Spark could not read the change feed of operator 0: file damaged")
    report = why_missing(access, join_info(), KeyQuestion(("gone", "c")))
    assert verdicts(report) == {"gone": wm.UNKNOWN, "c": wm.MATCHED}
    assert "file damaged" in report.operator_report.history_error and "file damaged" in report.results[0].explanation


def test_history_from_the_state_at_each_batch_without_a_change_feed() -> None:
    access = join_state()
    access.feeds.clear()
    report = why_missing(access, join_info(), KeyQuestion(("gone", "a")))
    assert report.operator_report.history_method == "state per batch"
    assert verdicts(report) == {"gone": wm.EVICTED, "a": wm.WAITING_OTHER_SIDE}
    assert report.results[0].evicted_at_batch == 1


def test_typed_keys_compare_by_value() -> None:
    op = OperatorInfo(0, "stateStoreSave", [StoreInfo("default", 1)])
    info = CheckpointInfo("/mem/agg", "q", [Batch(0, True, 0, 0)], [op], {})
    src = StateSource(0, store_name="default")
    table = pa.Table.from_pylist(
        [{"key": {"price": 17850.0, "day": dt.date(2026, 1, 1)}, "value": {"count": 3}, "partition_id": 0}]
    )
    access = ArrowState({(src, 0): table})
    (d,) = why_missing(access, info, KeyQuestion(("17850",), key_field="price")).results
    assert d.verdict == wm.IN_STATE and d.matched_as == "as a number (double)"
    (d,) = why_missing(access, info, KeyQuestion(("2026-01-01",), key_field="day")).results
    assert d.verdict == wm.IN_STATE and d.matched_as == "as a date"
