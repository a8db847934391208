"""A kind added as the docs show it: the aggregation of Spark's real-time mode (``trigger(realTime=...)``,
planned as its own node, ``StatefulStreamlineAggregate``), on the checkpoint of a real real-time query.

Spark runs the query (its low-latency memory source: real-time mode reads Kafka or it, and Kafka's
connector for this Spark is not served here) with a ``foreach`` sink that writes every row it is handed
with its batch: the truth is what the query emitted in its committed batches. The docs' diff is the
whole change: reversed on a copy of the package, a key is ``unknown`` ("not supported yet"); applied
again, it answers as Spark's output says."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support import ROOT, copy_package_sources

KEYS = [["a", "b", "a"], ["c", "a"]]  # what the source is handed, one list per batch
NEVER = "never-sent"


def _emitted(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in folder.glob("*.jsonl") for line in f.read_text().splitlines()]


def _wait(query: Any, done: Any, what: str, timeout: float = 120, active: bool = True) -> None:
    end = time.monotonic() + timeout
    while not done():
        assert query.isActive or not active, f"the real-time query stopped: {query.exception()}"
        assert time.monotonic() < end, f"the real-time query did not {what} in {timeout:.0f} s"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def realtime(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """A real-time aggregation's checkpoint (count by value, update mode: the only one it runs) and the
    last count its sink was handed per key in a committed batch."""
    from pyspark.sql import DataFrame

    base = tmp_path_factory.mktemp("realtime")
    checkpoint, out = base / "checkpoint", base / "emitted"
    out.mkdir()
    confs = {"spark.sql.shuffle.partitions": "1", "spark.sql.streaming.realTimeMode.minBatchDuration": "1000"}
    before = {k: spark.conf.get(k, None) for k in confs}
    for k, v in confs.items():
        spark.conf.set(k, v)

    class Rows:  # defined here: Spark's Python workers get it by value (a test module is not importable there)
        """The query's sink: each row it is handed, with its batch (``epoch``), one JSON line each."""

        def __init__(self, folder: str) -> None:
            self.folder = folder

        def open(self, partition_id: int, epoch_id: int) -> bool:
            self.epoch = epoch_id
            name = f"{epoch_id}-{partition_id}-{os.getpid()}-{time.time_ns()}.jsonl"
            self.f = open(os.path.join(self.folder, name), "w")  # noqa: SIM115 (closed by close(), as Spark calls it)
            return True

        def process(self, row: Any) -> None:
            self.f.write(json.dumps({"batch": self.epoch, "value": row["value"], "count": row["count"]}) + "\n")
            self.f.flush()

        def close(self, error: Any) -> None:
            self.f.close()

    jvm = spark._jvm
    try:
        source = jvm.org.apache.spark.sql.execution.streaming.sources.LowLatencyMemoryStream.singlePartition(
            spark._jsparkSession, jvm.org.apache.spark.sql.Encoders.STRING()
        )
        query = (
            DataFrame(source.toDF(), spark)
            .groupBy("value")
            .count()
            .writeStream.foreach(Rows(str(out)))
            .outputMode("update")
            .option("checkpointLocation", str(checkpoint))
            .trigger(realTime="1 second")
            .start()
        )
        try:
            sent = 0
            for n, batch in enumerate(KEYS, 1):
                values = jvm.java.util.ArrayList()
                for v in batch:
                    values.add(v)
                source.addData(jvm.scala.jdk.javaapi.CollectionConverters.asScala(values))
                sent += len(batch)
                _wait(query, lambda s=sent: len(_emitted(out)) >= s, "emit a row per record")  # type: ignore[misc]
                # the next records go to a later batch: the one that took these has committed
                _wait(query, lambda n=n: len(list((checkpoint / "commits").glob("[0-9]*"))) > n, "commit its batch")  # type: ignore[misc]
        finally:
            query.stop()
        # a real-time batch's tasks outlive stop() a moment: the checkpoint is the query's once they end
        _wait(query, lambda: not spark.sparkContext.statusTracker().getActiveJobsIds(), "end its tasks", active=False)
        # and its files settle: no temporary file, or (an aborted task's, which Spark leaves behind on a busy
        # machine) the same files for 3 s
        seen: list[tuple[float, set[str]]] = []

        def settled() -> bool:
            files = {str(p) for p in checkpoint.rglob("*") if p.is_file()}
            if not any(f.endswith(".tmp") for f in files):
                return True
            if not seen or seen[-1][1] != files:
                seen.append((time.monotonic(), files))
            return time.monotonic() - seen[-1][0] >= 3

        _wait(query, settled, "finish writing its files", active=False)
    finally:
        for k, v in before.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
    committed = {int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()}
    truth: dict[str, int] = {}
    for row in sorted(_emitted(out), key=lambda r: (r["batch"], r["count"])):
        if row["batch"] in committed:
            truth[row["value"]] = row["count"]
    assert truth == {"a": 3, "b": 1, "c": 1}  # what the query emitted (update mode: each change of a count)
    return checkpoint, truth


def _ask(
    checkpoint: Path, keys: list[str], cwd: Path | None = None, one: tuple[str, ...] = ("--operator", "0")
) -> dict[str, Any]:
    """statelens why-missing (of operator 0; ``one=()``: of the whole query), as a whole process (from
    ``cwd``: that folder's package)."""
    args = ["why-missing", str(checkpoint), *keys, "--key-field", "value", *one, "--engine", "native", "--json"]
    r = subprocess.run(
        [sys.executable, "-m", "statelens.cli", *args],
        cwd=cwd or ROOT,
        env={**os.environ, "PYTHONPATH": str(cwd or ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return {a["key"]: a for a in json.loads(r.stdout)["results"]}


def test_a_realtime_aggregation_answers_as_its_output(realtime: tuple[Path, dict[str, int]]) -> None:
    checkpoint, truth = realtime
    before = {p: p.read_bytes() for p in checkpoint.rglob("*") if p.is_file()}
    got = _ask(checkpoint, [*truth, NEVER])
    for key, count in truth.items():
        assert got[key]["verdict"] == "in_state", got[key]["explanation"]
        assert [r["value"] for r in got[key]["evidence"]] == [{"count": count}]
        assert "this query runs in update mode" in got[key]["explanation"]  # the one mode real-time mode runs
    assert got[NEVER]["verdict"] == "never_in_state"
    assert {p: p.read_bytes() for p in checkpoint.rglob("*") if p.is_file()} == before


def docs_diff() -> str:
    """The new kind's diff as docs/contributing.md shows it."""
    text = (ROOT / "docs" / "contributing.md").read_text()
    found = re.search(r"<!-- the new kind's diff[^>]*-->\n```diff\n(.*?)```", text, re.S)
    assert found, "docs/contributing.md shows the new kind's diff"
    return found.group(1)


def test_the_docs_diff_is_the_whole_new_kind(realtime: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    checkpoint, truth = realtime
    diff = tmp_path / "kind.diff"
    diff.write_text(docs_diff())
    copy = tmp_path / "package"
    copy.mkdir()
    copy_package_sources(copy)
    git = shutil.which("git")
    assert git, "git applies the docs' diff"

    def apply(*flags: str) -> None:
        r = subprocess.run([git, "apply", *flags, "--directory=statelens", str(diff)], cwd=copy, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    apply("-R")  # the package as it was before the kind: the diff is what the package holds now
    without = _ask(checkpoint, ["a"], cwd=copy, one=())["a"]  # the whole query: the key is unknown, saying why
    assert without["verdict"] == "unknown"
    assert "operator kind StatefulStreamlineAggregate is not supported yet" in without["explanation"]
    apply()
    with_kind = _ask(checkpoint, ["a"], cwd=copy, one=())["a"]  # operator 0's verdict, its evidence Spark's count
    assert with_kind["verdict"] == "in_state" and [r["value"] for r in with_kind["evidence"]] == [{"count": truth["a"]}]
