"""``statelens preflight`` against real restarts: for each change users make, the changed job is
restarted for real on a copy of the checkpoint (with new input), and preflight judges it on the
original. Verdict and error class must be Spark's; the checkpoint stays byte for byte; the job's
sink sees no write.

The job is ``tests/jobs/changed_job.py``. Its first version and the real restarts run in the
suite's session; preflight runs in-process (``judge_writer``, the Python API) for the matrix, and
as the user runs it (``statelens preflight CP -- python job.py ...``, the job in a process of its
own) for a few cases. Checkpoints of PySpark 3.5 and 4.0 (``sample_checkpoints/compat``) are
restarted by the pinned PySpark.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from test_cli import run_cli

from statelens.spark_io.preflight import judge_writer
from support import ROOT, SAMPLES, logged_batches, tree_checksums

sys.path.insert(0, str(ROOT / "tests" / "jobs"))
import changed_job as cj
from restart_errors import _conf as _confs  # the session's confs set for a block, then restored

JOB = ROOT / "tests" / "jobs" / "changed_job.py"
FIRST_BATCHES = 3


def _run(
    spark: Any, query: str, change: str, inputs: Path, checkpoint: Path, output: Path, first_only: bool = False
) -> str | None:
    """Run the job's query until its input is used up (``first_only``: until the first batch after the
    start ended; a processing-time timeout keeps running batches): Spark's error, or None.

    With ``first_only`` the answer is the first batch's: a batch reports progress only when it ended
    well, so once there is progress the restart has passed, and what the stop that follows raises
    (a batch after it interrupted on a busy machine) is not the restart's error."""
    with _confs(spark, cj.confs(query, change)):
        q = cj.start(spark, query, change, inputs, checkpoint, output, sink="foreach_batch")
        stopped = False
        try:
            while not q.awaitTermination(0.2):
                if first_only and q.recentProgress:
                    q.stop()
                    stopped = True
        except Exception as e:
            return None if stopped else str(e)
        return str(q.exception()) if q.exception() and not stopped else None


def spark_class(error: str | None) -> str | None:
    """The error class Spark raised, under the STREAM_FAILED around it (the truth side of a test)."""
    if not error:
        return None
    # STREAM_FAILED wraps every failure; FOREACH_BATCH_USER_FUNCTION_ERROR the failures inside the sink
    # function (preflight never calls it: its class is the cause's)
    wrappers = ("STREAM_FAILED", "FOREACH_BATCH_USER_FUNCTION_ERROR")
    found = [c for c in re.findall(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)*)\]", error) if c not in wrappers]
    if found:
        return found[0]
    # a Python worker's failure inside the sink function: PySpark's PythonException, [PYTHON_EXCEPTION]
    return "PYTHON_EXCEPTION" if "PythonException" in error else "UNKNOWN"


_BASES: dict[str, Path] = {}


@pytest.fixture(scope="module")
def bases(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """query -> (checkpoint, inputs) written by the job's first version (3 batches), once per module."""
    root = tmp_path_factory.mktemp("preflight")

    def get(query: str) -> tuple[Path, Path]:
        if query not in _BASES:
            inputs = root / query / "in"
            for b in range(FIRST_BATCHES):
                cj.write_input(inputs, b)
            checkpoint = root / query / "cp"
            assert _run(spark, query, "none", inputs, checkpoint, root / query / "out") is None
            _BASES[query] = checkpoint
        checkpoint = _BASES[query]
        return checkpoint, checkpoint.parent / "in"

    return get


def _next_batch(checkpoint: Path) -> int:
    return logged_batches(checkpoint)[-1] + 1


def _truth(spark: Any, query: str, change: str, checkpoint: Path, inputs: Path, tmp: Path) -> tuple[str | None, Path]:
    """Spark's own restart of the changed query, on a copy of the checkpoint, with one more input
    batch: its error class, and the inputs it read (preflight is given the same)."""
    copy = tmp / "restarted"
    shutil.copytree(checkpoint, copy)
    more = tmp / "in"
    shutil.copytree(inputs, more)
    cj.write_input(more, FIRST_BATCHES + 10)
    return spark_class(_run(spark, query, change, more, copy, tmp / "restart-out", first_only=True)), more


# (query, change) -> what Spark does on restart: fails with a class, or restarts (and what preflight warns)
CASES = [
    ("windowed_agg", "key_renamed"),
    ("windowed_agg", "key_added"),
    ("windowed_agg", "aggregate_added"),
    ("windowed_agg", "aggregate_type_changed"),
    ("windowed_agg", "watermark_delay"),
    ("windowed_agg", "shuffle_partitions"),
    ("windowed_agg", "dedup_in_front"),
    ("windowed_agg", "window_size"),
    ("dedup", "columns_changed"),
    ("join", "join_type"),
    ("join", "key_added"),
    ("join", "time_bound"),
    ("session", "aggregate_added"),
    ("session", "filter_added"),
    ("pandas_state", "state_field_added"),
    ("pandas_state", "state_type_changed"),
    ("pandas_state", "timeout_changed"),
    ("tws", "variable_added"),
    ("tws", "variable_type_changed"),
    ("tws", "time_mode"),
    ("tws_avro", "avro_field_added"),
    ("tws_avro", "avro_field_renamed"),
]
WARNS = {  # a change Spark restarts without a word, and the warning preflight gives it
    ("windowed_agg", "key_renamed"): "key_renamed",
    ("windowed_agg", "shuffle_partitions"): "shuffle_partitions_ignored",
    ("windowed_agg", "window_size"): "window_changed",
    ("windowed_agg", "watermark_delay"): "watermark_delay_changed",  # from the stored state: no event log
    ("tws", "variable_added"): "state_variable_added",
    ("tws_avro", "avro_field_added"): "state_schema_evolved",
}


@pytest.mark.parametrize(("query", "change"), CASES, ids=[f"{q}-{c}" for q, c in CASES])
def test_preflight_gives_the_verdict_of_a_real_restart(spark: Any, bases: Any, tmp_path: Path, query: str, change: str) -> None:
    checkpoint, inputs = bases(query)
    before = tree_checksums(checkpoint)
    truth, more = _truth(spark, query, change, checkpoint, inputs, tmp_path)
    with _confs(spark, cj.confs(query, change)):
        r = judge_writer(str(checkpoint), lambda s: cj.build(s, query, change, more)[0], spark)
    assert (r.verdict, r.error_class) == (("fails", truth) if truth else ("restarts", None)), r.error
    assert tree_checksums(checkpoint) == before
    assert r.new_data and r.batch == _next_batch(checkpoint)
    assert r.verdict == "fails" or r.input_rows  # it ran the batch the real restart ran: with the new file
    if (query, change) in WARNS:
        assert WARNS[(query, change)] in [w.kind for w in r.warnings]
    if r.verdict == "fails" and r.error_class.endswith("SCHEMA_NOT_COMPATIBLE"):
        assert r.stored_schema and r.new_schema and r.differences
        assert r.operator_id == 0
        if query.startswith("tws"):  # the variable whose stored schema it is
            assert r.column_family == "count" and "state variable count" in r.title


def test_an_avro_field_renamed_is_warned_before_the_data_fails_it(spark: Any, bases: Any) -> None:
    """Without new data Spark accepts the renamed field (its check allows the evolution); the warning
    says the stored values read it as null, what the restart with data then fails on."""
    checkpoint, inputs = bases("tws_avro")
    with _confs(spark, cj.confs("tws_avro", "avro_field_renamed")):
        r = judge_writer(str(checkpoint), lambda s: cj.build(s, "tws_avro", "avro_field_renamed", inputs)[0], spark)
    assert r.verdict == "restarts" and not r.new_data
    (w,) = [w for w in r.warnings if w.kind == "state_schema_evolved"]
    assert "total read as null" in w.detail and "n no longer read" in w.detail


@pytest.mark.parametrize("query", sorted(cj.QUERIES))
def test_an_unchanged_query_restarts_without_a_warning(spark: Any, bases: Any, tmp_path: Path, query: str) -> None:
    """No false alarm: the deployed query itself, with new data, on every kind of operator."""
    checkpoint, inputs = bases(query)
    more = tmp_path / "in"
    shutil.copytree(inputs, more)
    cj.write_input(more, FIRST_BATCHES + 10)
    with _confs(spark, cj.confs(query, "none")):
        r = judge_writer(str(checkpoint), lambda s: cj.build(s, query, "none", more)[0], spark)
    assert (r.verdict, r.warnings, r.error_class) == ("restarts", [], None)


@pytest.mark.parametrize(("change", "verdict"), [("none", "restarts"), ("key_added", "fails"), ("dedup_in_front", "fails")])
def test_without_new_data_the_next_batch_is_still_judged(spark: Any, bases: Any, change: str, verdict: str) -> None:
    """The sources hold nothing new: a real restart would run no batch and check nothing yet;
    preflight runs the batch it would run next without new data, with every check."""
    checkpoint, inputs = bases("windowed_agg")
    with _confs(spark, cj.confs("windowed_agg", change)):
        r = judge_writer(str(checkpoint), lambda s: cj.build(s, "windowed_agg", change, inputs)[0], spark)
    assert r.verdict == verdict and (r.new_data, r.batch) == (False, _next_batch(checkpoint))
    if change == "none":
        assert r.warnings == [] and r.error_class is None and r.input_rows == 0


def _cli(
    checkpoint: Path, query: str, change: str, inputs: Path, output: Path, sink: str, job_checkpoint: Path | None = None
) -> Any:
    return run_cli(
        "preflight", str(checkpoint), "--json", "--",
        sys.executable, str(JOB), "--query", query, "--change", change, "--input", str(inputs),
        "--checkpoint", str(job_checkpoint or checkpoint), "--output", str(output), "--sink", sink,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("query", "change", "sink"),
    [
        ("windowed_agg", "key_added", "foreach_batch"),
        ("join", "join_type", "files"),
        ("windowed_agg", "shuffle_partitions", "foreach_batch"),
    ],
)
def test_the_job_as_users_run_it_writes_nothing(
    spark: Any, bases: Any, tmp_path: Path, query: str, change: str, sink: str
) -> None:
    """The command as deployed: the job's own process, its foreachBatch or file sink, a table it writes first."""
    checkpoint, inputs = bases(query)
    before = tree_checksums(checkpoint)
    truth, more = _truth(spark, query, change, checkpoint, inputs, tmp_path)
    output = tmp_path / "job-output"
    if sink == "foreach_batch":  # the folder holds what the first version's foreachBatch function wrote
        shutil.copytree(checkpoint.parent / "out", output)
    written = tree_checksums(output) if output.exists() else None
    out = _cli(checkpoint, query, change, more, output, sink)
    assert out.returncode == (1 if truth else 0), out.stderr  # a CI gates a deploy on it
    r = json.loads(out.stdout)
    assert (r["verdict"], r["error_class"]) == (("fails", truth) if truth else ("restarts", None))
    assert r["how"] == "scratch copy"
    # no foreachBatch call, no file sink write, no setup table: the folder absent, or every file byte for byte
    if written is None:
        assert not output.exists()
    else:
        assert written and tree_checksums(output) == written
    assert any("_job_setup" in w for w in r["skipped_writes"])
    assert tree_checksums(checkpoint) == before
    if change == "shuffle_partitions":
        (w,) = [w for w in r["warnings"] if w["kind"] == "shuffle_partitions_ignored"]
        assert "=5" in w["detail"] and "keeps 2" in w["detail"]


def test_a_job_on_another_checkpoint_is_refused_in_one_line(bases: Any, tmp_path: Path) -> None:
    checkpoint, inputs = bases("windowed_agg")
    out = _cli(checkpoint, "windowed_agg", "none", inputs, tmp_path / "o", "foreach_batch", job_checkpoint=tmp_path / "elsewhere")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and f"it started a query on {tmp_path / 'elsewhere'}" in out.stderr
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "o").exists()


COMPAT = [
    ("3.5.9", "windowed_agg", "windowed_agg", "key_added"),
    ("3.5.9", "windowed_agg", "windowed_agg", "window_size"),
    ("3.5.9", "dedup", "dedup", "columns_changed"),
    ("3.5.9", "join_hdfs", "join", "key_added"),
    ("4.0.5", "windowed_agg", "windowed_agg", "aggregate_added"),
    ("4.0.5", "windowed_agg", "windowed_agg", "dedup_in_front"),
    ("4.0.5", "join_hdfs", "join", "time_bound"),
    ("4.0.5", "apply_in_pandas_with_state", "pandas_state", "state_field_added"),
]


@pytest.mark.parametrize(("version", "sample", "query", "change"), COMPAT, ids=[f"{v}-{s}-{c}" for v, s, _, c in COMPAT])
def test_checkpoints_of_older_spark(spark: Any, tmp_path: Path, version: str, sample: str, query: str, change: str) -> None:
    """A checkpoint PySpark 3.5 or 4.0 wrote, restarted by the pinned PySpark (its inputs are gone: the
    restart reads new files; preflight needs none)."""
    checkpoint = SAMPLES / "compat" / version / sample
    before = tree_checksums(checkpoint)
    inputs = tmp_path / "inputs"
    for b in range(FIRST_BATCHES):
        cj.write_input(inputs, b)
    truth, more = _truth(spark, query, change, checkpoint, inputs, tmp_path)
    with _confs(spark, cj.confs(query, change)):
        r = judge_writer(str(checkpoint), lambda s: cj.build(s, query, change, more)[0], spark)
    assert (r.verdict, r.error_class) == (("fails", truth) if truth else ("restarts", None)), r.error
    assert tree_checksums(checkpoint) == before
    if (query, change) == ("windowed_agg", "window_size"):
        assert "window_changed" in [w.kind for w in r.warnings]


_LOGGED: dict[str, tuple[Path, Path, Path]] = {}
# the job's first versions, run for their event log in one application: a team's application running
# several streams, each query's plans told apart in the log by its id
LOGGED_QUERIES = ("join", "session", "windowed_agg")
FIRST_VERSIONS = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import changed_job as cj
root, queries = Path(sys.argv[2]), sys.argv[3:]
(confs,) = {tuple(sorted(cj.confs(q, "none").items())) for q in queries}  # one session's confs for them all
spark = cj.session("changed-job-first-versions", dict(confs), str(root / "events"))
for q in queries:
    cj.start(spark, q, "none", root / q / "in", root / q / "cp", root / q / "out", "foreach_batch").awaitTermination()
"""


def _logged_base(query: str, factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(checkpoint, inputs, event logs) of the job's first version, run with its event log."""
    import subprocess

    if not _LOGGED:
        root = factory.mktemp("logged")
        (root / "events").mkdir()
        for q in LOGGED_QUERIES:
            for b in range(FIRST_BATCHES):
                cj.write_input(root / q / "in", b)
        first = subprocess.run(
            [sys.executable, "-c", FIRST_VERSIONS, str(JOB.parent), str(root), *LOGGED_QUERIES],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert first.returncode == 0, first.stderr[-2000:]
        _LOGGED.update({q: (root / q / "cp", root / q / "in", root / "events") for q in LOGGED_QUERIES})
    return _LOGGED[query]


PLAN_CHANGES = [
    ("join", "join_type", "join_type_changed", "LeftOuter"),
    ("join", "time_bound", "join_condition_changed", "10 minutes"),
    ("windowed_agg", "watermark_delay", "watermark_delay_changed", "was 10 min"),
    ("session", "filter_added", "filter_added", "view"),
    ("windowed_agg", "filter_added", "filter_added", "view"),  # a where before the aggregation
    ("windowed_agg", "filter_first", "filter_added", "view"),  # ... and before its watermark
    ("windowed_agg", "value_filter", "filter_added", "value"),  # a numeric condition after the watermark
]


@pytest.mark.parametrize(("query", "change", "kind", "says"), PLAN_CHANGES, ids=[f"{q}-{c}" for q, c, _, _ in PLAN_CHANGES])
def test_with_the_event_log_the_old_plan_is_compared(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, query: str, change: str, kind: str, says: str
) -> None:
    """Changes Spark restarts without a word: the old plan (the deployed query's event log) against
    the new one Spark made for the next batch."""
    checkpoint, inputs, logs = _logged_base(query, tmp_path_factory)
    with _confs(spark, cj.confs(query, change)):
        r = judge_writer(str(checkpoint), lambda s: cj.build(s, query, change, inputs)[0], spark, event_log=str(logs))
    assert r.verdict == "restarts"
    found = [w for w in r.warnings if w.kind == kind]
    assert len(found) == 1 and says in found[0].detail, r.warnings
    assert not [n for n in r.not_checked if "event-log" in n]
    with _confs(spark, cj.confs(query, "none")):
        same = judge_writer(str(checkpoint), lambda s: cj.build(s, query, "none", inputs)[0], spark, event_log=str(logs))
    assert same.verdict == "restarts" and same.warnings == []


@pytest.mark.jvm  # the job's own Spark
def test_a_scratch_run_writes_no_event_log_where_the_job_points(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The job as deployed writes its event log into the team's folder: its scratch run must not (its
    application would land there under the same query id, its batches read as the checkpoint's)."""
    checkpoint, inputs, logs = _logged_base("windowed_agg", tmp_path_factory)
    before = tree_checksums(logs)
    out = run_cli(
        "preflight", str(checkpoint), "--json", "--",
        sys.executable, str(JOB), "--query", "windowed_agg", "--change", "none", "--input", str(inputs),
        "--checkpoint", str(checkpoint), "--output", str(tmp_path_factory.mktemp("out")), "--sink", "foreach_batch",
        "--event-log", str(logs),
    )  # fmt: skip
    assert out.returncode == 0 and json.loads(out.stdout)["verdict"] == "restarts", out.stderr
    assert tree_checksums(logs) == before  # no new application, nothing appended
    progress = run_cli("progress", str(checkpoint), "--event-log", str(logs), "--json")
    assert progress.returncode == 0, progress.stderr
    assert [b["batch_id"] for b in json.loads(progress.stdout)["batches"]] == logged_batches(checkpoint, "offsets")


@pytest.mark.jvm  # the job's own Spark
def test_a_job_logging_events_through_its_spark_defaults_keeps_its_event_log_untouched(tmp_path: Path) -> None:
    """The job logs events as a team deploys it: ``spark-defaults.conf`` in ``SPARK_CONF_DIR``. Its first
    version's run writes there; preflight (a change that fails: exit 1) and rebuild (its scratch runs go
    on past the first batch) run it on scratch copies: the event-log folder and the checkpoint are byte
    for byte the same. (Each of these JVMs starts without the suite's class archive: the conf folder
    leads its class path.)"""
    import os
    import subprocess

    inputs, checkpoint, logs, conf = tmp_path / "in", tmp_path / "cp", tmp_path / "events", tmp_path / "conf"
    for b in range(FIRST_BATCHES):
        cj.write_input(inputs, b)
    logs.mkdir()
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(f"spark.eventLog.enabled true\nspark.eventLog.dir {logs.as_uri()}\n")
    env = {**os.environ, "SPARK_CONF_DIR": str(conf)}
    job = [sys.executable, str(JOB), "--query", "windowed_agg", "--input", str(inputs), "--checkpoint", str(checkpoint),
           "--output", str(tmp_path / "out"), "--sink", "foreach_batch"]  # fmt: skip
    first = subprocess.run([*job, "--change", "none"], capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    assert any(logs.iterdir()), "the job's defaults wrote no event log: the test would prove nothing"
    before, kept = tree_checksums(logs), tree_checksums(checkpoint)
    out = run_cli("preflight", str(checkpoint), "--json", "--", *job, "--change", "key_added", env=env)
    assert out.returncode == 1 and json.loads(out.stdout)["verdict"] == "fails", out.stderr
    out = run_cli(
        "rebuild", str(checkpoint), "--to", str(tmp_path / "new"), "--json", "--", *job, "--change", "key_added", env=env
    )
    assert out.returncode == 0 and json.loads(out.stdout)["check"]["verdict"] == "restarts", out.stderr
    assert tree_checksums(logs) == before  # no scratch application, nothing appended
    assert tree_checksums(checkpoint) == kept


def preflight_page(checkpoint: Path, inputs: Path, output: Path) -> Any:
    """*Will my change restart?* (an ``AppTest``) run on the windowed aggregation with a key added, as
    deployed: its script, arguments and foreachBatch sink writing under ``output``."""
    from test_app import open_app

    at = open_app(str(checkpoint), "views/preflight.py")
    at.text_input(key="pf_script").set_value(str(JOB))
    args = f"--query windowed_agg --change key_added --input {inputs} --checkpoint {checkpoint} --output {output} --sink foreach_batch"
    at.text_input(key="pf_args").set_value(args)
    at.run()
    at.button(key="pf_go").click()
    at.run(timeout=300)
    return at


def test_the_app_page_runs_the_changed_script(spark: Any, bases: Any, tmp_path: Path) -> None:
    """The page takes the changed job's script and arguments, and shows Spark's verdict, the schemas
    side by side and the ways out; the job's sink saw nothing."""
    checkpoint, inputs = bases("windowed_agg")
    before = tree_checksums(checkpoint)
    output = tmp_path / "job-output"
    at = preflight_page(checkpoint, inputs, output)
    assert not at.exception, [e.value for e in at.exception]
    assert any("STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE" in e.value for e in at.error)
    (table,) = at.dataframe
    rows = table.value.to_dict("records")
    assert rows[-1] == {"position": 2, "change": "added", "stored": "", "new": "kind string"}  # as a user writes a schema
    assert list(rows[-1]) == ["position", "change", "stored", "new"]  # the answer before the long columns
    assert any("new checkpoint" in m.value for m in at.markdown)
    assert not output.exists() and tree_checksums(checkpoint) == before
    at.text_input(key="pf_script").set_value(str(tmp_path / "missing.py")).run()
    at.button(key="pf_go").click().run()
    assert any("is not a Python script here" in e.value for e in at.error)


def test_a_renamed_output_column_is_warned_as_the_real_restart_writes_a_second_column_set(spark: Any, tmp_path: Path) -> None:
    """Spark restarts a session window's aggregate renamed without a word, then writes the new column set
    into the same Parquet folder: preflight says so, from the sink's files against the new output."""
    import pyarrow.parquet as pq

    inputs, checkpoint, output = tmp_path / "in", tmp_path / "cp", tmp_path / "out"
    for b in range(FIRST_BATCHES):
        cj.write_input(inputs, b)
    with _confs(spark, cj.confs("session", "none")):
        q = cj.start(spark, "session", "none", inputs, checkpoint, output, sink="files")
        q.awaitTermination()
    assert list(output.glob("*.parquet"))
    before = tree_checksums(output)
    cj.write_input(inputs, FIRST_BATCHES + 10)
    out = _cli(checkpoint, "session", "aggregate_renamed", inputs, output, "files")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["verdict"] == "restarts" and tree_checksums(output) == before
    (w,) = [w for w in r["warnings"] if w["kind"] == "sink_schema_changed"]
    assert "event_count added" in w["detail"] and "events gone" in w["detail"] and str(output) in w["detail"]
    # the truth: the real restart writes the second column set into the same folder
    with _confs(spark, cj.confs("session", "aggregate_renamed")):
        q = cj.start(spark, "session", "aggregate_renamed", inputs, checkpoint, output, sink="files")
        q.awaitTermination()
    assert q.exception() is None
    names = {tuple(pq.read_schema(f).names) for f in output.glob("*.parquet")}
    assert {n for n in names if "events" in n} and {n for n in names if "event_count" in n}


def test_an_unchanged_windowed_job_into_parquet_restarts_without_a_sink_warning(spark: Any, tmp_path: Path) -> None:
    """The very job that wrote the sink, its window flattened into timestamp columns: Spark writes them
    as INT96 (Arrow reads a naive timestamp) and reads them back as ``timestamp``, as its schema in
    each file's footer says: no ``sink_schema_changed`` (it was warned on every such job)."""
    inputs, checkpoint, output = tmp_path / "in", tmp_path / "cp", tmp_path / "out"
    for b in range(FIRST_BATCHES):
        cj.write_input(inputs, b)
    with _confs(spark, cj.confs("windowed_flat", "none")):
        cj.start(spark, "windowed_flat", "none", inputs, checkpoint, output, sink="files").awaitTermination()
    assert list(output.glob("*.parquet"))
    cj.write_input(inputs, FIRST_BATCHES + 10)
    out = _cli(checkpoint, "windowed_flat", "none", inputs, output, "files")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["verdict"] == "restarts" and r["warnings"] == [], r["warnings"]
    # the truth: Spark reads the sink's files as one schema, its window columns timestamps
    read = spark.read.parquet(str(output)).schema
    assert [(f.name, f.dataType.simpleString()) for f in read][:2] == [("window_start", "timestamp"), ("window_end", "timestamp")]
    from statelens.spark_io.preflight.sink import stored_columns

    assert stored_columns(str(next(output.glob("*.parquet"))))[:2] == [("window_start", "timestamp"), ("window_end", "timestamp")]


def test_the_error_class_is_the_cause_not_the_stream_failed_around_it() -> None:
    from statelens.spark_io.preflight.redirect import _error_class

    class Failed(Exception):
        def getCondition(self) -> str:
            return "STREAM_FAILED"

    message = (
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: [STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE] "
        "Provided key schema does not match existing state key schema. SQLSTATE: XXKST"
    )
    assert _error_class(Failed(message)) == "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE"
    assert _error_class(Failed("[STREAM_FAILED] Query [id = 1] terminated")) == "STREAM_FAILED"


def test_a_sink_file_that_cannot_be_read_is_said_not_compared(tmp_path: Path) -> None:
    """A Parquet file of the job's sink, cut short: its columns are not compared, and the reason is raised
    (preflight lists it under not_checked) rather than the comparison passing for an empty one."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from statelens.analysis.core.errors import StateReadError
    from statelens.spark_io.preflight.sink import sink_columns

    out = tmp_path / "out"
    out.mkdir()
    pq.write_table(pa.table({"user_id": ["u"], "events": [1]}), out / "part-0.parquet")
    schema = {"type": "struct", "fields": [{"name": "user_id", "type": "string"}, {"name": "event_count", "type": "long"}]}
    sink = {"path": str(out), "format": "parquet"}
    assert sink_columns(sink, schema) == (
        [("user_id", "string"), ("events", "long")],
        [("user_id", "string"), ("event_count", "long")],
    )
    cut = out / "part-1.parquet"
    cut.write_bytes((out / "part-0.parquet").read_bytes()[:20])
    os.utime(cut, (2_000_000_000, 2_000_000_000))  # the newest file: the one compared
    with pytest.raises(StateReadError, match=r"part-1\.parquet could not be read"):
        sink_columns(sink, schema)


@pytest.mark.jvm  # the job's own Spark
@pytest.mark.parametrize("change", ["value_filter", "filter_added"])
def test_a_filter_added_is_warned_through_the_command_as_deployed(tmp_path_factory: pytest.TempPathFactory, change: str) -> None:
    """The job's own process, its deployed run's event log given: a where added after the watermark
    and before the aggregation (a numeric condition, as a new user added it) is warned of."""
    checkpoint, inputs, logs = _logged_base("windowed_agg", tmp_path_factory)
    out = run_cli(
        "preflight", str(checkpoint), "--json", "--event-log", str(logs), "--",
        sys.executable, str(JOB), "--query", "windowed_agg", "--change", change, "--input", str(inputs),
        "--checkpoint", str(checkpoint), "--output", str(tmp_path_factory.mktemp("out")), "--sink", "foreach_batch",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["verdict"] == "restarts" and [w["kind"] for w in r["warnings"]] == ["filter_added"], r["warnings"]
