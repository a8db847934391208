"""The near-miss key index (``spark_io.readers.native.key_index``): a search for look-alike keys
reads only the partitions whose keys hash alike, finds what a search of every partition finds
(the look-alikes the samples' inputs really held), is kept on disk, and is brought up to date
from the batches committed since, reading only their changes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from statelens.analysis.core.model import sources_of
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.verdicts import why_missing as wm
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers.native.key_index import KeyIndex
from statelens.spark_io.readers.native.reader import NativeReader
from support import SAMPLES, scenario


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STATELENS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _partitions_read(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[int, ...] | None]]:
    """(what, partitions) of every state and change-feed read of the native reader."""
    calls: list[tuple[str, tuple[int, ...] | None]] = []
    state, changes = NativeReader.state, NativeReader.changes

    def spy_state(self: NativeReader, source: Any, batch: int, partitions: Any = None, *a: Any, **k: Any) -> Any:
        calls.append(("state", None if partitions is None else tuple(partitions)))
        return state(self, source, batch, partitions, *a, **k)

    def spy_changes(self: NativeReader, source: Any, start: int, end: int, partitions: Any = None, *a: Any, **k: Any) -> Any:
        what = "evictions" if k.get("deleted_keys_only") else "changes"  # a join's eviction delay reads those
        calls.append((f"{what} {start}-{end}", None if partitions is None else tuple(partitions)))
        return changes(self, source, start, end, partitions, *a, **k)

    monkeypatch.setattr(NativeReader, "state", spy_state)
    monkeypatch.setattr(NativeReader, "changes", spy_changes)
    return calls


def _near(path: str, key: str) -> list[dict[str, Any]]:
    (r,) = why_missing(path, KeyQuestion((key,), operator=0)).results
    return r.near_misses


def test_a_look_alike_is_found_from_its_partition_alone_as_by_reading_every_partition(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """hot_key_join (8 partitions): 'KEY-34 ' looks like key-34, which both sides held."""
    path = str(SAMPLES / "hot_key_join")
    every = _near(path, "KEY-34 ")  # builds the index (reads everything once)
    assert {n["key"] for n in every} == {"key-34"} and {n["where"] for n in every} == {"left", "right"}
    calls = _partitions_read(monkeypatch)
    assert _near(path, "KEY-34 ") == every
    near_reads = {p for what, p in calls if p is not None}
    assert calls and all(p is not None for what, p in calls if what != "evictions"), calls  # no read of a whole store
    assert len({q for p in near_reads for q in p}) <= 2, calls  # the key's own partition and key-34's
    monkeypatch.setattr(KeyIndex, "partitions", lambda *a, **k: None)  # the search of every partition
    assert _near(path, "KEY-34 ") == every


def test_a_near_miss_already_evicted_is_found_through_the_index(cache: Path) -> None:
    """join_hdfs: ord-5's payment was keyed ORD-5 and evicted before the question (the input says so)."""
    path = str(SAMPLES / "join_hdfs")
    (payment,) = [p for batch in scenario("join_hdfs").batches for p in batch["payments"] if p["order_id"] == "ORD-5"]
    assert payment
    for _ in range(2):  # built, then kept
        (r,) = why_missing(path, KeyQuestion(("ord-5",))).results
        assert r.verdict == wm.EVICTED and [n["key"] for n in r.near_misses] == ["ORD-5"]
    assert len(list((cache / "keyindex").glob("*/manifest.json"))) >= 1


def _truncated(src: Path, dest: Path, keep: int) -> Path:
    """A copy of a checkpoint as it was when batch ``keep`` was the last one committed."""
    shutil.copytree(src, dest)
    for folder in ("offsets", "commits"):
        for f in (dest / folder).iterdir():
            if f.name.isdigit() and int(f.name) > keep:
                f.unlink()
    return dest


def test_the_index_is_kept_and_brought_up_to_date_from_the_new_batches_only(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = read_checkpoint(str(SAMPLES / "join_hdfs"))
    last = full.committed_batches[-1].batch_id
    copy = _truncated(SAMPLES / "join_hdfs", tmp_path / "join_hdfs", last - 1)
    assert _near(str(copy), "ORD-155")  # the index of batches up to last - 1, kept under the copy's path
    (manifest,) = (cache / "keyindex").glob("*/manifest.json")
    assert json.loads(manifest.read_text())["last"] == last - 1
    for folder in ("offsets", "commits"):  # the query committed one more batch
        shutil.copy2(SAMPLES / "join_hdfs" / folder / str(last), copy / folder / str(last))
    calls = _partitions_read(monkeypatch)
    updated = _near(str(copy), "ORD-155")
    assert json.loads(manifest.read_text())["last"] == last
    new = (f"changes {last}-{last}", None)
    whole = [c for c in calls if c[1] is None and c[0].startswith(("state", "changes"))]
    assert whole == [new], sorted(set(calls), key=str)  # of whole stores, only the new batch's changes are read
    monkeypatch.setattr(KeyIndex, "partitions", lambda *a, **k: None)
    assert updated == _near(str(copy), "ORD-155") and {n["key"] for n in updated} == {"ord-155"}


def test_without_a_change_feed_the_index_covers_the_newest_batch_only(cache: Path) -> None:
    info = read_checkpoint(str(SAMPLES / "compat" / "4.3.0" / "rocksdb_no_changelog"))
    source = sources_of(info.operators[0])[0]
    reader = NativeReader(info)
    field = next(f["name"] for f in reader.key_fields(source) if not isinstance(f["type"], dict))
    index = KeyIndex(reader)
    batches = [b.batch_id for b in info.committed_batches]
    assert index.partitions(source, field, ["x"], batches[-1], feed=False) is not None
    assert index.partitions(source, field, ["x"], batches[-2], feed=False) is None  # an older batch: search it all
