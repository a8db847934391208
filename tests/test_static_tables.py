"""A stream joined with a static table read from one file (``spark.read.csv(".../countries.csv")``), as
users write it (tests/jobs/static_job.py, run for real with its event log): the table is read where
the plan says, or where it is now under ``--input-root`` (the same relative path); a key that lives
only in the table (a region) is found through it, and an order the inner join dropped is
``no_match_in_input`` with the table. The truth is the sink's files as Spark reads them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import statelens
from support import ROOT

pytestmark = pytest.mark.jvm  # the job runs for real


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("static") / "job"
    r = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "jobs" / "static_job.py"), str(base)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return base


def sink_regions(base: Path) -> set[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = pa.concat_tables([pq.read_table(f) for f in (base / "sink").glob("*.parquet")]).to_pylist()
    return {r["region"] for r in rows}


def answers(base: Path, *keys: str, **kw: Any) -> dict[str, dict[str, Any]]:
    found = statelens.open(str(base / "cp")).why_missing(*keys, event_log=str(base / "logs"), **kw).to_dict()["results"]
    return {r["key"]: r for r in found}


def test_a_table_read_from_one_file_is_followed(job: Path) -> None:
    assert "EMEA" in sink_regions(job)  # the truth: the sink holds EMEA's windows
    got = answers(job, "EMEA")
    assert got["EMEA"]["outcome"] == "written" and got["EMEA"]["fate"]["records"], got["EMEA"]["fate"]
    dropped = answers(job, "ord-zz", "ord-1-1", key_field="order_id")
    assert (dropped["ord-zz"]["outcome"], dropped["ord-zz"]["cause"]) == ("lost", "no_match_in_input")
    assert "countries.csv" in dropped["ord-zz"]["cause_at"]["detail"]
    assert dropped["ord-1-1"]["outcome"] == "written"


def test_a_moved_table_is_found_under_the_input_root(job: Path, tmp_path: Path) -> None:
    """The job's folder moved: the table is looked for at its relative path under --input-root."""
    moved = tmp_path / "moved"
    shutil.copytree(job / "in", moved / "in")
    shutil.copytree(job / "ref", moved / "ref")
    shutil.move(str(job / "ref"), str(tmp_path / "gone"))  # not where the plan says any more
    try:
        got = answers(job, "ord-zz", key_field="order_id", input_root=str(moved))
    finally:
        shutil.move(str(tmp_path / "gone"), str(job / "ref"))
    assert (got["ord-zz"]["outcome"], got["ord-zz"]["cause"]) == ("lost", "no_match_in_input")
    assert str(moved / "ref") in got["ord-zz"]["cause_at"]["detail"]
