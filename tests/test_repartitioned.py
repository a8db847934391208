"""A checkpoint whose state Spark repartitioned offline (4.2+: ``StreamingCheckpointManager.repartition``,
4 partitions to 3 after batch 5, then run on): each batch is read with its own partition count, the
repartition batch is named, change feeds skip it, and Spark's own reads agree (golden files)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import golden
import pytest
from test_cli import run_cli

from statelens.analysis.core.errors import BatchOutOfRange
from statelens.analysis.core.model import StateSource
from statelens.spark_io.logs.checkpoint import doctor, read_checkpoint
from statelens.spark_io.readers import engine, state_reader
from statelens.spark_io.readers.native.access import simple_type
from statelens.spark_io.readers.native.reader import NativeReader
from support import COMPAT_NAMES

NAMES = [f"compat/{n}" for n in COMPAT_NAMES if n.endswith("/repartitioned")]
STORE = StateSource(0, store_name="default")


@pytest.fixture(params=NAMES)
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _spark_state(name: str) -> dict[int, list[dict[str, Any]]]:
    """Spark's rows of the store at every committed batch, from the golden file."""
    _, reads = golden.read(name)
    (state,) = [r for r in reads if r["read"] == "state"]
    by_batch: dict[int, list[dict[str, Any]]] = {}
    for text in state["rows"]:
        row = json.loads(text)
        by_batch.setdefault(row.pop("_batch"), []).append(row)
    return by_batch


def _rows(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(golden.row_text({"key": r["key"], "value": r["value"]}) for r in rows)


def test_the_repartition_batch_is_named_with_both_counts(name: str) -> None:
    info = read_checkpoint(str(golden.HERE / name))
    (r,) = info.repartitions
    assert (r.before, r.after, r.committed) == (4, 3, True)
    assert [b.shuffle_partitions for b in info.batches] == [4] * r.batch_id + [3] * (len(info.batches) - r.batch_id)
    # the operator metadata still says 4: the stores get the count the last batch runs with
    assert [s.num_partitions for s in info.operators[0].stores] == [3]
    out = run_cli("overview", info.path, "--json")
    assert json.loads(out.stdout)["repartitions"] == [{"batch_id": r.batch_id, "from": 4, "to": 3, "committed": True}]
    assert f"Batch {r.batch_id} repartitioned the state offline from 4 to 3 partitions" in run_cli("overview", info.path).stdout


def test_spark_shows_the_repartition_batch_changes_no_row_only_partitions(name: str) -> None:
    """What the change feed relies on when it skips that batch, in Spark's own reads."""
    info = read_checkpoint(str(golden.HERE / name))
    r = info.repartitions[0].batch_id
    spark = _spark_state(name)
    assert _rows(spark[r - 1]) == _rows(spark[r]) and spark[r]
    assert {x["partition_id"] for x in spark[r - 1]} == {0, 1, 2, 3}
    assert {x["partition_id"] for x in spark[r]} == {0, 1, 2}


def test_every_batch_is_read_with_its_own_partitions_and_keys_hash_to_them(name: str) -> None:
    info = read_checkpoint(str(golden.HERE / name))
    reader = NativeReader(info)
    user = next(f for f in reader.key_fields(STORE) if f["name"] == "user_id")
    assert simple_type(user["type"]) == "string"
    spark = _spark_state(name)
    for b in info.committed_batches:
        n = info.partitions_at(b.batch_id)
        native = reader.state(STORE, b.batch_id).to_pylist()
        assert _rows(native) == _rows(spark[b.batch_id]), b.batch_id
        assert {x["partition_id"] for x in native} <= set(range(n or 0)) and n == (4 if b.batch_id < 6 else 3)


def test_the_change_feed_skips_the_repartition_batch_on_both_engines(name: str, spark: Any) -> None:
    """Spark's own reader fails across that batch (its version has no change log): both engines read around it."""
    info = read_checkpoint(str(golden.HERE / name))
    r = info.repartitions[0].batch_id
    last = info.committed_batches[-1].batch_id
    assert info.feed_segments(0, last) == [(0, r - 1), (r + 1, last)]
    before = engine.current()
    feeds, old = {}, {}
    try:
        for which in ("native", "spark"):
            engine.configure(which)
            table, start, end = engine.read_changes(info.path, STORE, info=info)
            assert (start, end, engine.engine_of(table)) == (0, last, which)
            feeds[which] = sorted(golden.row_text(x) for x in table.to_pylist())
            # partition 3 exists only before the repartition: its rows, none after
            table, _, _ = engine.read_changes(info.path, STORE, info=info, row_filter=state_reader.RowFilter(partitions=(3,)))
            old[which] = sorted(golden.row_text(x) for x in table.to_pylist())
    finally:
        engine.configure(before)
    assert feeds["native"] == feeds["spark"] and feeds["native"]
    assert r not in {json.loads(x)["batch_id"] for x in feeds["native"]}
    assert old["native"] == old["spark"] and old["native"]
    assert {json.loads(x)["batch_id"] for x in old["native"]} <= set(range(r))
    with pytest.raises(BatchOutOfRange, match="offline state repartitions"):
        state_reader.read_changes(info.path, STORE, r, r, info=info)


def test_the_doctor_checks_each_batch_with_its_partitions(name: str) -> None:
    report = doctor(str(golden.HERE / name))
    assert [(p.code, p.severity) for p in report.problems] == [
        ("partitions_left_by_repartition", "info"),
        ("repartitioned", "info"),
    ]
    (r,) = read_checkpoint(str(golden.HERE / name)).repartitions
    assert report.problems[1].details == {"batch": r.batch_id, "from": 4, "to": 3, "seconds": None}
    left = report.problems[0].details
    assert left["partitions"] == [3] and left["files"] == sum(
        1 for f in (golden.HERE / name / "state" / "0" / "3").rglob("*") if f.is_file() and not f.name.startswith(".")
    )
    assert report.loadable_batches == [b.batch_id for b in read_checkpoint(str(golden.HERE / name)).committed_batches]
    assert sorted(c.partition for c in report.restart_cost) == [0, 1, 2]  # partition 3 is no longer loaded
