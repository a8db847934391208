"""Checkpoints that are not local folders: the log reader's facts come through Spark's binaryFile
reader. file:// URIs are forced through that path (STATELENS_LOGS_VIA_SPARK) and must give the
same batches, watermarks, commits, operators, state files and sizes as the local reader."""

from __future__ import annotations

import re

import pytest

from statelens.analysis.core.errors import CheckpointNotFound, NotACheckpoint
from statelens.analysis.core.question import KeyQuestion
from statelens.spark_io.gather.diagnosis import why_missing
from statelens.spark_io.logs.checkpoint import list_state_files, read_checkpoint
from statelens.spark_io.logs.files import SparkFiles, open_files
from statelens.spark_io.storage.locations import is_local
from support import SAMPLE_NAMES, sample

pytestmark = [pytest.mark.usefixtures("spark"), pytest.mark.emulator]


def via_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATELENS_LOGS_VIA_SPARK", "1")


def test_local_and_remote_paths_are_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    assert is_local("/data/cp") and is_local("file:///data/cp") and not is_local("s3a://bucket/cp")
    assert not is_local("abfss://c@acct.dfs.core.windows.net/cp") and not is_local("hdfs://nn/cp")
    via_spark(monkeypatch)
    assert not is_local("file:///data/cp") and is_local("/data/cp")
    assert isinstance(open_files("file://" + sample("dedup")), SparkFiles)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_same_facts_through_spark(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    local, local_files = read_checkpoint(sample(name)), list_state_files(sample(name))
    via_spark(monkeypatch)
    uri = "file://" + sample(name)
    remote = read_checkpoint(uri)
    assert remote.path == uri
    assert (remote.query_id, remote.batches, remote.conf) == (local.query_id, local.batches, local.conf)
    assert remote.operators == local.operators
    assert sorted(list_state_files(uri), key=lambda f: f.path) == sorted(local_files, key=lambda f: f.path)


def test_diagnosis_on_a_uri_read_through_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    via_spark(monkeypatch)
    (r,) = why_missing("file://" + sample("join_hdfs"), KeyQuestion(("ord-154",))).results
    assert r.verdict == "condition_not_met"


def test_bad_uris(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    via_spark(monkeypatch)
    with pytest.raises(CheckpointNotFound):
        read_checkpoint(f"file://{tmp_path}/missing")
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(NotACheckpoint):
        read_checkpoint(f"file://{tmp_path}")


def test_storage_without_its_connector_names_the_cause_and_the_fix() -> None:
    """s3a:// through Spark (--engine spark) without hadoop-aws: Spark's real cause (a missing
    filesystem class) and what to add, in one line; never py4j's 'An error occurred while calling
    o47.load'. (With the default engine State Lens reads S3 itself: test_object_storage.py.)"""
    import subprocess
    import sys

    from support import ROOT

    p = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "sql", "s3a://bucket/checkpoints/orders", "SELECT 1", "--engine", "spark"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    err = p.stderr
    assert "S3AFileSystem not found" in err and "--packages org.apache.hadoop:hadoop-aws:" in err
    assert "error occurred while calling" not in err and not re.search(r"\bo\d+\.load\b", err)
