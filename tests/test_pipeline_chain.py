"""Plain Structured Streaming queries chained through a Parquet table (no Declarative Pipeline): the
pipeline found under the checkpoints' root, its writer told by when the table's log was written, and a
key followed across the hop, against the tables Spark wrote and the progress it reported.

``clean`` reads JSON events, drops an event id seen within its 10-minute watermark and writes Parquet
(``tables/clean``); ``counts`` reads that table and counts each user's events in 5-minute windows
(``tables/counts``); ``other`` counts words of its own input: a pipeline of its own. ``clean`` runs
once more on a last file after ``counts`` ran: ``counts`` lags by that batch."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import statelens
from support import tree_checksums

pytestmark = [pytest.mark.jvm, pytest.mark.usefixtures("spark")]

T0 = 1_767_225_600  # 2026-01-01 00:00 UTC


def _event(user: str, event_id: str, minute: int) -> dict[str, Any]:
    return {"user": user, "event_id": event_id, "ts": f"2026-01-01T00:{minute:02d}:00Z"}


FILES = [
    [_event("ann", "e1", 1), _event("ben", "e2", 2), _event("zoe", "z1", 3)],
    [_event("ben", "e2", 2), _event("zoe", "z2", 30)],  # ben's id again: a duplicate
    [_event("cal", "e3", 5), _event("dot", "e4", 33)],  # cal's event behind clean's watermark (00:20): late
    [_event("eve", "e5", 34), _event("zoe", "z3", 36)],  # read by clean after counts last ran
]


def _write(folder: Path, i: int, rows: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"part-{i:03d}.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(path, (T0 + 60 * i, T0 + 60 * i))


def _run(q: Any) -> list[dict[str, Any]]:
    q.awaitTermination()
    return [json.loads(p.json) for p in q.recentProgress]


@pytest.fixture(scope="module")
def chain(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("chain")
    inputs, tables, cps = root / "in", root / "tables", root / "checkpoints"

    def clean() -> list[dict[str, Any]]:
        df = (
            spark.readStream.schema("user STRING, event_id STRING, ts TIMESTAMP")
            .json(str(inputs / "events"))
            .withWatermark("ts", "10 minutes")
            .dropDuplicatesWithinWatermark(["event_id"])
        )
        w = df.writeStream.format("parquet").option("checkpointLocation", str(cps / "clean")).trigger(availableNow=True)
        return _run(w.start(str(tables / "clean")))

    def counts() -> list[dict[str, Any]]:
        from pyspark.sql import functions as F

        df = (
            spark.readStream.schema("user STRING, event_id STRING, ts TIMESTAMP")
            .parquet(str(tables / "clean"))
            .withWatermark("ts", "5 minutes")
            .groupBy("user", F.window("ts", "5 minutes"))
            .count()
        )
        w = df.writeStream.format("parquet").option("checkpointLocation", str(cps / "counts")).trigger(availableNow=True)
        return _run(w.outputMode("append").start(str(tables / "counts")))

    progress: dict[str, list[dict[str, Any]]] = {"clean": [], "counts": []}
    for i in range(3):
        _write(inputs / "events", i, FILES[i])
        progress["clean"] += clean()
    progress["counts"] += counts()
    _write(inputs / "events", 3, FILES[3])
    progress["clean"] += clean()
    # a query of its own: no table links it to the others
    _write(inputs / "words", 0, [{"user": "ann", "event_id": "w1", "ts": "2026-01-01T00:01:00Z"}])
    words = (
        spark.readStream.schema("user STRING, event_id STRING, ts TIMESTAMP")
        .json(str(inputs / "words"))
        .groupBy("user")
        .count()
        .writeStream.format("memory")
        .queryName("chain_words")
        .outputMode("complete")
        .option("checkpointLocation", str(cps / "other"))
        .trigger(availableNow=True)
    )
    _run(words.start())
    return {"root": root, "progress": progress}


def _users(folder: Path) -> set[str]:
    return {u for f in folder.glob("*.parquet") for u in pq.read_table(f, columns=["user"]).column("user").to_pylist()}


def test_the_chain_is_found_and_its_writer_told_by_time(chain: dict[str, Any]) -> None:
    root = chain["root"]
    before = tree_checksums(root / "checkpoints")
    p = statelens.open_pipeline(str(root / "checkpoints"))
    assert p.groups() == [["clean", "counts"], ["other"]]
    assert p.query("clean").sink == str(root / "tables" / "clean")
    assert "written while this query's batches" in (p.query("clean").sink_how or "")
    (hop,) = p.hops
    assert (hop.upstream, hop.downstream) == ("clean", "counts")
    # the lag: clean's batches after counts ran, as many as the runs of clean after it (one file, one batch)
    clean_batches = [x["batchId"] for x in chain["progress"]["clean"]]
    assert hop.unread == tuple(b for b in clean_batches if b > max(n for ns in hop.read.values() for n in ns))
    assert len(hop.unread) >= 1
    assert tree_checksums(root / "checkpoints") == before


def test_a_copy_elsewhere_is_found_through_the_data_root(chain: dict[str, Any], tmp_path: Path) -> None:
    """The checkpoints and tables copied (times kept): the tables under --data-root, the hop the same."""
    root = chain["root"]
    shutil.copytree(root / "checkpoints", tmp_path / "checkpoints")
    shutil.copytree(root / "tables", tmp_path / "tables")
    p = statelens.open_pipeline(str(tmp_path / "checkpoints"), data_root=str(tmp_path / "tables"))
    (hop,) = p.hops
    assert hop.table == str(tmp_path / "tables" / "clean")
    assert hop.read == statelens.open_pipeline(str(root / "checkpoints")).hops[0].read


def test_each_user_across_the_chain_as_the_tables_and_progress_say(chain: dict[str, Any]) -> None:
    root = chain["root"]
    answers = {
        a.key: a
        for a in statelens.why_missing_across(
            str(root / "checkpoints"), "ann", "cal", "eve", "dot", "nobody", key_field="user", input_root=str(root / "in")
        )
    }
    counted, cleaned = _users(root / "tables" / "counts"), _users(root / "tables" / "clean")
    assert "ann" in counted and answers["ann"].outcome == "written"
    # cal: read by clean, not in its table; Spark counted a row dropped by the watermark in that batch
    assert "cal" not in cleaned
    a = answers["cal"]
    assert (a.outcome, a.cause_at["query"]) == ("lost", "clean"), a.headline
    if a.cause == "dropped_as_late":
        dropped = {x["batchId"]: x["stateOperators"][0]["numRowsDroppedByWatermark"] for x in chain["progress"]["clean"]}
        assert dropped[a.cause_at["batch_id"]] >= 1
    else:
        assert "unknown" in (a.outcome, a.cause), a.cause  # no event log: said so, never another cause
    # eve: in clean's table, in a batch counts has not read
    assert "eve" in cleaned and "eve" not in counted
    assert (answers["eve"].outcome, answers["eve"].cause, answers["eve"].cause_at["upstream_query"]) == (
        "waiting",
        "not_read_yet",
        "clean",
    )
    # dot: read by counts, its window still open
    assert "dot" in cleaned and "dot" not in counted
    assert (answers["dot"].outcome, answers["dot"].cause_at["query"]) == ("waiting", "counts"), answers["dot"].headline
    assert (answers["nobody"].outcome, answers["nobody"].cause_at["query"]) == ("never_in_input", "clean")
