"""Fixtures: one SparkSession for the suite, private copies of samples to damage.

The checksums of every file under sample_checkpoints/ are taken when the session starts;
tests/test_zz_readonly.py (collected last) proves nothing changed them. Run in parallel
(``scripts/test.sh``: pytest-xdist, whole files per worker), the proof is made once more by the
controller after every worker has finished: a changed byte fails the run.
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
    # Every JVM spark-submit starts for the tests (the suite's session, the CLI's, preflight's jobs,
    # Connect servers): the quick JIT only and one GC thread. Small data, short lives: a third less
    # CPU (tests/test_trust.py alone: 140 -> 91 CPU s) and the answers the same.
    os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The parallel run's controller (no worker input, workers started): every sample byte for
    byte as it was before any worker began."""
    if hasattr(session.config, "workerinput") or not getattr(session.config.option, "numprocesses", None):
        return
    from support import changed_samples

    changes = changed_samples()
    if changes:
        session.config.get_terminal_writer().line(f"sample checkpoints changed by the run: {changes[:20]}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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
