"""Why-missing on a checkpoint, gathered: the state the chosen engine reads (``readers.access``),
the late arrivals in the input files, the event log's plan and progress, handed to
``analysis.diagnose.why_missing`` (one operator) or ``gather.fate`` (the whole query).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from statelens.analysis.core import key_columns
from statelens.analysis.core.errors import InvalidInput, StateLensError, option
from statelens.analysis.core.model import CheckpointInfo, lookup_sources, operator_of, resolve_batch
from statelens.analysis.core.question import KeyQuestion
from statelens.analysis.core.state_access import StateAccess
from statelens.analysis.inputs.records import InputSearch
from statelens.analysis.verdicts import diagnose
from statelens.analysis.verdicts.diagnose import WhyMissingReport, ordered_key_fields
from statelens.spark_io.gather.arrivals import arrivals_for
from statelens.spark_io.logs.checkpoint import read_checkpoint
from statelens.spark_io.readers.access import state_access
from statelens.spark_io.runtime.engine_choice import reads_natively
from statelens.spark_io.storage import open_storage
from statelens.spark_io.storage.gate import check_allowed

if TYPE_CHECKING:  # (the progress module, with the plan's parser, is read only with an event log)
    from statelens.analysis.fate.answer import QueryAnswer
    from statelens.analysis.runs.progress import ProgressLog


def key_fields_of(info: CheckpointInfo, operator_id: int) -> list[str]:
    """The key fields a user can match for an operator, the default one first."""
    return list(key_field_labels(info, operator_id, columns=False))


def key_field_labels(
    info: CheckpointInfo, operator_id: int, access: StateAccess | None = None, columns: bool = True
) -> dict[str, str]:
    """``key_fields_of`` with how each reads: a join's ``field0`` as ``field0 (order_id)``;
    ``access``: the state the questions after will read (what it reads for this is kept);
    ``columns=False``: the fields only (no read of rows: through Spark that is a job per side)."""
    op = operator_of(info, operator_id)
    access, batch = access or state_access(info), resolve_batch(info, None)
    sources = lookup_sources(op)
    fields = ordered_key_fields(access.key_fields(sources[0][1], batch))
    by_side = {name: access.key_columns(src, batch) for name, src in sources} if op.is_join and columns else {}
    return {f: key_columns.field_label(f, key_columns.key_column(f, by_side)) for f in fields}


def _given_folder(folder: str, what: str, flag: str) -> None:
    """A folder the user gave (``what``: input or sink; ``flag``: how they gave it): refused in one line
    when outside what may be read, missing, not a folder, or unreadable (never silently unused)."""
    check_allowed(folder, what)
    if not reads_natively(folder):
        return  # storage only Spark reads: the search says so
    given = option(flag, folder, python=repr(folder))
    holds = (
        "the file sink's folder as it is now (the one holding _spark_metadata)"
        if what == "sink"
        else "the folder the input files are in now"
    )
    try:
        found = open_storage(folder, check=False).info("")
    except (OSError, StateLensError) as e:
        raise InvalidInput(
            f"{given} cannot be read ({getattr(e, 'message', None) or getattr(e, 'strerror', None) or e}): give {holds}."
        ) from e
    if found is None:
        raise InvalidInput(f"{given} does not exist: give {holds}.")
    if not found.is_dir:
        raise InvalidInput(f"{given} is a file, not a folder: give {holds}.")


def why_missing(
    path: str,
    q: KeyQuestion,
    info: CheckpointInfo | None = None,
    access: StateAccess | None = None,
    progress: ProgressLog | None = None,
    searched: InputSearch | None = None,
) -> WhyMissingReport | QueryAnswer:
    """Why-missing on a checkpoint, read by the chosen engine. Without an operator (``q.whole_query``),
    each key is followed from the input files through every operator to the sink
    (``spark_io.gather.fate``); with one, that operator's verdict alone. ``q.event_log``: where the
    query's progress and plans are (an event log or progress JSON lines), read for the whole query,
    for an event time, a join's plan or an aggregation's output mode, unless its ``progress`` is
    given. ``access``: the state to read (kept between questions), else the engine's;
    ``searched``: the input files already searched for these keys. The input and sink folders given
    are refused up front when outside what may be read, missing or unreadable."""
    for folder, what, flag in (*((r, "input", "--input-root") for r in q.input_roots), (q.sink, "sink", "--sink")):
        if folder:
            _given_folder(folder, what, flag)
    info = info or read_checkpoint(path)
    if (
        progress is None and q.event_log
    ):  # its plan: a join's type and condition, an aggregation's output mode; its progress: late rows
        from statelens.spark_io.logs.event_logs import read_progress

        progress = read_progress(q.event_log, info)
    access = access or state_access(info)
    if q.whole_query:
        from statelens.spark_io.gather.fate import why_missing_whole

        return why_missing_whole(info, q, access, progress, searched=searched)
    arrivals = arrivals_for(info, list(q.keys), q.operator, q.event_time_ms, progress)
    return diagnose.why_missing(access, info, q, progress, arrivals)
