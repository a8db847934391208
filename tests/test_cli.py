"""cli.py as users' scripts call it: JSON contracts, readable text, exit code 2 on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from statelens.spark_io.logs.checkpoint import read_checkpoint
from support import ROOT, SAMPLES, logged_batches, sample


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT
    )


def no_java_env() -> dict[str, str]:
    """An environment where no JVM can start: proves a command does not need one."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    env["PATH"] = str(Path(sys.executable).parent)  # the venv's python only, no java
    return env


def test_overview_json_contract_without_a_jvm() -> None:
    r = run_cli("overview", sample("join_hdfs"), "--json", env=no_java_env())
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    info = read_checkpoint(sample("join_hdfs"))
    assert data["query_id"] == info.query_id
    assert data["batches"] == [
        {
            "batch_id": b.batch_id,
            "committed": True,
            "watermark_ms": b.watermark_ms,
            "timestamp_ms": b.timestamp_ms,
            "partitions": 4,  # each batch's spark.sql.shuffle.partitions: the stores' partitions
        }
        for b in info.batches
    ]
    assert data["repartitions"] == []
    assert data["operators"] == [
        {
            "operator_id": 0,
            "operator_name": "symmetricHashJoin",
            "stores": [
                {"store_name": n, "num_partitions": 4}
                for n in ["left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues", "right-keyWithIndexToValue"]
            ],
        }
    ]


def test_overview_text() -> None:
    r = run_cli("overview", sample("stuck_watermark_dedup"), env=no_java_env())
    assert r.returncode == 0
    assert "operator 0  dedupe: default (4 partitions)" in r.stdout
    assert "2025-12-31 23:50:00" in r.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["overview", "/no/such/checkpoint"], "Checkpoint not found"),
        (["overview", str(SAMPLES / "generate.py")], "is a file"),
        (["overview", str(SAMPLES / "join_hdfs" / "offsets")], "open its parent"),
        (["overview"], "the following arguments are required"),
        (["nonsense"], "invalid choice"),
        (["sql", sample("join_hdfs"), "SELECT 1", "--batch", "x"], "invalid int value"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], message: str) -> None:
    r = run_cli(*args, env=no_java_env())
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in r.stderr


def test_corrupt_commit_exits_2(copy_sample) -> None:  # type: ignore[no-untyped-def]
    """The last commit, the one Spark reads on restart, is read: damaged, it is named. An older
    commit tells by being there (Spark reads none of them again)."""
    cp = copy_sample("dedup")
    last = logged_batches(cp)[-1]
    (cp / "commits" / "3").write_text("v1\n{broken")
    assert run_cli("overview", str(cp), env=no_java_env()).returncode == 0
    (cp / "commits" / str(last)).write_text("v1\n{broken")
    r = run_cli("overview", str(cp), env=no_java_env())
    assert r.returncode == 2 and f"commits/{last}" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_sql_and_why_missing_json_text_and_errors() -> None:
    # one JVM start for all the Spark-backed CLI checks: a batch of commands in one process
    code = (
        "import sys, io, contextlib, json; sys.argv=['cli.py']; from statelens import cli\n"
        "out = []\n"
        "for argv in json.loads(sys.stdin.read()):\n"
        "    o, e = io.StringIO(), io.StringIO()\n"
        "    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):\n"
        "        rc = cli.main(argv)\n"
        "    out.append([rc, o.getvalue(), e.getvalue()])\n"
        "print('@@' + json.dumps(out))\n"
    )
    cmds = [
        ["sql", sample("unbounded_agg"), "SELECT count(*) AS n, max(value.count) AS c FROM op0", "--json"],
        ["sql", sample("unbounded_agg"), "SELECT count(*) AS n FROM op0", "--batch", "2", "--json"],
        ["sql", sample("join_hdfs"), "SELECT key.field0 AS k, value.order_time AS t FROM op0_left ORDER BY k LIMIT 2", "--json"],
        ["sql", sample("unbounded_agg"), "SELECT count(*) AS n FROM op0"],
        ["sql", sample("unbounded_agg"), "SELECT * FROM op5", "--json"],
        ["sql", sample("unbounded_agg"), "SELECT 1", "--batch", "40", "--json"],
        ["why-missing", sample("join_rocksdb"), "ord-155", "ord-6", 'it\'s \\ "odd"', "--json"],
        ["why-missing", sample("join_rocksdb"), "ord-155"],
        ["why-missing", sample("join_rocksdb"), "ord-1", "--key-field", "nope"],
    ]
    r = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(cmds), capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    results = json.loads(r.stdout.split("@@", 1)[1])
    (rc, out, _), (rc2, out2, _), (rc3, out3, _), (rc4, out4, _), (rc5, _, err5), (rc6, _, err6), *why = results
    assert rc == 0 and json.loads(out) == {
        "columns": ["n", "c"],
        "rows": [[300, 1]],
        "engine": "native",
        "engines": {"op0": "native"},
    }
    assert rc2 == 0 and json.loads(out2) == {"columns": ["n"], "rows": [[75]], "engine": "native", "engines": {"op0": "native"}}
    j3 = json.loads(out3)
    assert rc3 == 0 and j3["columns"] == ["k", "t"] and len(j3["rows"]) == 2 and j3["rows"][0][1].endswith("+00:00")
    assert rc4 == 0 and "300" in out4 and "1 rows at batch 11" in out4
    assert rc5 == 2 and "op5" in err5 and "Tables: op0" in err5 and len(err5.strip().splitlines()) == 1
    assert rc6 == 2 and "Batch 40 is not available" in err6

    (rc7, out7, _), (rc8, out8, _), (rc9, _, err9) = why
    assert rc7 == 0
    j7 = json.loads(out7)
    assert [r["key"] for r in j7["results"]] == ["ord-155", "ord-6", 'it\'s \\ "odd"']
    first = j7["results"][0]
    assert set(first) >= {"key", "verdict", "side", "was_matched", "evicted_at_batch", "explanation", "evidence"}
    assert (first["verdict"], first["side"], first["was_matched"], first["evicted_at_batch"]) == (
        "waiting_for_other_side",
        "left",
        False,
        None,
    )
    second = j7["results"][1]
    assert (second["verdict"], second["side"], second["was_matched"], second["evicted_at_batch"]) == ("evicted", "both", True, 8)
    assert j7["results"][2]["verdict"] == "never_in_state"
    assert (
        rc8 == 0
        and "ord-155: waiting · cause unknown (operator 0) · operator 0's verdict waiting_for_other_side (left side)" in out8
    )
    assert "near miss: 'ORD-155'" in out8
    assert rc9 == 2 and "no field 'nope'" in err9 and len(err9.strip().splitlines()) == 1


def test_sql_without_java_reads_natively_and_spark_says_how_to_fix_it() -> None:
    r = run_cli("sql", sample("unbounded_agg"), "SELECT count(*) AS n FROM op0", "--json", env=no_java_env())
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == [[300]]
    r = run_cli("sql", sample("unbounded_agg"), "SELECT count(*) FROM op0", "--engine", "spark", env=no_java_env())
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert "Spark is not available: Java was not found" in line and "openjdk-17" in line


def _bad_input(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """One bad invocation per command, and a word its one error line must hold. why-missing's
    fails after Spark has started (the key field is checked against the state's schema), so
    Spark's start-up chatter would show there."""
    cp = sample("join_hdfs")
    return {
        "overview": (["overview", "/no/such/checkpoint"], "Checkpoint not found"),
        "doctor": (["doctor", str(tmp)], "empty folder"),
        "serve": (["serve", "--port", "1"], "unrecognized arguments"),
        "sql": (["sql", cp, "SELECT 1", "--batch", "999"], "Batch not available"),
        "why-missing": (["why-missing", cp, "ord-1", "--key-field", "nope"], "no field 'nope'"),
        "progress": (["progress", cp, "--event-log", str(tmp / "none.log")], "does not exist"),
        "skew": (["skew", cp, "--store", "nope"], "no store 'nope'"),
        "growth": (["growth", cp, "--operator", "9"], "Operator 9"),
        "export": (["export", cp, "--chart", "skew", "--out", str(tmp / "chart.txt")], "Cannot tell the format"),
        "report": (["report", cp, "--out", str(tmp / "report.pdf")], "HTML file"),
        "unmatched": (["unmatched", cp, "--operator", "7"], "Operator 7"),
        "app": (["app", "8600"], "not a Streamlit option"),
        "ls": (["ls", str(tmp / "nowhere")], "does not exist"),
        "pipeline": (["pipeline", str(tmp / "nowhere")], "does not exist"),
        "preflight": (["preflight", cp], "Give the job's command after --"),
        "rebuild": (["rebuild", cp, "--to", str(tmp / "new")], "Give the changed job's command after --"),
        "repartition": (["repartition", cp, "--partitions", "0"], "--partitions must be 1 or more"),
    }


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("dedup", "ev-100"),  # HDFS files
        ("join_rocksdb", "ord-1"),  # RocksDB, a join's four stores
        ("transform_with_state", "u1"),
        ("windowed_agg", "user-1"),
        ("session_window", "u1"),
    ],
)
def test_one_operators_lookup_imports_neither_pyarrow_compute_nor_the_other_commands(name: str, key: str) -> None:
    """A cold one-operator lookup imports what it needs only: not ``pyarrow.compute`` (its import,
    40-50 ms, is a seventh of the lookup: the kernels are called by name), not the warm engine's
    policy, not the other 16 commands' parsers. The answer is the one given with them all loaded."""
    args = ["why-missing", str(SAMPLES / name), key, "--operator", "0", "--json"]
    code = (
        "import sys; sys.modules['pyarrow.compute'] = None\n"  # any import of it raises ImportError
        f"sys.argv = ['statelens', *{args!r}]\n"
        "from statelens import cli\n"
        "code = cli.main(process=True)\n"
        "loaded = [m for m in ('statelens.spark_io.runtime.policy', 'statelens.commands.sql', 'tomllib') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, "STATELENS_ENGINE": "native"}
    lean = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert lean.returncode == 0, lean.stderr[-1500:]
    full = run_cli(*args, "--engine", "native")
    assert full.returncode == 0, full.stderr[-1500:]
    assert json.loads(lean.stdout) == json.loads(full.stdout)
    assert json.loads(lean.stdout)["engine"] == "native"


@pytest.mark.parametrize(
    ("args", "code"), [(["sql", "dedup", "SELECT * FROM op0", "--json"], 0), (["why-missing", "nowhere", "k"], 2)]
)
def test_the_quick_exit_keeps_the_exit_code_the_whole_output_and_the_exit_handlers(
    tmp_path: Path, args: list[str], code: int
) -> None:
    """A one-command process ends without taking its modules apart (``cli._exit``), but as Python's own
    exit would: its exit code, every byte it printed (through a pipe), the exit handlers run."""
    marker = tmp_path / "handler-ran"
    argv = [str(SAMPLES / a) if a in ("dedup", "nowhere") else a for a in args]
    script = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'w').write('ran'))\n"
        f"sys.argv = ['statelens', *{argv!r}]\n"
        "from statelens.cli import run\n"
        "run()\n"
        "raise SystemExit('run() returned')\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == code, r.stderr[-1000:]
    assert marker.read_text() == "ran"
    if code == 0:
        rows = json.loads(r.stdout)["rows"]
        assert len(rows) == len(json.loads(run_cli(*argv).stdout)["rows"]) > 0
    else:
        assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""


def test_every_command_on_bad_input_prints_exactly_one_line(tmp_path: Path) -> None:
    from statelens.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    cases = _bad_input(tmp_path)
    assert set(cases) == set(sub.choices), "a command without a bad-input case"
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    env["STATELENS_SERVE_DIR"] = str(tmp_path / "no-serve")  # no served engine: each command starts its own
    for name, (args, word) in cases.items():
        r = run_cli(*args, env=env)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, (name, r.stderr)
        assert lines[0].startswith("statelens: ") and word in lines[0], (name, lines[0])


@pytest.mark.jvm  # a Spark process
def test_a_load_bigger_than_a_small_driver_answers_through_parquet_in_time() -> None:
    """A real JVM with a deliberately small driver (512 MiB heap, maxResultSize 1 MiB): a load estimated
    past it is written to Parquet by the executors and answered, not collected until the driver
    dies or hangs (``STATELENS_STATE_EXPANSION`` makes the small sample's estimate big)."""
    import time

    env = {
        **os.environ,
        "PYSPARK_SUBMIT_ARGS": "--driver-memory 512m --conf spark.driver.maxResultSize=1m pyspark-shell",
        "STATELENS_STATE_EXPANSION": "1000000",
    }
    start = time.monotonic()
    r = run_cli("sql", sample("windowed_agg"), "SELECT count(*) AS n FROM op0", "--engine", "spark", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - start < 240
    native = run_cli("sql", sample("windowed_agg"), "SELECT count(*) AS n FROM op0", "--json")
    assert json.loads(r.stdout)["rows"] == json.loads(native.stdout)["rows"]


@pytest.mark.parametrize(
    ("flag", "where", "says"),
    [
        ("--sink", "missing", "--sink {p} does not exist: give the file sink's folder as it is now"),
        ("--input-root", "missing", "--input-root {p} does not exist: give the folder the input files are in now"),
        ("--sink", "file", "--sink {p} is a file, not a folder"),
    ],
)
def test_a_sink_or_input_folder_that_is_not_there_is_one_line_never_silently_unused(
    tmp_path: Path, flag: str, where: str, says: str
) -> None:
    given = tmp_path / "sink"
    if where == "file":
        given.write_text("not a folder")
    r = run_cli("why-missing", sample("file_sink_agg"), "user-1", flag, str(given))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and r.stdout == "" and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"statelens: Invalid input: {says.format(p=given)}"), lines[0]


FAILING_JOB = """
import sys
from pyspark.sql import SparkSession, functions as F
root = sys.argv[1]
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", 2).getOrCreate())
boom = F.udf(lambda s: 1 // 0, "int")  # every record: the first batch fails
df = spark.readStream.schema("user_id STRING, ts TIMESTAMP").json(root + "/in").where(boom("user_id") > 0)
q = (df.withWatermark("ts", "5 minutes").groupBy("user_id").count().writeStream.outputMode("update").format("console")
     .option("checkpointLocation", root + "/cp").trigger(availableNow=True).start())
try:
    q.awaitTermination()
except Exception:
    pass
"""


@pytest.mark.jvm  # a Spark process
def test_a_query_that_failed_in_its_first_batch_is_one_line_for_each_diagnosis(tmp_path: Path) -> None:
    """A job that died in batch 0 leaves offsets/0 and no commit: each diagnosis says so in one line
    (exit 2), naming the batch; why-missing and growth crashed on it (an IndexError)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part-0.json").write_text('{"user_id": "u-1", "ts": "2026-01-01T00:01:00Z"}\n')
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    job = subprocess.run([sys.executable, "-c", FAILING_JOB, str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    cp = tmp_path / "cp"
    assert (cp / "offsets" / "0").is_file() and not any((cp / "commits").glob("[0-9]*")), job.stderr[-2000:]
    for args in (["why-missing", "u-1"], ["growth"], ["skew"], ["unmatched"], ["report", "--out", str(tmp_path / "r.html")]):
        r = run_cli(args[0], str(cp), *args[1:])
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, (args, r.stderr[-2000:])
        assert "no committed batch yet: batch 0 is in offsets/ and not committed" in lines[0], lines[0]


def test_the_input_root_given_twice_finds_the_file_no_batch_read_without_a_jvm() -> None:
    """A generated pipeline with cleanSource=archive, moved since Spark ran it: the files its batches
    read are in the archive, the file written while the job was stopped (no batch read it) is in the
    source's folder. Given both, the answer names that file; given the archive alone, it cannot."""
    folder = SAMPLES / "generated" / "seed-2409"
    (key,) = [
        k["key"] for k in json.loads((folder / "pipeline.json").read_text())["keys"] if k["design"].startswith("never read")
    ]
    (stale,) = [p for p in (folder / "inputs").rglob("*") if p.is_file()]
    base = ["why-missing", str(folder / "checkpoint"), key, "--sink", str(folder / "sink"), "--engine", "native", "--json"]

    def detail(*roots: Path) -> dict[str, Any]:
        r = run_cli(*base, *(a for root in roots for a in ("--input-root", str(root))), env=no_java_env())
        assert r.returncode == 0, r.stderr
        (answer,) = json.loads(r.stdout)["results"]
        return answer

    both = detail(folder / "archive", folder / "inputs")
    assert (both["outcome"], both["cause"]) == ("never_in_input", "never_in_input")
    assert stale.name in both["cause_at"]["detail"] and "no batch read it" in both["cause_at"]["detail"]
    alone = detail(folder / "archive")
    assert alone["outcome"] == "never_in_input" and stale.name not in alone["cause_at"]["detail"]
