"""Object storage (S3, ADLS/Blob, GCS) through pyarrow's filesystems, one request per need.

* A listing is one paged request per folder (``walk``: one for the whole tree, no folder
  markers needed; on GCS a folder's listing holds everything below it and answers its
  subfolders). A read given the entry from a listing is one GET.
* Immutable state files go through the local cache (``cache.py``): read once, kept.
* ``open`` fetches only the ranges read (a RocksDB zip's metadata is at its end).
* Nothing here writes: the filesystems are built without bucket creation and only read calls
  are made.

Each cloud (``s3.py``, ``azure.py``, ``gcs.py``) says how its URIs map to pyarrow paths, how its
filesystem finds credentials, and what an error of its means for the user.
"""

from __future__ import annotations

import re
import threading
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from statelens.analysis.core.errors import StorageError
from statelens.spark_io.storage import downloads
from statelens.spark_io.storage.base import IMMUTABLE, Entry, Storage, join, recalled, remembered
from statelens.spark_io.storage.cache import shared

if TYPE_CHECKING:  # pyarrow's filesystems load when a cloud is read (a local question needs none)
    import pyarrow.fs as pafs


class Cloud(ABC):
    """What differs between clouds."""

    name: str
    schemes: tuple[str, ...]
    # False where pyarrow's one-level listing shows only folders that have a marker object (GCS):
    # folders are then listed with everything below them, and subfolders answered from that
    lists_folders: bool = True

    @abstractmethod
    def split(self, uri: str) -> tuple[tuple[str, ...], str, str]:
        """(filesystem key, pyarrow path of the URI, the URI's prefix up to that path's start)."""

    @abstractmethod
    def canonical(self, uri: str) -> str:
        """One spelling of the location, to compare URIs (``s3a://b/x`` and ``s3://b/x`` are one place)."""

    @abstractmethod
    def filesystem(self, key: tuple[str, ...]) -> pafs.FileSystem:
        """A read-only client for ``key`` (bucket region, account...), with this cloud's credentials."""

    @abstractmethod
    def explain(self, uri: str, text: str) -> str | None:
        """What an error of this cloud means and what to set; None: not a storage problem (a missing file)."""

    def parse(self, uri: str) -> urllib.parse.ParseResult:
        parsed = urllib.parse.urlparse(uri.strip())
        if not parsed.netloc:
            raise StorageError(f"{uri} names no bucket: write it as {self.schemes[0]}://<bucket>/<path>.")
        return parsed


_FILESYSTEMS: dict[tuple[str, ...], pafs.FileSystem] = {}
_FS_LOCK = threading.Lock()


def filesystem_of(cloud: Cloud, key: tuple[str, ...]) -> pafs.FileSystem:
    with _FS_LOCK:
        if key not in _FILESYSTEMS:
            _FILESYSTEMS[key] = cloud.filesystem(key)
        return _FILESYSTEMS[key]


def forget_filesystems() -> None:
    """Build clients anew (credentials or endpoints in the environment changed)."""
    with _FS_LOCK:
        _FILESYSTEMS.clear()


def _entry(info: pafs.FileInfo, base: str) -> Entry:
    import pyarrow.fs as pafs

    rel = info.path[len(base) :].lstrip("/") if info.path.startswith(base) else info.path
    mtime = info.mtime_ns if info.mtime_ns is not None else 0
    if info.type == pafs.FileType.Directory:
        return Entry(rel, True, 0, mtime)
    return Entry(rel, False, int(info.size or 0), int(mtime))


class CloudStorage(Storage):
    remote = True

    def __init__(self, cloud: Cloud, uri: str, admit: Callable[[str], None] | None = None) -> None:
        """``admit``: refuses an object's URI that lies outside what may be read (``gate.check_uri``),
        asked before every listing and read."""
        self.cloud = cloud
        self.uri = uri.strip().rstrip("/")
        self.key, self.base, self.prefix = cloud.split(self.uri)
        self.base = self.base.rstrip("/")
        self._admit = admit

    def _checked(self, rel: str) -> str:
        """``rel``'s URI, once it may be read."""
        uri = self.where(rel)
        if self._admit is not None:
            self._admit(uri)
        return uri

    @property
    def fs(self) -> pafs.FileSystem:
        return filesystem_of(self.cloud, self.key)

    def _path(self, rel: str) -> str:
        return join(self.base, rel) if rel else self.base

    def _failed(self, rel: str, e: OSError) -> Exception:
        """A storage problem as one clear line; a missing file stays ``FileNotFoundError``."""
        if isinstance(e, FileNotFoundError):
            return e
        text = str(e)
        message = self.cloud.explain(self.where(rel), text)
        if message is None:
            return FileNotFoundError(2, text.splitlines()[0] if text else "not found", self.where(rel))
        return StorageError(message)

    def child(self, rel: str) -> CloudStorage:
        return CloudStorage(self.cloud, self.where(rel), self._admit) if rel else self

    def info(self, rel: str) -> Entry | None:
        import pyarrow.fs as pafs

        self._checked(rel)
        try:
            info = self.fs.get_file_info(self._path(rel))
        except OSError as e:
            raise self._failed(rel, e) from e
        if info.type == pafs.FileType.NotFound:
            return None
        return _entry(info, self.base)

    def _select(self, rel: str, recursive: bool) -> list[Entry]:
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self._path(rel), recursive=recursive, allow_not_found=True)
        try:
            infos = self.fs.get_file_info(selector)
        except OSError as e:
            raise self._failed(rel, e) from e
        return sorted((_entry(i, self.base) for i in infos), key=lambda x: x.path)

    def listdir(self, rel: str) -> list[Entry]:
        self._checked(rel)
        known = self._known_below(rel)
        if known is None and self.cloud.lists_folders:
            return remembered(f"list {self.where(rel)}", lambda: self._select(rel, False))
        return _children(self._below(rel) if known is None else known, rel)

    def walk(self, rel: str, unreadable: list[str] | None = None) -> list[Entry]:
        self._checked(rel)
        return [e for e in self._below(rel) if not e.is_dir]

    def _known_below(self, rel: str) -> list[Entry] | None:
        """Everything below ``rel`` from a listing of it or of an enclosing folder already made in
        this question (None: none made yet)."""
        parts = rel.split("/") if rel else []
        for depth in range(len(parts), -1, -1):
            outer = "/".join(parts[:depth])
            known = recalled(f"walk {self.where(outer)}")
            if known is not None:
                if outer == rel:
                    return cast(list[Entry], known)
                head = rel + "/"
                return [e for e in known if e.path.startswith(head)]
        return None

    def _listed(self, rel: str) -> Entry | None:
        """The file's entry in a listing of its folder already made in this question (None: not listed)."""
        folder = rel.rpartition("/")[0]
        entries = recalled(f"list {self.where(folder)}") if self.cloud.lists_folders else None
        if entries is None:
            entries = self._known_below(folder)
        return next((e for e in entries or () if e.path == rel and not e.is_dir), None)

    def _below(self, rel: str) -> list[Entry]:
        """Everything below ``rel``: one paged listing per question, or the part of an enclosing
        folder's listing already made."""
        known = self._known_below(rel)
        return known if known is not None else remembered(f"walk {self.where(rel)}", lambda: self._select(rel, True))

    def _entry_of(self, rel: str, entry: Entry | None) -> Entry:
        if entry is not None:
            return entry
        found = self.info(rel)
        if found is None or found.is_dir:
            raise FileNotFoundError(2, "no such file", self.where(rel))
        return found

    def _download(self, rel: str, size: int | None) -> bytes:
        if size:
            downloads.started(size)
        try:
            with self.fs.open_input_stream(self._path(rel), compression=None) as f:
                data = cast(bytes, f.read())
        except OSError as e:
            raise self._failed(rel, e) from e
        if size:
            downloads.fetched(len(data))
        return data

    def read(self, rel: str, entry: Entry | None = None) -> bytes:
        self._checked(rel)
        entry = entry or self._listed(rel)
        if not IMMUTABLE.search(rel) or (entry is None and not _STATE.search(rel)):
            return self._download(rel, entry.size if entry else None)
        e = self._entry_of(rel, entry)
        hit = shared().get(self.where(rel), e.size, e.mtime_ns)
        if hit is not None:
            return hit.read_bytes()
        data = self._download(rel, e.size)
        shared().put(self.where(rel), e.size, e.mtime_ns, data)  # a cache that cannot be written costs the next download
        return data

    def _cached(self, rel: str, entry: Entry | None) -> str:
        e = self._entry_of(rel, entry)
        cache = shared()
        uri = self.where(rel)
        hit = cache.get(uri, e.size, e.mtime_ns)
        if hit is not None:
            return str(hit)
        kept = cache.put(uri, e.size, e.mtime_ns, self._download(rel, e.size))
        if kept is None:
            raise StorageError(
                f"{uri} is read from a local copy, which could not be written under {cache.folder}: make that folder "
                "writable and not full, or set STATELENS_CACHE_DIR to one that is."
            )
        return str(kept)

    def has_copy(self, rel: str, entry: Entry | None = None) -> bool:
        return (
            entry is not None
            and IMMUTABLE.search(rel) is not None
            and shared().get(self.where(rel), entry.size, entry.mtime_ns) is not None
        )

    def open(self, rel: str, entry: Entry | None = None) -> BinaryIO:
        self._checked(rel)
        if IMMUTABLE.search(rel):
            e = self._entry_of(rel, entry)
            hit = shared().get(self.where(rel), e.size, e.mtime_ns)
            if hit is not None:
                return open(hit, "rb")
        try:
            return cast(BinaryIO, _Ranged(self.fs.open_input_file(self._path(rel))))
        except OSError as e:
            raise self._failed(rel, e) from e

    def local_file(self, rel: str, entry: Entry | None = None) -> str:
        self._checked(rel)
        if not IMMUTABLE.search(rel):
            raise StorageError(f"{self.where(rel)} may change while it is read: it is not copied to the local cache.")
        return self._cached(rel, entry)


def _children(below: list[Entry], rel: str) -> list[Entry]:
    """The entries directly in ``rel``, from everything below it (folders from the paths of files)."""
    head = rel + "/" if rel else ""
    found: dict[str, Entry] = {}
    for e in below:
        rest = e.path[len(head) :]
        if not rest:
            continue
        name, sep, _ = rest.partition("/")
        if sep or e.is_dir:
            found.setdefault(name, Entry(head + name, True, 0, 0))
        else:
            found[name] = e
    return sorted(found.values(), key=lambda x: x.path)


_STATE = re.compile(r"\.(delta|snapshot|changelog|zip|sst)$")  # worth a request for their size and time when not listed


class _Ranged:
    """pyarrow's random-access file as the file object ``zipfile`` expects."""

    def __init__(self, f: Any) -> None:
        self._f = f

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._f.seek(offset, whence))

    def tell(self) -> int:
        return int(self._f.tell())

    def read(self, n: int = -1) -> bytes:
        return cast(bytes, self._f.read() if n is None or n < 0 else self._f.read(n))

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> _Ranged:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
