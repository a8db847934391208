"""A local copy of remote state files, so a second question downloads nothing.

Only files Spark writes once and never changes are kept (``.delta``, ``.snapshot``, ``.changelog``,
``.zip``, SST files, log entries, schema and checksum files: ``base.IMMUTABLE``), each under a
name made from its URI, size and modification time: a file written again
under the same name is another entry. The folder is ``STATELENS_CACHE_DIR``, else
``$XDG_CACHE_HOME/statelens/files`` (``~/.cache/statelens/files``); past ``STATELENS_CACHE_BYTES``
(default 5 GB) the least recently used files are removed. Files are written to a temporary name
and renamed, so a reader never sees half a file, whatever runs beside it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

DEFAULT_BUDGET = 5 * 1024**3


def cache_dir() -> Path:
    if os.environ.get("STATELENS_CACHE_DIR"):
        return Path(os.environ["STATELENS_CACHE_DIR"]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "statelens"


class FileCache:
    def __init__(self, folder: Path | None = None, budget: int | None = None) -> None:
        self.folder = (folder or cache_dir()) / "files"
        self.budget = budget if budget is not None else int(os.environ.get("STATELENS_CACHE_BYTES", DEFAULT_BUDGET))
        self._lock = threading.Lock()
        self._added = 0

    def path_of(self, uri: str, size: int, mtime_ns: int) -> Path:
        import hashlib  # here: every question imports this module (``cache_dir``), a local one needs no hash

        digest = hashlib.sha256(f"{uri}\0{size}\0{mtime_ns}".encode()).hexdigest()
        return self.folder / digest[:2] / digest

    def get(self, uri: str, size: int, mtime_ns: int) -> Path | None:
        p = self.path_of(uri, size, mtime_ns)
        try:
            if p.stat().st_size != size:
                return None
            os.utime(p)  # recently used
        except OSError:
            return None
        return p

    def put(self, uri: str, size: int, mtime_ns: int, data: bytes) -> Path | None:
        """The kept copy's path; None when the cache folder cannot be written (full, read-only)."""
        import tempfile  # here: as hashlib above

        p = self.path_of(uri, size, mtime_ns)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".part-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, p)
        except OSError:
            return None
        with self._lock:
            self._added += len(data)
            over = self._added > self.budget // 10
            if over:
                self._added = 0
        if over:
            self.trim()
        return p

    def trim(self) -> None:
        """Remove the least recently used files until the cache is within its budget."""
        files = []
        for sub in self.folder.glob("*/*"):
            try:
                st = sub.stat()
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, sub))
        total = sum(s for _, s, _ in files)
        for _, size, p in sorted(files):
            if total <= self.budget:
                break
            try:
                p.unlink()
                total -= size
            except OSError:
                pass


_CACHE: list[FileCache] = []


def shared() -> FileCache:
    """The process's cache (made on first use, so tests may point STATELENS_CACHE_DIR elsewhere)."""
    folder = cache_dir()
    if not _CACHE or _CACHE[0].folder != folder / "files":
        _CACHE[:] = [FileCache(folder)]
    return _CACHE[0]
