"""Fixtures: one SparkSession for the suite, private copies of samples to damage.

The checksums of every file under sample_checkpoints/ are taken when the session starts;
tests/test_zz_readonly.py (collected last) proves nothing changed them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from support import BASELINE, SAMPLES, sample_checksums


def pytest_sessionstart(session: pytest.Session) -> None:
    BASELINE.update(sample_checksums())
    # the file cache and the key index of this run, not the user's (subprocesses inherit it)
    os.environ.setdefault("STATELENS_CACHE_DIR", tempfile.mkdtemp(prefix="statelens-test-cache-"))


@pytest.fixture(scope="session", autouse=True)
def chart_renderer() -> Any:
    """One Chromium for every PNG and SVG the tests render in this process (kaleido's sync server:
    0.2 s an image instead of 2.4 s for a Chromium each); the same renderer, only kept running."""
    import warnings

    import kaleido

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kaleido.start_sync_server(silence_warnings=True)
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kaleido.stop_sync_server(silence_warnings=True)


@pytest.fixture(scope="session")
def spark() -> Any:
    from spark_io.runtime import session

    return session.get_spark()


@pytest.fixture
def copy_sample(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A private copy of a sample checkpoint, to damage in tests."""

    def make(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(SAMPLES / name, dest)
        return dest

    return make
