"""A local folder or file (a plain path or ``file:`` URI). Every file and folder goes through the gate
as it is opened (``gate.py``): where bounds are in effect, what the descriptor really holds must
lie inside them, and a link in a listing that leads outside them is skipped. State Lens's own
folders (``own``: a preflight's scratch copy) are read without it."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from statelens.spark_io.storage import gate
from statelens.spark_io.storage.base import Entry, Storage, join


class _Own:
    """The gate's calls for State Lens's own folders: nothing bounds them."""

    @staticmethod
    def stat(path: str) -> os.stat_result:
        return os.stat(path)

    @staticmethod
    def real_dir(path: str) -> tuple[int, str | None]:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), None

    @staticmethod
    def admitted_entry(folder_real: str | None, entry: os.DirEntry[str], shown: str) -> bool:
        return True

    @staticmethod
    def open_file(path: str) -> int:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)

    @staticmethod
    def real_file(path: str) -> str:
        return path


class LocalStorage(Storage):
    remote = False

    def __init__(self, root: str | Path, uri: str | None = None, own: bool = False) -> None:
        self.root = Path(root)
        self.uri = uri or str(root)
        self.own = own
        self._gate: Any = _Own if own else gate

    def path(self, rel: str) -> Path:
        return self.root / rel if rel else self.root

    def child(self, rel: str) -> LocalStorage:
        return LocalStorage(self.path(rel), self.where(rel), self.own)

    def stamp(self, rel: str) -> int:
        try:
            return self._gate.stat(str(self.path(rel))).st_mtime_ns  # a folder's time changes when a file comes or goes
        except OSError:
            return 0

    def info(self, rel: str) -> Entry | None:
        try:
            st = self._gate.stat(str(self.path(rel)))
        except (FileNotFoundError, NotADirectoryError):
            return None
        return Entry(rel, stat.S_ISDIR(st.st_mode), st.st_size, st.st_mtime_ns)

    def _entries(self, rel: str) -> tuple[list[os.DirEntry[str]], str]:
        """The folder's entries a listing shows (links leading outside the bounds skipped), and its real path."""
        fd, real = self._gate.real_dir(str(self.path(rel)))
        try:
            with os.scandir(fd) as it:
                found = list(it)
        finally:
            os.close(fd)
        where = real or os.path.abspath(self.path(rel))
        return [e for e in found if self._gate.admitted_entry(real, e, self.where(join(rel, e.name)))], where

    def listdir(self, rel: str) -> list[Entry]:
        try:
            found, where = self._entries(rel)
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for e in found:
            try:
                st = os.stat(os.path.join(where, e.name))
            except FileNotFoundError:
                continue  # removed while listing (a running query's cleanup)
            out.append(Entry(join(rel, e.name), stat.S_ISDIR(st.st_mode), st.st_size, st.st_mtime_ns))
        return sorted(out, key=lambda x: x.path)

    def walk(self, rel: str, unreadable: list[str] | None = None) -> list[Entry]:
        """Every file below ``rel``; folders reached through links are not descended into (as
        ``os.walk`` does), links leading outside the bounds are skipped."""
        out: list[Entry] = []
        if not self.path(rel).is_dir():
            return out
        stack = [rel]
        while stack:
            here = stack.pop()
            try:
                found, where = self._entries(here)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError:
                if unreadable is None:
                    raise
                unreadable.append(here or ".")
                continue
            for e in found:
                path = join(here, e.name)
                if not e.is_symlink() and e.is_dir(follow_symlinks=False):
                    stack.append(path)
                    continue
                try:
                    st = os.stat(os.path.join(where, e.name))
                except OSError:
                    continue  # vanished while listing
                if not stat.S_ISDIR(st.st_mode):
                    out.append(Entry(path, False, st.st_size, st.st_mtime_ns))
        return sorted(out, key=lambda x: x.path)

    def read(self, rel: str, entry: Entry | None = None) -> bytes:
        with os.fdopen(self._gate.open_file(str(self.path(rel))), "rb") as f:
            return f.read()

    def open(self, rel: str, entry: Entry | None = None) -> BinaryIO:
        return os.fdopen(self._gate.open_file(str(self.path(rel))), "rb")

    def local_file(self, rel: str, entry: Entry | None = None) -> str:
        return self._gate.real_file(str(self.path(rel)))
