"""The engine choice: native and Spark give the same answers, the native reader needs no JVM,
says which engine answered, and hands to Spark what it does not read (``--engine auto``).

Row-level equality of the two readers is ``test_native_equality.py``; here the answers built on
them (verdicts, skew, growth, SQL) are compared, on real checkpoints."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import golden
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import no_java_env, run_cli

from statelens.analysis.core.errors import NativeUnsupported
from statelens.analysis.core.model import StateSource, lookup_sources, sources_of
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.verdicts import diagnose
from statelens.spark_io.gather import checkup
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers import engine
from statelens.spark_io.readers.native.access import NativeState, simple_type
from statelens.spark_io.readers.native.hashing import partition_of
from statelens.spark_io.readers.native.reader import NativeReader
from statelens.spark_io.readers.spark_state import SparkState
from support import COMPAT_NAMES, SAMPLE_NAMES, sample

ALL = SAMPLE_NAMES + [f"compat/{n}" for n in COMPAT_NAMES]


@pytest.fixture
def engine_choice():  # type: ignore[no-untyped-def]
    before = engine.current()
    yield engine.configure
    engine.configure(before)


@pytest.mark.parametrize("name", ALL)
def test_spark_hash_places_every_single_field_key_in_its_partition(name: str) -> None:
    info = read_checkpoint(sample(name))
    reader = NativeReader(info) if info.operators else None
    checked = 0
    for op in info.operators:
        for src in sources_of(op):
            fields = [f for f in reader.key_fields(src) if f["name"] != "index"] if reader else []
            if len(fields) != 1 or isinstance(fields[0]["type"], dict):
                continue
            t = reader.state(src, info.committed_batches[-1].batch_id) if reader else None
            n = reader.partitions(src) if reader else 0
            for row in t.to_pylist() if t is not None else []:
                value = row["key"][fields[0]["name"]]
                assert partition_of(value, simple_type(fields[0]["type"]), n) == row["partition_id"], (src, value)
                checked += 1
    if not checked:
        pytest.skip("no store keyed by one plain field")


def _keys_to_ask(info: Any, access: NativeState) -> tuple[int, str, list[str]]:
    """An operator, its key field and keys of every fate: in state now, seen only in the history, never seen."""
    op = diagnose.default_operator(info) if info.operators else None
    assert op is not None
    _, src = lookup_sources(op)[0]
    field = diagnose.ordered_key_fields(access.key_fields(src, info.committed_batches[-1].batch_id))[0]
    now = {str(r["key"][field]) for r in access._table(src, info.committed_batches[-1].batch_id).to_pylist()}
    feed = access._feed_table(src) if access.has_change_feed(op.operator_id) else None
    past = {str(r["key"][field]) for r in feed.to_pylist()} - now if feed is not None else set()
    return op.operator_id, field, sorted(now)[:2] + sorted(past)[:2] + ["never-seen-key-42"]


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_why_missing_verdicts_are_the_same_on_both_engines(name: str, spark: Any) -> None:
    info = read_checkpoint(sample(name))
    if not info.operators:
        pytest.skip("no state")
    native = NativeState(info)
    op_id, field, keys = _keys_to_ask(info, native)
    a = diagnose.why_missing(native, info, KeyQuestion(tuple(keys), operator=op_id, batch=None, key_field=field))
    b = diagnose.why_missing(SparkState(info), info, KeyQuestion(tuple(keys), operator=op_id, batch=None, key_field=field))
    assert a.engine == "native" and b.engine == "spark"
    da, db = a.to_dict(), b.to_dict()
    for d in (da, db):
        d.pop("engine"), d.pop("engine_notes")
    assert da == db


# every bundled sample, and the compatibility samples whose state takes another path (rows of every
# sample are compared in test_native_equality.py; the figures built on them here)
HEALTH_SAMPLES = SAMPLE_NAMES + [
    f"compat/{n}"
    for n in COMPAT_NAMES
    if n.split("/")[1]
    in (
        "rocksdb_no_changelog",
        "checkpoint_v2",
        "purged",
        "tws_ttl",
        "join_state_format_1",
        "agg_state_format_1",
        "composite_keys",
        "repartitioned",
    )
    or n.startswith("3.4.4/")
]


@pytest.mark.parametrize("name", HEALTH_SAMPLES)
def test_skew_and_growth_are_the_same_on_both_engines(name: str, spark: Any, engine_choice: Any) -> None:
    info = read_checkpoint(sample(name))
    if not info.operators:
        pytest.skip("no state")
    answers = {}
    for which in ("native", "spark"):
        engine_choice(which)
        g = checkup.growth(info.path, info=info)
        skews = [checkup.skew(info.path, op.operator_id, info=info) for op in info.operators]
        assert g.engine == which and all(s.engine == which for s in skews)
        answers[which] = (
            {k: v for k, v in g.to_dict().items() if not k.startswith("engine")},
            [{k: v for k, v in s.to_dict().items() if not k.startswith("engine")} for s in skews],
        )
    assert answers["native"] == answers["spark"]


def test_the_cli_answers_without_java_and_says_the_engine() -> None:
    env = no_java_env()
    r = run_cli("why-missing", sample("join_hdfs"), "ord-153", "--json", env=env)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["engine"] == "native" and report["results"][0]["verdict"] == "waiting_for_other_side"
    r = run_cli("sql", sample("windowed_agg"), "SELECT count(*) AS n FROM op0", "--json", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["engine"] == "native" and out["engines"] == {"op0": "native"}
    assert out["rows"] == [[read_native_rows("windowed_agg")]]
    for command in ("skew", "growth"):
        r = run_cli(command, sample("dedup"), "--json", env=env)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["engine"] == "native"
    r = run_cli("why-missing", sample("join_hdfs"), "ord-153", "--engine", "spark", env=env)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "Java" in r.stderr


def read_native_rows(name: str) -> int:
    info = read_checkpoint(sample(name))
    return NativeReader(info).state(StateSource(0, store_name="default"), info.committed_batches[-1].batch_id).num_rows


@pytest.mark.jvm  # a Spark process
def test_engine_spark_is_spark(engine_choice: Any) -> None:
    r = run_cli("skew", sample("dedup"), "--json", "--engine", "spark")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["engine"] == "spark"


@pytest.fixture(scope="module")
def array_state_checkpoint(tmp_path_factory: Any, spark: Any) -> Path:
    """A real aggregation whose state holds an array (the buffer of max over arrays), which the native
    reader does not decode. (collect_list would not do: its buffer is serialized binary, read as is.)"""
    from pyspark.sql import functions as F

    root = tmp_path_factory.mktemp("array_state")
    src, cp = root / "in", root / "checkpoint"
    src.mkdir()
    (src / "0.json").write_text("\n".join(json.dumps({"k": f"k{i % 3}", "v": i}) for i in range(9)))
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        q = (
            spark.readStream.schema("k STRING, v LONG")
            .json(str(src))
            .groupBy("k")
            .agg(F.max(F.array("v", F.col("v") * 2)).alias("top"))
            .writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(cp))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    return cp


def test_auto_hands_what_the_native_reader_cannot_read_to_spark(array_state_checkpoint: Path, engine_choice: Any) -> None:
    info = read_checkpoint(str(array_state_checkpoint))
    source = StateSource(0, store_name="default")
    with pytest.raises(NativeUnsupported, match="array"):
        NativeReader(info).state(source, 0)
    engine_choice("auto")
    table, _ = engine.read_state(info.path, source, info=info)
    assert engine.engine_of(table) == "spark" and "array" in (engine.fallback_of(table) or "")
    tops = sorted(next(iter(r["value"].values())) for r in table.to_pylist())
    assert tops == [[6, 12], [7, 14], [8, 16]]  # max over k0: 0, 3, 6; k1: 1, 4, 7; k2: 2, 5, 8
    r = run_cli("skew", str(array_state_checkpoint), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["engine"] == "spark" and "array" in out["engine_note"]
    r = run_cli("skew", str(array_state_checkpoint), "--engine", "native")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "array" in r.stderr


@given(st.lists(st.binary(max_size=6), max_size=200))
@settings(max_examples=300, deadline=None)
def test_key_codes_number_equal_keys_alike(keys: list[bytes]) -> None:
    """The compiled hash table behind ``latest`` and ``fold_merges`` (a state's last record per
    key) gives equal byte strings one code and unequal ones different codes, numbered in order
    of first appearance, whatever their bytes (empty keys, shared prefixes, hash collisions)."""
    import numpy as np

    from statelens.spark_io.readers.native.records import Records, key_codes

    sizes = np.array([len(k) for k in keys], np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if keys else np.zeros(0, np.int64)
    buf = np.frombuffer(b"".join(keys) or b"\0", np.uint8)
    z = np.zeros(len(keys), np.int64)
    codes, n = key_codes(Records(buf, np.zeros(len(keys), np.int8), offsets, sizes, z, z, z))
    first: dict[bytes, int] = {}
    assert codes.tolist() == [first.setdefault(k, len(first)) for k in keys]
    assert n == len(first)


@given(st.lists(st.text(alphabet="ab-é7", max_size=8), max_size=60), st.lists(st.text(alphabet="ab-é7", max_size=3), max_size=3))
@settings(max_examples=300, deadline=None)
def test_the_text_cut_keeps_exactly_the_keys_that_hold_a_text(keys: list[str], needles: list[str]) -> None:
    """``containing`` (the compiled search a lookup of text keys starts with) keeps exactly the
    records whose key bytes hold one of the texts, in order, whatever the texts (empty, repeated,
    longer than the key, multi-byte UTF-8)."""
    import numpy as np

    from statelens.spark_io.readers.native.records import Records, containing

    raw = [k.encode() for k in keys]
    sizes = np.array([len(k) for k in raw], np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if raw else np.zeros(0, np.int64)
    buf = np.frombuffer(b"".join(raw) or b"\0", np.uint8)
    z = np.arange(len(raw), dtype=np.int64)
    kept = containing(Records(buf, np.zeros(len(raw), np.int8), offsets, sizes, z, z, z), tuple(needles))
    expected = [i for i, k in enumerate(keys) if not needles or any(n in k for n in needles)]
    assert kept.version.tolist() == expected


def test_a_version_is_made_from_every_changelog_when_they_are_kept_or_small() -> None:
    """The native reader makes a RocksDB version from the changelogs since version 1 where they are
    all kept, or their files are at most twice the snapshot's SST files; from a snapshot it keeps,
    first. Both ways read the same rows as Spark (``test_native_equality``)."""
    from statelens.spark_io.readers.native.stores import KeptFiles, PartitionFiles, RocksPartition
    from statelens.spark_io.storage import LocalStorage

    part = PartitionFiles.of(LocalStorage(sample("join_rocksdb")), "state/0/0/left-keyWithIndexToValue")
    version = max(part.files["zip"])
    rp = RocksPartition(part, {}, False, KeptFiles())
    logs = sum(Path(part.local_file(part.files["changelog"][v][""])).stat().st_size for v in range(1, version + 1))
    ssts = rp._sst_bytes(part.files["zip"][version][""])
    assert (rp._replay(version) is not None) == (logs <= 2 * ssts)
    rp.changes(1, version)  # every changelog read: kept
    assert [v for v, _ in rp._replay(version) or []] == list(range(1, version + 1))
    rp.kept.snapshot(part, part.files["zip"][version][""], version, True)
    assert rp._replay(version) is None  # the kept snapshot is cheaper still


@pytest.mark.parametrize("name", ALL)
def test_the_state_made_while_walking_a_feed_from_the_first_batch_is_the_state_read(name: str) -> None:
    """A growth walks each store's change feed; from the first batch, the records it walks make up the
    last batch's state too, decoded as they are walked (``NativeReader.made_state``) for the eviction
    figures. Every row (in another order: compared as a multiset) is the state a read gives, on every
    store of every sample; the eviction figures are the same either way."""
    from statelens.spark_io.readers.native.reader import StateRead
    from statelens.spark_io.readers.native.stats import NativeStats
    from statelens.spark_io.readers.state_reader import has_change_feed

    info = read_checkpoint(sample(name))
    if not info.operators or info.committed_batches[0].batch_id != 0:
        pytest.skip("no state, or its first batches are gone")
    last = info.committed_batches[-1].batch_id
    made = 0
    for op in info.operators:
        for src in sources_of(op):
            if not (src.has_change_feed and has_change_feed(info, op.operator_id)) or len(info.feed_segments(0, last)) != 1:
                continue
            reader = NativeReader(info)
            if reader.change_key_ids(src, 0, last, state=StateRead()) is None:
                assert reader.made_state(src, last, StateRead()) is None  # a view not of one row per record
                continue
            t = reader.made_state(src, last, StateRead())
            assert t is not None and reader.made_state(src, last, StateRead()) is None  # given once
            assert Counter(map(repr, t.to_pylist())) == Counter(map(repr, reader.state(src, last).to_pylist())), src
            made += 1
            walked = NativeStats(info)
            walked.expect_eviction(src, last)
            walked.change_ids(src, 0, last)
            assert walked.eviction(src, last, info.batches[-1].watermark_ms) == NativeStats(info).eviction(
                src, last, info.batches[-1].watermark_ms
            )
    if not made:
        pytest.skip("no store with a change feed from the first batch")


def test_the_app_reads_the_rest_of_a_store_between_questions_and_answers_alike() -> None:
    """After a key's answer (its partition read), the other partitions' RocksDB snapshots are read
    in the background; the next keys are answered from them exactly as from a fresh reader."""
    from statelens.spark_io.readers.access import between_questions

    info = read_checkpoint(sample("join_rocksdb"))
    warmed = NativeState(info)
    op_id, field, keys = _keys_to_ask(info, NativeState(info))
    first = diagnose.why_missing(warmed, info, KeyQuestion(tuple(keys[:1]), operator=op_id, batch=None, key_field=field))
    cache = warmed.reader._kept
    cache.clear()  # as if the answer had read its key's partition only (here it read more)
    thread = warmed.warm_in_background()
    assert thread is not None
    thread.join()
    asked = {p.parent for p in Path(info.path, "state", str(op_id)).glob("*/*-keyWithIndexToValue/*.zip")}
    assert asked <= {Path(k[0]).parent for k in cache._kept}  # the stores asked about, every partition
    assert warmed.warm_in_background() is None  # once per store and batch
    between_questions(warmed)  # nothing new to read: a no-op
    later = diagnose.why_missing(warmed, info, KeyQuestion(tuple(keys), operator=op_id, batch=None, key_field=field))
    fresh = diagnose.why_missing(NativeState(info), info, KeyQuestion(tuple(keys), operator=op_id, batch=None, key_field=field))
    assert later.to_dict() == fresh.to_dict()
    assert first.results[0].to_dict() == fresh.results[0].to_dict()


def test_the_kept_files_keep_to_their_budget_and_read_the_same(tmp_path: Path) -> None:
    from statelens.spark_io.readers.native.stores import KeptFiles, PartitionFiles
    from statelens.spark_io.storage import LocalStorage

    root = LocalStorage(sample("join_rocksdb"))
    parts = [PartitionFiles.of(root, f"state/0/{p}/left-keyWithIndexToValue") for p in range(2)]
    big, none = KeptFiles(), KeptFiles(budget=1)
    sizes = []
    for part in parts:
        for version in sorted(part.files["zip"]):
            name = part.files["zip"][version][""]
            a, b = big.snapshot(part, name, version, True), none.snapshot(part, name, version, True)
            assert a.buf.tobytes() == b.buf.tobytes() and len(a) == len(b) > 0
            assert big.snapshot(part, name, version, False) is a  # a read with values serves a keys-only one
            sizes.append(KeptFiles._nbytes(a))
        for version in sorted(part.files["changelog"]):
            name = part.files["changelog"][version][""]
            a, b = big.changelog(part, name, version), none.changelog(part, name, version)
            assert a.buf.tobytes() == b.buf.tobytes() and a.koff.tolist() == b.koff.tolist()
            assert big.changelog(part, name, version) is a
            sizes.append(KeptFiles._nbytes(a))
    assert len(none._kept) == 0  # every file is larger than a one-byte budget: none is kept
    assert len(big._kept) == len(sizes)
    some = KeptFiles(budget=max(sizes))  # room for the largest file: the least recently read are dropped
    for part in parts:
        for version in sorted(part.files["zip"]):
            some.snapshot(part, part.files["zip"][version][""], version, True)
    kept = list(some._kept.values())
    assert 1 <= len(kept) < len(big._kept) and sum(map(KeptFiles._nbytes, kept)) <= max(sizes)
    last = max(parts[-1].files["zip"])
    assert kept[-1] is some.snapshot(parts[-1], parts[-1].files["zip"][last][""], last, True)  # the newest read is kept


TWS_SAMPLES = [
    n for n in ALL if any(o.operator_name.startswith("transformWithState") for o in read_checkpoint(sample(n)).operators)
]


@pytest.mark.parametrize("name", TWS_SAMPLES)
def test_growth_of_every_state_variable_counts_the_rows_spark_reads(name: str, spark: Any, engine_choice: Any) -> None:
    """Each transformWithState variable's growth series (value, list elements one by one, map
    entries, TTL where present) equals the rows Spark's ``statestore`` reads with ``stateVarName``
    at each of its batches, on both engines. Spark's rows are its reads kept in the sample's golden
    file (``test_native_equality.py`` checks each golden file is of the sample as it is, and against
    live reads); the Spark engine's series is read through Spark live here."""
    spark_rows = golden.rows_per_batch(name)  # source -> batch -> rows Spark read
    info = read_checkpoint(sample(name))
    for which in ("native", "spark"):
        engine_choice(which)
        report = checkup.growth(info.path, info=info)
        assert report.engine == which
        variables = {s.store_name for s in report.stores}
        assert variables == {v for o in info.operators for v in o.state_variables if not v.startswith("$")}
        for g in report.stores:
            batches = spark_rows[StateSource(g.operator_id, state_var=g.store_name).describe()]
            assert g.rows == {b: batches[b] for b in g.rows}, f"{which}: {g.store_name}"
