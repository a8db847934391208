"""Why a restart failed, explained from Spark's real errors: each test runs a query, changes it the way
users do, restarts it on the same checkpoint with the pinned PySpark and explains Spark's exception
(``sample_checkpoints/restart_errors.py``; ``generate.py --restart-errors`` keeps the same cases under
``restart_errors/`` for the app and the CLI)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import restart_errors

from statelens.analysis.checkpoint.restart_error import RestartExplanation
from statelens.spark_io.logs.checkpoint import doctor, explain_restart_error
from support import ROOT, SAMPLES


@pytest.fixture
def explain(spark: Any, tmp_path: Path):  # type: ignore[no-untyped-def]
    def run(case: str) -> tuple[RestartExplanation, Path]:
        checkpoint = tmp_path / case
        error = restart_errors.restart(spark, case, checkpoint)
        return explain_restart_error(str(checkpoint), error), checkpoint

    return run


def test_a_grouping_key_added_is_named(explain) -> None:  # type: ignore[no-untyped-def]
    e, _ = explain("grouping_key_added")
    assert e.error_class == "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE" and e.operator_id == 0
    assert e.changes == ["field kind (StringType) added"]
    assert any("Revert the change to the operator's key" in w for w in e.ways_out)
    assert any("new checkpoint" in w for w in e.ways_out)


def test_a_changed_aggregate_is_named(explain) -> None:  # type: ignore[no-untyped-def]
    """count -> avg: avg keeps a sum beside the count (a count changed into a same-typed sum passes Spark's check)."""
    e, _ = explain("aggregate_changed")
    assert e.error_class == "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE" and e.operator_id == 0
    assert e.changes == ["field sum (DoubleType) added"]
    assert any("transformWithState" in w and "avro" in w for w in e.ways_out)


def test_an_added_operator_is_named(explain) -> None:  # type: ignore[no-untyped-def]
    e, _ = explain("operator_added")
    assert e.error_class == "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"
    assert e.changes == ["operator 1 (dedupe) added"] and e.operator_id == 1


def test_a_missing_delta_is_named_and_the_doctor_agrees(explain) -> None:  # type: ignore[no-untyped-def]
    e, checkpoint = explain("delta_missing")
    assert e.error_class == "CANNOT_LOAD_STATE_STORE.CANNOT_READ_DELTA_FILE_NOT_EXISTS" and e.operator_id == 0
    assert e.changes == ["state/0/0/3.delta (operator 0, partition 0, version 3) is missing"]
    report = doctor(str(checkpoint))
    assert "state_files_missing" in [p.code for p in report.problems]


def test_an_unfinished_repartition_is_named_and_the_doctor_agrees(explain) -> None:  # type: ignore[no-untyped-def]
    """A real offline repartition (2 -> 3 partitions) whose commit is gone: Spark refuses the restart."""
    e, checkpoint = explain("repartition_unfinished")
    assert e.error_class == "STREAMING_UNFINISHED_REPARTITION_DETECTED"
    assert e.changes == ["batch 3 repartitions the state from 2 to 3 partitions and has no commit"]
    assert any("same partition count" in w for w in e.ways_out)
    problems = {p.code: p for p in doctor(str(checkpoint)).problems}
    assert problems["unfinished_repartition"].severity == "error"
    assert problems["unfinished_repartition"].details == {"batches": [3], "from": 2, "to": 3}


def test_a_changed_provider_does_not_fail_the_restart_spark_keeps_the_recorded_one(spark: Any, tmp_path: Path) -> None:
    """Spark restores the provider from offsets/: the restart with RocksDB set ran on HDFS files."""
    checkpoint = tmp_path / "provider_changed"
    assert restart_errors.restart(spark, "provider_changed", checkpoint) == ""
    part = checkpoint / "state" / "0" / "0"
    assert (part / "4.delta").exists() and not list(part.glob("*.changelog")) and not list(part.glob("*.zip"))
    settings = {s.setting: s for s in doctor(str(checkpoint)).restart_settings}
    provider = settings["spark.sql.streaming.stateStore.providerClass"]
    assert provider.value.endswith("HDFSBackedStateStoreProvider") and provider.may_change == "no"


@pytest.mark.jvm  # a Spark process
def test_the_cli_explains_a_real_event_log_and_refuses_a_missing_file(tmp_path: Path) -> None:
    """The failed restart runs in an application of its own with ``spark.eventLog.enabled``: the CLI
    finds Spark's error in that event log (the query's termination event) and explains it."""
    checkpoint, logs = tmp_path / "checkpoint", tmp_path / "eventlog"
    logs.mkdir()
    run = [sys.executable, str(SAMPLES / "restart_errors.py"), "--case", "operator_added"]
    r = subprocess.run([*run, "--checkpoint", str(checkpoint), "--event-log", str(logs)], capture_output=True, text=True)
    assert r.returncode == 0 and "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA" in r.stdout, r.stderr[-2000:]
    (event_log,) = logs.iterdir()
    cli = [sys.executable, str(ROOT / "cli.py"), "doctor", str(checkpoint)]
    r = subprocess.run([*cli, "--error", str(event_log), "--json"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    explained = json.loads(r.stdout)["restart_error"]
    assert explained["error_class"] == "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"
    assert explained["changes"] == ["operator 1 (dedupe) added"]
    r = subprocess.run([*cli, "--error", "/nonexistent/error.txt"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--error" in r.stderr
