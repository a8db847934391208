"""What every storage gives: listings with sizes and modification times, whole and ranged reads,
and a local copy of a file for the libraries that want one (RocksDB opens SST files by path).

Paths are relative to the storage's root (``""`` is the root itself), always with ``/``. A missing
file or folder is ``FileNotFoundError`` (or an empty listing); a problem with the storage itself
(credentials, a missing bucket, a server that does not answer) is a ``StorageError`` that names
the URI and what to set.
"""

from __future__ import annotations

import contextvars
import os
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeVar, cast

from statelens.analysis.core.errors import StateLensError
from statelens.spark_io.storage import downloads

T = TypeVar("T")
R = TypeVar("R")

# files Spark writes once under their name and never changes: state versions and RocksDB's SST
# files; the log entries (offsets/<n>, commits/<n>, sources' logs), schema and checksum files, the
# query's id (metadata) and the operators' metadata (v1 is written anew when a query restarts: its
# time then differs).
# The cache knows a file by its URI, size and modification time, so a folder written anew by
# another query is never served from an old copy.
IMMUTABLE = re.compile(
    r"(^|/)(\d+(_[0-9a-fA-F-]+)?\.(delta|snapshot|changelog|zip)|[^/]+\.sst)$"
    r"|(^|/)(offsets|commits)/\d+$|(^|/)sources/\d+/\d+(\.compact)?$"
    r"|(^|/)_metadata/schema$|(^|/)_stateSchema/.+|\.crc$"
    r"|^metadata$|(^|/)_metadata/metadata$|(^|/)_metadata/v2/\d+(_[0-9a-fA-F-]+)?$"
)


@dataclass(frozen=True)
class Entry:
    """A file or folder: ``path`` relative to the storage's root."""

    path: str
    is_dir: bool
    size: int = 0
    mtime_ns: int = 0

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


class Storage(ABC):
    """One folder (or file) on one storage; ``uri`` as the user gave it, for messages."""

    uri: str
    remote: bool = False

    def where(self, rel: str) -> str:
        """The full location of ``rel``, for messages."""
        return self.uri.rstrip("/") + ("/" + rel if rel else "")

    @abstractmethod
    def child(self, rel: str) -> Storage:
        """The storage rooted at ``rel`` (no request is made)."""

    def stamp(self, rel: str) -> int:
        """Changes when a file is added to or removed from the folder ``rel`` (0: cannot be told)."""
        try:
            return hash(tuple((e.name, e.size, e.mtime_ns) for e in self.listdir(rel)))
        except (OSError, StateLensError):
            return 0

    @abstractmethod
    def info(self, rel: str) -> Entry | None:
        """The file or folder at ``rel``; None when nothing is there."""

    @abstractmethod
    def listdir(self, rel: str) -> list[Entry]:
        """The files and folders directly in ``rel`` (one listing), sorted by name; [] when it is missing."""

    @abstractmethod
    def walk(self, rel: str, unreadable: list[str] | None = None) -> list[Entry]:
        """Every file below ``rel``, sorted by path. A folder that cannot be read raises, or is added
        to ``unreadable`` and skipped."""

    @abstractmethod
    def read(self, rel: str, entry: Entry | None = None) -> bytes:
        """The whole file. ``entry`` (from a listing) saves a request; an immutable state file is
        kept in the local cache and read from there the next time."""

    @abstractmethod
    def open(self, rel: str, entry: Entry | None = None) -> BinaryIO:
        """The file for random access: only the ranges read are fetched."""

    @abstractmethod
    def local_file(self, rel: str, entry: Entry | None = None) -> str:
        """A local path holding the file's bytes: the file itself, or its copy in the cache."""

    def has_copy(self, rel: str, entry: Entry | None = None) -> bool:
        """Whether a remote file is in the local cache already (reading it costs no request)."""
        return False

    def read_many(self, rels: Iterable[str], entries: dict[str, Entry] | None = None) -> dict[str, bytes]:
        """Several files, fetched in parallel on remote storage."""
        rels = list(rels)
        got = self.map(lambda r: self.read(r, (entries or {}).get(r)), rels)
        return dict(zip(rels, got, strict=False))

    def map(self, fn: Callable[[T], R], items: Iterable[T], decodes: bool = False) -> list[R]:
        """``fn`` over ``items`` in order: in parallel on remote storage (requests wait on the network),
        with downloads reported from this thread. ``decodes``: ``fn`` is mostly compiled loops that
        release the GIL (a partition's decoding): on local storage too, one item per core."""
        items = list(items)
        if len(items) < 2 or not (self.remote or decodes):
            return [fn(i) for i in items]
        return parallel(fn, items, _POOL if self.remote else _CORES)


_POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="statelens-fetch")
_CORES = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="statelens-decode")
_QUESTION: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("statelens_question", default=None)
_QUESTION_LOCK = threading.Lock()


@contextmanager
def question() -> Iterator[None]:
    """One question (a CLI command, one run of an app page): inside it each remote folder is listed
    once, whoever asks; the next question lists again (a running query adds files). A question
    asked inside one (an API method another calls, the CLI's command) is part of it."""
    if _QUESTION.get() is not None:
        yield
        return
    token = _QUESTION.set({})
    try:
        yield
    finally:
        _QUESTION.reset(token)


def remembered(key: str, compute: Callable[[], R]) -> R:
    """``compute()`` once per question for ``key`` (every time outside a question)."""
    memo = _QUESTION.get()
    if memo is None:
        return compute()
    with _QUESTION_LOCK:
        if key in memo:
            return cast(R, memo[key])
    value = compute()
    with _QUESTION_LOCK:
        return cast(R, memo.setdefault(key, value))


def recalled(key: str) -> Any:
    """What ``remembered`` holds for ``key`` in this question (None: nothing yet)."""
    memo = _QUESTION.get()
    if memo is None:
        return None
    with _QUESTION_LOCK:
        return memo.get(key)


def parallel(fn: Callable[[T], R], items: list[T], pool: ThreadPoolExecutor = _POOL) -> list[R]:
    """At most 16 at a time (a bounded pool: a cloud store throttles a flood). Nested calls run
    inline so a worker never waits on the pool it holds a slot of."""
    if downloads.in_worker():
        return [fn(i) for i in items]
    futures: list[Future[R]] = [pool.submit(contextvars.copy_context().run, downloads.as_worker, fn, i) for i in items]
    pending: set[Future[R]] = set(futures)
    while pending:
        _, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
        downloads.report()
    return [f.result() for f in futures]
