"""A key's fate through the whole query: each of its input records, operator by operator, to the output.

Pure: state is asked through ``StateAccess``; the records come from ``spark_io.gather.inputs`` (the files
each batch read, searched for the key). Each record is followed in plan order, from its source up
to the sink (Spark numbers stateful operators from the sink: the last is 0):

* ``walk``: what every operator shares: the path a record takes, each operator's state of a value
  (read once), the plan's filters on the way (``core.predicates``: evaluated on the record, or named
  as not evaluated), the late-row watermark Spark gave each operator per batch;
* ``stage``: what each kind's stage shares (the stages themselves: ``analysis.kinds``, one module per
  kind): what the operator did with the row and what it sent on;
* ``outcome``: what reached the output (``written``, ``partly_written``, ``written_unmatched``,
  ``waiting``, ``lost``, ``never_in_input``), the root cause of the rest (a join row that never matched
  takes its cause from the other side's records of the key), and the sentence a user reads first;
* ``key``: one key's fate; the input columns a key may be in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from statelens.analysis.fate.key import StaticLookup, failed_fate, key_fate, search_columns, sink_columns, static_lookups
    from statelens.analysis.fate.model import (
        CAUSES,
        CONDITION_NOT_MET,
        DROPPED_AS_DUPLICATE,
        DROPPED_AS_LATE,
        EMITTED,
        EMITTED_UNMATCHED,
        EVICTED_UNMATCHED,
        FILTERED,
        LOST,
        MATCHED,
        NEVER_IN_INPUT,
        NO_MATCH_IN_INPUT,
        NO_STATIC_MATCH,
        NOT_FOUND,
        OUTCOME_WRITTEN,
        OUTCOMES,
        PARTLY_WRITTEN,
        PASSED,
        REACHED,
        REACHED_STATE,
        STATE_REMOVED,
        UNKNOWN,
        WAITING,
        WAITING_FOR_WATERMARK,
        WRITTEN,
        WRITTEN_UNMATCHED,
        Cause,
        KeyFate,
        NearFate,
        Output,
        RecordFate,
        Step,
        Waiting,
        fmt_time,
        group_text,
    )
    from statelens.analysis.fate.walk import FateWalk, RecordFinder

# each name's module: imported on first use, so a module of this package (a kind's stage, the model)
# is imported without the walk, the outcome and the key's fate (a one-operator answer needs none of them)
_HOME: dict[str, str] = {
    "StaticLookup": "key",
    "failed_fate": "key",
    "key_fate": "key",
    "search_columns": "key",
    "sink_columns": "key",
    "static_lookups": "key",
    "CAUSES": "model",
    "CONDITION_NOT_MET": "model",
    "Cause": "model",
    "DROPPED_AS_DUPLICATE": "model",
    "DROPPED_AS_LATE": "model",
    "EMITTED": "model",
    "EMITTED_UNMATCHED": "model",
    "EVICTED_UNMATCHED": "model",
    "FILTERED": "model",
    "KeyFate": "model",
    "LOST": "model",
    "MATCHED": "model",
    "NEVER_IN_INPUT": "model",
    "NOT_FOUND": "model",
    "NO_MATCH_IN_INPUT": "model",
    "NO_STATIC_MATCH": "model",
    "NearFate": "model",
    "OUTCOMES": "model",
    "OUTCOME_WRITTEN": "model",
    "Output": "model",
    "PARTLY_WRITTEN": "model",
    "PASSED": "model",
    "REACHED": "model",
    "REACHED_STATE": "model",
    "RecordFate": "model",
    "STATE_REMOVED": "model",
    "Step": "model",
    "UNKNOWN": "model",
    "WAITING": "model",
    "WAITING_FOR_WATERMARK": "model",
    "WRITTEN": "model",
    "WRITTEN_UNMATCHED": "model",
    "Waiting": "model",
    "fmt_time": "model",
    "group_text": "model",
    "FateWalk": "walk",
    "RecordFinder": "walk",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CAUSES",
    "CONDITION_NOT_MET",
    "DROPPED_AS_DUPLICATE",
    "DROPPED_AS_LATE",
    "EMITTED",
    "EMITTED_UNMATCHED",
    "EVICTED_UNMATCHED",
    "FILTERED",
    "LOST",
    "MATCHED",
    "NEVER_IN_INPUT",
    "NOT_FOUND",
    "NO_MATCH_IN_INPUT",
    "NO_STATIC_MATCH",
    "OUTCOMES",
    "OUTCOME_WRITTEN",
    "PARTLY_WRITTEN",
    "PASSED",
    "REACHED",
    "REACHED_STATE",
    "STATE_REMOVED",
    "UNKNOWN",
    "WAITING",
    "WAITING_FOR_WATERMARK",
    "WRITTEN",
    "WRITTEN_UNMATCHED",
    "Cause",
    "FateWalk",
    "KeyFate",
    "NearFate",
    "Output",
    "RecordFate",
    "RecordFinder",
    "StaticLookup",
    "Step",
    "Waiting",
    "failed_fate",
    "fmt_time",
    "group_text",
    "key_fate",
    "search_columns",
    "sink_columns",
    "static_lookups",
]
