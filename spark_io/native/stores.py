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
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import cast

from analysis.errors import NativeUnsupported, StateReadError
from spark_io.native import kernels
from spark_io.native.records import Records, changelog_header, concat, from_pairs, read_file, scan

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


def hdfs_records(part: PartitionFiles, version: int) -> list[Records]:
    """The snapshot and deltas that make up ``version``, oldest first."""
    if version <= 0:
        return []
    base = max((v for v in part.files["snapshot"] if v <= version), default=0)
    out = []
    if base:
        name = part.need("snapshot", base)
        out.append(scan(part.read(name), 0, kernels.FMT_PLAIN, base, f"{part.rel}/{name}"))
    for v in range(base + 1, version + 1):
        name = part.need("delta", v)
        out.append(scan(part.read(name), 0, kernels.FMT_PLAIN, v, f"{part.rel}/{name}"))
    return out


def hdfs_changes(part: PartitionFiles, start: int, end: int) -> Records:
    parts = []
    for v in range(start, end + 1):
        name = part.need("delta", v)
        parts.append(scan(part.read(name), 0, kernels.FMT_PLAIN, v, f"{part.rel}/{name}"))
    return concat(parts)


# --------------------------------------------------------------------------- RocksDB


def _changelog(part: PartitionFiles, name: str, version: int) -> tuple[Records, list[tuple[int, str]]]:
    raw = part.read(name)
    fmt_version, start, lineage = changelog_header(raw)
    fmt = kernels.FMT_TYPED if fmt_version in (2, 4) else kernels.FMT_PLAIN
    return scan(raw, start, fmt, version, f"{part.rel}/{name}"), lineage


_SCRATCH: list[str] = []
_SCRATCH_LOCK = threading.Lock()


def _scratch() -> str:
    """A folder State Lens owns for unpacked RocksDB snapshots (removed at exit; never the checkpoint)."""
    with _SCRATCH_LOCK:
        if not _SCRATCH:
            _SCRATCH.append(tempfile.mkdtemp(prefix="statelens-rocksdb-"))
            atexit.register(shutil.rmtree, _SCRATCH[0], True)
        return _SCRATCH[0]


def rocksdb_snapshot(part: PartitionFiles, name: str, version: int) -> tuple[Records, dict[str, int]]:
    """Every key and value of a RocksDB snapshot (``N.zip`` plus its SST files), and its column
    family ids (checkpoint metadata ``columnFamilyMapping``)."""
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
        pairs = _rocksdb_pairs(dest, rel)
    finally:
        shutil.rmtree(dest, ignore_errors=True)
    mapping = {str(k): int(v) for k, v in (meta.get("columnFamilyMapping") or {}).items()}
    return from_pairs(pairs, version), mapping


def _rocksdb_pairs(folder: str, rel: str) -> list[tuple[bytes, bytes]]:
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
            return cast(list[tuple[bytes, bytes]], list(db.items()))  # raw mode: bytes keys and values
        finally:
            db.close()
    except NativeUnsupported:
        raise
    except Exception as e:
        raise StateReadError(f"RocksDB could not open the snapshot {rel}: {e}") from e


@dataclass
class RocksPartition:
    """One RocksDB store partition: its files and, for checkpoint format v2, the unique id of
    each version (from the commit log)."""

    part: PartitionFiles
    ids: dict[int, str]  # version -> unique id (checkpoint format v2)
    v2: bool

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

    def state(self, version: int) -> list[Records]:
        """The snapshot and changelogs that make up ``version``, oldest first."""
        if version <= 0:
            return []
        uid = self._uid(version)
        zip_name = self.part.name("zip", version, uid)
        if zip_name:
            return [rocksdb_snapshot(self.part, zip_name, version)[0]]
        if not self.part.files["changelog"]:
            self.part.need("zip", version, uid)  # no changelog checkpointing: only the zip of the version
        name = self.part.need("changelog", version, uid)
        last, lineage = _changelog(self.part, name, version)
        chain = self._chain(version, lineage)
        out: list[Records] = []
        for v, u, kind in chain:
            n = self.part.need(kind, v, u)
            out.append(rocksdb_snapshot(self.part, n, v)[0] if kind == "zip" else _changelog(self.part, n, v)[0])
        return [*out, last]

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
        parts = []
        for v in range(start, end + 1):
            name = self.part.need("changelog", v, self._uid(v))
            parts.append(_changelog(self.part, name, v)[0])
        return concat(parts)


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
