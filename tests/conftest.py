"""Fixtures: one SparkSession for the suite, private copies of samples to damage.

The checksums of every file under sample_checkpoints/ are taken when the session starts;
tests/test_zz_readonly.py (collected last) proves nothing changed them. Run in parallel
(``scripts/test.sh``: pytest-xdist, whole files per worker), the proof is made once more by the
controller after every worker has finished: a changed byte fails the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pytest

from support import BASELINE, SAMPLES, sample_checksums


def pytest_sessionstart(session: pytest.Session) -> None:
    # the samples' checksums, taken once: a parallel run's workers read the controller's (taken
    # before they start), rather than each hashing the samples' 200 MB again
    kept = os.environ.get("STATELENS_TEST_BASELINE")
    if kept and hasattr(session.config, "workerinput"):
        BASELINE.update(json.loads(Path(kept).read_text()))
    else:
        BASELINE.update(sample_checksums())
        if getattr(session.config.option, "numprocesses", None):
            path = Path(tempfile.mkdtemp(prefix="statelens-test-baseline-")) / "checksums.json"
            path.write_text(json.dumps(BASELINE))
            os.environ["STATELENS_TEST_BASELINE"] = str(path)
    # the file cache and the key index of this run, not the user's (subprocesses inherit it)
    os.environ.setdefault("STATELENS_CACHE_DIR", tempfile.mkdtemp(prefix="statelens-test-cache-"))
    # Every JVM spark-submit starts for the tests (the suite's session, the CLI's, preflight's jobs,
    # Connect servers): the quick JIT only and one GC thread (small data, short lives: a third less
    # CPU, tests/test_trust.py alone 140 -> 91 CPU s), and Spark's classes mapped from one archive
    # (tests/jvm_archive.py: a JVM's start in half the CPU), Hadoop's local file system without a
    # process per file created or renamed (the same, in process). The answers the same.
    if "SPARK_SUBMIT_OPTS" not in os.environ:
        from jvm_archive import spark_env

        os.environ.update(spark_env())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The parallel run's controller (no worker input, workers started): every sample byte for
    byte as it was before any worker began."""
    if hasattr(session.config, "workerinput") or not getattr(session.config.option, "numprocesses", None):
        return
    _record_durations(session)
    kept = os.environ.pop("STATELENS_TEST_BASELINE", None)  # the workers' copy of the checksums
    if kept:
        shutil.rmtree(Path(kept).parent, ignore_errors=True)
    from support import changed_samples

    changes = changed_samples()
    if changes:
        session.config.get_terminal_writer().line(f"sample checkpoints changed by the run: {changes[:20]}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# What each test file costs in CPU: its tests' processes (pytest's, the JVMs, browsers and servers
# they start), listed at the end of a run. On a busy machine a test's duration is mostly its wait
# for a core; its CPU is what running it takes. A process whose parent ends first is counted only
# while that parent lives (a job's or CLI command's JVM, which stops by itself once its Python has
# exited, is reparented and never waited for): the table is a lower bound (1,477 of the 2,095 CPU s
# process accounting gave a whole run on 2026-11-30: 46 job and CLI JVMs outlived their Python, 399 CPU s).
CPU_STARTED = pytest.StashKey[float]()
CPU_BY_FILE: Counter[str] = Counter()


def _tree_cpu() -> float:
    """CPU seconds of this process, of its live descendants, and of every process any of them has
    waited for (a browser's page processes end with their page: its own process waited for them)."""
    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            c = p.cpu_times()
            total += c.user + c.system + c.children_user + c.children_system
    return total


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[CPU_STARTED] = _tree_cpu()  # before the test's fixtures start anything


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    rep = yield
    if call.when == "teardown" and CPU_STARTED in item.stash:
        rep.user_properties.append(("cpu_s", _tree_cpu() - item.stash[CPU_STARTED]))
    return rep


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:  # the controller's copy of a worker's report too
        if name == "cpu_s":
            CPU_BY_FILE[report.nodeid.split("::")[0]] += float(value)
    SECONDS_BY_FILE[report.nodeid.split("::")[0]] += report.duration


# The order test files start in (``scripts/test.sh`` keeps it: ``--no-loadscope-reorder``): the longest
# first (their seconds in a whole run, ``durations.json``), so that no long file starts last and keeps
# the other workers waiting for it at the end; a file not timed yet before them (it may be long);
# ``test_aa_*`` first of all (they want a fresh JVM), ``test_zz_*`` last (they check what the others
# left). ``durations.json`` is written again by ``STATELENS_RECORD_DURATIONS=1 bash scripts/test.sh``
# (seconds per file, setup to teardown, summed over its tests).
DURATIONS = Path(__file__).with_name("durations.json")
SECONDS_BY_FILE: Counter[str] = Counter()


def _start_order(items: list[pytest.Item]) -> None:
    known: dict[str, float] = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}

    def rank(item: pytest.Item) -> tuple[int, float]:
        path = item.nodeid.split("::")[0]
        name = Path(path).name
        return (0 if name.startswith("test_aa") else 2 if name.startswith("test_zz") else 1), -known.get(path, float("inf"))

    items.sort(key=rank)  # stable: a file's tests keep their order


def _record_durations(session: pytest.Session) -> None:
    if os.environ.get("STATELENS_RECORD_DURATIONS") and SECONDS_BY_FILE:
        times = {path: round(seconds) for path, seconds in sorted(SECONDS_BY_FILE.items())}
        DURATIONS.write_text(json.dumps(times, indent=1) + "\n")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not CPU_BY_FILE:
        return
    terminalreporter.section("CPU by test file (its processes while their parents live: Python, JVMs, browsers, servers), top 15")
    terminalreporter.line(f"{sum(CPU_BY_FILE.values()):8.0f} CPU s  every test file")
    for path, seconds in CPU_BY_FILE.most_common(15):
        terminalreporter.line(f"{seconds:8.0f} CPU s  {path}")


# What a test needs besides Python, as markers: ``jvm`` (Spark: the ``spark`` fixture, or a process that
# starts one), ``browser`` (Chromium: Playwright, or kaleido drawing a PNG or SVG), ``emulator`` (an
# object store on loopback). The fast lane (``scripts/test.sh --fast``) runs the tests with none of
# them, with Java and Chromium out of reach: a test that needs one and is not marked fails there.
HEAVY = ("jvm", "browser", "emulator")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _start_order(items)
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):  # directly or through another fixture
            item.add_marker(pytest.mark.jvm)
        if "browser" in item.path.parts:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(autouse=True)
def _renderer_for_images(request: pytest.FixtureRequest) -> None:
    """A test that draws images (marked ``browser``) gets the shared renderer; the others start none."""
    if request.node.get_closest_marker("browser") is not None:
        request.getfixturevalue("chart_renderer")


@pytest.fixture(scope="session")
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
    from statelens.spark_io.runtime import session

    return session.get_spark()


@pytest.fixture(autouse=True)
def _session_confs_kept(request: pytest.FixtureRequest) -> Any:
    """A test on the suite's session leaves its confs as it found them. A conf unset rather than set
    back falls to Spark's default for every later test of that worker (``spark.sql.shuffle.partitions``
    unset: 200 partitions instead of 8, each later query 25 times the state files): put back, and
    named as a failure of the test that left it."""
    if "spark" not in request.fixturenames:
        yield
        return
    session = request.getfixturevalue("spark")
    before = dict(session.conf.getAll)
    yield
    try:
        after = dict(session.conf.getAll)
    except Exception:  # a test that stopped the session: nothing left to keep
        return
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    for k in changed:
        session.conf.set(k, before[k]) if k in before else session.conf.unset(k)
    assert not changed, f"the test left the session's confs changed (now put back): {changed}"


@pytest.fixture(autouse=True)
def _engine_kept() -> Any:
    """A test leaves the engine choice (``--engine``, ``statelens.configure``: one per process) as it
    found it: a command run in the test's process with ``--engine native`` left every later test of
    that worker on the native engine alone (a read that needs Spark failed). Put back, and named as a
    failure of the test that left it."""
    from statelens.spark_io.runtime import engine_choice

    before = engine_choice.current()
    yield
    after = engine_choice.current()
    engine_choice.configure(before)
    assert after == before, f"the test left the engine {after!r} (now put back to {before!r})"


@pytest.fixture
def copy_sample(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A private copy of a sample checkpoint, to damage in tests."""

    def make(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(SAMPLES / name, dest)
        return dest

    return make
