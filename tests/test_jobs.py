"""Long reads: progress while they run, and a cancel that really stops the Spark jobs."""

from __future__ import annotations

import re
import threading
import time

import pytest

from statelens.spark_io.runtime import jobs, session


class Cancelled(Exception):
    pass


def test_progress_and_result(spark) -> None:  # type: ignore[no-untyped-def]
    ticks: list[jobs.Progress] = []
    n = 40_000_000  # 2-4 s on 2 cores (the tests' JVMs: the quick JIT only): long enough to be seen running
    total = jobs.run_cancellable(
        lambda: spark.range(0, n, 1, 32).selectExpr("sum(id % 7) AS s").collect()[0]["s"], ticks.append, interval=0.1
    )
    assert total == 21 * (n // 7) + sum(range(n % 7))
    assert ticks and all(t.elapsed > 0 for t in ticks)
    assert any(t.tasks_total for t in ticks)  # local Spark reports task progress


def test_cancel_interrupts_the_spark_job(spark) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()

    def tick(p: jobs.Progress) -> None:
        if p.elapsed > 2:
            raise Cancelled  # what a click on Cancel does to the page's script run

    with pytest.raises(Cancelled):
        jobs.run_cancellable(lambda: spark.range(0, 10**12, 1, 16).selectExpr("sum(id * 7 % 13)").collect(), tick, interval=0.2)
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 30
    while tracker.getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert tracker.getActiveJobsIds() == []  # the job was interrupted, not left running
    # the reads' worker threads (named by their job tag), not the shared pools' idle threads
    workers = [t for t in threading.enumerate() if re.fullmatch(r"statelens-[0-9a-f]{12}", t.name)]
    for t in workers:
        t.join(30)
    assert not any(t.is_alive() for t in workers)
    assert time.monotonic() - started < 60  # summing 10^12 numbers would take far longer


def test_errors_in_the_read_reach_the_caller(spark) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ZeroDivisionError):
        jobs.run_cancellable(lambda: 1 // 0, lambda p: None)


def test_background_start(spark) -> None:  # type: ignore[no-untyped-def]
    session.start_in_background().join(60)
    assert session.is_running()
