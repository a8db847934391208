"""State Lens's own scratch space, never a user's.

* One folder per process (``process_dir``, mode 0700, removed at exit): Spark's local dir, warehouse
  and logs, overlays of moved checkpoints, RocksDB snapshots unpacked for one read.
* Inside it, one folder per user session (``session_dir``, 0700): what a question writes for one
  user: SQL spills, DuckDB's temporary files, input files copied to be searched, state written
  through Parquet, a preflight's or a rebuild's scratch copy of the checkpoint. A served app opens one per browser session (``open_session``, bound to each of
  its runs with ``bind``) and removes it when the session ends (``close_session``); a CLI or a
  notebook process is one user, with one folder.

The gate never opens any of it for a user (``gate.private``), and the SQL gateway's DuckDB opens no
file outside its own session's DuckDB folder: one session's scratch cannot be read or written from
another's.
"""

from __future__ import annotations

import atexit
import contextvars
import os
import shutil
import tempfile
import threading

from statelens.spark_io.storage import gate

_LOCK = threading.Lock()
_PROCESS: list[str] = []
_SESSION: contextvars.ContextVar[str | None] = contextvars.ContextVar("statelens_session_scratch", default=None)


def process_dir() -> str:
    """The process's scratch folder (made on first use, removed at exit)."""
    with _LOCK:
        if not _PROCESS:
            folder = tempfile.mkdtemp(prefix="statelens-")  # 0700
            gate.private(folder)
            atexit.register(shutil.rmtree, folder, True)
            _PROCESS.append(folder)
        return _PROCESS[0]


def open_session() -> str:
    """A new session's own folder (0700) inside the process's."""
    sessions = os.path.join(process_dir(), "sessions")
    os.makedirs(sessions, mode=0o700, exist_ok=True)
    return tempfile.mkdtemp(dir=sessions)


def close_session(folder: str) -> None:
    """Remove a session's folder and everything in it."""
    shutil.rmtree(folder, ignore_errors=True)


def bind(folder: str | None) -> None:
    """The session folder of this context (a run of a page) and the threads started with a copy of it."""
    _SESSION.set(folder)


def session_dir(sub: str = "") -> str:
    """The bound session's folder (a process that is one user: its own), or ``sub`` inside it, made."""
    folder = _SESSION.get() or os.path.join(process_dir(), "session")
    out = os.path.join(folder, sub) if sub else folder
    os.makedirs(out, mode=0o700, exist_ok=True)
    return out
