"""STATELENS_ALLOWED_ROOTS: on a shared host only checkpoints under the allowed roots open."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from statelens.analysis.core.errors import NotAllowed
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.storage.gate import check_allowed
from support import ROOT, SAMPLES


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    allowed = tmp_path / "team"
    allowed.mkdir()
    shutil.copytree(SAMPLES / "dedup", allowed / "dedup")
    shutil.copytree(SAMPLES / "dedup", tmp_path / "other")
    monkeypatch.setenv("STATELENS_ALLOWED_ROOTS", f"{allowed}, s3a://lake/team/")
    return allowed


def test_inside_the_roots_opens(roots: Path) -> None:
    assert len(read_checkpoint(str(roots / "dedup")).batches) == 13
    assert len(read_checkpoint(f"file://{roots}/dedup").batches) == 13
    check_allowed("s3a://lake/team/orders/cp")


@pytest.mark.parametrize(
    "make",
    [
        lambda r: str(r.parent / "other"),  # a sibling folder
        lambda r: f"{r}/../other",  # .. out of the root
        lambda r: "/etc",  # anything else on the host
        lambda r: "/etc/hostname",
        lambda r: "s3a://lake/other/cp",
        lambda r: "s3a://lake/team/../other/cp",
        lambda r: "s3a://lake/teamster/cp",  # a prefix of the name is not the folder
    ],
)
def test_outside_the_roots_is_refused(roots: Path, make) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(NotAllowed, match="outside the folders this State Lens may open"):
        read_checkpoint(make(roots))  # refused before anything, Spark included, touches it


def test_symlink_out_of_a_root_is_refused(roots: Path) -> None:
    link = roots / "sneaky"
    os.symlink(roots.parent / "other", link)
    with pytest.raises(NotAllowed):
        read_checkpoint(str(link))


def test_refused_before_touching_the_path(roots: Path) -> None:
    # the answer for a missing path outside the roots is the same refusal: no existence leak
    with pytest.raises(NotAllowed):
        read_checkpoint("/no/such/folder")


def test_cli_refuses_with_exit_2(roots: Path) -> None:
    env = {**os.environ, "STATELENS_ALLOWED_ROOTS": str(roots)}
    r = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "overview", str(SAMPLES / "dedup")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert r.returncode == 2 and "Checkpoint not allowed" in r.stderr and len(r.stderr.strip().splitlines()) == 1
