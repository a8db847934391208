"""A local folder or file (a plain path or ``file:`` URI)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from spark_io.storage.base import Entry, Storage, join


class LocalStorage(Storage):
    remote = False

    def __init__(self, root: str | Path, uri: str | None = None) -> None:
        self.root = Path(root)
        self.uri = uri or str(root)

    def path(self, rel: str) -> Path:
        return self.root / rel if rel else self.root

    def child(self, rel: str) -> LocalStorage:
        return LocalStorage(self.path(rel), self.where(rel))

    def stamp(self, rel: str) -> int:
        try:
            return os.stat(self.path(rel)).st_mtime_ns  # a folder's time changes when a file comes or goes
        except OSError:
            return 0

    def info(self, rel: str) -> Entry | None:
        try:
            st = os.stat(self.path(rel))
        except (FileNotFoundError, NotADirectoryError):
            return None
        return Entry(rel, stat.S_ISDIR(st.st_mode), st.st_size, st.st_mtime_ns)

    def listdir(self, rel: str) -> list[Entry]:
        try:
            with os.scandir(self.path(rel)) as it:
                found = list(it)
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for e in found:
            try:
                st = e.stat()
            except FileNotFoundError:
                continue  # removed while listing (a running query's cleanup)
            out.append(Entry(join(rel, e.name), stat.S_ISDIR(st.st_mode), st.st_size, st.st_mtime_ns))
        return sorted(out, key=lambda x: x.path)

    def walk(self, rel: str, unreadable: list[str] | None = None) -> list[Entry]:
        def failed(e: OSError) -> None:
            if unreadable is None:
                raise e
            unreadable.append(str(Path(e.filename).relative_to(self.root)) if e.filename else rel)

        out: list[Entry] = []
        if not self.path(rel).is_dir():
            return out
        for dirpath, dirnames, filenames in os.walk(self.path(rel), onerror=failed):
            dirnames.sort()
            rel_dir = Path(dirpath).relative_to(self.root).as_posix()
            for name in filenames:
                try:
                    st = os.stat(os.path.join(dirpath, name))
                except OSError:
                    continue  # vanished while listing
                out.append(Entry(join(rel_dir if rel_dir != "." else "", name), False, st.st_size, st.st_mtime_ns))
        return sorted(out, key=lambda x: x.path)

    def read(self, rel: str, entry: Entry | None = None) -> bytes:
        return self.path(rel).read_bytes()

    def open(self, rel: str, entry: Entry | None = None) -> BinaryIO:
        return open(self.path(rel), "rb")

    def local_file(self, rel: str, entry: Entry | None = None) -> str:
        return str(self.path(rel))
