"""One checkpoint's files, by path relative to the checkpoint folder: read by this process
(``StorageFiles``: a local folder or an object store, ``spark_io.storage``) or through Spark's
file systems (``SparkFiles``: ``hdfs://`` and any URI when Spark was chosen). ``open_files``
picks one and checks the folder is a checkpoint; nothing here writes.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from statelens.analysis.core.errors import CheckpointNotFound, CheckpointUnreadable, CorruptCheckpoint, NotACheckpoint
from statelens.spark_io.runtime.engine_choice import reads_natively
from statelens.spark_io.storage import Entry, LocalStorage, Storage, open_storage
from statelens.spark_io.storage.gate import check_allowed
from statelens.spark_io.storage.locations import is_local, local_path

DIGITS = re.compile(r"^\d+$")
VERSIONED = re.compile(r"^(\d+)(?:_[0-9a-fA-F-]+)?\.(delta|snapshot|changelog|zip)$")  # a state file of a version
T = TypeVar("T")
R = TypeVar("R")


class Files:
    """Read access to one checkpoint's files, by path relative to the checkpoint folder."""

    location: str

    def numbered(self, folder: str) -> dict[int, str]:  # files named by a number: batch -> rel path
        raise NotImplementedError

    def read(self, rel: str) -> bytes:
        raise NotImplementedError

    def read_many(self, rels: list[str]) -> dict[str, bytes]:
        """Several files (fetched in parallel where that saves time)."""
        return dict(zip(rels, self.map(self.read, rels), strict=True))

    def map(self, fn: Callable[[T], R], items: list[T]) -> list[R]:
        """``fn`` over ``items``, in parallel where the files are remote."""
        return [fn(i) for i in items]

    def is_file(self, rel: str) -> bool:
        raise NotImplementedError

    def subdirs(self, folder: str) -> list[str]:
        raise NotImplementedError

    def versioned_kinds(self, folder: str) -> set[str]:
        """The kinds of state version files directly in ``folder`` (delta, snapshot, changelog, zip)."""
        raise NotImplementedError

    def walk(self, folder: str, unreadable: list[str] | None = None) -> list[tuple[str, int]]:
        """(rel path, size) of every file below; ``unreadable``: collect folders that cannot be
        read there instead of raising ``CheckpointUnreadable``."""
        raise NotImplementedError


class StorageFiles(Files):
    """A checkpoint this process reads itself: a local folder or an object store (``spark_io.storage``).
    Each folder is listed once per instance (one question): the log folders are listed anew by the
    next question, while a query runs. A folder or file that exists but cannot be read raises
    ``CheckpointUnreadable`` (never taken for a missing one), except in ``walk`` with
    ``unreadable``, which lists such folders and goes on (the doctor reports them)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.location = storage.uri
        self._listed: dict[str, dict[str, Entry]] = {}

    def _list(self, folder: str) -> dict[str, Entry]:
        if folder not in self._listed:
            try:
                self._listed[folder] = {e.name: e for e in self.storage.listdir(folder)}
            except OSError as e:
                raise CheckpointUnreadable.of(folder, e) from e
        return self._listed[folder]

    def entry(self, rel: str) -> Entry | None:
        folder, _, name = rel.rpartition("/")
        return self._list(folder).get(name)

    def numbered(self, folder: str) -> dict[int, str]:
        return {int(n): f"{folder}/{n}" for n, e in self._list(folder).items() if DIGITS.match(n) and not e.is_dir}

    def read(self, rel: str) -> bytes:
        try:
            return self.storage.read(rel, self.entry(rel))
        except PermissionError as e:
            raise CheckpointUnreadable.of(rel, e) from e
        except OSError as e:
            raise CorruptCheckpoint(f"{rel} cannot be read ({e.strerror or e}).") from e

    def read_many(self, rels: list[str]) -> dict[str, bytes]:
        for folder in {rel.rpartition("/")[0] for rel in rels}:
            self._list(folder)  # listed once, before the reads run in parallel
        return dict(zip(rels, self.storage.map(self.read, rels), strict=False))

    def is_file(self, rel: str) -> bool:
        e = self.entry(rel)
        return e is not None and not e.is_dir

    def subdirs(self, folder: str) -> list[str]:
        return sorted(n for n, e in self._list(folder).items() if e.is_dir)

    def versioned_kinds(self, folder: str) -> set[str]:
        return {m.group(2) for n, e in self._list(folder).items() if not e.is_dir and (m := VERSIONED.match(n))}

    def walk(self, folder: str, unreadable: list[str] | None = None) -> list[tuple[str, int]]:
        try:
            found = self.storage.walk(folder, unreadable)
        except OSError as e:
            root = getattr(self.storage, "root", None)
            rel = str(Path(e.filename).relative_to(root)) if e.filename and root else folder
            raise CheckpointUnreadable.of(rel, e) from e
        return [(e.path, e.size) for e in found if not (e.name.startswith(".") and e.name.endswith(".crc"))]


class SparkFiles(Files):
    """A checkpoint on any storage Spark can read (s3a://, abfss://, gs://, hdfs://, file://).

    Everything is fetched up front with Spark's binaryFile reader (so it works over Spark
    Connect too): the log files with their content, the state tree as names and sizes only.
    Spark skips hidden paths (``_metadata``, ``.crc``) when listing, so operator metadata is
    loaded by explicit globs.
    """

    def __init__(self, uri: str) -> None:
        self.location = uri.rstrip("/")
        self._root = urllib.parse.urlparse(self.location).path.rstrip("/")
        self._content: dict[str, bytes] = {}
        self._sizes: dict[str, int] = {}
        for pattern in (
            "offsets",
            "commits",
            "metadata",
            "state/*/_metadata/metadata",
            "state/*/_metadata/v2/*",
            "state/*/0/_metadata/schema",
            "state/*/0/*/_metadata/schema",
            "sources/*/*",
        ):
            for rel, size, data in self._load(pattern, content=True):
                self._content[rel], self._sizes[rel] = data, size
        for pattern, recursive in (("state", True), ("state/*/_stateSchema/*/*", False), ("sources", True)):
            for rel, size, _ in self._load(pattern, content=False, recursive=recursive):
                self._sizes[rel] = size
        if not self._sizes and not self._exists():
            raise CheckpointNotFound(f"{uri} does not exist or cannot be listed: check the URI and its credentials.")

    def _rel(self, path: str) -> str:
        p = urllib.parse.unquote(urllib.parse.urlparse(path).path)
        return p[len(self._root) :].lstrip("/") if p.startswith(self._root) else p

    def _load(self, pattern: str, content: bool, recursive: bool = False) -> list[tuple[str, int, bytes]]:
        from statelens.spark_io.runtime.session import get_spark, spark_message

        reader = get_spark().read.format("binaryFile")
        if recursive:
            reader = reader.option("recursiveFileLookup", "true")
        try:
            df = reader.load(f"{self.location}/{pattern}")
            rows = df.select("path", "length", *(["content"] if content else [])).toArrow().to_pylist()
        except Exception as e:
            if "PATH_NOT_FOUND" in str(e) or "does not exist" in str(e) or "Path does not exist" in str(e):
                return []
            raise CheckpointNotFound(f"Spark could not list {self.location}/{pattern}: {spark_message(e, self.location)}") from e
        return [(self._rel(r["path"]), int(r["length"]), r.get("content") or b"") for r in rows]

    def _exists(self) -> bool:
        from statelens.spark_io.runtime.session import get_spark

        try:
            get_spark().read.format("binaryFile").load(self.location).select("path").limit(1).collect()
            return True
        except Exception:
            return False

    def numbered(self, folder: str) -> dict[int, str]:
        out = {}
        for rel in self._content:
            head, _, name = rel.rpartition("/")
            if head == folder and DIGITS.match(name):
                out[int(name)] = rel
        return out

    def read(self, rel: str) -> bytes:
        if rel not in self._content:
            raise CorruptCheckpoint(f"{rel} cannot be read through Spark.")
        return self._content[rel]

    def is_file(self, rel: str) -> bool:
        return rel in self._sizes

    def subdirs(self, folder: str) -> list[str]:
        prefix = f"{folder}/"
        return sorted(
            {rel[len(prefix) :].split("/", 1)[0] for rel in self._sizes if rel.startswith(prefix) and "/" in rel[len(prefix) :]}
        )

    def versioned_kinds(self, folder: str) -> set[str]:
        prefix = f"{folder}/"
        names = (rel[len(prefix) :] for rel in self._sizes if rel.startswith(prefix) and "/" not in rel[len(prefix) :])
        return {m.group(2) for n in names if (m := VERSIONED.match(n))}

    def walk(self, folder: str, unreadable: list[str] | None = None) -> list[tuple[str, int]]:
        return sorted((rel, size) for rel, size in self._sizes.items() if rel.startswith(f"{folder}/"))


def open_files(path: str) -> Files:
    """The checkpoint's files: a local folder or an object store read by this process, any other
    URI (or any when Spark was chosen) through Spark."""
    if is_local(path):
        return StorageFiles(LocalStorage(resolve_checkpoint(path)))  # checks the allowed roots first
    check_allowed(path)
    files: Files
    if reads_natively(path):
        files = StorageFiles(open_storage(path, check=False))
        if not files.subdirs("") and not files.is_file("metadata"):
            raise CheckpointNotFound(
                f"{path} does not exist or is empty: check the URI (it should be the query's checkpointLocation)."
            )
    else:
        files = SparkFiles(path.strip())
    if not files.numbered("offsets") and not files.is_file("metadata"):
        raise NotACheckpoint(
            f"{path} is not a Structured Streaming checkpoint (no metadata file and no offsets/ folder): "
            "give the folder passed to the query as checkpointLocation."
        )
    return files


def resolve_checkpoint(path: str) -> Path:
    """Check that a local ``path`` is a checkpoint folder; raise a clear error otherwise."""
    raw = path.strip()
    if not raw:
        raise CheckpointNotFound("No checkpoint path given: enter the folder passed to the query as checkpointLocation.")
    check_allowed(raw)
    p = Path(local_path(raw)).absolute()  # Spark (a served engine too) may run in another folder
    folder = LocalStorage(p)
    top = folder.info("")
    if top is None:
        raise CheckpointNotFound(f"{path} does not exist: check the path (it should be the query's checkpointLocation).")
    if not top.is_dir:
        raise NotACheckpoint(f"{path} is a file, not a folder: give the checkpoint folder that contains offsets/ and commits/.")
    try:
        names = {e.name for e in folder.listdir("")}
    except OSError as e:
        raise CheckpointNotFound(f"{path} cannot be read ({e.strerror}).") from e
    if not names:
        raise NotACheckpoint(f"{path} is an empty folder: no streaming query has written a checkpoint here.")
    if "offsets" not in names and "metadata" not in names:
        if p.name in ("offsets", "commits", "state", "sources", "metadata") and (p.parent / "offsets").is_dir():
            raise NotACheckpoint(f"{path} is the '{p.name}' folder inside a checkpoint: open its parent {p.parent} instead.")
        raise NotACheckpoint(
            f"{path} is not a Structured Streaming checkpoint (no metadata file and no offsets/ folder): "
            "give the folder passed to the query as checkpointLocation."
        )
    return p


def fingerprint(path: str) -> tuple[int, int]:
    """Changes when the checkpoint starts or commits a batch: the key for cached reads (a local
    folder's times, a listing of offsets/ and commits/ on object storage; (0, 0) for a checkpoint
    read through Spark, whose reads are kept until the app restarts)."""
    if not reads_natively(path):
        return (0, 0)
    storage = open_storage(path)
    return storage.stamp("offsets"), storage.stamp("commits")
