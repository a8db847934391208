"""State health: skew, growth, findings, configuration advice, chart exports and the report."""

from __future__ import annotations

import contextlib
import io
import json
import os
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from unittest.mock import patch

import golden
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statelens import cli
from statelens.analysis.checkpoint import health
from statelens.analysis.core.model import Batch, StateSource
from statelens.spark_io.gather.checkup import checkup, growth, skew
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers.state_reader import read_state
from support import SAMPLES, sample, scenario

# --------------------------------------------------------------------------- pure functions


def test_replay_counts_inserts_not_updates() -> None:
    changes = [(0, False, 1, 0), (0, False, 1, 0), (0, False, 2, 1), (1, False, 1, 0), (1, True, 2, 1), (2, True, 9, 1)]
    rows, parts, ins, dels = health.replay_changes([0, 1, 2], changes)
    assert rows == {0: 2, 1: 1, 2: 1} and ins == {0: 2, 1: 0, 2: 0} and dels == {0: 0, 1: 1, 2: 0}
    assert parts[0] == {0: 1, 1: 1} and parts[1] == {0: 1, 1: 0}
    rows, *_ = health.replay_changes([5], [(5, False, 3, 0)], base=[(1, 0), (2, 0)])
    assert rows == {5: 3}


def _replay_reference(batches, changes, base=()):  # type: ignore[no-untyped-def]
    """The replay as a plain loop over the feed, change by change (the vectorised one must agree)."""
    present = dict(base)
    per_part: dict[int, int] = {}
    for p in present.values():
        per_part[p] = per_part.get(p, 0) + 1
    rows, parts, ins, dels = {}, {}, {}, {}
    for b in batches:
        i = d = 0
        for cb, is_delete, k, p in changes:
            if cb != b:
                continue
            if is_delete and k in present:
                per_part[present.pop(k)] -= 1
                d += 1
            elif not is_delete and k not in present:
                present[k] = p
                per_part[p] = per_part.get(p, 0) + 1
                i += 1
        rows[b], parts[b], ins[b], dels[b] = len(present), dict(per_part), i, d
    return rows, parts, ins, dels


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.integers(-6, 6)), max_size=60),
    st.lists(st.integers(-6, 6), max_size=8, unique=True),
)
def test_vectorised_replay_equals_the_loop(changes: list[tuple[int, bool, int]], base_keys: list[int]) -> None:
    feed = [(b, d, k, k % 3) for b, d, k in changes]  # a key always lives in one partition
    base = [(k, k % 3) for k in base_keys]
    batches = [0, 1, 2, 4]
    in_batch_order = sorted(feed, key=lambda c: c[0])  # as a change feed lists them (the fast path)
    only_updates = [(b, False, k, p) for b, _, k, p in feed]  # a store that only grows (no delete)
    for apart in (health.SORT_APART, 0):  # many changes: negative and other key ids sorted side by side
        with patch.object(health, "SORT_APART", apart):
            for changes_ in (feed, in_batch_order, only_updates):
                assert health.replay_changes(batches, changes_, base) == _replay_reference(batches, changes_, base)


def test_skew_ratio_is_infinite_with_an_empty_partition() -> None:
    r = health.skew_report(0, "default", 3, 4, {0: 500, 1: 20, 2: 30}, {}, [{"key": "k", "rows": 400}])
    assert r.skew_ratio is None and r.rows_by_partition[3] == 0
    assert r.max_over_median == 500 / 25
    assert [f.code for f in r.findings] == ["state_skew", "hot_key", "shuffle_partitions_fixed"]
    assert "infinite" in r.findings[0].message
    even = health.skew_report(0, "default", 3, 4, {0: 100, 1: 90, 2: 110, 3: 100}, {}, [])
    assert even.skew_ratio == pytest.approx(110 / 90) and even.findings == []
    tiny = health.skew_report(0, "default", 3, 4, {0: 3}, {}, [])
    assert [f.code for f in tiny.findings] == ["too_little_state_for_skew"]


def test_retention_and_configuration_advice() -> None:
    batches = [Batch(b, True, 1000 * b, 1000 * b) for b in range(0, 130)]
    codes = [f.code for f in health.growth_findings([], batches, {})]
    assert "retention_stuck" in codes
    assert "retention_stuck" not in [f.code for f in health.growth_findings([], batches[:100], {})]
    advice = health.config_advice(
        {"spark.sql.streaming.join.stateFormatVersion": "1"}, "HDFSBackedStateStoreProvider", 2_000_000, 200, {"delta"}
    )
    assert {f.code for f in advice} == {"hdfs_large_state", "old_state_format"}
    assert "RocksDBStateStoreProvider" in next(f.setting for f in advice if f.code == "hdfs_large_state")  # type: ignore[operator]
    assert {f.code for f in health.config_advice({}, "RocksDBStateStoreProvider", 500, 200, {"zip", "sst"})} == {
        "rocksdb_without_changelog",
        "shuffle_partitions_too_many",
    }
    assert [f.code for f in health.config_advice({}, "RocksDBStateStoreProvider", 50_000_000, 4, {"changelog"})] == [
        "shuffle_partitions_too_few"
    ]


# --------------------------------------------------------------------------- on the samples (Spark)

pytestmark_spark = pytest.mark.usefixtures("spark")  # the Spark-backed tests below


@pytestmark_spark
def test_hot_key_join_skew_exact() -> None:
    r = skew(sample("hot_key_join"))
    assert (r.operator_id, r.store_name, r.batch_id) == (0, "left-keyWithIndexToValue", 5)
    state, _ = read_state(sample("hot_key_join"), StateSource(0, store_name="left-keyWithIndexToValue"))
    per_part = Counter(state.column("partition_id").to_pylist())
    assert r.rows_by_partition == {p: per_part.get(p, 0) for p in range(8)}
    assert sum(r.rows_by_partition.values()) == sum(len(b["left"]) for b in scenario("hot_key_join").batches) == 1548
    assert r.skew_ratio == pytest.approx(max(per_part.values()) / min(per_part.values()))
    assert r.skew_ratio > health.SKEW_WARNING
    assert r.top_keys[0] == {"key": "hot", "rows": 1500}
    assert [f.code for f in r.findings][:2] == ["state_skew", "hot_key"]
    # bytes per partition are the files on disk under each partition's store folder
    root = SAMPLES / "hot_key_join" / "state" / "0"
    for p in range(8):
        folder = root / str(p) / "left-keyWithIndexToValue"
        on_disk = sum(f.stat().st_size for f in folder.iterdir() if f.is_file() and not f.name.startswith("."))
        assert r.bytes_by_partition[p] == on_disk


@pytestmark_spark
def test_unbounded_agg_growth_exact() -> None:
    g = growth(sample("unbounded_agg"))
    (store,) = g.stores
    s = scenario("unbounded_agg")
    assert store.rows == {b: len({e["event_id"] for bb in s.batches[: b + 1] for e in bb["events"]}) for b in range(12)}
    assert store.rows[11] == 300 and sum(store.deletes.values()) == 0
    codes = [f.code for f in g.findings]
    assert codes == ["unbounded_growth", "watermark_missing", "projection"]
    proj = g.findings[-1].evidence
    assert proj["rows_per_batch"] == pytest.approx(25.0)


@pytestmark_spark
def test_stuck_watermark_dedup_findings() -> None:
    g = growth(sample("stuck_watermark_dedup"))
    assert g.stores[0].rows == {b: 10 * (b + 1) for b in range(12)}
    stuck = next(f for f in g.findings if f.code == "watermark_stuck")
    assert stuck.evidence == {
        "watermark_ms": read_checkpoint(sample("stuck_watermark_dedup")).batches[-1].watermark_ms,
        "from_batch": 1,
        "to_batch": 11,
    }
    # keys hold their event time and the watermark is stuck behind it: evictable, not evicting yet
    assert "not_evicting_yet" in [f.code for f in g.findings] and "unbounded_growth" not in [f.code for f in g.findings]


@pytest.mark.parametrize("name", ["windowed_agg", "join_hdfs", "transform_with_state"])
def test_growth_from_the_change_feed_equals_rereading_every_batch(name: str) -> None:
    """Rows per batch from one walk of the change feed equal the rows Spark's state reader reads at
    every batch (its reads kept in the sample's golden file: ``test_native_equality.py`` checks each
    golden file is of the sample as it is, and against live reads)."""
    from statelens.spark_io.gather.checkup import source_for

    g = growth(sample(name))
    info = read_checkpoint(sample(name))
    spark_rows = golden.rows_per_batch(name)
    assert g.engine == "native" and g.stores
    for store in g.stores:
        src = source_for(info.operator(store.operator_id), store.store_name)  # type: ignore[arg-type]
        per_batch = spark_rows[src.describe()]
        assert store.rows == {b: per_batch[b] for b in store.rows} and len(store.rows) == len(info.committed_batches), (
            name,
            store.store_name,
        )


@pytestmark_spark
def test_bytes_series_follow_the_files_on_disk() -> None:
    g = growth(sample("join_hdfs"))
    left = next(s for s in g.stores if s.store_name == "left-keyWithIndexToValue")
    root = SAMPLES / "join_hdfs" / "state" / "0"
    for b in (0, 8, 16):
        expected = sum(
            f.stat().st_size
            for p in range(4)
            for f in (root / str(p) / "left-keyWithIndexToValue").iterdir()
            if f.is_file() and f.name.split(".")[0].isdigit() and int(f.name.split(".")[0]) <= b + 1
        )
        assert left.bytes[b] == expected


@pytestmark_spark
@pytest.mark.parametrize("name", ["windowed_agg", "join_hdfs", "join_rocksdb", "session_window", "dedup"])
def test_no_false_alarm_on_healthy_samples(name: str) -> None:
    c = checkup(sample(name))
    assert [f.code for f in c.findings if f.severity == "warning"] == []


@pytestmark_spark
def test_pathological_samples_are_flagged() -> None:
    def warnings(name: str) -> set[str]:
        return {f.code for f in checkup(sample(name)).findings if f.severity == "warning"}

    assert warnings("hot_key_join") == {"state_skew", "hot_key", "unbounded_growth", "watermark_missing"}
    assert warnings("unbounded_agg") == {"unbounded_growth", "watermark_missing"}
    assert warnings("stuck_watermark_dedup") == {"watermark_stuck"}


# --------------------------------------------------------------------------- CLI, exports, report


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(argv))
    return rc, out.getvalue(), err.getvalue()


@pytestmark_spark
def test_cli_skew_and_growth_json_contracts() -> None:
    rc, out, _ = run("skew", sample("hot_key_join"), "--json")
    d = json.loads(out)
    assert rc == 0 and set(d) >= {
        "operator_id",
        "store_name",
        "batch_id",
        "rows_by_partition",
        "bytes_by_partition",
        "skew_ratio",
        "max_over_median",
        "top_keys",
    }
    assert sum(d["rows_by_partition"].values()) == 1548 and d["top_keys"][0] == {"key": "hot", "rows": 1500}
    rc, out, _ = run("skew", sample("transform_with_state"), "--store", "count", "--json")
    assert rc == 0 and json.loads(out)["skew_ratio"] is None  # an empty partition: infinite, null in JSON
    rc, out, _ = run("growth", sample("unbounded_agg"), "--json")
    d = json.loads(out)
    assert rc == 0 and d["series"][-1] == {
        "operator_id": 0,
        "store_name": "default",
        "batch_id": 11,
        "rows": 300,
        "inserts": 25,  # each batch's 25 new event ids (the generator's), none removed: no watermark
        "deletes": 0,
        "bytes": d["series"][-1]["bytes"],
    }
    assert d["series"][-1]["bytes"] > d["series"][0]["bytes"] > 0
    assert [f["code"] for f in d["findings"]] == ["unbounded_growth", "watermark_missing", "projection"]
    rc, _, err = run("skew", sample("hot_key_join"), "--store", "nope")
    assert rc == 2 and "has no store 'nope'" in err


@pytestmark_spark
@pytest.mark.browser  # kaleido's Chromium draws the PNGs and SVGs (the shared one: tests/conftest.py)
def test_exports_png_svg_html_csv(tmp_path: Path) -> None:
    for chart in ("skew", "growth", "watermark"):
        for ext in ("png", "svg", "html", "csv"):
            out = tmp_path / f"{chart}.{ext}"
            rc, _, err = run("export", sample("hot_key_join"), "--chart", chart, "--out", str(out))
            assert rc == 0, err
            data = out.read_bytes()
            if ext == "png":
                assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
            elif ext == "svg":
                assert ET.fromstring(data).tag.endswith("svg")
            elif ext == "html":
                assert b"plotly" in data and b"<html" in data.lower()
            else:
                assert data.splitlines()[0].startswith(b'"')
    skew_csv = (tmp_path / "skew.csv").read_text().splitlines()
    assert skew_csv[0] == '"operator_id","store_name","batch_id","partition_id","rows","bytes"' and len(skew_csv) == 9
    assert b"State per partition" in (tmp_path / "skew.html").read_bytes()
    rc, _, err = run("export", sample("hot_key_join"), "--chart", "skew", "--out", str(tmp_path / "x.jpeg"))
    assert rc == 2 and ".png, .svg, .html or .csv" in err


@pytestmark_spark
def test_report_holds_every_finding_and_chart(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    rc, msg, _ = run("report", sample("stuck_watermark_dedup"), "--out", str(out))
    assert rc == 0 and "1 warning(s)" in msg
    html = out.read_text()
    c = checkup(sample("stuck_watermark_dedup"))
    for f in c.findings:
        assert f"<b>{f.code}</b>" in html
    assert html.count("data-figure='fig-") == 4  # watermark, growth, skew, skew over time
    # plotly.js once, gzip-compressed inside the file (the browser unpacks it): it opens offline, at 2 MB not 4.8 MB
    assert html.count("id='plotly-gz'") == 1 and os.path.getsize(out) < 2_300_000
    rc, _, err = run("report", sample("stuck_watermark_dedup"), "--out", str(tmp_path / "nope" / "r.html"))
    assert rc == 2 and "does not exist" in err


def test_too_little_state_for_skew_is_one_note_for_every_store() -> None:
    c = checkup(str(SAMPLES / "compat" / "4.3.0" / "dedup_then_window"))  # two operators, both with little state
    notes = [f for f in c.findings if f.code == "too_little_state_for_skew"]
    little = [s for s in c.skews if s.too_little_state]
    assert len(little) == 2 and len(notes) == 1
    assert all(f"operator {s.operator_id} {s.store_name} (" in notes[0].message for s in little)


def test_unbounded_dedup_growth_names_the_fix() -> None:
    g = growth(str(SAMPLES / "compat" / "4.3.0" / "dedup_no_event_time"))
    [f] = [f for f in g.findings if f.code == "unbounded_growth"]
    assert "dropDuplicatesWithinWatermark" in f.message and "event-time column to the dropDuplicates keys" in f.message
    assert f.setting == "dropDuplicatesWithinWatermark(keys)"
