"""Which files make up one store partition at a version, and their records, for both providers.

* HDFS provider (``HDFSBackedStateStoreProvider``): ``N.delta`` per version and ``N.snapshot`` now
  and then. The state at version V is the newest snapshot S <= V plus the deltas S+1..V; the
  change feed is the deltas themselves.
* RocksDB provider: ``N.changelog`` per version (with changelog checkpointing) and ``N.zip``
  snapshots, whose SST files live in ``SSTs/`` (opened with rocksdict, a RocksDB binding). The
  state at V is the newest zip S <= V plus the changelogs S+1..V (without changelog
  checkpointing, the zip of V itself).
* Checkpoint format v2 names files ``N_<uniqueId>``: the commit log gives the id of each
  version, a changelog's header the ids of the versions before it (its lineage).

Missing files are errors that name them, as Spark's are; nothing is skipped.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import tempfile
import threading
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import cast

from analysis.errors import NativeUnsupported, StateReadError
from spark_io.native import kernels
from spark_io.native.records import Chain, Records, changelog_header, from_pairs, read_file

_NAME = re.compile(r"^(\d+)(?:_([0-9a-fA-F-]+))?\.(delta|snapshot|changelog|zip)$")


@dataclass(frozen=True)
class PartitionFiles:
    """The versioned files of one store partition: kind -> version -> {unique id or "": name}."""

    folder: Path
    rel: str  # the folder relative to the checkpoint, for messages
    files: dict[str, dict[int, dict[str, str]]]

    @staticmethod
    def list(root: Path, rel: str) -> PartitionFiles:
        folder = root / rel
        files: dict[str, dict[int, dict[str, str]]] = {"delta": {}, "snapshot": {}, "changelog": {}, "zip": {}}
        try:
            with os.scandir(folder) as it:
                names = [e.name for e in it if e.is_file()]
        except FileNotFoundError:
            names = []
        except OSError as e:
            raise StateReadError(f"The state folder {rel} cannot be read ({e.strerror}).") from e
        for name in names:
            m = _NAME.match(name)
            if m:
                files[m.group(3)].setdefault(int(m.group(1)), {})[m.group(2) or ""] = name
        return PartitionFiles(folder, rel, files)

    def name(self, kind: str, version: int, uid: str = "") -> str | None:
        return self.files[kind].get(version, {}).get(uid)

    def need(self, kind: str, version: int, uid: str = "") -> str:
        name = self.name(kind, version, uid)
        if name is None:
            want = f"{version}_{uid}.{kind}" if uid else f"{version}.{kind}"
            raise StateReadError(
                f"The state file {self.rel}/{want} is missing: version {version} (batch {version - 1}) cannot be "
                "rebuilt. An earlier batch may still read."
            )
        return name

    def read(self, name: str) -> bytes:
        return read_file(self.folder / name, f"{self.rel}/{name}")


# --------------------------------------------------------------------------- HDFS


def hdfs_records(part: PartitionFiles, version: int) -> Records:
    """The snapshot and deltas that make up ``version``, oldest first."""
    chain = Chain()
    if version <= 0:
        return chain.records()
    base = max((v for v in part.files["snapshot"] if v <= version), default=0)
    if base:
        name = part.need("snapshot", base)
        chain.add_file(part.read(name), 0, kernels.FMT_PLAIN, base, f"{part.rel}/{name}")
    return _add_deltas(chain, part, base + 1, version).records()


def hdfs_changes(part: PartitionFiles, start: int, end: int) -> Records:
    return _add_deltas(Chain(), part, start, end).records()


def _add_deltas(chain: Chain, part: PartitionFiles, start: int, end: int) -> Chain:
    for v in range(start, end + 1):
        name = part.need("delta", v)
        chain.add_file(part.read(name), 0, kernels.FMT_PLAIN, v, f"{part.rel}/{name}")
    return chain


# --------------------------------------------------------------------------- RocksDB


def _add_changelog(chain: Chain, part: PartitionFiles, name: str, version: int, raw: bytes | None = None) -> None:
    raw = part.read(name) if raw is None else raw
    fmt_version, start, _ = changelog_header(raw)
    fmt = kernels.FMT_TYPED if fmt_version in (2, 4) else kernels.FMT_PLAIN
    chain.add_file(raw, start, fmt, version, f"{part.rel}/{name}")


_SCRATCH: list[str] = []
_SCRATCH_LOCK = threading.Lock()


def _scratch() -> str:
    """A folder State Lens owns for unpacked RocksDB snapshots (removed at exit; never the checkpoint)."""
    with _SCRATCH_LOCK:
        if not _SCRATCH:
            _SCRATCH.append(tempfile.mkdtemp(prefix="statelens-rocksdb-"))
            atexit.register(shutil.rmtree, _SCRATCH[0], True)
        return _SCRATCH[0]


def rocksdb_snapshot(part: PartitionFiles, name: str, version: int, values: bool = True) -> Records:
    """Every key and value of a RocksDB snapshot (``N.zip`` plus its SST files; ``values=False``:
    keys only, the values empty). Its column family ids are read apart (``RocksPartition.families``)."""
    rel = f"{part.rel}/{name}"
    try:
        with zipfile.ZipFile(part.folder / name) as z:
            names = z.namelist()
            _, _, body = z.read("metadata").decode("utf-8").partition("\n")
            meta = json.loads(body)
            dest = tempfile.mkdtemp(dir=_scratch())
            for n in names:
                if n != "metadata" and "/" not in n:
                    z.extract(n, dest)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
        raise StateReadError(f"The RocksDB snapshot {rel} is damaged ({e}).") from e
    try:
        for sst in meta.get("sstFiles", []):
            src = part.folder / "SSTs" / sst["dfsSstFileName"]
            if not src.is_file():
                src = part.folder.parent / "SSTs" / sst["dfsSstFileName"]
            if not src.is_file():
                raise StateReadError(f"The SST file SSTs/{sst['dfsSstFileName']} of {rel} is missing.")
            os.symlink(src.resolve(), os.path.join(dest, sst["localFileName"]))
        pairs = _rocksdb_pairs(dest, rel, values)
    finally:
        shutil.rmtree(dest, ignore_errors=True)
    return from_pairs(pairs, version)


def _rocksdb_pairs(folder: str, rel: str, values: bool) -> list[tuple[bytes, bytes]]:
    try:
        from rocksdict import AccessType, Options, Rdict
    except ImportError as e:  # pragma: no cover - rocksdict is pinned
        raise NativeUnsupported(f"reading RocksDB snapshots needs the rocksdict package ({e})") from e
    try:
        families = Rdict.list_cf(folder, Options(raw_mode=True))
        if [f for f in families if f != "default"]:
            raise NativeUnsupported(f"{rel} keeps state in RocksDB column families {families}")
        db = Rdict(folder, Options(raw_mode=True), access_type=AccessType.read_only())
        try:
            if not values:
                keys = cast(list[bytes], list(db.keys()))  # raw mode: bytes
                return [(k, b"") for k in keys]
            return cast(list[tuple[bytes, bytes]], list(db.items()))  # raw mode: bytes keys and values
        finally:
            db.close()
    except NativeUnsupported:
        raise
    except Exception as e:
        raise StateReadError(f"RocksDB could not open the snapshot {rel}: {e}") from e


class SnapshotCache:
    """RocksDB snapshots already read, kept for the next question (a snapshot file never changes
    once written; it is known by its path, size and modification time). RocksDB has no bulk read,
    so a snapshot costs about a microsecond per pair to read again. Past ``budget`` bytes the
    least recently used are dropped."""

    def __init__(self, budget: int = 512 << 20) -> None:
        self.budget = budget
        self._kept: OrderedDict[tuple[str, int, int, bool], Records] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _nbytes(rec: Records) -> int:
        return int(rec.buf.nbytes) + 41 * len(rec)  # the buffer, five int64 and one int8 per record

    def read(self, part: PartitionFiles, name: str, version: int, values: bool) -> Records:
        try:
            st = (part.folder / name).stat()
        except OSError:
            return rocksdb_snapshot(part, name, version, values)  # names the problem
        ident = (str(part.folder / name), st.st_size, st.st_mtime_ns)
        with self._lock:
            for k in ((*ident, True), (*ident, values)):  # one read with values serves a keys-only one
                if k in self._kept:
                    self._kept.move_to_end(k)
                    return self._kept[k]
        rec = rocksdb_snapshot(part, name, version, values)
        with self._lock:
            self._kept[(*ident, values)] = rec
            total = sum(self._nbytes(r) for r in self._kept.values())
            while total > self.budget and len(self._kept) > 1:
                _, dropped = self._kept.popitem(last=False)
                total -= self._nbytes(dropped)
        return rec


@dataclass
class RocksPartition:
    """One RocksDB store partition: its files and, for checkpoint format v2, the unique id of
    each version (from the commit log); snapshots are read through the reader's cache."""

    part: PartitionFiles
    ids: dict[int, str]  # version -> unique id (checkpoint format v2)
    v2: bool
    snapshots: SnapshotCache = field(default_factory=SnapshotCache)

    @cached_property
    def families(self) -> dict[str, int]:
        """Column family ids from any snapshot of this partition (ids never change once given)."""
        problems = []
        for v in sorted(self.part.files["zip"], reverse=True):
            for name in self.part.files["zip"][v].values():
                try:
                    with zipfile.ZipFile(self.part.folder / name) as z:
                        meta = json.loads(z.read("metadata").decode("utf-8").partition("\n")[2])
                except (OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
                    problems.append(f"{self.part.rel}/{name} ({e})")  # an older snapshot records the same ids
                    continue
                return {str(k): int(v) for k, v in (meta.get("columnFamilyMapping") or {}).items()}
        if problems:
            raise StateReadError(
                f"The column family ids of {self.part.rel} cannot be read: its snapshots are damaged: {'; '.join(problems)}."
            )
        return {}

    def _uid(self, version: int) -> str:
        if not self.v2:
            return ""
        if version not in self.ids:
            raise StateReadError(
                f"The commit log names no state file for version {version} of {self.part.rel} (checkpoint format v2)."
            )
        return self.ids[version]

    def state(self, version: int, values: bool = True) -> Records:
        """The snapshot and changelogs that make up ``version``, oldest first (``values=False``: the
        snapshot's values are not read)."""
        if version <= 0:
            return Records.empty()
        uid = self._uid(version)
        zip_name = self.part.name("zip", version, uid)
        if zip_name:
            return self.snapshots.read(self.part, zip_name, version, values)
        if not self.part.files["changelog"]:
            self.part.need("zip", version, uid)  # no changelog checkpointing: only the zip of the version
        name = self.part.need("changelog", version, uid)
        last = self.part.read(name)
        chain = Chain()
        for v, u, kind in self._chain(version, changelog_header(last)[2]):
            n = self.part.need(kind, v, u)
            if kind == "zip":
                chain.add_records(self.snapshots.read(self.part, n, v, values))
            else:
                _add_changelog(chain, self.part, n, v)
        _add_changelog(chain, self.part, name, version, last)
        return chain.records()

    def warm(self, version: int) -> None:
        """Read the snapshot that ``version`` starts from into the cache (nothing else)."""
        uid = self._uid(version)
        zip_name = self.part.name("zip", version, uid)
        if zip_name:
            self.snapshots.read(self.part, zip_name, version, True)
            return
        name = self.part.name("changelog", version, uid)
        if name is None:
            return
        lineage = changelog_header(self.part.read(name))[2] if self.v2 else []
        for v, u, kind in self._chain(version, lineage)[:1]:
            if kind == "zip":
                self.snapshots.read(self.part, self.part.need(kind, v, u), v, True)

    def _chain(self, version: int, lineage: list[tuple[int, str]]) -> list[tuple[int, str, str]]:
        """(version, id, kind) of the files before ``version``: the newest snapshot and the changelogs after it."""
        if self.v2:
            ids = dict(lineage)
            snap = max((v for v, u in lineage if self.part.name("zip", v, u)), default=0)
            missing = [v for v in range(max(snap, 1), version) if v not in ids]
            if missing:
                raise StateReadError(
                    f"The lineage of version {version} in {self.part.rel} does not reach a snapshot (versions "
                    f"{missing[0]}–{missing[-1]} are not in it)."
                )
        else:
            ids = {}
            snap = max((v for v in self.part.files["zip"] if v < version), default=0)
        chain = [(snap, ids.get(snap, ""), "zip")] if snap else []
        chain += [(v, ids.get(v, ""), "changelog") for v in range(snap + 1, version)]
        return chain

    def changes(self, start: int, end: int) -> Records:
        chain = Chain()
        for v in range(start, end + 1):
            _add_changelog(chain, self.part, self.part.need("changelog", v, self._uid(v)), v)
        return chain.records()


def commit_ids(root: Path, batches: list[int], operator_id: int) -> dict[int, list[list[str]]]:
    """Checkpoint format v2: for each batch, per partition the unique ids of the operator's stores'
    version ``batch + 1`` (``stateUniqueIds`` of ``commits/<batch>``)."""
    out: dict[int, list[list[str]]] = {}
    for b in batches:
        try:
            text = (root / "commits" / str(b)).read_text("utf-8")
            entry = json.loads(text.split("\n", 1)[1])
        except (OSError, IndexError, ValueError) as e:
            raise StateReadError(f"commits/{b} cannot be read for its state file ids ({e}).") from e
        ids = (entry.get("stateUniqueIds") or {}).get(str(operator_id))
        if ids is not None:
            out[b] = [[str(x) for x in (p or [])] for p in ids]
    return out
