"""In which batch a late record arrived: the input files each batch read, searched for it.

The record of a key with a given event time is found in the files each batch read
(``spark_io.gather.inputs``): a record holding the key and a value equal to the event time. That batch is
the one that dropped it, when the record was late (``analysis.lateness``). Files that are gone,
remote, outside the allowed roots or of another format are named, never guessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from statelens.analysis.core.model import CheckpointInfo, default_operator, operator_of
from statelens.analysis.inputs.records import Arrival, ArrivalSearch, holds_time
from statelens.spark_io.runtime.engine_choice import reads_natively

if TYPE_CHECKING:  # the progress module is read only when an event log was given
    from statelens.analysis.runs.progress import ProgressLog


def arrivals_for(
    info: CheckpointInfo, keys: list[str], operator_id: int | None, event_time_ms: int | None, progress: ProgressLog | None
) -> ArrivalSearch | None:
    """The search, where it can tell which batch dropped a late record: an event time is given and
    the progress shows the operator dropping rows once that time was late (a checkpoint this process reads)."""
    if event_time_ms is None or progress is None or not reads_natively(info.path):
        return None
    from statelens.analysis.runs.progress import lateness

    op = default_operator(info) if operator_id is None else operator_of(info, operator_id)
    if not lateness(event_time_ms, info, op.operator_id, progress).drops:
        return None
    return find_arrivals(info, keys, event_time_ms)


def find_arrivals(info: CheckpointInfo, keys: list[str], event_time_ms: int) -> ArrivalSearch:
    """Per key, the batches (and files) whose input holds the key's record with this event time
    (``spark_io.gather.inputs``: the files each batch read, any column holding the key)."""
    from statelens.spark_io.gather.inputs import search_inputs

    found = search_inputs(info, keys, [])
    search = ArrivalSearch(found={k: [] for k in keys}, seen={k: [] for k in keys}, searched=found.files_searched)
    search.unsearched = set(found.unsearched)
    for r in found.records:
        if r.batch_id is None:
            continue
        arrival = Arrival(r.batch_id, r.source, r.file_name)
        search.seen[r.key].append(arrival)
        if holds_time(list(r.values.values()), event_time_ms):
            search.found[r.key].append(arrival)
    return search
