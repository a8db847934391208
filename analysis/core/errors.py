"""The one error hierarchy of State Lens.

Everything that can go wrong with a user's input (a path, a checkpoint, an operator, a
batch, a SQL query) or with the engine (Java, Spark) is raised as a ``StateLensError``
carrying a short ``title`` and a ``message`` that says what was wrong and what to do.
Spark and DuckDB exceptions are wrapped into it at the ``spark_io`` boundary; the app
shows it with ``st.error`` in one place, the CLI prints it as one line and exits 2.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

# Who asked: the Python API ("python": ``row_budget=N``) or the CLI and the app ("cli": ``--row-budget N``).
# A message naming a parameter names it as the asker wrote it (``option``); the CLI and the app say who they are.
DOORS = ("python", "cli")
_DOOR: contextvars.ContextVar[str] = contextvars.ContextVar("statelens_door", default="python")


@contextlib.contextmanager
def speaking_as(door: str) -> Iterator[None]:
    """Inside the block, messages name parameters as ``door`` does (``python`` or ``cli``)."""
    if door not in DOORS:
        raise ValueError(f"unknown door {door!r}")
    token = _DOOR.set(door)
    try:
        yield
    finally:
        _DOOR.reset(token)


def from_cli() -> bool:
    """Whether the question came through the CLI (or the app), not the Python API."""
    return _DOOR.get() == "cli"


def option(flag: str, value: str = "", python: str | None = None, page: str = "") -> str:
    """A parameter as whoever asked names it: the CLI's ``flag`` with ``value`` (``--row-budget N``) and,
    where the app has it, ``page`` (``SQL page: Loading``); or the API's keyword (``row_budget=N``,
    ``python``: the value as Python writes it, default ``value``)."""
    if from_cli():
        return " ".join(x for x in (flag, value) if x) + (f"; {page}" if page else "")
    keyword = flag.lstrip("-").replace("-", "_")
    shown = value if python is None else python
    return f"{keyword}={shown}" if shown else keyword


class StateLensError(Exception):
    title = "Error"
    refusal = False  # something the asker may not do (written as refused in a shared server's audit log)

    def __init__(self, message: str, *, title: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if title is not None:
            self.title = title

    def __str__(self) -> str:
        return f"{self.title}: {self.message}"

    def _render_traceback_(self) -> list[str]:
        """What IPython and Jupyter show for it: the one line the CLI prints, not a traceback through
        State Lens's modules (a bug, any other exception, keeps its traceback)."""
        return [f"{type(self).__name__}: {self}"]


class CheckpointNotFound(StateLensError):
    title = "Checkpoint not found"


class NotACheckpoint(StateLensError):
    title = "Not a checkpoint"


class CorruptCheckpoint(StateLensError):
    title = "Corrupt checkpoint file"


class CheckpointUnreadable(StateLensError):
    title = "Checkpoint cannot be read"
    folder = ""  # the folder or file, relative to the checkpoint

    @classmethod
    def of(cls, rel: str, error: OSError) -> CheckpointUnreadable:
        why = "permission denied" if isinstance(error, PermissionError) else (error.strerror or str(error)).lower()
        err = cls(
            f"{rel or 'The checkpoint folder'} cannot be read ({why}): give the user State Lens runs as read access "
            "to the checkpoint and every folder in it (ls -l shows who may read them)."
        )
        err.folder = rel
        return err


class StorageError(StateLensError):
    """Object storage refused or failed a read: credentials, a missing bucket, a server that does
    not answer. The message names the URI and what to set."""

    title = "Storage cannot be read"


class NoState(StateLensError):
    title = "No state in this checkpoint"


class UnknownOperator(StateLensError):
    title = "Unknown operator"


class UnknownStore(StateLensError):
    title = "Unknown state store"


class BatchOutOfRange(StateLensError):
    title = "Batch not available"


class SparkUnavailable(StateLensError):
    title = "Spark is not available"


class StateReadError(StateLensError):
    title = "Could not read the state"


class SqlError(StateLensError):
    title = "SQL error"


class SqlRefused(SqlError):
    """A statement the locked-down SQL gateway does not run (file access, ATTACH, settings ...)."""

    title = "SQL not allowed"
    refusal = True


class InvalidInput(StateLensError):
    title = "Invalid input"


class ExportError(StateLensError):
    title = "Export failed"


class RowBudgetExceeded(StateLensError):
    title = "Too many rows to load"


class NotAllowed(StateLensError):
    title = "Checkpoint not allowed"
    refusal = True


class ProgressNotFound(StateLensError):
    title = "No progress for this query"


class ProgressReadError(StateLensError):
    title = "Could not read the progress"


class NativeUnsupported(StateLensError):
    """A state file or type the native reader does not decode: with ``--engine auto`` the read goes
    to Spark instead; with ``--engine native`` this is the answer (what, where)."""

    title = "Not readable without Spark"
