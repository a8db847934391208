"""Read moved checkpoints without writing into them.

transformWithState's operator metadata (``state/<op>/_metadata/v2/<batch>``) records the
absolute paths of its state schema files. Spark's reader follows them, so a checkpoint
copied elsewhere (a production checkpoint on a laptop) fails with FileNotFoundException.
``read_location`` gives Spark an overlay instead: a folder in State Lens's scratch space
with links to every file of the checkpoint, except the v2 metadata files, which are copies
whose schema paths point at the checkpoint's own ``_stateSchema`` files. The checkpoint
itself is never touched.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from pathlib import Path

from statelens.spark_io.runtime import session
from statelens.spark_io.storage.locations import is_local, local_path

_LOCK = threading.Lock()
_CACHE: dict[str, tuple[tuple[tuple[str, float], ...], str]] = {}


def _v2_metadata(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("state/*/_metadata/v2/*") if p.is_file() and not p.name.startswith("."))


_SCHEMA_PATH = re.compile(r"^(?:file:)?(/.*?)(/state/\d+/_stateSchema/.*)$")


def _rewrite(text: str, root: Path) -> tuple[str, bool]:
    """The metadata file's text with every recorded schema path moved under ``root``."""
    lines = text.split("\n")
    changed = False
    out = []
    for line in lines:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            out.append(line)
            continue
        stores = entry.get("stateStoreInfo") if isinstance(entry, dict) else None
        for store in stores if isinstance(stores, list) else []:
            if not isinstance(store, dict) or not isinstance(store.get("stateSchemaFilePaths"), list):
                continue
            paths = []
            for p in store["stateSchemaFilePaths"]:
                m = _SCHEMA_PATH.match(p) if isinstance(p, str) else None
                if m and Path(m.group(1)) != root:
                    p = f"file:{root}{m.group(2)}"
                    changed = True
                paths.append(p)
            store["stateSchemaFilePaths"] = paths
        if changed:
            line = json.dumps(entry, separators=(",", ":"))
        out.append(line)
    return "\n".join(out), changed


def needs_overlay(root: Path) -> bool:
    return any(_rewrite(p.read_text(errors="replace"), root)[1] for p in _v2_metadata(root))


def _build(root: Path, dest: Path) -> None:
    """Links to the checkpoint's entries; state/<op>/_metadata/v2 files as rewritten copies."""
    import tempfile  # here and hashlib below: every question imports this module, few build an overlay

    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    for entry in root.iterdir():
        if entry.name != "state":
            os.symlink(entry, tmp / entry.name)
    for op in (root / "state").iterdir() if (root / "state").is_dir() else []:
        (tmp / "state" / op.name).mkdir(parents=True)
        for entry in op.iterdir():
            if entry.name != "_metadata":
                os.symlink(entry, tmp / "state" / op.name / entry.name)
        meta = op / "_metadata"
        if not meta.is_dir():
            continue
        # an empty v2 folder where the operator has none (a v1 operator beside a transformWithState)
        # makes Spark look for v2 metadata that is not there
        (tmp / "state" / op.name / "_metadata" / ("v2" if (meta / "v2").is_dir() else "")).mkdir(parents=True, exist_ok=True)
        for entry in meta.iterdir():
            if entry.name != "v2":
                os.symlink(entry, tmp / "state" / op.name / "_metadata" / entry.name)
        for f in (meta / "v2").iterdir() if (meta / "v2").is_dir() else []:
            target = tmp / "state" / op.name / "_metadata" / "v2" / f.name
            if f.name.startswith(".") and f.name.endswith(".crc"):
                continue  # the copies' checksums differ: Hadoop reads files without .crc as they are
            target.write_text(_rewrite(f.read_text(errors="replace"), root)[0])
    if dest.exists():
        shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)


def read_location(path: str) -> str:
    """Where Spark should read the checkpoint ``path`` from: itself, or an overlay when its
    transformWithState metadata points at schema files elsewhere. Cached until those files change."""
    if not is_local(path):
        return path
    root = Path(local_path(path)).resolve()
    metas = _v2_metadata(root)
    if not metas:
        return path
    stamp = tuple((str(p), p.stat().st_mtime) for p in metas)
    with _LOCK:
        cached = _CACHE.get(str(root))
        if cached and cached[0] == stamp:
            return cached[1]
        location = path
        if needs_overlay(root):
            import hashlib

            digest = hashlib.sha1(f"{root}{stamp}".encode()).hexdigest()[:16]
            dest = Path(session.scratch_dir()) / "overlays" / digest
            dest.parent.mkdir(parents=True, exist_ok=True)
            if not dest.exists():
                _build(root, dest)
            location = str(dest)
        _CACHE[str(root)] = (stamp, location)
        return location
