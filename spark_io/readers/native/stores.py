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

import json
import os
import re
import shutil
import tempfile
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

from statelens.analysis.core.errors import NativeUnsupported, StateReadError
from statelens.spark_io.readers.native import kernels
from statelens.spark_io.readers.native.records import Chain, Records, changelog_header, decompressed, from_pairs, scan_file
from statelens.spark_io.runtime import scratch
from statelens.spark_io.storage import Entry, Storage

ZIP_WHOLE_BYTES = 4 << 20  # a RocksDB snapshot zip up to this size is fetched whole and cached
_NAME = re.compile(r"^(\d+)(?:_([0-9a-fA-F-]+))?\.(delta|snapshot|changelog|zip)$")


@dataclass(frozen=True)
class PartitionFiles:
    """The versioned files of one store partition: kind -> version -> {unique id or "": name}, from
    one listing of its folder (sizes and modification times included)."""

    storage: Storage
    rel: str  # the folder relative to the checkpoint, for messages
    files: dict[str, dict[int, dict[str, str]]]
    entries: dict[str, Entry]
    listed: dict[str, dict[str, Entry]] = field(default_factory=dict)  # other folders (SSTs/), listed once

    @staticmethod
    def of(storage: Storage, rel: str) -> PartitionFiles:
        files: dict[str, dict[int, dict[str, str]]] = {"delta": {}, "snapshot": {}, "changelog": {}, "zip": {}}
        try:
            entries = {e.name: e for e in storage.listdir(rel) if not e.is_dir}
        except OSError as e:
            raise StateReadError(f"The state folder {rel} cannot be read ({e.strerror or e}).") from e
        for name in entries:
            m = _NAME.match(name)
            if m:
                files[m.group(3)].setdefault(int(m.group(1)), {})[m.group(2) or ""] = name
        return PartitionFiles(storage, rel, files, entries)

    def size(self, name: str) -> int:
        return self.entries[name].size

    def raw(self, name: str) -> bytes:
        """A file's bytes as stored (kept in the local cache on remote storage)."""
        try:
            return self.storage.read(f"{self.rel}/{name}", self.entries.get(name))
        except OSError as e:
            raise StateReadError(f"The state file {self.rel}/{name} cannot be read ({e.strerror or e}).") from e

    def local_file(self, name: str) -> str:
        """A local path of one of the folder's files (on remote storage: its copy in the cache)."""
        try:
            return self.storage.local_file(f"{self.rel}/{name}", self.entries.get(name))
        except OSError as e:
            raise StateReadError(f"The state file {self.rel}/{name} cannot be read ({e.strerror or e}).") from e

    def sst_files(self, names: list[str], of: str) -> list[str]:
        """Local paths of RocksDB SST files named by the snapshot ``of``: in the partition's ``SSTs/``
        (or its parent's, for a store folder), each folder listed once; fetched in parallel."""
        found: dict[str, tuple[str, Entry]] = {}
        for folder in (f"{self.rel}/SSTs", f"{self.rel.rsplit('/', 1)[0]}/SSTs"):
            if any(n not in found for n in names):
                listed = self._listing(folder)
                found.update({n: (folder, listed[n]) for n in names if n not in found and n in listed})
        for n in names:
            if n not in found:
                raise StateReadError(f"The SST file SSTs/{n} of {of} is missing.")

        def fetch(n: str) -> str:
            folder, entry = found[n]
            try:
                return self.storage.local_file(f"{folder}/{n}", entry)
            except OSError as e:
                raise StateReadError(f"The SST file {folder}/{n} of {of} cannot be read ({e.strerror or e}).") from e

        return self.storage.map(fetch, names)

    def _listing(self, folder: str) -> dict[str, Entry]:
        with _LISTED_LOCK:
            if folder not in self.listed:
                try:
                    self.listed[folder] = {e.name: e for e in self.storage.listdir(folder) if not e.is_dir}
                except OSError as e:
                    raise StateReadError(f"The state folder {folder} cannot be read ({e.strerror or e}).") from e
            return self.listed[folder]

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
        return decompressed(self.raw(name), f"{self.rel}/{name}")

    def downloaded(self, name: str) -> bool:
        """On remote storage: the file is in the local cache (reading it costs no request)."""
        return self.storage.has_copy(f"{self.rel}/{name}", self.entries.get(name))

    def prefetch(self, names: Iterable[str | None]) -> None:
        """On remote storage, fetch these files into the local cache in parallel (bounded), so the
        reads in order that follow wait on the network once, not once per file."""
        wanted = [n for n in names if n]
        if not self.storage.remote or len(wanted) < 2:
            return
        try:
            self.storage.map(lambda n: self.storage.local_file(f"{self.rel}/{n}", self.entries.get(n)), wanted)
        except OSError as e:
            raise StateReadError(f"The state files of {self.rel} cannot be read ({e.strerror or e}).") from e

    def zip_metadata(self, name: str) -> dict[str, Any]:
        """The ``metadata`` member of a RocksDB snapshot zip. A zip holds RocksDB's small files (its
        SSTs are apart), so it is fetched whole, once, into the cache (one request); a large one, on
        remote storage, only in the ranges that hold the metadata (its directory at the end, then
        the member)."""
        entry = self.entries.get(name)
        small = entry is not None and entry.size <= ZIP_WHOLE_BYTES
        f = open(self.local_file(name), "rb") if small else self.storage.open(f"{self.rel}/{name}", entry)  # noqa: SIM115
        with f, zipfile.ZipFile(f) as z:
            return cast(dict[str, Any], json.loads(z.read("metadata").decode("utf-8").partition("\n")[2]))


# --------------------------------------------------------------------------- HDFS


def hdfs_records(part: PartitionFiles, version: int, texts: tuple[str, ...] = ()) -> Records:
    """The snapshot and deltas that make up ``version``, oldest first (``texts``: only the files
    holding one, ``Chain.records``)."""
    chain = Chain()
    if version <= 0:
        return chain.records()
    base = max((v for v in part.files["snapshot"] if v <= version), default=0)
    part.prefetch([part.name("snapshot", base) if base else None, *(part.name("delta", v) for v in range(base + 1, version + 1))])
    if base:
        name = part.need("snapshot", base)
        chain.add_file(part.read(name), 0, kernels.FMT_PLAIN, base, f"{part.rel}/{name}")
    return _add_deltas(chain, part, base + 1, version).records(texts)


def hdfs_changes(part: PartitionFiles, start: int, end: int, texts: tuple[str, ...] = ()) -> Records:
    part.prefetch(part.name("delta", v) for v in range(start, end + 1))
    return _add_deltas(Chain(), part, start, end).records(texts)


def _add_deltas(chain: Chain, part: PartitionFiles, start: int, end: int) -> Chain:
    for v in range(start, end + 1):
        name = part.need("delta", v)
        chain.add_file(part.read(name), 0, kernels.FMT_PLAIN, v, f"{part.rel}/{name}")
    return chain


# --------------------------------------------------------------------------- RocksDB


_SCRATCH: list[str] = []
_SCRATCH_LOCK = threading.Lock()
_LISTED_LOCK = threading.Lock()


def _scratch() -> str:
    """A folder State Lens owns for unpacked RocksDB snapshots (removed at exit; never the checkpoint)."""
    with _SCRATCH_LOCK:
        if not _SCRATCH:
            _SCRATCH.append(tempfile.mkdtemp(prefix="rocksdb-", dir=scratch.process_dir()))
        return _SCRATCH[0]


def rocksdb_snapshot(part: PartitionFiles, name: str, version: int, values: bool = True) -> Records:
    """Every key and value of a RocksDB snapshot (``N.zip`` plus its SST files; ``values=False``:
    keys only, the values empty). Its column family ids are read apart (``RocksPartition.families``)."""
    rel = f"{part.rel}/{name}"
    try:
        with zipfile.ZipFile(part.local_file(name)) as z:
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
        ssts = meta.get("sstFiles", [])
        local = part.sst_files([sst["dfsSstFileName"] for sst in ssts], rel)
        for sst, src in zip(ssts, local, strict=True):
            os.symlink(os.path.realpath(src), os.path.join(dest, sst["localFileName"]))
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


KEEP_BUDGET = 512 << 20  # bytes of decoded files kept for the next question (engine.one_question_per_process: less)
QUESTION_BUDGET = 64 << 20  # one question's: the same files read by its parts (a fate's walk and a verdict)


class KeptFiles:
    """State files already read, kept for the next question: RocksDB snapshots (rocksdict has no
    bulk read: about a microsecond a pair to read again) and changelogs, decompressed and scanned.
    A state file never changes once written; it is known by its path, size and modification time.
    Past ``budget`` bytes the least recently used are dropped."""

    def __init__(self, budget: int | None = None) -> None:
        self.budget = KEEP_BUDGET if budget is None else budget
        self._kept: OrderedDict[tuple[str, int, int, str], Records] = OrderedDict()
        self._total = 0  # the bytes kept
        self._lock = threading.Lock()

    @staticmethod
    def _nbytes(rec: Records) -> int:
        return int(rec.buf.nbytes) + 41 * len(rec)  # the buffer, five int64 and one int8 per record

    @staticmethod
    def _ident(part: PartitionFiles, name: str) -> tuple[str, int, int] | None:
        entry = part.entries.get(name)
        if entry is None:
            return None  # the read names the problem
        return part.storage.where(f"{part.rel}/{name}"), entry.size, entry.mtime_ns

    def _get(self, ident: tuple[str, int, int], kinds: tuple[str, ...]) -> Records | None:
        with self._lock:
            for kind in kinds:
                k = (*ident, kind)
                if k in self._kept:
                    self._kept.move_to_end(k)
                    return self._kept[k]
        return None

    def _keep(self, ident: tuple[str, int, int], kind: str, rec: Records) -> Records:
        if self._nbytes(rec) > self.budget:  # larger than the whole budget: not kept
            return rec
        with self._lock:
            key = (*ident, kind)
            if key in self._kept:  # read twice at once: the first copy goes
                self._total -= self._nbytes(self._kept.pop(key))
            self._kept[key] = rec
            self._total += self._nbytes(rec)
            while self._total > self.budget and self._kept:
                _, dropped = self._kept.popitem(last=False)
                self._total -= self._nbytes(dropped)
        return rec

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._total = 0

    def holds(self, part: PartitionFiles, name: str, kind: str) -> bool:
        ident = self._ident(part, name)
        with self._lock:
            return ident is not None and (*ident, kind) in self._kept

    def snapshot(self, part: PartitionFiles, name: str, version: int, values: bool) -> Records:
        ident = self._ident(part, name)
        if ident is None:
            return rocksdb_snapshot(part, name, version, values)
        kept = self._get(ident, ("snapshot", "snapshot" if values else "snapshot keys"))  # values serve keys-only
        if kept is not None:
            return kept
        return self._keep(ident, "snapshot" if values else "snapshot keys", rocksdb_snapshot(part, name, version, values))

    def changelog(self, part: PartitionFiles, name: str, version: int) -> Records:
        ident = self._ident(part, name)
        kept = self._get(ident, ("changelog",)) if ident is not None else None
        if kept is not None:
            return kept
        rec = changelog_records(part.read(name), version, f"{part.rel}/{name}")
        return rec if ident is None else self._keep(ident, "changelog", rec)


def changelog_records(raw: bytes, version: int, rel: str) -> Records:
    fmt_version, start, _ = changelog_header(raw)
    return scan_file(raw, start, kernels.FMT_TYPED if fmt_version in (2, 4) else kernels.FMT_PLAIN, version, rel)


def _lineage(rec: Records) -> list[tuple[int, str]]:
    """A changelog's lineage, from its header (checkpoint format v2)."""
    return changelog_header(rec.buf[: 8 + (1 << 16)].tobytes())[2]


@dataclass
class RocksPartition:
    """One RocksDB store partition: its files and, for checkpoint format v2, the unique id of
    each version (from the commit log); snapshots and changelogs are read through the reader's
    kept files."""

    part: PartitionFiles
    ids: dict[int, str]  # version -> unique id (checkpoint format v2)
    v2: bool
    kept: KeptFiles = field(default_factory=KeptFiles)

    @cached_property
    def families(self) -> dict[str, int]:
        """Column family ids from any snapshot of this partition (ids never change once given)."""
        problems = []
        for v in sorted(self.part.files["zip"], reverse=True):
            for name in self.part.files["zip"][v].values():
                try:
                    meta = self.part.zip_metadata(name)
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
        snapshot's values are not read). Every changelog from version 1 makes it too, and is
        cheaper to read than a snapshot whose SST files are about as big (``_replay``)."""
        if version <= 0:
            return Records.empty()
        replay = self._replay(version)
        if replay is not None:
            self.part.prefetch([n for _, n in replay if not self.kept.holds(self.part, n, "changelog")])
            return _chain_of([self.kept.changelog(self.part, n, v) for v, n in replay])
        uid = self._uid(version)
        zip_name = self.part.name("zip", version, uid)
        if zip_name:
            return self.kept.snapshot(self.part, zip_name, version, values)
        if not self.part.files["changelog"]:
            self.part.need("zip", version, uid)  # no changelog checkpointing: only the zip of the version
        last = self.kept.changelog(self.part, self.part.need("changelog", version, uid), version)
        pieces = []
        chain = self._chain(version, _lineage(last) if self.v2 else [])
        self.part.prefetch(self.part.name(k, v, u) for v, u, k in chain if k == "changelog")
        for v, u, kind in chain:
            n = self.part.need(kind, v, u)
            pieces.append(self.kept.snapshot(self.part, n, v, values) if kind == "zip" else self.kept.changelog(self.part, n, v))
        return _chain_of([*pieces, last])

    def _replay(self, version: int) -> list[tuple[int, str]] | None:
        """The changelogs 1..``version`` when they make the state cheaper than the snapshot would:
        each changelog record is decoded about three times faster than a snapshot pair is read
        (``bench/bench_native.py``), so when their files are at most twice the size of the
        snapshot's SST files, or all kept already (a snapshot kept is cheaper still). Checkpoint
        format v1 only (v2 names a version's files by its lineage)."""
        files = self._changelogs_since_start(version)
        if files is None:
            return None
        snap = max((v for v in self.part.files["zip"] if v <= version), default=0)
        snap_name = self.part.name("zip", snap) if snap else None
        if snap_name and self.kept.holds(self.part, snap_name, "snapshot"):
            return None
        if all(self.kept.holds(self.part, n, "changelog") for _, n in files):
            return files
        if (
            self.part.storage.remote
            and all(self.part.downloaded(n) for _, n in files)
            and not self.part.downloaded(snap_name or "")
        ):
            return files  # the changelogs are here and the snapshot would be a download
        if not snap_name:
            return None  # the changelogs are the only way (read below)
        # the changelogs after the snapshot are read either way
        instead = sum(self.part.size(n) for _, n in files[:snap])
        return files if instead <= 2 * self._sst_bytes(snap_name) else None

    def _changelogs_since_start(self, version: int) -> list[tuple[int, str]] | None:
        """(version, name) of the changelogs 1..``version``, when every one is there (checkpoint
        format v1); None at the first one missing (retention removes the oldest first)."""
        if self.v2:
            return None
        files = []
        for v in range(1, version + 1):
            name = self.part.name("changelog", v)
            if name is None:
                return None
            files.append((v, name))
        return files

    def _sst_bytes(self, zip_name: str) -> int:
        try:
            meta = self.part.zip_metadata(zip_name)
            return sum(int(f.get("sizeBytes", 0)) for f in meta.get("sstFiles", []))
        except (OSError, KeyError, ValueError, zipfile.BadZipFile):
            return 0  # the snapshot's read names the problem

    def warm(self, version: int) -> None:
        """Read what ``version`` is made from into the kept files: its changelogs from version 1
        (``_replay``), else the snapshot it starts from (nothing is decoded)."""
        replay = self._replay(version)
        if replay is not None:
            for v, n in replay:
                self.kept.changelog(self.part, n, v)
            return
        uid = self._uid(version)
        zip_name = self.part.name("zip", version, uid)
        if zip_name:
            self.kept.snapshot(self.part, zip_name, version, True)
            return
        name = self.part.name("changelog", version, uid)
        if name is None:
            return
        lineage = _lineage(self.kept.changelog(self.part, name, version)) if self.v2 else []
        for v, u, kind in self._chain(version, lineage)[:1]:
            if kind == "zip":
                self.kept.snapshot(self.part, self.part.need(kind, v, u), v, True)

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
        self.part.prefetch(self.part.name("changelog", v, self._uid(v)) for v in range(start, end + 1))
        return _chain_of(
            [self.kept.changelog(self.part, self.part.need("changelog", v, self._uid(v)), v) for v in range(start, end + 1)]
        )


def _chain_of(pieces: list[Records]) -> Records:
    chain = Chain()
    for rec in pieces:
        chain.add_records(rec)
    return chain.records()


def commit_ids(storage: Storage, batches: list[int], operator_id: int) -> dict[int, list[list[str]]]:
    """Checkpoint format v2: for each batch, per partition the unique ids of the operator's stores'
    version ``batch + 1`` (``stateUniqueIds`` of ``commits/<batch>``)."""

    def entry(b: int) -> dict[str, Any]:
        try:
            text = storage.read(f"commits/{b}").decode("utf-8")
            return cast(dict[str, Any], json.loads(text.split("\n", 1)[1]))
        except (OSError, IndexError, ValueError) as e:
            raise StateReadError(f"commits/{b} cannot be read for its state file ids ({e}).") from e

    out: dict[int, list[list[str]]] = {}
    for b, e in zip(batches, storage.map(entry, batches), strict=True):
        ids = (e.get("stateUniqueIds") or {}).get(str(operator_id))
        if ids is not None:
            out[b] = [[str(x) for x in (p or [])] for p in ids]
    return out
