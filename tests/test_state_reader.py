"""Spark's State Data Source through spark_io, on every sample, with counts derived from the inputs."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from statelens.analysis.core.errors import BatchOutOfRange, NoState, StateReadError, UnknownOperator, UnknownStore
from statelens.analysis.core.model import StateSource, sources_of
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers.state_reader import read_changes, read_state, read_state_metadata
from support import SAMPLE_NAMES, ms, sample, scenario

pytestmark = pytest.mark.usefixtures("spark")


def replay(changes: pa.Table, upto: int) -> dict[str, dict]:
    """Apply a change feed up to a batch: the state it implies (key -> last value)."""
    state: dict[str, dict] = {}
    rows = sorted(changes.to_pylist(), key=lambda r: r["batch_id"])  # in-batch order is kept by the sort
    for r in rows:
        if r["batch_id"] > upto:
            break
        k = repr(sorted(r["key"].items()))
        if r["change_type"] == "delete":
            state.pop(k, None)
        else:
            state[k] = r.get("value")
    return state


def test_state_metadata_matches_the_log_reader_for_every_sample() -> None:
    for name in SAMPLE_NAMES:
        info = read_checkpoint(sample(name))
        md = read_state_metadata(sample(name)).to_pylist()
        from_files = sorted((o.operator_id, s.store_name, s.num_partitions) for o in info.operators for s in o.stores)
        from_spark = sorted((r["operatorId"], r["stateStoreName"], r["numPartitions"]) for r in md)
        assert from_spark == from_files, name
        assert {r["maxBatchId"] for r in md} == {info.last_committed}, name


def test_every_view_of_every_sample_reads() -> None:
    for name in SAMPLE_NAMES:
        info = read_checkpoint(sample(name))
        for op in info.operators:
            for src in sources_of(op):
                table, batch = read_state(sample(name), src, info=info)
                assert batch == info.last_committed
                assert "partition_id" in table.column_names, (name, src)


def test_unbounded_agg_holds_every_key_ever_seen() -> None:
    s = scenario("unbounded_agg")
    ids = {r["event_id"] for b in s.batches for r in b["events"]}
    table, batch = read_state(sample("unbounded_agg"), StateSource(0))
    assert batch == 11 and table.num_rows == len(ids) == 300
    # an earlier batch holds only the keys seen so far
    early, _ = read_state(sample("unbounded_agg"), StateSource(0), batch_id=4)
    assert early.num_rows == len({r["event_id"] for b in s.batches[:5] for r in b["events"]})


def test_windowed_agg_keeps_windows_the_watermark_has_not_closed() -> None:
    s = scenario("windowed_agg")
    info = read_checkpoint(sample("windowed_agg"))
    wm = info.batches[-1].watermark_ms
    groups: Counter[tuple[int, str]] = Counter()
    for b in s.batches:
        for r in b["events"]:
            t = ms(r["event_time"])
            groups[(t - t % 300_000, r["user_id"])] += 1
    open_groups = {g: n for g, n in groups.items() if g[0] + 300_000 > wm}
    table, _ = read_state(sample("windowed_agg"), StateSource(0))
    got = {(r["key"]["window"]["start"].timestamp() * 1000, r["key"]["user_id"]): r["value"]["count"] for r in table.to_pylist()}
    assert {(int(k[0]), k[1]): v for k, v in got.items()} == open_groups


def test_dedup_keeps_pairs_newer_than_the_watermark() -> None:
    s = scenario("dedup")
    wm = read_checkpoint(sample("dedup")).batches[-1].watermark_ms
    pairs = {(r["event_id"], ms(r["event_time"])) for b in s.batches for r in b["events"]}
    table, _ = read_state(sample("dedup"), StateSource(0))
    got = {(r["key"]["event_id"], int(r["key"]["event_time"].timestamp() * 1000)) for r in table.to_pylist()}
    assert got == {p for p in pairs if p[1] > wm}
    stuck, _ = read_state(sample("stuck_watermark_dedup"), StateSource(0))
    assert stuck.num_rows == len({r["event_id"] for b in scenario("stuck_watermark_dedup").batches for r in b["events"]})


def test_hot_key_join_left_state_counts() -> None:
    s = scenario("hot_key_join")
    left_rows = [r for b in s.batches for r in b["left"]]
    table, _ = read_state(sample("hot_key_join"), StateSource(0, store_name="left-keyWithIndexToValue"))
    per_key = Counter(r["key"]["field0"] for r in table.to_pylist())
    assert table.num_rows == len(left_rows) == 1548
    assert per_key["hot"] == sum(r["k"] == "hot" for r in left_rows) == 1500
    nums, _ = read_state(sample("hot_key_join"), StateSource(0, store_name="left-keyToNumValues"))
    assert {r["key"]["field0"]: r["value"]["value"] for r in nums.to_pylist()} == dict(per_key)


def test_join_state_is_the_same_on_both_providers_and_consistent_with_output() -> None:
    def snapshot(name: str, store: str) -> list:
        t, _ = read_state(sample(name), StateSource(0, store_name=store))
        return sorted((r["key"]["field0"], r["key"]["index"], r["value"]["matched"]) for r in t.to_pylist())

    for store in ("left-keyWithIndexToValue", "right-keyWithIndexToValue"):
        assert snapshot("join_hdfs", store) == snapshot("join_rocksdb", store)
    left = snapshot("join_hdfs", "left-keyWithIndexToValue")
    import json

    from support import SAMPLES

    emitted = {r["order_id"] for r in json.loads((SAMPLES / "outputs" / "join_hdfs.json").read_text())}
    # an order still in state is marked matched exactly when the query emitted it
    assert {k for k, _, m in left if m} == {k for k, _, _ in left} & emitted
    # cancelled orders were filtered upstream: never in the join state
    assert not any(int(k.split("-")[1]) % 10 == 7 for k, _, _ in left)
    # the duplicated orders (n % 10 == 9) hold two rows: index 0 and 1
    assert {i for k, i, _ in left if int(k.split("-")[1]) % 10 == 9} == {0, 1}


def test_change_feed_replays_to_the_state() -> None:
    for name, src in [
        ("join_hdfs", StateSource(0, store_name="left-keyWithIndexToValue")),
        ("join_rocksdb", StateSource(0, store_name="right-keyWithIndexToValue")),
        ("dedup_within_watermark", StateSource(0)),
        ("session_window", StateSource(0)),
        ("transform_with_state", StateSource(0, state_var="count")),
    ]:
        changes, start, end = read_changes(sample(name), src)
        assert start == 0 and end == read_checkpoint(sample(name)).last_committed
        assert set(changes.column_names) >= {"batch_id", "change_type", "key", "partition_id"}
        state, _ = read_state(sample(name), src)
        assert len(replay(changes, end)) == state.num_rows, name


def test_join_change_feed_shows_evictions() -> None:
    changes, _, _ = read_changes(sample("join_hdfs"), StateSource(0, store_name="left-keyWithIndexToValue"))
    deletes = [r for r in changes.to_pylist() if r["change_type"] == "delete"]
    assert deletes and {r["key"]["field0"] for r in deletes} >= {"ord-0", "ord-1"}


def test_transform_with_state_variables_and_timers() -> None:
    info = read_checkpoint(sample("transform_with_state"))
    views = {s.state_var or ("timers" if s.timers else "") for s in sources_of(info.operators[0])}
    assert views == {"count", "per_kind", "recent", "timers"}
    count, _ = read_state(sample("transform_with_state"), StateSource(0, state_var="count"))
    timers, _ = read_state(sample("transform_with_state"), StateSource(0, timers=True))
    assert "expiration_timestamp_ms" in timers.column_names
    # every user still holding a count has exactly one timer registered
    assert sorted(r["key"]["user_id"] for r in count.to_pylist()) == sorted(r["key"]["user_id"] for r in timers.to_pylist())


def test_bad_operator_store_and_batch_get_clear_errors(copy_sample) -> None:  # type: ignore[no-untyped-def]
    path = sample("join_hdfs")
    with pytest.raises(UnknownOperator, match=r"Operator 7 is not in this checkpoint.*0 \(symmetricHashJoin\)"):
        read_state(path, StateSource(7))
    with pytest.raises(UnknownStore, match="has no store 'left-nope'"):
        read_state(path, StateSource(0, store_name="left-nope"))
    with pytest.raises(UnknownStore, match="not a stream-stream join"):
        read_state(sample("dedup"), StateSource(0, join_side="left"))
    with pytest.raises(BatchOutOfRange, match="0–16"):
        read_state(path, StateSource(0, join_side="left"), batch_id=99)
    import shutil

    cp = copy_sample("unbounded_agg")
    shutil.rmtree(cp / "state")
    with pytest.raises(NoState):
        read_state(str(cp), StateSource(0))


def test_missing_state_files_become_a_state_read_error(copy_sample) -> None:  # type: ignore[no-untyped-def]
    cp = copy_sample("unbounded_agg")
    for f in (cp / "state" / "0" / "1").glob("*.delta"):
        f.unlink()
    with pytest.raises(StateReadError, match="operator 0, store default at batch 11") as e:
        read_state(str(cp), StateSource(0))
    assert "state/0/1/" in e.value.message and ".delta" in e.value.message  # names the missing file
    assert len(read_state(sample("unbounded_agg"), StateSource(0))[0]) == 300  # other checkpoints still read


@pytest.mark.parametrize(
    "name,rel,damage,source,cause,batch_ok",
    [
        ("unbounded_agg", "state/0/1/12.delta", "truncate", StateSource(0), "EOFException", 10),
        (
            "join_rocksdb",
            "state/0/2/left-keyWithIndexToValue/17.changelog",
            "garbage",
            StateSource(0, store_name="left-keyWithIndexToValue"),
            "Stream is corrupted",
            14,
        ),
    ],
)
def test_damaged_state_files_are_named(copy_sample, name, rel, damage, source, cause, batch_ok) -> None:  # type: ignore[no-untyped-def]
    cp = copy_sample(name)
    target = cp / rel
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"garbage" * 20)
    (target.parent / f".{target.name}.crc").unlink()
    with pytest.raises(StateReadError) as e:
        read_state(str(cp), source)
    message = e.value.message
    assert cause in message and target.name in message and "needs these state files" in message
    table, batch = read_state(str(cp), source, batch_id=batch_ok)  # an earlier batch still reads
    assert batch == batch_ok and table.num_rows > 0


def test_a_read_bigger_than_the_driver_takes_goes_through_parquet(monkeypatch: pytest.MonkeyPatch) -> None:
    """A load estimated past the driver's limit is written to Parquet by the executors and read from
    there (nothing collected through the driver): the same rows and types as a direct read. The
    limit is made tiny here; the real one is spark.driver.maxResultSize and a quarter of the heap."""
    from statelens.spark_io.readers import state_reader

    info = read_checkpoint(sample("windowed_agg"))
    src = StateSource(0)
    direct, _ = read_state(info.path, src, info=info)
    collected: list[str] = []
    monkeypatch.setattr(state_reader, "driver_limit", lambda: (1, "a 1-byte test limit"))
    monkeypatch.setattr(state_reader, "to_arrow", lambda df, what: collected.append(what))  # must not be called
    spilled, _ = read_state(info.path, src, info=info)
    assert not collected
    assert spilled.schema.equals(direct.schema, check_metadata=False)
    assert Counter(map(str, spilled.to_pylist())) == Counter(map(str, direct.to_pylist()))


def test_a_cluster_read_bigger_than_the_driver_takes_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from statelens.spark_io.readers import state_reader
    from statelens.spark_io.runtime import session

    info = read_checkpoint(sample("windowed_agg"))
    monkeypatch.setattr(state_reader, "driver_limit", lambda: (1, "spark.driver.maxResultSize=1b"))
    monkeypatch.setattr(session, "target", lambda: session.SparkTarget(master="spark://cluster:7077"))
    with pytest.raises(StateReadError, match=r"more than it takes \(spark.driver.maxResultSize=1b\): filter the read"):
        read_state(info.path, StateSource(0), info=info)
