"""A checkpoint opened: what every question of it shares (its files and log facts read once when it
is kept, the state a kept checkpoint's questions read) and ``_question`` (each call one question).
The questions themselves are beside it, one module each (``ask_*.py``); ``statelens.checkpoint``
composes them into ``Checkpoint``."""

from __future__ import annotations

import collections
import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

R = TypeVar("R")


@contextlib.contextmanager
def question() -> Iterator[None]:
    """The block is one question (a CLI command): each remote folder is listed once in it, whichever
    methods it calls."""
    from statelens.spark_io.storage import question as asked

    with asked():
        yield


def _question(method: Callable[..., R]) -> Callable[..., R]:
    @functools.wraps(method)
    def asked(*args: Any, **kwargs: Any) -> R:
        from statelens.spark_io.storage import question

        with question():
            return method(*args, **kwargs)

    return asked


class _Kept:
    """What a kept checkpoint read, for the questions after: the newest ``size`` values per kind."""

    def __init__(self) -> None:
        self._values: dict[str, collections.OrderedDict[Any, Any]] = {}
        self._lock = threading.Lock()

    def get(self, kind: str, key: Any, make: Callable[[], R], size: int = 16) -> R:
        with self._lock:
            kept = self._values.setdefault(kind, collections.OrderedDict())
            if key in kept:
                kept.move_to_end(key)
                return cast(R, kept[key])
        value = make()  # outside the lock: two questions read at once
        self.put(kind, key, value, size)
        return value

    def peek(self, kind: str, key: Any) -> Any:
        """What was kept under ``key``, or None."""
        with self._lock:
            return self._values.get(kind, {}).get(key)

    def put(self, kind: str, key: Any, value: Any, size: int = 16) -> None:
        with self._lock:
            kept = self._values.setdefault(kind, collections.OrderedDict())
            kept[key] = value
            kept.move_to_end(key)
            while len(kept) > size:
                kept.popitem(last=False)


class Opened:
    """One checkpoint, before its questions: its path, what it keeps, its files and log facts."""

    def __init__(self, path: str, keep: bool = False) -> None:
        self.path = path
        self.keep = keep
        self._kept = _Kept()
        self._workspaces: dict[tuple[Any, ...], Any] = {}

    def _once(self, kind: str, key: Any, make: Callable[[], R], size: int = 16) -> R:
        """``make()``, kept for the questions after when the checkpoint is kept."""
        return self._kept.get(kind, key, make, size) if self.keep else make()

    def __repr__(self) -> str:
        return f"statelens.open({self.path!r})"

    @_question
    def _files(self) -> Any:
        """The checkpoint's folders and files (``spark_io.logs.files.Files``), listed, not read."""
        from statelens.spark_io.logs.files import open_files

        return open_files(self.path)

    def fingerprint(self) -> tuple[int, int]:
        """Changes when the checkpoint starts or commits a batch (a listing of offsets/ and commits/)."""
        from statelens.spark_io.logs.files import fingerprint

        return fingerprint(self.path)

    @_question
    def info(self) -> Any:
        """The checkpoint's logs and metadata (``analysis.core.model.CheckpointInfo``), no JVM."""
        from statelens.spark_io.logs.checkpoint import read_checkpoint

        return self._once("info", None, lambda: read_checkpoint(self.path))

    def _progress_log(self, event_log: str | None) -> Any:
        """The query's progress and plans from ``event_log`` (``analysis.runs.progress.ProgressLog``), or None."""
        if not event_log:
            return None
        from statelens.spark_io.logs.event_logs import log_fingerprint, read_progress

        key = (event_log, log_fingerprint(event_log) if self.keep else None)  # a running application's log grows
        return self._once("progress", key, lambda: read_progress(event_log, self.info()), 8)

    def _access(self, operator: int | None, batch: int | None = None) -> Any:
        """The state a kept checkpoint's questions read: every operator's (``operator`` None: the whole
        query), or one operator's at ``batch``, loaded for the keys after; None: read afresh."""
        if not self.keep:
            return None
        from statelens.analysis.core.model import resolve_batch
        from statelens.spark_io.readers.access import load_state, state_access

        info = self.info()
        if operator is None:
            return self._once("access", None, lambda: state_access(info), 4)
        at = resolve_batch(info, batch)
        return self._once("access", (operator, at), lambda: load_state(info, operator, at), 4)
