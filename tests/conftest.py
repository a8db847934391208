"""Shared fixtures: the sample checkpoints, their generator's data, one SparkSession.

The checksums of every file under sample_checkpoints/ are taken when the session starts;
tests/test_zz_readonly.py (collected last) proves nothing changed them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_checkpoints"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(SAMPLES))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import generate  # noqa: E402  (the sample generator: its data is the ground truth)

SAMPLE_NAMES = sorted(p.name for p in SAMPLES.iterdir() if (p / "offsets").is_dir())


def tree_checksums(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def sample_checksums() -> dict[str, dict[str, str]]:
    return {name: tree_checksums(SAMPLES / name) for name in SAMPLE_NAMES}


BASELINE: dict[str, dict[str, str]] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    BASELINE.update(sample_checksums())


def scenario(name: str) -> generate.Scenario:
    return next(s for s in generate.scenarios() if s.name == name)


def ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


def sample(name: str) -> str:
    return str(SAMPLES / name)


@pytest.fixture(scope="session")
def spark() -> Any:
    from spark_io import session

    return session.get_spark()


@pytest.fixture
def copy_sample(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A private copy of a sample checkpoint, to damage in tests."""

    def make(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(SAMPLES / name, dest)
        return dest

    return make
