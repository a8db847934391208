"""Download progress: bytes fetched from remote storage, reported to whoever asked (the CLI prints a
line on stderr, the app draws a bar) once downloads have taken more than a second.

The reporter belongs to the question that set it (a context variable: the fetch pool's threads
run in a copy of the asking thread's context, so their downloads count for it, and one browser
session's downloads never move another's bar). ``report`` is called from the thread that waits
on the downloads, so a reporter may touch that thread's UI.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")
Reporter = Callable[[int, int, int], None]  # bytes done, bytes known so far, files done
SHOW_AFTER_S = 1.0


@dataclass
class _Downloads:
    reporter: Reporter
    done: int = 0
    total: int = 0
    files: int = 0
    started: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


_CURRENT: contextvars.ContextVar[_Downloads | None] = contextvars.ContextVar("statelens_downloads", default=None)
_local = threading.local()


@contextmanager
def reporting(reporter: Reporter) -> Iterator[None]:
    """Report this question's downloads to ``reporter`` while the block runs."""
    token = _CURRENT.set(_Downloads(reporter))
    try:
        yield
    finally:
        _CURRENT.reset(token)


@contextmanager
def unreported() -> Iterator[None]:
    """Downloads in the block are nobody's question (background work between questions: the page
    that started it may be gone, and its bar with it)."""
    token = _CURRENT.set(None)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def started(size: int) -> None:
    d = _CURRENT.get()
    if d is None:
        return
    with d.lock:
        d.started = d.started or time.monotonic()
        d.total += size


def fetched(size: int) -> None:
    d = _CURRENT.get()
    if d is None:
        return
    with d.lock:
        d.done += size
        d.files += 1
    if not in_worker():
        report()


def report() -> None:
    """Tell the reporter, from the calling thread, once downloads have taken over a second."""
    d = _CURRENT.get()
    if d is None:
        return
    with d.lock:
        if not d.started or time.monotonic() - d.started < SHOW_AFTER_S:
            return
        done, total, files = d.done, d.total, d.files
    d.reporter(done, total, files)


def in_worker() -> bool:
    return bool(getattr(_local, "worker", False))


def as_worker(fn: Callable[[T], R], item: T) -> R:
    _local.worker = True
    try:
        return fn(item)
    finally:
        _local.worker = False
