"""Long reads with progress and cancellation.

``run_cancellable`` runs a read in a worker thread whose Spark operations carry a tag, and
calls ``tick`` with the progress (elapsed time; finished and total tasks of the running
stages on local Spark) until it is done. If ``tick`` raises (in the app: the user clicked
Cancel, which stops the page's script run), the read's Spark jobs are cancelled and the
exception goes on: a job group on classic Spark, an operation tag over Spark Connect (where
task counts are not available). Work outside Spark that the read runs (a DuckDB query) says how
it is stopped with ``stopped_on_cancel``.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from statelens.spark_io.runtime import session

T = TypeVar("T")


@dataclass(frozen=True)
class Progress:
    elapsed: float
    tasks_done: int | None = None
    tasks_total: int | None = None

    def describe(self) -> str:
        tasks = f" · {self.tasks_done:,}/{self.tasks_total:,} tasks" if self.tasks_total else ""
        return f"{self.elapsed:.0f} s{tasks}"


def _tasks() -> tuple[int | None, int | None]:
    """Finished and total tasks of the active stages (local or cluster Spark, not Connect)."""
    if session.target().remote or not session.is_running():
        return None, None
    try:
        tracker = session.get_spark().sparkContext.statusTracker()
        infos = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
        infos = [i for i in infos if i is not None]
        if not infos:
            return None, None
        return sum(i.numCompletedTasks for i in infos), sum(i.numTasks for i in infos)
    except Exception:  # progress is best effort
        return None, None


def run_cancellable(
    fn: Callable[[], T],
    tick: Callable[[Progress], None],
    interval: float = 0.5,
    prepare_thread: Callable[[threading.Thread], Any] | None = None,
) -> T:
    tag = f"statelens-{uuid.uuid4().hex[:12]}"
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            session.tag_thread(tag)  # no JVM started for it: a read that needs Spark starts it, tagged
            try:
                result["value"] = fn()
            finally:
                session.untag_thread()  # (a job group needs no clearing: it lives in this thread, which ends here)
        except BaseException as e:  # handed to the caller's thread
            result["error"] = e

    # the caller's context goes with it (the signed-in user whose paths may be opened, the question)
    worker = threading.Thread(target=contextvars.copy_context().run, args=(work,), name=tag, daemon=True)
    if prepare_thread is not None:
        prepare_thread(worker)
    start = time.monotonic()
    worker.start()
    try:
        while worker.is_alive():
            worker.join(interval)
            if worker.is_alive():
                tick(Progress(time.monotonic() - start, *_tasks()))
    except BaseException:
        cancel(tag)
        raise
    if "error" in result:
        raise result["error"]
    return result["value"]  # type: ignore[no-any-return]


_stoppers: dict[str, list[Callable[[], None]]] = {}
_stoppers_lock = threading.Lock()


@contextlib.contextmanager
def stopped_on_cancel(stop: Callable[[], None]) -> Iterator[None]:
    """While the block runs, cancelling the read this thread runs for calls ``stop`` (a DuckDB
    query's ``interrupt``): a cancelled query leaves the server's cores to the other sessions."""
    tag = session.thread_tag()
    if tag is None:  # not a cancellable read (the CLI, a notebook)
        yield
        return
    with _stoppers_lock:
        _stoppers.setdefault(tag, []).append(stop)
    try:
        yield
    finally:
        with _stoppers_lock:
            left = [s for s in _stoppers.get(tag, []) if s is not stop]
            if left:
                _stoppers[tag] = left
            else:
                _stoppers.pop(tag, None)


def cancel(tag: str) -> None:
    with _stoppers_lock:
        stops = _stoppers.pop(tag, [])
    for stop in stops:
        with contextlib.suppress(Exception):  # already over
            stop()
    if not session.is_running():
        return  # no Spark work to cancel: native reads end with their thread's question
    with contextlib.suppress(Exception):  # nothing running, or Spark is gone
        spark = session.get_spark()
        if session.target().remote:
            spark.interruptTag(tag)
        else:
            spark.sparkContext.cancelJobGroup(tag)
