"""A checkpoint whose folders cannot be read: the doctor lists them as its problem, every other
command says which folder "cannot be read (permission denied)" in one line; never "unexpected
error", never "not found", never missing files.

The tests run as root here, which reads any file: the CLI runs without the two capabilities
that let root past file permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), as any other user
would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT, sample

AS_A_USER = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"] if os.geteuid() == 0 else []
FOLDERS = ["state/0/1", "state/0", "state", "offsets", "commits"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AS_A_USER, sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


@pytest.fixture
def locked(tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    if AS_A_USER and not shutil.which("setpriv"):
        pytest.fail("setpriv (util-linux) is needed to run the CLI without root's file capabilities")
    cp = tmp_path / "cp"
    shutil.copytree(sample("join_hdfs"), cp)
    folder = cp / request.param
    folder.chmod(0)
    yield cp, request.param
    folder.chmod(0o755)


@pytest.mark.parametrize("locked", FOLDERS, indirect=True)
def test_doctor_reports_unreadable_folders(locked: tuple[Path, str]) -> None:
    cp, folder = locked
    done = run("doctor", str(cp), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    (problem,) = [p for p in report["problems"] if p["code"] == "unreadable"]
    assert problem["severity"] == "error" and not report["ok"]
    assert any(f == folder or f.startswith(f"{folder}/") for f in problem["details"]["folders"]), problem
    assert "permission denied" in problem["meaning"]
    assert report["loadable_known"] is False
    assert not [p for p in report["problems"] if p["code"] == "state_files_missing"]  # unreadable is not missing


@pytest.mark.parametrize("locked", FOLDERS, indirect=True)
@pytest.mark.parametrize(
    "command", [["why-missing", "{cp}", "ord-5"], ["skew", "{cp}"], ["sql", "{cp}", "SELECT 1 FROM op0_left"]]
)
def test_other_commands_say_cannot_be_read(locked: tuple[Path, str], command: list[str]) -> None:
    cp, folder = locked
    done = run(*(a.format(cp=cp) for a in command))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "cannot be read (permission denied)" in done.stderr.lower(), done.stderr
    assert folder in done.stderr
    assert "unexpected error" not in done.stderr and "not found" not in done.stderr.lower()
