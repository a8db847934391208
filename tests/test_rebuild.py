"""``statelens rebuild`` against what the changed job really does.

For each change that fails a real restart (``tests/test_preflight.py``'s job): the first version
runs over three input files; the state is rebuilt for the changed job in a new checkpoint; then
the changed job is restarted **for real** on the new checkpoint with the next input file. The rows
that restart writes must equal, row for row, what the changed job writes for that file when it has
run from the start over the same three files in the same runs. The old checkpoint stays byte for
byte until then, and the job's output is never written by the rebuild.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_cli import run_cli

from statelens.analysis.core.errors import InvalidInput
from statelens.spark_io.preflight.rebuild import rebuild_writer
from support import ROOT, logged_batches, tree_checksums

sys.path.insert(0, str(ROOT / "tests" / "jobs"))
import changed_job as cj
from restart_errors import _conf as _confs

JOB = ROOT / "tests" / "jobs" / "changed_job.py"
FIRST = 3  # input files the first version reads, a batch each
NEXT = FIRST + 20  # the file the restart reads: 80 minutes on, past every watermark (session windows close)

# query -> the changes that fail a real restart (test_preflight.CASES), rebuilt here: every stateful
# operator preflight judges, on HDFS and (transformWithState) RocksDB
FAILING = {
    "windowed_agg": ["aggregate_added", "key_added", "aggregate_type_changed", "dedup_in_front"],
    "dedup": ["columns_changed"],
    "join": ["key_added"],
    "session": ["aggregate_added"],
    "pandas_state": ["state_field_added", "state_type_changed", "timeout_changed"],
    "tws": ["time_mode"],  # transformWithStateInPandas, on RocksDB (its type change fails from the start too)
}


def _rows(spark: Any, query: str, change: str, inputs: Path, checkpoint: Path) -> list[str]:
    """Run the job's query (version ``change``) until its input is used up: the rows it wrote, sorted.
    A processing-time timeout makes Spark plan batches for ever: the run stops once all input is in."""
    out: list[str] = []

    def each(df: Any, _batch: int) -> None:
        out.extend(json.dumps(r.asDict(recursive=True), default=str, sort_keys=True) for r in df.collect())

    with _confs(spark, cj.confs(query, change)):
        df, mode = cj.build(spark, query, change, inputs)
        q = df.writeStream.outputMode(mode).option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
        q = q.foreachBatch(each).start()
        read = False  # this run read input: the first batch after that which reads none ends it (availableNow
        # plans a batch without data only once the input is used up; a stopped run's last batch re-runs first)
        while not q.awaitTermination(0.2):
            p = q.lastProgress
            read = read or bool(p and p["numInputRows"])
            if read and p and not p["numInputRows"]:
                q.stop()
        assert q.exception() is None, q.exception()
    return sorted(out)


def _first_version(spark: Any, tmp_path: Path, query: str) -> tuple[Path, Path]:
    """(inputs, checkpoint): the job's first version run over ``FIRST`` input files, a batch each."""
    inputs, old = tmp_path / "in", tmp_path / "old"
    for b in range(FIRST):
        cj.write_input(inputs, b)
    _rows(spark, query, "none", inputs, old)
    return inputs, old


def _input_rows(query: str) -> int:
    """The rows of the first ``FIRST`` input files of the query's sources."""
    return sum(len(cj.input_batch(b)[source]) for b in range(FIRST) for source in cj.QUERIES[query][1])


def _writer(spark: Any, query: str, change: str, inputs: Path, output: Path) -> Any:
    """The changed job's writer as deployed: its foreachBatch sink writes a file per batch under ``output``."""
    df, mode = cj.build(spark, query, change, inputs)

    def each(batch_df: Any, batch_id: int) -> None:
        output.mkdir(parents=True, exist_ok=True)
        (output / f"batch-{batch_id}").write_text(str(batch_df.count()))

    return df.writeStream.outputMode(mode).foreachBatch(each)


@pytest.mark.parametrize("query", sorted(FAILING))
def test_the_changed_job_continues_on_the_rebuilt_state_as_if_it_had_always_run(spark: Any, tmp_path: Path, query: str) -> None:
    inputs, old = _first_version(spark, tmp_path, query)
    before = tree_checksums(old)
    rebuilt, reference = {}, {}
    for change in FAILING[query]:
        output = tmp_path / f"out-{change}"
        output.mkdir()
        (output / "batch-2").write_text("12")  # what the deployed job's foreachBatch wrote before
        written = tree_checksums(output)
        new = tmp_path / f"new-{change}"
        seen: list[tuple[int, int]] = []
        with _confs(spark, cj.confs(query, change)):
            r = rebuild_writer(
                str(old),
                str(new),
                lambda s, c=change, o=output: _writer(s, query, c, inputs, o),
                spark,
                progress=lambda n, of, _b, _r, seen=seen: seen.append((n, of)),
            )
        assert r.check.verdict == "restarts", (change, r.check.title, r.check.error)
        assert [b.batch for b in r.batches] == logged_batches(old) == logged_batches(new)
        assert seen == [(i + 1, len(r.batches)) for i in range(len(r.batches))]
        assert sum(b.input_rows for b in r.batches) == _input_rows(query)
        assert tree_checksums(output) == written  # the job's sink (its foreachBatch function): never called
        assert tree_checksums(old) == before
        assert all(o.new_rows is not None for o in r.operators)
        rebuilt[change] = new
        # the changed job from the start, over the same files in the same runs
        reference[change] = tmp_path / f"ref-{change}"
        _rows(spark, query, change, inputs, reference[change])
    assert tree_checksums(old) == before
    cj.write_input(inputs, NEXT)
    for change in FAILING[query]:
        restarted = _rows(spark, query, change, inputs, rebuilt[change])
        expected = _rows(spark, query, change, inputs, reference[change])
        assert restarted == expected, (
            f"{query}/{change}: restarted on the rebuilt state {restarted[:3]} != from the start {expected[:3]}"
        )
        assert restarted or query == "dedup", f"{query}/{change}: the next file made no output to compare"


def test_a_watermark_change_is_refused_unless_accepted(spark: Any, tmp_path: Path) -> None:
    inputs, old = _first_version(spark, tmp_path, "windowed_agg")
    before = tree_checksums(old)
    new = tmp_path / "new"
    build = lambda s: _writer(s, "windowed_agg", "watermark_delay", inputs, tmp_path / "out")  # noqa: E731
    with _confs(spark, cj.confs("windowed_agg", "watermark_delay")), pytest.raises(InvalidInput) as e:
        rebuild_writer(str(old), str(new), build, spark)
    assert "watermark on event_time" in e.value.message and "--accept-watermark-change" in e.value.message
    assert not new.exists() and tree_checksums(old) == before
    with _confs(spark, cj.confs("windowed_agg", "watermark_delay")):
        r = rebuild_writer(str(old), str(new), build, spark, accept_watermark_change=True)
    assert [w.kind for w in r.accepted] == ["watermark_delay_changed"] and r.check.verdict == "restarts"


def test_the_command_as_deployed_rebuilds_and_writes_nothing_else(spark: Any, tmp_path: Path) -> None:
    """``statelens rebuild`` with the job's own command (its process, its Parquet sink with the first
    version's files in it, a table it writes before starting); then the real restart on the new checkpoint."""
    inputs, old, output = tmp_path / "in", tmp_path / "old", tmp_path / "job-output"
    for b in range(FIRST):
        cj.write_input(inputs, b)
    with _confs(spark, cj.confs("dedup", "none")):
        cj.start(spark, "dedup", "none", inputs, old, output, sink="files").awaitTermination()
    assert list(output.glob("*.parquet"))
    before, written = tree_checksums(old), tree_checksums(output)
    new = tmp_path / "new"
    out = run_cli(
        "rebuild", str(old), "--to", str(new), "--json", "--",
        sys.executable, str(JOB), "--query", "dedup", "--change", "columns_changed", "--input", str(inputs),
        "--checkpoint", str(old), "--output", str(output), "--sink", "files",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["batches_replayed"] == len(logged_batches(old)) and r["check"]["verdict"] == "restarts"
    assert [line.split(" (")[0] for line in out.stderr.splitlines()] == [
        f"batch {i + 1} of {r['batches_replayed']} replayed" for i in range(r["batches_replayed"])
    ]
    assert sum(b["input_rows"] for b in r["batches"]) == _input_rows("dedup")
    assert "checkpointLocation" in r["next_steps"][0] and str(new) in r["next_steps"][0]
    (op,) = r["operators"]
    # the counts are Spark's: its State Data Source on both checkpoints (user_id follows event_id: the same keys)
    assert op["old_rows"] == spark.read.format("statestore").load(str(old)).count() == op["new_rows"]
    assert spark.read.format("statestore").load(str(new)).count() == op["new_rows"]
    assert tree_checksums(output) == written and tree_checksums(old) == before  # no job write, no _job_setup
    reference = tmp_path / "ref"
    _rows(spark, "dedup", "columns_changed", inputs, reference)
    cj.write_input(inputs, NEXT)
    # the changed job deployed on the new checkpoint, into its own sink: the file sink's log takes the next batch
    with _confs(spark, cj.confs("dedup", "columns_changed")):
        cj.start(spark, "dedup", "columns_changed", inputs, new, output, sink="files").awaitTermination()
    last = logged_batches(old)[-1]
    entries = [p for p in (output / "_spark_metadata").iterdir() if p.name.isdigit() and int(p.name) > last]
    assert entries, "the file sink logged no batch after the rebuilt ones"
    files = [json.loads(x)["path"] for p in entries for x in p.read_text().splitlines()[1:] if x.strip()]
    restarted = sorted(
        json.dumps(r.asDict(recursive=True), default=str, sort_keys=True) for r in spark.read.parquet(*files).collect()
    )
    assert restarted and restarted == _rows(spark, "dedup", "columns_changed", inputs, reference)


def test_a_missing_input_file_is_refused_in_one_line_before_anything_runs(spark: Any, tmp_path: Path) -> None:
    inputs, old = _first_version(spark, tmp_path, "dedup")
    gone = inputs / "events" / "part-00001.json"
    gone.unlink()
    before = tree_checksums(old)
    new = tmp_path / "new"
    out = run_cli("rebuild", str(old), "--to", str(new), "--", sys.executable, str(JOB), "--query", "dedup")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and f"file://{gone}" in out.stderr and "is gone" in out.stderr
    assert not new.exists() and tree_checksums(old) == before


def test_a_new_checkpoint_that_holds_files_is_refused(tmp_path: Path) -> None:
    from support import sample

    new = tmp_path / "new"
    new.mkdir()
    (new / "keep.txt").write_text("mine")
    out = run_cli("rebuild", str(sample("windowed_agg")), "--to", str(new), "--", sys.executable, "job.py")
    assert out.returncode == 2 and "must not exist or be empty" in out.stderr and out.stderr.count("\n") == 1
    assert [p.name for p in new.iterdir()] == ["keep.txt"]


def test_the_app_rebuilds_beside_the_verdict(spark: Any, tmp_path: Path) -> None:
    """*Will my change restart?* says fails; the rebuild under it replays into the new checkpoint."""
    from test_preflight import preflight_page

    inputs, old = _first_version(spark, tmp_path, "windowed_agg")
    output = tmp_path / "job-output"
    output.mkdir()
    (output / "batch-2").write_text("12")  # what the deployed job's foreachBatch wrote before
    before, written = tree_checksums(old), tree_checksums(output)
    at = preflight_page(old, inputs, output)
    assert any("STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE" in e.value for e in at.error)
    new = tmp_path / "new"
    at.text_input(key="rb_to").set_value(str(new))
    at.run()
    at.button(key="rb_go").click()
    at.run(timeout=300)
    assert not at.exception, [e.value for e in at.exception]
    (done,) = [s.value for s in at.success]
    assert f"Rebuilt {len(logged_batches(old))} batches into `{new}`" in done and "**restarts**" in done
    assert logged_batches(new) == logged_batches(old)
    assert any("checkpointLocation" in m.value for m in at.markdown)
    assert tree_checksums(output) == written and tree_checksums(old) == before


def test_a_changed_job_that_fails_by_itself_is_said_in_one_line_and_nothing_is_kept(spark: Any, tmp_path: Path) -> None:
    """The changed transformWithState keeps its count as a double, which it then reads back as None: it
    fails at its second batch from the start too (the truth, below). The rebuild says so and keeps nothing."""
    inputs, old = _first_version(spark, tmp_path, "tws")
    before = tree_checksums(old)
    new = tmp_path / "new"
    build = lambda s: _writer(s, "tws", "variable_type_changed", inputs, tmp_path / "out")  # noqa: E731
    with _confs(spark, cj.confs("tws", "variable_type_changed")), pytest.raises(InvalidInput) as e:
        rebuild_writer(str(old), str(new), build, spark, output_mode="update")
    assert "failed replaying batch 1 (PYTHON_EXCEPTION): TypeError: unsupported operand" in e.value.message
    assert not new.exists() and tree_checksums(old) == before
    with pytest.raises(Exception, match="TypeError"):
        _rows(spark, "tws", "variable_type_changed", inputs, tmp_path / "from-start")


def test_a_new_checkpoint_outside_the_allowed_roots_is_refused_before_it_is_made(tmp_path: Path) -> None:
    import os

    from support import SAMPLES, sample

    new = tmp_path / "new"
    env = {**os.environ, "STATELENS_ALLOWED_ROOTS": str(SAMPLES)}
    out = run_cli("rebuild", str(sample("windowed_agg")), "--to", str(new), "--", sys.executable, "job.py", env=env)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert out.stderr.startswith("statelens: Checkpoint not allowed:") and str(new) in out.stderr
    assert not new.exists()


AFTER = 12  # batches the changed job runs after the rebuild: past the file sink log's compaction (batch 9)


@pytest.mark.parametrize("into", ["the old folder", "a folder --sink-to prepared", "an empty new folder"])
def test_after_a_rebuild_the_changed_job_runs_past_the_sink_logs_compaction(spark: Any, tmp_path: Path, into: str) -> None:
    """The advice holds for weeks: the changed job deployed on the rebuilt checkpoint runs 12 batches into
    its file sink, past the sink log's compaction, into the old folder (its log continues) or into a new
    one rebuild prepared; Spark reads each folder. Into an empty new folder, as a user might, Spark's
    sink log fails at its compaction (why the next steps never advise it)."""
    inputs, old, output = tmp_path / "in", tmp_path / "old", tmp_path / "job-output"
    for b in range(FIRST):
        cj.write_input(inputs, b)
    with _confs(spark, cj.confs("dedup", "none")):
        cj.start(spark, "dedup", "none", inputs, old, output, sink="files").awaitTermination()
    new = tmp_path / "new"
    sink = output if into == "the old folder" else tmp_path / "new-output"
    prepared = ["--sink-to", str(sink)] if into.startswith("a folder") else []
    out = run_cli(
        "rebuild", str(old), "--to", str(new), *prepared, "--json", "--",
        sys.executable, str(JOB), "--query", "dedup", "--change", "columns_changed", "--input", str(inputs),
        "--checkpoint", str(old), "--output", str(output), "--sink", "files",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    if prepared:
        assert r["sink_to"] == str(sink) and str(sink) in r["next_steps"][1] and "--sink-to" not in r["next_steps"][1]
        logged = sorted(int(p.name.split(".")[0]) for p in (sink / "_spark_metadata").iterdir())
        assert logged == list(range(len(logged_batches(new)))), "an entry for every batch before the next"
    else:
        assert (
            r["sink"] == str(output) and "Keep its file sink's path" in r["next_steps"][1] and "--sink-to" in r["next_steps"][1]
        )
    for b in range(FIRST, FIRST + AFTER):
        cj.write_input(inputs, b)
    with _confs(spark, cj.confs("dedup", "columns_changed")):
        q = cj.start(spark, "dedup", "columns_changed", inputs, new, sink, sink="files")
        try:
            q.awaitTermination()
        except Exception as e:  # the empty folder's failure, raised by awaitTermination
            failure: Any = e
        else:
            failure = q.exception()
    if into == "an empty new folder":
        assert failure is not None and "_spark_metadata" in str(failure), failure
        return
    assert failure is None, failure
    assert max(logged_batches(new)) >= 9 + 1, "the run went past the sink log's compaction"
    assert any(p.name.endswith(".compact") for p in (sink / "_spark_metadata").iterdir())
    read = spark.read.parquet(str(sink))  # Spark reads the folder through its log
    ids = {r["event_id"] for r in read.select("event_id").collect()}
    new_ids = {e["event_id"] for b in range(FIRST, FIRST + AFTER) for e in cj.input_batch(b)["events"]}
    assert new_ids <= ids  # the changed job's rows are there (dedup keeps each new event once)
